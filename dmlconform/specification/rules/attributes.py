"""Scalar attribute kinds: a number member's legal values.

Each breaks a legal base by giving the member a value just outside what its rule allows."""

from __future__ import annotations

import math
from collections.abc import Iterator

from dmlconform.specification.desc import OperatorDesc, as_c_float
from dmlconform.specification.rules.base import Context, Edge, Finding, RuleKind, kind
from dmlconform.specification.rules.breaking import Chooser
from dmlconform.specification.spec import Rule
from dmlconform.specification.structure import Model


@kind
class AttributeRange(RuleKind):
    """A UINT or FLOAT member within ``[min, max]`` (``max`` optional): LocalSize "must be at
    least 1". A legal desc at ``min`` or ``max`` sits at the edge."""

    name = "attribute_range"
    bounds_values = True
    params = ("member", "min")
    has_edge = True

    @staticmethod
    def _ends(rule: Rule, value: float) -> tuple[float | None, float | None]:
        """(min, max) as DirectML compares them with ``value``: a FLOAT member's as FLOATs."""
        ends = (rule.params.get("min"), rule.params.get("max"))
        if not isinstance(value, float):
            return ends
        low, high = (None if e is None else as_c_float(e) for e in ends)
        return low, high

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        value = ctx.value(rule.params["member"])
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and value in self._ends(rule, value)
        )

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        name = rule.params["member"]
        value = ctx.value(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return
        low, high = self._ends(rule, value)
        if low is not None and value < low:
            yield name, f"{name} is {value}, below its minimum {low}"
        elif high is not None and value > high:
            yield name, f"{name} is {value}, above its maximum {high}"

    def edges(self, rule: Rule, ctx: Context) -> Iterator[Edge]:
        """The member at each end of its range."""
        name = rule.params["member"]
        for end in (rule.params.get("min"), rule.params.get("max")):
            if end is not None:
                yield f"{name} {end}", ctx.desc.replace(**{name: end})

    @staticmethod
    def _outside(model: Model, rule: Rule) -> list[float]:
        """Values just outside an attribute_range that the member's C type can hold."""
        member = model.op.member(rule.params["member"])
        low, high = rule.params.get("min"), rule.params.get("max")
        uint = member is not None and member.type == "uint"
        out: list[float] = []
        if low is not None:
            below = (math.ceil(low) - 1) if uint else low - 1.0
            if not uint or below >= 0:
                out.append(below)
        if high is not None:
            out.append((math.floor(high) + 1) if uint else high + 1.0)
        return out

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        if self._outside(model, rule):
            return None
        return f"{rule.params['member']} is a UINT: no value lies below {rule.params.get('min')}"

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        options = self._outside(model, rule)
        return desc.replace(**{rule.params["member"]: ch.choice(options)}) if options else None


@kind
class AttributeOneOf(RuleKind):
    """A UINT member that takes one of a few listed values: P "either 1 or 2"."""

    name = "attribute_one_of"
    bounds_values = True
    params = ("member", "values")

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        name = rule.params["member"]
        value = ctx.value(name)
        if value is None:
            return
        allowed = list(rule.params["values"])
        if value not in allowed:
            yield name, f"{name} is {value}, not one of {allowed}"

    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """The member at the largest or smallest value allowed."""
        values = list(rule.params["values"])
        return ctx.value(rule.params["member"]) in (min(values), max(values))

    def edges(self, rule: Rule, ctx: Context) -> Iterator[Edge]:
        name = rule.params["member"]
        for value in rule.params["values"]:
            yield f"{name} {value}", ctx.desc.replace(**{name: value})

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        """0 or a value past the largest listed, whichever the list leaves out."""
        allowed = [int(v) for v in rule.params["values"]]
        options = [v for v in (0, max(allowed) + 1, max(allowed) + 2) if v not in allowed]
        return desc.replace(**{rule.params["member"]: ch.choice(options)})
