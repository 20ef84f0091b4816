"""Rendering results.json into index.html (self-contained) and summary.md.

The HTML page must open from a CI artifact on any machine, offline, so everything is inline: CSS,
the script, the charts (SVG computed in report/histograms.py and report/accuracy_by_size.py) and
the case data (one JSON blob, report/case_data.py). Server-side parts go through Jinja with
autoescape on; the script only ever writes data with ``textContent``.
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
from pathlib import Path
from typing import Any

import jinja2

from dmlconform.report.accuracy_by_size import build_accuracy, build_bands
from dmlconform.report.case_data import EMBEDDED_DESCS, build_case_data, desc_yaml, shrunk_line
from dmlconform.report.classes import LADDER, accuracy_classes, excused_text, finding_counts, finding_excused
from dmlconform.report.coverage import build_coverage
from dmlconform.report.findings import known_findings, known_label, known_reason
from dmlconform.report.formatting import (
    breakable,
    format_number,
    json_for_script,
    markdown_cell,
    markdown_code,
)
from dmlconform.report.histograms import build_charts
from dmlconform.report.matrix import build_matrix, level_key
from dmlconform.report.results_reader import NOTABLE, CaseRecord, Results, load_results, skip_reasons

# Failures rendered as full entries in the page itself (the rest open from the case table).
FAILURE_ENTRIES = 100
SUMMARY_TOP_FAILURES = 10

_TEMPLATES = Path(__file__).parent / "templates"


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """jinja2's cache in the temporary directory, or none where that cannot be made safely."""
    try:
        return jinja2.FileSystemBytecodeCache()
    except (OSError, RuntimeError):
        return None


@functools.cache
def _environment(autoescape: bool) -> jinja2.Environment:
    """One environment per escaping mode and process, its templates compiled once; the bytecode
    cache (jinja2's own, in the temporary directory, keyed by each template's source) spares the
    next process compiling them again: 0.19 s of every run's report before."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
        bytecode_cache=_bytecode_cache(),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["num"] = format_number
    env.filters["md"] = markdown_cell
    env.filters["mdcode"] = markdown_code
    env.filters["breakable"] = breakable
    return env


def severity_key(case: CaseRecord) -> tuple[int, int, float, str]:
    """Worst first: crashes (error), then numerical failures by how far past their budget, then
    outcome-only failures (a wrong accept/reject), which have no figure to rank by."""
    ratio = case.ratio
    return (
        0 if case.outcome == "error" else 1,
        0 if ratio is not None else 1,
        -ratio if ratio is not None and not math.isnan(ratio) else 0.0,
        case.id,
    )


def _levels_sorted(values: list[str]) -> list[str]:
    return sorted(values, key=level_key)


def incompleteness(results: Results) -> dict[str, Any] | None:
    """What the page must say first when the run did not finish; None for a complete run."""
    if results.complete:
        return None
    collected = results.data.get("collected")
    ran = len(results.cases)
    shard = results.data.get("shard")
    of = f" of shard {shard.get('index')}/{shard.get('count')}" if isinstance(shard, dict) else ""
    if isinstance(collected, int):
        scope = f"{ran} of {collected} collected cases{of} ran; {max(collected - ran, 0)} have no result"
    else:
        scope = f"{ran} cases{of} ran; how many were collected is unknown"
    return {
        "status": str(results.data.get("status") or "incomplete"),
        "reason": str(results.data.get("stop_reason") or "the run did not say why"),
        "scope": scope,
        "exit_status": results.data.get("exit_status"),
    }


def tier_text(data: dict[str, Any]) -> str | None:
    """The header's tier line ("stress, size cases up to 67,108,864 elements"); None for runs
    from before tiers existed."""
    tier = data.get("tier")
    if not tier:
        return None
    cap = data.get("max_elements")
    return f"{tier}" + (f", size cases up to {cap:,} input elements" if isinstance(cap, int) else "")


def build_context(results: Results) -> dict[str, Any]:
    data = results.data
    summary = results.summary()
    notable = sorted((c for c in results.cases if c.outcome in NOTABLE), key=severity_key)
    ran = summary["total"] - summary["skipped"]
    ok = summary["passed"] + summary["xfailed"]
    return {
        "results": results,
        "data": data,
        "incomplete": incompleteness(results),
        **_header_context(results),
        "summary": summary,
        "pass_rate": (ok / ran) if ran else None,
        "matrix": build_matrix(results),
        "failures": notable[:FAILURE_ENTRIES],
        "failure_count": sum(1 for c in results.cases if c.failing),
        "notable_count": len(notable),
        "charts": build_charts(results),
        "accuracy": build_accuracy(results),
        "bands": build_bands(results),
        "tier": tier_text(data),
        "coverage": build_coverage(results),
        "known": known_findings(results),
        "known_reason": known_reason,
        "known_label": known_label,
        "case_data": build_case_data(results, notable),
        "embedded_descs": min(len(notable), EMBEDDED_DESCS),
        "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "json_for_script": json_for_script,
        "desc_yaml": desc_yaml,
        "shrunk_line": shrunk_line,
        "top_failures": notable[:SUMMARY_TOP_FAILURES],
        "skip_reasons": skip_reasons({"outcome": c.outcome, "message": c.message} for c in results.cases),
        "levels_sorted": _levels_sorted,
        **classes_context(results),
    }


def _header_context(results: Results) -> dict[str, Any]:
    """The header's facts about the backend and the machine."""
    stacks = results.stacks
    in_stacks = frozenset().union(*(stack.keys for stack in stacks))
    # The header's versions line leaves out what the stack lines show.
    versions = {k: v for k, v in results.versions.items() if k not in in_stacks}
    tool = results.data.get("tool") if isinstance(results.data.get("tool"), dict) else {}
    return {
        "backend": results.backend,
        "backend_options": results.backend.get("options")
        if isinstance(results.backend.get("options"), dict)
        else {},
        "versions": versions,
        "stacks": stacks,
        "tool": tool,
    }


