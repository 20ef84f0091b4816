"""The backend's stack in every report header: results.json ``versions`` keys ``<backend>.<fact>``
(and ``<backend>``, the release) become a "DirectML stack" line in summary.md and a row of the
HTML header, for any backend that adds such keys; a merged report shows every shard's value where
they differ, and ``report diff`` says when two runs' stacks differ."""

from __future__ import annotations

import copy
import html as html_lib
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))

from cdp_browser import Browser, find_chromium  # noqa: E402
from synthetic_results import make_results, write_results  # noqa: E402

from dmlconform.cli import main  # noqa: E402
from dmlconform.report import diff_results, load_results, merge_reports, write_reports  # noqa: E402
from dmlconform.report.results_reader import stacks_of  # noqa: E402

RELEASE = "1.15.4+241025-1615.1.dml-1.15.fac7597"
STACK = {
    "directml": RELEASE,
    "directml.directml_dll": "/root/.cache/dmlconform/directml/dll/1.15.4/DirectML.dll",
    "directml.wine": "wine-8.0 (Debian 8.0~repack-4)",
    "directml.vkd3d": "bundled with Wine (vkd3d 1.6 in Debian's Wine 8.0)",
    "directml.vulkan_driver": "lavapipe (Mesa 25.0.7-2~bpo12+1)",
    "directml.max_feature_level": "6_4",
    "directml.adapter": "NVIDIA GeForce GTX 470 (vendor 0x10de, device 0x06cd)",
    "directml.float16": "supported",
}
# What each key reads as in the header.
LABELS = {
    "directml": "release",
    "directml.directml_dll": "dll",
    "directml.wine": "wine",
    "directml.vkd3d": "vkd3d",
    "directml.vulkan_driver": "vulkan driver",
    "directml.max_feature_level": "max feature level",
    "directml.adapter": "adapter",
    "directml.float16": "float16",
}


def directml_results(n_cases: int = 60, seed: int = 5, **stack: str) -> dict[str, Any]:
    doc = make_results(n_cases, seed=seed, backend="directml")
    doc["backend"] = {"name": "directml", "options": {}, "feature_level": "6_4", "description": "directml"}
    doc["versions"] = {"python": "3.11.7", "numpy": "2.4.6", "dmlconform": "0.1.0", **STACK, **stack}
    return doc


def summary_stack_line(md: str, title: str = "DirectML stack") -> str:
    lines = [line for line in md.splitlines() if line.startswith(f"{title}: ")]
    assert len(lines) == 1, md
    return lines[0]


def header_row(page: str, name: str = "directml") -> str:
    """The stack row of the header table as text (tags dropped, entities decoded)."""
    match = re.search(rf'<tr class="stack" id="stack-{name}">(.*?)</tr>', page, re.S)
    assert match, f"no stack row for {name}"
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", match.group(1))).split()).replace(" ;", ";")


def versions_row(page: str) -> str:
    match = re.search(r"<tr><th>Versions</th><td>(.*?)</td></tr>", page, re.S)
    assert match
    return html_lib.unescape(re.sub(r"<[^>]+>", "", match.group(1)))


@pytest.fixture
def report(tmp_path: Path) -> Path:
    write_results(tmp_path, directml_results())
    write_reports(tmp_path)
    return tmp_path


def test_summary_has_the_stack_line(report: Path) -> None:
    md = (report / "summary.md").read_text()
    line = summary_stack_line(md)
    for key, label in LABELS.items():
        assert f"{label} `{STACK[key]}`" in line  # values in code spans: "8.0~repack" is no strikethrough
    assert line.startswith(f"DirectML stack: release `{RELEASE}`; ")  # the release first
    # Its own paragraph, right after the backend line.
    lines = md.splitlines()
    at = lines.index(line)
    assert lines[at - 1] == "" and lines[at - 2].startswith("Backend: ") and lines[at + 1] == ""


