"""The pytest plugin: ids, options, robustness against misbehaving backends, expectations.

Runs are in-process (pytester) with a handful of cases: MEAN_VARIANCE_NORMALIZATION1 at its
introduction level 2_1, so one level and two data types; the test backends in
``test_plugin_backends`` misbehave on FLOAT16 only, so every run also shows the FLOAT32 cases
still passing after the bad ones.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import HERE, SPEC, run_suite

from dmlconform.runner.cases import Selection, collect
from dmlconform.runner.checks import run_case
from dmlconform.runner.guard import ProcessGuard, ThreadGuard
from dmlconform.tolerance.options import NO_OPTIONS

pytest_plugins = ["pytester"]

SMALL = [
    "--dml-operators=MEAN_VARIANCE_NORMALIZATION1",
    "--dml-feature-level=2_1",
    "--dml-cases=2",
    "--dml-tier=smoke",  # the same seeded cases as the default tier here, without its size cases
]
NUMERIC = [*SMALL, "--dml-kinds=numeric"]


def outcomes(report_dir: Path) -> dict[str, str]:
    data = json.loads((report_dir / "results.json").read_text())
    return {c["id"]: c["outcome"] for c in data["cases"]}


def records(report_dir: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((report_dir / "results.json").read_text())
    return {c["id"]: c for c in data["cases"]}


def test_no_backend_no_items(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine="def test_ok():\n    pass\n")
    result = run_suite(pytester)
    result.assert_outcomes(passed=1)
    assert "numeric[" not in result.stdout.str()


def test_ids_stable_and_readable(pytester: pytest.Pytester) -> None:
    args = ["--collect-only", "-q", "--dml-backend=reference", *SMALL]
    first = run_suite(pytester, *args).stdout.lines
    second = run_suite(pytester, *args).stdout.lines
    ids = [line.split("::")[-1] for line in first if "::" in line]
    assert ids and ids == [line.split("::")[-1] for line in second if "::" in line]
    assert "numeric[MEAN_VARIANCE_NORMALIZATION1-2_1-FLOAT16-0001]" in ids
    pattern = re.compile(
        r"(numeric\[[A-Z0-9_]+-\d_\d-FLOAT(16|32)-\d{4}\]"
        r"|validation\[[A-Z0-9_]+-\d_\d-(legal|illegal-[a-z0-9-]+)-\d{4}\]"
        r"|metamorphic\[[A-Z0-9_]+-\d_\d-FLOAT(16|32)-[a-z0-9-]+-\d{4}\])"
    )
    assert all(pattern.fullmatch(i) for i in ids), [i for i in ids if not pattern.fullmatch(i)]
    kinds = {i.split("[")[0] for i in ids}
    assert kinds == {"numeric", "validation", "metamorphic"}
    assert any(
        i.startswith("validation[MEAN_VARIANCE_NORMALIZATION1-2_1-illegal-scale-bias-paired-") for i in ids
    )


def test_backend_without_check_gets_no_validation_items(pytester: pytest.Pytester) -> None:
    result = run_suite(pytester, "--collect-only", "-q", "--dml-backend=test_plugin_backends:NoCheck", *SMALL)
    text = result.stdout.str()
    assert "numeric[" in text and "validation[" not in text


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        ("Raises", "backend execute() raised RuntimeError: kaboom in the fp16 kernel"),
        ("WrongShape", "OutputTensor: backend returned shape ["),
        ("WrongDtype", "OutputTensor: backend returned dtype float64, expected float16 (FLOAT16)"),
        ("MissingMember", "backend returned no OutputTensor"),
        ("WrongValues", "> budget "),
    ],
)
def test_misbehaving_backend_fails_only_its_cases(
    pytester: pytest.Pytester, tmp_path: Path, backend: str, message: str
) -> None:
    report = tmp_path / "r"
    result = run_suite(
        pytester, f"--dml-backend=test_plugin_backends:{backend}", f"--dml-report={report}", *NUMERIC
    )
    result.assert_outcomes(passed=2, failed=2)
    recs = records(report)
    for case_id, rec in recs.items():
        if "FLOAT16" in case_id:
            assert rec["outcome"] == "failed" and message in rec["message"], rec["message"]
        else:
            assert rec["outcome"] == "passed" and rec["message"] is None
    assert "Traceback" not in result.stdout.str()


def backends_line(text: str) -> int:
    """The line of tests/test_plugin_backends.py that holds ``text``: read from the file, not from
    the traceback under test."""
    lines = (Path(HERE) / "test_plugin_backends.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _fp16_case() -> Any:
    cases = collect(
        SPEC, Selection(level=SPEC.level("2_1"), operators=("MEAN_VARIANCE_NORMALIZATION1",), cases=1)
    )
    return next(c for c in cases if c.kind == "numeric" and c.data_type == "FLOAT16")


@pytest.mark.parametrize("guard", ["thread", "process"])
def test_a_backend_raising_keyboard_interrupt_fails_its_case_and_the_run_goes_on(guard: str) -> None:
    """A signal raises KeyboardInterrupt in the main thread only, so one raised by the backend
    (on the guard's thread, or in the worker process) is its own exception: the case fails
    naming it, where it used to stop the whole run as an "interrupted (Ctrl-C / SIGINT)" one."""
    from test_plugin_backends import RaisesKeyboardInterrupt

    if guard == "thread":
        g: Any = ThreadGuard(RaisesKeyboardInterrupt(), 60)
    else:
        g = ProcessGuard("test_plugin_backends:RaisesKeyboardInterrupt", {}, 60)
    try:
        result = run_case(_fp16_case(), g, SPEC, NO_OPTIONS)
    finally:
        g.close()
    assert result.status == "failed"
    line = backends_line("raise KeyboardInterrupt")
    assert result.message == (
        f"backend execute() raised KeyboardInterrupt (at test_plugin_backends.py:{line} in misbehave)"
    ), result.message


@pytest.mark.parametrize("guard", ["thread", "process"])
@pytest.mark.parametrize(
    ("backend", "raising", "where", "exception"),
    [
        ("Raises", 'raise RuntimeError("kaboom', "misbehave", "RuntimeError: kaboom in the fp16 kernel"),
        # raised inside numpy: named at the backend's own line that called it
        (
            "RaisesInNumpy",
            "np.reshape(out, out.size + 1)",
            "_reshape_to_nothing",
            "ValueError: cannot reshape",
        ),
    ],
)
def test_a_raising_backend_is_named_at_its_line(
    guard: str, backend: str, raising: str, where: str, exception: str
) -> None:
    """The message names the file, line and function; the traceback comes along in full, from a
    worker process as from a thread."""
    from test_plugin_backends import Raises, RaisesInNumpy

    line = backends_line(raising)
    if guard == "thread":
        g: Any = ThreadGuard({"Raises": Raises, "RaisesInNumpy": RaisesInNumpy}[backend](), 60)
    else:
        g = ProcessGuard(f"test_plugin_backends:{backend}", {}, 60)
    try:
        result = run_case(_fp16_case(), g, SPEC, NO_OPTIONS)
    finally:
        g.close()
    assert result.status == "failed"
    assert result.message.startswith(f"backend execute() raised {exception}"), result.message
    assert result.message.endswith(f" (at test_plugin_backends.py:{line} in {where})"), result.message
    tb = result.traceback or ""
    assert tb.startswith("Traceback (most recent call last):") and exception in tb.splitlines()[-1]
    assert f'test_plugin_backends.py", line {line}, in {where}' in tb
    assert (
        f'test_plugin_backends.py", line {backends_line("self.misbehave(desc, outputs)")}, in execute' in tb
    )
    assert "guard.py" not in tb and "worker.py" not in tb  # the harness's frames are left out
    if backend == "RaisesInNumpy":  # the frames below the backend's own are in the traceback
        assert re.search(r'numpy.*\.py", line \d+, in', tb), tb


def test_hang_times_out_and_run_continues(pytester: pytest.Pytester, tmp_path: Path) -> None:
    report = tmp_path / "r"
    result = run_suite(
        pytester,
        "--dml-backend=test_plugin_backends:Hangs",
        "--dml-timeout=1",
        f"--dml-report={report}",
        *NUMERIC,
    )
    result.assert_outcomes(passed=2, failed=2)
    for case_id, rec in records(report).items():
        if "FLOAT16" in case_id:
            assert "did not return within 1 s (timed out" in rec["message"]
            assert "use --dml-isolate to kill hung calls" in rec["message"]  # pytest's own option


@pytest.mark.parametrize(
    ("backend", "reason"), [("Exits", "exit code 3"), ("Segfaults", "killed by signal SIGSEGV")]
)
def test_isolate_survives_crashes(
    pytester: pytest.Pytester, tmp_path: Path, backend: str, reason: str
) -> None:
    report = tmp_path / "r"
    result = run_suite(
        pytester,
        f"--dml-backend=test_plugin_backends:{backend}",
        "--dml-isolate",
        f"--dml-report={report}",
        *NUMERIC,
    )
    result.assert_outcomes(passed=2, failed=2)
    for case_id, rec in records(report).items():
        if "FLOAT16" in case_id:
            assert rec["message"] == f"backend process died during execute() ({reason})"
        else:
            assert rec["outcome"] == "passed"


def test_isolate_kills_a_hung_call(pytester: pytest.Pytester, tmp_path: Path) -> None:
    report = tmp_path / "r"
    result = run_suite(
        pytester,
        "--dml-backend=test_plugin_backends:Hangs",
        "--dml-isolate",
        # well below the 20 s the backend hangs for, and above what a fresh worker needs to
        # import and answer a FLOAT32 call on a loaded 2-core machine (1 s was not)
        "--dml-timeout=5",
        f"--dml-report={report}",
        *NUMERIC,
        "--dml-cases=1",  # one FLOAT16 case hangs (each costs the timeout), one FLOAT32 answers
    )
    result.assert_outcomes(passed=1, failed=1)
    assert any("worker process killed" in (r["message"] or "") for r in records(report).values())


def test_validation_items_catch_a_backend_that_accepts_everything(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    report = tmp_path / "r"
    run_suite(
        pytester,
        "--dml-backend=test_plugin_backends:AcceptsAll",
        "--dml-kinds=validation",
        f"--dml-report={report}",
        *SMALL,
    )
    recs = records(report).values()
    illegal = [r for r in recs if r["expected"] == "illegal"]
    legal = [r for r in recs if r["expected"] == "legal"]
    assert illegal and all(r["outcome"] == "failed" for r in illegal)
    assert legal and all(r["outcome"] == "passed" for r in legal)
    assert all(f"breaks rule {r['rule']}" in r["message"] for r in illegal)


def test_expectations_turn_failures_into_xfail_and_report_xpass(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    expect = tmp_path / "expect.txt"
    expect.write_text(
        "# known problems\n"
        "numeric[MEAN_VARIANCE_NORMALIZATION1-2_1-FLOAT16-*]  # fp16 kernel raises, bug 1\n"
        "numeric[MEAN_VARIANCE_NORMALIZATION1-2_1-FLOAT32-0000] thought broken, is not\n"
    )
    report = tmp_path / "r"
    result = run_suite(
        pytester,
        "--dml-backend=test_plugin_backends:Raises",
        f"--dml-expect={expect}",
        f"--dml-report={report}",
        *NUMERIC,
    )
    assert result.ret == 0
    result.assert_outcomes(passed=1, xfailed=2, xpassed=1)
    recs = records(report)
    assert recs["numeric[MEAN_VARIANCE_NORMALIZATION1-2_1-FLOAT32-0000]"]["outcome"] == "xpassed"
    x = recs["numeric[MEAN_VARIANCE_NORMALIZATION1-2_1-FLOAT16-0001]"]
    assert (
        x["outcome"] == "xfailed"
        and "kaboom" in x["message"]
        and x["expectation"] == "fp16 kernel raises, bug 1"
    )
    summary = json.loads((report / "results.json").read_text())["summary"]
    assert summary == {
        "total": 4,
        "passed": 1,
        "failed": 0,
        "skipped": 0,
        "xfailed": 2,
        "xpassed": 1,
        "errors": 0,
    }


def test_expectation_without_reason_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    expect = tmp_path / "expect.txt"
    expect.write_text("numeric[X-1_0-FLOAT16-0000]\n")
    result = run_suite(pytester, "--dml-backend=reference", f"--dml-expect={expect}", *NUMERIC)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "has no reason" in result.stderr.str()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dml-backend=no-such-backend"], "unknown backend 'no-such-backend'"),
        (["--dml-backend=reference", "--dml-feature-level=9_9"], "unknown feature level '9_9'"),
        (["--dml-backend=reference", "--dml-backend-option=novalue"], "is not KEY=VALUE"),
        (["--dml-backend=reference", "--dml-operators=NOPE"], "unknown operator 'NOPE'"),
    ],
)
def test_usage_errors_are_one_line(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    result = run_suite(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert message in err and "Traceback" not in err


def test_reproducer_written_for_each_failure(pytester: pytest.Pytester, tmp_path: Path) -> None:
    report = tmp_path / "r"
    run_suite(pytester, "--dml-backend=test_plugin_backends:WrongValues", f"--dml-report={report}", *NUMERIC)
    recs = records(report)
    failed = [r for r in recs.values() if r["outcome"] == "failed"]
    assert len(failed) == 2
    for r in failed:
        d = report / r["reproducer"]
        assert {p.name for p in d.iterdir()} == {"desc.yaml", "inputs.npz", "case.json"}
        assert r["replay"].startswith(f"dmlconform replay {d} --backend test_plugin_backends:WrongValues")
        assert r["errors"]["worst"]["ulp"] > r["errors"]["worst"]["budget_ulp"]
    assert all(r["reproducer"] is None for r in recs.values() if r["outcome"] == "passed")


def test_a_case_holds_no_tensors_once_it_is_done(pytester: pytest.Pytester) -> None:
    """A run keeps each case's record, not its tensors: an item that held its result (and with
    it the inputs) made a stress run's memory grow by every case's data until the end."""
    import partial_backends

    partial_backends.SEEN.clear()
    partial_backends.STILL_ALIVE.clear()
    result = run_suite(pytester, "--dml-backend=partial_backends:InputWatcher", *NUMERIC)
    assert result.ret == pytest.ExitCode.OK
    assert len(partial_backends.STILL_ALIVE) >= 4
    assert not any(partial_backends.STILL_ALIVE), partial_backends.STILL_ALIVE


BOUND = (
    "findings:\n"
    "  - id: K1\n"
    "    reason: FLOAT16 outputs a few ULP off\n"
    "    when: {data_type: FLOAT16, kind: numeric, operator: MVN1}\n"
    "    meets: {model: default, ulp_scale: 64}\n"
)


def test_a_case_within_its_findings_bound_is_a_known_finding(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    expect = tmp_path / "findings.yaml"
    expect.write_text(BOUND)
    report = tmp_path / "r"
    result = run_suite(
        pytester, "--dml-backend=test_plugin_backends:NearlyFp16", f"--dml-expect={expect}",
        f"--dml-report={report}", *NUMERIC,
    )  # fmt: skip
    recs = records(report)
    xfailed = [r for r in recs.values() if r["outcome"] == "xfailed"]
    assert result.ret == 0 and xfailed, [r["message"] for r in recs.values()]
    assert all(r["known_finding"] == "K1" and r["models"]["model=default, ulp_scale=64"] for r in xfailed)
    assert all(r["data_type"] == "FLOAT16" for r in xfailed)
    data = json.loads((report / "results.json").read_text())
    assert data["known_findings"] == {"K1": len(xfailed)}
    assert f"known findings hit: K1 ({len(xfailed)} case" in result.stdout.str()
    assert f"**K1** ({len(xfailed)} case" in (report / "summary.md").read_text()


def test_a_case_outside_its_findings_bound_fails_naming_it(pytester: pytest.Pytester, tmp_path: Path) -> None:
    expect = tmp_path / "findings.yaml"
    expect.write_text(BOUND)
    report = tmp_path / "r"
    result = run_suite(
        pytester, "--dml-backend=test_plugin_backends:WrongValues", f"--dml-expect={expect}",
        f"--dml-report={report}", *NUMERIC,
    )  # fmt: skip
    failed = [r for r in records(report).values() if r["outcome"] == "failed"]
    assert result.ret == pytest.ExitCode.TESTS_FAILED and len(failed) == 2
    assert all(
        "outside K1's bound: fails the model=default, ulp_scale=64 model too" in r["message"] for r in failed
    )
    assert all(
        r["known_finding"] is None and r["expectation"] == "FLOAT16 outputs a few ULP off" for r in failed
    )


def test_a_backends_known_findings_apply_by_default_and_not_with_the_flag(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dmlconform.runner import expect

    known = tmp_path / "known"
    known.mkdir()
    (known / "nearly.yaml").write_text(BOUND)
    monkeypatch.setattr(expect, "KNOWN_DIR", known)
    args = ["--dml-backend=test_plugin_backends:NearlyFp16", *NUMERIC]
    on = run_suite(pytester, *args, f"--dml-report={tmp_path / 'on'}")
    assert on.ret == 0 and "known findings applied (nearly.yaml: K1" in on.stdout.str()
    assert "xfailed" in set(outcomes(tmp_path / "on").values())
    off = run_suite(pytester, *args, "--dml-no-known-findings", f"--dml-report={tmp_path / 'off'}")
    assert off.ret == pytest.ExitCode.TESTS_FAILED
    assert "xfailed" not in set(outcomes(tmp_path / "off").values())
    assert "known findings applied" not in off.stdout.str()


def test_numeric_cases_record_their_accuracy_class(pytester: pytest.Pytester, tmp_path: Path) -> None:
    report = tmp_path / "r"
    result = run_suite(pytester, "--dml-backend=reference", f"--dml-report={report}", *NUMERIC)
    assert result.ret == 0
    recs = [r for r in records(report).values() if r["kind"] == "numeric"]
    # the reference rounds once: it meets the tight model, judged after the default one passed
    assert recs and all(r["models"] == {"default": True, "tight": True} for r in recs)
    assert all(r["accuracy_class"] == "tight" for r in recs)
    data = json.loads((report / "results.json").read_text())
    assert data["accuracy_classes"] == {MVN1_FULL: {"FLOAT16": "tight", "FLOAT32": "tight"}}
    assert f"| {MVN1_FULL} | tight | tight |" in (report / "summary.md").read_text()
    assert f"  {MVN1_FULL}: FLOAT16 tight, FLOAT32 tight" in result.stdout.str()  # the console
    html = (report / "index.html").read_text()
    assert 'id="class-table"' in html and '<td class="class-tight">tight</td>' in html


MVN1_FULL = "MEAN_VARIANCE_NORMALIZATION1"
