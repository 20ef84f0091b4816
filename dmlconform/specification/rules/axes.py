"""Kinds of array members and the axes they hold: an array's length member matches it, its axes
lie within the tensor they name and do not repeat."""

from __future__ import annotations

from collections.abc import Iterator

from dmlconform.specification.model import Rule
from dmlconform.specification.rules.base import KINDS, Context, Edge, Finding, RuleKind, kind


@kind
class ArrayLength(RuleKind):
    name = "array_length"
    params = ("member", "length_member")

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        arr, count = ctx.value(rule.params["member"]), ctx.value(rule.params["length_member"])
        if arr is None or count is None:
            return
        if count != len(arr):
            yield (
                rule.params["length_member"],
                f"{rule.params['length_member']} is {count} but {rule.params['member']} has {len(arr)} entries",
            )


@kind
class AxesInRange(RuleKind):
    name = "axes_in_range"
    params = ("member", "of")
    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """An axis is the last dimension of the tensor."""
        axes, t = ctx.value(rule.params["member"]), ctx.tensor(rule.params["of"])
        if isinstance(axes, int):
            axes = (axes,)
        return axes is not None and t is not None and t.rank - 1 in tuple(axes)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        axes, t = ctx.value(rule.params["member"]), ctx.tensor(rule.params["of"])
        if axes is None or t is None:
            return
        if isinstance(axes, int):  # a single UINT axis (LP's Axis): the member itself is the path
            if axes >= t.rank:
                yield (
                    rule.params["member"],
                    f"axis {axes} is out of range for {rule.params['of']} of {t.rank} dimensions",
                )
            return
        for i, a in enumerate(axes):
            if a >= t.rank:
                yield (
                    f"{rule.params['member']}[{i}]",
                    f"axis {a} is out of range for {rule.params['of']} of {t.rank} dimensions",
                )

    def edges(self, rule: Rule, ctx: Context) -> Iterator[Edge]:
        """The first and the last axis of the tensor (an array member holds that one axis, with
        its length member set to 1)."""
        name, t = rule.params["member"], ctx.tensor(rule.params["of"])
        if t is None:
            return
        array = ctx.op.member(name)
        lengths = [
            r.params["length_member"]
            for r in ctx.op.rules
            if isinstance(KINDS[r.kind], ArrayLength) and r.params["member"] == name
        ]
        for axis in sorted({0, t.rank - 1}):
            if array is not None and array.type == "uint_array":
                yield f"{name} [{axis}]", ctx.desc.replace(**{name: (axis,), **{n: 1 for n in lengths}})
            else:
                yield f"{name} {axis}", ctx.desc.replace(**{name: axis})


@kind
class AxesUnique(RuleKind):
    name = "axes_unique"
    params = ("member",)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        axes = ctx.value(rule.params["member"])
        if axes is None:
            return
        seen: dict[int, int] = {}
        for i, a in enumerate(axes):
            if a in seen:
                yield f"{rule.params['member']}[{i}]", f"axis {a} repeats {rule.params['member']}[{seen[a]}]"
            else:
                seen[a] = i
