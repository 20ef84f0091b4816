"""The compiled judge's on-grid slices: :func:`dmlconform.tolerance.normalization.grid_slices`
without its float64 tensors.

Why: the numpy function computes y over the whole input in float64 (about 50 bytes per element,
and 75 ms of one thread for MVN1 over 2^22 exact-statistics values against the reference's few
milliseconds), though only the slices whose sums are exact can be on the grid. Here only those
slices are read, cut into work items for every thread, three times: their sums (the mean), the
sums of their squared deviations (the variance), then each element's y = Scale z + Bias +
FusedAdd and whether it lies within 1/16 of an ULP of a number of the output type.

The same verdict as the numpy function, because on a slice whose sums are exact
(:mod:`dmlconform.tolerance.exact`) every sum it takes is exact in any order: the mean is the
same float64 (the exact sum divided by n, once), and so are the deviations, the sum of their
squares and the variance; each element's y then comes from the same float64 operations in the
same order (numba contracts no multiply-add without fast-math), rounded to the output type as
numpy rounds (to nearest, ties to even), its spacing :func:`dmlconform.tolerance.ulp_of`'s
(:func:`dmlconform.tolerance.float_bits.spacing`). On the other slices both say False.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dmlconform.native import njit, types
from dmlconform.reference import _factor
from dmlconform.reference.compiled import LANES, _lane_total, run_chunks
from dmlconform.tolerance.float_bits import binade64, inverse_binade64, spacing
from dmlconform.tolerance.work_items import ITEM, items_of

F16_OVERFLOW = 65520.0
"""The magnitude from which a float64 rounds to float16's inf (65504 and half its top spacing)."""

_ro_f4 = types.Array(types.float32, 1, "C", readonly=True)
_ro_f8 = types.Array(types.float64, 1, "C", readonly=True)
_ro_i8 = types.Array(types.int64, 1, "C", readonly=True)
_f8 = types.Array(types.float64, 1, "C")
_OPERAND = (types.Array(types.float64, 2, "C", readonly=True), _ro_i8, _ro_i8, types.boolean)
_ITEMS = (_ro_f4, types.int64, types.int64, _ro_i8, _ro_i8, _ro_i8, types.int64)


@njit(cache=True, inline="always")
def _to_half(y):  # type: ignore[no-untyped-def]
    """``y`` rounded to float16 as numpy's ``astype(np.float16)`` rounds it (to nearest, ties to
    even, inf beyond the range), as float64: scaled by powers of two to the quantum, so the
    rounding to an integer is the only inexact step."""
    a = abs(y)
    if not a < F16_OVERFLOW:
        return y if y != y else math.copysign(math.inf, y)
    q = 5.960464477539063e-08 if a < 6.103515625e-05 else binade64(a) * 9.765625e-04
    q_inv = 16777216.0 if a < 6.103515625e-05 else inverse_binade64(a) * 1024.0
    return math.copysign(np.round(a * q_inv) * q, y)


@njit(cache=True, inline="always")
def _on_grid(y, half):  # type: ignore[no-untyped-def]
    """Whether float64 ``y`` lies within 1/16 of an ULP of its rounding to the output type
    (:func:`dmlconform.tolerance.normalization.on_grid`'s test of one element)."""
    rounded = _to_half(y) if half else np.float64(np.float32(y))
    a = abs(rounded)  # inf or NaN: |y - rounded| is too, and numpy's comparison False
    return a < math.inf and abs(y - rounded) <= spacing(a, half) / 16.0


