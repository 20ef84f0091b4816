"""What changed between two feature levels, or between two spec revisions (``spec-diff``).

The diff is computed on *views*: what one operator admits at one (spec, level) side: whether it
exists, its members, the support-table cells in force, the rules in force (its own, the
tensor-desc rules, the activation rules), the activations that may be fused and the maximum
DimensionCount. Two views are compared the same way whether they come from two levels of one
spec or from one level of two specs, so both forms of the command share every line of logic.

A level range is walked one level at a time, so that each change is attributed to the level where
it happens (the "DML_FEATURE_LEVEL_X and above" of the docs). A reversed range walks downwards
and yields the mirror image: the same levels, before/after swapped, ``rule-on`` read as
``rule-off``.

A witness is a concrete desc that is legal on one side and illegal on the other, the illegal side
reporting the rule the change is about; every witness is confirmed by :func:`validate` on both
sides, so the diff never claims a difference the validator does not see. Candidates come from the
generators (``dmlconform.generation.legal`` and ``.illegal``) when they are installed, and from a
small constructive builder plus single-member mutations here, driven by rule kinds and the support
table only.

Nothing here names an operator, a member or an activation: all of that comes from the spec.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from dmlconform.specification.desc import ActivationDesc, OperatorDesc, TensorDesc
from dmlconform.specification.model import FeatureLevel, Operator, Rule, Spec, format_source
from dmlconform.specification.rules import fixed_dims
from dmlconform.specification.validate import active_rules, validate

# Each kind and the kind a reversed diff reports for the same change.
MIRROR: dict[str, str] = {
    "operator-added": "operator-removed",
    "member-added": "member-removed",
    "member-changed": "member-changed",
    "support-dimension-counts": "support-dimension-counts",
    "support-data-types": "support-data-types",
    "rule-on": "rule-off",
    "rule-changed": "rule-changed",
    "rule-renamed": "rule-renamed",
    "activation-added": "activation-removed",
    "activation-changed": "activation-changed",
    "tensor-limit": "tensor-limit",
    "doc-note-added": "doc-note-removed",
    "doc-note-changed": "doc-note-changed",
    "feature-levels": "feature-levels",
}
MIRROR.update({v: k for k, v in list(MIRROR.items())})
KINDS = tuple(sorted(MIRROR))

# The rule kind whose violation shows each kind of change, for changes that are not about one
# rule (a support cell is checked by the support_* rule, an activation by activation_available).
_CHECKED_BY = {
    "operator-added": "available",
    "operator-removed": "available",
    "support-dimension-counts": "support_dimension_count",
    "support-data-types": "support_data_type",
    "activation-added": "activation_available",
    "activation-removed": "activation_available",
    "tensor-limit": "tensor_dimension_count_range",
}


# --------------------------------------------------------------------------------------------
# Result objects


@dataclass(frozen=True)
class Side:
    """One end of a comparison: a spec at a level; ``label`` is how the output names it."""

    spec: Spec
    level: FeatureLevel
    label: str


@dataclass(frozen=True)
class Witness:
    """A desc legal at ``legal_at`` and illegal at ``illegal_at`` (``violations`` there), or
    ``desc is None`` with ``reason`` saying why no single desc shows the change."""

    desc: OperatorDesc | None
    legal_at: str | None = None
    illegal_at: str | None = None
    violations: tuple[str, ...] = ()
    reason: str = ""
    tried: int = 0
    across_range: bool | None = None

    def to_json(self) -> dict[str, Any]:
        if self.desc is None:
            return {"found": False, "reason": self.reason, "tried": self.tried}
        return {
            "found": True,
            "legal_at": self.legal_at,
            "illegal_at": self.illegal_at,
            "violations": list(self.violations),
            "across_range": self.across_range,
            "desc": self.desc.to_dict(),
        }


@dataclass(frozen=True)
class Change:
    """One difference. ``level`` is where it happens (a level diff), or the level or range of
    levels ``"3_1..6_4"`` where two specs differ (a spec diff; ``"*"`` when not level-bound).
    ``before``/``after`` are JSON values (``None`` for "absent"); ``rule`` is the id of the rule
    whose verdict changes, ``source`` its citation."""

    level: str
    kind: str
    subject: str
    before: Any
    after: Any
    rule: str | None = None
    source: str = ""
    witness: Witness | None = field(default=None, compare=False)
    sides: tuple[Side, Side] | None = field(default=None, compare=False, repr=False)

    def key(self) -> tuple[Any, ...]:
        """Identity without the level, for merging the same difference over several levels."""
        return (self.kind, self.subject, _canon(self.before), _canon(self.after), self.rule)

    def mirrored(self) -> Change:
        subject = self.subject
        if self.kind == "rule-renamed":
            subject = " -> ".join(reversed(subject.split(" -> ")))
        sides = (self.sides[1], self.sides[0]) if self.sides else None
        return replace(
            self, kind=MIRROR[self.kind], subject=subject, before=self.after, after=self.before, sides=sides
        )

    def to_json(self) -> dict[str, Any]:
        out = {
            "level": self.level,
            "kind": self.kind,
            "subject": self.subject,
            "before": self.before,
            "after": self.after,
            "rule": self.rule,
            "source": self.source,
        }
        if self.witness is not None:
            out["witness"] = self.witness.to_json()
        return out


@dataclass
class DiffResult:
    """Every change, per operator, in output order. ``mode`` is ``levels`` or ``specs``."""

    mode: str
    from_: str
    to: str
    level: str | None = None
    operators: dict[str, list[Change]] = field(default_factory=dict)
    common: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.common) or any(self.operators.values())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "from": self.from_, "to": self.to}
        if self.mode == "specs":
            out["level"] = self.level
        out["operators"] = {
            name: {"changes": [c.to_json() for c in changes]} for name, changes in self.operators.items()
        }
        if self.common:
            out["common"] = {"changes": [c.to_json() for c in self.common]}
        return out


# --------------------------------------------------------------------------------------------
# Views


@dataclass(frozen=True)
class View:
    """What one operator admits on one side (see the module docstring)."""

    operator: Operator
    available: bool
    members: dict[str, dict[str, Any]]
    support: dict[str, dict[str, list[Any]]]
    support_source: str
    support_since: int
    rules: dict[str, Rule]
    activations: dict[str, dict[str, Any]]
    activation_rule: Rule | None
    max_dimension_count: int | None


def view(spec: Spec, operator: str, level: FeatureLevel) -> View | None:
    """The operator's view at ``level``, or None when ``spec`` has no such operator."""
    op = spec.operators.get(operator)
    if op is None:
        return None
    available = level.index >= spec.level(op.introduced).index
    row = op.support_row(spec, level)
    rules = {r.id: r for r, _ in active_rules(spec, op.name, level)}
    has_activation = any(m.type == "activation" for m in op.members)
    activations = {}
    if has_activation:
        activations = {
            a.name: {"since": a.since, "formula": a.formula, "parameters": list(a.parameter_names)}
            for a in spec.activations.values()
            if spec.level(a.since).index <= level.index
        }
    return View(
        operator=op,
        available=available,
        members={m.name: _member_json(m) for m in op.members},
        support={
            name: {"dimension_counts": list(t.dimension_counts), "data_types": list(t.data_types)}
            for name, t in row.tensors.items()
        },
        support_source=format_source(row.source),
        support_since=spec.level(row.since).index,
        rules=rules,
        activations=activations,
        activation_rule=next((r for r in spec.activation_rules if r.kind == "activation_available"), None),
        max_dimension_count=level.max_dimension_count if op.tensor_members else None,
    )


