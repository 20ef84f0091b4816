"""Accuracy classes and known findings, summed over a run's cases (docs/results-json.md).

A case's class is the tightest tolerance model of :data:`LADDER` its outputs meet (the runner
judges it under ``default``, then ``tight`` on a pass or the looser models on a failure). A
backend's class for an operator x data type is the weakest over its cases: the tightest model
that every one of them meets. It is declared here, in the report package, because the report and
``report diff`` compute it from results.json without the runner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: The accuracy classes, tightest first; ``none``: meets none of them
LADDER = ("tight", "default", "fp16-statistics", "lenient")
NONE = "none"
#: Outcomes of a case whose outputs were judged (a skipped case says nothing about accuracy)
JUDGED = ("passed", "failed", "xfailed", "xpassed")


def rank(cls: str) -> int:
    """A class's place on the ladder (larger is weaker; ``none`` and unknown names weakest)."""
    return LADDER.index(cls) if cls in LADDER else len(LADDER)


def case_class(record: Mapping[str, Any]) -> str | None:
    """A numeric or metamorphic case's class: its recorded one, ``none`` for a failure no model
    judged (a rejected legal desc, a wrong shape: it meets no model), None when it says nothing."""
    if record.get("kind") == "validation" or record.get("outcome") not in JUDGED:
        return None
    cls = record.get("accuracy_class")
    if cls:
        return str(cls)
    return NONE if record.get("outcome") in ("failed", "xfailed") else None


def accuracy_classes(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """{operator: {data type: class}}: per operator x data type the weakest class of its cases."""
    table: dict[str, dict[str, str]] = {}
    for r in records:
        cls = case_class(r)
        if cls is None:
            continue
        row = table.setdefault(str(r.get("operator") or "?"), {})
        dt = str(r.get("data_type") or "-")
        if dt not in row or rank(cls) > rank(row[dt]):
            row[dt] = cls
    return {op: dict(sorted(row.items())) for op, row in sorted(table.items())}


def finding_counts(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """{finding: cases}: how many cases each known finding explained (xfailed), most first."""
    counts: dict[str, int] = {}
    for r in records:
        finding = r.get("known_finding")
        if finding and r.get("outcome") == "xfailed":
            counts[str(finding)] = counts.get(str(finding), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def excused_figures(excused: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Summed results.json ``excused`` records: the elements per-slice findings excused of their
    cases' output elements (``elements``, ``of``, in ``cases`` cases) and the cases taken whole."""
    t = {"elements": 0, "of": 0, "cases": 0, "whole": 0}
    for e in excused:
        if e.get("scope") == "slices":
            t["cases"] += 1
            t["elements"] += int(e.get("elements") or 0)
            t["of"] += int(e.get("of") or 0)
        else:
            t["whole"] += 1
    return t


def _excused(r: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A record's ``excused`` where the finding took the case (xfailed), else None."""
    e = r.get("excused")
    return e if isinstance(e, Mapping) and r.get("outcome") == "xfailed" and e.get("finding") else None


def finding_excused(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """{finding: :func:`excused_figures`} over the xfailed cases a ``fails`` finding took."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        e = _excused(r)
        if e is not None:
            by.setdefault(str(e["finding"]), []).append(e)
    return {f: excused_figures(es) for f, es in by.items()}


def case_excused(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """:func:`excused_figures` of these records' xfailed cases, whatever their finding."""
    return excused_figures(e for r in records if (e := _excused(r)) is not None)


def excused_text(figures: Mapping[str, int] | None) -> str:
    """``excused: 64 of 256 elements in 2 cases`` (per-slice findings), ``excused: 3 cases
    whole`` (findings that took their cases whole), both where a finding did either; empty
    for a bound (it excuses nothing: it judges)."""
    if not figures:
        return ""
    parts = []
    if figures.get("cases"):
        n = figures["cases"]
        parts.append(
            f"{figures['elements']:,} of {figures['of']:,} elements in {n} case{'s' if n != 1 else ''}"
        )
    if figures.get("whole"):
        n = figures["whole"]
        parts.append(f"{n} case{'s' if n != 1 else ''} whole")
    return "excused: " + ", ".join(parts) if parts else ""


def findings_line(counts: Mapping[str, int], excused: Mapping[str, Mapping[str, int]] | None = None) -> str:
    """``F1 (123 cases), F10 (72 cases; excused: 1,234 of 5,678 elements in 72 cases), F9 (14
    cases; excused: 14 cases whole)``: ``excused`` is :func:`finding_excused`'s."""

    def one(f: str, n: int) -> str:
        text = excused_text((excused or {}).get(f))
        return f"{f} ({n} case{'s' if n != 1 else ''}{'; ' + text if text else ''})"

    return ", ".join(one(f, n) for f, n in counts.items())


def worse_classes(
    old: Mapping[str, Mapping[str, str]], new: Mapping[str, Mapping[str, str]]
) -> list[tuple[str, str, str, str]]:
    """(operator, data type, old class, new class) for every operator x data type of both runs
    whose class got weaker."""
    out = []
    for op, row in new.items():
        for dt, cls in row.items():
            before = (old.get(op) or {}).get(dt)
            if before is not None and rank(cls) > rank(before):
                out.append((op, dt, before, cls))
    return out
