"""Logical arrays <-> strided DML buffers."""

from __future__ import annotations

import numpy as np
import pytest

from dmlconform.specification.desc import TensorDesc
from dmlconform.specification.layout import (
    as_strided_view,
    buffer_element_count,
    from_buffer,
    numpy_dtype,
    to_buffer,
)


def test_packed_round_trip_is_row_major():
    t = TensorDesc("FLOAT32", (2, 3))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    buf = to_buffer(a, t)
    assert buf.dtype == np.float32 and buf.shape == (6,)
    np.testing.assert_array_equal(buf, [0, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(from_buffer(buf, t), a)


def test_padded_and_permuted_strides_place_elements():
    t = TensorDesc("FLOAT32", (2, 3), strides=(1, 4))  # column-major with a padded column stride
    a = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    buf = to_buffer(a, t, fill=np.nan)
    # element (i, j) at i*1 + j*4; last index 1 + 8 = 9 -> 10 elements
    assert buf.size == 10
    assert buf[0] == 1 and buf[1] == 4 and buf[4] == 2 and buf[5] == 5 and buf[8] == 3 and buf[9] == 6
    assert np.isnan(buf[[2, 3, 6, 7]]).all()
    np.testing.assert_array_equal(from_buffer(buf, t), a)


def test_zero_stride_broadcast():
    t = TensorDesc("FLOAT16", (4, 3), strides=(0, 1))
    row = np.array([1.5, -2.0, 3.0], np.float16)
    buf = to_buffer(np.broadcast_to(row, (4, 3)), t)
    assert buf.dtype == np.float16
    # 3 elements * 2 bytes = 6 -> rounded up to 8 bytes -> 4 elements
    assert buffer_element_count(t) == 4
    np.testing.assert_array_equal(buf[:3], row)
    np.testing.assert_array_equal(from_buffer(buf, t), np.broadcast_to(row, (4, 3)))


def test_total_size_in_bytes_is_honoured_and_view_writes_through():
    t = TensorDesc("FLOAT32", (2, 2), total_tensor_size_in_bytes=64)
    buf = np.zeros(buffer_element_count(t), np.float32)
    assert buf.size == 16
    view = as_strided_view(buf, t)
    view[1, 1] = 7.0
    assert buf[3] == 7.0


def test_too_small_buffer_and_shape_mismatch_are_errors():
    t = TensorDesc("FLOAT32", (2, 3), strides=(3, 1))
    with pytest.raises(ValueError, match="too small"):
        as_strided_view(np.zeros(5, np.float32), t)
    with pytest.raises(ValueError, match="does not match"):
        to_buffer(np.zeros((3, 2), np.float32), t)
    assert numpy_dtype("FLOAT16") == np.float16
