"""The one numba normalization kernel: float64 statistics, fused output pass, slices in parallel.

Shape of the problem after the numpy glue (``reference/__init__.py``) has permuted the input so
that kept dimensions come first: slice ``k`` (of ``K``) is ``M`` rows of ``L`` contiguous
elements, row ``m`` of slice ``k`` starting at ``x[k * x_sk + m * x_sm]`` of a flat array (and
likewise for the output). Addressing rows of a flat array instead of indexing a strided 3-D view
is what lets LLVM vectorize the loops: a view of unknown inner stride never vectorizes. Scale,
Bias and FusedAdd arrive factorized as a compact 2-D array ``T[Ks, Rs]`` plus index maps
``tk[K]`` and ``tr[M*L]`` (value at (k, r) is ``T[tk[k], tr[r]]``), so that broadcast operands
are never materialized; ``*_const`` says the operand does not vary within a slice (per-channel
scale: hoisted out of the inner loop).

Why one kernel: every operator of the family is this computation with different axes and
operands, and each numba specialization costs compile time (cached to disk, ``cache=True``),
so there is one per input/output dtype pair, compiled when a tensor first needs it (small
tensors never do: ``mirror.py`` computes them in numpy, bit for bit the same).

Accuracy: the statistics come from sums of deviations ``d = x - c`` and their squares, with the
corrected formula mean = c + sum(d)/n, var = sum(d^2)/n - (sum(d)/n)^2. Its rounding error is a
few float64 ulps times n/LANES times (1 + (mean - c)^2 / var): the last factor is the
cancellation. Pass 1 takes c = the slice's first element (exact on a constant slice); if that
turns out to be more than 4 standard deviations from the mean (factor > 17), pass 2 repeats the
sums with c = the mean just found, which is the corrected two-pass algorithm (factor ~1) and
keeps the statistics float64-accurate even at |mean|/std = 1e6. Typical data needs only pass 1,
so the statistics cost one read of the slice, not two. The last pass writes ``act(scale *
(x - mean) / sqrt(var + eps) + bias + add)`` rounded once to the output array's type: with
``inv = 1/sqrt(var + eps)``, as ``(x - mean) * (scale * inv) + (bias + add)`` when the operands
are constant within the slice (no Scale/Bias/FusedAdd, or per-channel ones: two float64
operations per element, which keeps the pass at the memory-copy speed), else as ``scale * ((x -
mean) * inv) + bias + add`` per element. Either way the value carries four or five float64
roundings after the statistics, a relative error of a few 1e-16 against the 2^-11 (FLOAT16) or
2^-24 (FLOAT32) half-ULP of the single final rounding, so the output is within 1 ULP of the
correctly rounded result (tests/test_reference_accuracy.py checks it against mpmath).

Determinism: every sum uses ``LANES`` float64 accumulators: lane ``l`` adds elements ``l, l +
LANES, ...`` of each row in row order (four blocks of a row at a time, summed pairwise before
they are added to the lane), and the lanes are combined by a fixed pairwise tree. The order is
written in the source, not chosen by the compiler (no fast-math), so results do not depend on
the thread count or the SIMD width. ``error_model="numpy"``: a division by zero (``1/sqrt(0)``
with Epsilon 0 on a constant slice, a zero activation parameter) gives IEEE inf/nan as in C,
not a Python exception from inside the parallel loop.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from dmlconform.native import njit, types
from dmlconform.reference import activations

# the activation formulas are plain Python (shared with the numpy mirror); compiled here
activate = njit(cache=True, error_model="numpy")(activations.activate)

LANES = 64  # a power of two; wide enough that LLVM vectorizes the lane loop (32 gets unrolled)
SHIFT_LIMIT = 16.0  # (mean - first element)^2 above 16 variances: take pass 2 (module docstring)


@njit(cache=True, inline="always")
def _lane_total(acc):  # type: ignore[no-untyped-def]
    """Combine the lanes by a fixed pairwise tree (destroys ``acc``)."""
    w = acc.size
    while w > 1:
        w //= 2
        for j in range(w):
            acc[j] += acc[j + w]
    return acc[0]


@njit(cache=True, inline="always")
def _accumulate_deviations(row, mean, acc, acc2):  # type: ignore[no-untyped-def]
    nb = row.size // LANES
    blocks = row[: nb * LANES].reshape(nb, LANES)
    n4 = nb - nb % 4
    for i in range(0, n4, 4):
        b0 = blocks[i]
        b1 = blocks[i + 1]
        b2 = blocks[i + 2]
        b3 = blocks[i + 3]
        for j in range(LANES):
            d0 = np.float64(b0[j]) - mean
            d1 = np.float64(b1[j]) - mean
            d2 = np.float64(b2[j]) - mean
            d3 = np.float64(b3[j]) - mean
            acc[j] += (d0 + d1) + (d2 + d3)
            acc2[j] += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3)
    for i in range(n4, nb):
        block = blocks[i]
        for j in range(LANES):
            d = np.float64(block[j]) - mean
            acc[j] += d
            acc2[j] += d * d
    for j in range(nb * LANES, row.size):
        d = np.float64(row[j]) - mean
        acc[j - nb * LANES] += d
        acc2[j - nb * LANES] += d * d


@njit(cache=True, inline="always")
def _centered_stats(x, k, x_sk, x_sm, m_len, l_len, center, acc, acc2):  # type: ignore[no-untyped-def]
    """(mean, variance, mean - center) of slice ``k`` from its deviations around ``center``."""
    acc[:] = 0.0
    acc2[:] = 0.0
    for m in range(m_len):
        start = k * x_sk + m * x_sm
        _accumulate_deviations(x[start : start + l_len], center, acc, acc2)
    n = m_len * l_len
    corr = _lane_total(acc) / n
    return center + corr, _lane_total(acc2) / n - corr * corr, corr


def _signature(x_dtype: np.dtype, out_dtype: np.dtype) -> Any:
    """The one signature for input/output dtypes (float32 or float64 each).

    An explicit signature with read-only, any-layout operands keeps the JIT count at one per
    dtype pair whatever the caller passes; otherwise numba compiles a new specialization per
    layout/writeability combination."""
    ro = dict(layout="A", readonly=True)
    table = types.Array(types.float64, 2, **ro)
    index = types.Array(types.int64, 1, **ro)
    operand = (table, index, index, types.boolean)
    stats = types.Array(types.float64, 1, "C")
    i64 = types.int64
    x_t, out_t = types.float32 if x_dtype == np.float32 else types.float64, types.float64
    if out_dtype == np.float32:
        out_t = types.float32
    args = (
        types.Array(x_t, 1, "C", readonly=True),
        i64,
        i64,
        types.Array(out_t, 1, "C"),
        i64,
        i64,
        i64,
        i64,
        i64,
        *operand,
        *operand,
        *operand,
        types.boolean,
        types.float64,
        i64,
        types.float64,
        types.float64,
        stats,
        stats,
    )
    return types.void(*args)


_COMPILED: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()
_POOL: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool): a forked child makes its own

# Slices run in parallel on a thread pool (the compiled kernel releases the GIL), not with
# numba's parallel=True: the parfor machinery doubled the compile time (about 5 s instead of
# 2 s per dtype pair on 2 cores) for the same loop. Several chunks per thread let a thread
# that got more CPU take more slices on a shared machine. Each slice is computed alone, so the
# split never changes a bit of the result. NUMBA_NUM_THREADS, numba's own knob, still sets
# the thread count.
THREADS = int(
    os.environ.get("NUMBA_NUM_THREADS")
    or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
)
CHUNKS_PER_THREAD = 4
PARALLEL_MIN_ELEMENTS = 1 << 18  # below this, one call on the calling thread is quicker


def normalize_kernel(x_dtype: np.dtype, out_dtype: np.dtype) -> Callable[..., None]:
    """The kernel for one input/output dtype pair, compiled (or loaded from numba's disk cache)
    on first use, wrapped to run its slices on the thread pool. Lazy on purpose: compiling all
    four pairs eagerly with ``parallel=True`` took 21 s at import on 2 cores, and a run of small
    cases needs none of them, because :mod:`dmlconform.reference.mirror` computes those
    (bit-identical, see there)."""
    key = (np.dtype(x_dtype).name, np.dtype(out_dtype).name)
    with _LOCK:
        kernel = _COMPILED.get(key)
        if kernel is None:
            sig = _signature(np.dtype(x_dtype), np.dtype(out_dtype))
            kernel = _Chunked(njit(sig, cache=True, nogil=True, error_model="numpy")(_normalize))
            _COMPILED[key] = kernel
    return kernel


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _LOCK:
        if _POOL is None or _POOL[0] != os.getpid():  # a fork copies the pool but not its threads
            pool = ThreadPoolExecutor(max_workers=max(THREADS, 1), thread_name_prefix="dmlconform-reference")
            _POOL = (os.getpid(), pool)
        return _POOL[1]


def run_chunks(count: int, elements: int, call: Callable[[int, int], None]) -> None:
    """``call(i0, i1)`` over ``count`` independent units (slices, work items, elements) split
    into chunks on the thread pool, or once on the calling thread when the work is small
    (``elements`` below PARALLEL_MIN_ELEMENTS) or there is one thread. Each unit is computed
    alone, so the split never changes a result."""
    chunks = min(count, THREADS * CHUNKS_PER_THREAD)
    if THREADS <= 1 or chunks <= 1 or elements < PARALLEL_MIN_ELEMENTS:
        call(0, count)
        return
    bounds = [count * i // chunks for i in range(chunks + 1)]
    for done in [_pool().submit(call, lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False)]:
        done.result()


class _Chunked:
    """The compiled kernel with the same call signature, run over chunks of slices in parallel.

    A chunk ``[k0, k1)`` is the same kernel on views: the flat input and output start at slice
    ``k0``, and the per-slice arrays (operand index maps, statistics) are cut to the chunk."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled  # the numba dispatcher (its .stats show cache hits)

    def __call__(self, x, x_sk, x_sm, out, o_sk, o_sm, n_slices, m_len, l_len, sc, sc_k, sc_r, sc_const,
                 bi, bi_k, bi_r, bi_const, ad, ad_k, ad_r, ad_const, normalize, eps, act, pa, pb,
                 mean_out, var_out) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
        def run(k0: int, k1: int) -> None:
            self.compiled(
                x[k0 * x_sk :], x_sk, x_sm, out[k0 * o_sk :], o_sk, o_sm, k1 - k0, m_len, l_len,
                sc, sc_k[k0:k1], sc_r, sc_const, bi, bi_k[k0:k1], bi_r, bi_const,
                ad, ad_k[k0:k1], ad_r, ad_const, normalize, eps, act, pa, pb,
                mean_out[k0:k1], var_out[k0:k1],
            )  # fmt: skip

        run_chunks(n_slices, n_slices * m_len * l_len, run)


# Left whole on purpose (77 lines, 30 of them the parameter list): the fused output loop is the
# point of this kernel. Its statistics, per-slice folding and three output branches form one
# loop nest per slice that numba compiles and LLVM vectorizes as a unit, and that mirror.py
# reproduces operation for operation (normalize_numpy); its 28 parameters are the ABI that
# _signature, _Chunked and the mirror share. Cutting it into helpers would spread that one
# order of float64 operations over several jitted functions for no gain in reading.
def _normalize(  # type: ignore[no-untyped-def]
    x,
    x_sk,
    x_sm,
    out,
    o_sk,
    o_sm,
    n_slices,
    m_len,
    l_len,
    sc,
    sc_k,
    sc_r,
    sc_const,
    bi,
    bi_k,
    bi_r,
    bi_const,
    ad,
    ad_k,
    ad_r,
    ad_const,
    normalize,
    eps,
    act,
    pa,
    pb,
    mean_out,
    var_out,
):
    """Normalize each slice of ``x`` into ``out`` (row addressing above); write its statistics."""
    for k in range(n_slices):
        acc = np.zeros(LANES)
        acc2 = np.zeros(LANES)
        # pass 1: deviations from the slice's first element (exact for a constant slice)
        shift = np.float64(x[k * x_sk])
        mean, var, corr = _centered_stats(x, k, x_sk, x_sm, m_len, l_len, shift, acc, acc2)
        if corr * corr > SHIFT_LIMIT * var:
            # pass 2, only when the first element is far from the mean: deviations from the
            # mean, so the subtraction in the formula cannot cancel (corrected two-pass)
            mean, var, _ = _centered_stats(x, k, x_sk, x_sm, m_len, l_len, mean, acc, acc2)
        if var < 0.0:
            var = 0.0
        mean_out[k] = mean
        var_out[k] = var
        inv = 1.0
        if normalize:
            inv = 1.0 / math.sqrt(var + eps)
        s_k = sc[sc_k[k], 0]
        b_k = bi[bi_k[k], 0]
        a_k = ad[ad_k[k], 0]
        per_slice = sc_const and bi_const and ad_const
        # operands constant within the slice (none, or per channel): fold them per slice, so
        # each element costs (x - mean) * t + c, two float64 operations (module docstring)
        t_k = s_k * inv
        c_k = b_k + a_k
        for m in range(m_len):
            xs = k * x_sk + m * x_sm
            o_start = k * o_sk + m * o_sm
            xrow = x[xs : xs + l_len]
            orow = out[o_start : o_start + l_len]
            if per_slice and act == 0:
                for j in range(l_len):  # the common case: vectorized
                    orow[j] = (np.float64(xrow[j]) - mean) * t_k + c_k
                continue
            if per_slice:
                for j in range(l_len):
                    orow[j] = activate(act, (np.float64(xrow[j]) - mean) * t_k + c_k, pa, pb)
                continue
            base = m * l_len
            for j in range(l_len):
                r = base + j
                s = s_k if sc_const else sc[sc_k[k], sc_r[r]]
                b = b_k if bi_const else bi[bi_k[k], bi_r[r]]
                a = a_k if ad_const else ad[ad_k[k], ad_r[r]]
                v = s * ((np.float64(xrow[j]) - mean) * inv) + b + a
                orow[j] = activate(act, v, pa, pb)


@njit(cache=True, error_model="numpy")
def activate_all(code, x, a, b, out):  # type: ignore[no-untyped-def]
    """``activate`` of every element of ``x`` into ``out`` (the other kernels' fused activation)."""
    for i in range(x.size):
        out[i] = activate(code, x[i], a, b)


@njit(cache=True, nogil=True)
def _copy(src, dst):  # type: ignore[no-untyped-def]
    for i in range(src.size):
        dst[i] = src[i]


def parallel_copy(src: np.ndarray, dst: np.ndarray) -> None:
    """The memory-bandwidth floor for the benchmark: read every element once, write it once,
    split over the same thread pool and chunk count as the kernel (an OpenMP ``prange`` copy
    would leave its threads spinning after each call, slowing whatever runs next)."""
    a, b = src.reshape(-1), dst.reshape(-1)
    run_chunks(a.size, a.size, lambda lo, hi: _copy(a[lo:hi], b[lo:hi]))
