"""The ``gpu-style`` backend: float32 statistics reduced the way GPU kernels reduce them.

A GPU reduces a slice with T threads: each thread adds its share in order (strided: elements t,
t + T, ...; or a contiguous chunk), then the T partials are combined by a tree (wave shuffles,
shared memory); a long slice may be split over several thread groups whose partials a second
pass adds up. The longest sequential chain is about ceil(n / (T * groups)) terms, far longer than
the blocks of a CPU library's pairwise sum, so these kernels are the test that the suite's default
tolerance model admits every sound GPU summation order (and its tightest model does not claim to).

Everything else is the numpy backend's; the options choose the order:

- ``threads``: T, a power of two (32: one wave per row; 256, 1024: a thread group);
- ``chains``: ``strided`` or ``contiguous`` shares;
- ``groups``: thread groups per slice; more than 1 adds a second pass over the group partials;
- ``normalize``: ``divide`` by sqrt(var + eps), or multiply by its float32 reciprocal (``rsqrt``);
- ``statistics``: ``float32``, or ``input``: mean and variance rounded once to the input's data
  type after float32 accumulation (FLOAT16 statistics stored as FLOAT16, DirectML's F1), which
  only the ``fp16-statistics`` tolerance model admits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

import dmlconform as dc
from dmlconform.backends import FEATURE_LEVEL_OPTION, Option
from dmlconform.backends.numpy_backend import NumpyBackend, slice_rows

F32 = np.float32


def _power_of_two(text: str) -> int:
    value = int(text)
    if value < 1 or value & (value - 1):
        raise ValueError("must be a power of two")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def thread_partials(rows: np.ndarray, threads: int, chains: str) -> np.ndarray:
    """(m, threads) float32 partial sums, each thread adding its share in element order.

    numpy adds sequentially along an axis that is not the innermost of a C-contiguous array, so
    the shares are laid out as (m, chain, threads) and reduced over the chain axis."""
    m, n = rows.shape
    k = max(1, math.ceil(n / threads))
    padded = np.zeros((m, k * threads), F32)  # zeros: adding them is exact
    padded[:, :n] = rows
    if chains == "strided":  # thread t: elements t, t + T, t + 2T, ...
        laid = padded.reshape(m, k, threads)
    else:  # thread t: elements t k .. (t + 1) k - 1
        laid = np.ascontiguousarray(padded.reshape(m, threads, k).transpose(0, 2, 1))
    return np.add.reduce(laid, axis=1, dtype=F32)


def tree(partials: np.ndarray) -> np.ndarray:
    """Pairwise halving of (m, T) partials, T a power of two: a wave's shuffle-down reduction."""
    while partials.shape[1] > 1:
        half = partials.shape[1] // 2
        partials = partials[:, :half] + partials[:, half:]
    return partials[:, 0]


def gpu_sum(rows: np.ndarray, threads: int, chains: str, groups: int) -> np.ndarray:
    """(m,) float32 row sums: per group, chained threads and a tree; the groups' partials then
    added in order by a second pass."""
    n = rows.shape[1]
    per_group = max(1, math.ceil(n / groups))
    total = np.zeros(rows.shape[0], F32)
    for start in range(0, n, per_group):
        total += tree(thread_partials(rows[:, start : start + per_group], threads, chains))
    return total


class GpuStyleBackend(NumpyBackend):
    """The numpy backend with statistics summed in a GPU kernel's order (module docstring)."""

    name: ClassVar[str] = "gpu-style"
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        FEATURE_LEVEL_OPTION,
        Option("threads", "32", "threads per slice, a power of two", parse=_power_of_two),
        Option("chains", "strided", "each thread's share", choices=("strided", "contiguous")),
        Option("groups", "1", "thread groups per slice (more than 1: a second pass)", parse=_positive),
        Option(
            "normalize",
            "divide",
            "divide by sqrt(var + eps) or multiply by rsqrt",
            choices=("divide", "rsqrt"),
        ),
        Option("statistics", "float32", "the type statistics are kept in", choices=("float32", "input")),
    )

    def load(self, inputs: Mapping[str, np.ndarray], plan: dc.NormalizationPlan, member: str) -> np.ndarray:
        if member == plan.input:
            self._input_dtype = np.asarray(inputs[member]).dtype
        return super().load(inputs, plan, member)

    def _sum(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        o = self.options
        rows = np.ascontiguousarray(slice_rows(x, axes), dtype=F32)
        total = gpu_sum(rows, o["threads"], o["chains"], o["groups"])
        return total.reshape([1 if i in axes else s for i, s in enumerate(x.shape)])

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        n = F32(math.prod(x.shape[a] for a in axes))
        mean = self._sum(x, axes) / n
        d = x - mean
        var = self._sum(d * d, axes) / n
        if self.options["statistics"] == "input":
            kept = getattr(self, "_input_dtype", np.dtype(F32))
            mean, var = mean.astype(kept).astype(F32), var.astype(kept).astype(F32)
        return mean, var

    def normalize(
        self, x: np.ndarray, mean: np.ndarray, var: np.ndarray, plan: dc.NormalizationPlan
    ) -> np.ndarray:
        if plan.normalize_variance and self.options["normalize"] == "rsqrt":
            return (x - mean) * (F32(1.0) / np.sqrt(var + F32(plan.epsilon)))
        return super().normalize(x, mean, var, plan)

    def describe(self) -> str:
        o: dict[str, Any] = self.options
        return (
            f"gpu-style float32: {o['threads']} threads x {o['groups']} group(s), {o['chains']} chains, "
            f"{o['normalize']}, statistics {o['statistics']} (feature level {self.feature_level})"
        )
