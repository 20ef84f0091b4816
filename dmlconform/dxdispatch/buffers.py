"""Logical tensors <-> the flat buffers DxDispatch uploads and downloads.

DxDispatch never re-lays data: an input resource is uploaded byte for byte and bound whole, and a
``writeFile`` command downloads the whole output resource. So the bundle writes each input as the
buffer DirectML reads (``dmlconform.specification.layout``: element ``i`` at ``sum(i[d] * Strides[d])``, padding
filled with a NaN sentinel so that a stray read shows, zero strides as the smaller buffer) and
reads each output back from the buffer by its strides. Buffers are saved as 1-D, C-order,
little-endian ``.npy`` files of the tensor's own data type: FLOAT16 stays FLOAT16 end to end.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dmlconform.specification import layout
from dmlconform.specification.desc import TensorDesc


class BufferError(ValueError):
    """An output file that cannot be read as the tensor's buffer; the message is one line."""


def npy_dtype(tensor: TensorDesc) -> np.dtype:
    """The little-endian numpy dtype of the tensor's DataType (what DxDispatch's npy reader takes)."""
    return layout.numpy_dtype(tensor.data_type).newbyteorder("<")


def sentinel(tensor: TensorDesc) -> float:
    """The value of bytes no logical element owns: NaN for float types, 0 otherwise."""
    return float("nan") if np.issubdtype(npy_dtype(tensor), np.floating) else 0.0


def buffer_elements(tensor: TensorDesc) -> int:
    """Elements of the buffer DirectML may touch: TotalTensorSizeInBytes (or the computed
    minimum, as DMLCalcBufferTensorSize rounds it) divided by the element size, rounded up."""
    return layout.buffer_element_count(tensor)


def input_buffer(array: np.ndarray, tensor: TensorDesc) -> np.ndarray:
    """The 1-D buffer DirectML reads for ``array`` under ``tensor``'s layout."""
    buf = layout.to_buffer(np.asarray(array), tensor, fill=sentinel(tensor))
    return buf.astype(npy_dtype(tensor), copy=False)


def save_buffer(path: Path, buffer: np.ndarray) -> None:
    np.save(path, np.ascontiguousarray(buffer.reshape(-1)), allow_pickle=False)


def load_buffer(path: Path, tensor: TensorDesc) -> np.ndarray:
    """A saved buffer, checked against the tensor: dtype and enough elements for every strided
    position. Raises :class:`BufferError` (never a numpy traceback)."""
    want = npy_dtype(tensor)
    try:
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise BufferError(f"{path.name}: missing") from None
    except (OSError, ValueError, EOFError) as exc:
        raise BufferError(f"{path.name}: not a readable .npy file ({exc})") from None
    if not isinstance(arr, np.ndarray):
        raise BufferError(f"{path.name}: not a single array")
    if arr.dtype != want:
        raise BufferError(f"{path.name}: data type {arr.dtype.str}, expected {want.str} ({tensor.data_type})")
    flat = arr.reshape(-1)
    strides = tensor.effective_strides
    last = (
        sum((s - 1) * st for s, st in zip(tensor.sizes, strides, strict=False)) if all(tensor.sizes) else -1
    )
    if flat.size <= last:
        raise BufferError(
            f"{path.name}: {flat.size} elements, but the tensor's last element is at index {last} "
            f"(buffer of {buffer_elements(tensor)} expected)"
        )
    return flat


def output_array(path: Path, tensor: TensorDesc) -> np.ndarray:
    """The logical output (shape Sizes, the tensor's dtype) stored in the buffer file ``path``."""
    flat = load_buffer(path, tensor)
    return layout.from_buffer(flat.astype(flat.dtype.newbyteorder("="), copy=False), tensor)


def write_into(buffer: np.ndarray, array: np.ndarray, tensor: TensorDesc) -> None:
    """Store a logical output at its strided positions of ``buffer`` (as DirectML writes it)."""
    view = layout.as_strided_view(buffer, tensor)
    view[...] = np.asarray(array).astype(buffer.dtype, copy=False)
