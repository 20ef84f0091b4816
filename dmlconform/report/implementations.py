"""The implementations table: which runtime computes DirectML's normalization semantics, how
accurately, and where and why it differs, from the runs' results.json files.

One column per implementation (a run of one backend), one row per operator x data type. A cell
says how many numeric and metamorphic cases were judged, how many passed, how many failed, which
known findings took the rest (each linked to its explanation and reproducer), and the accuracy
class: the tightest tolerance model every judged case meets (``report.classes``). The header
names each run's versions and the command that reproduces its column. Like every report view it
reads results.json only, plus what the caller says of each finding (its reason and links, from
the known-findings files), so the page can be written again from the reports alone.
"""

from __future__ import annotations

import datetime as _dt
import html
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dmlconform.report.classes import JUDGED, LADDER, NONE, accuracy_classes
from dmlconform.report.results_reader import Results

#: the kinds whose cases compare outputs (validation cases judge legality, counted apart)
COMPUTING_KINDS = ("numeric", "metamorphic")


@dataclass(frozen=True)
class FindingInfo:
    """What the page says of a known finding: one line of its mechanism and where it is
    explained and reproduced (paths relative to the repository), from its findings file."""

    reason: str
    explained: str | None = None
    reproducer: str | None = None


@dataclass
class Cell:
    """One operator x data type of one implementation."""

    judged: int = 0
    passed: int = 0
    failed: int = 0
    findings: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    accuracy: str | None = None


@dataclass
class Column:
    """One implementation: the run it comes from and its cells."""

    label: str
    results: Results
    cells: dict[tuple[str, str], Cell]
    validation: Counter[str]

    @property
    def failed(self) -> int:
        return sum(c.failed for c in self.cells.values())


def column(label: str, results: Results) -> Column:
    """The cells of one run: numeric and metamorphic cases per operator x data type."""
    cells: dict[tuple[str, str], Cell] = {}
    validation: Counter[str] = Counter()
    for case in results.cases:
        if case.kind == "validation":
            validation[case.outcome] += 1
            continue
        if case.kind not in COMPUTING_KINDS:
            continue
        cell = cells.setdefault((case.operator or "?", case.data_type or "-"), Cell())
        if case.outcome == "skipped":
            cell.skipped += 1
            continue
        if case.outcome not in JUDGED and case.outcome != "error":
            continue
        cell.judged += 1
        if case.outcome in ("passed", "xpassed"):
            cell.passed += 1
        elif case.outcome == "xfailed":
            cell.findings[str(case.raw.get("known_finding") or "?")] += 1
        else:
            cell.failed += 1
    classes = accuracy_classes(c.raw for c in results.cases)
    for (op, dt), cell in cells.items():
        cell.accuracy = classes.get(op, {}).get(dt)
    return Column(label, results, cells, validation)


def _rows(columns: Sequence[Column]) -> list[tuple[str, str]]:
    keys = {k for c in columns for k in c.cells}
    return sorted(keys)


def _command(results: Results) -> str:
    return str(results.data.get("command") or "?")


def _versions(results: Results) -> str:
    return ", ".join(f"{k} {v}" for k, v in results.versions.items() if k not in ("python", "pytest"))


def _anchor(backend: str, finding: str) -> str:
    """A finding's anchor: the backend's registered name and the finding's id."""
    return f"{backend}--{finding}"


def _link(path: str | None, text: str, base: str) -> str:
    return f"[{text}]({base}{path})" if path else text


# --------------------------------------------------------------------------------------------
# markdown


def _md_cell(cell: Cell | None, backend: str) -> str:
    if cell is None:
        return "-"
    if cell.judged == 0:
        return f"not supported ({cell.skipped} skipped)" if cell.skipped else "-"
    parts = [f"{cell.passed}/{cell.judged}"]
    if cell.failed:
        parts.append(f"**{cell.failed} failed**")
    parts += [f"[{f}](#{_anchor(backend, f)}) {n}" for f, n in sorted(cell.findings.items())]
    if cell.accuracy:
        parts.append(f"`{cell.accuracy}`")
    return " · ".join(parts)


