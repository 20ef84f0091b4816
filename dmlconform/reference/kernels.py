"""The one numba normalization kernel: float64 statistics, fused output pass, parallel over slices.

Shape of the problem after the numpy glue (``reference/__init__.py``) has permuted the input so
that kept dimensions come first: ``x`` is a 3-D view ``(K, M, L)``; slice ``k`` is normalized
over all of its ``M * L`` elements. Scale, Bias and FusedAdd arrive factorized as a compact 2-D
array ``T[Ks, Rs]`` plus index maps ``tk[K]`` and ``tr[M*L]`` (value at (k, r) is
``T[tk[k], tr[r]]``), so that broadcast operands are never materialized; ``*_const`` says the
operand does not vary within a slice (per-channel scale: hoisted out of the inner loop).

Why one kernel: every operator of the family is this computation with different axes and
operands, and each numba specialization costs compile time (cached to disk, ``cache=True``).

Accuracy: three passes per slice, each with a fixed summation order (four interleaved float64
accumulators along the innermost dimension, combined in a fixed tree), so results do not depend
on the thread count. Pass 1 sums; pass 2 accumulates the deviations and their squares and applies
the corrected two-pass formula (mean += sum(d)/n; var = sum(d^2)/n - (sum(d)/n)^2), which keeps
the error of mean and variance at a few float64 ulps times sqrt(n) even at |mean|/std = 1e6;
pass 3 writes ``act(scale * (x - mean) / sqrt(var + eps) + bias + add)`` rounded once to the
output array's type.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types

from dmlconform.reference.activations import activate


@njit(cache=True, inline="always")
def _operand(t, tk, tr, const, k, r):  # type: ignore[no-untyped-def]
    if const:
        return t[tk[k], 0]
    return t[tk[k], tr[r]]


def _signatures() -> list:
    """The only four specializations: input float32/float64 x output float32/float64.

    Explicit signatures with 'A' layout and read-only operands keep the JIT count at four no
    matter whether a caller passes contiguous, strided or broadcast (read-only) views; otherwise
    numba compiles a new specialization per layout/writeability combination."""
    ro = dict(layout="A", readonly=True)
    table = types.Array(types.float64, 2, **ro)
    index = types.Array(types.int64, 1, **ro)
    operand = (table, index, index, types.boolean)
    stats = types.Array(types.float64, 1, "C")
    sigs = []
    for x_t in (types.float32, types.float64):
        for out_t in (types.float32, types.float64):
            args = (
                types.Array(x_t, 3, **ro),
                types.Array(out_t, 2, "C"),
                *operand,
                *operand,
                *operand,
                types.boolean,
                types.float64,
                types.int64,
                types.float64,
                types.float64,
                stats,
                stats,
            )
            sigs.append(types.void(*args))
    return sigs


@njit(_signatures(), cache=True, parallel=True)
def normalize_kernel(  # type: ignore[no-untyped-def]
    x,
    out,
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
    """Normalize each slice ``x[k]`` into ``out[k]`` (shape (K, M*L)); write its statistics."""
    n_slices, m_len, l_len = x.shape
    n = m_len * l_len
    l4 = l_len - l_len % 4
    for k in prange(n_slices):
        # pass 1: sum
        total = 0.0
        for m in range(m_len):
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            for j in range(0, l4, 4):
                s0 += np.float64(x[k, m, j])
                s1 += np.float64(x[k, m, j + 1])
                s2 += np.float64(x[k, m, j + 2])
                s3 += np.float64(x[k, m, j + 3])
            for j in range(l4, l_len):
                s0 += np.float64(x[k, m, j])
            total += (s0 + s1) + (s2 + s3)
        mean = total / n
        # pass 2: deviations (corrected two-pass)
        dsum = 0.0
        dsq = 0.0
        for m in range(m_len):
            c0 = 0.0
            c1 = 0.0
            q0 = 0.0
            q1 = 0.0
            for j in range(0, l_len - l_len % 2, 2):
                d0 = np.float64(x[k, m, j]) - mean
                d1 = np.float64(x[k, m, j + 1]) - mean
                c0 += d0
                c1 += d1
                q0 += d0 * d0
                q1 += d1 * d1
            if l_len % 2:
                d0 = np.float64(x[k, m, l_len - 1]) - mean
                c0 += d0
                q0 += d0 * d0
            dsum += c0 + c1
            dsq += q0 + q1
        corr = dsum / n
        mean = mean + corr
        var = dsq / n - corr * corr
        if var < 0.0:
            var = 0.0
        mean_out[k] = mean
        var_out[k] = var
        inv = 1.0
        if normalize:
            inv = 1.0 / math.sqrt(var + eps)
        # pass 3: output
        s_k = _operand(sc, sc_k, sc_r, True, k, 0)
        b_k = _operand(bi, bi_k, bi_r, True, k, 0)
        a_k = _operand(ad, ad_k, ad_r, True, k, 0)
        if sc_const and bi_const and ad_const and act == 0:
            # the common case (per-slice or no Scale/Bias, no activation): a branch-free loop
            for m in range(m_len):
                base = m * l_len
                for j in range(l_len):
                    out[k, base + j] = s_k * ((np.float64(x[k, m, j]) - mean) * inv) + b_k + a_k
            continue
        for m in range(m_len):
            base = m * l_len
            for j in range(l_len):
                r = base + j
                s = s_k if sc_const else sc[sc_k[k], sc_r[r]]
                b = b_k if bi_const else bi[bi_k[k], bi_r[r]]
                a = a_k if ad_const else ad[ad_k[k], ad_r[r]]
                v = s * ((np.float64(x[k, m, j]) - mean) * inv) + b + a
                out[k, r] = activate(act, v, pa, pb)


@njit(cache=True, parallel=True)
def parallel_copy(src, dst):  # type: ignore[no-untyped-def]
    """The memory-bandwidth floor for the benchmark: read every element once, write it once."""
    a = src.reshape(-1)
    b = dst.reshape(-1)
    for i in prange(a.size):
        b[i] = a[i]
