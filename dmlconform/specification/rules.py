"""The closed vocabulary of rule kinds.

Every rule in the spec names one of these kinds; the kind knows how to check a desc against the
rule's parameters (and, in ``dmlconform.generation``, how to satisfy and break it). Nothing here
names an operator: a new operator is YAML that reuses these kinds, and a new *kind* of constraint
is one new class here plus its enum entry in ``spec/schema``.

A check yields ``(member_path, message)`` pairs; the validator turns them into Violations with the
rule's id and source. Checks see a :class:`Context` that already knows which tensors are unusable
(missing, or not a valid DML_BUFFER_TENSOR_DESC), so that one mistake is reported once, by the
rule that names it, and not again by every rule that reads the same tensor.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dmlconform.specification.desc import (
    ActivationDesc,
    OperatorDesc,
    TensorDesc,
    element_span,
    minimum_implied_size_in_bytes,
    packed_strides,
)
from dmlconform.specification.model import FeatureLevel, Operator, Rule, Spec, SupportRow

Finding = tuple[str, str]
Edge = tuple[str, OperatorDesc]  # (label, desc)


@dataclass
class Context:
    spec: Spec
    op: Operator
    level: FeatureLevel
    desc: OperatorDesc
    row: SupportRow
    unusable: set[str] = field(default_factory=set)

    def tensor(self, name: str) -> TensorDesc | None:
        """The member's tensor desc if it is present and usable, else None."""
        if name in self.unusable:
            return None
        value = self.desc.members.get(name)
        return value if isinstance(value, TensorDesc) else None

    def present(self, name: str) -> bool:
        return self.desc.members.get(name) is not None

    def value(self, name: str) -> Any:
        return self.desc.get(name, self.spec)

    def struct_order(self, names: list[str]) -> list[str]:
        order = {m.name: i for i, m in enumerate(self.op.members)}
        return sorted(names, key=lambda n: order.get(n, len(order)))


class RuleKind:
    """One kind of constraint. ``params`` are the rule parameters the spec must give."""

    name: ClassVar[str]
    params: ClassVar[tuple[str, ...]] = ()
    scope: ClassVar[str] = "operator"

    #: Whether a legal desc can sit at this kind's boundary (coverage, ``at_edge``). Kinds that
    #: only demand presence or equality (required members, same sizes, a supported data type)
    #: have no edge: every legal desc satisfies them the same way, so only an illegal desc, one
    #: that breaks the rule, exercises them.
    has_edge: ClassVar[bool] = False
    #: Whether the rule bounds the values of the members it names (a range, a list): members no
    #: such rule names take any value of their type, and their type's edges.
    bounds_values: ClassVar[bool] = False

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        raise NotImplementedError

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """Whether the legal desc in ``ctx`` depends on this rule: a value the rule reads sits at
        the limit of what it allows (a range's end, a minimum, the level something arrives at) or
        uses a permission the rule grants (a broadcast dimension, a non-zero alignment). An
        implementation that got the rule wrong meets such a desc; the coverage table counts it
        as exercising the rule, and no other legal desc."""
        return False

    def edge_reachable(
        self, rule: Rule, spec: Spec, op: Operator, level: FeatureLevel, row: SupportRow
    ) -> bool:
        """Whether any legal desc at ``level`` can sit at this rule's edge (``at_edge``): not the
        arrival level of an operator at a later level, nor a dimension count at the end of the
        range where the support table allows only 4."""
        return self.has_edge

    def edges(self, rule: Rule, ctx: Context) -> Iterator[Edge]:
        """Descs made from the legal desc in ``ctx`` whose values sit at this rule's boundary on
        the legal side, derived from the rule's own parameters (a range's ends, the least
        alignment, the largest buffer, an output's unusual strides), each labelled. The edge
        generator (``dmlconform.generation.edges``) keeps those still legal; the breaker is the
        value just past it."""
        return iter(())

    def members(self, rule: Rule) -> list[str]:
        """Members the rule binds (for spec lint and spec-diff)."""
        out = list(rule.params.get("members", []))
        for key in ("member", "to", "of", "length_member"):
            if key in rule.params:
                out.append(rule.params[key])
        return out


KINDS: dict[str, RuleKind] = {}


def kind(cls: type[RuleKind]) -> type[RuleKind]:
    KINDS[cls.name] = cls()
    return cls


def _sizes(t: TensorDesc) -> str:
    return "{" + ", ".join(map(str, t.sizes)) + "}"


# --------------------------------------------------------------------------------------------
# Operator-level kinds


