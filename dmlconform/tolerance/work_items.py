"""How the compiled judge cuts slices into work items for its threads.

One cut for every compiled pass (the element pass, the summands' exactness, the on-grid slices),
so that their sums are taken in the same order. The cut depends on the sizes only, never on the
thread count: an item's sums are added to the others in item order, and that order is the last
bits of the aggregate fit's and the gradients' sums, which must be the same on every machine.
And how the element pass's per-item figures merge into one row per slice and name the worst
element (the figures' columns are the kernels' module's, imported where they are read, as the
judge imports it: numba loads only for the cases it takes)."""

from __future__ import annotations

from typing import Any

import numpy as np

ITEM = 1 << 16
"""Elements of a slice per work item: a slice of 2^k elements is cut into 2^(k - 16) items."""


def items_of(slices: np.ndarray, n_slice: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slice, first, end) of each work item of ``slices`` (slice indices, each of ``n_slice``
    elements): each cut into equal runs of about :data:`ITEM` elements (whole if shorter), so
    that a reduction of 2^24 elements in one slice still uses every thread."""
    parts = max(1, n_slice // ITEM)
    bounds = np.asarray([n_slice * i // parts for i in range(parts + 1)], np.int64)
    slices = np.asarray(slices, np.int64)
    return np.repeat(slices, parts), np.tile(bounds[:-1], slices.size), np.tile(bounds[1:], slices.size)


def work_items(k_len: int, n_slice: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`items_of` every slice of ``k_len``."""
    return items_of(np.arange(k_len, dtype=np.int64), n_slice)


def logical_index(
    k: np.ndarray,
    pos: np.ndarray,
    plan: Any,
    n_kept_shape: tuple[int, ...],
    red_shape: tuple[int, ...],
) -> np.ndarray:
    """The C-order flat index in the logical array of element ``pos`` of slice ``k``."""
    index = [np.zeros_like(k) for _ in plan.shape]
    for axis, v in zip(
        plan.kept_axes, np.unravel_index(k, n_kept_shape) if n_kept_shape else (), strict=False
    ):
        index[axis] = v
    for axis, v in zip(plan.axes, np.unravel_index(pos, red_shape) if red_shape else (), strict=False):
        index[axis] = v
    return np.ravel_multi_index(tuple(index), plan.shape)


def merge_items(fig: np.ndarray, item_k: np.ndarray, k_len: int) -> np.ndarray:
    """One figures row per slice from its work items' rows (in element order): sums add,
    maxima take the max, the worst element is the first item's holding the largest ratio."""
    from dmlconform.tolerance import judge_compiled as jk

    if item_k.size == k_len:
        return fig
    parts = item_k.size // k_len
    rows = fig.reshape(k_len, parts, jk.N_FIGURES)
    out = rows.sum(axis=1)
    for col in (jk.F_ULP, jk.F_ABS):
        out[:, col] = rows[:, :, col].max(axis=1)
    first = np.argmax(rows[:, :, jk.F_RATIO], axis=1)
    for col in (jk.F_RATIO, jk.F_POS, jk.F_GOT, jk.F_REF, jk.F_BUDGET):
        out[:, col] = rows[np.arange(k_len), first, col]
    return out


def worst_of(fig: np.ndarray, plan: Any) -> tuple[int, tuple[int, ...]]:
    """(slice, logical index) of the worst element: the largest ratio, the first in C order
    among equal ones (as np.argmax over the whole tensor)."""
    from dmlconform.tolerance import judge_compiled as jk

    kept_shape = tuple(plan.shape[i] for i in plan.kept_axes)
    red_shape = tuple(plan.shape[i] for i in plan.axes)
    top = fig[:, jk.F_RATIO].max()
    ks = np.flatnonzero(fig[:, jk.F_RATIO] == top)
    flat = logical_index(ks, fig[ks, jk.F_POS].astype(np.int64), plan, kept_shape, red_shape)
    best = int(np.argmin(flat))
    return int(ks[best]), tuple(int(i) for i in np.unravel_index(int(flat[best]), plan.shape))
