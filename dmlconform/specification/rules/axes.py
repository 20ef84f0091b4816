"""Kinds of array members and the axes they hold: an array's length member matches it, its axes
lie within the tensor they name and do not repeat.

Each breaks a legal base by changing the one array or length member its rule names."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.rules.base import KINDS, Context, Edge, Finding, RuleKind, kind
from dmlconform.specification.rules.breaking import Chooser
from dmlconform.specification.spec import Rule
from dmlconform.specification.structure import Model


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

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        """The length member one or two past the array's length, or short of it."""
        arr = desc.members.get(rule.params["member"])
        if not isinstance(arr, tuple):
            return None
        n = len(arr)
        wrong = [n + 1, n + 2] + ([0] if n > 0 else []) + ([n - 1] if n > 1 else [])
        return desc.replace(**{rule.params["length_member"]: ch.choice(wrong)})


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

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        """One axis at the tensor's rank or a little past it."""
        axes, t = desc.members.get(rule.params["member"]), desc.members.get(rule.params["of"])
        if isinstance(axes, int) and not isinstance(axes, bool) and isinstance(t, TensorDesc):
            return desc.replace(**{rule.params["member"]: t.rank + ch.integer(0, 3)})
        if not isinstance(axes, tuple) or not axes or not isinstance(t, TensorDesc):
            return None
        out = list(axes)
        out[ch.integer(0, len(out) - 1)] = t.rank + ch.integer(0, 3)
        return desc.replace(**{rule.params["member"]: tuple(out)})


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

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        """One axis copied over another, or inserted again (the array's length member follows,
        so that only this rule breaks)."""
        name = rule.params["member"]
        axes = desc.members.get(name)
        if not isinstance(axes, tuple) or not axes:
            return None
        out = list(axes)
        if len(out) >= 2 and ch.boolean():
            i, j = ch.permutation(range(len(out)))[:2]
            out[i] = out[j]
            return desc.replace(**{name: tuple(out)})
        out.insert(ch.integer(0, len(out)), ch.choice(axes))
        changes: dict[str, Any] = {name: tuple(out)}
        for length_member, array_member in model.length_of.items():
            if array_member == name and length_member in desc.members:
                changes[length_member] = len(out)
        return desc.replace(**changes)