@kind
class Available(RuleKind):
    name = "available"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        intro = ctx.spec.level(ctx.op.introduced)
        if ctx.level.index < intro.index:
            yield (
                "type",
                f"{ctx.op.name} was introduced in DML_FEATURE_LEVEL_{intro.name}, "
                f"not available at {ctx.level.name}",
            )

    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """At the level the operator arrives at."""
        return ctx.level.index == ctx.spec.level(ctx.op.introduced).index

    def edge_reachable(
        self, rule: Rule, spec: Spec, op: Operator, level: FeatureLevel, row: SupportRow
    ) -> bool:
        return level.index == spec.level(op.introduced).index


@kind
class Required(RuleKind):
    name = "required"
    params = ("members",)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for name in rule.params["members"]:
            if ctx.value(name) is None:
                state = "null" if name in ctx.desc.members else "missing"
                yield name, f"{name} is required but {state}"


@kind
class SupportDimensionCount(RuleKind):
    name = "support_dimension_count"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for name, support in ctx.row.tensors.items():
            t = ctx.tensor(name)
            if t is not None and t.rank not in support.dimension_counts:
                yield (
                    f"{name}.DimensionCount",
                    f"{name} has {t.rank} dimensions; supported at {ctx.level.name}: "
                    f"{_counts(support.dimension_counts)} (support row 'DML_FEATURE_LEVEL_{ctx.row.since} and above')",
                )

    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """A tensor with the fewest or the most dimensions its support row admits."""
        return any(
            (t := ctx.tensor(name)) is not None
            and support.dimension_counts
            and t.rank in (min(support.dimension_counts), max(support.dimension_counts))
            for name, support in ctx.row.tensors.items()
        )


def _counts(counts: tuple[int, ...]) -> str:
    if len(counts) > 2 and list(counts) == list(range(counts[0], counts[-1] + 1)):
        return f"{counts[0]} to {counts[-1]}"
    return ", ".join(map(str, counts))


@kind
class SupportDataType(RuleKind):
    name = "support_data_type"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for name, support in ctx.row.tensors.items():
            t = ctx.tensor(name)
            if t is not None and t.data_type not in support.data_types:
                yield (
                    f"{name}.DataType",
                    f"{name} is {t.data_type}; supported: {', '.join(support.data_types)}",
                )


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
            if r.kind == "array_length" and r.params["member"] == name
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


# --------------------------------------------------------------------------------------------
# Tensor-desc kinds: checked for every tensor member; ``check_tensor`` sees one tensor.


class TensorKind(RuleKind):
    scope = "tensor"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:  # pragma: no cover - unused
        raise NotImplementedError("tensor kinds are checked per tensor by the validator")

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        raise NotImplementedError

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        return any(
            (t := ctx.tensor(m.name)) is not None and self.tensor_at_edge(rule, m.name, t, ctx)
            for m in ctx.op.tensor_members
        )

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """``at_edge`` for one tensor of the desc (any tensor at the edge puts the desc there)."""
        return False

    def edges(self, rule: Rule, ctx: Context) -> Iterator[Edge]:
        for m in ctx.op.tensor_members:
            t = ctx.tensor(m.name)
            if t is None:
                continue
            for label, new in self.tensor_edges(rule, m.name, m.kind, t, ctx):
                yield f"{m.name}: {label}", ctx.desc.replace(**{m.name: new})

    def tensor_edges(
        self, rule: Rule, name: str, role: str, t: TensorDesc, ctx: Context
    ) -> Iterator[tuple[str, TensorDesc]]:
        """``edges`` for one tensor (``role``: input or output)."""
        return iter(())


@kind
class TensorDimensionCountRange(TensorKind):
    name = "tensor_dimension_count_range"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        top = ctx.level.max_dimension_count
        if not 1 <= t.rank <= top:
            yield (
                f"{name}.DimensionCount",
                f"DimensionCount {t.rank} is outside 1 to {top} (the maximum at {ctx.level.name})",
            )

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        return t.rank in (1, ctx.level.max_dimension_count)

    def edge_reachable(
        self, rule: Rule, spec: Spec, op: Operator, level: FeatureLevel, row: SupportRow
    ) -> bool:
        ends = {1, level.max_dimension_count}
        counts = [s.dimension_counts for s in row.tensors.values()] or [
            tuple(range(1, level.max_dimension_count + 1))
        ]
        return any(ends & set(c) for c in counts)