@njit(types.void(*_ITEMS, _ro_f8, types.int64, _f8), cache=True, nogil=True)
def item_sums(x, x_sk, x_sm, item_k, item_p0, item_p1, l_len, centre, power, out):  # type: ignore[no-untyped-def]
    """``out[i]``: the sum over work item i (elements [p0, p1) of slice k) of (x - centre[k])
    (``power`` 1) or its square (``power`` 2), in lanes."""
    acc = np.zeros(LANES)
    for i in range(item_k.size):
        k, p0, p1 = item_k[i], item_p0[i], item_p1[i]
        c = centre[k]
        acc[:] = 0.0
        for m in range(p0 // l_len, (p1 - 1) // l_len + 1):
            j0 = max(p0 - m * l_len, 0)
            row = x[k * x_sk + m * x_sm + j0 : k * x_sk + m * x_sm + min(p1 - m * l_len, l_len)]
            nb = row.size // LANES
            if power == 1:
                for b in range(nb):
                    for j in range(LANES):
                        acc[j] += np.float64(row[b * LANES + j]) - c
                for j in range(nb * LANES, row.size):
                    acc[j - nb * LANES] += np.float64(row[j]) - c
            else:
                for b in range(nb):
                    for j in range(LANES):
                        d = np.float64(row[b * LANES + j]) - c
                        acc[j] += d * d
                for j in range(nb * LANES, row.size):
                    d = np.float64(row[j]) - c
                    acc[j - nb * LANES] += d * d
        out[i] = _lane_total(acc)


@njit(cache=True, error_model="numpy")
def _off_grid(row, c, s, normalize, scale, bias, add, half):  # type: ignore[no-untyped-def]
    """How many of ``row``'s elements have y = scale z + bias + add off the grid (operands
    constant along the row; one loop per case, so that each vectorizes)."""
    bad = 0
    if half:
        for j in range(row.size):
            z = np.float64(row[j]) - c
            z = z / s if normalize else z
            bad += not _on_grid(scale * z + bias + add, True)
    elif normalize:
        for j in range(row.size):
            bad += not _on_grid(scale * ((np.float64(row[j]) - c) / s) + bias + add, False)
    else:
        for j in range(row.size):
            bad += not _on_grid(scale * (np.float64(row[j]) - c) + bias + add, False)
    return bad


@njit(
    types.void(*_ITEMS, _ro_f8, _ro_f8, types.boolean, *_OPERAND, *_OPERAND, *_OPERAND, types.boolean, _f8),
    cache=True,
    nogil=True,
    error_model="numpy",
)
def item_on_grid(  # type: ignore[no-untyped-def]
    x, x_sk, x_sm, item_k, item_p0, item_p1, l_len, mean, sd, normalize,
    sc, sc_k, sc_r, sc_const, bi, bi_k, bi_r, bi_const, ad, ad_k, ad_r, ad_const, half, out,
):  # fmt: skip
    """``out[i]``: 1 where every element of work item i has y = Scale z + Bias + FusedAdd
    (z = (x - mean) / sd, or x - mean where the variance is not normalized; the operands
    factorized as the element pass reads them) on the output type's grid, else 0."""
    constant = sc_const and bi_const and ad_const
    for i in range(item_k.size):
        k, p0, p1 = item_k[i], item_p0[i], item_p1[i]
        c, s = mean[k], sd[k]
        out[i] = 1.0
        for m in range(p0 // l_len, (p1 - 1) // l_len + 1):
            j0 = max(p0 - m * l_len, 0)
            j1 = min(p1 - m * l_len, l_len)
            start = k * x_sk + m * x_sm
            if constant:
                bad = _off_grid(
                    x[start + j0 : start + j1],
                    c,
                    s,
                    normalize,
                    sc[sc_k[k], 0],
                    bi[bi_k[k], 0],
                    ad[ad_k[k], 0],
                    half,
                )
            else:
                bad = 0
                for j in range(j0, j1):
                    p = m * l_len + j
                    z = np.float64(x[start + j]) - c
                    z = z / s if normalize else z
                    y = sc[sc_k[k], 0 if sc_const else sc_r[p]] * z + bi[bi_k[k], 0 if bi_const else bi_r[p]]
                    bad += not _on_grid(y + ad[ad_k[k], 0 if ad_const else ad_r[p]], half)
            if bad:
                out[i] = 0.0
                break


def _per_slice_sums(
    rows: tuple[np.ndarray, int, int, tuple[int, int, int]], items: tuple[np.ndarray, ...], centre: np.ndarray,
    power: int,
) -> np.ndarray:  # fmt: skip
    """Per slice, the sum of (x - centre)^power over its items (0 for slices without items)."""
    flat, sk, sm, (k_len, m_len, l_len) = rows
    sums = np.empty(items[0].size)

    def call(i0: int, i1: int) -> None:
        item_sums(flat, sk, sm, *(a[i0:i1] for a in items), l_len, centre, power, sums[i0:i1])

    run_chunks(items[0].size, items[0].size * ITEM, call)
    return np.bincount(items[0], weights=sums, minlength=k_len)


def grid_slices(
    plan: Any, inputs: dict[str, Any], exact: np.ndarray | None,
    rows: tuple[np.ndarray, int, int, tuple[int, int, int]], perm: tuple[int, ...], out_dtype: np.dtype,
) -> np.ndarray | None:  # fmt: skip
    """:func:`dmlconform.tolerance.normalization.grid_slices` for the compiled judge: per slice
    (the kernel's order; ``rows`` the input as the kernels read it, in the slice order ``perm``),
    whether its sums are exact (``exact``) and its outputs y lie on the output type's grid; None
    where no slice is exact or a fused activation follows."""
    if exact is None or not np.any(exact) or plan.activation not in (None, "ACTIVATION_IDENTITY"):
        return None
    flat, sk, sm, (k_len, m_len, l_len) = rows
    n = m_len * l_len
    items = items_of(np.flatnonzero(exact).astype(np.int64), n)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean = _per_slice_sums(rows, items, np.zeros(k_len), 1) / n
        sd = np.sqrt(_per_slice_sums(rows, items, mean, 2) / n + plan.epsilon)
    operands = [
        _factor(inputs[name] if name else None, plan, perm, fill)
        for name, fill in zip((plan.scale, plan.bias, plan.fused_add), (1.0, 0.0, 0.0), strict=True)
    ]
    operands = [(np.ascontiguousarray(t), tk, tr, const) for t, tk, tr, const in operands]
    flags = np.empty(items[0].size)
    half = np.dtype(out_dtype) == np.float16

    def call(i0: int, i1: int) -> None:
        item_on_grid(
            flat, sk, sm, *(a[i0:i1] for a in items), l_len, mean, sd, bool(plan.normalize_variance),
            *operands[0], *operands[1], *operands[2], half, flags[i0:i1],
        )  # fmt: skip

    run_chunks(items[0].size, items[0].size * ITEM, call)
    on_grid = np.zeros(k_len, bool)
    on_grid[np.unique(items[0])] = True
    on_grid[items[0][flags == 0.0]] = False
    return on_grid