def classes_context(results: Results) -> dict[str, Any]:
    """The known findings the run hit and the accuracy class per operator x data type
    (report/classes.py), computed from the cases as written."""
    raw = [c.raw or {"outcome": c.outcome, "kind": c.kind} for c in results.cases]
    table = accuracy_classes(raw)
    types = sorted({dt for row in table.values() for dt in row}, key=lambda t: (t != "FLOAT32", t))
    return {
        "known_findings": finding_counts(raw),
        "known_excused": {f: excused_text(t) for f, t in finding_excused(raw).items()},
        "accuracy_classes": table,
        "class_types": types,
        "class_ladder": LADDER,
    }


def render_html(results: Results, context: dict[str, Any] | None = None) -> str:
    """index.html; ``context`` is :func:`build_context`'s, when the caller has built it already."""
    context = context if context is not None else build_context(results)
    return _environment(autoescape=True).get_template("index.html.j2").render(context)


def render_markdown(
    results: Results, html_name: str = "index.html", context: dict[str, Any] | None = None
) -> str:
    """summary.md; ``context`` as for :func:`render_html`."""
    context = {**(context if context is not None else build_context(results)), "html_name": html_name}
    return _environment(autoescape=False).get_template("summary.md.j2").render(context)


def write_reports(report_dir: str | Path) -> list[Path]:
    """Read report_dir/results.json and write index.html and summary.md beside it.

    Raises ResultsError when results.json is missing or unusable. Returns the written paths."""
    report_dir = Path(report_dir)
    results = load_results(report_dir / "results.json")
    html_path = report_dir / "index.html"
    md_path = report_dir / "summary.md"
    context = build_context(results)  # one for both pages: half a 50,000-case report's time
    html_path.write_text(render_html(results, context), encoding="utf-8")
    md_path.write_text(render_markdown(results, context=context), encoding="utf-8")
    return [html_path, md_path]
