"""Activation kinds: checked for every member of type ``activation`` (a fused activation)."""

from __future__ import annotations

from collections.abc import Iterator

from dmlconform.specification.desc import ActivationDesc, as_c_float
from dmlconform.specification.model import FeatureLevel, Operator, Rule, Spec, SupportRow
from dmlconform.specification.rules.base import Context, Edge, Finding, RuleKind, kind


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


@kind
class ActivationFusable(ActivationKind):
    name = "activation_fusable"

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        if a.type not in ctx.spec.activations:
            yield f"{name}.Type", f"{a.type} is not a fusable activation"


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


@kind
class ActivationTensorsNull(ActivationKind):
    name = "activation_tensors_null"

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        for field_name, t in (("InputTensor", a.input_tensor), ("OutputTensor", a.output_tensor)):
            if t is not None:
                yield f"{name}.{field_name}", f"a fused activation's {field_name} must be null"


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
