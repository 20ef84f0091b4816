"""A tensor viewed as the slices of a reduction: one row per slice, the reduced axes last.

The one layout every reducing kernel, budget model and judge reads (the reference's kernels, the
tolerance models and their compiled judge, the backends that emulate GPU reductions, the data
regimes that draw a slice at a time), so it lives with the spec's semantics, below all of them.
"""

from __future__ import annotations

import math

import numpy as np


def to_slices(arr: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """View ``arr`` as (slices, elements per slice): reduction axes last, flattened."""
    keep = [i for i in range(arr.ndim) if i not in axes]
    moved = np.transpose(arr, keep + list(axes))
    n = math.prod(arr.shape[a] for a in axes)
    return moved.reshape(-1, n)


def from_slices(slices: np.ndarray, shape: tuple[int, ...], axes: tuple[int, ...]) -> np.ndarray:
    keep = [i for i in range(len(shape)) if i not in axes]
    order = keep + list(axes)
    moved = slices.reshape([shape[i] for i in order])
    return np.transpose(moved, np.argsort(order))


def slice_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with the reduced ``axes`` as 1: one value per slice, broadcast along its
    elements; (K,) per-slice values in :func:`to_slices` order reshape to it (the kept axes in
    C order)."""
    return tuple(1 if i in axes else s for i, s in enumerate(shape))
