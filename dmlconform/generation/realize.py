"""A plan made a desc: each present tensor gets a drawn layout.

:func:`realize` turns a :class:`~dmlconform.generation.choices.Choices` into an OperatorDesc and draws
each tensor's layout (packed, explicit strides, padded, permuted, zero-stride broadcast for
inputs; explicit DimensionCount, TotalTensorSizeInBytes, alignment, flags); :func:`build_legal`
is plan and realization together, the one legal desc the drivers repeat.
"""

from __future__ import annotations

from typing import Any

from dmlconform.generation.choices import OMIT, Choices, Options, draw_choices
from dmlconform.specification.desc import (
    OperatorDesc,
    TensorDesc,
    minimum_implied_size_in_bytes,
    packed_strides,
)
from dmlconform.specification.rules import Chooser
from dmlconform.specification.structure import Model

LAYOUTS: tuple[str, ...] = ("packed", "explicit", "padded", "permuted")
"""The layouts any tensor is drawn in; inputs also ``broadcast`` (zero strides)."""


def _layout(
    model: Model, ch: Chooser, name: str, dtype: str, sizes: tuple[int, ...], opts: Options
) -> TensorDesc:
    """One tensor desc with a drawn layout; inputs may broadcast with zero strides."""
    is_input = name in model.inputs
    rank = len(sizes)
    if not opts.layouts:
        return TensorDesc(dtype, sizes)
    kinds = (*LAYOUTS, "broadcast") if is_input else LAYOUTS
    strides = _strides(ch, ch.choice(kinds, key=f"layout:{name}"), sizes)
    total = _total_size(ch, sizes, strides, model.element_size(dtype))
    flags_options: list[str | None] = [None, "NONE"]
    flags_options += [f.name for f in model.spec.tensor_flags if f.value and (is_input or not f.inputs_only)]
    return TensorDesc(
        dtype,
        sizes,
        strides,
        ch.choice(tuple(flags_options), key=f"flags:{is_input}"),
        ch.choice((None, rank), key="dimcount"),
        total,
        ch.choice((None, 0, 16), key="align"),
    )


def _strides(ch: Chooser, kind: str, sizes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The strides of one layout kind (None: packed, the strides left out)."""
    rank = len(sizes)
    if kind == "explicit":
        return packed_strides(sizes)
    if kind in ("padded", "permuted"):
        order = list(range(rank)) if kind == "padded" else ch.permutation(range(rank))
        pad = kind == "padded" or ch.boolean()
        st = [0] * rank
        step = 1
        for d in reversed(order):
            st[d] = step
            step = step * sizes[d] + (ch.integer(0, 3) if pad else 0)
        return tuple(st)
    if kind == "broadcast":
        zero = {i for i in range(rank) if ch.boolean()} or {ch.integer(0, rank - 1)}
        st = [0] * rank
        step = 1
        for d in reversed(range(rank)):
            if d not in zero:
                st[d] = step
                step *= sizes[d]
        return tuple(st)
    return None


def _total_size(
    ch: Chooser, sizes: tuple[int, ...], strides: tuple[int, ...] | None, esize: float
) -> int | None:
    """TotalTensorSizeInBytes: left out, exactly the bytes the layout reaches, or some slack past
    them."""
    total_kind = ch.choice(("none", "exact", "slack"), key="total")
    total = None
    if total_kind != "none":
        total = minimum_implied_size_in_bytes(sizes, strides or packed_strides(sizes), esize)
        if total_kind == "slack":
            total += 4 * ch.integer(1, 16)
    return total


def realize(model: Model, plan: Choices, ch: Chooser, opts: Options) -> OperatorDesc:
    sizes = plan.group_sizes(model)
    members: dict[str, Any] = {}
    for m in model.op.members:
        if m.type == "tensor":
            if m.name in plan.present:
                members[m.name] = _layout(
                    model, ch, m.name, plan.dtypes[m.name], sizes[model.size_group_of[m.name]], opts
                )
            elif ch.choice((True, False), key=f"absent:{m.name}"):
                members[m.name] = None
        else:
            value = plan.attrs.get(m.name, OMIT)
            if value is not OMIT:
                members[m.name] = value
    return OperatorDesc(model.op.name, members)


def build_legal(model: Model, ch: Chooser, opts: Options | None = None) -> OperatorDesc:
    """One desc legal at the model's level (below the operator's introduction: legal but for
    ``available``)."""
    opts = opts or Options()
    plan = draw_choices(model, ch, opts)
    if plan is None:
        raise ValueError(f"{model.op.name} at {model.level.name}: the spec admits no legal desc")
    return realize(model, plan, ch, opts)
