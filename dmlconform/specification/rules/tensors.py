"""Tensor-desc kinds: checked for every tensor member as a DML_BUFFER_TENSOR_DESC;
``check_tensor`` sees one tensor. Here the :class:`TensorKind` base and the kinds of a buffer's
shape, strides, size, alignment and flags; the output-layout kinds are in ``outputs``.

Each breaks a legal base on one of its tensors (``break_tensor``): the value just past the
rule's bound on that tensor leaves every other rule satisfied."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import ClassVar

from dmlconform.specification.desc import (
    UINT_BITS,
    OperatorDesc,
    TensorDesc,
    minimum_implied_size_in_bytes,
    packed_strides,
)
from dmlconform.specification.rules.base import Context, Edge, Finding, RuleKind, kind
from dmlconform.specification.rules.breaking import Chooser
from dmlconform.specification.spec import FeatureLevel, Operator, Rule, Spec, SupportRow
from dmlconform.specification.structure import Model


class TensorKind(RuleKind):
    scope = "tensor"

    #: Whether the breaker can put its illegal value on an output only (an inputs-only flag, an
    #: output's layout): an operator without output tensors cannot break the rule.
    breaks_outputs_only: ClassVar[bool] = False

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

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        if self.breaks_outputs_only and not model.op.output_members:
            return "the operator has no output tensor"
        return None

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        """One tensor of the base, drawn from its tensors (outputs only where the kind says so),
        broken by :meth:`break_tensor`."""
        names = [
            n
            for n, t in desc.members.items()
            if isinstance(t, TensorDesc) and not (self.breaks_outputs_only and n in model.inputs)
        ]
        if not names:
            return None
        name = ch.choice(names, key=f"break:{rule.kind}:tensor")  # the kind's name labels a deck only
        new = self.break_tensor(model, rule, name, desc.members[name], ch)
        return None if new is None else desc.replace(**{name: new})

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        """``break_desc`` for one tensor: ``t`` changed so that it breaks the rule; None to
        retry."""
        raise NotImplementedError


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

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        """No dimensions, or one more than the level allows."""
        top = model.level.max_dimension_count
        rank = ch.choice((0, top + 1))
        sizes = tuple(ch.integer(1, 2) for _ in range(rank))
        return TensorDesc(
            t.data_type,
            sizes,
            None,
            t.flags,
            ch.choice((None, rank)),
            None,
            t.guaranteed_base_offset_alignment,
        )


@kind
class TensorSizesCount(TensorKind):
    name = "tensor_sizes_count"

    def check_tensor(self, rule: Rule, name: str, t: TensorDesc, ctx: Context) -> Iterator[Finding]:
        if t.dimension_count is not None and t.dimension_count != len(t.sizes):
            yield (
                f"{name}.Sizes",
                f"Sizes has {len(t.sizes)} entries but DimensionCount is {t.dimension_count}",
            )

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        top, n = model.level.max_dimension_count, len(t.sizes)
        wrong = [r for r in (n - 1, n + 1, n + 2) if 1 <= r <= top]
        return t.replace(dimension_count=ch.choice(wrong), total_tensor_size_in_bytes=None)


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

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        sizes = list(t.sizes)
        sizes[ch.integer(0, len(sizes) - 1)] = 0
        return t.replace(sizes=tuple(sizes))


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

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        st = list(t.effective_strides)
        st = st[:-1] if st and ch.boolean() else [*st, ch.integer(0, 8)]
        return t.replace(strides=tuple(st))

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

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        """A few elements past ``max``: 2^16 along one dimension and the rest along another."""
        need = int(rule.params["max"]) + 1
        rank = len(t.sizes)
        if rank == 1:
            if need + 7 >= 1 << UINT_BITS:
                return None  # one UINT size cannot hold that many elements: another tensor breaks it
            sizes = (need + ch.integer(0, 7),)
        else:
            a = 1 << 16
            sizes = (a, -(-need // a) + ch.integer(0, 3)) + (1,) * (rank - 2)
            sizes = tuple(ch.permutation(sizes))
        return t.replace(sizes=sizes, strides=None, total_tensor_size_in_bytes=None)


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

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        need = minimum_implied_size_in_bytes(t.sizes, t.effective_strides, model.element_size(t.data_type))
        return t.replace(
            total_tensor_size_in_bytes=ch.choice((0, need - 1, max(0, need - 4), ch.integer(0, need - 1)))
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

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        """A TotalTensorSizeInBytes one byte to a few elements past ``max`` elements' worth (the
        layout itself stays small)."""
        size = model.element_size(t.data_type)
        top = int(int(rule.params["max"]) * size)
        return t.replace(total_tensor_size_in_bytes=ch.choice((top + 1, top + size, top + 4 * size, 1 << 40)))


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

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        """Not a power of two, or a power of two below the least legal alignment."""
        least = max(int(rule.params["minimum"]), model.element_size(t.data_type))
        bad = [3, 6, 12, 24, 100] + [p for p in (1, 2, 4, 8, 16, 32) if p < least]
        return t.replace(guaranteed_base_offset_alignment=ch.choice(bad))


def _inputs_only_flags(model: Model) -> list[str]:
    return [f.name for f in model.spec.tensor_flags if f.inputs_only]


@kind
class TensorFlags(TensorKind):
    name = "tensor_flags"
    breaks_outputs_only = True

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

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        if not _inputs_only_flags(model):
            return "no tensor flag is restricted to inputs"
        return super().why_unbreakable(model, rule)

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        """An inputs-only flag on an output."""
        return t.replace(flags=ch.choice(_inputs_only_flags(model)))
