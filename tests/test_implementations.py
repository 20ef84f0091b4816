"""The implementations table (``dmlconform implementations``, docs/implementations.md): its cells
count what each run's results.json says, and the published page names only backends and
findings that the known-findings files hold, each finding's links pointing at files that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from helpers import REPO, dmlconform

from dmlconform.report.implementations import FindingInfo, column, page_findings, render_markdown
from dmlconform.report.results_reader import load_results
from dmlconform.runner.expect import known_findings_file

PAGE = REPO / "docs" / "implementations.md"


def _case(op: str, dt: str, outcome: str, kind: str = "numeric", **more) -> dict:
    return {
        "id": f"{kind}[{op}-{dt}-{outcome}]",
        "kind": kind,
        "operator": op,
        "data_type": dt,
        "outcome": outcome,
        **more,
    }


def _results(tmp_path: Path, name: str, cases: list[dict]) -> Path:
    path = tmp_path / name / "results.json"
    path.parent.mkdir()
    doc = {
        "schema_version": 1,
        "backend": {"name": name},
        "versions": {"lib": "1.0"},
        "command": f"dmlconform run --backend {name}",
    }
    path.write_text(json.dumps({**doc, "complete": True, "cases": cases}))
    return path


def test_a_cell_counts_judged_passed_failed_and_each_finding(tmp_path: Path) -> None:
    op = "MEAN_VARIANCE_NORMALIZATION1"
    cases = [
        _case(op, "FLOAT32", "passed", accuracy_class="tight"),
        _case(op, "FLOAT32", "xpassed", accuracy_class="default"),
        _case(op, "FLOAT32", "xfailed", known_finding="X1"),
        _case(op, "FLOAT32", "failed"),
        _case(op, "FLOAT32", "skipped"),
        _case(op, "FLOAT32", "passed", kind="validation"),
        _case(op, "FLOAT16", "skipped"),
    ]
    col = column("b", load_results(_results(tmp_path, "b", cases)))
    cell = col.cells[(op, "FLOAT32")]
    assert (cell.judged, cell.passed, cell.failed, dict(cell.findings), cell.skipped) == (
        4,
        2,
        1,
        {"X1": 1},
        1,
    )
    assert cell.accuracy == "none"  # a failure meets no model: the weakest class of the cell
    assert col.cells[(op, "FLOAT16")].judged == 0 and col.validation["passed"] == 1
    page = render_markdown(
        [col], {"b": {"X1": FindingInfo("why", "docs/x.md", "cases/b/x")}}, {op: "MVN1"}, "cmd"
    )
    assert "| MVN1 | FLOAT32 | 2/4 · **1 failed** · [X1](#b--X1) 1 · `none` |" in page
    assert "| MVN1 | FLOAT16 | not supported (1 skipped) |" in page
    assert page_findings(page) == {"b": {"X1"}}
    assert "[explained](../docs/x.md)" in page and "[reproducer](../cases/b/x)" in page


def test_the_command_writes_the_page_and_its_html_from_reports(tmp_path: Path) -> None:
    op = "LP_NORMALIZATION"
    a = _results(tmp_path, "numpy", [_case(op, "FLOAT32", "passed", accuracy_class="tight")])
    proc = dmlconform("implementations", str(a.parent), "-o", "out/impl.md", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "out" / "impl.md").read_text()
    assert "| LP | FLOAT32 | 1/1 · `tight` |" in page and "`dmlconform run --backend numpy`" in page
    assert "<td" in (tmp_path / "out" / "impl.html").read_text()
    none = dmlconform("implementations", cwd=tmp_path)
    assert none.returncode == 2 and len(none.stderr.strip().splitlines()) == 1


def test_a_backend_of_your_own_has_its_findings_linked_from_its_expect_file(tmp_path: Path) -> None:
    """A run of a user's backend with --expect: ``--findings`` gives the table that file, so
    the legend states each finding and links its explanation and reproducer; a missing or
    broken file is one line and exit 2."""
    op = "LOCAL_RESPONSE_NORMALIZATION"
    run = _results(tmp_path, "mine", [_case(op, "FLOAT32", "xfailed", known_finding="M1")])
    findings = tmp_path / "mine.yaml"
    findings.write_text(
        "findings:\n  - id: M1\n    reason: a running window sum\n    explained: docs/m.md#m1\n"
        "    reproducer: cases/mine/m1\n    when: {operator: LRN}\n    fails: true\n"
    )
    without = dmlconform("implementations", str(run.parent), "-o", "a.md", cwd=tmp_path)
    assert (
        without.returncode == 0 and "(not in the backend's findings file)" in (tmp_path / "a.md").read_text()
    )
    proc = dmlconform(
        "implementations", str(run.parent), "--findings", str(findings), "-o", "b.md", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "b.md").read_text()
    assert (
        "| mine | 1 | a running window sum | [explained](./docs/m.md#m1) | [reproducer](./cases/mine/m1) |"
        in page
    )
    (tmp_path / "bad.yaml").write_text("findings: [")
    for bad in ("nope.yaml", "bad.yaml"):
        refused = dmlconform("implementations", str(run.parent), "--findings", bad, cwd=tmp_path)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert refused.stderr.startswith(f"dmlconform implementations: error: --findings {bad}: ")


@pytest.mark.skipif(not PAGE.is_file(), reason="docs/implementations.md is not written yet")
def test_the_published_page_holds_to_the_known_findings_files() -> None:
    """Every column of docs/implementations.md is a backend the suite ships or a backend whose
    findings file the page's command gives (``--findings``), every finding it names is in that
    file, and each finding's explanation and reproducer exist."""
    page = PAGE.read_text()
    given = [REPO / f for f in re.findall(r"--findings (\S+?)[`\s]", page.splitlines()[2])]
    columns = re.findall(r"^\| ([\w.-]+(?: [\d.]+)?) \| .* \| `dmlconform run --backend", page, re.M)
    assert {"reference", "numpy", "onnxruntime", "torch", "openvino", "jax"} <= {
        c.split()[0] for c in columns
    }
    assert any(c.startswith("directml 1.15.4") for c in columns)
    for backend, ids in page_findings(page).items():
        path = known_findings_file(backend) or next(
            (
                f
                for f in given
                if all(re.search(rf"^  - id: {re.escape(i)}$", f.read_text(), re.M) for i in ids)
            ),
            None,
        )
        assert path is not None, backend
        text = path.read_text()
        entries = yaml.safe_load(text)["findings"]
        for fid in ids:
            assert re.search(rf"^  - id: {re.escape(fid)}$", text, re.M), f"{backend} {fid}"
            # the mechanism shown is the finding's first entry, which states it
            first = " ".join(next(f for f in entries if f["id"] == fid)["reason"].split())
            row = re.search(
                rf'^\| <a id="[^"]*--{re.escape(fid)}"></a>{re.escape(fid)} \| [^|]* \| \d+ \| (.*?) \| \[',
                page,
                re.M,
            )
            assert row and row.group(1) == first.replace("|", "\\|"), f"{backend} {fid}"
    for target in re.findall(r"\]\(\.\./([^)#]+)", page):
        assert (REPO / target).exists(), target
