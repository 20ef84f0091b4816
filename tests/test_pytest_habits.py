"""What pytest users expect of the suite: failure ids that paste back, --lf / --ff, a JUnit
classname per operator, the replay command in a failure's text, skip reasons counted.

Each run is a subprocess, as a user starts one (``dmlconform run`` and plain ``pytest``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import HERE, REPO, SMALL, SPEC, dmlconform

from dmlconform.commands.run import suite_arguments
from dmlconform.runner.node_ids import SUITE_FILE, case_operator, suite_argument
from dmlconform.runner.plugin import plugin_args

CASE = "validation[MEAN_VARIANCE_NORMALIZATION1-2_1-illegal-required-members-0000]"
ACCEPTS_ALL = "test_plugin_backends:AcceptsAll"  # accepts every illegal desc: validation fails


def results(path: Path) -> dict:
    return json.loads((path / "results.json").read_text())


def test_suite_argument_points_pasted_ids_at_the_suite() -> None:
    want = f"{SUITE_FILE}::{CASE}"
    for pasted in (
        CASE,
        f"::{CASE}",
        f"test_conformance.py::{CASE}",
        f"../../x/dmlconform/suite/test_conformance.py::{CASE}",
    ):
        assert suite_argument(pasted) == want, pasted
    for other in ("tests/test_x.py::test_y", "tests", "-x", "numeric", "mine.py::numeric[x]"):
        assert suite_argument(other) == other
    # the value of an option stays what it is
    assert suite_arguments(["-k", CASE, f"::{CASE}"]) == ["-k", CASE, want]
    assert case_operator(want) == "MEAN_VARIANCE_NORMALIZATION1" and case_operator("t.py::test_x") is None


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The run whose failures are pasted back (its report, its console), made once for all four
    ways of pasting."""
    where = tmp_path_factory.mktemp("whole")
    first = dmlconform("run", "--backend", ACCEPTS_ALL, *SMALL, "--report", "all", cwd=where)
    assert first.returncode == 1
    return where / "all", first.stdout


@pytest.mark.parametrize(
    "pasted",
    [f"::{CASE}", f"test_conformance.py::{CASE}", CASE, "<printed>"],
    ids=["colons", "results-nodeid", "bare", "console"],
)
def test_a_failure_id_pastes_back(tmp_path: Path, whole_run: tuple[Path, str], pasted: str) -> None:
    report, stdout = whole_run
    if pasted == "<printed>":  # as the console's "FAILED <id>" line shows it
        line = next(x for x in stdout.splitlines() if x.startswith("FAILED ") and CASE in x)
        pasted = line.split()[1]
        assert pasted == CASE, line  # the bare id, not the suite file's path inside the package
    again = dmlconform("run", "--backend", ACCEPTS_ALL, *SMALL, "--report", "one", "--", pasted, cwd=tmp_path)
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
    one = results(tmp_path / "one")
    assert [c["id"] for c in one["cases"]] == [CASE]
    assert one["status"] == "narrowed" and one["collected"] == results(report)["collected"]


def test_last_failed_and_failed_first_under_dmlconform_run(tmp_path: Path) -> None:
    first = dmlconform("run", "--backend", ACCEPTS_ALL, *SMALL, "--report", "r1", cwd=tmp_path)
    failed = {c["id"] for c in results(tmp_path / "r1")["cases"] if c["outcome"] == "failed"}
    assert first.returncode == 1 and 0 < len(failed) < len(results(tmp_path / "r1")["cases"])
    lf = dmlconform("run", "--backend", ACCEPTS_ALL, *SMALL, "--report", "r2", "--", "--lf", cwd=tmp_path)
    assert lf.returncode == 1, lf.stdout[-2000:] + lf.stderr[-2000:]
    assert {c["id"] for c in results(tmp_path / "r2")["cases"]} == failed
    assert results(tmp_path / "r2")["status"] == "narrowed"
    ff = dmlconform(
        "run", "--backend", ACCEPTS_ALL, *SMALL, "--report", "r3", "--", "--ff", "-x", cwd=tmp_path
    )
    assert [c["id"] for c in results(tmp_path / "r3")["cases"]][0] in failed
    assert ff.returncode == 1


