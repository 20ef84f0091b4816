"""What a conformance run prints on the console: the header before the cases, the lines after.

The console is what a user reads first, so it says what the report directory and results.json
say in full, in a few lines: the backend and settings, the reports written, the counts, the
known findings hit and the reasons cases were skipped. ``tr`` is pytest's terminal reporter.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dmlconform.runner.selection import unsupported_data_types
from dmlconform.runner.settings import Settings

SKIP_REASONS_SHOWN = 10


def header_lines(settings: Settings, spec: Any) -> list[str]:
    """The run's lines at the top of the console: what is tested how, and what the settings
    change or leave out that a reader of the results should know before the cases run."""
    s, sel = settings, settings.selection
    info = s.info
    lines = [
        f"dmlconform: backend {info.name} ({info.description or s.backend}), feature level {sel.level.name}, "
        f"{sel.cases} cases per group, seed {sel.seed}, tier {sel.tier}"
        + (", isolated" if s.isolate else ""),
    ]
    lines += [f"dmlconform: note: {note}" for note in s.notes]
    if info.has_check and not getattr(info, "validates", False):
        lines.append(
            f"dmlconform: backend {info.name} defines check() but not validates = True: check() is "
            "not called and no validation cases run (set validates = True to be judged on "
            "accepting legal descs and rejecting illegal ones)"
        )
    if s.tolerance:
        lines.append(
            "dmlconform: tolerance overridden: "
            + ", ".join(f"{k}={v}" for k, v in s.tolerance.pairs().items())
        )
    if s.report_dir:
        lines.append(f"dmlconform: report directory {s.report_dir}")
    unsupported = unsupported_data_types(spec, sel.level, sel.operators, list(sel.data_types))
    if unsupported:
        lines.append(
            f"dmlconform: no selected operator supports {', '.join(unsupported)}: "
            "only its illegal-type validation cases (which must be rejected) run"
        )
    lines.append("dmlconform: generating cases")
    return lines


def write_incomplete(tr: Any, done: dict[str, Any]) -> None:
    """The INCOMPLETE RUN line (``done``: the run's completion fields), in a section of its own."""
    tr.section("dmlconform")
    tail = "; the counts below cover only the cases that ran" if done.get("ran") else ""
    tr.write_line(incomplete_line(done) + tail, red=True, bold=True)


def incomplete_line(done: dict[str, Any]) -> str:
    """``dmlconform: INCOMPLETE RUN (status): reason, N of M cases ran``: the status and reason of
    results.json, the same words as summary.md's and index.html's banner."""
    of = f" of {done['collected']}" if done.get("collected") is not None else ""
    return (
        f"dmlconform: INCOMPLETE RUN ({done['status']}): {done['stop_reason']}, {done['ran']}{of} cases ran"
    )


def write_reports(
    tr: Any, paths: list[Path], xml: str | None, error: str | None, summary: dict[str, int]
) -> None:
    """The reports written (``error``: why the HTML/markdown report was not), then the counts."""
    for p in paths:
        tr.write_line(f"report: {p}")
    if xml:
        tr.write_line(f"report: {Path(xml).resolve()}")
    if error:
        tr.write_line(f"HTML/markdown report not written: {error}")
    if not summary.get("total"):
        tr.write_line("dmlconform: no case ran")  # never "0 passed": nothing was judged
        return
    tr.write_line(
        "dmlconform: {total} cases: {passed} passed, {failed} failed, {skipped} skipped, "
        "{xfailed} xfailed, {xpassed} xpassed, {errors} errors".format(**summary)
    )


def write_known_findings(tr: Any, records: Iterable[dict[str, Any]]) -> None:
    """The known findings the run's xfailed cases were explained by, with their counts and the
    elements a per-slice finding excused."""
    from dmlconform.report.classes import finding_counts, finding_excused, findings_line

    records = list(records)
    hit = finding_counts(records)
    if hit:
        tr.write_line(f"dmlconform: known findings hit: {findings_line(hit, finding_excused(records))}")


def write_skip_reasons(tr: Any, records: Iterable[dict[str, Any]]) -> None:
    """The skipped cases, counted by reason (the ten most frequent)."""
    from dmlconform.report.results_reader import skip_reasons

    reasons = skip_reasons(records)
    if not reasons:
        return
    total = sum(n for _, n in reasons)
    tr.write_line(f"dmlconform: {total} skipped, by reason:")
    for reason, n in reasons[:SKIP_REASONS_SHOWN]:
        tr.write_line(f"  {n:6d}  {reason}")
    rest = reasons[SKIP_REASONS_SHOWN:]
    if rest:
        tr.write_line(f"  {sum(n for _, n in rest):6d}  ({len(rest)} other reasons: see results.json)")
