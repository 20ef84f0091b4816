"""How the compiled judge's element pass cuts slices into work items and merges their figures.

Why items: a slice of 2^24 elements in one slice must still use every thread, so each slice is
cut into runs of about :data:`ITEM` elements; the cut depends on the sizes only, never on the
thread count, so the figures (whose sums are added in item order) are the same bits on every
machine. Kept apart from :mod:`dmlconform.tolerance.judge`, whose models' terms it serves; it
imports the kernels' module (numba) where it is called, as the judge does.
"""

from __future__ import annotations

from typing import Any

import numpy as np


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


ITEM = 1 << 16
"""Elements of a slice per work item: a slice of 2^k elements is cut into 2^(k - 16) items."""


def work_items(k_len: int, n_slice: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slice, first, end) of each work item: each slice cut into equal runs of about
    :data:`ITEM` elements (whole if shorter), so that a reduction of 2^24 elements in one slice
    still uses every thread. The cut depends on the sizes only, never on the thread count: an
    item's sums are added to the others in item order, and that order is the last bits of the
    aggregate fit's and the gradients' sums, which must be the same on every machine."""
    parts = max(1, n_slice // ITEM)
    bounds = [n_slice * i // parts for i in range(parts + 1)]
    item_k = np.repeat(np.arange(k_len, dtype=np.int64), parts)
    item_p0 = np.tile(np.asarray(bounds[:-1], np.int64), k_len)
    item_p1 = np.tile(np.asarray(bounds[1:], np.int64), k_len)
    return item_k, item_p0, item_p1


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
