"""The reference executor's machinery: float64 computation of the normalization family, rounded
once.

A kernel's module (``dmlconform/kernels/``) reads a desc into its plan and calls in here:
:func:`normalize_outputs` arranges the centred normalization's operands for the single numba
kernel (:mod:`dmlconform.reference.compiled`) without copying where strides allow, runs it (or,
for small tensors, its bit-identical numpy mirror :mod:`dmlconform.reference.mirror`, which
needs no compilation); :func:`compute_outputs` runs another kernel's float64 numpy function.
Both round every output exactly once to its DataType. Nothing here reads the spec's semantics
or knows a kernel by name: a plan is taken as it comes (duck-typed), so this package sits below
the kernels that use it. Inputs of any float dtype are taken at their exact
value (float16 widens exactly to float32; float32 and float64 are read as float64 in the kernel).

Outputs are logical arrays of the output Sizes; when the kernel wrote them in a permuted order
(batch-norm style reductions over non-trailing axes) they are transposed views, which is fine for
any consumer that indexes logically. :mod:`dmlconform.specification.layout` turns them into strided buffers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dmlconform.errors import PlanError
from dmlconform.reference import buffers
from dmlconform.reference.activations import activation_args
from dmlconform.reference.mirror import normalize_numpy
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.spec import Spec

__all__ = ["InputError", "PlanError", "compute_outputs", "normalize_outputs", "output_dtype"]

#: a kernel's plan (``dmlconform.kernels``), read here by its fields only
Plan = Any

# Inputs of at most this many elements run through the numpy mirror of the kernel
# (reference/mirror.py), larger ones through the compiled numba kernel. The choice depends on
# the size alone, so a given case always takes the same path, and the two paths are
# bit-identical anyway (tests/test_reference_paths.py). Below this size the mirror is fast
# enough (about a millisecond) that the kernel's compile time (2 to 3 s per dtype pair) would
# never pay off in a conformance run; above it the kernel is much faster.
MIRROR_MAX_ELEMENTS = 1 << 16
#: from this input size on, slices of short rows are gathered into contiguous slices first
#: (``reference/gather.py``). A size, not the path: the kernel and its mirror must read the same
#: rows, since the rows' split decides the order of their sums (tests force either path).
GATHER_MIN_ELEMENTS = 1 << 16

_DTYPES = {"FLOAT32": np.dtype(np.float32), "FLOAT16": np.dtype(np.float16), "FLOAT64": np.dtype(np.float64)}


class InputError(ValueError):
    """An input array is missing or does not match its tensor desc (the message names it)."""


def output_dtype(tensor: TensorDesc, spec: Spec) -> np.dtype:
    """The numpy dtype of a tensor's DataType (from the spec's data type table)."""
    if tensor.data_type in _DTYPES:
        return _DTYPES[tensor.data_type]
    dt = spec.data_types.get(tensor.data_type)
    if dt is None or not dt.numpy or not dt.is_float:
        raise PlanError(f"data type {tensor.data_type} is not a float type the reference computes")
    return np.dtype(dt.numpy)


def _input_array(name: str, tensor: TensorDesc, inputs: dict[str, Any]) -> np.ndarray:
    if name not in inputs or inputs[name] is None:
        raise InputError(f"{name}: no input array given")
    arr = np.asarray(inputs[name])
    if tuple(arr.shape) != tuple(tensor.sizes):
        raise InputError(f"{name}: shape {list(arr.shape)} does not match Sizes {list(tensor.sizes)}")
    if arr.dtype.kind != "f":
        raise InputError(f"{name}: dtype {arr.dtype} is not a float type")
    if arr.dtype == np.float16:  # exact
        if arr.size > GATHER_MIN_ELEMENTS:
            from dmlconform.reference.gather import widen_half

            return widen_half(arr)
        return arr.astype(np.float32)
    if arr.dtype not in (np.float32, np.float64):
        return arr.astype(np.float64)
    return arr


def _merged_stride(shape: tuple[int, ...], strides: tuple[int, ...]) -> int | None:
    """The stride of ``shape`` merged into one dimension without copying, or None if impossible.

    (Setting ``.shape`` to find out would copy the whole array before refusing.)"""
    dims = [(n, st) for n, st in zip(shape, strides, strict=True) if n != 1]
    if not dims:
        return 0
    for (_, outer), (n, inner) in zip(dims, dims[1:], strict=False):
        if outer != inner * n:
            return None
    return dims[-1][1]


def _as_3d(view: np.ndarray, n_kept: int, target: tuple[int, int, int] | None = None) -> np.ndarray | None:
    """``view`` (kept dims first) as (K, M, L) rows the kernel can address without copying, or
    None if the strides forbid it. ``target`` forces a given (K, M, L) split."""
    shape, strides = view.shape, view.strides
    groups = []
    for split in range(n_kept, len(shape) + 1):
        parts = ((0, n_kept), (n_kept, split), (split, len(shape)))
        dims = tuple(math.prod(shape[a:b]) for a, b in parts)
        if target is not None and dims != tuple(target):
            continue
        merged = [_merged_stride(shape[a:b], strides[a:b]) for a, b in parts]
        if None not in merged:
            groups.append((dims, merged))
    for dims, merged in groups:
        v = np.lib.stride_tricks.as_strided(view, shape=dims, strides=merged, writeable=view.flags.writeable)
        if _rows(v) is not None:
            return v
    return None


#: rows shorter than this (elements) are read slowly slice by slice (a channel-last tensor: rows
#: of one element, a cache line per value), so the kernels' callers gather them first
SHORT_ROW = 16


def short_rows(shape: tuple[int, int, int]) -> bool:
    """Whether (K, M, L) rows are short enough that gathering them pays."""
    return shape[2] < SHORT_ROW and shape[1] > 1


def contiguous_slices(view: np.ndarray, n_kept: int) -> np.ndarray:
    """``view`` (kept dims first) copied into contiguous (K, 1, n) slices: by the compiled
    gather (``reference/gather.py``) where it is float32 and its own rows can be addressed,
    else by numpy."""
    rows = _as_3d(view, n_kept)
    if rows is not None and rows.dtype == np.float32:
        from dmlconform.reference import gather

        return gather.gather_rows(*_rows(rows), rows.shape)
    return np.ascontiguousarray(view).reshape(math.prod(view.shape[:n_kept]), 1, -1)


def _rows(v3: np.ndarray) -> tuple[np.ndarray, int, int] | None:
    """A (K, M, L) view as (flat array, K stride, M stride) in elements, rows contiguous.

    The flat array starts at the view's first element and spans every element it reaches, so
    the kernel reads ``flat[k * sk + m * sm + j]``. None when the rows are not contiguous or a
    stride is negative; the caller copies then."""
    item = v3.itemsize
    sk, sm, sl = v3.strides
    n_k, n_m, n_l = v3.shape
    if v3.size == 0 or (n_l > 1 and sl != item) or min(sk, sm) < 0 or sk % item or sm % item:
        return None
    sk, sm = (sk // item if n_k > 1 else 0), (sm // item if n_m > 1 else 0)
    span = (n_k - 1) * sk + (n_m - 1) * sm + n_l
    flat = np.lib.stride_tricks.as_strided(v3, shape=(span,), strides=(item,), writeable=v3.flags.writeable)
    return flat, sk, sm


def _factor(
    arr: np.ndarray | None, plan: Plan, perm: tuple[int, ...], fill: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """A broadcastable operand as (T[Ks, Rs], tk[K], tr[n], constant-within-slice)."""
    kept_shape = tuple(plan.shape[i] for i in plan.kept_axes)
    red_shape = tuple(plan.shape[i] for i in plan.axes)
    n_kept = math.prod(kept_shape)
    if arr is None:
        return np.full((1, 1), fill), np.zeros(n_kept, np.int64), np.zeros(1, np.int64), True
    a = np.asarray(arr, dtype=np.float64)  # small operands: cheap; a full FusedAdd: one pass
    nk = len(plan.kept_axes)
    ap = a.transpose(perm)
    a_kept = ap.shape[:nk]
    a_red = ap.shape[nk:]
    table = np.ascontiguousarray(ap).reshape(math.prod(a_kept), math.prod(a_red))
    tk = np.broadcast_to(np.arange(table.shape[0], dtype=np.int64).reshape(a_kept), kept_shape).ravel()
    const = table.shape[1] == 1
    if const:
        tr = np.zeros(1, np.int64)
    else:
        tr = np.broadcast_to(np.arange(table.shape[1], dtype=np.int64).reshape(a_red), red_shape).ravel()
    return table, np.ascontiguousarray(tk), np.ascontiguousarray(tr), const


def _broadcastable(name: str, arr: np.ndarray, shape: tuple[int, ...]) -> None:
    if arr.ndim != len(shape) or any(a not in (1, s) for a, s in zip(arr.shape, shape, strict=False)):
        raise InputError(f"{name}: shape {list(arr.shape)} does not broadcast to the input's {list(shape)}")


def run_plan(
    plan: Plan, arrays: dict[str, np.ndarray], out_dtype: np.dtype, out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the kernel: (output in ``out_dtype``, mean[stat_shape], variance[stat_shape]) in float64
    statistics. ``out_dtype`` float64 gives the unrounded result (used by tests and tolerance).

    ``out``, when given, is a preallocated output array of the plan's shape and ``out_dtype``
    that receives the result: reusing it saves the page faults of a fresh output, which cost as
    much as the computation itself on large tensors."""
    x = arrays[plan.input]
    kept, axes = plan.kept_axes, plan.axes
    perm = kept + axes
    inv_perm = tuple(np.argsort(perm))
    xp = x.transpose(perm)
    n_slices = math.prod(xp.shape[: len(kept)])
    x3 = _as_3d(xp, len(kept))
    if x3 is None or (x.size > GATHER_MIN_ELEMENTS and x3.dtype == np.float32 and short_rows(x3.shape)):
        x3 = contiguous_slices(xp, len(kept))
    x_rows = _rows(x3)
    operands = _operands(plan, arrays, perm)
    kernel_dtype = np.float32 if out_dtype == np.float32 else np.float64
    result, o3 = _output_slices(plan, out, kernel_dtype, perm, inv_perm, x3, xp)
    o_rows = _rows(o3)
    mean = np.empty(n_slices)
    var = np.empty(n_slices)
    _normalize_rows(plan, x.size, x_rows, o_rows, x3.shape, operands, mean, var)
    if (out is not None and result is not out) or result.dtype != out_dtype:
        result = rounded(result, out_dtype, out)
    kept_shape = tuple(plan.shape[i] for i in kept)
    stat = mean.reshape(kept_shape + (1,) * len(axes)).transpose(inv_perm)
    vstat = var.reshape(kept_shape + (1,) * len(axes)).transpose(inv_perm)
    return result, stat, vstat