def _member_json(m: Any) -> dict[str, Any]:
    out = {"kind": m.kind, "type": m.type, "nullable": m.nullable}
    if m.default is not None:
        out["default"] = m.default
    if m.size_member:
        out["size_member"] = m.size_member
    return out


def rule_content(rule: Rule) -> dict[str, Any]:
    """What a rule requires, without where it is written: its kind and parameters."""
    return {"kind": rule.kind, **rule.params}


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _rule_of_kind(v: View, kind: str) -> Rule | None:
    return next((r for r in v.rules.values() if r.kind == kind), None)


def diff_views(level: str, before: View, after: View, sides: tuple[Side, Side]) -> list[Change]:
    """Every difference between two views of one operator, attributed to ``level``."""
    if before.available != after.available:
        op = after.operator if after.available else before.operator
        rule = _rule_of_kind(after if after.available else before, "available")
        kind = "operator-added" if after.available else "operator-removed"
        intro = {"introduced": op.introduced}
        return [
            Change(
                level,
                kind,
                op.name,
                None if after.available else intro,
                intro if after.available else None,
                rule.id if rule else None,
                rule.source_text() if rule else "",
                sides=sides,
            )
        ]
    if not after.available:
        return []
    out: list[Change] = []

    def add(kind: str, subject: str, b: Any, a: Any, rule: Rule | None, source: str | None = None) -> None:
        out.append(
            Change(
                level,
                kind,
                subject,
                b,
                a,
                rule.id if rule else None,
                source if source is not None else (rule.source_text() if rule else ""),
                sides=sides,
            )
        )

    for name in _union(before.members, after.members):
        b, a = before.members.get(name), after.members.get(name)
        if b != a:
            kind = "member-added" if b is None else "member-removed" if a is None else "member-changed"
            add(kind, name, b, a, None, "")

    if before.max_dimension_count != after.max_dimension_count:
        add(
            "tensor-limit",
            "max DimensionCount",
            before.max_dimension_count,
            after.max_dimension_count,
            _rule_of_kind(after, "tensor_dimension_count_range")
            or _rule_of_kind(before, "tensor_dimension_count_range"),
        )

    for tensor in _union(before.support, after.support):
        b, a = before.support.get(tensor, {}), after.support.get(tensor, {})
        for cell, kind, rule_kind in (
            ("dimension_counts", "support-dimension-counts", "support_dimension_count"),
            ("data_types", "support-data-types", "support_data_type"),
        ):
            if b.get(cell) != a.get(cell):
                # cite the row that makes the difference: the later one, whichever way we walk
                newer = after if after.support_since >= before.support_since else before
                src = newer.support_source
                rule = _rule_of_kind(after, rule_kind) or _rule_of_kind(before, rule_kind)
                add(kind, tensor, b.get(cell), a.get(cell), rule, src)

    offs = {i: r for i, r in before.rules.items() if i not in after.rules}
    ons = {i: r for i, r in after.rules.items() if i not in before.rules}
    for rid in list(offs):  # the same requirement under a new id: a rename, not off + on
        match = next((n for n, r in ons.items() if rule_content(r) == rule_content(offs[rid])), None)
        if match is not None:
            add(
                "rule-renamed",
                f"{rid} -> {match}",
                rule_content(offs[rid]),
                rule_content(ons[match]),
                ons[match],
            )
            del offs[rid], ons[match]
    for rid in _union(before.rules, after.rules):
        b_rule, a_rule = before.rules.get(rid), after.rules.get(rid)
        if rid in offs:
            add("rule-off", rid, rule_content(b_rule), None, b_rule)  # type: ignore[arg-type]
        elif rid in ons:
            add("rule-on", rid, None, rule_content(a_rule), a_rule)  # type: ignore[arg-type]
        elif b_rule is not None and a_rule is not None and rule_content(b_rule) != rule_content(a_rule):
            add("rule-changed", rid, rule_content(b_rule), rule_content(a_rule), a_rule)

    act_rule = after.activation_rule or before.activation_rule
    for name in _union(before.activations, after.activations):
        b, a = before.activations.get(name), after.activations.get(name)
        if b != a:
            kind = (
                "activation-added"
                if b is None
                else "activation-removed"
                if a is None
                else "activation-changed"
            )
            add(kind, name, b, a, act_rule)
    return out


