"""Large tensors into the form the compiled kernels read at memory speed: FLOAT16 widened to
float32, and slices whose rows are short gathered into contiguous slice order; and a float64
result narrowed to FLOAT16.

Why, measured on the stress tier (2 cores, 2^26 elements):

- numpy's float16 -> float32 ``astype`` took 0.12 s, and 0.8 s when its output landed on pages
  the process had not touched before; a table of the 65536 float16 values read per element takes
  0.02 s (the same float32 bits: the widening is exact either way).
- numpy's float64 -> float16 ``astype`` runs on one thread; :func:`narrow_half` rounds the same
  way on the thread pool.
- A channel-last tensor (BATCH_NORMALIZATION's channels innermost, 64 of them) makes every
  slice M rows of one element, 64 elements apart. Each pass over a slice then reads a whole cache
  line per value, and a 2^26-element FLOAT16 BATCH_NORMALIZATION_TRAINING case spent 5 s per
  statistics pass and 6 s in the reference kernel. Gathering the slices into contiguous order
  first costs one blocked copy (:func:`gather_rows`, where rows are shorter than
  ``reference.SHORT_ROW``).

Both are plain copies: the values and their order within a slice are unchanged. What changes
is the rows' split, and with it which of the kernels' float64 lanes adds which element: rows of
one element put the whole slice into one lane (a serial sum of up to 2^20 terms), a gathered
slice spreads it over all of them. Either order is within the reference's accuracy bound
(``reference/compiled.py``), and each layout always gives the same result.
"""

from __future__ import annotations

import numpy as np

from dmlconform.native import njit, types
from dmlconform.reference.compiled import run_chunks

#: slices copied together: their rows at one m are read together (adjacent when the slices are
#: the innermost axis) and each slice's destination is written in order
BLOCK = 16

_HALF_TABLE: np.ndarray | None = None


def _half_table() -> np.ndarray:
    global _HALF_TABLE
    if _HALF_TABLE is None:
        _HALF_TABLE = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    return _HALF_TABLE


_u2, _f4, _i8 = (
    types.Array(types.uint16, 1, "C", readonly=True),
    types.Array(types.float32, 1, "C"),
    types.int64,
)


@njit(
    types.void(_u2, types.Array(types.float32, 1, "C", readonly=True), _f4, _i8, _i8), cache=True, nogil=True
)
def _widen(bits, table, out, i0, i1):  # type: ignore[no-untyped-def]
    for i in range(i0, i1):
        out[i] = table[bits[i]]