def test_html_header_has_the_stack_row(report: Path) -> None:
    page = (report / "index.html").read_text()
    row = header_row(page)
    assert row.startswith(f"DirectML stack release {RELEASE};")
    for key, label in LABELS.items():
        assert f"{label} {STACK[key]}" in row
        assert f'data-key="{key}"' in page
    # In the header table, before the versions row, which no longer repeats the stack's keys.
    header = page[: page.index("</header>")]
    assert header.index('id="stack-directml"') < header.index("<th>Versions</th>")
    versions = versions_row(page)
    assert "python=3.11.7" in versions and "numpy=2.4.6" in versions
    assert "directml" not in versions


def test_any_backend_can_add_stack_facts(tmp_path: Path) -> None:
    doc = make_results(30, seed=2, backend="torch")
    doc["backend"]["name"] = "torch"
    doc["versions"] = {
        "torch": "2.5.1",
        "torch.cuda": "12.4",
        "torch.device": "NVIDIA H100 80GB HBM3",
        "zope.interface": "7.1",  # a dotted package name is not a stack: no "zope" backend or key
    }
    write_results(tmp_path, doc)
    write_reports(tmp_path)
    md = (tmp_path / "summary.md").read_text()
    assert summary_stack_line(md, "torch stack") == (
        "torch stack: release `2.5.1`; cuda `12.4`; device `NVIDIA H100 80GB HBM3`."
    )
    assert "zope" not in md and "DirectML" not in md
    page = (tmp_path / "index.html").read_text()
    assert header_row(page, "torch") == "torch stack release 2.5.1; cuda 12.4; device NVIDIA H100 80GB HBM3"
    assert "zope.interface=7.1" in versions_row(page)
    assert 'id="stack-zope"' not in page


def test_no_stack_without_backend_keys(tmp_path: Path) -> None:
    write_results(tmp_path, make_results(30, seed=1))  # onnxruntime: a release, no onnxruntime.* keys
    write_reports(tmp_path)
    assert " stack: " not in (tmp_path / "summary.md").read_text()
    page = (tmp_path / "index.html").read_text()
    assert 'class="stack"' not in page and "onnxruntime=1.31.1" in versions_row(page)