def _union(a: Iterable[str], b: Iterable[str]) -> list[str]:
    """Keys of both, in the order of ``a`` then the new ones of ``b`` (struct order is kept)."""
    out = list(a)
    out += [k for k in b if k not in out]
    return out


# --------------------------------------------------------------------------------------------
# Level diffs


def level_diff(spec: Spec, from_level: str, to_level: str, operators: list[str] | None = None) -> DiffResult:
    """Changes from ``from_level`` to ``to_level`` of one spec, each at the level where it happens.

    Upwards, the step ``L-1 -> L`` is attributed to ``L``; downwards, ``L -> L-1`` is too, so a
    reversed range lists the same levels with each change mirrored.
    """
    a, b = spec.level(from_level), spec.level(to_level)
    names = _operator_names(spec, operators)
    result = DiffResult("levels", a.name, b.name)
    step = 1 if b.index >= a.index else -1
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


# --------------------------------------------------------------------------------------------
# Spec diffs


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
    common_levels = [lv for lv in spec_b.levels if lv.name in {x.name for x in spec_a.levels}]
    if level is not None:
        lv_b = spec_b.level(level)
        levels = [lv_b]
        spec_a.level(level)  # unknown there: raise too
        result.level = lv_b.name
    else:
        levels = common_levels
        la, lb = [x.name for x in spec_a.levels], [x.name for x in spec_b.levels]
        if la != lb:
            result.common.append(Change("*", "feature-levels", "feature levels", la, lb))
    for name in names:
        changes: list[Change] = []
        if name not in spec_a.operators or name not in spec_b.operators:
            present = spec_b if name in spec_b.operators else spec_a
            intro = {"introduced": present.operators[name].introduced}
            added = name in spec_b.operators
            changes.append(
                Change(
                    "*",
                    "operator-added" if added else "operator-removed",
                    name,
                    None if added else intro,
                    intro if added else None,
                    None,
                    f"only in {label_b if added else label_a}",
                )
            )
            result.operators[name] = changes
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
        changes += _merge_ranges(per_level, [x.name for x in levels])
        changes += _doc_note_changes(spec_a.operators[name], spec_b.operators[name])
        result.operators[name] = changes
    return result


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
    for nid in _union(notes_a, notes_b):
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


