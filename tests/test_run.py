"""``dmlconform run``: exit codes, report files, results.json structure vs junit.xml, xdist.

Each run is a subprocess started from a scratch directory (not the repository), which is how a
user runs it; the repository and this directory are put on PYTHONPATH because the package need
not be installed for the project's tests.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import SMALL, dmlconform

NUMBER = {"type": "number"}
NULLABLE_STR = {"type": ["string", "null"]}
# The structure documented in docs/results-json.md, as a schema.
RESULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "schema_version", "tool", "backend", "feature_level", "seed", "cases_per_group", "operators",
        "data_types", "command", "started", "finished", "duration_s", "versions", "summary", "cases", "coverage",
        "complete", "status", "stop_reason", "exit_status", "collected", "ran", "shard", "selection", "spec_hash",
    ],
    "properties": {
        "schema_version": {"const": 1},
        "tool": {"type": "object", "required": ["name", "version"]},
        "backend": {"type": "object", "required": ["name", "options", "feature_level", "description"]},
        "feature_level": {"type": "string", "pattern": r"^\d_\d$"},
        "seed": {"type": "integer"},
        "cases_per_group": {"type": "integer"},
        "operators": {"type": "array", "items": {"type": "string"}},
        "data_types": {"type": "array", "items": {"type": "string"}},
        "command": {"type": "string"},
        "started": {"type": "string", "pattern": r"Z$"},
        "finished": {"type": "string", "pattern": r"Z$"},
        "duration_s": NUMBER,
        "complete": {"type": "boolean"},
        "status": {"enum": ["complete", "interrupted", "stopped", "incomplete", "running"]},
        "stop_reason": NULLABLE_STR,
        "exit_status": {"type": ["integer", "null"]},
        "collected": {"type": ["integer", "null"]},
        "ran": {"type": "integer"},
        "shard": {
            "oneOf": [
                {"type": "null"},
                {"type": "object", "required": ["index", "count"], "additionalProperties": {"type": "integer"}},
            ]
        },
        "selection": {"type": "object", "required": ["level", "operators", "data_types", "cases", "seed", "kinds"]},
        "spec_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "versions": {"type": "object", "required": ["python", "numpy"], "additionalProperties": {"type": "string"}},
        "summary": {
            "type": "object",
            "required": ["total", "passed", "failed", "skipped", "xfailed", "xpassed", "errors"],
            "additionalProperties": {"type": "integer"},
        },
        "cases": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "id", "nodeid", "kind", "operator", "feature_level", "data_type", "index", "outcome", "message",
                    "duration_s", "regime", "expected", "rule", "rules", "desc", "errors", "info", "reproducer", "replay",
                ],
                "properties": {
                    "kind": {"enum": ["numeric", "validation", "metamorphic"]},
                    "outcome": {"enum": ["passed", "failed", "skipped", "xfailed", "xpassed", "error"]},
                    "message": NULLABLE_STR,
                    "index": {"type": "integer"},
                    "duration_s": NUMBER,
                    "regime": NULLABLE_STR,
                    "expected": {"enum": ["legal", "illegal", None]},
                    "rule": NULLABLE_STR,
                    "rules": {"type": "array", "items": {"type": "string"}},
                    "desc": {"type": "object", "required": ["type", "desc"]},
                    "errors": {
                        "oneOf": [
                            {"type": "null"},
                            {
                                "type": "object",
                                "required": ["max_ulp", "max_abs", "budget_ulp", "outputs", "worst"],
                                "properties": {
                                    "worst": {
                                        "type": "object",
                                        "required": ["member", "index", "backend", "reference", "ulp", "abs",
                                                     "budget_ulp", "budget_abs"],
                                    }
                                },
                            },
                        ]
                    },
                    "reproducer": NULLABLE_STR,
                    "replay": NULLABLE_STR,
                },
            },
        },
        "coverage": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["legal", "illegal", "failed"],
                    "additionalProperties": {"type": ["integer", "null"]},
                },
            },
        },
    },
}  # fmt: skip


def junit_counts(path: Path) -> dict[str, int]:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    return {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}


def test_run_passes_and_writes_reports(tmp_path: Path) -> None:
    from dmlconform.specification.spec import load_spec

    proc = dmlconform("run", "--backend", "reference", *SMALL, "--report", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = tmp_path / "out"
    assert f"report: {report / 'results.json'}" in proc.stdout
    assert "dmlconform: " in proc.stdout and " passed, 0 failed" in proc.stdout
    results = json.loads((report / "results.json").read_text())
    jsonschema.validate(results, RESULTS_SCHEMA)
    assert results["backend"]["name"] == "reference" and results["feature_level"] == "2_1"
    assert results["command"].startswith("dmlconform run --backend reference")
    assert results["operators"] == ["MEAN_VARIANCE_NORMALIZATION1"]
    s = results["summary"]
    assert s["total"] == len(results["cases"]) == s["passed"] > 0
    assert {c["kind"] for c in results["cases"]} == {"numeric", "validation", "metamorphic"}
    spec = load_spec()
    every_rule = {r.id for r in spec.rules_for(spec.operator("MEAN_VARIANCE_NORMALIZATION1"))}
    assert set(results["coverage"]["MEAN_VARIANCE_NORMALIZATION1"]) == every_rule
    cov = results["coverage"]["MEAN_VARIANCE_NORMALIZATION1"]
    assert cov["scale-bias-paired"]["illegal"] >= 1 and cov["available"]["legal"] >= 1
    j = junit_counts(report / "junit.xml")
    assert j == {"tests": s["total"], "failures": 0, "errors": 0, "skipped": s["skipped"] + s["xfailed"]}


def test_run_failures_exit_1_and_counts_match_junit(tmp_path: Path) -> None:
    proc = dmlconform(
        "run", "--backend", "test_plugin_backends:WrongValues", *SMALL, "--kinds", "numeric", "--report", "out",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    jsonschema.validate(results, RESULTS_SCHEMA)
    s = results["summary"]
    assert s["failed"] == 2 and s["passed"] == 2
    j = junit_counts(tmp_path / "out" / "junit.xml")
    assert j["tests"] == s["total"] and j["failures"] == s["failed"] + s["errors"]
    assert all(
        (tmp_path / "out" / c["reproducer"]).is_dir() for c in results["cases"] if c["outcome"] == "failed"
    )


def test_default_report_dir_under_cwd(tmp_path: Path) -> None:
    proc = dmlconform(
        "run", "--backend", "reference", *SMALL, "--kinds", "numeric", "--cases", "1", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (made,) = (tmp_path / "reports").iterdir()
    assert (
        made.name.startswith("reference-")
        and (made / "results.json").is_file()
        and (made / "junit.xml").is_file()
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "no-such-backend"], "unknown backend 'no-such-backend'"),
        (["--backend", "reference", "--feature-level", "7_7"], "unknown feature level '7_7'"),
        (["--backend", "reference", "--backend-option", "bogus=1"], "bogus"),
        (["--backend", "reference", "--cases", "0"], "--cases must be at least 1"),
    ],
)
def test_usage_errors_exit_2_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    proc = dmlconform("run", *args, cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1, proc.stderr


def test_run_takes_l_for_the_feature_level(tmp_path: Path) -> None:
    """-l, as validate and generate spell it; the recorded command spells it out."""
    args = [
        "--operators",
        "MEAN_VARIANCE_NORMALIZATION1",
        "--cases",
        "1",
        "--tier",
        "smoke",
        "--kinds",
        "numeric",
    ]
    proc = dmlconform("run", "--backend", "reference", "-l", "2_1", *args, "--report", "r", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["feature_level"] == "2_1" and "--feature-level 2_1" in results["command"]
    assert {c["feature_level"] for c in results["cases"]} == {"2_1"}


def test_xdist_matches_serial(tmp_path: Path) -> None:
    serial = dmlconform(
        "run", "--backend", "test_plugin_backends:WrongValues", *SMALL, "--report", "s", cwd=tmp_path
    )
    parallel = dmlconform(
        "run", "--backend", "test_plugin_backends:WrongValues", *SMALL, "--report", "p", "--", "-n", "2",
        cwd=tmp_path,
    )  # fmt: skip
    assert serial.returncode == parallel.returncode == 1, parallel.stderr[-2000:]
    a = json.loads((tmp_path / "s" / "results.json").read_text())
    b = json.loads((tmp_path / "p" / "results.json").read_text())

    def strip(r: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [
            (c["id"], c["outcome"], c["message"] and c["message"].split(" (")[0], c["errors"])
            for c in r["cases"]
        ]

    assert strip(a) == strip(b)
    assert a["summary"] == b["summary"] and a["coverage"] == b["coverage"]


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole SMALL run of the reference, made once: what the narrowed runs are measured against."""
    where = tmp_path_factory.mktemp("full")
    full = dmlconform("run", "--backend", "reference", *SMALL, "--report", "full", cwd=where)
    assert full.returncode == 0, full.stderr[-2000:]
    return where / "full"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_run_narrowed_by_k_is_not_complete(tmp_path: Path, full_run: Path, workers: list[str]) -> None:
    shutil.copytree(full_run, tmp_path / "full")
    part = dmlconform(
        "run", "--backend", "reference", *SMALL, "--report", "part", "--", "-k", "FLOAT16", *workers, cwd=tmp_path
    )  # fmt: skip
    assert part.returncode == 0, part.stdout[-2000:] + part.stderr[-2000:]
    whole = json.loads((tmp_path / "full" / "results.json").read_text())
    results = json.loads((tmp_path / "part" / "results.json").read_text())
    assert whole["complete"] is True and whole["deselected"] == 0
    assert results["complete"] is False and results["status"] == "narrowed"
    assert results["collected"] == whole["collected"] > results["ran"] > 0
    assert results["deselected"] == results["collected"] - results["ran"]
    assert "INCOMPLETE RUN (narrowed): narrowed" in part.stdout
    # junit.xml: one classname per operator, under xdist too
    classnames = {
        tc.get("classname") for tc in ET.parse(tmp_path / "part" / "junit.xml").getroot().iter("testcase")
    }
    assert classnames == {"dmlconform.MEAN_VARIANCE_NORMALIZATION1"}
    # report diff refuses the narrowed run; told to compare anyway, it fails on the lost cases
    diff = dmlconform("report", "diff", "full", "part", cwd=tmp_path)
    assert diff.returncode == 2 and "narrowed" in diff.stderr
    diff = dmlconform("report", "diff", "full", "part", "--allow-incomplete", cwd=tmp_path)
    assert diff.returncode == 1 and f"LOST: {results['deselected']} case(s)" in diff.stdout
    diff = dmlconform("report", "diff", "full", "part", "--allow-incomplete", "--allow-lost", cwd=tmp_path)
    assert diff.returncode == 0, diff.stdout


