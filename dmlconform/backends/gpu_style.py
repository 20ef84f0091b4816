"""The ``gpu-style`` backend: float32 statistics reduced the way GPU kernels (and SIMD loops)
reduce them.

A GPU reduces a slice with T threads: each thread adds its share in order (strided: elements t,
t + T, ...; or a contiguous chunk), then the T partials are combined by a tree (wave shuffles,
shared memory); a long slice may be split over several thread groups whose partials a second
pass adds up. The longest sequential chain is about ceil(n / (T * groups)) terms, far longer than
the blocks of a CPU library's pairwise sum, so these kernels are the test that the suite's default
tolerance model admits every sound GPU summation order (and its tightest model does not claim to).
The same options describe a CPU's SIMD accumulator (T = 4 to 16 lanes, strided, combined in
order: ``combine=sequential``) and a plain loop (T = 1), the orders of the ``lanes`` and
``sequential`` accuracy classes (docs/verdicts.md).

Everything else is the numpy backend's (the mean square, the gradients' sums and the Lp norms take
the same order); the options choose it:

- ``threads``: T, a power of two (1: one sequential loop; 4 to 16: SIMD lanes; 32: one wave per
  row; 256, 1024: a thread group);
- ``chains``: ``strided`` or ``contiguous`` shares;
- ``groups``: thread groups per slice; more than 1 adds a second pass over the group partials;
- ``combine``: the T partials combined by a ``tree`` (pairwise halving) or ``sequential``ly (a
  SIMD register's lanes added in order after the loop);
- ``variance``: ``two-pass`` (the mean, then the sum of squared deviations from it) or
  ``welford`` (each thread a running mean and sum of squared deviations, combined by Chan,
  Golub and LeVeque's formula: PyTorch's GPU batch norm);
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
    the shares are laid out as (m, chain, threads) and reduced over the chain axis; one thread's
    chain is a running sum (np.cumsum is sequential)."""
    m, n = rows.shape
    if threads == 1:
        return np.cumsum(rows, axis=1, dtype=F32)[:, -1:] if n else np.zeros((m, 1), F32)
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


def in_order(partials: np.ndarray) -> np.ndarray:
    """(m, T) partials added left to right: a SIMD register's lanes summed after the loop."""
    total = partials[:, 0].copy()
    for t in range(1, partials.shape[1]):
        total += partials[:, t]
    return total


COMBINE = {"tree": tree, "sequential": in_order}


def gpu_sum(rows: np.ndarray, threads: int, chains: str, groups: int, combine: str = "tree") -> np.ndarray:
    """(m,) float32 row sums: per group, chained threads and their partials combined (a tree, or
    in order); the groups' partials then added in order by a second pass."""
    n = rows.shape[1]
    per_group = max(1, math.ceil(n / groups))
    total = np.zeros(rows.shape[0], F32)
    for start in range(0, n, per_group):
        total += COMBINE[combine](thread_partials(rows[:, start : start + per_group], threads, chains))
    return total


Moments = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(count, mean, sum of squared deviations), float32 arrays of one shape."""


def chan(a: Moments, b: Moments) -> Moments:
    """Two Welford partials merged in float32 (Chan, Golub & LeVeque): n = na + nb,
    mean = ma + (mb - ma) nb / n, M2 = M2a + M2b + (mb - ma)^2 na nb / n."""
    (na, ma, qa), (nb, mb, qb) = a, b
    n = na + nb
    with np.errstate(invalid="ignore", divide="ignore"):
        delta = mb - ma
        frac = np.where(n > 0, nb / np.where(n > 0, n, F32(1)), F32(0)).astype(F32)
        weight = np.where(n > 0, na * nb / np.where(n > 0, n, F32(1)), F32(0)).astype(F32)
    return n, (ma + delta * frac).astype(F32), (qa + qb + delta * delta * weight).astype(F32)


def chan_combine(parts: Moments, combine: str) -> Moments:
    """(m, T) Welford partials merged into (m,) ones: pairwise halving (``tree``) or in order."""
    if combine == "sequential":
        out = tuple(p[:, 0] for p in parts)
        for t in range(1, parts[0].shape[1]):
            out = chan(out, tuple(p[:, t] for p in parts))  # type: ignore[assignment]
        return out  # type: ignore[return-value]
    while parts[0].shape[1] > 1:
        half = parts[0].shape[1] // 2
        parts = chan(tuple(p[:, :half] for p in parts), tuple(p[:, half:] for p in parts))  # type: ignore[arg-type]
    return tuple(p[:, 0] for p in parts)  # type: ignore[return-value]


def welford_moments(rows: np.ndarray, threads: int, chains: str, groups: int, combine: str) -> Moments:
    """(m,) float32 (count, mean, M2): per group, a Welford loop per thread over its share, the
    threads merged by ``combine``; the groups then merged in order by a second pass."""
    from dmlconform.backends.welford_compiled import welford_chains

    m, n = rows.shape
    per_group = max(1, math.ceil(n / groups))
    total: Moments | None = None
    for start in range(0, n, per_group):
        part = np.ascontiguousarray(rows[:, start : start + per_group], dtype=F32)
        count, mean, m2 = (np.zeros((m, threads), F32) for _ in range(3))
        welford_chains(part, threads, chains == "strided", count, mean, m2)
        merged = chan_combine((count, mean, m2), combine)
        total = merged if total is None else chan(total, merged)
    assert total is not None
    return total


class GpuStyleBackend(NumpyBackend):
    """The numpy backend with statistics summed in a GPU kernel's order (module docstring)."""

    name: ClassVar[str] = "gpu-style"
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        FEATURE_LEVEL_OPTION,
        Option("threads", "32", "threads per slice, a power of two", parse=_power_of_two),
        Option("chains", "strided", "each thread's share", choices=("strided", "contiguous")),
        Option("groups", "1", "thread groups per slice (more than 1: a second pass)", parse=_positive),
        Option("combine", "tree", "the threads' partials combined", choices=("tree", "sequential")),
        Option("variance", "two-pass", "how the variance is accumulated", choices=("two-pass", "welford")),
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
        total = gpu_sum(rows, o["threads"], o["chains"], o["groups"], o["combine"])
        return total.reshape([1 if i in axes else s for i, s in enumerate(x.shape)])

    def sum_over(self, x: np.ndarray, axes: tuple[int, ...], dt: type, mean: bool = False) -> np.ndarray:
        """The other kernels' sums (the mean square, the gradients', the Lp norms) in this order."""
        if not axes:
            return np.asarray(x).astype(dt)
        total = self._sum(np.asarray(x, dtype=F32), axes)
        return total / F32(math.prod(x.shape[a] for a in axes)) if mean else total

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        n = F32(math.prod(x.shape[a] for a in axes))
        if self.options["variance"] == "welford":
            o = self.options
            rows = np.ascontiguousarray(slice_rows(x, axes), dtype=F32)
            _, mean, m2 = welford_moments(rows, o["threads"], o["chains"], o["groups"], o["combine"])
            shape = [1 if i in axes else s for i, s in enumerate(x.shape)]
            mean, var = mean.reshape(shape), (m2 / n).reshape(shape)
        else:
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
            f"{o['combine']} combine, {o['variance']} variance, {o['normalize']}, statistics "
            f"{o['statistics']} (feature level {self.feature_level})"
        )