# --------------------------------------------------------------------------------------------
# Witnesses


def add_witnesses(result: DiffResult, budget: int = 4000) -> None:
    """Attach a confirmed witness (or the reason there is none) to every change that has sides.

    In a level diff a witness is found at the step where its change happens; ``across_range``
    then says whether it also tells the range's two ends apart (legal at the end on its legal
    side, illegal at the other), which is what "what can I do at B that I could not at A" asks.
    A later change inside the range can make that false, and the reader should know.
    """
    for name, changes in result.operators.items():
        out = []
        for c in changes:
            if not c.sides:
                out.append(c)
                continue
            w = find_witness(name, c, budget)
            if w.desc is not None and result.mode == "levels":
                w = replace(w, across_range=_across_range(result, c, w))
            out.append(replace(c, witness=w))
        result.operators[name] = out


def _across_range(result: DiffResult, change: Change, w: Witness) -> bool:
    assert change.sides is not None and w.desc is not None
    spec = change.sides[0].spec
    ends = sorted((spec.level(result.from_), spec.level(result.to)), key=lambda lv: lv.index)
    legal, illegal = spec.level(str(w.legal_at)), spec.level(str(w.illegal_at))
    good, bad = (ends[1], ends[0]) if legal.index > illegal.index else (ends[0], ends[1])
    return not validate(w.desc, good, spec) and bool(validate(w.desc, bad, spec))


def find_witness(operator: str, change: Change, budget: int = 4000) -> Witness:
    """A desc that one side accepts and the other rejects *for this change's rule*.

    Both directions are tried (a relaxation is shown by a desc legal after, a restriction by one
    legal before). A candidate counts only if the validator returns no violation on one side and,
    on the other, a violation of the rule that checks this change; otherwise a desc that differs
    for an unrelated reason (another change at the same step) would be shown as this one's.
    Every generator candidate is checked and the simplest confirmed desc is shown (generated
    descs exercise layouts, flags and strides, which a reader of a diff does not need).
    """
    if change.sides is None:
        return Witness(None, reason="not decided by any level; no desc can show it")
    before, after = change.sides
    if change.kind.startswith(("member-", "doc-note-", "feature-levels")):
        return Witness(None, reason="a description change: no desc is legal on one side only because of it")
    expected = _expected_rule_ids(operator, change, before, after)
    tried = 0
    seen: set[OperatorDesc] = set()
    for legal, illegal in ((after, before), (before, after)):
        best: Witness | None = None
        stop_at: int | None = None
        for origin, cand in _candidates(operator, change, legal, illegal):
            if stop_at is not None and tried >= stop_at:
                break
            if cand in seen:
                continue
            seen.add(cand)
            tried += 1
            if tried > budget:
                break
            if validate(cand, legal.level, legal.spec):
                continue
            bad = validate(cand, illegal.level, illegal.spec)
            if not any(v.rule in expected for v in bad):
                continue
            found = Witness(
                cand,
                legal.label,
                illegal.label,
                tuple(f"{v.rule}: {v.member}: {v.message}" for v in bad),
                tried=tried,
            )
            if best is None or _size(found) < _size(best):
                best = found
            if origin == "built" and stop_at is None:
                stop_at = tried + 200  # a few more built neighbours may break the rule alone
        if best is not None:
            return replace(best, tried=tried)
    why = {
        "rule-on": "the new rule is implied by the rules already in force",
        "rule-off": "the rule that ends is implied by the rules still in force",
        "tensor-limit": "the operator's support table admits fewer dimensions than either limit",
    }.get(change.kind, "no desc is legal on one side and rejected by this rule on the other")
    return Witness(None, reason=f"none among {tried} candidates: {why}", tried=tried)


