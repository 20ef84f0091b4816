"""The compiled test of :mod:`dmlconform.tolerance.exact` (large inputs; imported on demand, so a
small run does not load numba)."""

from __future__ import annotations

import math

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def _lowest_bit_exponent(v: float) -> int:
    """e such that 2^e is the lowest set bit of |v| (v finite, non-zero)."""
    m, e = math.frexp(abs(v))  # |v| = m 2^e, 0.5 <= m < 1: m 2^53 is an integer
    mant = np.int64(m * 9007199254740992.0)
    low = mant & -mant
    return e - 53 + math.frexp(float(low))[1] - 1


@nb.njit(cache=True, nogil=True)
def _gcd(a: np.int64, b: np.int64) -> np.int64:
    while b:
        a, b = b, a % b
    return a


@nb.njit(cache=True, nogil=True)
def exact_rows(rows: np.ndarray, limit: float) -> np.ndarray:
    """Per row of ``rows`` (K, n), float64: True where its sums in a precision whose exact
    integers reach ``limit`` are exact in any order (the module docstring)."""
    k_len, n = rows.shape
    out = np.zeros(k_len, np.bool_)
    for k in range(k_len):
        q = 100000
        finite = True
        for i in range(n):
            v = rows[k, i]
            if not math.isfinite(v):
                finite = False
                break
            if v != 0.0:
                q = min(q, _lowest_bit_exponent(v))
        if not finite:
            continue
        if q == 100000:  # all zeros
            out[k] = True
            continue
        step = math.ldexp(1.0, -q)
        total = 0.0
        absolute = 0.0
        for i in range(n):
            v = rows[k, i] * step  # an integer, exact in float64
            total += v
            absolute += abs(v)
            if absolute > limit:
                break
        if absolute > limit:
            continue
        # the mean T q / n is exact where n / gcd(T, n) is a power of two 2^k: the deviations
        # are then integers on the lattice q / 2^k, e_i = k_i 2^k - T / g
        g = _gcd(abs(np.int64(total)), np.int64(n))
        r = np.int64(n) // g
        centre = total / g  # the mean on that lattice
        if r & (r - 1) or abs(centre) > limit:
            continue
        squares = 0.0
        for i in range(n):
            d = rows[k, i] * step * r - centre
            squares += d * d
            if squares > limit:
                break
        out[k] = squares <= limit
    return out
