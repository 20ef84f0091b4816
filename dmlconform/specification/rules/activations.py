"""Activation kinds: checked for every member of type ``activation`` (a fused activation).

Each breaks a legal base by fusing one offending activation on one of the operator's activation
members (``break_activation``): a non-fusable or not yet available one, one with its tensors
set, a parameter left out or below its minimum. The parameters every generated activation draws
(:func:`activation_params`) live here too, since the breakers draw them for the activations they
fuse.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from dmlconform.specification.desc import ActivationDesc, OperatorDesc, TensorDesc, as_c_float
from dmlconform.specification.rules.base import Context, Edge, Finding, RuleKind, kind
from dmlconform.specification.rules.breaking import Chooser
from dmlconform.specification.spec import Activation, FeatureLevel, Operator, Rule, Spec, SupportRow
from dmlconform.specification.structure import Model

ACTIVATION_PARAMETER_CLASSES: tuple[float, ...] = (1.0, 0.1, 0.25, 0.5, 1.5, 2.0, 3.0)
"""Activation parameters are drawn positive and non-zero: CELU and SOFTPLUS divide by theirs,
and the spec gives no parameter a lower bound except through ``activation_parameter_min``."""


def _param_value(model: Model, ch: Chooser, act: str, p: str, key: str) -> float:
    lo = model.param_min.get((act, p))
    values = tuple(v for v in ACTIVATION_PARAMETER_CLASSES if lo is None or v >= lo)
    return ch.choice(values, key=key)


def activation_params(model: Model, ch: Chooser, act: Activation, omit: str | None = None) -> tuple:
    """Drawn parameters of ``act`` (``omit`` left out, one with a default sometimes left out),
    each at or above its minimum at the model's level."""
    params = []
    for p in act.parameters:
        if p.name == omit:
            continue
        if p.default is not None and ch.choice((True, False), key=f"{act.name}.{p.name}:omit"):
            continue
        params.append((p.name, _param_value(model, ch, act.name, p.name, f"{act.name}.{p.name}")))
    return tuple(params)


class ActivationKind(RuleKind):
    scope = "activation"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for m in ctx.op.members:
            value = ctx.desc.members.get(m.name)
            if m.type == "activation" and isinstance(value, ActivationDesc):
                yield from self.check_activation(rule, m.name, value, ctx)

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        raise NotImplementedError

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        return any(
            m.type == "activation"
            and isinstance(a := ctx.desc.members.get(m.name), ActivationDesc)
            and self.activation_at_edge(rule, a, ctx)
            for m in ctx.op.members
        )

    def activation_at_edge(self, rule: Rule, a: ActivationDesc, ctx: Context) -> bool:
        """``at_edge`` for one fused activation of the desc."""
        return False

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        return None if model.activation_members else "the operator has no fused activation"

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        """The activation :meth:`break_activation` makes, fused on one activation member."""
        if not model.activation_members:
            return None
        act = self.break_activation(model, rule, desc, ch)
        if act is None:
            return None
        return desc.replace(**{ch.choice(model.activation_members): act})

    def break_activation(
        self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser
    ) -> ActivationDesc | None:
        """``break_desc`` for one fused activation: one that breaks the rule; None to retry."""
        raise NotImplementedError


@kind
class ActivationFusable(ActivationKind):
    name = "activation_fusable"

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        if a.type not in ctx.spec.activations:
            yield f"{name}.Type", f"{a.type} is not a fusable activation"

    @staticmethod
    def _non_fusable_names(model: Model) -> list[str]:
        """Operator names that are not fusable activations: the ELEMENT_WISE twins of the fusable
        ones (ELEMENT_WISE_IDENTITY exists in DirectML; none of them may be fused)."""
        names = [
            "ELEMENT_WISE_" + a.name.removeprefix("ACTIVATION_")
            for a in model.spec.activations.values()
            if not a.parameters
        ]
        return [n for n in names if n not in model.spec.activations]

    def break_activation(
        self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser
    ) -> ActivationDesc | None:
        return ActivationDesc(ch.choice(self._non_fusable_names(model), key=f"break:{rule.id}"))


@kind
class ActivationAvailable(ActivationKind):
    name = "activation_available"

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        act = ctx.spec.activations.get(a.type)
        if act is not None and ctx.level < ctx.spec.level(act.since):
            yield (
                f"{name}.Type",
                f"{a.type} is fusable from DML_FEATURE_LEVEL_{act.since}, not at {ctx.level.name}",
            )

    has_edge = True

    def activation_at_edge(self, rule: Rule, a: ActivationDesc, ctx: Context) -> bool:
        """An activation at the level it becomes fusable."""
        act = ctx.spec.activations.get(a.type)
        return act is not None and ctx.level == ctx.spec.level(act.since)

    def edges(self, rule: Rule, ctx: Context) -> Iterator[Edge]:
        """Each activation that becomes fusable at this level, fused (parameters at their
        defaults, 1 where there is none)."""
        for act in ctx.spec.activations.values():
            if ctx.spec.level(act.since) != ctx.level:
                continue
            params = tuple((p.name, 1.0 if p.default is None else p.default) for p in act.parameters)
            for m in ctx.op.members:
                if m.type == "activation":
                    yield (
                        f"{m.name}: {act.name}",
                        ctx.desc.replace(**{m.name: ActivationDesc(act.name, params)}),
                    )

    def edge_reachable(
        self, rule: Rule, spec: Spec, op: Operator, level: FeatureLevel, row: SupportRow
    ) -> bool:
        arriving = any(spec.level(a.since) == level for a in spec.activations.values())
        return arriving and any(m.type == "activation" for m in op.members)

    @staticmethod
    def _later_activations(model: Model) -> list[Activation]:
        return [a for a in model.spec.activations.values() if model.spec.level(a.since) > model.level]

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        why = super().why_unbreakable(model, rule)
        if why is not None:
            return why
        if self._later_activations(model):
            return None
        return f"every fusable activation is available at {model.level.name}"

    def break_activation(
        self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser
    ) -> ActivationDesc | None:
        """An activation that becomes fusable at a later level."""
        act = ch.choice(self._later_activations(model), key=f"break:{rule.id}")
        return ActivationDesc(act.name, activation_params(model, ch, act))


