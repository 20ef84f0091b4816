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
and the regime cannot claim exactness its data does not have. The compiled judge decides the
same from the sums its statistics pass takes (:mod:`dmlconform.tolerance.exact_compiled`).
"""

from __future__ import annotations

import numpy as np

#: below this many elements the test runs in numpy: a small run does not load numba for it
COMPILED_FROM = 1 << 16


def _lowest_bit_exponents(v: np.ndarray) -> np.ndarray:
    """Per element of finite, non-zero ``v`` (float64): e such that 2^e is its lowest set bit."""
    m, e = np.frexp(np.abs(v))
    mant = (m * 9007199254740992.0).astype(np.int64)
    # int64: frexp's exponents are int32, and a zero's stand-in (int64's largest) must not wrap
    return e.astype(np.int64) - 53 + np.frexp((mant & -mant).astype(np.float64))[1] - 1


def _exact_rows_numpy(rows: np.ndarray, limit: float) -> np.ndarray:
    """``exact_compiled.exact_rows`` in numpy, vectorized over rows (small inputs)."""
    n = rows.shape[1]
    finite = np.isfinite(rows).all(axis=1)
    clean = np.where(np.isfinite(rows), rows, 0.0)
    nonzero = clean != 0
    low = np.where(nonzero, _lowest_bit_exponents(np.where(nonzero, clean, 1.0)), np.iinfo(np.int64).max)
    q = low.min(axis=1)
    empty = ~nonzero.any(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        ints = clean * np.ldexp(1.0, np.where(empty, 0, -q).astype(np.int64))[:, None]
        total = ints.sum(axis=1)
        within = np.abs(ints).sum(axis=1) <= limit
        g = np.gcd(np.where(within, np.abs(total), 0).astype(np.int64), n)
        r = n // np.maximum(g, 1)
        centre = np.where(within, total / np.maximum(g, 1), 0.0)
        squares = ((ints * r[:, None] - centre[:, None]) ** 2).sum(axis=1)
    power = (r & (r - 1)) == 0
    exact = within & power & (np.abs(centre) <= limit) & (squares <= limit)
    return finite & (empty | exact)


def summed_exactly(rows: np.ndarray, u: float) -> np.ndarray:
    """Per row of ``rows`` (K, n): True where every partial sum of every subset of its values is
    exact in a working precision of unit roundoff ``u``: all finite, integer multiples of one
    power of two q, and sum |x| / q at most 1 / u. A sum of such values is exact in any order
    (the Lp norms' and the mean square's summands on exact-statistics data), however often its
    values repeat. Float32 rows of 2^16 elements or more take the compiled test."""
    if rows.size >= COMPILED_FROM and np.asarray(rows).dtype == np.float32:
        from dmlconform.tolerance.summed_compiled import summed_exactly as compiled

        return compiled(rows, u)
    rows = np.asarray(rows, dtype=np.float64)
    finite = np.isfinite(rows).all(axis=1)
    clean = np.where(np.isfinite(rows), rows, 0.0)
    nonzero = clean != 0
    # int64 bits, not a Python int: numpy would cast that to the exponents' int32 (-1)
    none = np.int64(np.iinfo(np.int64).max)
    low = np.where(nonzero, _lowest_bit_exponents(np.where(nonzero, clean, 1.0)).astype(np.int64), none)
    q = low.min(axis=1)
    empty = ~nonzero.any(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        steps = np.abs(clean).sum(axis=1) * np.ldexp(1.0, np.where(empty, 0, -q).astype(np.int64))
    return finite & (empty | (steps <= 1.0 / u))


def exact_slices(rows: np.ndarray, u: float) -> np.ndarray:
    """Per row of ``rows`` (K, n): True where its sums in a working precision of unit roundoff
    ``u`` (exact integers up to 1 / u) are exact in any order (the module docstring)."""
    rows = np.ascontiguousarray(rows, dtype=np.float64)
    if rows.size < COMPILED_FROM:
        return _exact_rows_numpy(rows, 1.0 / u)
    from dmlconform.tolerance.exact_compiled import exact_rows

    return exact_rows(rows, 1.0 / u)
