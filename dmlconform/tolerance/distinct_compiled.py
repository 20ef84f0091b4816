"""The distinct count behind a slice's repetition r (:func:`dmlconform.tolerance.terms.repetition`),
compiled: how many distinct values a slice's ordinal keys hold, without a sort of the slice.

Why not a sort: the judge counts every slice it reads for its statistics (2^22 keys at the stress
tier's lengths), and a sort costs several times the statistics pass. Instead:

- short slices (at most :data:`SMALL_SORT` keys) are sorted, which is cheapest there;
- keys spanning at most 2^:data:`DIRECT_BITS` values mark one bitmap directly (a branch-free
  mark that says whether the bit was new: which keys are new is data, random for most data, and a
  mispredicted branch per key cost most of the count);
- wider keys holding at most :data:`FEW` values (two-valued data far apart) are checked against
  those values in one branch-free pass (:func:`few_distinct`);
- any other are partitioned by their high bits (a counting sort into buckets of
  2^:data:`BUCKET_BITS` values) and each bucket marks a bitmap that stays in cache.

The count is an integer: the same whichever path computes it. :mod:`dmlconform.tolerance.long_slices`
runs the same steps on every thread for a long slice.
"""

from __future__ import annotations

import numpy as np

from dmlconform.native import njit

SMALL_SORT = 1024  # slices with at most this many finite keys are sorted, not bucketed
BUCKET_BITS = 21  # one bucket's keys span 2^21 values: a 256 KiB bitmap, in cache
DIRECT_BITS = 22  # a slice whose keys span at most 2^22 values uses one bitmap directly
FEW = 8  # keys spanning more take the counting sort, unless they hold at most FEW values ...
FEW_SAMPLE = 4096  # ... all among their first FEW_SAMPLE (few_distinct)


@njit(cache=True)
def mark(bitmap, w, bit):  # type: ignore[no-untyped-def]
    """Set ``bit`` of word ``w``; 1 if it was clear. No branch: which keys are new is data
    (random for most data), and a mispredicted branch per key cost most of the count."""
    old = bitmap[np.uint64(w)]
    bitmap[np.uint64(w)] = old | bit
    return np.int64((old & bit) == 0)


@njit(cache=True)
def _few_values(keys, i0, i1, lo, hi, values):  # type: ignore[no-untyped-def]
    """The distinct keys in [lo, hi] among the first FEW_SAMPLE of ``keys[i0:i1]`` into
    ``values`` (FEW of them at most), and how many; FEW + 1 when there are more."""
    count = 0
    for i in range(i0, min(i1, i0 + FEW_SAMPLE)):
        key = np.int64(keys[i])
        if key < lo or key > hi:
            continue
        seen = False
        for j in range(count):
            seen |= values[j] == key
        if not seen:
            if count == FEW:
                return FEW + 1
            values[count] = key
            count += 1
    return count


@njit(cache=True, nogil=True)
def keys_outside(keys, i0, i1, lo, hi, values):  # type: ignore[no-untyped-def]
    """How many keys of ``keys[i0:i1]`` in [lo, hi] are none of ``values`` (FEW, repeated to
    fill): branch-free, so that the loop vectorizes."""
    v0, v1, v2, v3 = values[0], values[1], values[2], values[3]
    v4, v5, v6, v7 = values[4], values[5], values[6], values[7]
    miss = np.int64(0)
    for i in range(i0, i1):
        key = np.int64(keys[i])
        known = (key == v0) | (key == v1) | (key == v2) | (key == v3)
        known = known | (key == v4) | (key == v5) | (key == v6) | (key == v7)
        miss += np.int64((key >= lo) & (key <= hi)) * (1 - np.int64(known))
    return miss


