"""``dmlconform report diff``: what changed between two runs.

CI keeps a baseline results.json and gates on this comparison rather than on "zero failures", so a
backend with known failures can still be held to "no new ones". A regression is a case failing now
that was not failing before (it passed, was an expected failure, was skipped, or did not exist);
error figures are compared too, because a case that stays inside its budget but got much worse is
the early warning of the next regression.

The comparison is symmetric: swapping OLD and NEW turns every regression into a fix (or, for a
case that was skipped or absent, into a failure that is no longer run), every worse error change
into a better one with the same crossing. And it fails on lost cases: a case of OLD with no
verdict in NEW (absent, or skipped now) is a gap in the gate, so the diff says so and fails
unless told that NEW is meant to cover less (``allow_lost``).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dmlconform.report.classes import accuracy_classes, worse_classes
from dmlconform.report.results_reader import CaseRecord, Results, Stack

DEFAULT_FACTOR = 1.5
# Below one ULP a change in the error is noise (0.1 -> 0.3 ULP is a factor of three), so ratios are
# taken between figures clamped to at least this floor.
ULP_FLOOR = 1.0


@dataclass
class CaseChange:
    """One case whose outcome flipped: ``before`` is None for a case that did not exist."""

    id: str
    operator: str
    feature_level: str
    data_type: str
    before: str | None
    after: str | None
    message: str | None = None
    max_ulp: float | None = None
    budget_ulp: float | None = None
    ratio: float | None = None  # the failing side's worst error / budget, when it has one


@dataclass
class ErrorChange:
    """A case whose max_ulp moved by more than the factor, or crossed its budget: inside it (a
    pass, or a worst error within its budget) on one side and outside it on the other."""

    id: str
    operator: str
    feature_level: str
    data_type: str
    before_ulp: float
    after_ulp: float
    budget_ulp: float | None
    crossed_budget: bool
    worse: bool
    before_ratio: float | None = None
    after_ratio: float | None = None


@dataclass
class ClassChange:
    """An operator x data type whose accuracy class got weaker (report/classes.py): the
    tightest tolerance model all its cases meet is a looser one now (tight -> default, ...)."""

    operator: str
    data_type: str
    before: str
    after: str


@dataclass
class StackChange:
    """A fact of the backend's stack (``versions`` key ``<backend>.<fact>``) that differs between
    the runs: the comparison is then also one of, say, two DirectML releases or two drivers."""

    stack: str
    key: str
    label: str
    before: str | None
    after: str | None


@dataclass
class Diff:
    """The comparison of two results files; ``regressions`` decides the exit status."""

    old_backend: str
    new_backend: str
    old_summary: dict[str, int]
    new_summary: dict[str, int]
    regressions: list[CaseChange] = field(default_factory=list)
    fixed: list[CaseChange] = field(default_factory=list)
    error_changes: list[ErrorChange] = field(default_factory=list)
    added: int = 0
    removed: list[str] = field(default_factory=list)
    stack_changes: list[StackChange] = field(default_factory=list)
    factor: float = DEFAULT_FACTOR
    # cases failing in OLD that NEW no longer runs (skipped or absent): not fixed
    unrun: list[CaseChange] = field(default_factory=list)
    # cases that ran in OLD and are skipped in NEW (with ``removed``, the lost cases)
    skipped_now: list[str] = field(default_factory=list)
    old_ran: int = 0
    allow_lost: bool = False
    # operator x data types whose accuracy class got weaker (named; the gate is the cases')
    worse_classes: list[ClassChange] = field(default_factory=list)

    @property
    def has_regressions(self) -> bool:
        return bool(self.regressions)

    @property
    def lost(self) -> int:
        """Cases of OLD with no verdict in NEW."""
        return len(self.removed) + len(self.skipped_now)

    @property
    def fails(self) -> bool:
        """Whether the diff fails the gate: a regression, or lost cases not allowed."""
        return self.has_regressions or (self.lost > 0 and not self.allow_lost)

    def lost_line(self) -> str | None:
        if not self.lost:
            return None
        verdict = "accepted (--allow-lost)" if self.allow_lost else "the diff fails (--allow-lost accepts it)"
        return (
            f"LOST: {self.lost} case(s) of OLD have no verdict in NEW ({len(self.removed)} absent, "
            f"{len(self.skipped_now)} skipped now): NEW covers less than OLD; {verdict}"
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["has_regressions"] = self.has_regressions
        data["lost"] = self.lost
        data["fails"] = self.fails
        return _finite(data)

    def format_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def format_text(self) -> str:
        lines = [
            f"old: {self.old_backend}  {_counts(self.old_summary)}",
            f"new: {self.new_backend}  {_counts(self.new_summary)}",
            f"{len(self.regressions)} regression(s), {len(self.fixed)} fixed, "
            f"{len(self.error_changes)} error change(s), {self.added} new case(s), "
            f"{len(self.removed)} removed, {len(self.skipped_now)} skipped now",
        ]
        if self.lost_line():
            lines.append(str(self.lost_line()))
        lines += [f"{title}: {_stack_line(changes)}" for title, changes in _by_stack(self.stack_changes)]
        if self.worse_classes:
            lines.append("")
            lines.append("Accuracy classes that got worse (the tightest model every case meets):")
            lines += [f"  {c.operator} {c.data_type}: {c.before} -> {c.after}" for c in self.worse_classes]
        if self.regressions:
            lines.append("")
            lines.append("Regressions:")
            lines += [f"  {_change_line(c)}" for c in self.regressions]
        if self.fixed:
            lines.append("")
            lines.append("Fixed:")
            lines += [f"  {_change_line(c)}" for c in self.fixed]
        if self.unrun:
            lines.append("")
            lines.append("Failing before, no longer run (not fixed):")
            lines += [f"  {_change_line(c)}" for c in self.unrun]
        if self.error_changes:
            lines.append("")
            lines.append(f"Error changes (max_ulp by more than {self.factor:g}x or across the budget):")
            lines += [f"  {_error_line(c)}" for c in self.error_changes]
        if self.removed:
            lines.append("")
            more = f", ... ({len(self.removed) - 20} more)" if len(self.removed) > 20 else ""
            lines.append(f"Removed ({len(self.removed)}): " + ", ".join(self.removed[:20]) + more)
        if self.skipped_now:
            lines.append("")
            more = f", ... ({len(self.skipped_now) - 20} more)" if len(self.skipped_now) > 20 else ""
            lines.append(f"Skipped now ({len(self.skipped_now)}): " + ", ".join(self.skipped_now[:20]) + more)
        return "\n".join(lines) + "\n"

    def format_markdown(self) -> str:
        lines = [
            "## dmlconform report diff",
            "",
            *_md_summary_table(
                ("old", self.old_backend, self.old_summary), ("new", self.new_backend, self.new_summary)
            ),
            "",
            f"**{len(self.regressions)} regression(s)**, {len(self.fixed)} fixed, "
            f"{len(self.error_changes)} error change(s), {self.added} new case(s), {len(self.removed)} removed, "
            f"{len(self.skipped_now)} skipped now.",
        ]
        if self.lost_line():
            lines += ["", f"**{_md(str(self.lost_line()))}**"]
        for title, changes in _by_stack(self.stack_changes):
            lines += ["", f"**{_md(title)} changed**: " + _stack_line(changes, code=True)]
        if self.worse_classes:
            lines += _md_worse_classes(self.worse_classes)
        for title, changes in (
            ("Regressions", self.regressions),
            ("Fixed", self.fixed),
            ("Failing before, no longer run", self.unrun),
        ):
            if changes:
                lines += _md_case_changes(title, changes)
        if self.error_changes:
            lines += _md_error_changes(self.error_changes)
        return "\n".join(lines) + "\n"


def diff_results(
    old: Results, new: Results, factor: float = DEFAULT_FACTOR, allow_lost: bool = False
) -> Diff:
    """Compare two runs case by case (matched on the stable case id)."""
    old_by_id = {c.id: c for c in old.cases}
    new_by_id = {c.id: c for c in new.cases}
    diff = Diff(
        old_backend=_backend_label(old),
        new_backend=_backend_label(new),
        old_summary=old.summary(),
        new_summary=new.summary(),
        factor=factor,
        allow_lost=allow_lost,
        old_ran=sum(1 for c in old.cases if c.outcome != "skipped"),
    )
    for case in new.cases:
        before = old_by_id.get(case.id)
        if before is None:
            diff.added += 1
            if case.failing:
                diff.regressions.append(_change(None, case))
            continue
        if case.failing and not before.failing:
            diff.regressions.append(_change(before, case))
        elif before.failing and not case.failing:
            (diff.unrun if case.outcome == "skipped" else diff.fixed).append(_change(before, case))
        if before.outcome != "skipped" and case.outcome == "skipped":
            diff.skipped_now.append(case.id)
        change = _error_change(before, case, factor)
        if change is not None:
            diff.error_changes.append(change)
    for case in old.cases:
        if case.id not in new_by_id:
            diff.removed.append(case.id)
            if case.failing:
                diff.unrun.append(_change(case, None))
    diff.stack_changes = stack_changes(old.stacks, new.stacks)
    diff.worse_classes = [
        ClassChange(*change)
        for change in worse_classes(
            accuracy_classes(c.raw for c in old.cases), accuracy_classes(c.raw for c in new.cases)
        )
    ]
    diff.error_changes.sort(key=lambda e: (not e.worse, -_log_ratio(e), e.id))
    return diff


def stack_changes(old: list[Stack], new: list[Stack]) -> list[StackChange]:
    """Facts that differ between two runs' stacks of the same name (a stack only one run has,
    as when two different backends are compared, is not a change of stack)."""
    changes = []
    new_by_name = {stack.name: stack for stack in new}
    for before in old:
        after = new_by_name.get(before.name)
        if after is None:
            continue
        old_values = {f.key: f.value for f in before.facts}
        new_values = {f.key: f.value for f in after.facts}
        labels = {f.key: f.label for f in [*after.facts, *before.facts]}
        for key in labels:
            if old_values.get(key) != new_values.get(key):
                changes.append(
                    StackChange(after.title, key, labels[key], old_values.get(key), new_values.get(key))
                )
    return changes


def _by_stack(changes: list[StackChange]) -> list[tuple[str, list[StackChange]]]:
    grouped: dict[str, list[StackChange]] = {}
    for change in changes:
        grouped.setdefault(change.stack, []).append(change)
    return list(grouped.items())


def _stack_line(changes: list[StackChange], code: bool = False) -> str:
    def show(value: str | None) -> str:
        if value is None:
            return "(not reported)"
        if not code:
            return value
        return "`" + value.replace("`", "'").replace("\r", " ").replace("\n", " ") + "`"  # shown literally

    return "; ".join(
        f"{_md(c.label) if code else c.label} {show(c.before)} -> {show(c.after)}" for c in changes
    )


def _change(before: CaseRecord | None, after: CaseRecord | None) -> CaseChange:
    """The change of one case; ``after`` None for a case NEW does not have."""
    shown = after if after is not None and (after.failing or before is None) else before
    assert shown is not None
    return CaseChange(
        id=shown.id,
        operator=shown.operator,
        feature_level=shown.feature_level,
        data_type=shown.data_type,
        before=before.outcome if before else None,
        after=after.outcome if after else None,
        message=shown.message,
        max_ulp=shown.max_ulp,
        budget_ulp=shown.budget_ulp,
        ratio=shown.ratio,
    )


def _within(case: CaseRecord) -> bool:
    """Whether a case landed inside its budget: it passed, or (an expected or unexpected failure)
    its worst element's error / budget, the figure that decides, is at most 1."""
    if case.outcome in ("passed", "xpassed"):
        return True
    ratio = case.ratio
    return ratio is not None and ratio <= 1


