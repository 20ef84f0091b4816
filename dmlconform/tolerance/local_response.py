"""``model: local_response``: local response normalization and its gradient (the derivation is
written in the spec files' ``tolerance.derivation``).

Forward: the window sum S of m <= LocalSize^k squares (all positive) errs by c_var u g(m) S
plus a rounding per square; d = Bias + (Alpha / n) S by |Alpha / n| e_S plus c_pt u (|Bias| +
|Alpha / n| S) (Alpha may be negative: the magnitudes, not d, scale the roundings); d^-Beta
then errs relatively by |Beta| e_d / |d| (Beta's conditioning) plus the power's own error,
c_pt u (1 + |Beta ln d|) (an exp(-Beta log d) evaluation), and y = x d^-Beta by one more
rounding. Where e_d reaches |d| (d near 0, or not positive for a fractional Beta) the result
is undefined and the budget unbounded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmlconform.kernels import plan as kernel_plan
from dmlconform.kernels.local_response import LocalResponsePlan, region_sum
from dmlconform.kernels.local_response_grad import LocalResponseGradPlan
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec
from dmlconform.tolerance.options import ToleranceOptions
from dmlconform.tolerance.terms import (
    Budgets,
    Coefficients,
    member_coefficients,
    reduction_growth,
    with_output_rounding,
)


def _window_count(plan: LocalResponsePlan) -> int:
    """The most elements one window holds (clipped to the tensor)."""
    count = 1
    for axis in plan.axes:
        count *= min(plan.shape[axis], plan.below + plan.above + 1)
    return count


def _power_error(
    d: np.ndarray, e_d: np.ndarray, exponent: float, co: Coefficients, u: float
) -> tuple[np.ndarray, np.ndarray]:
    """(d^exponent, its relative error): |exponent| e_d / |d| from d's error, plus the power's
    own rounding; inf where d's error reaches d itself (undefined)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        p = np.power(d, exponent)
        rel_d = np.where(np.abs(d) > 0, e_d / np.abs(d), np.inf)
        log_d = np.log(np.where(d > 0, d, 1.0))
        rel = abs(exponent) * rel_d + co.pointwise * u * (1.0 + np.abs(exponent * log_d))
        undefined = (rel_d >= 0.5) | ((d <= 0) & (exponent != 0))
        return p, np.where(undefined, np.inf, rel)


def _terms(plan: LocalResponsePlan, x: np.ndarray, co: Coefficients, u: float):
    """(d, e_d): the window term and its error bound."""
    a = plan.alpha / plan.divisor
    s = region_sum(x * x, plan)
    g = reduction_growth(_window_count(plan), co)
    e_s = (co.variance * g + co.pointwise) * u * s
    d = plan.bias + a * s
    e_d = abs(a) * e_s + co.pointwise * u * (abs(plan.bias) + abs(a) * s)
    return d, e_d


def local_response_budgets(
    desc: OperatorDesc,
    reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
) -> Budgets:
    """``model: local_response``: per element |y| (|Beta| e_d / |d| + the power's error + c_pt u)
    (module docstring); for the gradient the two terms of the vector-Jacobian product each by
    that rule, the inner window sum by its terms' errors plus c_mean u g(m) times their
    magnitudes, and a rounding of each term's magnitude where they cancel."""
    plan = kernel_plan(desc, spec)
    co, u = member_coefficients(desc, spec, plan.output, None, tolerance)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        d, e_d = _terms(plan, x, co, u)
        p, rel_p = _power_error(d, e_d, -plan.beta, co, u)
        if not isinstance(plan, LocalResponseGradPlan):
            e = np.abs(x * p) * (rel_p + co.pointwise * u)
        else:
            gr = np.asarray(inputs[plan.input_gradient], dtype=np.float64)
            q, rel_q = _power_error(d, e_d, -plan.beta - 1.0, co, u)
            t = np.abs(gr * x * q)
            e_t = t * (rel_q + 2.0 * co.pointwise * u)
            g = reduction_growth(_window_count(plan), co)
            mag_inner = region_sum(t, plan, transposed=True)
            e_inner = region_sum(e_t, plan, transposed=True) + co.mean * u * g * mag_inner
            c = abs(2.0 * plan.alpha * plan.beta / plan.divisor)
            first, second = np.abs(gr * p), c * np.abs(x) * mag_inner
            e = (
                first * (rel_p + co.pointwise * u)
                + c * np.abs(x) * e_inner
                + co.pointwise * u * (first + 2.0 * second)
            )
        e = np.where(np.isnan(e), np.inf, e)
    return Budgets({plan.output: with_output_rounding(e, reference[plan.output], co)}, {plan.output: co})
