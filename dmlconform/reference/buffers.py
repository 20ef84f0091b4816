"""Recycled output buffers: a fresh output without the page faults of fresh memory.

A new 128 MiB array comes from ``mmap``: the kernel zeroes each of its pages on first write,
which costs the reference as much as a third of its run on large tensors (measured by
``bench/bench_reference.py``: a fresh output took 1.4-1.7x the time of a copy, a reused one
1.0-1.2x). A conformance run allocates one output per case and drops it after the comparison,
so the next case of the same size can take the same memory back instead. This is a caching
allocator in the manner of the GPU frameworks': every array handed out here is a view of a raw
buffer the pool keeps (at most ``POOL_BYTES`` in all, the least recently used leaving first),
and a buffer is free again when nothing but the pool refers to it. numpy points every view's
``base`` at the array that owns the memory, so the reference count of the raw buffer says
exactly whether any view of it is alive; no finalizer is involved (a finalizer would run at
arbitrary points, and a Ctrl-C landing in one is swallowed).

Only buffers of at least ``MIN_BYTES`` are recycled; small ones cost nothing to allocate. The
contents of a recycled buffer are whatever the last user left, exactly as ``np.empty``
promises nothing; the reference writes every element of its outputs.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

MIN_BYTES = 1 << 21  # one huge page: below it a fresh allocation is cheap
POOL_BYTES = 1 << 29  # memory kept for reuse at most (512 MiB)

_LOCK = threading.Lock()
_BUFFERS: list[np.ndarray] = []  # raw uint8 buffers handed out, least recently used first


def _refs(raw: np.ndarray) -> int:
    return sys.getrefcount(raw)


def _calibrate() -> int:
    """The reference count of a buffer nothing else refers to, seen from a plain loop over a list
    as in :func:`empty` (the list, the loop name, the argument: the exact figure is CPython's)."""
    for raw in [np.empty(1, np.uint8)]:
        return _refs(raw)
    raise AssertionError("unreachable")


_FREE_REFCOUNT = _calibrate()


def empty(shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """``np.empty(shape, dtype)``, from recycled memory when a free buffer of that size exists."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < MIN_BYTES or nbytes > POOL_BYTES:
        return np.empty(shape, dtype)
    with _LOCK:
        found, i = None, 0
        for raw in _BUFFERS:  # a plain loop: the same references as in _calibrate
            if raw.nbytes == nbytes and _refs(raw) <= _FREE_REFCOUNT:
                found = _BUFFERS.pop(i)
                break
            i += 1  # noqa: SIM113 (enumerate would hold a reference to the buffer)
        if found is None:
            found = np.empty(nbytes, np.uint8)
        _BUFFERS.append(found)
        _evict()
        return found.view(dtype).reshape(shape)


def _evict() -> None:
    """Forget the least recently used buffers past ``POOL_BYTES`` (one in use is only
    forgotten: its memory goes when its last view does)."""
    total = sum(b.nbytes for b in _BUFFERS)
    while total > POOL_BYTES and len(_BUFFERS) > 1:
        total -= _BUFFERS.pop(0).nbytes


def held_bytes() -> int:
    """Bytes of free buffers kept for reuse now (for tests and memory accounting)."""
    with _LOCK:
        free = 0
        for raw in _BUFFERS:
            if _refs(raw) <= _FREE_REFCOUNT:
                free += raw.nbytes
        return free


def clear() -> None:
    """Forget every kept buffer (a caller about to need all the memory it can get)."""
    with _LOCK:
        _BUFFERS.clear()