def test_last_failed_under_plain_pytest(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), HERE, os.environ.get("PYTHONPATH", "")])}
    args = [
        sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:benchmark", "-p", "no:hypothesispytest",
        "--dml-backend", ACCEPTS_ALL,
        "--dml-operators", "MEAN_VARIANCE_NORMALIZATION1", "--dml-feature-level", "2_1", "--dml-cases", "2",
        "--dml-tier", "smoke", "-q",
    ]  # fmt: skip

    def pytest_run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*args, *extra], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )

    first = pytest_run("--dml-report", "r1")
    assert first.returncode == 1, first.stdout[-2000:]
    failed = {c["id"] for c in results(tmp_path / "r1")["cases"] if c["outcome"] == "failed"}
    printed = {x.split()[1] for x in first.stdout.splitlines() if x.startswith("FAILED ")}
    assert printed == failed, first.stdout[-2000:]  # bare ids under plain pytest too
    lf = pytest_run("--dml-report", "r2", "--lf")
    assert {c["id"] for c in results(tmp_path / "r2")["cases"]} == failed, lf.stdout[-2000:]
    one = pytest_run("--dml-report", "r3", f"::{CASE}")
    assert [c["id"] for c in results(tmp_path / "r3")["cases"]] == [CASE], one.stdout[-2000:]


def test_junit_classname_per_operator_and_replay_in_the_failure_text(tmp_path: Path) -> None:
    args = ["--operators", "MEAN_VARIANCE_NORMALIZATION1", "BATCH_NORMALIZATION", *SMALL[2:]]
    proc = dmlconform(
        "run", "--backend", "test_plugin_backends:WrongValues", *args, "--report", "out", cwd=tmp_path
    )
    assert proc.returncode == 1
    root = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    cases = list(root.iter("testcase"))
    assert {tc.get("classname") for tc in cases} == {
        "dmlconform.MEAN_VARIANCE_NORMALIZATION1",
        "dmlconform.BATCH_NORMALIZATION",
    }
    for tc in cases:
        assert (
            tc.get("classname")
            == "dmlconform." + tc.get("name")[tc.get("name").index("[") + 1 :].split("-")[0]
        )
    by_id = {c["id"]: c for c in results(tmp_path / "out")["cases"]}
    failures = [(tc.get("name"), f) for tc in cases for f in tc.findall("failure")]
    assert failures
    for name, failure in failures:
        record = by_id[name]
        assert f"replay: {record['replay']}" in (failure.text or "")
        assert "replay:" not in record["message"]  # results.json keeps the verdict alone
    assert "replay: dmlconform replay" in proc.stdout


def test_failure_text_without_a_report_says_how_to_rerun_the_case(tmp_path: Path) -> None:
    from dmlconform.report.record import CaseRecord
    from dmlconform.runner.cases import Selection
    from dmlconform.runner.plugin import failure_text
    from dmlconform.runner.settings import Settings
    from dmlconform.tolerance.options import ToleranceOptions

    settings = Settings(
        backend="b", options={}, selection=Selection(level=SPEC.level("6_4")), report_dir=None,
        expect_file=None, isolate=False, timeout=60, command="dmlconform run --backend b -- -k FLOAT16",
        tolerance=ToleranceOptions(),
    )  # fmt: skip
    text = failure_text(CaseRecord(CASE, message="OutputTensor: wrong"), settings, CASE)
    assert text == f"OutputTensor: wrong\nre-run alone: dmlconform run --backend b -- '{CASE}'"
    settings.command = "pytest --dml-backend b"
    assert failure_text(CaseRecord(CASE, message="x"), settings, CASE).endswith(
        f"pytest --dml-backend b '::{CASE}'"
    )


def test_skip_reasons_counted_in_console_and_summary(tmp_path: Path) -> None:
    args = [
        *SMALL,
        "--feature-level",
        "6_4",
        "--operators",
        "MEAN_VARIANCE_NORMALIZATION1",
        "BATCH_NORMALIZATION",
    ]
    proc = dmlconform("run", "--backend", "partial_backends:Mvn1Only", *args, "--report", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = results(tmp_path / "out")
    skipped = sum(1 for c in data["cases"] if c["outcome"] == "skipped")
    assert skipped > 0
    reason = "backend does not support this case: BATCH_NORMALIZATION is not implemented"
    assert f"dmlconform: {skipped} skipped, by reason:" in proc.stdout
    assert f"{skipped:6d}  {reason}" in proc.stdout
    md = (tmp_path / "out" / "summary.md").read_text()
    assert f"**{skipped} skipped**, by reason:" in md and f"| {skipped} | {reason} |" in md