def _in_memory_order(arr: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """(``arr`` transposed to C order, the transposition) where its strides are a permutation of
    C order's; else (a C-contiguous copy, the identity)."""
    order = tuple(int(i) for i in np.argsort([-abs(s) for s in arr.strides], kind="stable"))
    a = arr.transpose(order)
    if not a.flags.c_contiguous:
        return np.ascontiguousarray(arr), tuple(range(arr.ndim))
    return a, order


def widen_half(arr: np.ndarray) -> np.ndarray:
    """A FLOAT16 array as float32 (exact), same shape, in the array's own memory order where it
    has one (a transposed view stays transposed: copying it into C order first cost more than
    the widening)."""
    a, order = _in_memory_order(arr)
    bits = a.reshape(-1).view(np.uint16)
    out = np.empty(a.shape, np.float32)
    flat = out.reshape(-1)
    table = _half_table()
    run_chunks(flat.size, flat.size, lambda i0, i1: _widen(bits, table, flat, i0, i1))
    return out.transpose(tuple(int(i) for i in np.argsort(order)))


@njit(
    types.void(types.Array(types.float32, 1, "C", readonly=True), _i8, _i8, _f4, _i8, _i8, _i8, _i8),
    cache=True,
    nogil=True,
)
def _gather(src, s_sk, s_sm, dst, m_len, l_len, k0, k1):  # type: ignore[no-untyped-def]
    n = m_len * l_len
    for kb in range(k0, k1, BLOCK):
        ke = min(kb + BLOCK, k1)
        for m in range(m_len):
            for k in range(kb, ke):
                s = k * s_sk + m * s_sm
                d = k * n + m * l_len
                for j in range(l_len):
                    dst[d + j] = src[s + j]


def gather_rows(flat: np.ndarray, sk: int, sm: int, shape: tuple[int, int, int]) -> np.ndarray:
    """The (K, M, L) rows of a float32 ``flat`` (row m of slice k at ``flat[k * sk + m * sm]``)
    as a contiguous (K, 1, M * L) array: each slice's elements in the same order, adjacent."""
    k_len, m_len, l_len = shape
    out = np.empty(k_len * m_len * l_len, np.float32)
    run_chunks(k_len, out.size, lambda k0, k1: _gather(flat, sk, sm, out, m_len, l_len, k0, k1))
    return out.reshape(k_len, 1, m_len * l_len)


_F16_OVERFLOW = np.float64(65520.0).view(np.uint64)  # halfway to 2^16: from here, inf
_F16_NORMAL = np.float64(2.0**-14).view(np.uint64)  # the least normal float16
_TWO52 = 2.0**52


@njit(
    types.void(
        types.Array(types.float64, 1, "C", readonly=True), types.Array(types.uint16, 1, "C"), _i8, _i8
    ),
    cache=True,
    nogil=True,
)
def _narrow(src, out, i0, i1):  # type: ignore[no-untyped-def]
    """float64 -> float16 bits, rounded to nearest even (numpy's ``astype``: overflow to inf,
    gradual underflow, a NaN keeps the top of its payload and stays a NaN). Branch-free."""
    for i in range(i0, i1):
        v = src[i]
        bits = np.float64(v).view(np.uint64)
        sign = np.uint16((bits >> np.uint64(48)) & np.uint64(0x8000))
        a = bits & np.uint64(0x7FFFFFFFFFFFFFFF)
        # normal: the top 10 fraction bits under the rebiased exponent, then round half to even
        h = np.int64(a >> np.uint64(42)) - np.int64((1023 - 15) << 10)
        rest = a & np.uint64((1 << 42) - 1)
        half_ulp = np.uint64(1 << 41)
        h += np.int64((rest > half_ulp) | ((rest == half_ulp) & ((h & 1) == 1)))
        # subnormal: |v| / 2^-24 rounded half to even (exact scaling; 2^52 forces the rounding)
        t = abs(v) * 16777216.0
        sub = np.int64((t + _TWO52) - _TWO52)
        nan = np.int64(0x7C00) + np.int64((a & np.uint64(0x000FFFFFFFFFFFFF)) >> np.uint64(42))
        nan = nan + np.int64(nan == 0x7C00)
        r = h if a >= _F16_NORMAL else sub
        r = np.int64(0x7C00) if a >= _F16_OVERFLOW else r
        r = nan if a > np.uint64(0x7FF0000000000000) else r
        out[i] = np.uint16(r) | sign


def narrow_half(src: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """A float64 array as FLOAT16, rounded as numpy's ``astype`` rounds (bit for bit), in the
    array's own memory order (as :func:`widen_half`); into ``out`` (a float16 array of its
    shape) where given."""
    a, order = _in_memory_order(np.asarray(src, dtype=np.float64))
    back = tuple(int(i) for i in np.argsort(order))
    direct = out is not None and out.transpose(order).flags.c_contiguous
    target = out.transpose(order) if direct else np.empty(a.shape, np.float16)
    flat, bits = a.reshape(-1), target.reshape(-1).view(np.uint16)
    run_chunks(flat.size, flat.size, lambda i0, i1: _narrow(flat, bits, i0, i1))
    if out is None:
        return target.transpose(back)
    if not direct:
        out[...] = target.transpose(back)
    return out