def _error_change(before: CaseRecord, after: CaseRecord, factor: float) -> ErrorChange | None:
    """A function of the pair alone and symmetric in it: swapping the sides swaps the figures,
    flips ``worse`` and keeps ``crossed_budget``."""
    old_ulp, new_ulp = before.max_ulp, after.max_ulp
    if old_ulp is None or new_ulp is None:
        return None
    budget = after.budget_ulp if after.budget_ulp is not None else before.budget_ulp
    # only figures that decided a verdict can cross a budget (a relation judged on a sum has none)
    crossed = before.ratio is not None and after.ratio is not None and _within(before) != _within(after)
    if math.isnan(old_ulp) or math.isnan(new_ulp):
        moved = math.isnan(old_ulp) != math.isnan(new_ulp)
        worse = math.isnan(new_ulp)
    else:
        a, b = max(old_ulp, ULP_FLOOR), max(new_ulp, ULP_FLOOR)
        moved = (b / a > factor or a / b > factor) if math.isfinite(a) and math.isfinite(b) else a != b
        worse = b > a
    if crossed:
        worse = _within(before)  # leaving the budget is worse, entering it better, whatever the ULP
    if not (moved or crossed):
        return None
    return ErrorChange(
        id=after.id,
        operator=after.operator,
        feature_level=after.feature_level,
        data_type=after.data_type,
        before_ulp=old_ulp,
        after_ulp=new_ulp,
        budget_ulp=budget,
        crossed_budget=crossed,
        worse=worse,
        before_ratio=before.ratio,
        after_ratio=after.ratio,
    )


