"""desc + feature level -> every violation, in the order a reader fixes them.

Order: availability; required members; each tensor as a DML_BUFFER_TENSOR_DESC (a tensor that
fails here is *unusable* and later rules skip it, so a size of 0 is one violation, not five);
the support table row for the level; the operator's own rules; the fused activation. The
validator knows rule kinds, not operators: all of that comes from the spec.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from dmlconform.errors import Violation
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.rules import (
    KINDS,
    Available,
    Context,
    Required,
    RuleKind,
    SupportDataType,
    SupportDimensionCount,
    TensorKind,
)
from dmlconform.specification.spec import FeatureLevel, Operator, Rule, Spec, SupportRow, spec_or_default

#: the checking order of the kinds that come before the tensors' own rules: a desc of an
#: operator not available, or without a required member, says only that (keyed by kind class,
#: so that a renamed kind fails at import instead of dropping out of the order)
_PHASE: dict[type[RuleKind], int] = {Available: 0, Required: 1, SupportDimensionCount: 3, SupportDataType: 3}


def _phase(rule: Rule) -> int:
    if rule.scope == "tensor":
        return 2
    if rule.scope == "activation":
        return 5
    return _PHASE.get(type(KINDS[rule.kind]), 4)


def validate(desc: OperatorDesc, level: str | FeatureLevel, spec: Spec | None = None) -> list[Violation]:
    """Every violation of ``desc`` at ``level``; ``[]`` when it is legal.

    Raises ``UnknownLevel`` for a level the spec does not know and ``KeyError`` for an unknown
    operator (both are unusable input, not violations).
    """
    return list(_violations(desc, level, spec_or_default(spec)))


def _violations(desc: OperatorDesc, level: str | FeatureLevel, spec: Spec) -> Iterator[Violation]:
    """:func:`validate`'s violations in checking order, lazily: :func:`is_legal` stops at the
    first (a witness search asks that of some 20,000 descs, most of them illegal)."""
    plan = _plan(spec, desc.operator, level)
    ctx = Context(spec, plan.op, plan.level, desc, plan.row)
    members = desc.members
    for name in plan.tensor_names:
        if not isinstance(members.get(name), TensorDesc):
            ctx.unusable.add(name)
    for rule, kind in plan.before_tensors:
        yield from (_violation(rule, member, message) for member, message in kind.check(rule, ctx))
    for name in plan.tensor_names:
        t = members.get(name)
        if name in ctx.unusable:
            continue
        for rule, kind in plan.tensor_rules:  # the first rule a tensor breaks makes it unusable
            found = [
                _violation(rule, member, message) for member, message in kind.check_tensor(rule, name, t, ctx)
            ]
            if found:
                ctx.unusable.add(name)
                yield from found
                break
    for rule, kind in plan.after_tensors:
        yield from (_violation(rule, member, message) for member, message in kind.check(rule, ctx))


@dataclass(frozen=True)
class _LevelChecks:
    """What validating one operator at one level needs, computed once per (spec, op, level)."""

    op: Operator
    level: FeatureLevel
    row: SupportRow
    tensor_names: tuple[str, ...]
    before_tensors: tuple[tuple[Rule, RuleKind], ...]
    tensor_rules: tuple[tuple[Rule, TensorKind], ...]
    after_tensors: tuple[tuple[Rule, RuleKind], ...]


_LEVEL_CHECKS: dict[tuple[int, str, str], _LevelChecks] = {}


def _plan(spec: Spec, operator: str, level: str | FeatureLevel) -> _LevelChecks:
    key = (id(spec), operator, level if isinstance(level, str) else level.name)
    plan = _LEVEL_CHECKS.get(key)
    if plan is None:
        op = spec.operator(operator)
        lv = spec.level(level)
        rules = active_rules(spec, op.name, lv)
        plan = _LevelChecks(
            op,
            lv,
            op.support_row(spec, lv),
            tuple(m.name for m in op.tensor_members),
            tuple((r, k) for r, k in rules if _phase(r) < 2),
            tuple((r, k) for r, k in rules if isinstance(k, TensorKind)),
            tuple((r, k) for r, k in rules if _phase(r) > 2),
        )
        _LEVEL_CHECKS[key] = plan
    return plan


_ACTIVE: dict[tuple[int, str, str], list[tuple[Rule, RuleKind]]] = {}


def active_rules(spec: Spec, operator: str, level: str | FeatureLevel) -> list[tuple[Rule, RuleKind]]:
    """The rules in force for ``operator`` at ``level``, in checking order, with their kinds
    (cached per spec, operator and level: the validator is a hot path)."""
    lv = spec.level(level)
    key = (id(spec), operator, lv.name)
    rules = _ACTIVE.get(key)
    if rules is None:
        ordered = sorted(spec.rules_for(spec.operator(operator)), key=_phase)
        rules = [(r, KINDS[r.kind]) for r in ordered if r.active_at(spec, lv)]
        _ACTIVE[key] = rules
    return rules


def _violation(rule: Rule, member: str, message: str) -> Violation:
    return Violation(rule.id, member, message, rule.source_text(), rule.source)


def is_legal(desc: OperatorDesc, level: str | FeatureLevel, spec: Spec) -> bool:
    return next(_violations(desc, level, spec), None) is None
