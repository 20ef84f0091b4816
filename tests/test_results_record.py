"""The one case record (report/record.py) and the one spec hash: a run, ``dxdispatch check`` and
the report agree on both, and docs/results-json.md documents every field of the record."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import REPO, SPEC, dmlconform

from dmlconform.cli import main
from dmlconform.report.record import CaseRecord
from dmlconform.runner.cases import Selection, collect
from dmlconform.runner.results import case_record, finish_record, spec_hash
from dmlconform.specification.spec import default_spec_dir


def documented_case_keys() -> set[str]:
    """The keys of the case object in docs/results-json.md's example."""
    text = (REPO / "docs" / "results-json.md").read_text(encoding="utf-8")
    block = text[text.index('"cases": [') : text.index('"coverage": {')]
    return set(re.findall(r'^\s{6}"(\w+)":', block, flags=re.M))


def test_every_record_field_is_documented_and_every_documented_key_is_a_field() -> None:
    assert documented_case_keys() == set(CaseRecord.field_names())


def test_runner_and_bundle_records_have_the_same_keys_and_the_report_reads_them_back() -> None:
    from dmlconform.dxdispatch.check import _bare_record

    case = next(iter(collect(SPEC, Selection(level=SPEC.level("6_4"), kinds=("validation",), cases=1))))
    ran = finish_record(case_record(case, "x::" + case.id, None, spec=SPEC), "skipped", "why", 0.5)
    bare = _bare_record({"id": case.id, "case": case.to_dict()}, "error", "unreadable")
    assert list(ran) == list(bare) == list(CaseRecord.field_names())
    assert (ran["outcome"], ran["message"], ran["duration_s"]) == ("skipped", "why", 0.5)
    from dmlconform.report.results_reader import CaseRecord as Read

    back = Read.from_dict(json.loads(json.dumps(ran)), 0)
    assert (back.id, back.nodeid, back.outcome, back.rules) == (
        case.id,
        "x::" + case.id,
        "skipped",
        ran["rules"],
    )
    assert back.to_dict()["desc"] == case.desc.to_dict()


@pytest.mark.slow  # a dmlconform run in a subprocess
def test_a_run_and_a_bundle_name_a_spec_by_the_same_hash(tmp_path: Path) -> None:
    spec_dir = tmp_path / "spec"
    shutil.copytree(default_spec_dir(), spec_dir)
    first = sorted(spec_dir.rglob("*.yaml"))[0]
    first.write_text(first.read_text(encoding="utf-8") + "\n# a spec of its own\n", encoding="utf-8")
    small = ["--operators", "MEAN_VARIANCE_NORMALIZATION1", "--cases", "1", "--tier", "smoke"]
    bundle = tmp_path / "bundle"
    assert (
        main(
            [
                "dxdispatch",
                "export",
                str(bundle),
                *small,
                "--kinds",
                "validation",
                "--spec-dir",
                str(spec_dir),
            ]
        )
        == 0
    )
    assert (
        main(["dxdispatch", "emulate", str(bundle), "--backend", "reference", "--spec-dir", str(spec_dir)])
        == 0
    )
    assert main(["dxdispatch", "check", str(bundle), "--spec-dir", str(spec_dir)]) in (0, 1)
    proc = dmlconform(
        "run", "--backend", "numpy", *small, "--kinds", "validation", "--report", "run", "--spec-dir", str(spec_dir),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    ran = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    run_hash = ran["spec_hash"]
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    checked = json.loads((bundle / "report" / "results.json").read_text(encoding="utf-8"))
    assert manifest["spec_hash"] == run_hash == checked["spec_hash"] == checked["bundle"]["spec_hash_now"]
    assert spec_hash(SPEC) != run_hash  # the bundled spec is another spec: another hash