def _size(w: Witness) -> tuple[int, int]:
    """Fewest violations first (the change's rule alone is the clearest witness), then shortest."""
    return (len(w.violations), len(w.desc.to_yaml()) if w.desc is not None else 0)


def _expected_rule_ids(operator: str, change: Change, before: Side, after: Side) -> set[str]:
    ids = {change.rule} if change.rule else set()
    if change.kind == "rule-renamed":
        ids |= set(change.subject.split(" -> "))
    rule_kind = _CHECKED_BY.get(change.kind)
    if rule_kind:
        for side in (before, after):
            if operator in side.spec.operators:
                ids |= {
                    r.id for r in side.spec.rules_for(side.spec.operators[operator]) if r.kind == rule_kind
                }
    return ids


def _candidates(
    operator: str, change: Change, legal: Side, illegal: Side
) -> Iterator[tuple[str, OperatorDesc]]:
    """Generator descs first (when ``dmlconform.generation`` has them), then our own: bases built from
    the legal side's support table, ordered so that the ones this change is about come first, each
    followed by its single-member mutations."""
    spec = legal.spec
    op = spec.operators.get(operator)
    if op is None or operator not in illegal.spec.operators:
        return
    yield from (("generator", d) for d in _generator_candidates(operator, change, legal, illegal))
    row = op.support_row(spec, legal.level)
    counts = sorted({c for t in row.tensors.values() for c in t.dimension_counts})
    focus: list[int] = []
    if change.kind == "support-dimension-counts":
        focus = sorted(set(change.before or []) ^ set(change.after or []))
    if change.kind == "tensor-limit":
        lo, hi = sorted([change.before or 0, change.after or 0])
        focus = list(range(lo + 1, hi + 1))
    ranks = _ordered(focus + ([4] if 4 in counts else []) + counts + list(range(1, 9)))
    focus_types = (
        list(change.after or []) + list(change.before or []) if change.kind == "support-data-types" else []
    )
    dtypes = _ordered(focus_types + [d for t in row.tensors.values() for d in t.data_types])
    nullable = [m.name for m in op.tensor_members if m.nullable]
    presences = [set(nullable)] + [
        set(c) for n in range(len(nullable) - 1, -1, -1) for c in itertools.combinations(nullable, n)
    ]
    acts: list[str | None] = [None]
    if any(m.type == "activation" for m in op.members):
        named = [change.subject] if change.kind.startswith("activation-") else []
        rule = legal.spec.rules_for(op) + illegal.spec.rules_for(illegal.spec.operators[operator])
        named += [r.params["activation"] for r in rule if r.id == change.rule and "activation" in r.params]
        acts += _ordered(named)
        if change.kind.startswith("activation-") or any(
            r.scope == "activation" and r.id == change.rule for r in rule
        ):
            acts += [a for a in spec.activations if a not in acts]
    for rank, dtype, present, act in itertools.product(ranks, dtypes, presences, acts):
        base = build_desc(spec, op, legal.level, rank, dtype, present, act)
        yield "built", base
        yield from (("built", m) for m in mutations(spec, op, base))


