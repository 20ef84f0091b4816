"""The reference's recycled output buffers: reuse only memory nobody can see any more."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from dmlconform.kernels import execute
from dmlconform.reference import buffers
from dmlconform.specification.desc import parse_desc

BIG = (buffers.MIN_BYTES // 4 + 1024,)  # float32 elements just above the recycling threshold


@pytest.fixture(autouse=True)
def empty_pool():
    buffers.clear()
    yield
    buffers.clear()


def test_released_buffer_is_reused_and_live_one_is_not():
    a = buffers.empty(BIG, np.float32)
    a_addr = a.__array_interface__["data"][0]
    b = buffers.empty(BIG, np.float32)  # a is alive: b must be other memory
    assert b.__array_interface__["data"][0] != a_addr
    del a
    gc.collect()
    assert buffers.held_bytes() == BIG[0] * 4
    c = buffers.empty(BIG, np.float32)
    assert c.__array_interface__["data"][0] == a_addr
    assert buffers.held_bytes() == 0
    assert c.shape == BIG and c.dtype == np.float32 and c.flags.writeable and c.flags.c_contiguous


def test_a_surviving_view_keeps_the_memory_out_of_the_pool():
    a = buffers.empty(BIG, np.float32)
    view = a[10:20]
    del a
    gc.collect()
    assert buffers.held_bytes() == 0
    view[:] = 7.0
    other = buffers.empty(BIG, np.float32)
    other[:] = 1.0
    assert (view == 7.0).all()
    del view
    gc.collect()
    assert buffers.held_bytes() == BIG[0] * 4


def test_small_arrays_are_not_recycled_and_the_pool_is_bounded(monkeypatch):
    small = buffers.empty((16,), np.float64)
    del small
    assert buffers.held_bytes() == 0
    monkeypatch.setattr(buffers, "POOL_BYTES", 2 * BIG[0] * 4)
    arrays = [buffers.empty(BIG, np.float32) for _ in range(3)]
    del arrays
    gc.collect()
    assert buffers.held_bytes() == 2 * BIG[0] * 4


def test_reference_results_of_consecutive_calls_stay_independent():
    shape = (4, 3, 256, 256)  # 3 MiB of float32: over the threshold
    t = {"DataType": "FLOAT32", "Sizes": list(shape)}
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {"InputTensor": t, "OutputTensor": t, "Axes": [2, 3], "NormalizeVariance": True},
        }
    )
    rng = np.random.default_rng(1)
    x1, x2 = rng.standard_normal(shape, np.float32), 5 + 3 * rng.standard_normal(shape, np.float32)
    first = execute(desc, {"InputTensor": x1})["OutputTensor"]
    kept = first.copy()
    execute(desc, {"InputTensor": x2})  # dropped at once: its buffer goes back to the pool
    third = execute(desc, {"InputTensor": x2})["OutputTensor"]  # may take that buffer, never first's
    assert np.array_equal(first, kept)
    assert third.__array_interface__["data"][0] != first.__array_interface__["data"][0]
    mean = x2.mean(axis=(2, 3), keepdims=True, dtype=np.float64)
    std = x2.std(axis=(2, 3), keepdims=True, dtype=np.float64)
    np.testing.assert_allclose(third, (x2 - mean) / std, rtol=1e-5, atol=1e-5)
