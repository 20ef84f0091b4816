"""``model: normalization`` with ``center`` false: the second moment about zero (MVN2 without the
mean step).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmlconform.kernels.rms_normalization import build_plan
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec
from dmlconform.tolerance.options import ToleranceOptions
from dmlconform.tolerance.terms import (
    Budgets,
    activation_error,
    as_f64,
    member_coefficients,
    reduction_growth,
    with_output_rounding,
)


def rms_budgets(
    desc: OperatorDesc,
    reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
) -> Budgets:
    """``model: normalization`` with ``center`` false: ms = mean(x^2), a sum of n positive terms
    (relative error c_var u g(n)); rms = sqrt(ms + Epsilon) with half that plus c_pt u;
    z = x / rms errs by |z| (rel_rms + c_pt u); Scale, Bias, FusedAdd and the activation as in
    the normalization model. No mean: nothing cancels. Without the variance step z = x exactly."""
    plan = build_plan(desc, spec)
    co, u = member_coefficients(desc, spec, plan.output, plan.activation, tolerance)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    n = plan.reduction_length
    g = reduction_growth(n, co)
    scale = as_f64(inputs, plan.scale, 1.0)
    bias, add = as_f64(inputs, plan.bias, 0.0), as_f64(inputs, plan.fused_add, 0.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if plan.normalize_variance:
            ms = np.mean(x * x, axis=plan.axes, keepdims=True)
            rel = co.variance * u * g * ms / (2.0 * (ms + plan.epsilon)) + co.pointwise * u
            z = x / np.sqrt(ms + plan.epsilon)
            e_z = np.abs(z) * (rel + co.pointwise * u)
        else:
            ms, z, e_z = None, x, np.zeros_like(x)
        y = np.broadcast_to(scale * z + bias + add, x.shape)
        e_y = np.abs(scale) * e_z + co.pointwise * u * (np.abs(scale * z) + np.abs(bias) + np.abs(add))
        e = activation_error(plan, y, np.broadcast_to(e_y, x.shape), co, u, spec)
        if ms is not None:
            e = np.where(np.broadcast_to(ms + plan.epsilon, x.shape) == 0, np.inf, e)
    return Budgets({plan.output: with_output_rounding(e, reference[plan.output], co)}, {plan.output: co})
