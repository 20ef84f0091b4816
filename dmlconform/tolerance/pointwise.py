"""``model: pointwise``: given statistics (BATCH_NORMALIZATION), nothing reduced."""

from __future__ import annotations

from typing import Any

import numpy as np

from dmlconform.kernels.given_statistics import build_plan
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec
from dmlconform.tolerance.options import ToleranceOptions
from dmlconform.tolerance.terms import (
    Budgets,
    activation_error,
    as_f64,
    member_coefficients,
    with_output_rounding,
)


def pointwise_budgets(
    desc: OperatorDesc,
    reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
) -> Budgets:
    """``model: pointwise`` (given statistics, nothing reduced): per element
    e_y = c_pt u (|Scale z| + |Scale| (|x| + |Mean|) / sqrt(Variance + Epsilon) + |Bias|): a few
    roundings of each term, including the folded form x * a + (b - Mean * a) with a = Scale / sd
    that inference kernels use, whose two products cancel."""
    plan = build_plan(desc, spec)
    co, u = member_coefficients(desc, spec, plan.output, plan.activation, tolerance)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    mean = np.asarray(inputs[plan.mean], dtype=np.float64)
    var = np.asarray(inputs[plan.variance], dtype=np.float64)
    scale, bias = as_f64(inputs, plan.scale, 1.0), as_f64(inputs, plan.bias, 0.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        sd = np.sqrt(var + plan.epsilon)
        z = (x - mean) / sd
        y = np.broadcast_to(scale * z + bias, x.shape)
        folded = np.abs(scale) * (np.abs(x) + np.abs(mean)) / sd
        e_y = np.broadcast_to(co.pointwise * u * (np.abs(scale * z) + folded + np.abs(bias)), x.shape)
        e = activation_error(plan, y, e_y, co, u, spec)
        # Variance + Epsilon = 0: (x - Mean) / 0 is undefined by the docs; anything is accepted
        e = np.where(np.broadcast_to(var + plan.epsilon, x.shape) == 0, np.inf, e)
    return Budgets({plan.output: with_output_rounding(e, reference[plan.output], co)}, {plan.output: co})
