"""Views, and every difference between two of them.

A view is what one operator admits at one (spec, level) side: whether it exists, its members,
the support-table cells in force, the rules in force (its own, the tensor-desc rules, the
activation rules), the activations that may be fused and the maximum DimensionCount. Two views
are compared the same way whether they come from two levels of one spec or from one level of two
specs, so both forms of the command share every line of logic.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dmlconform.specdiff.changes import Change, Side
from dmlconform.specification.rules import (
    ActivationAvailable,
    Available,
    RuleKind,
    SupportDataType,
    SupportDimensionCount,
    TensorDimensionCountRange,
    of_kind,
)
from dmlconform.specification.spec import FeatureLevel, Operator, Rule, Spec, format_source
from dmlconform.specification.validate import active_rules


@dataclass(frozen=True)
class View:
    """What one operator admits on one side (see the module docstring)."""

    operator: Operator
    available: bool
    members: dict[str, dict[str, Any]]
    support: dict[str, dict[str, list[Any]]]
    support_source: str
    support_since: FeatureLevel  # the level the support row in force starts at
    rules: dict[str, Rule]
    activations: dict[str, dict[str, Any]]
    activation_rule: Rule | None
    max_dimension_count: int | None


def view(spec: Spec, operator: str, level: FeatureLevel) -> View | None:
    """The operator's view at ``level``, or None when ``spec`` has no such operator."""
    op = spec.operators.get(operator)
    if op is None:
        return None
    available = level >= spec.level(op.introduced)
    row = op.support_row(spec, level)
    rules = {r.id: r for r, _ in active_rules(spec, op.name, level)}
    has_activation = any(m.type == "activation" for m in op.members)
    activations = {}
    if has_activation:
        activations = {
            a.name: {"since": a.since, "formula": a.formula, "parameters": list(a.parameter_names)}
            for a in spec.activations.values()
            if spec.level(a.since) <= level
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
        support_since=spec.level(row.since),
        rules=rules,
        activations=activations,
        activation_rule=next(iter(of_kind(spec.activation_rules, ActivationAvailable)), None),
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


def _rule_of_kind(v: View, kind: type[RuleKind]) -> Rule | None:
    return next(iter(of_kind(v.rules.values(), kind)), None)


@dataclass
class _Changes:
    """The changes of one :func:`diff_views` call, in output order: all share its level and sides."""

    level: str
    sides: tuple[Side, Side]
    out: list[Change] = field(default_factory=list)

    def add(
        self, kind: str, subject: str, b: Any, a: Any, rule: Rule | None, source: str | None = None
    ) -> None:
        """Record one change, citing ``source`` or, when it is None, the rule's own source."""
        self.out.append(
            Change(
                self.level,
                kind,
                subject,
                b,
                a,
                rule.id if rule else None,
                source if source is not None else (rule.source_text() if rule else ""),
                sides=self.sides,
            )
        )


def diff_views(level: str, before: View, after: View, sides: tuple[Side, Side]) -> list[Change]:
    """Every difference between two views of one operator, attributed to ``level``."""
    changes = _Changes(level, sides)
    if before.available != after.available:
        _availability_change(changes, before, after)
        return changes.out
    if not after.available:
        return []
    _member_changes(changes, before, after)
    _limit_change(changes, before, after)
    _support_changes(changes, before, after)
    _rule_changes(changes, before, after)
    _activation_changes(changes, before, after)
    return changes.out


def _availability_change(changes: _Changes, before: View, after: View) -> None:
    """The operator exists on one side only: that alone is the difference."""
    op = after.operator if after.available else before.operator
    rule = _rule_of_kind(after if after.available else before, Available)
    kind = "operator-added" if after.available else "operator-removed"
    intro = {"introduced": op.introduced}
    changes.add(kind, op.name, None if after.available else intro, intro if after.available else None, rule)


def _member_changes(changes: _Changes, before: View, after: View) -> None:
    for name in ordered_union(before.members, after.members):
        b, a = before.members.get(name), after.members.get(name)
        if b != a:
            kind = "member-added" if b is None else "member-removed" if a is None else "member-changed"
            changes.add(kind, name, b, a, None, "")


def _limit_change(changes: _Changes, before: View, after: View) -> None:
    if before.max_dimension_count != after.max_dimension_count:
        changes.add(
            "tensor-limit",
            "max DimensionCount",
            before.max_dimension_count,
            after.max_dimension_count,
            _rule_of_kind(after, TensorDimensionCountRange)
            or _rule_of_kind(before, TensorDimensionCountRange),
        )


def _support_changes(changes: _Changes, before: View, after: View) -> None:
    for tensor in ordered_union(before.support, after.support):
        b, a = before.support.get(tensor, {}), after.support.get(tensor, {})
        for cell, kind, rule_kind in (
            ("dimension_counts", "support-dimension-counts", SupportDimensionCount),
            ("data_types", "support-data-types", SupportDataType),
        ):
            if b.get(cell) != a.get(cell):
                # cite the row that makes the difference: the later one, whichever way we walk
                newer = after if after.support_since >= before.support_since else before
                src = newer.support_source
                rule = _rule_of_kind(after, rule_kind) or _rule_of_kind(before, rule_kind)
                changes.add(kind, tensor, b.get(cell), a.get(cell), rule, src)


def _rule_changes(changes: _Changes, before: View, after: View) -> None:
    offs = {i: r for i, r in before.rules.items() if i not in after.rules}
    ons = {i: r for i, r in after.rules.items() if i not in before.rules}
    for rid in list(offs):  # the same requirement under a new id: a rename, not off + on
        match = next((n for n, r in ons.items() if rule_content(r) == rule_content(offs[rid])), None)
        if match is not None:
            changes.add(
                "rule-renamed",
                f"{rid} -> {match}",
                rule_content(offs[rid]),
                rule_content(ons[match]),
                ons[match],
            )
            del offs[rid], ons[match]
    for rid in ordered_union(before.rules, after.rules):
        b_rule, a_rule = before.rules.get(rid), after.rules.get(rid)
        if rid in offs:
            changes.add("rule-off", rid, rule_content(b_rule), None, b_rule)  # type: ignore[arg-type]
        elif rid in ons:
            changes.add("rule-on", rid, None, rule_content(a_rule), a_rule)  # type: ignore[arg-type]
        elif b_rule is not None and a_rule is not None and rule_content(b_rule) != rule_content(a_rule):
            changes.add("rule-changed", rid, rule_content(b_rule), rule_content(a_rule), a_rule)


def _activation_changes(changes: _Changes, before: View, after: View) -> None:
    act_rule = after.activation_rule or before.activation_rule
    for name in ordered_union(before.activations, after.activations):
        b, a = before.activations.get(name), after.activations.get(name)
        if b != a:
            kind = (
                "activation-added"
                if b is None
                else "activation-removed"
                if a is None
                else "activation-changed"
            )
            changes.add(kind, name, b, a, act_rule)


def ordered_union(a: Iterable[str], b: Iterable[str]) -> list[str]:
    """Keys of both, in the order of ``a`` then the new ones of ``b`` (struct order is kept)."""
    out = list(a)
    out += [k for k in b if k not in out]
    return out
