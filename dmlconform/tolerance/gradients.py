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

_total = with_output_rounding


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
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ve = var + plan.epsilon
        inv_sd = 1.0 / np.sqrt(ve)
        e_bias = co.mean * u * g * np.sum(np.abs(dy), axis=axes, keepdims=True)
        e_scale = (
            co.mean
            * u
            * (g + co.pointwise)
            * np.sum(np.abs(dy * (x - mean)), axis=axes, keepdims=True)
            * inv_sd
        )
        if plan.statistics == "given":
            e_dx = co.pointwise * u * np.abs(dy * scale * inv_sd)
        else:
            m_x = np.mean(x, axis=axes, keepdims=True)
            xc = x - (mean if plan.centres_on_mean else m_x)
            abs_dy = np.mean(np.abs(dy), axis=axes, keepdims=True)
            c1 = np.mean(dy * xc, axis=axes, keepdims=True)
            abs_c1 = np.mean(np.abs(dy * xc), axis=axes, keepdims=True)
            if plan.centres_on_mean:  # x - Mean: one rounding, no mean of n terms
                e_xc = co.pointwise * u * np.max(np.abs(xc), axis=axes, keepdims=True)
            else:  # the centring mean's error, or MeanTensor's difference from it (either reading)
                e_xc = np.maximum(
                    co.mean * u * g * np.mean(np.abs(x), axis=axes, keepdims=True), np.abs(mean - m_x)
                )
            e_dx = (
                np.abs(scale)
                * inv_sd
                * (
                    co.pointwise * u * (np.abs(dy) + abs_dy + np.abs(xc) * abs_c1 / ve)
                    + co.mean * u * g * (abs_dy + np.abs(xc) * abs_c1 / ve)
                    + e_xc * (np.abs(c1) / ve + np.abs(xc) * abs_dy / ve)
                    # second order: the centring error in xc times its error in c1. The first-
                    # order terms vanish on a constant slice (xc = c1 = 0 exactly), where a
                    # float32 mean off by one ULP still leaves e_xc^2 |dy| / (var + eps): with
                    # Epsilon 1e-12, ~2e5 (the numpy backend failed the constant_slices regime
                    # of BATCH_NORMALIZATION_TRAINING_GRAD at --cases 32 without it)
                    + e_xc * e_xc * abs_dy / ve
                )
            )
        undefined = ve == 0
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
            out[name] = _total(
                np.reshape(np.broadcast_to(err, np.shape(err)), np.shape(err)), reference[name], c
            )
            coeffs[name] = c
    return Budgets(out, coeffs)
