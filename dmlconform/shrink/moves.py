"""The ways to make a failing case smaller or simpler, each a step a person would take by hand.

Every move is derived from the spec, not from an operator's name: members the spec marks
``nullable`` can go (alone, together, or in the pairs a ``paired_presence`` rule ties), explicit
tensor fields can be dropped (packed strides, no flags or sizes in bytes), a dimension can get
smaller in every tensor that spans it (broadcast tensors keep their size-1 dims), a size-1
dimension can go (axis lists named by ``axes_in_range`` rules renumbered, their ``size_member``
counts updated). Whether the result is still a case worth running is not judged here but by the
validator (``search`` runs only descs that are legal, or for an illegal case break the same one
rule). Data follows the desc: a smaller tensor keeps the leading elements of the original data
along each shrunk dimension, so the values that showed the bug stay; data moves then try
simpler values (zeros, ones, small integers, fewer significant bits).

Moves are listed biggest first, in a fixed order, so a search over them is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmlconform.kernels.base import input_member
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.rules import AxesInRange, PairedPresence, of_kind
from dmlconform.specification.spec import Spec

Inputs = dict[str, np.ndarray] | None


@dataclass(frozen=True)
class Move:
    """One candidate: the new desc, its inputs (None for validation cases), and what changed."""

    desc: OperatorDesc
    inputs: Inputs
    note: str


def main_input(desc: OperatorDesc, spec: Spec) -> str | None:
    """The member whose shape the others follow: the semantics' input, else the first tensor."""
    op = spec.operator(desc.operator)
    name = input_member(op)
    if isinstance(desc.members.get(name or ""), TensorDesc):
        return name
    for m in op.members:
        if isinstance(desc.members.get(m.name), TensorDesc):
            return m.name
    return None


def size_of(desc: OperatorDesc, spec: Spec) -> tuple[int, int]:
    """(elements, dimensions) of the main input: how big a case is, for ordering and reports."""
    name = main_input(desc, spec)
    t = desc.members.get(name) if name else None
    if not isinstance(t, TensorDesc):
        return 0, 0
    return t.element_count, len(t.sizes)


def _tensors(desc: OperatorDesc) -> dict[str, TensorDesc]:
    return {k: v for k, v in desc.members.items() if isinstance(v, TensorDesc)}


# ------------------------------------------------------------------------------- desc moves


def drop_members(desc: OperatorDesc, inputs: Inputs, spec: Spec) -> Iterator[Move]:
    """Omit nullable members: all of them, the nullable inputs, each presence pair, each alone."""
    op = spec.operator(desc.operator)
    present = [m.name for m in op.members if m.nullable and m.name in desc.members]  # null ones too
    nullable_inputs = [m.name for m in op.input_members if m.name in present]
    groups: list[tuple[str, ...]] = [tuple(present), tuple(nullable_inputs)]
    for rule in of_kind(spec.rules_for(op), PairedPresence):
        groups.append(tuple(n for n in rule.params.get("members", ()) if n in present))
    groups += [(n,) for n in present]
    seen: set[tuple[str, ...]] = set()
    for group in groups:
        if not group or group in seen:
            continue
        seen.add(group)
        new = desc.replace(**dict.fromkeys(group, ...))
        data = None if inputs is None else {k: v for k, v in inputs.items() if k not in group}
        real = [n for n in group if desc.members[n] is not None]
        nulls = [n for n in group if desc.members[n] is None]
        note = (
            ", ".join(real)
            + (" and " if real and nulls else "")
            + (f"the null {', '.join(nulls)}" if nulls else "")
        )
        yield Move(new, data, f"removed {note}")


def default_attributes(desc: OperatorDesc, inputs: Inputs, spec: Spec) -> Iterator[Move]:
    """Omit attributes the spec gives a plain default (Epsilon, say) where the desc sets another
    value: one line less, and the value every reader assumes."""
    op = spec.operator(desc.operator)
    for m in op.members:
        if m.kind != "attribute" or m.name not in desc.members or m.default is None:
            continue
        if isinstance(m.default, dict) or desc.members[m.name] == m.default:
            continue
        yield Move(
            desc.replace(**{m.name: ...}), inputs, f"{m.name}: {desc.members[m.name]} -> default {m.default}"
        )