def _log_ratio(e: ErrorChange) -> float:
    a, b = max(e.before_ulp, ULP_FLOOR), max(e.after_ulp, ULP_FLOOR)
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(math.log(b / a))


def _backend_label(results: Results) -> str:
    level = results.data.get("feature_level")
    return f"{results.backend_name}" + (f" @ {level}" if level else "")


def _counts(summary: dict[str, int]) -> str:
    keys = ("total", "passed", "failed", "errors", "skipped", "xfailed", "xpassed")
    return " ".join(f"{k}={summary.get(k, 0)}" for k in keys)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.4g}"


def _change_line(c: CaseChange) -> str:
    figures = f" (error / budget {_fmt(c.ratio)})" if c.ratio is not None else ""
    message = f": {c.message.splitlines()[0][:160]}" if c.message else ""
    return f"{c.id}  {c.before or 'new'} -> {c.after or 'gone'}{figures}{message}"


def _error_line(e: ErrorChange) -> str:
    note = ("worse" if e.worse else "better") + (", crossed budget" if e.crossed_budget else "")
    ratios = ""
    if e.before_ratio is not None or e.after_ratio is not None:
        ratios = f"; error / budget {_fmt(e.before_ratio)} -> {_fmt(e.after_ratio)}"
    return f"{e.id}  {_fmt(e.before_ulp)} -> {_fmt(e.after_ulp)} max ULP ({note}{ratios})"