@kind
class TensorSizesCount(TensorKind):
    name = "tensor_sizes_count"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        if t.dimension_count is not None and t.dimension_count != len(t.sizes):
            yield (
                f"{name}.Sizes",
                f"Sizes has {len(t.sizes)} entries but DimensionCount is {t.dimension_count}",
            )


@kind
class TensorSizesPositive(TensorKind):
    name = "tensor_sizes_positive"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        for i, s in enumerate(t.sizes):
            if s < 1:
                yield f"{name}.Sizes[{i}]", f"size {s} is less than 1"

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        return 1 in t.sizes


def first_innermost_strides(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """Dense strides in the reverse dimension order (the first dimension innermost): a
    permutation of the packed layout, the same span."""
    strides, step = [], 1
    for n in sizes:
        strides.append(step)
        step *= n
    return tuple(strides)


@kind
class TensorStridesCount(TensorKind):
    name = "tensor_strides_count"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        if t.strides is not None and len(t.strides) != t.rank:
            yield f"{name}.Strides", f"Strides has {len(t.strides)} entries for {t.rank} dimensions"

    def tensor_edges(
        self, rule: Rule, name: str, role: str, t: TensorDesc, ctx: Context
    ) -> Iterator[tuple[str, TensorDesc]]:
        """Strides of the right count in the layouts the docs allow: stated packed, padded,
        permuted; on inputs also zero (broadcast), repeated and overlapping, and a stride of
        2^32 - 1 on a dimension of size 1 (read, but never stepped along)."""
        packed = packed_strides(t.sizes)
        big = [d for d, n in enumerate(t.sizes) if n > 1]
        yield "packed strides stated", t.replace(strides=packed)
        padded, step = [0] * t.rank, 1
        for d in reversed(range(t.rank)):
            padded[d], step = step, step * (t.sizes[d] + 1)
        yield "padded strides", t.replace(strides=tuple(padded), total_tensor_size_in_bytes=None)
        yield "permuted strides", t.replace(strides=first_innermost_strides(t.sizes))
        if role != "input":
            return
        yield "zero strides (one element read everywhere)", t.replace(strides=(0,) * t.rank)
        if len(big) >= 2:
            repeated = list(packed)
            repeated[big[0]] = packed[big[-1]]
            yield "a repeated stride", t.replace(strides=tuple(repeated))
        yield "unit strides (overlapping rows)", t.replace(strides=(1,) * t.rank)
        ones = [d for d, n in enumerate(t.sizes) if n == 1]
        if ones:
            wide = list(packed)
            wide[ones[0]] = 2**32 - 1
            yield "stride 2^32 - 1 on a dimension of size 1", t.replace(strides=tuple(wide))


@kind
class TensorElementCountMax(TensorKind):
    name = "tensor_element_count_max"
    params = ("max",)

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        count = math.prod(t.sizes)
        if count > rule.params["max"]:
            yield f"{name}.Sizes", f"{count} elements exceed the maximum {rule.params['max']}"

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """Within a factor of two of the maximum."""
        return 2 * math.prod(t.sizes) > rule.params["max"]

    def edges(self, rule: Rule, ctx: Context) -> Iterator[Edge]:
        """Every tensor grown along one dimension so that the largest holds ``max`` elements
        (and one fewer: FLOAT16's buffer limit stops at 2^32 - 2), the others following where
        they matched its size (broadcast dimensions stay 1), packed."""
        tensors = {m.name: t for m in ctx.op.tensor_members if (t := ctx.tensor(m.name)) is not None}
        if not tensors:
            return
        main = max(tensors.values(), key=lambda t: (t.rank, math.prod(t.sizes)))
        for count in (int(rule.params["max"]), int(rule.params["max"]) - 1):
            for d in sorted({0, main.rank - 1}):
                grown = tuple(count if i == d else 1 for i in range(main.rank))
                changes = {}
                for name, t in tensors.items():
                    if t.rank != main.rank:
                        break
                    sizes = tuple(
                        g if n == main.sizes[i] else 1
                        for i, (n, g) in enumerate(zip(t.sizes, grown, strict=True))
                    )
                    changes[name] = t.replace(sizes=sizes, strides=None, total_tensor_size_in_bytes=None)
                else:
                    yield f"{count} elements along dimension {d}", ctx.desc.replace(**changes)


@kind
class TensorTotalSize(TensorKind):
    name = "tensor_total_size"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        if t.total_tensor_size_in_bytes is None or len(t.effective_strides) != len(t.sizes):
            return  # omitted: DirectML's helper computes the minimum
        dtype = ctx.spec.data_types[t.data_type]
        need = minimum_implied_size_in_bytes(t.sizes, t.effective_strides, dtype.size)
        if t.total_tensor_size_in_bytes < need:
            yield (
                f"{name}.TotalTensorSizeInBytes",
                f"TotalTensorSizeInBytes {t.total_tensor_size_in_bytes} is below the minimum implied size {need}",
            )

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """A stated TotalTensorSizeInBytes exactly at the minimum (an omitted one is not read)."""
        if t.total_tensor_size_in_bytes is None or len(t.effective_strides) != len(t.sizes):
            return False
        size = ctx.spec.data_types[t.data_type].size
        need = minimum_implied_size_in_bytes(t.sizes, t.effective_strides, size)
        return t.total_tensor_size_in_bytes == need

    def tensor_edges(
        self, rule: Rule, name: str, role: str, t: TensorDesc, ctx: Context
    ) -> Iterator[tuple[str, TensorDesc]]:
        """TotalTensorSizeInBytes stated at the minimum implied size, and one byte above it
        (not a multiple of 4 or of the element size)."""
        size = ctx.spec.data_types[t.data_type].size
        need = minimum_implied_size_in_bytes(t.sizes, t.effective_strides, size)
        yield "TotalTensorSizeInBytes at the minimum", t.replace(total_tensor_size_in_bytes=need)
        yield (
            "TotalTensorSizeInBytes one byte past the minimum",
            t.replace(total_tensor_size_in_bytes=need + 1),
        )


@kind
class TensorTotalSizeMax(TensorKind):
    """TotalTensorSizeInBytes at most ``max`` elements' worth: the buffer's element count, a
    partial last element included, fits DirectML's 32-bit element indices."""

    name = "tensor_total_size_max"
    params = ("max",)

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        size = ctx.spec.data_types[t.data_type].size
        if size <= 0 or len(t.effective_strides) != len(t.sizes):
            return
        top = int(int(rule.params["max"]) * size)
        limit = f"{top} ({rule.params['max']} elements of {size:g} bytes)"
        total = t.total_tensor_size_in_bytes
        if total is not None:
            if total > top:
                yield f"{name}.TotalTensorSizeInBytes", f"TotalTensorSizeInBytes {total} exceeds {limit}"
            return
        # omitted: DirectML takes the minimum implied size (DMLCalcBufferTensorSize), rounded up to 4
        implied = minimum_implied_size_in_bytes(t.sizes, t.effective_strides, size)
        if implied > top:
            where = f"{name}.Strides" if t.strides is not None else f"{name}.Sizes"
            yield (
                where,
                f"the minimum implied size {implied} (TotalTensorSizeInBytes omitted) exceeds {limit}",
            )

    def tensor_edges(
        self, rule: Rule, name: str, role: str, t: TensorDesc, ctx: Context
    ) -> Iterator[tuple[str, TensorDesc]]:
        """The largest TotalTensorSizeInBytes: ``max`` elements' worth, stated on a small layout."""
        size = ctx.spec.data_types[t.data_type].size
        top = int(int(rule.params["max"]) * size)
        yield f"TotalTensorSizeInBytes {top}, the largest", t.replace(total_tensor_size_in_bytes=top)


@kind
class TensorAlignment(TensorKind):
    """GuaranteedBaseOffsetAlignment: 0, or a power of two at least ``minimum`` bytes and the
    element size."""

    name = "tensor_alignment"
    params = ("minimum",)

    @staticmethod
    def least(rule: Rule, t: TensorDesc, ctx: Context) -> int:
        """The least legal non-zero alignment: ``minimum`` or the element size (rounded up to a
        power of two), whichever is larger."""
        size = ctx.spec.data_types[t.data_type].size
        return max(int(rule.params["minimum"]), 1 << max(math.ceil(math.log2(size)), 0) if size > 0 else 1)

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        a = t.guaranteed_base_offset_alignment
        if not a:
            return
        least = self.least(rule, t, ctx)
        if a & (a - 1) or a < least:
            yield (
                f"{name}.GuaranteedBaseOffsetAlignment",
                f"GuaranteedBaseOffsetAlignment {a} must be 0 or a power of two >= {least}",
            )

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """An alignment at its least legal value: an implementation that assumes more alignment
        than the desc guarantees meets it."""
        a = t.guaranteed_base_offset_alignment
        return bool(a) and a == self.least(rule, t, ctx)

    def tensor_edges(
        self, rule: Rule, name: str, role: str, t: TensorDesc, ctx: Context
    ) -> Iterator[tuple[str, TensorDesc]]:
        """The least legal alignment and the largest a UINT holds (2^31)."""
        for a in (self.least(rule, t, ctx), 2**31):
            yield f"GuaranteedBaseOffsetAlignment {a}", t.replace(guaranteed_base_offset_alignment=a)


@kind
class TensorFlags(TensorKind):
    name = "tensor_flags"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        member = ctx.op.member(name)
        for flag in ctx.spec.tensor_flags:
            if (
                flag.name == t.effective_flags
                and flag.inputs_only
                and member is not None
                and member.kind != "input"
            ):
                yield f"{name}.Flags", f"flag {flag.name} is allowed on input tensors only"

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """An inputs-only flag on an input: the permission the rule grants, in use."""
        member = ctx.op.member(name)
        if member is None or member.kind != "input":
            return False
        return any(f.name == t.effective_flags and f.inputs_only for f in ctx.spec.tensor_flags)

    def tensor_edges(
        self, rule: Rule, name: str, role: str, t: TensorDesc, ctx: Context
    ) -> Iterator[tuple[str, TensorDesc]]:
        """Each inputs-only flag on an input."""
        if role == "input":
            for flag in ctx.spec.tensor_flags:
                if flag.inputs_only:
                    yield f"flag {flag.name}", t.replace(flags=flag.name)


def _is_output(name: str, t: TensorDesc, ctx: Context) -> bool:
    """Whether ``name`` is an output whose strides (given or packed) have one entry per size:
    what the output-layout rules read."""
    member = ctx.op.member(name)
    return member is not None and member.kind == "output" and len(t.effective_strides) == len(t.sizes)


def _unpacked_output(name: str, t: TensorDesc, ctx: Context) -> bool:
    """An output with explicit strides other than packed row-major ones: the layouts both
    output-layout rules put at their edge (permuted, overlapping, zero or repeated strides on
    dimensions of size 1)."""
    return _is_output(name, t, ctx) and t.strides is not None and tuple(t.strides) != packed_strides(t.sizes)


@kind
class TensorOutputSpan(TensorKind):
    """An output spans at least as many element slots as it has elements (IndexOfLastElement + 1
    >= the element count): fewer slots than elements means two elements share one, which
    DirectML refuses. An output that overlaps within a larger span passes, as DirectML lets it."""

    name = "tensor_output_span"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        if not _is_output(name, t, ctx):
            return
        count, span = math.prod(t.sizes), element_span(t.sizes, t.effective_strides)
        if count > span:
            yield (
                f"{name}.Strides",
                f"the output's {count} elements lie within {span} element slots (IndexOfLastElement + 1): "
                "an output's elements may not share one",
            )

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """An output whose span is exactly its element count through explicit strides, or
        which overlaps itself within a larger span."""
        return _unpacked_output(name, t, ctx)

    def tensor_edges(
        self, rule: Rule, name: str, role: str, t: TensorDesc, ctx: Context
    ) -> Iterator[tuple[str, TensorDesc]]:
        """On an output: permuted strides (the span exactly the element count), and an output
        that overlaps itself through distinct strides within a span of at least its count (the
        innermost dimension of size above 2 reaches into the next one's rows; the outer ones
        step past the whole count)."""
        if role != "output":
            return
        yield "permuted strides, span = element count", t.replace(strides=first_innermost_strides(t.sizes))
        big = [d for d, n in enumerate(t.sizes) if n > 1]
        if len(big) >= 3 and t.sizes[big[-1]] > 2:  # two dimensions alone cannot overlap within the count
            inner, outer = big[-1], big[-2]
            st = [0] * t.rank
            st[inner], st[outer] = 1, t.sizes[inner] - 1  # rows overlap by one element
            step = math.prod(t.sizes)
            for d in reversed(big[:-2]):
                st[d], step = step, step * t.sizes[d]
            yield (
                "overlapping rows within a larger span",
                t.replace(strides=tuple(st), total_tensor_size_in_bytes=None),
            )


def repeated_output_strides(sizes: tuple[int, ...], strides: tuple[int, ...]) -> list[int]:
    """The dimensions of size above 1 whose stride is 0 or the stride of an earlier such
    dimension: an index step along one of them lands on a slot another index already writes."""
    seen: set[int] = set()
    out = []
    for d, (n, s) in enumerate(zip(sizes, strides, strict=True)):
        if n > 1:
            if s == 0 or s in seen:
                out.append(d)
            seen.add(s)
    return out


@kind
class TensorOutputDistinctStrides(TensorKind):
    """An output's dimensions of size above 1 step by non-zero, pairwise distinct strides.
    DirectML's check is on the strides, not on the offsets they produce: it accepts outputs that
    overlap through unequal strides ({200, 40, 4, 1} on {2, 3, 4, 5}) and refuses a repeated or
    zero stride even where the span holds every element."""

    name = "tensor_output_distinct_strides"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        if not _is_output(name, t, ctx):
            return
        for d in repeated_output_strides(t.sizes, t.effective_strides):
            stride = t.effective_strides[d]
            why = "0" if stride == 0 else f"{stride}, the stride of an earlier dimension above size 1"
            yield (
                f"{name}.Strides[{d}]",
                f"the output's dimension {d} (size {t.sizes[d]}) has stride {why}: "
                "two of its elements would share a slot",
            )

    has_edge = True

    def tensor_at_edge(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> bool:
        """An output whose explicit strides are not packed row-major: zero or repeated strides on
        dimensions of size 1 (which DirectML ignores), or permuted ones."""
        return _unpacked_output(name, t, ctx)

    def tensor_edges(
        self, rule: Rule, name: str, role: str, t: TensorDesc, ctx: Context
    ) -> Iterator[tuple[str, TensorDesc]]:
        """On an output with dimensions of size 1: those take stride 0, or the stride of a
        dimension above size 1 (repeated), which the rule allows."""
        ones = [d for d, n in enumerate(t.sizes) if n == 1]
        if role != "output" or not ones:
            return
        packed = packed_strides(t.sizes)
        zero = [0 if d in ones else s for d, s in enumerate(packed)]
        yield "stride 0 on its dimensions of size 1", t.replace(strides=tuple(zero))
        big = [d for d, n in enumerate(t.sizes) if n > 1]
        if big:
            repeated = [packed[big[0]] if d in ones else s for d, s in enumerate(packed)]
            yield "a repeated stride on its dimensions of size 1", t.replace(strides=tuple(repeated))


# --------------------------------------------------------------------------------------------
# Activation kinds: checked for every member of type ``activation``.


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
        if act is not None and ctx.level.index < ctx.spec.level(act.since).index:
            yield (
                f"{name}.Type",
                f"{a.type} is fusable from DML_FEATURE_LEVEL_{act.since}, not at {ctx.level.name}",
            )

    has_edge = True

    def activation_at_edge(self, rule: Rule, a: ActivationDesc, ctx: Context) -> bool:
        """An activation at the level it becomes fusable."""
        act = ctx.spec.activations.get(a.type)
        return act is not None and ctx.level.index == ctx.spec.level(act.since).index

    def edges(self, rule: Rule, ctx: Context) -> Iterator[Edge]:
        """Each activation that becomes fusable at this level, fused (parameters at their
        defaults, 1 where there is none)."""
        for act in ctx.spec.activations.values():
            if ctx.spec.level(act.since).index != ctx.level.index:
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
        arriving = any(spec.level(a.since).index == level.index for a in spec.activations.values())
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

    def check_activation(self, rule: Rule, name: str, a: ActivationDesc, ctx: Context) -> Iterator[Finding]:
        if a.type != rule.params["activation"]:
            return
        act = ctx.spec.activations[a.type]
        p = rule.params["parameter"]
        default = next((x.default for x in act.parameters if x.name == p), None)
        value = a.param_dict.get(p, default)
        if value is not None and not value >= rule.params["min"]:
            until = f" before {rule.until}" if rule.until else ""
            yield f"{name}.{p}", f"{a.type} {p} {value:g} must be >= {rule.params['min']:g}{until}"

    has_edge = True

    def activation_at_edge(self, rule: Rule, a: ActivationDesc, ctx: Context) -> bool:
        """The parameter (given or defaulted) exactly at its minimum."""
        if a.type != rule.params["activation"]:
            return False
        p = rule.params["parameter"]
        act = ctx.spec.activations[a.type]
        default = next((x.default for x in act.parameters if x.name == p), None)
        return a.param_dict.get(p, default) == rule.params["min"]

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


# --------------------------------------------------------------------------------------------
# Scalar attribute kinds: a number member's legal values.


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
        ends = (rule.params.get("min"), rule.params.get("max"))
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value in ends

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        name = rule.params["member"]
        value = ctx.value(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return
        low, high = rule.params.get("min"), rule.params.get("max")
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
