"""desc + feature level -> every violation, in the order a reader fixes them.

Order: availability; required members; each tensor as a DML_BUFFER_TENSOR_DESC (a tensor that
fails here is *unusable* and later rules skip it, so a size of 0 is one violation, not five);
the support table row for the level; the operator's own rules; the fused activation. The
validator knows rule kinds, not operators: all of that comes from the spec.
"""

from __future__ import annotations

from dmlconform.desc import OperatorDesc, TensorDesc
from dmlconform.errors import Violation
from dmlconform.rules import KINDS, Context, RuleKind, TensorKind
from dmlconform.spec import FeatureLevel, Rule, Spec, load_spec

_PHASE = {"available": 0, "required": 1, "support_dimension_count": 3, "support_data_type": 3}


def _phase(rule: Rule) -> int:
    if rule.scope == "tensor":
        return 2
    if rule.scope == "activation":
        return 5
    return _PHASE.get(rule.kind, 4)


def validate(desc: OperatorDesc, level: str | FeatureLevel, spec: Spec | None = None) -> list[Violation]:
    """Every violation of ``desc`` at ``level``; ``[]`` when it is legal.

    Raises ``UnknownLevel`` for a level the spec does not know and ``KeyError`` for an unknown
    operator (both are unusable input, not violations).
    """
    spec = spec or load_spec()
    op = spec.operator(desc.operator)
    lv = spec.level(level)
    ctx = Context(spec, op, lv, desc, op.support_row(spec, lv))
    for m in op.tensor_members:
        if not isinstance(desc.members.get(m.name), TensorDesc):
            ctx.unusable.add(m.name)
    out: list[Violation] = []
    for rule, kind in active_rules(spec, op.name, lv):
        if isinstance(kind, TensorKind):
            for m in op.tensor_members:
                t = desc.members.get(m.name)
                if m.name in ctx.unusable or not isinstance(t, TensorDesc):
                    continue  # missing, or already broken by an earlier tensor-desc rule
                for member, message in kind.check_tensor(rule, m.name, t, ctx):
                    ctx.unusable.add(m.name)
                    out.append(_violation(rule, member, message))
        else:
            out.extend(_violation(rule, member, message) for member, message in kind.check(rule, ctx))
    return out


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


def is_legal(desc: OperatorDesc, level: str | FeatureLevel, spec: Spec | None = None) -> bool:
    return not validate(desc, level, spec)
