"""Output-layout kinds: the tensor kinds that read an output's strides, so that no two of its
elements share a slot. Their breakers change one output's strides."""

from __future__ import annotations

import math
from collections.abc import Iterator

from dmlconform.specification.desc import TensorDesc, element_span, packed_strides
from dmlconform.specification.rules.base import Context, Finding, kind
from dmlconform.specification.rules.breaking import Chooser
from dmlconform.specification.rules.tensors import TensorKind, first_innermost_strides
from dmlconform.specification.spec import Rule
from dmlconform.specification.structure import Model


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
    breaks_outputs_only = True

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

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        """An output packed but for its outermost dimension of size above 1, which steps one to a
        few slots short of the rest: it spans fewer slots than it has elements while its strides
        stay non-zero and distinct (tensor-output-distinct-strides holds). Its
        TotalTensorSizeInBytes, if stated, still covers it (the span only shrinks)."""
        big = [d for d, n in enumerate(t.sizes) if n > 1]
        if not big:
            return None
        st = list(packed_strides(t.sizes))
        d = big[0]
        taken = {st[k] for k in big if k != d}
        shorter = [s for s in range(max(st[d] - 3, 1), st[d]) if s not in taken]
        if not shorter:
            return None
        st[d] = ch.choice(shorter, key="short:stride")
        return t.replace(strides=tuple(st))


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
    breaks_outputs_only = True

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

    def break_tensor(
        self, model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser
    ) -> TensorDesc | None:
        """An output whose innermost dimension of size above 1 takes the stride of the outermost
        one (repeated) or 0 while the outermost grows to keep the span: it holds every element,
        so only the distinct-strides rule is broken."""
        big = [d for d, n in enumerate(t.sizes) if n > 1]
        if len(big) < 2:
            return None
        st = list(packed_strides(t.sizes))
        outer, inner = big[0], big[-1]
        if ch.boolean():
            st[inner] = st[outer]  # the span only grows
        else:
            st[outer] += -(-(t.sizes[inner] - 1) * st[inner] // (t.sizes[outer] - 1))
            st[inner] = 0
        return t.replace(strides=tuple(st), total_tensor_size_in_bytes=None)
