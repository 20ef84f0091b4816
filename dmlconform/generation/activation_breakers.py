"""Breakers of the fused-activation kinds: a non-fusable or not yet available activation, its
tensors set, a parameter left out or below its minimum.

Each puts one offending activation on one of the operator's activation members of the legal
base.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dmlconform.generation.breaker import Breaker
from dmlconform.generation.chooser import Chooser
from dmlconform.generation.model import Model
from dmlconform.generation.plan import Overrides, activation_params
from dmlconform.specification.desc import ActivationDesc, OperatorDesc, TensorDesc
from dmlconform.specification.model import Activation, Rule
from dmlconform.specification.rules import (
    ActivationAvailable,
    ActivationFusable,
    ActivationParameterMin,
    ActivationParameterRequired,
    ActivationTensorsNull,
    RuleKind,
)


def _activation_plan(model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
    return Overrides()


def _set_activation(
    fn: Callable[[Model, Rule, OperatorDesc, Chooser], ActivationDesc | None],
) -> Callable[[Model, Rule, OperatorDesc, Chooser], OperatorDesc | None]:
    def mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        if not model.activation_members:
            return None
        act = fn(model, rule, desc, ch)
        if act is None:
            return None
        return desc.replace(**{ch.choice(model.activation_members): act})

    return mutate


def _has_activation(model: Model, rule: Rule) -> str | None:
    return None if model.activation_members else "the operator has no fused activation"


def _non_fusable_names(model: Model) -> list[str]:
    """Operator names that are not fusable activations: the ELEMENT_WISE twins of the fusable
    ones (ELEMENT_WISE_IDENTITY exists in DirectML; none of them may be fused)."""
    names = [
        "ELEMENT_WISE_" + a.name.removeprefix("ACTIVATION_")
        for a in model.spec.activations.values()
        if not a.parameters
    ]
    return [n for n in names if n not in model.spec.activations]


def _fusable_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> ActivationDesc | None:
    return ActivationDesc(ch.choice(_non_fusable_names(model), key=f"break:{rule.id}"))


def _later_activations(model: Model) -> list[Activation]:
    return [a for a in model.spec.activations.values() if model.spec.level(a.since) > model.level]


def _available_act_why(model: Model, rule: Rule) -> str | None:
    if not model.activation_members:
        return "the operator has no fused activation"
    if _later_activations(model):
        return None
    return f"every fusable activation is available at {model.level.name}"


def _available_act_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> ActivationDesc | None:
    act = ch.choice(_later_activations(model), key=f"break:{rule.id}")
    return ActivationDesc(act.name, activation_params(model, ch, act))


def _tensors_null_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> ActivationDesc | None:
    if not model.activations:
        return None
    act = ch.choice(model.activations)
    tensors = list(desc.tensors().values())
    t = ch.choice(tensors).replace(flags=None) if tensors else TensorDesc("FLOAT32", (1,))
    which = ch.choice(("input", "output", "both"), key=f"break:{rule.id}")
    return ActivationDesc(
        act.name,
        activation_params(model, ch, act),
        t if which != "output" else None,
        t if which != "input" else None,
    )


def _param_required_acts(model: Model) -> list[Activation]:
    return [a for a in model.activations if any(p.default is None for p in a.parameters)]


def _param_required_why(model: Model, rule: Rule) -> str | None:
    if not model.activation_members:
        return "the operator has no fused activation"
    return None if _param_required_acts(model) else "every available activation parameter has a default"


def _param_required_mutate(
    model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser
) -> ActivationDesc | None:
    act = ch.choice(_param_required_acts(model), key=f"break:{rule.id}")
    omit = ch.choice([p.name for p in act.parameters if p.default is None])
    return ActivationDesc(act.name, activation_params(model, ch, act, omit=omit))


def _param_min_why(model: Model, rule: Rule) -> str | None:
    if not model.activation_members:
        return "the operator has no fused activation"
    if not any(a.name == rule.params["activation"] for a in model.activations):
        return f"{rule.params['activation']} is not available at {model.level.name}"
    return None


def _param_min_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> ActivationDesc | None:
    act = model.spec.activations[rule.params["activation"]]
    lo = float(rule.params["min"])
    p = rule.params["parameter"]
    just_below = float(np.nextafter(np.float32(lo), np.float32(-np.inf)))  # the FLOAT next below
    bad = [v for v in (lo - 0.5, lo / 2, 0.0, -1.0, lo - 1e-3, just_below) if v < lo]
    params = [(k, v) for k, v in activation_params(model, ch, act) if k != p]
    params.append((p, ch.choice(bad, key=f"break:{rule.id}")))
    order = {q.name: i for i, q in enumerate(act.parameters)}
    return ActivationDesc(act.name, tuple(sorted(params, key=lambda kv: order.get(kv[0], 99))))


#: The breakers of the fused-activation kinds.
ACTIVATION_BREAKERS: dict[type[RuleKind], Breaker] = {
    ActivationFusable: Breaker(_has_activation, _activation_plan, _set_activation(_fusable_mutate)),
    ActivationAvailable: Breaker(
        _available_act_why, _activation_plan, _set_activation(_available_act_mutate)
    ),
    ActivationTensorsNull: Breaker(_has_activation, _activation_plan, _set_activation(_tensors_null_mutate)),
    ActivationParameterRequired: Breaker(
        _param_required_why, _activation_plan, _set_activation(_param_required_mutate)
    ),
    ActivationParameterMin: Breaker(_param_min_why, _activation_plan, _set_activation(_param_min_mutate)),
}
