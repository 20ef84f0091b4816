"""The spread and the distinct count of a long slice, on every thread.

Why: :func:`dmlconform.tolerance.judge_compiled.slice_statistics` computes a slice on one thread,
which is right when a case has many slices (the pool runs slices side by side) and leaves the
other threads idle when it has few long ones: MVN1 over 2^22 elements spent 7 ms on one thread
in these statistics against the element pass's 15 ms on two, and 26 ms on data whose 2^22 values
are nearly all distinct (the bucketed count: 20 ms of it).

Here a long slice is cut into parts of :data:`PART` elements (slice order), and each step runs
over the parts or the buckets on the thread pool:

1. per part: the lane sums of the squared deviations' spread, the range and non-finite count of
   the part's ordinal keys (the same key as the one-thread kernel:
   :func:`float_bits.ordinal32`/``ordinal16``), and the sums of |x|, x and x^2 of the
   exactness test (:mod:`dmlconform.tolerance.exact_compiled`: the parts' sums added decide
   as the whole slice's; where they allow exactness, the parts' lowest set bits are read next);
   and each key within 2^:data:`WINDOW_BITS` values around the mean's marks a bitmap, one per
   thread (a run of parts on one bitmap), the keys outside that window counted; once a chunk of
   CHUNK values holds a key outside it, the thread writes the keys of the rest of its run out
   instead (data spanning a wide range: marking would cost a pass for nothing);
2. the distinct count of the finite keys, where one is asked for: when no finite key fell
   outside the window (the common case: data whose values span a narrow range), the bitmaps
   merged by OR and counted; otherwise the values marked write their keys out (non-finite
   keys lie outside the finite keys' range, so a range test leaves them out without a
   compaction) and keys spanning at most 2^DIRECT_BITS values mark one bitmap per thread, a
   few values are checked against themselves, and wider ones are partitioned by their high bits
   (a histogram per part, offsets per bucket and part, a scatter per part), each thread
   counting a run of buckets with a bitmap of its own.

Marking in the first pass spares narrow data the key array (4 bytes an element) and a pass
over it: MVN1 over one slice of 2^22 large-offset values, the statistics 14.2 -> 10.1 ms of
CPU; wide data as before (36.1 -> 35.2 ms, standard normal).

What stays exact and reproducible: the count is an integer, the same however the work is
split, and so is the exactness verdict (its sums are exact in any order where it says yes);
the spread's sum is a sum of per-part sums in part order, and the parts depend on the
slice's length only, never on the thread count. The one-thread kernel's ``(K, M, L)``
addressing of the input is kept: element ``p`` of slice ``k`` is ``x[k sk + (p // L) sm + p % L]``.
"""

from __future__ import annotations

import math

import numpy as np

from dmlconform.native import njit, types
from dmlconform.reference import compiled as rk
from dmlconform.reference.compiled import LANES, _lane_total, run_chunks
from dmlconform.tolerance.distinct_compiled import (
    BUCKET_BITS,
    DIRECT_BITS,
    bucket_distinct,
    few_values,
    keys_outside,
)
from dmlconform.tolerance.exact_compiled import NO_LOW, exact_from_sums, lowest_bit, sums_on_lattice
from dmlconform.tolerance.float_bits import ordinal16, ordinal32
from dmlconform.tolerance.judge_compiled import _spread_and_keys, keys_and_range, spread_row

PART = 1 << 18
"""Elements of a slice per part: the unit of parallel work and of the spread's partial sums."""

LONG_SLICE = 2 * PART
"""Slices of at least this many elements are computed here, part by part ..."""

MAX_SLICES = 3
"""... in a case of at most this many slices. With more, the one-thread kernel computing slices
side by side keeps two threads as busy without the parts' steps (BNT's 4 slices of 2^20: 4.7-5.3
ms that way, 7.7 ms part by part). A fixed number, not the thread count: which path computes a
slice decides the last bits of its spread, and those must not depend on the machine."""

