"""Scalar attribute kinds: a number member's legal values."""

from __future__ import annotations

from collections.abc import Iterator

from dmlconform.specification.desc import as_c_float
from dmlconform.specification.model import Rule
from dmlconform.specification.rules.base import Context, Edge, Finding, RuleKind, kind


@kind
class AttributeRange(RuleKind):
    """A UINT or FLOAT member within ``[min, max]`` (``max`` optional): LocalSize "must be at
    least 1". A legal desc at ``min`` or ``max`` sits at the edge."""

    name = "attribute_range"
    bounds_values = True
    params = ("member", "min")
    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        value = ctx.value(rule.params["member"])
        ends = [rule.params.get("min"), rule.params.get("max")]
        if isinstance(value, float):
            ends = [None if e is None else as_c_float(e) for e in ends]
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value in ends

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        name = rule.params["member"]
        value = ctx.value(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return
        low, high = rule.params.get("min"), rule.params.get("max")
        if isinstance(value, float):  # a FLOAT against its bounds as FLOATs, as DirectML compares
            low, high = (None if b is None else as_c_float(b) for b in (low, high))
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