def test_stack_values_are_escaped(tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script> `code` | pipe"
    write_results(tmp_path, directml_results(**{"directml.adapter": hostile}))
    write_reports(tmp_path)
    page = (tmp_path / "index.html").read_text()
    assert "<script>alert(1)" not in page
    assert f"adapter {hostile}" in header_row(page)
    line = summary_stack_line((tmp_path / "summary.md").read_text())
    assert "adapter `<script>alert(1)</script> 'code' | pipe`;" in line  # a code span shows it literally


def _shard(doc: dict[str, Any], index: int, count: int, report: Path, **versions: str) -> Path:
    part = copy.deepcopy(doc)
    part["cases"] = doc["cases"][index - 1 :: count]
    part["shard"] = {"index": index, "count": count}
    part["command"] = f"{doc['command']} --shard {index}/{count}"
    part["versions"] = {**doc["versions"], **versions}
    write_results(report, part)
    for case in part["cases"]:  # merge copies each failure's reproducer directory
        if case.get("reproducer"):
            (report / case["reproducer"]).mkdir(parents=True)
    return report


def test_merge_keeps_the_stack(tmp_path: Path) -> None:
    doc = directml_results(80, seed=9)
    shards = [_shard(doc, k, 2, tmp_path / f"shard{k}") for k in (1, 2)]
    merged, _ = merge_reports(shards, tmp_path / "merged")
    assert {k: v for k, v in merged["versions"].items() if k.startswith("directml")} == STACK
    assert all("versions" not in m for m in merged["merged_from"])  # the same stack on both
    line = summary_stack_line((tmp_path / "merged" / "summary.md").read_text())
    assert f"release `{RELEASE}`" in line and "shard" not in line
    assert "shard" not in header_row((tmp_path / "merged" / "index.html").read_text())


def test_merge_of_shards_on_different_stacks_shows_both(tmp_path: Path) -> None:
    doc = directml_results(80, seed=9)
    other_dll = "/home/ci/.cache/dmlconform/directml/dll/1.15.4/DirectML.dll"
    shards = [
        _shard(doc, 1, 2, tmp_path / "shard1"),
        _shard(doc, 2, 2, tmp_path / "shard2", **{"directml.directml_dll": other_dll}),
    ]
    merged, _ = merge_reports(shards, tmp_path / "merged")
    # results.json: the first shard's versions, the second's where they differ (docs/results-json.md).
    assert merged["versions"]["directml.directml_dll"] == STACK["directml.directml_dll"]
    assert merged["merged_from"][1]["versions"]["directml.directml_dll"] == other_dll
    line = summary_stack_line((tmp_path / "merged" / "summary.md").read_text())
    assert f"dll **`{STACK['directml.directml_dll']}`** (shard 1/2), **`{other_dll}`** (shard 2/2);" in line
    assert "wine `wine-8.0 (Debian 8.0~repack-4)`;" in line  # the facts they share, once
    row = header_row((tmp_path / "merged" / "index.html").read_text())
    assert f"dll {STACK['directml.directml_dll']} (shard 1/2), {other_dll} (shard 2/2);" in row


def test_stacks_of_merged_shards() -> None:
    base = {"directml": "1.15.4", "directml.wine": "wine-8.0"}
    shards = [("1/3", base), ("2/3", {"directml": "1.13.1", "directml.wine": "wine-8.0"}), ("3/3", base)]
    (stack,) = stacks_of(base, "directml", shards)
    release, wine = stack.facts
    assert release.values == [("1.15.4", ["1/3", "3/3"]), ("1.13.1", ["2/3"])]
    assert release.value == "1.15.4 (shards 1/3, 3/3); 1.13.1 (shard 2/3)"
    assert wine.values == [("wine-8.0", [])] and wine.value == "wine-8.0"


def test_diff_names_the_stack_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old_doc = directml_results(
        **{"directml": "1.13.1+231109-1700.1.dml-1.13.6e5b9f3", "directml.max_feature_level": "6_2"}
    )
    old = write_results(tmp_path / "old", old_doc)
    new = write_results(tmp_path / "new", directml_results())
    diff = diff_results(load_results(old), load_results(new))
    assert [(c.stack, c.key, c.before, c.after) for c in diff.stack_changes] == [
        ("DirectML stack", "directml", "1.13.1+231109-1700.1.dml-1.13.6e5b9f3", RELEASE),
        ("DirectML stack", "directml.max_feature_level", "6_2", "6_4"),
    ]
    assert not diff.regressions  # the same cases: a change of stack alone is no regression
    assert main(["report", "diff", str(old), str(new)]) == 0
    text = capsys.readouterr().out
    assert (
        f"DirectML stack: release 1.13.1+231109-1700.1.dml-1.13.6e5b9f3 -> {RELEASE}; "
        "max feature level 6_2 -> 6_4\n" in text
    )
    assert main(["report", "diff", str(old), str(new), "--format", "markdown"]) == 0
    assert (
        "**DirectML stack changed**: release `1.13.1+231109-1700.1.dml-1.13.6e5b9f3` -> "
        in capsys.readouterr().out
    )
    assert main(["report", "diff", str(old), str(new), "--format", "json"]) == 0
    changes = json.loads(capsys.readouterr().out)["stack_changes"]
    assert [c["label"] for c in changes] == ["release", "max feature level"]
    # The same stack: nothing said.
    same = diff_results(load_results(new), load_results(new))
    assert same.stack_changes == [] and "stack" not in same.format_text()


CHROMIUM = find_chromium()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_stack_row_in_browser(report: Path) -> None:
    assert CHROMIUM is not None
    with Browser(CHROMIUM) as browser:
        browser.open((report / "index.html").resolve().as_uri())
        browser.wait_for("document.documentElement.dataset.ready === '1'")
        text = browser.evaluate("document.getElementById('stack-directml').innerText")
        visible = browser.evaluate(
            "(function(){var r=document.getElementById('stack-directml').getBoundingClientRect();"
            "return r.width > 0 && r.height > 0 && r.bottom <= window.innerHeight;})()"
        )
        assert browser.log.console_errors == [] and browser.log.exceptions == []
    assert visible  # in the header, above the fold
    for key, label in LABELS.items():
        assert f"{label} {STACK[key]}" in text