_ro_f4 = types.Array(types.float32, 1, "C", readonly=True)
_ro_i4 = types.Array(types.int32, 1, "C", readonly=True)
_u4 = types.Array(types.uint32, 1, "C")
_ro_u4 = types.Array(types.uint32, 1, "C", readonly=True)
_i8 = types.Array(types.int64, 1, "C")
_ro_i8 = types.Array(types.int64, 1, "C", readonly=True)
_f8 = types.Array(types.float64, 1, "C")
_f8_2d = types.Array(types.float64, 2, "C")
_u8 = types.Array(types.uint64, 1, "C")
_i8_2d = types.Array(types.int64, 2, "C")
_u8_2d = types.Array(types.uint64, 2, "C")


WINDOW_BITS = DIRECT_BITS
"""The first pass marks keys within 2^WINDOW_BITS values around the mean's (a 512 KiB bitmap)."""


CHUNK = 1024
"""Keys per step of the first pass's marking: written to a buffer that stays in L1 by a loop
that vectorizes, then marked by a scalar one (one loop doing both ran at a third of the speed)."""


@njit(cache=True)
def _spread_and_marks(row, row_bits, mean, var, half, acc, sums, base, bitmap, buf, keys, pos, counts):  # type: ignore[no-untyped-def]  # noqa: E501
    """:func:`judge_compiled.spread_row`, then each finite value's key marked in ``bitmap`` (bit
    key - base) where it lies in the window [base, base + 2^WINDOW_BITS), chunk by chunk until
    a chunk has a key outside it: from the next chunk on, the keys are written to
    ``keys[pos + j]`` instead. ``counts``: the running smallest and largest finite key,
    non-finite count and count of finite keys outside the window. Returns those and how many
    values from the row's start were marked (their keys not written). ``buf``: CHUNK int64 of
    scratch."""
    spread_row(row, mean, var, acc, sums)
    lo, hi, nonfinite, outside = counts
    window = np.int64(1) << WINDOW_BITS
    for c0 in range(0, row.size, CHUNK):
        cnt = min(CHUNK, row.size - c0)
        for j in range(cnt):  # vectorized: each key's place in the window, -1 outside it
            key = (ordinal16(row_bits[c0 + j]) if half else ordinal32(row_bits[c0 + j])) + 2147483648
            finite = abs(row[c0 + j]) < np.float32(math.inf)
            nonfinite += np.int64(not finite)
            lo = min(lo, key) if finite else lo
            hi = max(hi, key) if finite else hi
            off = key - base
            inside = finite & (off >= 0) & (off < window)
            outside += np.int64(finite & (not inside))
            buf[j] = off if inside else np.int64(-1)
        for j in range(cnt):  # the marks (a counter here, updated outside the window, cost 5x)
            off = buf[j]
            if off >= 0:
                bitmap[np.uint64(off >> 6)] |= np.uint64(1) << np.uint64(off & 63)
        if outside > 0:  # the data span a wide range: the keys of the rest are written
            end = c0 + cnt
            lo, hi, nonfinite = keys_and_range(
                row[end:], row_bits[end:], half, keys, pos + end, lo, hi, nonfinite
            )
            return (lo, hi, nonfinite, outside), end
    return (lo, hi, nonfinite, outside), row.size


