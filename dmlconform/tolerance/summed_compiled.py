"""The compiled test of :func:`dmlconform.tolerance.exact.summed_exactly` (large inputs; imported on
demand, so a small run does not load numba): per slice, the lowest set bit of its float32 values
and the sum of their magnitudes, over parts of a slice on every thread, merged in part order."""

from __future__ import annotations

import math

import numpy as np

from dmlconform.native import njit
from dmlconform.tolerance.work_items import work_items

#: the lowest-bit exponent of a slice with no non-zero value
NONE = 1 << 20


@njit(cache=True, nogil=True)
def _lowest_bit(bits: np.int32) -> int:  # type: ignore[no-untyped-def]
    """e such that 2^e is the lowest set bit of the non-zero finite float32 whose bits these are."""
    biased = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    e = -149
    if biased > 0:
        mant |= 0x800000
        e = biased - 150
    while (mant & 1) == 0:
        mant >>= 1
        e += 1
    return e


@njit(cache=True, nogil=True)
def parts(rows, bits, item_k, item_p0, item_p1, low_o, abs_o, finite_o):  # type: ignore[no-untyped-def]
    """Per work item (a slice's elements [p0, p1)): the lowest set bit's exponent of its non-zero
    values (NONE without one), the sum of their magnitudes (float64, in element order) and
    whether all are finite."""
    for i in range(item_k.size):
        k = item_k[i]
        low = NONE
        total = 0.0
        finite = True
        for p in range(item_p0[i], item_p1[i]):
            v = rows[k, p]
            if not math.isfinite(v):
                finite = False
                break
            if v != 0.0:
                low = min(low, _lowest_bit(bits[k, p]))
                total += abs(np.float64(v))
        low_o[i] = low
        abs_o[i] = total
        finite_o[i] = finite


def summed_exactly(rows: np.ndarray, u: float) -> np.ndarray:
    """:func:`dmlconform.tolerance.exact.summed_exactly` of float32 ``rows`` (K, n)."""
    from dmlconform.reference.compiled import run_chunks

    rows = np.ascontiguousarray(rows, dtype=np.float32)
    k_len, n = rows.shape
    item_k, item_p0, item_p1 = work_items(k_len, n)
    low, total = np.empty(item_k.size, np.int64), np.empty(item_k.size)
    finite = np.empty(item_k.size, np.bool_)
    bits = rows.view(np.int32)

    def call(i0: int, i1: int) -> None:
        parts(
            rows, bits, item_k[i0:i1], item_p0[i0:i1], item_p1[i0:i1], low[i0:i1], total[i0:i1], finite[i0:i1]
        )

    run_chunks(item_k.size, rows.size, call)
    per = item_k.size // max(k_len, 1)
    low_k = low.reshape(k_len, per).min(axis=1)
    abs_k = total.reshape(k_len, per).sum(axis=1)
    ok = finite.reshape(k_len, per).all(axis=1)
    empty = low_k == NONE
    with np.errstate(over="ignore"):
        steps = abs_k * np.ldexp(1.0, np.where(empty, 0, -low_k))
    return ok & (empty | (steps <= 1.0 / u))
