"""How the compiled judge cuts slices into work items for its threads.

One cut for every compiled pass (the element pass, the summands' exactness, the on-grid slices),
so that their sums are taken in the same order. The cut depends on the sizes only, never on the
thread count: an item's sums are added to the others in item order, and that order is the last
bits of the aggregate fit's and the gradients' sums, which must be the same on every machine."""

from __future__ import annotations

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
