"""``model: lp_norm``: Lp normalization, x divided by its slice's P-norm with Epsilon placed as
the spec says.

The norm's sum has n positive terms (|x| or x^2): it errs relatively by c_mean u g(n) (P = 1)
or c_var u g(n) (P = 2) plus a rounding per term, g the strict model's capped growth, so a long
axis widens the budget like log2(n) and no further. The denominator's relative error is that
relative error times how much of the denominator the sum is (Epsilon's share does not err),
halved under a square root, plus c_pt u per operation; y = x / denominator adds one rounding.
The sums are taken in the working precision (FLOAT32 for FLOAT16 data): an implementation
that keeps a FLOAT16 sum of squares saturates at 65504 and fails (finding F10), and a float32
sum of squares of |x| > 1.8e19 overflows (finding F11); the budget allows neither. A zero
denominator (an all-zero slice with Epsilon 0) is 0/0: unbounded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmlconform.kernels.lp_normalization import build_plan
from dmlconform.kernels.lp_normalization import denominator as lp_denominator
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec
from dmlconform.tolerance.options import ToleranceOptions
from dmlconform.tolerance.terms import Budgets, member_coefficients, reduction_growth, with_output_rounding


def lp_budgets(
    desc: OperatorDesc,
    reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
) -> Budgets:
    """``model: lp_norm`` (module docstring): e_y = |y| (rel_den + c_pt u)."""
    plan = build_plan(desc, spec)
    co, u = member_coefficients(desc, spec, plan.output, None, tolerance)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    a = np.abs(x)
    g = reduction_growth(plan.reduction_length, co)
    coef = co.mean if plan.p == 1 else co.variance
    rel_sum = (coef * g + co.pointwise) * u  # relative error of sum(|x|) or sum(x^2)
    eps, pt = plan.epsilon, co.pointwise * u
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        s = np.sum(a if plan.p == 1 else a * a, axis=plan.axes, keepdims=True)
        if plan.epsilon_placement == "inside_root":
            den_arg = s + eps
            rel_den = rel_sum * s / den_arg / plan.p + 2 * pt
            zero = den_arg == 0
        else:
            # the squared norm and its relative error (P = 1 squares its sum: twice the error)
            sq, rel_sq = (s * s, 2.0 * rel_sum + pt) if plan.p == 1 else (s, rel_sum)
            if plan.epsilon_placement == "squared_norm":
                rel_den = rel_sq * sq / (sq + eps) / 2.0 + 2 * pt
                zero = (sq + eps) == 0
            else:
                norm = np.sqrt(sq)
                share = (
                    norm / (norm + eps) if plan.epsilon_placement == "add" else (norm >= eps).astype(float)
                )
                rel_den = (rel_sq / 2.0 + pt) * share + 2 * pt
                zero = (norm + eps) == 0 if plan.epsilon_placement == "add" else np.maximum(norm, eps) == 0
        y = x / lp_denominator(plan, x)
        e = np.abs(y) * (rel_den + pt)
        e = np.where(np.broadcast_to(zero, x.shape), np.inf, e)
    return Budgets({plan.output: with_output_rounding(e, reference[plan.output], co)}, {plan.output: co})
