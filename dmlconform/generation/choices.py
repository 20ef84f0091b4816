"""The plan of a desc: every choice drawn, before any tensor layout.

A :class:`Choices` draws every choice (presence, ranks, dtypes, root shapes, broadcast masks,
attribute values, fused activation) from a :class:`~dmlconform.specification.rules.Chooser`,
within the structure the :class:`~dmlconform.specification.structure.Model` made of the rules,
so that the desc is legal by construction (never generate-and-filter). An illegal desc's legal
base is the same plan drawn under the :class:`~dmlconform.specification.rules.Overrides` its
rule's kind asks for (``RuleKind.break_plan``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dmlconform.specification.desc import ActivationDesc
from dmlconform.specification.rules import Chooser, Overrides, activation_params, condition_holds, fixed_dims
from dmlconform.specification.structure import Model

OMIT: Any = type("Omit", (), {"__repr__": lambda self: "OMIT"})()
"""Choices value for a member that the desc leaves out (the spec's default applies)."""

FLOAT_ATTRIBUTE_CLASSES: tuple[float, ...] = (1e-5, 0.0, 1e-12, 1e-3, 1.0, 100.0)
"""Value classes for FLOAT attributes (Epsilon): zero, tiny, typical, large."""

DEFAULT_MAX_SIZE = 7
DEFAULT_MAX_ELEMENTS = 4096


@dataclass
class Options:
    """Knobs of the legal generator: ``dtype`` forces a data type where supported; ``max_size``
    and ``max_elements`` bound shapes (defaults keep numeric runs fast)."""

    dtype: str | None = None
    max_size: int = DEFAULT_MAX_SIZE
    max_elements: int = DEFAULT_MAX_ELEMENTS
    layouts: bool = True


@dataclass
class Choices:
    present: frozenset[str]
    ranks: dict[int, int]
    dtypes: dict[str, str]
    shapes: dict[int, tuple[int, ...]]
    masks: dict[int, tuple[bool, ...]]
    attrs: dict[str, Any]

    def group_sizes(self, model: Model) -> dict[int, tuple[int, ...]]:
        out: dict[int, tuple[int, ...]] = {}
        for g in model.group_order:
            if g in self.masks:
                base = out[model.parent[g]]
                out[g] = tuple(s if keep else 1 for s, keep in zip(base, self.masks[g], strict=True))
            else:
                out[g] = self.shapes[g]
        return out


def _free_shape(ch: Chooser, rank: int, opts: Options) -> tuple[int, ...]:
    sizes = [ch.integer(1, opts.max_size) for _ in range(rank)]
    while math.prod(sizes) > opts.max_elements:
        i = max(range(rank), key=lambda k: sizes[k])
        sizes[i] = max(1, sizes[i] // 2)
    return tuple(sizes)


def draw_choices(model: Model, ch: Chooser, opts: Options, ov: Overrides | None = None) -> Choices | None:
    """Every choice of a desc; None when the overrides cannot be met."""
    ov = ov or Overrides()
    combos = [c for c in model.combos if ov.force_present <= c and not (ov.force_absent & c)]
    if not combos:
        return None
    present = ch.choice(combos, key="presence")
    ranks = _choose_ranks(model, ch, ov)
    if ranks is None:
        return None
    dtypes = _choose_dtypes(model, ch, opts, ov)
    shapes, masks = _choose_shapes(model, ch, opts, ranks)
    attrs = _choose_attributes(model, ch, ranks)
    _choose_lengths(model, ch, attrs)
    attrs.update(ov.attrs)
    _apply_conditional_fixed(model, attrs, ranks, masks)
    return Choices(present, ranks, dtypes, shapes, masks, attrs)


def _choose_ranks(model: Model, ch: Chooser, ov: Overrides) -> dict[int, int] | None:
    """The rank of every size group, one per rank component; None when a component has no rank
    every tensor of it supports."""
    ranks: dict[int, int] = {}
    for ci, comp in enumerate(model.comps):
        if ci in ov.comp_rank:
            r = ov.comp_rank[ci]
        else:
            options = model.comp_ranks[ci]
            if not options:
                return None
            r = ch.choice(options, key=f"rank{ci}")
        for g in comp:
            ranks[g] = ov.group_rank.get(g, r)
    return ranks


def _choose_dtypes(model: Model, ch: Chooser, opts: Options, ov: Overrides) -> dict[str, str]:
    """The data type of every tensor, one per dtype group (``opts.dtype`` where the group
    supports it)."""
    dtypes: dict[str, str] = {}
    for gi, group in enumerate(model.dtype_groups):
        if gi in ov.dtype_group:
            d = ov.dtype_group[gi]
        elif opts.dtype is not None and opts.dtype in model.dtype_options[gi]:
            d = opts.dtype
        else:
            d = ch.choice(model.dtype_options[gi], key=f"dtype{gi}")
        for t in group:
            dtypes[t] = ov.dtype_tensor.get(t, d)
    return dtypes


def _choose_shapes(
    model: Model, ch: Chooser, opts: Options, ranks: dict[int, int]
) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[bool, ...]]]:
    """(shapes, masks): a free shape for each root size group (or one whose rank differs from
    its parent's), and for each broadcasting group the mask of the parent's dimensions it keeps
    (the others are 1)."""
    shapes: dict[int, tuple[int, ...]] = {}
    masks: dict[int, tuple[bool, ...]] = {}
    for g in model.group_order:
        p = model.parent.get(g)
        rank = ranks[g]
        if p is not None and ranks[p] == rank:
            fixed = set().union(*(fixed_dims(b.rule.params, rank) for b in model.fixed_of.get(g, ())))
            mode = ch.choice(("mixed", "equal", "ones"), key=f"mask{g}")
            masks[g] = tuple(
                True if i in fixed else (mode == "equal" or (mode == "mixed" and ch.boolean()))
                for i in range(rank)
            )
        else:
            shapes[g] = _free_shape(ch, rank, opts)
    return shapes, masks


