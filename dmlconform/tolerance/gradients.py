"""``model: reduction_grad``: the batch-normalization gradients (their derivation is written in
the spec files).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmlconform.specification import semantics
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.model import Spec, load_spec
from dmlconform.tolerance.terms import (
    Budgets,
    Coefficients,
    member_coefficients,
    reduction_growth,
    with_output_rounding,
)


def reduction_grad_budgets(
    desc: OperatorDesc,
    reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec | None = None,
    overrides: Any = None,
) -> Budgets:
    """``model: reduction_grad`` (the spec files' derivation): the two gradient sums err by
    c_mean u g(n) times the sum of their terms' magnitudes (plus c_pt roundings per term); the
    input gradient is pointwise with given statistics, and with batch statistics carries the
    error of its two means and of the centring mean. With ``centre_with: mean`` the centre is the
    Mean member (spec doc_notes.bound-mean, settled by DirectML); with ``input`` the batch mean,
    and then the Mean member's difference from it is allowed for (either reading passes)."""
    spec = spec or load_spec()
    plan = semantics.make_grad_plan(desc, spec)
    co, u = member_coefficients(desc, spec, plan.output, None, overrides)
    n = plan.reduction_length
    g = reduction_growth(n, co)
    axes = plan.axes
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    dy = np.asarray(inputs[plan.input_gradient], dtype=np.float64)
    mean = np.asarray(inputs[plan.mean], dtype=np.float64)
    var = np.asarray(inputs[plan.variance], dtype=np.float64)
    scale = np.asarray(inputs[plan.scale], dtype=np.float64)
    # The tensor-sized terms are built in place in three work arrays, in the order of operations
    # of the formulas in the comments (so every budget is the same to the last bit): as separate
    # expressions their temporaries held 57 bytes per element at once.
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ve = var + plan.epsilon
        inv_sd = 1.0 / np.sqrt(ve)
        work = np.abs(dy)
        # e_bias = c_mean u g sum(|dy|)
        e_bias = co.mean * u * g * np.sum(work, axis=axes, keepdims=True)
        abs_dy = np.mean(work, axis=axes, keepdims=True)
        # e_scale = c_mean u (g + c_pt) sum(|dy (x - Mean)|) / sqrt(ve)
        np.subtract(x, mean, out=work)
        work *= dy
        np.abs(work, out=work)
        e_scale = co.mean * u * (g + co.pointwise) * np.sum(work, axis=axes, keepdims=True) * inv_sd
        if plan.statistics == "given":
            # e_dx = c_pt u |dy Scale / sqrt(ve)|
            np.multiply(dy, scale, out=work)
            work *= inv_sd
            np.abs(work, out=work)
            e_dx = co.pointwise * u * work
        else:
            m_x = np.mean(x, axis=axes, keepdims=True)
            xc = x - (mean if plan.centres_on_mean else m_x)
            np.multiply(dy, xc, out=work)
            c1 = np.mean(work, axis=axes, keepdims=True)
            np.abs(work, out=work)
            abs_c1 = np.mean(work, axis=axes, keepdims=True)
            if plan.centres_on_mean:  # x - Mean: one rounding, no mean of n terms
                np.abs(xc, out=work)
                e_xc = co.pointwise * u * np.max(work, axis=axes, keepdims=True)
            else:  # the centring mean's error, or MeanTensor's difference from it (either reading)
                np.abs(x, out=work)
                e_xc = np.maximum(
                    co.mean * u * g * np.mean(work, axis=axes, keepdims=True), np.abs(mean - m_x)
                )
            del x
            abs_xc = np.abs(xc, out=xc)
            # e_dx = |Scale| / sqrt(ve) * (
            #     c_pt u (|dy| + abs_dy + |xc| abs_c1 / ve)
            #   + c_mean u g (abs_dy + |xc| abs_c1 / ve)
            #   + e_xc (|c1| / ve + |xc| abs_dy / ve)
            #   + e_xc^2 abs_dy / ve)
            # the last term is second order: the centring error in xc times its error in c1. The
            # first-order terms vanish on a constant slice (xc = c1 = 0 exactly), where a float32
            # mean off by one ULP still leaves e_xc^2 |dy| / (var + eps): with Epsilon 1e-12, ~2e5
            # (the numpy backend failed the constant_slices regime of
            # BATCH_NORMALIZATION_TRAINING_GRAD at --cases 32 without it)
            term = np.multiply(abs_xc, abs_c1)
            term /= ve  # |xc| abs_c1 / ve
            np.abs(dy, out=work)
            work += abs_dy
            work += term
            work *= co.pointwise * u  # the c_pt term
            term += abs_dy
            term *= co.mean * u * g
            work += term  # + the c_mean term
            np.multiply(abs_xc, abs_dy, out=term)
            term /= ve
            term += np.abs(c1) / ve
            term *= e_xc
            work += term  # + the e_xc term
            work += e_xc * e_xc * abs_dy / ve
            del term, abs_xc, xc
            work *= np.abs(scale) * inv_sd
            e_dx = work
        del dy
        undefined = ve == 0
        if undefined.any():
            e_dx = np.where(np.broadcast_to(undefined, np.shape(e_dx)), np.inf, e_dx)
        e_scale = np.where(undefined, np.inf, e_scale)
    out: dict[str, np.ndarray] = {}
    coeffs: dict[str, Coefficients] = {}
    for name, err in (
        (plan.output, e_dx),
        (plan.scale_gradient_output, e_scale),
        (plan.bias_gradient_output, e_bias),
    ):
        if name in reference:
            c, _ = member_coefficients(desc, spec, name, None, overrides)
            out[name] = with_output_rounding(
                np.reshape(np.broadcast_to(err, np.shape(err)), np.shape(err)), reference[name], c
            )
            coeffs[name] = c
    return Budgets(out, coeffs)