def _ordered(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


def _generator_candidates(
    operator: str, change: Change, legal: Side, illegal: Side
) -> Iterator[OperatorDesc]:
    """Descs from ``dmlconform.generation.legal`` and ``.illegal``: legal ones on the legal side, and
    illegal ones on the other side labelled with this change's rule. Absent or failing generators
    are skipped: the constructive search below does not depend on them."""
    try:
        from dmlconform.generation.illegal import illegal_descs
        from dmlconform.generation.legal import legal_descs
    except ImportError:
        return
    try:
        if change.rule:
            for desc, rule_id in illegal_descs(
                operator, illegal.level.name, seed=0, count=64, spec=illegal.spec
            ):
                if rule_id == change.rule:
                    yield desc
        yield from legal_descs(operator, legal.level.name, seed=0, count=64, spec=legal.spec)
    except Exception:  # noqa: BLE001 - a generator bug must not hide what the search can still find
        return


def build_desc(
    spec: Spec,
    op: Operator,
    level: FeatureLevel,
    rank: int,
    dtype: str,
    present: set[str],
    activation: str | None,
) -> OperatorDesc:
    """A desc meant to be legal: every tensor of ``rank`` and ``dtype``; tensors that broadcast
    to another are 1 except where a rule fixes the dimension; same-size groups share a shape;
    Axes-like arrays take the trailing two dimensions. Built from rule kinds only."""
    rules = [r for r, _ in active_rules(spec, op.name, level)]
    full = tuple(range(2, 2 + rank))
    groups: dict[str, set[str]] = {m.name: {m.name} for m in op.tensor_members}
    for r in rules:
        if r.kind == "same_sizes":
            merged = set().union(*(groups.get(n, {n}) for n in r.params["members"]))
            for n in merged:
                groups[n] = merged
    shapes: dict[str, tuple[int, ...]] = {}
    for r in rules:
        if r.kind == "broadcastable":
            fixed = fixed_dims(r.params, rank)
            shape = tuple(s if i in fixed else 1 for i, s in enumerate(full))
            for n in groups.get(r.params["member"], {r.params["member"]}):
                shapes[n] = shape
    axes_members = {r.params["member"] for r in rules if r.kind == "axes_in_range"}
    length_of = {r.params["length_member"]: r.params["member"] for r in rules if r.kind == "array_length"}
    members: dict[str, Any] = {}
    axes = tuple(range(max(rank - 2, 0), rank))
    for m in op.members:
        if m.type == "tensor":
            if m.nullable and m.name not in present:
                members[m.name] = None
            else:
                members[m.name] = TensorDesc(dtype, shapes.get(m.name, full))
        elif m.type == "uint_array":
            members[m.name] = axes if m.name in axes_members else (0,)
        elif m.type == "bool":
            members[m.name] = True
        elif m.type == "float":
            members[m.name] = float(m.default) if isinstance(m.default, (int, float)) else 1.0e-5
        elif m.type == "activation":
            members[m.name] = _activation(spec, activation) if activation else None
    for m in op.members:
        if m.type == "uint":
            arr = members.get(length_of.get(m.name, ""))
            members[m.name] = len(arr) if isinstance(arr, tuple) else 0
    return OperatorDesc(op.name, {m.name: members[m.name] for m in op.members if m.name in members})


def _activation(spec: Spec, name: str) -> ActivationDesc:
    act = spec.activations[name]
    return ActivationDesc(
        name, tuple((p.name, p.default if p.default is not None else 1.0) for p in act.parameters)
    )


def mutations(spec: Spec, op: Operator, desc: OperatorDesc) -> Iterator[OperatorDesc]:
    """Single-member changes of ``desc``: drop an optional tensor, set one dimension of a tensor
    to 1 or to the full size, change a tensor's rank or data type, lower an activation
    parameter. Not aimed at any rule: the validator decides which rule each one breaks."""
    tensors = desc.tensors()
    full = max((t.sizes for t in tensors.values()), key=lambda s: (len(s), s), default=())
    for m in op.tensor_members:
        t = tensors.get(m.name)
        if t is None:
            continue
        if m.nullable:
            yield desc.replace(**{m.name: None})
        for i in range(len(t.sizes)):
            if t.sizes[i] != 1:
                yield desc.replace(**{m.name: t.replace(sizes=t.sizes[:i] + (1,) + t.sizes[i + 1 :])})
            if len(full) == len(t.sizes) and t.sizes[i] != full[i]:
                yield desc.replace(**{m.name: t.replace(sizes=t.sizes[:i] + (full[i],) + t.sizes[i + 1 :])})
        yield desc.replace(**{m.name: t.replace(sizes=tuple(1 for _ in t.sizes))})
        if len(t.sizes) > 1:
            yield desc.replace(**{m.name: t.replace(sizes=t.sizes[1:])})
        yield desc.replace(**{m.name: t.replace(sizes=(1,) + t.sizes)})
        for d in spec.data_types:
            if d != t.data_type and spec.data_types[d].is_float:
                yield desc.replace(**{m.name: t.replace(data_type=d)})
    for m in op.members:
        a = desc.members.get(m.name)
        if isinstance(a, ActivationDesc):
            for p, _ in a.params:
                for value in (0.5, 0.0, -1.0):
                    params = tuple((k, value if k == p else v) for k, v in a.params)
                    yield desc.replace(**{m.name: replace(a, params=params)})


# --------------------------------------------------------------------------------------------
# Rendering


def _fmt_counts(value: Any) -> str:
    if not value:
        return "none"
    v = list(value)
    if len(v) > 2 and v == list(range(v[0], v[-1] + 1)):
        return f"{v[0]}..{v[-1]}"
    return ",".join(map(str, v))


def _fmt_rule(content: dict[str, Any] | None) -> str:
    if not content:
        return "-"
    params = " ".join(f"{k}={_short(v)}" for k, v in content.items() if k != "kind")
    return f"{content['kind']}({params})" if params else content["kind"]


def _short(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ",".join(map(str, v)) + "]"
    return str(v)


def describe(c: Change) -> str:
    """One human sentence for a change (the text and markdown forms)."""
    k, b, a = c.kind, c.before, c.after
    if k == "operator-added":
        return f"{c.subject} becomes available (introduced at {a['introduced']})"
    if k == "operator-removed":
        return f"{c.subject} is not available (introduced at {b['introduced']})"
    if k == "support-dimension-counts":
        return f"{c.subject} dimension counts {_fmt_counts(b)} -> {_fmt_counts(a)}"
    if k == "support-data-types":
        return f"{c.subject} data types {', '.join(b or []) or 'none'} -> {', '.join(a or []) or 'none'}"
    if k == "rule-on":
        return f"rule {c.subject} applies: {_fmt_rule(a)}"
    if k == "rule-off":
        return f"rule {c.subject} no longer applies: {_fmt_rule(b)}"
    if k == "rule-changed":
        return f"rule {c.subject} changes: {_fmt_rule(b)} -> {_fmt_rule(a)}"
    if k == "rule-renamed":
        return f"rule renamed {c.subject}: {_fmt_rule(a)}"
    if k == "activation-added":
        return f"{c.subject} can be fused"
    if k == "activation-removed":
        return f"{c.subject} can no longer be fused"
    if k == "activation-changed":
        return f"{c.subject} changes: {b} -> {a}"
    if k == "tensor-limit":
        return f"{c.subject} {b} -> {a}"
    if k.startswith("doc-note-"):
        return f"doc note {c.subject}: {(b or {}).get('choice', '-')} -> {(a or {}).get('choice', '-')}"
    return f"{c.subject}: {b} -> {a}"


def _header(result: DiffResult) -> str:
    if result.mode == "levels":
        return f"spec-diff DML_FEATURE_LEVEL_{result.from_} -> DML_FEATURE_LEVEL_{result.to}"
    at = f" at DML_FEATURE_LEVEL_{result.level}" if result.level else " (all levels)"
    return f"spec-diff {result.from_} -> {result.to}{at}"


def render_text(result: DiffResult) -> str:
    """Grouped by operator, then level; one line per change with its rule id and source."""
    lines = [_header(result), ""]
    if result.common:
        lines.append("(all operators)")
        lines += [f"  {c.level:<10} {c.kind:<26} {describe(c)}" for c in result.common]
        lines.append("")
    for name, changes in result.operators.items():
        lines.append(name)
        if not changes:
            lines += ["  no changes", ""]
            continue
        level = None
        for c in changes:
            if c.level != level:
                level = c.level
                lines.append(f"  at {level}:" if level != "*" else "  any level:")
            cite = f"[{c.rule}]" if c.rule else ""
            src = f" {c.source}" if c.source else ""
            lines.append(f"    {c.kind:<26} {describe(c)}   {cite}{src}".rstrip())
            if c.witness is not None:
                lines += ["      " + x for x in _witness_text(c.witness)]
        lines.append("")
    total = sum(len(v) for v in result.operators.values()) + len(result.common)
    lines.append(f"{total} change(s) in {sum(1 for v in result.operators.values() if v)} operator(s)")
    return "\n".join(lines) + "\n"


def _witness_text(w: Witness) -> list[str]:
    if w.desc is None:
        return [f"witness: none ({w.reason})"]
    also = {True: " (and across the whole range)", False: " (not across the whole range)"}.get(
        w.across_range, ""
    )
    out = [f"witness: legal at {w.legal_at}, illegal at {w.illegal_at}{also}:"]
    out += ["  " + v for v in w.violations]
    out += ["  " + line for line in w.desc.to_yaml().rstrip().splitlines()]
    return out


def render_markdown(result: DiffResult) -> str:
    lines = [f"# {_header(result)}", ""]
    sections = ([("(all operators)", result.common)] if result.common else []) + list(
        result.operators.items()
    )
    for name, changes in sections:
        lines += [f"## {name}", ""]
        if not changes:
            lines += ["No changes.", ""]
            continue
        lines += ["| level | kind | change | rule | source |", "|---|---|---|---|---|"]
        for c in changes:
            cells = [c.level, c.kind, describe(c), f"`{c.rule}`" if c.rule else "", c.source]
            lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
        lines.append("")
        for c in changes:
            w = c.witness
            if w is None:
                continue
            lines.append(f"<details><summary>{c.level} {c.kind} {c.subject}: witness</summary>\n")
            if w.desc is None:
                lines.append(f"None: {w.reason}.")
            else:
                lines.append(f"Legal at {w.legal_at}, illegal at {w.illegal_at}:\n")
                lines += [f"- `{v}`" for v in w.violations]
                lines += ["", "```yaml", w.desc.to_yaml().rstrip(), "```"]
            lines += ["", "</details>", ""]
    return "\n".join(lines) + "\n"


def render_json(result: DiffResult) -> str:
    return json.dumps(result.to_json(), indent=2) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}

# The documented JSON shape (docs/spec-tools.md, "spec-diff"); tests validate the output against it.
JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["mode", "from", "to", "operators"],
    "additionalProperties": False,
    "properties": {
        "mode": {"enum": ["levels", "specs"]},
        "from": {"type": "string"},
        "to": {"type": "string"},
        "level": {"type": ["string", "null"]},
        "operators": {
            "type": "object",
            "additionalProperties": {"$ref": "#/$defs/changes"},
        },
        "common": {"$ref": "#/$defs/changes"},
    },
    "$defs": {
        "changes": {
            "type": "object",
            "required": ["changes"],
            "additionalProperties": False,
            "properties": {"changes": {"type": "array", "items": {"$ref": "#/$defs/change"}}},
        },
        "change": {
            "type": "object",
            "required": ["level", "kind", "subject", "before", "after", "rule", "source"],
            "additionalProperties": False,
            "properties": {
                "level": {"type": "string", "pattern": r"^(\*|[1-9]_[0-9](\.\.[1-9]_[0-9])?)$"},
                "kind": {"enum": list(KINDS)},
                "subject": {"type": "string"},
                "before": {},
                "after": {},
                "rule": {"type": ["string", "null"]},
                "source": {"type": "string"},
                "witness": {
                    "oneOf": [
                        {
                            "type": "object",
                            "required": [
                                "found",
                                "legal_at",
                                "illegal_at",
                                "violations",
                                "across_range",
                                "desc",
                            ],
                            "additionalProperties": False,
                            "properties": {
                                "found": {"const": True},
                                "legal_at": {"type": "string"},
                                "illegal_at": {"type": "string"},
                                "violations": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                                "across_range": {"type": ["boolean", "null"]},
                                "desc": {"type": "object", "required": ["type", "desc"]},
                            },
                        },
                        {
                            "type": "object",
                            "required": ["found", "reason", "tried"],
                            "additionalProperties": False,
                            "properties": {
                                "found": {"const": False},
                                "reason": {"type": "string"},
                                "tried": {"type": "integer"},
                            },
                        },
                    ]
                },
            },
        },
    },
}
