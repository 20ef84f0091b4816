"""Breakers of the kinds that bound one member's value or one tensor desc: array lengths, axes,
attribute ranges and lists, and the tensor-desc kinds (dimension counts, sizes, strides, element
counts, buffer sizes, alignment, flags, output layouts).

Each mutates the realized legal base only (no overrides): the value just past the rule's bound,
on one member or one tensor, leaves every other rule satisfied.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from dmlconform.generation.breaker import Breaker, always_breakable, no_overrides
from dmlconform.generation.chooser import Chooser
from dmlconform.generation.model import Model
from dmlconform.specification.desc import (
    UINT_BITS,
    OperatorDesc,
    TensorDesc,
    minimum_implied_size_in_bytes,
    packed_strides,
)
from dmlconform.specification.model import Rule
from dmlconform.specification.rules import (
    ArrayLength,
    AttributeOneOf,
    AttributeRange,
    AxesInRange,
    AxesUnique,
    RuleKind,
    TensorAlignment,
    TensorDimensionCountRange,
    TensorElementCountMax,
    TensorFlags,
    TensorOutputDistinctStrides,
    TensorOutputSpan,
    TensorSizesCount,
    TensorSizesPositive,
    TensorStridesCount,
    TensorTotalSize,
    TensorTotalSizeMax,
)

# array_length / axes --------------------------------------------------------------------------


def _array_length_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    arr = desc.members.get(rule.params["member"])
    if not isinstance(arr, tuple):
        return None
    n = len(arr)
    wrong = [n + 1, n + 2] + ([0] if n > 0 else []) + ([n - 1] if n > 1 else [])
    return desc.replace(**{rule.params["length_member"]: ch.choice(wrong)})


def _axes_range_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    axes, t = desc.members.get(rule.params["member"]), desc.members.get(rule.params["of"])
    if isinstance(axes, int) and not isinstance(axes, bool) and isinstance(t, TensorDesc):
        return desc.replace(**{rule.params["member"]: t.rank + ch.integer(0, 3)})
    if not isinstance(axes, tuple) or not axes or not isinstance(t, TensorDesc):
        return None
    out = list(axes)
    out[ch.integer(0, len(out) - 1)] = t.rank + ch.integer(0, 3)
    return desc.replace(**{rule.params["member"]: tuple(out)})


def _axes_unique_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
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


# scalar attribute kinds ----------------------------------------------------------------------


def _range_outside(model: Model, rule: Rule) -> list[float]:
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


def _range_why(model: Model, rule: Rule) -> str | None:
    if _range_outside(model, rule):
        return None
    return f"{rule.params['member']} is a UINT: no value lies below {rule.params.get('min')}"


def _range_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    options = _range_outside(model, rule)
    return desc.replace(**{rule.params["member"]: ch.choice(options)}) if options else None


def _one_of_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    allowed = [int(v) for v in rule.params["values"]]
    options = [v for v in (0, max(allowed) + 1, max(allowed) + 2) if v not in allowed]
    return desc.replace(**{rule.params["member"]: ch.choice(options)})


# tensor-desc kinds ----------------------------------------------------------------------------


def _tensor_mutator(
    fn: Callable[[Model, Rule, str, TensorDesc, Chooser], TensorDesc | None],
    which: Callable[[Model, str], bool] = lambda model, name: True,
) -> Callable[[Model, Rule, OperatorDesc, Chooser], OperatorDesc | None]:
    def mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        names = [n for n, t in desc.members.items() if isinstance(t, TensorDesc) and which(model, n)]
        if not names:
            return None
        name = ch.choice(names, key=f"break:{rule.kind}:tensor")  # the kind's name labels a deck only
        new = fn(model, rule, name, desc.members[name], ch)
        return None if new is None else desc.replace(**{name: new})

    return mutate


def _t_dim_range(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    top = model.level.max_dimension_count
    rank = ch.choice((0, top + 1))
    sizes = tuple(ch.integer(1, 2) for _ in range(rank))
    return TensorDesc(
        t.data_type, sizes, None, t.flags, ch.choice((None, rank)), None, t.guaranteed_base_offset_alignment
    )


def _t_sizes_count(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    top, n = model.level.max_dimension_count, len(t.sizes)
    wrong = [r for r in (n - 1, n + 1, n + 2) if 1 <= r <= top]
    return t.replace(dimension_count=ch.choice(wrong), total_tensor_size_in_bytes=None)


def _t_sizes_positive(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    sizes = list(t.sizes)
    sizes[ch.integer(0, len(sizes) - 1)] = 0
    return t.replace(sizes=tuple(sizes))


def _t_strides_count(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    st = list(t.effective_strides)
    st = st[:-1] if st and ch.boolean() else [*st, ch.integer(0, 8)]
    return t.replace(strides=tuple(st))


def _t_element_count(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
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


def _t_total_size(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    need = minimum_implied_size_in_bytes(t.sizes, t.effective_strides, model.element_size(t.data_type))
    return t.replace(
        total_tensor_size_in_bytes=ch.choice((0, need - 1, max(0, need - 4), ch.integer(0, need - 1)))
    )


def _t_total_size_max(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    """A TotalTensorSizeInBytes one byte to a few elements past ``max`` elements' worth (the
    layout itself stays small)."""
    size = model.element_size(t.data_type)
    top = int(int(rule.params["max"]) * size)
    return t.replace(total_tensor_size_in_bytes=ch.choice((top + 1, top + size, top + 4 * size, 1 << 40)))


def _t_alignment(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    least = max(int(rule.params["minimum"]), model.element_size(t.data_type))
    bad = [3, 6, 12, 24, 100] + [p for p in (1, 2, 4, 8, 16, 32) if p < least]
    return t.replace(guaranteed_base_offset_alignment=ch.choice(bad))


def _inputs_only_flags(model: Model) -> list[str]:
    return [f.name for f in model.spec.tensor_flags if f.inputs_only]


def _t_flags(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    return t.replace(flags=ch.choice(_inputs_only_flags(model)))


def _outputs_why(model: Model, rule: Rule) -> str | None:
    return None if model.op.output_members else "the operator has no output tensor"


def _flags_why(model: Model, rule: Rule) -> str | None:
    if not _inputs_only_flags(model):
        return "no tensor flag is restricted to inputs"
    if not model.op.output_members:
        return "the operator has no output tensor"
    return None


def _t_short_span(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    """An output packed but for its outermost dimension of size above 1, which steps one to a
    few slots short of the rest: it spans fewer slots than it has elements while its strides stay
    non-zero and distinct (tensor-output-distinct-strides holds). Its TotalTensorSizeInBytes, if
    stated, still covers it (the span only shrinks)."""
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


def _t_repeated_stride(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    """An output whose innermost dimension of size above 1 takes the stride of the outermost one
    (repeated) or 0 while the outermost grows to keep the span: it holds every element, so only
    the distinct-strides rule is broken."""
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


#: The breakers of the kinds that bound one member's value or one tensor desc.
VALUE_BREAKERS: dict[type[RuleKind], Breaker] = {
    ArrayLength: Breaker(always_breakable, no_overrides, _array_length_mutate),
    AxesInRange: Breaker(always_breakable, no_overrides, _axes_range_mutate),
    AxesUnique: Breaker(always_breakable, no_overrides, _axes_unique_mutate),
    AttributeRange: Breaker(_range_why, no_overrides, _range_mutate),
    AttributeOneOf: Breaker(always_breakable, no_overrides, _one_of_mutate),
    TensorDimensionCountRange: Breaker(always_breakable, no_overrides, _tensor_mutator(_t_dim_range)),
    TensorSizesCount: Breaker(always_breakable, no_overrides, _tensor_mutator(_t_sizes_count)),
    TensorSizesPositive: Breaker(always_breakable, no_overrides, _tensor_mutator(_t_sizes_positive)),
    TensorStridesCount: Breaker(always_breakable, no_overrides, _tensor_mutator(_t_strides_count)),
    TensorElementCountMax: Breaker(always_breakable, no_overrides, _tensor_mutator(_t_element_count)),
    TensorTotalSize: Breaker(always_breakable, no_overrides, _tensor_mutator(_t_total_size)),
    TensorTotalSizeMax: Breaker(always_breakable, no_overrides, _tensor_mutator(_t_total_size_max)),
    TensorAlignment: Breaker(always_breakable, no_overrides, _tensor_mutator(_t_alignment)),
    TensorFlags: Breaker(
        _flags_why, no_overrides, _tensor_mutator(_t_flags, lambda model, n: n not in model.inputs)
    ),
    TensorOutputSpan: Breaker(
        _outputs_why, no_overrides, _tensor_mutator(_t_short_span, lambda model, n: n not in model.inputs)
    ),
    TensorOutputDistinctStrides: Breaker(
        _outputs_why,
        no_overrides,
        _tensor_mutator(_t_repeated_stride, lambda model, n: n not in model.inputs),
    ),
}
