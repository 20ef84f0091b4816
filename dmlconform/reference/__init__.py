"""The reference executor: float64 computation of the normalization family, rounded once.

``execute(desc, inputs)`` resolves the desc against its operator's ``semantics:`` in the spec
(:mod:`dmlconform.reference.plan`), arranges the operands for the single numba kernel
(:mod:`dmlconform.reference.kernels`) without copying where strides allow, runs it, and rounds
every output exactly once to its DataType. Inputs of any float dtype are taken at their exact
value (float16 widens exactly to float32; float32 and float64 are read as float64 in the kernel).

Outputs are logical arrays of the output Sizes; when the kernel wrote them in a permuted order
(batch-norm style reductions over non-trailing axes) they are transposed views, which is fine for
any consumer that indexes logically. :mod:`dmlconform.layout` turns them into strided buffers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dmlconform.desc import OperatorDesc, TensorDesc
from dmlconform.reference.activations import activation_args
from dmlconform.reference.plan import Plan, PlanError, make_plan
from dmlconform.spec import Spec, load_spec

__all__ = ["InputError", "Plan", "PlanError", "execute", "make_plan", "output_dtype"]

_DTYPES = {"FLOAT32": np.dtype(np.float32), "FLOAT16": np.dtype(np.float16), "FLOAT64": np.dtype(np.float64)}


class InputError(ValueError):
    """An input array is missing or does not match its tensor desc (the message names it)."""


def output_dtype(tensor: TensorDesc, spec: Spec | None = None) -> np.dtype:
    """The numpy dtype of a tensor's DataType (from the spec's data type table)."""
    if tensor.data_type in _DTYPES:
        return _DTYPES[tensor.data_type]
    spec = spec or load_spec()
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
    if arr.dtype == np.float16:
        return arr.astype(np.float32)  # exact
    if arr.dtype not in (np.float32, np.float64):
        return arr.astype(np.float64)
    return arr


def _as_3d(view: np.ndarray, n_kept: int) -> np.ndarray | None:
    """``view`` (kept dims first) as (K, M, L) without copying, or None if strides forbid it."""
    shape = view.shape
    kept = math.prod(shape[:n_kept])
    red = shape[n_kept:]
    for split in range(len(red) + 1):
        target = (kept, math.prod(red[:split]), math.prod(red[split:]))
        v = view.view()
        try:
            v.shape = target  # raises instead of copying when the strides cannot be merged
        except AttributeError:
            continue
        return v
    return None


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
    plan: Plan, arrays: dict[str, np.ndarray], out_dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the kernel: (output in ``out_dtype``, mean[stat_shape], variance[stat_shape]) in float64
    statistics. ``out_dtype`` float64 gives the unrounded result (used by tests and tolerance)."""
    x = arrays[plan.input]
    kept, axes = plan.kept_axes, plan.axes
    perm = kept + axes
    inv_perm = tuple(np.argsort(perm))
    xp = x.transpose(perm)
    x3 = _as_3d(xp, len(kept))
    if x3 is None:
        x3 = np.ascontiguousarray(xp).reshape(math.prod(xp.shape[: len(kept)]), 1, -1)
    n_slices = x3.shape[0]
    n = plan.reduction_length
    for name in (plan.scale, plan.bias, plan.fused_add):
        if name:
            _broadcastable(name, arrays[name], plan.shape)
    sc = _factor(arrays.get(plan.scale) if plan.scale else None, plan, perm, 1.0)
    bi = _factor(arrays.get(plan.bias) if plan.bias else None, plan, perm, 0.0)
    ad = _factor(arrays.get(plan.fused_add) if plan.fused_add else None, plan, perm, 0.0)
    kernel_dtype = np.float32 if out_dtype == np.float32 else np.float64
    out2 = np.empty((n_slices, n), dtype=kernel_dtype)
    mean = np.empty(n_slices)
    var = np.empty(n_slices)
    code, pa, pb = activation_args(plan.activation, plan.activation_params)
    from dmlconform.reference.kernels import normalize_kernel

    normalize_kernel(
        x3,
        out2,
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
    out = out2.reshape(xp.shape).transpose(inv_perm)
    if out.dtype != out_dtype:
        out = out.astype(out_dtype)  # float64 -> float16 in one correctly rounded step
    kept_shape = tuple(plan.shape[i] for i in kept)
    stat = mean.reshape(kept_shape + (1,) * len(axes)).transpose(inv_perm)
    vstat = var.reshape(kept_shape + (1,) * len(axes)).transpose(inv_perm)
    return out, stat, vstat


def _stat_output(name: str, tensor: TensorDesc, values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    sizes = tuple(tensor.sizes)
    if values.shape != sizes:
        if math.prod(sizes) != values.size:
            raise PlanError(
                f"{name}: Sizes {list(sizes)} do not hold the statistics' shape {list(values.shape)}"
            )
        values = np.ascontiguousarray(values).reshape(sizes)
    return values.astype(dtype)


def execute(
    desc: OperatorDesc, inputs: dict[str, Any], spec: Spec | None = None, *, float64: bool = False
) -> dict[str, np.ndarray]:
    """Compute every output of ``desc`` from ``inputs`` (member name -> array of its Sizes).

    Returns {output member: array of its Sizes in its DataType}; with ``float64=True`` the
    unrounded float64 values instead (the cross-check and tolerance use those). Raises
    :class:`InputError` for a missing or misshapen input and :class:`PlanError` for a desc the
    reference cannot run.
    """
    spec = spec or load_spec()
    plan = make_plan(desc, spec)
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
    out, mean, var = run_plan(plan, arrays, out_dtype)
    result = {plan.output: out}
    for name, values in ((plan.mean_output, mean), (plan.variance_output, var)):
        if name:
            tensor = desc.get(name, spec)
            dtype = np.dtype(np.float64) if float64 else output_dtype(tensor, spec)
            result[name] = _stat_output(name, tensor, values, dtype)
    return result
