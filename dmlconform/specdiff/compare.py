"""Which views are compared, and the level each difference is attributed to.

A level range is walked one level at a time, so that each change is attributed to the level where
it happens (the "DML_FEATURE_LEVEL_X and above" of the docs). A reversed range walks downwards
and yields the mirror image: the same levels, before/after swapped, ``rule-on`` read as
``rule-off``. Two specs are compared level by level, and each difference is reported once per
contiguous run of levels where it holds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dmlconform.specdiff.changes import Change, DiffResult, Side
from dmlconform.specdiff.views import diff_views, ordered_union, view
from dmlconform.specification.spec import FeatureLevel, Operator, Spec


def level_diff(
    spec: Spec,
    from_level: str | FeatureLevel,
    to_level: str | FeatureLevel,
    operators: list[str] | None = None,
) -> DiffResult:
    """Changes from ``from_level`` to ``to_level`` of one spec, each at the level where it happens.

    Upwards, the step ``L-1 -> L`` is attributed to ``L``; downwards, ``L -> L-1`` is too, so a
    reversed range lists the same levels with each change mirrored.
    """
    a, b = spec.level(from_level), spec.level(to_level)
    names = _operator_names(spec, operators)
    result = DiffResult("levels", a.name, b.name)
    step = 1 if b >= a else -1
    pairs = [(spec.levels[i], spec.levels[i + step]) for i in range(a.index, b.index, step)]
    for name in names:
        changes: list[Change] = []
        for lo, hi in pairs:
            at = hi if step == 1 else lo
            v1, v2 = view(spec, name, lo), view(spec, name, hi)
            assert v1 is not None and v2 is not None
            changes += diff_views(at.name, v1, v2, (Side(spec, lo, lo.name), Side(spec, hi, hi.name)))
        result.operators[name] = changes
    return result


def _operator_names(spec: Spec, wanted: list[str] | None, other: Spec | None = None) -> list[str]:
    """The operators to diff: those named (any name Spec.operator takes; unknown raises KeyError), else all."""
    known = dict(spec.operators)
    if other is not None:
        known.update({k: v for k, v in other.operators.items() if k not in known})
    if not wanted:
        return sorted(known)
    out = []
    for w in wanted:
        try:
            key = spec.operator(w).name
        except KeyError:
            if other is None:
                raise
            key = other.operator(w).name  # an operator only the other spec has
        if key not in out:
            out.append(key)
    return out


def spec_diff(
    spec_a: Spec,
    spec_b: Spec,
    level: str | None = None,
    operators: list[str] | None = None,
    label_a: str | None = None,
    label_b: str | None = None,
) -> DiffResult:
    """Differences between two spec directories (two doc revisions).

    At one ``level``: the two views compared there. Without one: the views compared at every level
    both specs know, and each difference reported once with the contiguous range of levels where
    it holds (``"3_1..6_4"``), so that "4D only" vs "1 to 8 from 3_1" reads as one line, not
    eight. Differences that no level decides (doc notes, the list of levels) come with ``"*"``.
    """
    label_a = label_a or str(spec_a.directory)
    label_b = label_b or str(spec_b.directory)
    names = _operator_names(spec_a, operators, spec_b)
    result = DiffResult("specs", label_a, label_b)
    levels = _levels_compared(spec_a, spec_b, level, result)
    for name in names:
        if name not in spec_a.operators or name not in spec_b.operators:
            result.operators[name] = [_presence_change(spec_a, spec_b, name, label_a, label_b)]
            continue
        per_level: list[tuple[FeatureLevel, list[Change]]] = []
        for lv in levels:
            lv_a = spec_a.level(lv.name)
            v1, v2 = view(spec_a, name, lv_a), view(spec_b, name, lv)
            assert v1 is not None and v2 is not None
            sides = (
                Side(spec_a, lv_a, f"{label_a} at {lv.name}"),
                Side(spec_b, lv, f"{label_b} at {lv.name}"),
            )
            per_level.append((lv, diff_views(lv.name, v1, v2, sides)))
        changes = _merge_ranges(per_level, [x.name for x in levels])
        changes += _doc_note_changes(spec_a.operators[name], spec_b.operators[name])
        result.operators[name] = changes
    return result


def _levels_compared(spec_a: Spec, spec_b: Spec, level: str | None, result: DiffResult) -> list[FeatureLevel]:
    """``level`` alone (known to both specs, else it raises), else every level both know; the
    result records the level, or a ``feature-levels`` change when the two lists differ."""
    common_levels = [lv for lv in spec_b.levels if lv.name in {x.name for x in spec_a.levels}]
    if level is not None:
        lv_b = spec_b.level(level)
        spec_a.level(level)  # unknown there: raise too
        result.level = lv_b.name
        return [lv_b]
    la, lb = [x.name for x in spec_a.levels], [x.name for x in spec_b.levels]
    if la != lb:
        result.common.append(Change("*", "feature-levels", "feature levels", la, lb))
    return common_levels


def _presence_change(spec_a: Spec, spec_b: Spec, name: str, label_a: str, label_b: str) -> Change:
    """The one change of an operator only one spec has: no level decides it."""
    present = spec_b if name in spec_b.operators else spec_a
    intro = {"introduced": present.operators[name].introduced}
    added = name in spec_b.operators
    return Change(
        "*",
        "operator-added" if added else "operator-removed",
        name,
        None if added else intro,
        intro if added else None,
        None,
        f"only in {label_b if added else label_a}",
    )


def _merge_ranges(per_level: list[tuple[FeatureLevel, list[Change]]], order: list[str]) -> list[Change]:
    """One change per (difference, contiguous run of levels), labelled ``first..last``."""
    runs: dict[tuple[Any, ...], list[list[Change]]] = {}
    firsts: list[tuple[Any, ...]] = []
    for _, changes in per_level:
        for c in changes:
            k = c.key()
            if k not in runs:
                runs[k] = []
                firsts.append(k)
            seq = runs[k]
            if seq and order.index(seq[-1][-1].level) == order.index(c.level) - 1:
                seq[-1].append(c)
            else:
                seq.append([c])
    out: list[tuple[int, int, int, Change]] = []
    for n, k in enumerate(firsts):
        for run in runs[k]:
            first, last = run[0], run[-1]
            label = first.level if first is last else f"{first.level}..{last.level}"
            out.append((order.index(first.level), order.index(last.level), n, replace(first, level=label)))
    return [t[-1] for t in sorted(out, key=lambda t: t[:3])]


def _doc_note_changes(a: Operator, b: Operator) -> list[Change]:
    notes_a = {n.get("id", n.get("subject")): n for n in a.doc_notes}
    notes_b = {n.get("id", n.get("subject")): n for n in b.doc_notes}
    out = []
    for nid in ordered_union(notes_a, notes_b):
        na, nb = notes_a.get(nid), notes_b.get(nid)
        ca = {"subject": na.get("subject"), "choice": na.get("choice")} if na else None
        cb = {"subject": nb.get("subject"), "choice": nb.get("choice")} if nb else None
        if ca == cb:
            continue
        kind = "doc-note-added" if ca is None else "doc-note-removed" if cb is None else "doc-note-changed"
        out.append(
            Change("*", kind, str(nid), ca, cb, None, f"{b.name} doc_notes" if nb else f"{a.name} doc_notes")
        )
    return out