def _choose_attributes(model: Model, ch: Chooser, ranks: dict[int, int]) -> dict[str, Any]:
    """A value (or OMIT) for every member that is not a tensor, but for the length members of
    arrays, which :func:`_choose_lengths` fills once the arrays are drawn."""
    attrs: dict[str, Any] = {}
    required = model.required
    for m in model.op.members:
        if m.type == "tensor":
            continue
        can_omit = m.name not in required and m.default is not None
        if m.type == "activation":
            attrs[m.name] = _choose_activation(model, ch, m.name)
        elif m.type == "bool":
            attrs[m.name] = OMIT if can_omit and ch.boolean() else ch.choice((False, True), key=m.name)
        elif m.type == "float":
            attrs[m.name] = (
                OMIT
                if can_omit and ch.choice((False, True), key=m.name + ":omit")
                else ch.choice(_legal_draws(model, m.name, m.draw or FLOAT_ATTRIBUTE_CLASSES), key=m.name)
            )
        elif m.type == "uint_array":
            of = model.axes_of.get(m.name)
            rank = ranks[model.size_group_of[of]] if of else 4
            attrs[m.name] = _choose_axes(ch, rank, m.name in model.axes_unique or of is not None, m.name)
        elif m.type == "uint":
            if m.name in model.length_of:
                continue  # filled in below, once the array is known
            attrs[m.name] = OMIT if can_omit and ch.boolean() else _choose_uint(model, ch, m, ranks)
    return attrs


def _choose_lengths(model: Model, ch: Chooser, attrs: dict[str, Any]) -> None:
    """Each array's length member: its array's length, or OMIT where it may default."""
    for length_member, array_member in model.length_of.items():
        member = model.op.member(length_member)
        arr = attrs.get(array_member)
        can_omit = member is not None and member.default is not None and length_member not in model.required
        if isinstance(arr, tuple):
            attrs[length_member] = OMIT if can_omit and ch.boolean() else len(arr)
        else:
            attrs[length_member] = OMIT


def _legal_draws(model: Model, name: str, classes: Sequence[float]) -> tuple[float, ...]:
    """The value classes of a number attribute that its one_of and range rules allow."""
    allowed = model.one_of.get(name)
    low, high = model.ranges.get(name, (None, None))
    out = tuple(
        v
        for v in classes
        if (allowed is None or v in allowed) and (low is None or v >= low) and (high is None or v <= high)
    )
    return out or tuple(allowed or ()) or tuple(classes)


def _choose_uint(model: Model, ch: Chooser, member: Any, ranks: dict[int, int]) -> int:
    """A UINT attribute: a single axis in range of its tensor (axes_in_range on a UINT), one
    of the values an attribute_one_of rule lists, the member's own ``draw`` classes, or a small
    number within its attribute_range."""
    of = model.axes_of.get(member.name)
    if of is not None:
        return ch.integer(0, ranks[model.size_group_of[of]] - 1)
    if member.name in model.one_of:
        return int(ch.choice(model.one_of[member.name], key=member.name))
    if member.draw:
        return int(ch.choice(_legal_draws(model, member.name, member.draw), key=member.name))
    low, high = model.ranges.get(member.name, (None, None))
    low_i = int(math.ceil(low)) if low is not None else 0
    return ch.integer(low_i, int(high) if high is not None else low_i + 4)


def _attr_value(model: Model, attrs: dict[str, Any], name: str) -> Any:
    value = attrs.get(name, OMIT)
    if value is OMIT:
        member = model.op.member(name)
        return member.default if member is not None else None
    return value


def _apply_conditional_fixed(
    model: Model, attrs: dict[str, Any], ranks: dict[int, int], masks: dict[int, tuple[bool, ...]]
) -> None:
    """Broadcast dims that must equal the parent's only under a condition on attributes
    (``fixed_when``): kept equal once the drawn attributes meet it."""
    for g, entries in model.fixed_cond.items():
        if g not in masks:
            continue
        rank = ranks[g]
        for b in entries:
            if condition_holds(b.when, lambda n: _attr_value(model, attrs, n)):
                fixed = fixed_dims(b.rule.params, rank)
                masks[g] = tuple(keep or i in fixed for i, keep in enumerate(masks[g]))


def _choose_axes(ch: Chooser, rank: int, unique: bool, key: str) -> tuple[int, ...]:
    """A set of axes: every length 1..rank, contiguous or not, sorted or in any order."""
    n = ch.choice(tuple(range(1, rank + 1)), key=f"{key}:len{rank}")
    mode = ch.choice(("contiguous", "any", "shuffled"), key=f"{key}:mode")
    if mode == "contiguous":
        start = ch.integer(0, rank - n)
        axes = list(range(start, start + n))
    else:
        pool = list(range(rank))
        axes = sorted(pool.pop(ch.integer(0, len(pool) - 1)) for _ in range(n))
    if mode == "shuffled":
        axes = ch.permutation(axes)
    return tuple(axes)


def _choose_activation(model: Model, ch: Chooser, member: str) -> Any:
    options: tuple[Any, ...] = (None, OMIT, *model.activations)
    act = ch.choice(options, key=f"{member}:type")
    if act is None or act is OMIT:
        return act
    return ActivationDesc(act.name, activation_params(model, ch, act))