def _md(text: str) -> str:
    """Markdown table cell text: no pipes or newlines to break the row, no raw HTML."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("|", "\\|")
        .replace("\r", " ")
        .replace("\n", " ")
    )


def _md_summary_table(*runs: tuple[str, str, dict[str, int]]) -> list[str]:
    """One row per run: (label, backend, summary)."""
    lines = [
        "| | backend | total | passed | failed | errors | skipped | xfailed |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, backend, summary in runs:
        lines.append(
            f"| {label} | {_md(backend)} | {summary.get('total', 0)} | {summary.get('passed', 0)} | "
            f"{summary.get('failed', 0)} | {summary.get('errors', 0)} | {summary.get('skipped', 0)} | "
            f"{summary.get('xfailed', 0)} |"
        )
    return lines


def _md_worse_classes(changes: list[ClassChange]) -> list[str]:
    return [
        "",
        "### Accuracy classes that got worse",
        "",
        "| operator | data type | before | after |",
        "|---|---|---|---|",
        *(f"| {_md(c.operator)} | {_md(c.data_type)} | {c.before} | {c.after} |" for c in changes),
    ]


def _md_case_changes(title: str, changes: list[CaseChange]) -> list[str]:
    return [
        "",
        f"### {title}",
        "",
        "| case | before | after | error / budget | message |",
        "|---|---|---|---:|---|",
        *(
            f"| {_md(c.id)} | {c.before or 'new'} | {c.after or 'gone'} | {_fmt(c.ratio)} | "
            f"{_md((c.message or '')[:160])} |"
            for c in changes
        ),
    ]


def _md_error_changes(changes: list[ErrorChange]) -> list[str]:
    lines = [
        "",
        "### Error changes",
        "",
        "| case | before ULP | after ULP | error / budget | |",
        "|---|---:|---:|---:|---|",
    ]
    for e in changes:
        note = ("worse" if e.worse else "better") + (", crossed budget" if e.crossed_budget else "")
        lines.append(
            f"| {_md(e.id)} | {_fmt(e.before_ulp)} | {_fmt(e.after_ulp)} | "
            f"{_fmt(e.before_ratio)} -> {_fmt(e.after_ratio)} | {note} |"
        )
    return lines


def _finite(value: Any) -> Any:
    """JSON without Infinity/NaN literals (not JSON), spelled as strings instead."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
