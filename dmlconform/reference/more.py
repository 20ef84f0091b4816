"""Reference computations beyond the centred normalization kernel, in float64 numpy.

Three readings of the spec's ``semantics:`` that :mod:`dmlconform.reference.compiled` does not
compute (and must not be taught, so the kernel stays one tight loop):

- ``kernel: normalization`` with ``center`` false (MEAN_VARIANCE_NORMALIZATION2 with UseMean
  FALSE, inferred RMS normalization): z = x / sqrt(mean(x^2) + Epsilon), or z = x without the
  variance step; then Scale, Bias and the activation as the normalization formula;
- ``kernel: given_statistics`` (BATCH_NORMALIZATION): the documented formula elementwise with
  Mean and Variance inputs broadcast, nothing reduced;
- ``kernel: normalization_grad`` (the batch-norm gradients): ``statistics: given`` treats Mean and
  Variance as constants, ``statistics: batch`` differentiates through the batch mean and variance
  (the standard batch-norm backward).

float64 is enough here: every quantity is a short product or a sum whose float64 error
(~log2(n) * 2^-53 relative to the sum of magnitudes) is far below half a float32 ULP of the
results the tolerance model compares; ``tests/test_reference_more.py`` checks that against an
mpmath evaluation. Outputs are rounded once to their DataType. The fused activation is the
kernel's own scalar formula (:func:`dmlconform.reference.activations.activate`), applied
elementwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmlconform.kernels import part as kernel_part
from dmlconform.reference import (
    MIRROR_MAX_ELEMENTS,
    InputError,
    PlanError,
    _input_array,
    _out_array,
    output_dtype,
    rounded,
)
from dmlconform.reference.activations import activation_args
from dmlconform.reference.mirror import activate_array
from dmlconform.specification import semantics
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.spec import Spec


def activation(act_type: str | None, y: np.ndarray, params: dict[str, float]) -> np.ndarray:
    """The fused activation of float64 ``y``, by the reference kernel's scalar formulas: per
    element in Python (the mirror's IEEE-safe loop) for small tensors, so that they neither
    import nor compile numba, through the compiled kernel's ``activate`` for large ones."""
    code, a, b = activation_args(act_type, params)
    if code == 0:
        return y
    flat = np.ascontiguousarray(y, dtype=np.float64).ravel()
    if flat.size <= MIRROR_MAX_ELEMENTS:
        out = activate_array(code, flat, a, b)
    else:
        from dmlconform.reference.compiled import activate_all

        out = np.empty_like(flat)
        activate_all(code, flat, a, b, out)
    return out.reshape(np.shape(y))


def _f64(arrays: dict[str, np.ndarray], name: str | None, fill: float) -> np.ndarray | float:
    return np.asarray(arrays[name], dtype=np.float64) if name else fill


def rms_normalization(plan: semantics.Plan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``center`` false: the statistic is the second moment about zero, mean(x^2)."""
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    if plan.normalize_variance:
        ms = np.mean(x * x, axis=plan.axes, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = x / np.sqrt(ms + plan.epsilon)
    else:
        z = x
    y = _f64(arrays, plan.scale, 1.0) * z + _f64(arrays, plan.bias, 0.0) + _f64(arrays, plan.fused_add, 0.0)
    return {plan.output: activation(plan.activation, y, plan.activation_params)}


def given_statistics(plan: semantics.GivenPlan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    mean = np.asarray(arrays[plan.mean], dtype=np.float64)
    var = np.asarray(arrays[plan.variance], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # Variance + Epsilon 0: undefined, any value
        z = (x - mean) / np.sqrt(var + plan.epsilon)
        y = _f64(arrays, plan.scale, 1.0) * z + _f64(arrays, plan.bias, 0.0)
    return {plan.output: activation(plan.activation, np.broadcast_to(y, x.shape), plan.activation_params)}


def normalization_grad(plan: semantics.GradPlan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The gradients in float64. Tensor-sized temporaries are updated in place (each fresh one
    cost about as much as its arithmetic at 2^26 elements); the operations and their order
    are the formulas', so the values are the same bits."""
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    dy = np.asarray(arrays[plan.input_gradient], dtype=np.float64)
    mean = np.asarray(arrays[plan.mean], dtype=np.float64)
    var = np.asarray(arrays[plan.variance], dtype=np.float64)
    scale = np.asarray(arrays[plan.scale], dtype=np.float64)
    axes = plan.axes
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_sd = 1.0 / np.sqrt(var + plan.epsilon)
        bias_grad = np.sum(dy, axis=axes, keepdims=True)
        dy_xm = x - mean
        dy_xm *= dy
        scale_grad = np.sum(dy_xm, axis=axes, keepdims=True) * inv_sd
        if plan.statistics == "given":
            dx = dy * (scale * inv_sd)
        else:
            if plan.centres_on_mean:  # dy (x - Mean) is the product the coefficient averages
                xc, dy_xc = x - mean, dy_xm
            else:
                xc = x - np.mean(x, axis=axes, keepdims=True)
                dy_xc = np.multiply(dy, xc, out=dy_xm)
            coef1 = np.mean(dy_xc, axis=axes, keepdims=True)
            del dy_xm, dy_xc
            dx = dy - np.mean(dy, axis=axes, keepdims=True)
            xc *= coef1
            xc /= var + plan.epsilon
            dx -= xc
            dx *= scale * inv_sd
    stat_shape = np.shape(mean)
    return {
        plan.output: np.broadcast_to(dx, x.shape),
        plan.scale_gradient_output: np.broadcast_to(scale_grad, stat_shape),
        plan.bias_gradient_output: np.broadcast_to(bias_grad, stat_shape),
    }


def _variance_facts(variance: Any) -> dict[str, float]:
    v = np.asarray(variance, dtype=np.float64)
    return {"largest_variance": float(np.max(v)), "smallest_variance": float(np.min(v))}


def given_statistics_facts(desc: OperatorDesc, inputs: dict[str, Any], spec: Spec) -> dict[str, float]:
    """The largest and smallest value of the Variance input, in float64 (the registry's ``facts``
    part of the given-statistics kernel; its ``fact_names``): what the kernel divides by, before
    Epsilon. An expectation names by them the cases where Variance + Epsilon leaves a narrower
    type's range (JAX's float16 rounds an Epsilon under 2^-25 to 0: cases/jax/)."""
    return _variance_facts(inputs[semantics.make_given_plan(desc, spec).variance])


def normalization_grad_facts(desc: OperatorDesc, inputs: dict[str, Any], spec: Spec) -> dict[str, float]:
    """The largest |sum of InputGradient * (Input - Mean)| over the case's channels, in float64:
    the sum the scale gradient divides by the standard deviation, and the largest and smallest
    value of the Variance input (the registry's ``facts`` part of the normalization-gradient
    kernel; its ``fact_names``).

    An expectation names by them the cases whose sum leaves FLOAT16's range: DirectML's FLOAT16
    BATCH_NORMALIZATION_GRAD holds it in FLOAT16, saturated at 65504
    (cases/directml/bng-fp16-gradient-sum); and those whose Variance + Epsilon puts a derivative
    of 1 / sqrt(Variance + Epsilon) out of FLOAT16's normal range (cases/jax/)."""
    plan = semantics.make_grad_plan(desc, spec)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    products = (x - np.asarray(inputs[plan.mean], dtype=np.float64)) * np.asarray(
        inputs[plan.input_gradient], dtype=np.float64
    )
    return {
        "largest_centred_gradient_sum": float(np.max(np.abs(np.sum(products, axis=plan.axes)))),
        **_variance_facts(inputs[plan.variance]),
    }


def input_members(desc: OperatorDesc, spec: Spec) -> tuple[str, ...]:
    """The present input members of any desc the reference computes, from its kernel's plan
    (raises SemanticsError for a desc too broken to read)."""
    return kernel_part(desc, spec, "plan")(desc, spec).input_members()


def execute(
    desc: OperatorDesc,
    inputs: dict[str, Any],
    spec: Spec,
    *,
    float64: bool = False,
    out: dict[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """:func:`dmlconform.reference.execute` for the kernels whose registry ``compute`` part is
    here (see :mod:`dmlconform.kernels`): every output
    member rounded once to its DataType (float64 values with ``float64=True``), written into
    ``out``'s preallocated arrays where given."""
    plan = kernel_part(desc, spec, "plan")(desc, spec)
    arrays = {name: _input_array(name, desc.get(name, spec), inputs) for name in plan.input_members()}
    values = kernel_part(desc, spec, "compute")(plan, arrays)
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
