"""The compiled test of :mod:`dmlconform.tolerance.exact` (large inputs; imported on demand, so a
small run does not load numba), and the same decision from a slice's sums.

:func:`exact_rows` walks each slice three times (its values' lowest bit, the sum on that lattice,
the squared deviations): the numpy model's test. The compiled judge reads each slice for its
statistics already, so that pass also adds up |x|, x and x^2 in float64
(:mod:`dmlconform.tolerance.judge_compiled`); :func:`sums_on_lattice` refuses from these alone
nearly every slice that is not exact, and only the others are read once more, for their lowest
set bit (:func:`low_bit_exponent`), before :func:`exact_from_sums` decides as :func:`exact_rows`.

Why that is the same test. Let 2^q be the lowest set bit over the slice and L = 2^24 2^q (the
precision's exact integers on that lattice); every value is a multiple of 2^q.

- sum |x| <= L: every partial sum of |x|, x or x^2 is an integer multiple of 2^q (of 4^q)
  within 2^24 (2^48) steps, which float64 holds exactly whatever the order: the three sums are
  exact. Otherwise some sum of two terms first leaves [0, L]; both terms were exact and within
  L, so that sum (at most 2L) is exact and above L, and a rounded sum of non-negative terms is
  never below its larger term: the total stays above L, in any order.
- So on an exact slice, with Q the least power of two >= sum |x| / 2^24 (Q <= 2^q), sum x is a
  multiple of Q and sum x^2 of Q^2: a slice whose sums are not is not exact
  (:func:`sums_on_lattice`; the sums of data drawn at random are almost never such multiples).
- With T = sum x / 2^q and S = sum x^2 / 4^q exact integers, g = gcd(|T|, n), r = n / g and the
  centre c = T / g, the squared deviations on the lattice 2^q / r add up to
  sum (r x_i / 2^q - c)^2 = r^2 S - n c^2 = r (r S - T c). r S is exact (r a power of two), T c
  too (both within 2^24), so r S - T c is exact while r S <= 2^53 and above 2^52 otherwise;
  either way its comparison with 2^24 / r is the exact one.
"""

from __future__ import annotations

import math

import numpy as np

from dmlconform.native import njit
from dmlconform.reference.compiled import LANES, _lane_total

NO_LOW = 1 << 20
""":func:`low_bit_exponent` of a zero: above every finite value's (at most 104 for float32)."""


@njit(cache=True, nogil=True)
def _lowest_bit_exponent(v: float) -> int:
    """e such that 2^e is the lowest set bit of |v| (v finite, non-zero)."""
    m, e = math.frexp(abs(v))  # |v| = m 2^e, 0.5 <= m < 1: m 2^53 is an integer
    mant = np.int64(m * 9007199254740992.0)
    low = mant & -mant
    return e - 53 + math.frexp(float(low))[1] - 1


@njit(cache=True, nogil=True)
def _gcd(a: np.int64, b: np.int64) -> np.int64:
    while b:
        a, b = b, a % b
    return a


@njit(cache=True, nogil=True)
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


@njit(cache=True, inline="always")
def low_bit_exponent(bits):  # type: ignore[no-untyped-def]
    """e such that 2^e is the lowest set bit of the float32 whose bits (int32) are ``bits``;
    :data:`NO_LOW` for +-0 (meaningless for inf and NaN, which the sums refuse first). As
    selects, so that the loop holding it vectorizes: the significand's lowest set bit by the
    exponent of its conversion to float32 (a power of two up to 2^23, exact)."""
    mag = np.int64(bits) & 0x7FFFFFFF
    e = mag >> 23
    m = (mag & 0x7FFFFF) | (np.int64(e != 0) << 23)
    low = m & -m
    log2_low = (np.int64(np.float32(low).view(np.int32)) >> 23) - 127
    return max(e, 1) - 150 + log2_low if mag != 0 else NO_LOW


@njit(cache=True)
def lowest_bit(row_bits, low):  # type: ignore[no-untyped-def]
    """The least of ``low`` and the :func:`low_bit_exponent` of a row's values (their bits)."""
    for j in range(row_bits.size):
        low = min(low, low_bit_exponent(row_bits[j]))
    return low


@njit(cache=True)
def sums_on_lattice(abs_sum, total, squares, limit):  # type: ignore[no-untyped-def]
    """False where a slice with these float64 sums of |x|, x and x^2 (any order) cannot be exact:
    a value not finite, or ``total`` not a multiple of Q, the least power of two at or above
    ``abs_sum`` / ``limit``, or ``squares`` not one of Q^2 (the module docstring). True does not
    make it exact: :func:`exact_from_sums` decides."""
    if not abs_sum < math.inf:
        return False
    if abs_sum == 0.0:
        return True
    m, e = math.frexp(abs_sum / limit)  # an exact scaling: m 2^e, 0.5 <= m < 1
    q = math.ldexp(1.0, e - 1 if m == 0.5 else e)
    t = total / q
    s = squares / q / q
    return t == math.floor(t) and s == math.floor(s)


@njit(cache=True, nogil=True)
def exact_from_sums(low, abs_sum, total, squares, n, limit):  # type: ignore[no-untyped-def]
    """:func:`exact_rows`' verdict for one slice of ``n`` values from its least
    :func:`low_bit_exponent` and its float64 sums of |x|, x and x^2 in any order (the module
    docstring says why these suffice)."""
    if not abs_sum < math.inf:  # a value not finite
        return False
    if low == NO_LOW:  # all zeros
        return True
    step = math.ldexp(1.0, -low)
    if not abs_sum * step <= limit:
        return False
    t = total * step  # an integer, exact
    g = _gcd(abs(np.int64(t)), np.int64(n))
    r = np.int64(n) // g
    centre = t / g
    if r & (r - 1) or abs(centre) > limit:
        return False
    rs = float(r) * (squares * step * step)
    return float(r) * (rs - t * centre) <= limit


@njit(cache=True)
def exact_slice(x_bits, k, x_sk, x_sm, m_len, l_len, sums, limit):  # type: ignore[no-untyped-def]
    """Whether slice ``k`` of (K, M, L) rows (element (m, j) at ``k x_sk + m x_sm + j``; its
    values' bits ``x_bits``) is summed exactly, from its sums of |x|, x and x^2 in the lanes of
    ``sums`` (3 LANES, destroyed: :func:`dmlconform.tolerance.judge_compiled.spread_row`)
    and, where these allow it, its values' lowest set bit (a second read)."""
    abs_sum = _lane_total(sums[:LANES])
    total = _lane_total(sums[LANES : 2 * LANES])
    squares = _lane_total(sums[2 * LANES :])
    if not sums_on_lattice(abs_sum, total, squares, limit):
        return False
    low = np.int64(NO_LOW)
    for m in range(m_len):
        start = k * x_sk + m * x_sm
        low = lowest_bit(x_bits[start : start + l_len], low)
    return exact_from_sums(low, abs_sum, total, squares, m_len * l_len, limit)