def render_markdown(
    columns: Sequence[Column],
    findings: Mapping[str, Mapping[str, FindingInfo]],
    short_names: Mapping[str, str],
    command: str,
    base: str = "../",
) -> str:
    """docs/implementations.md: the runs, the table, the findings hit. ``findings``: per column
    label, what each finding id is; ``base``: the path from the page to the repository root (the
    findings' links are relative to it)."""
    today = _dt.date.today().isoformat()
    out = [
        "# Implementations of DirectML's normalization operators",
        "",
        f"Written by `{command}` on {today} from the runs below; write it again rather than edit it.",
        "",
        "Each column is one implementation run against the spec (the default tier, seed 0 unless its",
        "command says otherwise). A cell counts the numeric and metamorphic cases of that operator and",
        "data type whose outputs were judged: passed / judged, the cases that failed, the known",
        "findings that took the rest (linked below to their mechanism, explanation and reproducer),",
        "and the accuracy class, the tightest tolerance model every judged case meets",
        f"({' < '.join(LADDER)}; `{NONE}`: a case meets none, a bug's cases; docs/verdicts.md).",
        "",
        "## The runs",
        "",
        "| column | versions | cases | complete | failed | validation | reproduce |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in columns:
        s = c.results.summary()
        val = f"{c.validation['passed']}/{sum(c.validation.values())}" if c.validation else "-"
        complete = "yes" if c.results.complete else f"no: {c.results.incomplete_reason()}"
        out.append(
            f"| {c.label} | {_versions(c.results)} | {s['total']} | {complete} | {c.failed} | {val} "
            f"| `{_command(c.results)}` |"
        )
    out += ["", "## The table", ""]
    out.append("| operator | type | " + " | ".join(c.label for c in columns) + " |")
    out.append("|---|---|" + "---|" * len(columns))
    for op, dt in _rows(columns):
        cells = " | ".join(_md_cell(c.cells.get((op, dt)), c.results.backend_name) for c in columns)
        out.append(f"| {short_names.get(op, op)} | {dt} | {cells} |")
    out += ["", "## Known findings hit", ""]
    out += ["| finding | column | cases | mechanism | explained | reproducer |", "|---|---|---|---|---|---|"]
    for c in columns:
        hit: Counter[str] = Counter()
        for cell in c.cells.values():
            hit.update(cell.findings)
        for fid, n in sorted(hit.items()):
            info = findings.get(c.label, {}).get(fid, FindingInfo("(not in the backend's findings file)"))
            anchor = f'<a id="{_anchor(c.results.backend_name, fid)}"></a>'
            reason = " ".join(info.reason.split()).replace("|", "\\|")  # a |x| must not end the cell
            out.append(
                f"| {anchor}{fid} | {c.label} | {n} | {reason} | {_link(info.explained, 'explained', base)} "
                f"| {_link(info.reproducer, 'reproducer', base)} |"
            )
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# HTML

_CLASS_COLOURS = {"tight": "#d8f0d8", "default": "#e6f4d4", "fp16-statistics": "#f3f1cf", NONE: "#f6d5d0"}


def _html_cell(cell: Cell | None, backend: str) -> str:
    if cell is None or cell.judged == 0:
        text = f"not supported ({cell.skipped})" if cell and cell.skipped else "-"
        return f'<td class="none">{html.escape(text)}</td>'
    colour = _CLASS_COLOURS.get(cell.accuracy or "", "#f8ead0")
    if cell.failed:
        colour = "#f3b9b0"
    parts = [f"{cell.passed}/{cell.judged}"]
    if cell.failed:
        parts.append(f"<b>{cell.failed} failed</b>")
    parts += [
        f'<a href="#{_anchor(backend, f)}">{html.escape(f)}</a> {n}' for f, n in sorted(cell.findings.items())
    ]
    if cell.accuracy:
        parts.append(f"<code>{html.escape(cell.accuracy)}</code>")
    return f'<td style="background:{colour}">{" &middot; ".join(parts)}</td>'


def render_html(
    columns: Sequence[Column],
    findings: Mapping[str, Mapping[str, FindingInfo]],
    short_names: Mapping[str, str],
    command: str,
    base: str = "../",
) -> str:
    """The same page as :func:`render_markdown`, self-contained HTML: cells coloured by class."""
    e = html.escape
    rows = []
    for op, dt in _rows(columns):
        tds = "".join(_html_cell(c.cells.get((op, dt)), c.results.backend_name) for c in columns)
        rows.append(f"<tr><th>{e(short_names.get(op, op))}</th><td>{e(dt)}</td>{tds}</tr>")
    runs = []
    for c in columns:
        runs.append(
            f"<tr><th>{e(c.label)}</th><td>{e(_versions(c.results))}</td><td>{c.results.summary()['total']}</td>"
            f"<td>{'yes' if c.results.complete else e(c.results.incomplete_reason() or 'no')}</td>"
            f"<td><code>{e(_command(c.results))}</code></td></tr>"
        )
    found = []
    for c in columns:
        hit: Counter[str] = Counter()
        for cell in c.cells.values():
            hit.update(cell.findings)
        for fid, n in sorted(hit.items()):
            info = findings.get(c.label, {}).get(fid, FindingInfo("(not in the backend's findings file)"))
            links = " ".join(
                f'<a href="{e(base + p)}">{t}</a>'
                for p, t in ((info.explained, "explained"), (info.reproducer, "reproducer"))
                if p
            )
            found.append(
                f'<tr id="{_anchor(c.results.backend_name, fid)}"><th>{e(fid)}</th><td>{e(c.label)}</td><td>{n}</td>'
                f"<td>{e(' '.join(info.reason.split()))}</td><td>{links}</td></tr>"
            )
    head = "".join(f"<th>{e(c.label)}</th>" for c in columns)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Implementations of DirectML's normalization operators</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }}
td.none {{ color: #888; }}
code {{ font-size: 12px; }}
</style></head><body>
<h1>Implementations of DirectML's normalization operators</h1>
<p>Written by <code>{e(command)}</code> on {_dt.date.today().isoformat()}. Cells: passed / judged
numeric and metamorphic cases, failures, known findings, accuracy class
({e(" < ".join(LADDER))}; <code>{NONE}</code>: meets none).</p>
<h2>The runs</h2>
<table><tr><th>column</th><th>versions</th><th>cases</th><th>complete</th><th>reproduce</th></tr>
{"".join(runs)}</table>
<h2>The table</h2>
<table><tr><th>operator</th><th>type</th>{head}</tr>
{"".join(rows)}</table>
<h2>Known findings hit</h2>
<table><tr><th>finding</th><th>column</th><th>cases</th><th>mechanism</th><th>links</th></tr>
{"".join(found)}</table>
</body></html>
"""


def page_findings(markdown: str) -> dict[str, set[str]]:
    """{backend: finding ids} a written page names (the test that holds the page to the
    known-findings files reads it back with this)."""
    out: dict[str, set[str]] = {}
    for backend, fid in re.findall(r'<a id="(.+?)--(.+?)"></a>', markdown):
        out.setdefault(backend, set()).add(fid)
    return out


def summary_line(columns: Sequence[Column]) -> str:
    """One line per the console: columns and their failures."""
    return ", ".join(f"{c.label}: {c.failed} failed" for c in columns)


def as_dict(columns: Sequence[Column]) -> dict[str, Any]:
    """The table as data (``--json``)."""
    return {
        c.label: {
            f"{op}/{dt}": {
                "judged": cell.judged,
                "passed": cell.passed,
                "failed": cell.failed,
                "findings": dict(cell.findings),
                "accuracy_class": cell.accuracy,
            }
            for (op, dt), cell in sorted(c.cells.items())
        }
        for c in columns
    }