def test_dtypes_no_operator_supports_says_so(tmp_path: Path) -> None:
    proc = dmlconform("run", "--backend", "reference", "--dtypes", "INT32", "--report", "out", cwd=tmp_path)
    assert proc.returncode == 2
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert any("no selected operator supports INT32 at feature level 6_4" in line for line in lines), lines
    assert "Traceback" not in proc.stderr and not (tmp_path / "out" / "results.json").exists()


def test_a_rerun_into_the_same_report_dir_drops_stale_reproducers(tmp_path: Path) -> None:
    bad = dmlconform(
        "run", "--backend", "test_plugin_backends:WrongValues", *SMALL, "--kinds", "numeric", "--report", "out",
        cwd=tmp_path,
    )  # fmt: skip
    assert bad.returncode == 1
    failures = tmp_path / "out" / "failures"
    assert any(failures.iterdir())
    good = dmlconform(
        "run", "--backend", "reference", *SMALL, "--kinds", "numeric", "--report", "out", cwd=tmp_path
    )
    assert good.returncode == 0, good.stderr[-2000:]
    assert not failures.exists()  # a report directory holds one run
    assert "All " in (tmp_path / "out" / "summary.md").read_text()
    # what the tool did not write stays
    bad = dmlconform(
        "run", "--backend", "test_plugin_backends:WrongValues", *SMALL, "--kinds", "numeric", "--report", "out",
        cwd=tmp_path,
    )  # fmt: skip
    (failures / "my-notes.txt").write_text("mine")
    good = dmlconform(
        "run", "--backend", "reference", *SMALL, "--kinds", "numeric", "--report", "out", cwd=tmp_path
    )
    assert good.returncode == 0 and [p.name for p in failures.iterdir()] == ["my-notes.txt"]
