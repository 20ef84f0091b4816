"""Kinds that tie members to one another: a group agrees on sizes, data type or dimension count,
one tensor broadcasts to another, members come in pairs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from dmlconform.specification.desc import TensorDesc
from dmlconform.specification.model import Rule
from dmlconform.specification.rules.base import Context, Finding, RuleKind, kind


class _SameField(RuleKind):
    """Every present member of the group agrees with the first one in struct order."""

    params = ("members",)
    field_name: ClassVar[str]
    label: ClassVar[str]

    def get(self, t: TensorDesc) -> Any:
        raise NotImplementedError

    def show(self, value: Any) -> str:
        return str(value)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        present = [n for n in ctx.struct_order(rule.params["members"]) if ctx.tensor(n) is not None]
        if len(present) < 2:
            return
        anchor = present[0]
        want = self.get(ctx.tensor(anchor))  # type: ignore[arg-type]
        for name in present[1:]:
            got = self.get(ctx.tensor(name))  # type: ignore[arg-type]
            if got != want:
                yield (
                    f"{name}.{self.field_name}",
                    f"{name} {self.label} {self.show(got)} differs from {anchor}'s {self.show(want)}",
                )


@kind
class SameSizes(_SameField):
    name = "same_sizes"
    field_name = "Sizes"
    label = "Sizes"

    def get(self, t: TensorDesc) -> Any:
        return t.sizes

    def show(self, value: Any) -> str:
        return "{" + ", ".join(map(str, value)) + "}"


@kind
class SameDataType(_SameField):
    name = "same_data_type"
    field_name = "DataType"
    label = "DataType"

    def get(self, t: TensorDesc) -> Any:
        return t.data_type


@kind
class SameDimensionCount(_SameField):
    name = "same_dimension_count"
    field_name = "DimensionCount"
    label = "DimensionCount"

    def get(self, t: TensorDesc) -> Any:
        return t.rank


@kind
class Broadcastable(RuleKind):
    """Each dimension of ``member`` is 1 or equal to ``to``'s; ``fixed_dims`` (Python-style
    indices, negative from the end; ``fixed_dims_by_rank`` adds dims for one rank: which dimension
    is "the channel" depends on the rank) must be equal, and only while every attribute named in
    ``fixed_when`` has the given value (a doc sentence such as "Spatial FALSE requires Width and
    Height not to be broadcast"). Tensors of different rank are left to the dimension-count
    rules."""

    name = "broadcastable"
    params = ("member", "to")
    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """The desc broadcasts: a dimension of 1 against a larger one, or, while ``fixed_when``
        holds, a fixed dimension larger than 1 (one that could have been broadcast otherwise)."""
        t, target = ctx.tensor(rule.params["member"]), ctx.tensor(rule.params["to"])
        if t is None or target is None or len(t.sizes) != len(target.sizes):
            return False
        fixed: frozenset[int] = frozenset()
        if condition_holds(rule.params.get("fixed_when"), ctx.value):
            fixed = fixed_dims(rule.params, len(t.sizes))
        return any(
            (i in fixed and b > 1) or (i not in fixed and a == 1 < b)
            for i, (a, b) in enumerate(zip(t.sizes, target.sizes, strict=False))
        )

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        t, target = ctx.tensor(rule.params["member"]), ctx.tensor(rule.params["to"])
        if t is None or target is None or len(t.sizes) != len(target.sizes):
            return
        rank = len(t.sizes)
        fixed: frozenset[int] = frozenset()
        if condition_holds(rule.params.get("fixed_when"), ctx.value):
            fixed = fixed_dims(rule.params, rank)
        for i, (a, b) in enumerate(zip(t.sizes, target.sizes, strict=False)):
            if a == b:
                continue
            if i in fixed:
                yield (
                    f"{rule.params['member']}.Sizes[{i}]",
                    f"dimension {i} is {a} but must equal {rule.params['to']}'s {b} at {ctx.level.name}",
                )
            elif a != 1:
                yield (
                    f"{rule.params['member']}.Sizes[{i}]",
                    f"dimension {i} is {a}: must be 1 or {rule.params['to']}'s {b}",
                )


def fixed_dims(params: dict[str, Any], rank: int) -> frozenset[int]:
    """The dimensions a ``broadcastable`` rule fixes on a tensor of ``rank``: ``fixed_dims`` (any
    rank, negative from the end) plus the ``fixed_dims_by_rank`` entry for that rank."""
    dims = list(params.get("fixed_dims", ()))
    for entry in params.get("fixed_dims_by_rank", ()):
        if entry["rank"] == rank:
            dims += entry["dims"]
    return frozenset(d % rank for d in dims if -rank <= d < rank)


def condition_holds(when: dict[str, Any] | None, value: Any) -> bool:
    """Whether every member named in ``when`` has the given value (``value(name)`` reads a
    member, defaults applied; BOOL members compare as truth values). No condition holds always;
    an absent member does not satisfy one."""
    for name, want in (when or {}).items():
        got = value(name)
        if got is None:
            return False
        if isinstance(want, bool) or isinstance(got, bool):
            if bool(got) != bool(want):
                return False
        elif got != want:
            return False
    return True


@kind
class PairedPresence(RuleKind):
    name = "paired_presence"
    params = ("members",)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        names = rule.params["members"]
        present = [n for n in names if ctx.present(n)]
        if present and len(present) != len(names):
            for n in names:
                if n not in present:
                    yield (
                        n,
                        f"{n} is required when {' and '.join(present)} is present"
                        + (f" below DML_FEATURE_LEVEL_{rule.until}" if rule.until else ""),
                    )
