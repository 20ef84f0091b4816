"""Logical arrays <-> strided buffers of a DML_BUFFER_TENSOR_DESC.

A DirectML buffer tensor is a flat buffer of TotalTensorSizeInBytes; element ``i`` of the logical
tensor lives at ``sum(i[d] * Strides[d])`` (strides in elements, 0 broadcasts). Backends that
bind buffers (and tests of strided layouts) need both directions; the reference itself works on
logical arrays, so a case that asks for strided outputs has the same logical result.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from dmlconform.specification.desc import TensorDesc, minimum_implied_size_in_bytes

_DTYPES = {
    "FLOAT32": np.float32,
    "FLOAT16": np.float16,
    "FLOAT64": np.float64,
    "UINT32": np.uint32,
    "UINT16": np.uint16,
    "UINT8": np.uint8,
    "INT32": np.int32,
    "INT16": np.int16,
    "INT8": np.int8,
    "UINT64": np.uint64,
    "INT64": np.int64,
}


def numpy_dtype(data_type: str) -> np.dtype:
    """The numpy dtype of a DML_TENSOR_DATA_TYPE name (without prefix)."""
    try:
        return np.dtype(_DTYPES[data_type])
    except KeyError:
        raise ValueError(f"no numpy dtype for data type {data_type}") from None


def buffer_element_count(tensor: TensorDesc) -> int:
    """Elements in the tensor's buffer: TotalTensorSizeInBytes (or the minimum implied size)."""
    item = numpy_dtype(tensor.data_type).itemsize
    nbytes = tensor.total_tensor_size_in_bytes
    if nbytes is None:
        nbytes = minimum_implied_size_in_bytes(tuple(tensor.sizes), tensor.effective_strides, item)
    return math.ceil(nbytes / item)


def _check_span(buffer: np.ndarray, tensor: TensorDesc) -> None:
    if any(s == 0 for s in tensor.sizes):
        return
    last = sum((s - 1) * st for s, st in zip(tensor.sizes, tensor.effective_strides, strict=False))
    if last >= buffer.size:
        raise ValueError(
            f"buffer of {buffer.size} elements is too small: the last element is at index {last}"
        )


def as_strided_view(buffer: np.ndarray, tensor: TensorDesc) -> np.ndarray:
    """A logical view (shape Sizes) into a 1-D ``buffer``; writes through it land in the buffer.

    With zero strides several logical elements share one buffer slot (read-only semantics:
    writing through such a view keeps the last write)."""
    if buffer.ndim != 1:
        raise ValueError("buffer must be 1-D")
    if len(tensor.effective_strides) != len(tensor.sizes):
        raise ValueError("Strides and Sizes have different lengths")
    _check_span(buffer, tensor)
    step = buffer.strides[0]  # any 1-D buffer, contiguous or not: writes land in it
    return as_strided(
        buffer,
        shape=tuple(tensor.sizes),
        strides=tuple(st * step for st in tensor.effective_strides),
        writeable=True,
    )


def to_buffer(array: np.ndarray, tensor: TensorDesc, fill: float = 0.0) -> np.ndarray:
    """A fresh 1-D buffer (TotalTensorSizeInBytes / element size elements) holding ``array``'s
    elements at their strided positions; padding holds ``fill`` (a NaN fill makes a backend that
    reads padding visible). Broadcast (zero-stride) dims must carry equal values."""
    array = np.asarray(array)
    if tuple(array.shape) != tuple(tensor.sizes):
        raise ValueError(f"array shape {list(array.shape)} does not match Sizes {list(tensor.sizes)}")
    dtype = numpy_dtype(tensor.data_type)
    buf = np.full(buffer_element_count(tensor), fill, dtype=dtype)
    view = as_strided_view(buf, tensor)
    view[...] = array.astype(dtype, copy=False)
    return buf


def from_buffer(buffer: np.ndarray, tensor: TensorDesc) -> np.ndarray:
    """The logical tensor (a fresh C-contiguous array of Sizes) stored in a strided ``buffer``."""
    buffer = np.asarray(buffer)
    if buffer.dtype != numpy_dtype(tensor.data_type):
        buffer = buffer.view(numpy_dtype(tensor.data_type)) if buffer.dtype == np.uint8 else buffer
    return np.array(as_strided_view(buffer.reshape(-1), tensor), copy=True, order="C")
