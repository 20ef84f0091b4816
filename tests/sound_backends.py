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

from dmlconform.backends.broken import sequential_statistics
from dmlconform.backends.numpy_backend import NumpyBackend
from dmlconform.specification.slices import to_slices


def _slices(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, list[int]]:
    """(slices, elements) float32 rows, and the shape of the statistics (reduced dims 1)."""
    return to_slices(x, axes).astype(np.float32), [1 if i in axes else s for i, s in enumerate(x.shape)]


def welford_statistics(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """One pass in float32 with a running mean (Welford 1962)."""
    rows, stat = _slices(x, axes)
    mean = np.zeros(rows.shape[0], np.float32)
    m2 = np.zeros(rows.shape[0], np.float32)
    for k in range(rows.shape[1]):
        delta = rows[:, k] - mean
        mean = mean + delta / np.float32(k + 1)
        m2 = m2 + delta * (rows[:, k] - mean)
    return mean.reshape(stat), (m2 / np.float32(rows.shape[1])).reshape(stat)


class SequentialLoop(NumpyBackend):
    name: ClassVar[str] = "sound:SequentialLoop"

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        return sequential_statistics(x, axes)


class Welford(NumpyBackend):
    name: ClassVar[str] = "sound:Welford"

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        return welford_statistics(x, axes)