@kind
class ActivationTensorsNull(ActivationKind):
    name = "activation_tensors_null"

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        for field_name, t in (("InputTensor", a.input_tensor), ("OutputTensor", a.output_tensor)):
            if t is not None:
                yield f"{name}.{field_name}", f"a fused activation's {field_name} must be null"

    def break_activation(
        self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser
    ) -> ActivationDesc | None:
        """An available activation with its input tensor, its output tensor or both set (to one
        of the desc's tensors, flags cleared)."""
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


@kind
class ActivationParameterRequired(ActivationKind):
    name = "activation_parameter_required"

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        act = ctx.spec.activations.get(a.type)
        if act is None:
            return
        given = a.param_dict
        for p in act.parameters:
            if p.name not in given and p.default is None:
                yield f"{name}.{p.name}", f"{a.type} needs {p.name} (it has no default)"

    @staticmethod
    def _acts(model: Model) -> list[Activation]:
        """The available activations with a parameter that has no default."""
        return [a for a in model.activations if any(p.default is None for p in a.parameters)]

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        why = super().why_unbreakable(model, rule)
        if why is not None:
            return why
        return None if self._acts(model) else "every available activation parameter has a default"

    def break_activation(
        self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser
    ) -> ActivationDesc | None:
        """One such activation with one parameter that has no default left out."""
        act = ch.choice(self._acts(model), key=f"break:{rule.id}")
        omit = ch.choice([p.name for p in act.parameters if p.default is None])
        return ActivationDesc(act.name, activation_params(model, ch, act, omit=omit))


@kind
class ActivationParameterMin(ActivationKind):
    name = "activation_parameter_min"
    params = ("activation", "parameter", "min")

    @staticmethod
    def _parameter(rule: Rule, a: ActivationDesc, ctx: Context) -> float | None:
        """The rule's parameter of ``a`` (given, else its default) as the FLOAT DirectML compares
        with the FLOAT minimum: 1 - 2^-26 reads as 1.0f. None when ``a`` is another activation
        or the parameter has no value."""
        if a.type != rule.params["activation"]:
            return None
        p = rule.params["parameter"]
        default = next((x.default for x in ctx.spec.activations[a.type].parameters if x.name == p), None)
        value = a.param_dict.get(p, default)
        return None if value is None else as_c_float(value)

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        value = self._parameter(rule, a, ctx)
        if value is not None and not value >= as_c_float(rule.params["min"]):
            p = rule.params["parameter"]
            until = f" before {rule.until}" if rule.until else ""
            yield f"{name}.{p}", f"{a.type} {p} {value:.9g} must be >= {rule.params['min']:g}{until}"

    has_edge = True

    def activation_at_edge(self, rule: Rule, a: ActivationDesc, ctx: Context) -> bool:
        """The parameter (given or defaulted) exactly at its minimum."""
        value = self._parameter(rule, a, ctx)
        return value is not None and value == as_c_float(rule.params["min"])

    def edges(self, rule: Rule, ctx: Context) -> Iterator[Edge]:
        """The rule's activation fused with the parameter exactly at its minimum."""
        act = ctx.spec.activations.get(rule.params["activation"])
        if act is None:
            return
        p = rule.params["parameter"]
        for m in ctx.op.members:
            if m.type == "activation":
                params = {x.name: x.default for x in act.parameters if x.default is not None}
                params[p] = float(rule.params["min"])
                new = ActivationDesc(act.name, tuple(params.items()))
                yield f"{m.name}: {act.name} {p} {rule.params['min']:g}", ctx.desc.replace(**{m.name: new})

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        why = super().why_unbreakable(model, rule)
        if why is not None:
            return why
        if not any(a.name == rule.params["activation"] for a in model.activations):
            return f"{rule.params['activation']} is not available at {model.level.name}"
        return None

    def break_activation(
        self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser
    ) -> ActivationDesc | None:
        """The rule's activation with the parameter below its minimum (down to the FLOAT just
        below it), its other parameters drawn as usual, in the activation's order."""
        act = model.spec.activations[rule.params["activation"]]
        lo = float(rule.params["min"])
        p = rule.params["parameter"]
        just_below = float(np.nextafter(np.float32(lo), np.float32(-np.inf)))  # the FLOAT next below
        bad = [v for v in (lo - 0.5, lo / 2, 0.0, -1.0, lo - 1e-3, just_below) if v < lo]
        params = [(k, v) for k, v in activation_params(model, ch, act) if k != p]
        params.append((p, ch.choice(bad, key=f"break:{rule.id}")))
        order = {q.name: i for i, q in enumerate(act.parameters)}
        return ActivationDesc(act.name, tuple(sorted(params, key=lambda kv: order.get(kv[0], 99))))