@njit(
    types.void(
        _ro_f4, _ro_i4, types.int64, types.int64, types.int64, types.int64, types.int64, types.float64,
        types.float64, types.boolean, types.int64, types.int64, types.int64, _u8, _u4, _f8, _i8_2d, _f8_2d,
    ),
    cache=True,
    nogil=True,
    error_model="numpy",
)  # fmt: skip
def part_statistics(
    x, x_bits, x_sk, x_sm, k, n, l_len, mean, var, half, p0, p1, base, bitmap, keys, spread_o, counts_o, sums_o,
):  # type: ignore[no-untyped-def]  # fmt: skip
    """Parts [p0, p1) of slice ``k`` (``n`` elements, rows of ``l_len``): the sum of
    ((x - mean)^2 - var)^2 (lane sums, combined by the reference's pairwise tree), the sums of
    |x|, x and x^2 (a row of ``sums_o``) and, in a row of ``counts_o``, the smallest and largest
    finite key, the number of non-finite values, of finite keys outside the window from ``base``
    and the slice position up to which the part's values were marked (their keys not written),
    per part. The keys inside the window are marked in ``bitmap`` until a chunk has one outside
    it; from then on each key is written to ``keys`` at its slice position instead (data
    spanning a wide range, which the counting sort then reads: marking there would cost a pass
    for nothing)."""
    acc = np.zeros(LANES)
    sums = np.zeros(3 * LANES)
    buf = np.empty(CHUNK, np.int64)
    marking = True
    for p in range(p0, p1):
        acc[:] = 0.0
        sums[:] = 0.0
        counts = (np.int64(0xFFFFFFFF), np.int64(0), np.int64(0), np.int64(0))
        e0 = p * PART
        e1 = min(e0 + PART, n)
        marked_end = e0
        for m in range(e0 // l_len, (e1 - 1) // l_len + 1):
            j0 = max(e0 - m * l_len, 0)
            j1 = min(e1 - m * l_len, l_len)
            start = k * x_sk + m * x_sm + j0
            row, row_bits = x[start : start + j1 - j0], x_bits[start : start + j1 - j0]
            pos = m * l_len + j0
            if marking:
                counts, marked = _spread_and_marks(
                    row, row_bits, mean, var, half, acc, sums, base, bitmap, buf, keys, pos, counts
                )
                marked_end = pos + marked
                marking = marked == row.size
            else:
                lo, hi, nonfinite = _spread_and_keys(
                    row, row_bits, mean, var, half, acc, sums, keys, pos, counts[0], counts[1], counts[2]
                )
                counts = (lo, hi, nonfinite, counts[3])
        spread_o[p - p0] = _lane_total(acc)
        for c in range(3):
            sums_o[p - p0, c] = _lane_total(sums[c * LANES : (c + 1) * LANES])
        for c in range(4):
            counts_o[p - p0, c] = counts[c]
        counts_o[p - p0, 4] = marked_end


@njit(
    types.void(_ro_f4, _ro_i4, types.int64, types.int64, types.int64, types.int64, types.boolean, types.int64,
               types.int64, _u4),
    cache=True,
    nogil=True,
)  # fmt: skip
def range_keys(x, x_bits, x_sk, x_sm, k, l_len, half, e0, e1, keys):  # type: ignore[no-untyped-def]
    """The ordinal keys of elements [e0, e1) of slice ``k`` into ``keys`` at their slice
    positions."""
    for m in range(e0 // l_len, (e1 - 1) // l_len + 1):
        j0 = max(e0 - m * l_len, 0)
        j1 = min(e1 - m * l_len, l_len)
        start = k * x_sk + m * x_sm
        keys_and_range(
            x[start + j0 : start + j1], x_bits[start + j0 : start + j1], half, keys, m * l_len + j0, 0, 0, 0
        )


@njit(types.void(_ro_i4, *(types.int64,) * 7, _i8), cache=True, nogil=True)
def part_lowest_bits(x_bits, x_sk, x_sm, k, n, l_len, p0, p1, low_o):  # type: ignore[no-untyped-def]
    """Parts [p0, p1) of slice ``k``: the least lowest set bit of each part's values
    (:func:`exact_compiled.low_bit_exponent`)."""
    for p in range(p0, p1):
        low = np.int64(NO_LOW)
        e0 = p * PART
        e1 = min(e0 + PART, n)
        for m in range(e0 // l_len, (e1 - 1) // l_len + 1):
            j0 = max(e0 - m * l_len, 0)
            j1 = min(e1 - m * l_len, l_len)
            start = k * x_sk + m * x_sm + j0
            low = lowest_bit(x_bits[start : start + j1 - j0], low)
        low_o[p - p0] = low


@njit(types.void(_ro_u4, types.int64, types.int64, types.int64, types.int64, _u8), cache=True, nogil=True)
def mark_keys(keys, i0, i1, lo, span, bitmap):  # type: ignore[no-untyped-def]
    """Set the bit of each key of ``keys[i0:i1]`` in [lo, lo + span) (the others are the
    non-finite values')."""
    for i in range(i0, i1):
        off = np.int64(keys[i]) - lo
        if np.uint64(off) < np.uint64(span):
            bitmap[np.uint64(off >> 6)] |= np.uint64(1) << np.uint64(off & 63)


@njit(cache=True, inline="always")
def _popcount(v):  # type: ignore[no-untyped-def]
    v = v - ((v >> np.uint64(1)) & np.uint64(0x5555555555555555))
    v = (v & np.uint64(0x3333333333333333)) + ((v >> np.uint64(2)) & np.uint64(0x3333333333333333))
    v = (v + (v >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((v * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(types.int64(_u8_2d, types.int64), cache=True, nogil=True)
def count_marked(bitmaps, words):  # type: ignore[no-untyped-def]
    """The bits set in any row of ``bitmaps[:, :words]``."""
    count = np.int64(0)
    for w in range(words):
        v = np.uint64(0)
        for r in range(bitmaps.shape[0]):
            v |= bitmaps[r, w]
        count += _popcount(v)
    return count


@njit(
    types.void(_ro_u4, types.int64, types.int64, types.int64, types.int64, types.int64, types.int64, _i8_2d),
    cache=True,
    nogil=True,
)
def bucket_histogram(keys, n, p0, p1, lo, span, shift, hist):  # type: ignore[no-untyped-def]
    """Row ``p - p0`` of ``hist``: how many finite keys of part p fall in each bucket ((key - lo)
    >> shift)."""
    for p in range(p0, p1):
        row = hist[p - p0]
        for i in range(p * PART, min((p + 1) * PART, n)):
            off = np.int64(keys[i]) - lo
            if np.uint64(off) < np.uint64(span):
                row[np.uint64(off >> shift)] += 1


@njit(
    types.void(
        _ro_u4, types.int64, types.int64, types.int64, types.int64, types.int64, types.int64, _i8_2d, _u4
    ),
    cache=True,
    nogil=True,
)
def bucket_scatter(keys, n, p0, p1, lo, span, shift, fill, out):  # type: ignore[no-untyped-def]
    """Each finite key of parts [p0, p1) to ``out`` at its bucket's next slot for its part
    (``fill[p - p0]``: where the part's keys of each bucket start; advanced as they are
    written)."""
    for p in range(p0, p1):
        row = fill[p - p0]
        for i in range(p * PART, min((p + 1) * PART, n)):
            off = np.int64(keys[i]) - lo
            if np.uint64(off) < np.uint64(span):
                b = np.uint64(off >> shift)
                out[row[b]] = keys[i]
                row[b] += 1


@njit(
    types.void(_ro_u4, _ro_i8, types.int64, types.int64, types.int64, types.int64, _u8, _i8, types.int64),
    cache=True,
    nogil=True,
)
def count_buckets(keys, starts, b0, b1, lo, bits, bitmap, count_o, at):  # type: ignore[no-untyped-def]
    """``count_o[at]``: the distinct keys of buckets [b0, b1) (bucket b: ``keys[starts[b]:
    starts[b + 1]]``, keys within 2^``bits`` values), counted on ``bitmap`` (2^``bits`` bits,
    clear; left clear)."""
    count_o[at] = bucket_distinct(keys, starts, b0, b1, lo, bits, bitmap)


def _parts(n: int) -> int:
    return -(-n // PART)


def _distinct_direct(keys: np.ndarray, lo: int, span: int) -> int:
    """The distinct count of keys in [lo, lo + span) with one bitmap per thread."""
    words = (span >> 6) + 1
    bitmaps = np.zeros((max(rk.THREADS, 1), words), np.uint64)
    bounds = np.linspace(0, keys.size, bitmaps.shape[0] + 1).astype(np.int64)

    def call(r0: int, r1: int) -> None:
        for r in range(r0, r1):
            mark_keys(keys, int(bounds[r]), int(bounds[r + 1]), lo, span, bitmaps[r])

    run_chunks(bitmaps.shape[0], keys.size, call)
    return int(count_marked(bitmaps, words))


def _distinct_bucketed(keys: np.ndarray, n: int, lo: int, span: int) -> int:
    """The distinct count of keys in [lo, lo + span), partitioned into buckets of 2^BUCKET_BITS
    values by a parallel counting sort, the buckets counted on every thread."""
    parts = _parts(n)
    n_buckets = ((span - 1) >> BUCKET_BITS) + 1
    hist = np.zeros((parts, n_buckets), np.int64)
    run_chunks(parts, n, lambda p0, p1: bucket_histogram(keys, n, p0, p1, lo, span, BUCKET_BITS, hist[p0:p1]))
    starts = np.zeros(n_buckets + 1, np.int64)
    np.cumsum(hist.sum(axis=0), out=starts[1:])
    # bucket by bucket, the keys of part p after those of the parts before it
    fill = starts[:-1] + np.cumsum(hist, axis=0) - hist
    sorted_keys = np.empty(int(starts[-1]), np.uint32)
    run_chunks(
        parts,
        n,
        lambda p0, p1: bucket_scatter(keys, n, p0, p1, lo, span, BUCKET_BITS, fill[p0:p1], sorted_keys),
    )
    # runs of buckets holding about equal numbers of keys, one per thread
    runs = max(rk.THREADS, 1)
    cuts = np.searchsorted(starts, np.linspace(0, starts[-1], runs + 1), side="left")
    cuts[0], cuts[-1] = 0, n_buckets
    counts = np.zeros(runs, np.int64)

    def call(r0: int, r1: int) -> None:
        bitmap = np.zeros(1 << (BUCKET_BITS - 6), np.uint64)
        for r in range(r0, r1):
            count_buckets(
                sorted_keys, starts, int(cuts[r]), int(cuts[r + 1]), lo, BUCKET_BITS, bitmap, counts, r
            )

    run_chunks(runs, n, call)
    return int(counts.sum())


def _exact(
    rows: tuple[np.ndarray, int, int, tuple[int, int, int]], k: int, sums: np.ndarray, limit: float
) -> bool:
    """Whether slice ``k``'s sums are exact, from its parts' sums of |x|, x and x^2 (rows of
    ``sums``) and, where these allow it, its parts' lowest set bits."""
    flat, sk, sm, (_, m_len, l_len) = rows
    n = m_len * l_len
    with np.errstate(invalid="ignore", over="ignore"):
        abs_sum, total, squares = (float(v) for v in sums.sum(axis=0))
    if not sums_on_lattice(abs_sum, total, squares, limit):
        return False
    low = np.empty(_parts(n), np.int64)
    bits = flat.view(np.int32)
    run_chunks(low.size, n, lambda p0, p1: part_lowest_bits(bits, sk, sm, k, n, l_len, p0, p1, low[p0:p1]))
    return bool(exact_from_sums(int(low.min()), abs_sum, total, squares, n, limit))


def _few_distinct(keys: np.ndarray, lo: int, hi: int) -> int:
    """:func:`judge_compiled.few_distinct` of the keys in [lo, hi], its check on every thread."""
    count, values = few_values(keys, 0, keys.size, lo, hi)
    if count < 0:
        return -1
    bounds = np.linspace(0, keys.size, max(rk.THREADS, 1) + 1).astype(np.int64)
    misses = np.zeros(bounds.size - 1, np.int64)

    def call(r0: int, r1: int) -> None:
        for r in range(r0, r1):
            misses[r] = keys_outside(keys, int(bounds[r]), int(bounds[r + 1]), lo, hi, values)

    run_chunks(misses.size, keys.size, call)
    return -1 if misses.any() else int(count)


def long_slice_statistics(
    rows: tuple[np.ndarray, int, int, tuple[int, int, int]], half: bool, k: int, mean: float, var: float,
    limit: float, count_exact: bool = True,
) -> tuple[float, float, bool]:  # fmt: skip
    """Slice ``k``'s spread of the squared deviations, its number of distinct values (NaN
    and inf each count as distinct, -0 == +0) and whether its sums in a precision whose exact
    integers reach ``limit`` are exact in any order, given its mean and variance: the same
    figures as the one-thread kernel (:func:`dmlconform.tolerance.judge_compiled.slice_statistics`),
    the count NaN where the slice is exact and not ``count_exact``."""
    flat, sk, sm, (_, m_len, l_len) = rows
    n = m_len * l_len
    parts = _parts(n)
    spread = np.empty(parts)
    # smallest and largest finite key, non-finite, outside the window, marked up to
    counts = np.empty((parts, 5), np.int64)
    sums = np.empty((parts, 3))
    bits = flat.view(np.int32)
    runs = np.linspace(0, parts, min(max(rk.THREADS, 1), parts) + 1).astype(np.int64)
    bitmaps = np.zeros((runs.size - 1, 1 << (WINDOW_BITS - 6)), np.uint64)
    keys = np.empty(n, np.uint32)  # pages written only where the window misses keys
    base = _window_base(mean, half)

    def call(r0: int, r1: int) -> None:
        for r in range(r0, r1):
            p0, p1 = int(runs[r]), int(runs[r + 1])
            part_statistics(
                flat, bits, sk, sm, k, n, l_len, mean, var, half, p0, p1, base, bitmaps[r], keys,
                spread[p0:p1], counts[p0:p1], sums[p0:p1],
            )  # fmt: skip

    run_chunks(runs.size - 1, n, call)
    sqstd = math.sqrt(float(np.sum(spread)) / n)
    finite_lo, finite_hi, n_nonfinite = (
        int(counts[:, 0].min()),
        int(counts[:, 1].max()),
        int(counts[:, 2].sum()),
    )
    exact = _exact(rows, k, sums, limit)
    if exact and not count_exact:
        return sqstd, math.nan, exact
    if n_nonfinite == n:
        return sqstd, float(n_nonfinite), exact
    if not counts[:, 3].any():  # every finite key marked
        return sqstd, float(count_marked(bitmaps, bitmaps.shape[1]) + n_nonfinite), exact
    starts = np.arange(parts, dtype=np.int64) * PART
    marked = np.flatnonzero(counts[:, 4] > starts)  # parts whose first values' keys are still to write

    def write(i0: int, i1: int) -> None:
        for p in marked[i0:i1]:
            range_keys(flat, bits, sk, sm, k, l_len, half, int(starts[p]), int(counts[p, 4]), keys)

    run_chunks(marked.size, int((counts[marked, 4] - starts[marked]).sum()), write)
    span = finite_hi - finite_lo + 1
    if span <= (1 << DIRECT_BITS):
        distinct = _distinct_direct(keys, finite_lo, span)
    else:
        distinct = _few_distinct(keys, finite_lo, finite_hi)
        if distinct < 0:
            distinct = _distinct_bucketed(keys, n, finite_lo, span)
    return sqstd, float(distinct + n_nonfinite), exact


def _window_base(mean: float, half: bool) -> int:
    """The first key of the first pass's window: half of it below the key of the mean (as the
    input's type; any value gives the same count, a central one fits the most data)."""
    with np.errstate(invalid="ignore", over="ignore"):
        bits = np.float32(mean).view(np.int32)
    key = int(ordinal16(bits) if half else ordinal32(bits)) + 2147483648
    return key - (1 << (WINDOW_BITS - 1))


def is_long(shape: tuple[int, int, int]) -> bool:
    """Whether the slices of a (K, M, L) case are computed part by part."""
    return shape[0] <= MAX_SLICES and shape[1] * shape[2] >= LONG_SLICE


def fill_long_slices(
    rows: tuple[np.ndarray, int, int, tuple[int, int, int]], half: bool, limit: float, mean: np.ndarray,
    var: np.ndarray, sqstd: np.ndarray, distinct: np.ndarray, exact: np.ndarray, count_exact: bool = True,
) -> None:  # fmt: skip
    """Every slice's spread, distinct count and exactness into ``sqstd``, ``distinct`` and
    ``exact`` (1 or 0), from their means and variances (:func:`long_slice_statistics`)."""
    for k in range(rows[3][0]):
        sqstd[k], distinct[k], exact[k] = long_slice_statistics(
            rows, half, k, float(mean[k]), float(var[k]), limit, count_exact
        )