#: a broadcastable operand as the kernel takes it (see :func:`_factor`)
_Factor = tuple[np.ndarray, np.ndarray, np.ndarray, bool]
#: (flat array, K stride, M stride) of (K, M, L) rows (see :func:`_rows`)
_Rows = tuple[np.ndarray, int, int]


def _operands(
    plan: Plan, arrays: dict[str, np.ndarray], perm: tuple[int, ...]
) -> tuple[_Factor, _Factor, _Factor]:
    """Scale, Bias and FusedAdd as the kernel's factors (see :func:`_factor`), each checked to
    broadcast to the input first."""
    for name in (plan.scale, plan.bias, plan.fused_add):
        if name:
            _broadcastable(name, arrays[name], plan.shape)
    sc = _factor(arrays.get(plan.scale) if plan.scale else None, plan, perm, 1.0)
    bi = _factor(arrays.get(plan.bias) if plan.bias else None, plan, perm, 0.0)
    ad = _factor(arrays.get(plan.fused_add) if plan.fused_add else None, plan, perm, 0.0)
    return sc, bi, ad


def _output_slices(
    plan: Plan,
    out: np.ndarray | None,
    kernel_dtype: type[np.floating[Any]],
    perm: tuple[int, ...],
    inv_perm: tuple[int, ...],
    x3: np.ndarray,
    xp: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(the output in logical order, the (K, M, L) slices the kernel writes it through)."""
    # write the output in logical order when its rows line up with the input's (the usual case)
    target = out if out is not None and out.dtype == kernel_dtype else buffers.empty(plan.shape, kernel_dtype)
    result = target
    o3 = _as_3d(target.transpose(perm), len(plan.kept_axes), x3.shape)
    if o3 is None or not target.flags.writeable:
        o3 = buffers.empty(x3.shape, kernel_dtype)
        result = o3.reshape(xp.shape).transpose(inv_perm)
    return result, o3


def _normalize_rows(
    plan: Plan,
    size: int,
    x_rows: _Rows,
    o_rows: _Rows,
    shape: tuple[int, int, int],
    operands: tuple[_Factor, _Factor, _Factor],
    mean: np.ndarray,
    var: np.ndarray,
) -> None:
    """Run the kernel, or its numpy mirror for an input of at most MIRROR_MAX_ELEMENTS (``size``),
    over the (flat, K stride, M stride) rows of the input and the output."""
    x_flat, x_sk, x_sm = x_rows
    o_flat, o_sk, o_sm = o_rows
    sc, bi, ad = operands
    code, pa, pb = activation_args(plan.activation, plan.activation_params)
    if size <= MIRROR_MAX_ELEMENTS:
        kernel = normalize_numpy  # small: no compilation; bit-identical to the numba kernel
    else:
        from dmlconform.reference.compiled import normalize_kernel

        kernel = normalize_kernel(x_flat.dtype, o_flat.dtype)  # compiled on first use, cached
    kernel(
        x_flat,
        x_sk,
        x_sm,
        o_flat,
        o_sk,
        o_sm,
        *shape,
        *sc,
        *bi,
        *ad,
        plan.normalize_variance,
        plan.epsilon,
        code,
        pa,
        pb,
        mean,
        var,
    )


def rounded(values: np.ndarray, dtype: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
    """``values`` in ``dtype``, into ``out`` where given: float64 -> float16 in one correctly
    rounded step (compiled and on the thread pool for large arrays: :func:`gather.narrow_half`);
    beyond 65504 that is inf, as DirectML's FLOAT16 output holds it (expected, so no overflow
    warning)."""
    if np.dtype(dtype) == np.float16 and values.dtype == np.float64 and values.size > GATHER_MIN_ELEMENTS:
        from dmlconform.reference.gather import narrow_half

        return narrow_half(values, out)
    with np.errstate(over="ignore"):
        if out is None:
            return values.astype(dtype)
        np.copyto(out, values, casting="same_kind")
        return out


def _stat_output(name: str, tensor: TensorDesc, values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    sizes = tuple(tensor.sizes)
    if values.shape != sizes:
        if math.prod(sizes) != values.size:
            raise PlanError(
                f"{name}: Sizes {list(sizes)} do not hold the statistics' shape {list(values.shape)}"
            )
        values = np.ascontiguousarray(values).reshape(sizes)
    with np.errstate(over="ignore"):  # a FLOAT16 variance beyond 65504 is inf, as DirectML's is
        return values.astype(dtype)


def _out_array(name: str, arr: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if not isinstance(arr, np.ndarray) or tuple(arr.shape) != shape or arr.dtype != dtype:
        got = f"{getattr(arr, 'dtype', type(arr).__name__)} {list(getattr(arr, 'shape', ()))}"
        raise InputError(
            f"{name}: the preallocated output must be a {dtype} array of {list(shape)}, got {got}"
        )
    if not arr.flags.writeable:
        raise InputError(f"{name}: the preallocated output is read-only")
    return arr


def normalize_outputs(
    plan: Plan,
    desc: OperatorDesc,
    inputs: dict[str, Any],
    spec: Spec,
    *,
    float64: bool = False,
    out: dict[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """The centred normalization's outputs (``plan``: a
    :class:`~dmlconform.kernels.normalization.NormalizationPlan`): the operands arranged without
    copies where strides allow, the numba kernel or its numpy mirror, every output rounded once
    to its DataType (float64 values with ``float64=True``), written into ``out``'s preallocated
    arrays where given. InputError for a missing or misshapen array."""
    arrays = {}
    for name in plan.input_members():
        tensor = desc.get(name, spec)
        arrays[name] = _input_array(name, tensor, inputs)
    out_tensor: TensorDesc = desc.get(plan.output, spec)
    if tuple(out_tensor.sizes) != plan.shape:
        raise PlanError(
            f"{plan.output}: Sizes {list(out_tensor.sizes)} differ from the input's {list(plan.shape)}"
        )
    out_dtype = np.dtype(np.float64) if float64 else output_dtype(out_tensor, spec)
    out = out or {}
    unknown = sorted(set(out) - set(plan.output_members()))
    if unknown:
        raise InputError(f"{unknown[0]}: not an output of {desc.operator}")
    main_out = None
    if plan.output in out:
        main_out = _out_array(plan.output, out[plan.output], plan.shape, out_dtype)
    values, mean, var = run_plan(plan, arrays, out_dtype, main_out)
    result = {plan.output: values}
    for name, stat in ((plan.mean_output, mean), (plan.variance_output, var)):
        if name:
            tensor = desc.get(name, spec)
            dtype = np.dtype(np.float64) if float64 else output_dtype(tensor, spec)
            result[name] = _stat_output(name, tensor, stat, dtype)
            if name in out:
                dst = _out_array(name, out[name], tuple(tensor.sizes), dtype)
                np.copyto(dst, result[name])
                result[name] = dst
    return result


def compute_outputs(
    plan: Plan,
    compute: Any,
    desc: OperatorDesc,
    inputs: dict[str, Any],
    spec: Spec,
    *,
    float64: bool = False,
    out: dict[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """The outputs of a kernel computed by ``compute(plan, float64 arrays)`` (the kernels beside
    the centred normalization): every output member rounded once to its DataType (float64 values
    with ``float64=True``), written into ``out``'s preallocated arrays where given."""
    arrays = {name: _input_array(name, desc.get(name, spec), inputs) for name in plan.input_members()}
    values = compute(plan, arrays)
    result = {}
    out = out or {}
    unknown = sorted(set(out) - set(values))
    if unknown:
        raise InputError(f"{unknown[0]}: not an output of {desc.operator}")
    for name, v in values.items():
        tensor: TensorDesc = desc.get(name, spec)
        if tuple(tensor.sizes) != tuple(np.shape(v)):
            raise PlanError(
                f"{name}: Sizes {list(tensor.sizes)} do not hold the result's {list(np.shape(v))}"
            )
        dtype = np.dtype(np.float64) if float64 else output_dtype(tensor, spec)
        dst = _out_array(name, out[name], tuple(tensor.sizes), dtype) if name in out else None
        result[name] = rounded(np.asarray(v, dtype=np.float64), dtype, dst)
    return result