_EXPLICIT = ("strides", "flags", "total_tensor_size_in_bytes", "guaranteed_base_offset_alignment")


def pack_tensors(desc: OperatorDesc, inputs: Inputs, spec: Spec) -> Iterator[Move]:
    """Drop explicit Strides, Flags, TotalTensorSizeInBytes, alignment: all tensors, then each."""
    dressed = {
        k: t
        for k, t in _tensors(desc).items()
        if any(getattr(t, f) is not None for f in _EXPLICIT) or t.dimension_count is not None
    }
    plain = dict.fromkeys(_EXPLICIT)
    if len(dressed) > 1:
        new = desc.replace(**{k: t.replace(dimension_count=None, **plain) for k, t in dressed.items()})
        yield Move(new, inputs, "packed every tensor (no explicit Strides, Flags, sizes in bytes)")
    for k, t in dressed.items():
        yield Move(desc.replace(**{k: t.replace(dimension_count=None, **plain)}), inputs, f"packed {k}")


def _shrink_dim(desc: OperatorDesc, inputs: Inputs, rank: int, dim: int, old: int, new: int) -> Move:
    changed = {}
    for k, t in _tensors(desc).items():
        if len(t.sizes) == rank and t.sizes[dim] == old:
            sizes = t.sizes[:dim] + (new,) + t.sizes[dim + 1 :]
            changed[k] = t.replace(sizes=sizes, total_tensor_size_in_bytes=None)
    data = None
    if inputs is not None:
        data = {}
        for k, a in inputs.items():
            if a.ndim == rank and a.shape[dim] == old:
                a = np.ascontiguousarray(np.take(a, np.arange(new), axis=dim))
            data[k] = a
    return Move(desc.replace(**changed), data, f"dimension {dim}: {old} -> {new}")


SHORT_DIMENSION = 64


def shrink_sizes(desc: OperatorDesc, inputs: Inputs, spec: Spec) -> Iterator[Move]:
    """Each dimension of the main input made smaller (to 1, 2, a quarter, half, three quarters,
    7/8, 15/16, 31/32, and one less while it is short), smallest result first. No "one less" on
    long dimensions: a failure that needs a long reduction would crawl down one element per
    run (thousands of runs at n ~ 10^5); 31/32 steps reach within 3% of its threshold in a few
    dozen."""
    name = main_input(desc, spec)
    if name is None:
        return
    sizes = desc.members[name].sizes
    options = []
    for dim, old in enumerate(sizes):
        fractions = {
            1,
            2,
            old // 4,
            old // 2,
            (3 * old) // 4,
            (7 * old) // 8,
            (15 * old) // 16,
            (31 * old) // 32,
        }
        for new in sorted(fractions | ({old - 1} if old <= SHORT_DIMENSION else set())):
            if 1 <= new < old:
                options.append((new / old, dim, new))
    for _, dim, new in sorted(options):
        yield _shrink_dim(desc, inputs, len(sizes), dim, sizes[dim], new)


def _axis_members(desc: OperatorDesc, spec: Spec) -> dict[str, str | None]:
    """Axis-list members (from ``axes_in_range`` rules) -> their count member, if any."""
    op = spec.operator(desc.operator)
    counts = {m.name: m.size_member for m in op.members}
    out: dict[str, str | None] = {}
    for rule in of_kind(spec.rules_for(op), AxesInRange):
        member = rule.params.get("member")
        if isinstance(desc.members.get(member), tuple):
            out[member] = counts.get(member)
    return out