@njit(cache=True)
def few_values(keys, i0, i1, lo, hi):  # type: ignore[no-untyped-def]
    """(count, values): the at most FEW distinct keys in [lo, hi] that the first FEW_SAMPLE of
    ``keys[i0:i1]`` hold, the values repeated to fill FEW; count -1 when they hold more."""
    values = np.zeros(FEW, np.int64)
    count = _few_values(keys, i0, i1, lo, hi, values)
    if count == 0 or count > FEW:
        return -1, values
    for j in range(count, FEW):
        values[j] = values[0]
    return count, values


@njit(cache=True)
def few_distinct(keys, i0, i1, lo, hi):  # type: ignore[no-untyped-def]
    """How many distinct keys in [lo, hi] ``keys[i0:i1]`` holds when at most FEW, else -1: the
    first FEW_SAMPLE keys give the candidates, one branch-free pass checks the rest. Data of a
    few values spread over a wide range of keys (two-valued data) would otherwise pay the
    counting sort of every key."""
    count, values = few_values(keys, i0, i1, lo, hi)
    if count < 0 or keys_outside(keys, i0, i1, lo, hi, values) > 0:
        return -1
    return count


@njit(cache=True)
def count_distinct(keys, nk, lo, hi, tmp, bitmap):  # type: ignore[no-untyped-def]
    """How many distinct values ``keys[:nk]`` (uint32, in [lo, hi]) holds; destroys the order of
    ``keys``."""
    if nk == 0:
        return 0
    if nk <= SMALL_SORT:
        part = keys[:nk]
        part.sort()
        count = 1
        for i in range(1, nk):
            if part[i] != part[i - 1]:
                count += 1
        return count
    span = np.int64(hi) - np.int64(lo) + 1
    if span <= (1 << DIRECT_BITS):
        count = 0
        for i in range(nk):
            off = np.int64(keys[i]) - np.int64(lo)
            count += mark(bitmap, off >> 6, np.uint64(1) << np.uint64(off & 63))
        words = (span >> 6) + 1
        if words <= nk:
            bitmap[:words] = 0
        else:
            for i in range(nk):
                bitmap[(np.int64(keys[i]) - np.int64(lo)) >> 6] = 0
        return count
    few = few_distinct(keys, 0, nk, lo, hi)
    if few >= 0:  # a few values far apart (two-valued data): no sort
        return few
    # counting sort by the high bits, then one bitmap per bucket
    n_buckets = ((span - 1) >> BUCKET_BITS) + 1
    starts = np.zeros(n_buckets + 1, np.int64)
    for i in range(nk):
        starts[((np.int64(keys[i]) - np.int64(lo)) >> BUCKET_BITS) + 1] += 1
    for b in range(n_buckets):
        starts[b + 1] += starts[b]
    fill = starts[:n_buckets].copy()
    for i in range(nk):
        b = (np.int64(keys[i]) - np.int64(lo)) >> BUCKET_BITS
        tmp[fill[b]] = keys[i]
        fill[b] += 1
    return bucket_distinct(tmp, starts, 0, n_buckets, lo, BUCKET_BITS, bitmap)


@njit(cache=True)
def bucket_distinct(keys, starts, b0, b1, lo, bits, bitmap):  # type: ignore[no-untyped-def]
    """The distinct keys of buckets [b0, b1) (bucket b: ``keys[starts[b]:starts[b + 1]]``, its
    keys within 2^``bits`` values of each other), counted on the first 2^``bits`` bits of
    ``bitmap`` (clear; left clear)."""
    mask = (np.int64(1) << bits) - 1
    words = np.int64(1) << (bits - 6)
    count = np.int64(0)
    for b in range(b0, b1):
        for i in range(starts[b], starts[b + 1]):
            off = (np.int64(keys[i]) - np.int64(lo)) & mask
            count += mark(bitmap, off >> 6, np.uint64(1) << np.uint64(off & 63))
        if starts[b + 1] - starts[b] > words:  # a dense bucket: clearing each key's word costs more
            bitmap[:words] = 0
        else:
            for i in range(starts[b], starts[b + 1]):
                bitmap[((np.int64(keys[i]) - np.int64(lo)) & mask) >> 6] = 0
    return count
