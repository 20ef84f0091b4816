"""Sound float32 implementations the suite must pass, though they sum less carefully than numpy.

A typical port loops over each slice in order (sequential sums); PyTorch's CUDA batch norm
updates a running mean (Welford). Both err more than numpy's pairwise sums: the lenient
tolerance model has terms for them (dmlconform/tolerance/), and these backends keep those terms
honest. The required (strict) model admits them for short reductions only: the sequential loop
is also ``broken:SequentialSumStatistics``, which long reductions catch. Load
them as ``sound_backends:SequentialLoop`` with this directory on the path.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numba import njit

from dmlconform.backends.broken import sequential_statistics
from dmlconform.backends.numpy_backend import NumpyBackend
from dmlconform.specification.slices import to_slices


def _slices(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, list[int]]:
    """(slices, elements) float32 rows, and the shape of the statistics (reduced dims 1)."""
    return to_slices(x, axes).astype(np.float32), [1 if i in axes else s for i, s in enumerate(x.shape)]


@njit(cache=True)
def _welford_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of float32 ``rows``: the running mean and sum of squared deviations, every
    operation in float32 (compiled: the recurrence is one step per element, which a Python
    loop over the 65537-element slices ran at 20 s a run)."""
    m, n = rows.shape
    mean = np.zeros(m, np.float32)
    m2 = np.zeros(m, np.float32)
    for k in range(n):
        count = np.float32(k + 1)
        for i in range(m):
            delta = rows[i, k] - mean[i]
            mean[i] = mean[i] + delta / count
            m2[i] = m2[i] + delta * (rows[i, k] - mean[i])
    return mean, m2


def welford_statistics(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """One pass in float32 with a running mean (Welford 1962)."""
    rows, stat = _slices(x, axes)
    mean, m2 = _welford_rows(np.ascontiguousarray(rows))
    return mean.reshape(stat), (m2 / np.float32(rows.shape[1])).reshape(stat)


class SequentialLoop(NumpyBackend):
    name: ClassVar[str] = "sound:SequentialLoop"

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        return sequential_statistics(x, axes)


class Welford(NumpyBackend):
    name: ClassVar[str] = "sound:Welford"

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        return welford_statistics(x, axes)