def drop_dims(desc: OperatorDesc, inputs: Inputs, spec: Spec) -> Iterator[Move]:
    """Remove a size-1 dimension of the main input from every tensor of its rank."""
    name = main_input(desc, spec)
    if name is None:
        return
    sizes = desc.members[name].sizes
    rank = len(sizes)
    if rank <= 1:
        return
    axes = _axis_members(desc, spec)
    for dim in range(rank):
        if sizes[dim] != 1:
            continue
        changed: dict[str, Any] = {}
        for k, t in _tensors(desc).items():
            if len(t.sizes) == rank and t.sizes[dim] == 1:
                strides = None if t.strides is None else t.strides[:dim] + t.strides[dim + 1 :]
                changed[k] = t.replace(
                    sizes=t.sizes[:dim] + t.sizes[dim + 1 :], strides=strides, dimension_count=None
                )
        for member, count in axes.items():
            kept = tuple(a - (a > dim) for a in desc.members[member] if a != dim)
            changed[member] = kept
            if count and count in desc.members:
                changed[count] = len(kept)
        data = None
        if inputs is not None:
            data = {k: (a.squeeze(axis=dim) if a.ndim == rank else a) for k, a in inputs.items()}
        yield Move(desc.replace(**changed), data, f"removed dimension {dim} (size 1)")


DESC_MOVES: tuple[Callable[[OperatorDesc, Inputs, Spec], Iterator[Move]], ...] = (
    drop_members,
    pack_tensors,
    drop_dims,
    shrink_sizes,
    default_attributes,
)


# ------------------------------------------------------------------------------- data moves


def _simpler_values(x: np.ndarray) -> list[np.ndarray]:
    """Versions of ``x`` by simplicity level (index): all 0, all 1, small integers -4..4 (``x``
    scaled to that range and rounded: the sign pattern and rough shape stay), integers,
    4 significant bits."""
    xf = x.astype(np.float64)
    finite = xf[np.isfinite(xf)]
    peak = float(np.abs(finite).max()) if finite.size else 0.0
    small = np.where(np.isfinite(xf), np.round(xf / peak * 4.0), xf) if peak > 4.0 else np.round(xf)
    mant, expo = np.frexp(xf)
    return [
        np.zeros_like(xf),
        np.ones_like(xf),
        small,
        np.round(xf),
        np.ldexp(np.round(mant * 16.0) / 16.0, expo),
    ]


LEVELS = ("all 0", "all 1", "small integers (-4..4)", "rounded to integers", "4 significant bits")


def simplicity(x: np.ndarray) -> int:
    """The simplest level ``x`` already is (len(LEVELS) when none): data moves only go down, so
    the search cannot cycle between equally simple values."""
    xf = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        checks = (
            not xf.any(),
            bool((xf == 1.0).all()),
            bool((np.abs(xf) <= 4.0).all() and (xf == np.round(xf)).all()),
            bool((xf == np.round(xf)).all()),
            bool((np.frexp(xf)[0] * 16.0 == np.round(np.frexp(xf)[0] * 16.0)).all()),
        )
    return next((level for level, ok in enumerate(checks) if ok), len(LEVELS))


def simplify_data(desc: OperatorDesc, inputs: Inputs, spec: Spec) -> Iterator[Move]:
    """Each input tensor's values made simpler than they are, one member at a time (the others
    kept), simplest first."""
    if not inputs:
        return
    for name in sorted(inputs):
        x = inputs[name]
        if x.dtype.kind != "f":
            continue
        now = simplicity(x)
        for level, values in enumerate(_simpler_values(x)[:now]):
            with np.errstate(over="ignore", invalid="ignore"):
                simpler = values.astype(x.dtype)
            if simplicity(simpler) < now:
                yield Move(desc, {**inputs, name: simpler}, f"{name}: {LEVELS[level]}")


def candidates(desc: OperatorDesc, inputs: Inputs, spec: Spec) -> Iterator[Move]:
    """Every move from this case, desc moves first (they shrink the most), then data moves."""
    for moves in DESC_MOVES:
        yield from moves(desc, inputs, spec)
    yield from simplify_data(desc, inputs, spec)
