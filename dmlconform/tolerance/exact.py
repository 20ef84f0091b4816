"""Which slices a float32 implementation must sum exactly, in whatever order it adds them.

A slice whose values are all integer multiples of one power of two q, with sum |x| / q at most
the working precision's exact integers (2^24 for float32), has every partial sum of every subset
on that lattice and within that range: representable, so exact in any order. If its mean is
exact too (n over gcd(sum / q, n) a power of two), the deviations x - mean are integers on a
lattice q / 2^k and exact, and if their squares add up within the same range, so is the sum of
squares. Such a slice's statistics are then exact up to the division by
n (or a multiplication by its rounded reciprocal), whatever the kernel's threads, chains, trees
or passes: the budget keeps only the elementwise steps (``exact_statistics`` regime; the numpy
model's :func:`~dmlconform.tolerance.normalization.statistics_errors`).

Decided from the data itself, so any case whose data happens to be exact is judged as sharply,
and the regime cannot claim exactness its data does not have.
"""

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


def exact_slices(rows: np.ndarray, u: float) -> np.ndarray:
    """:func:`exact_rows` for working unit roundoff ``u`` (its exact integers reach 1 / u)."""
    return exact_rows(np.ascontiguousarray(rows, dtype=np.float64), 1.0 / u)
