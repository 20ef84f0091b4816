"""Error budgets of the kernels other than the centred normalization: selected by the operator's
``tolerance.model`` (``pointwise``, ``reduction_grad``) and, for ``model: normalization``, by the
semantics' ``center`` flag (off: the second moment about zero).

Each model is one function that returns the per-element absolute budgets of every output, as
:func:`dmlconform.tolerance.core.budgets` does for the normalization model, from the same
coefficients (:func:`dmlconform.tolerance.core.coefficients`, so overrides and the named variants in
``models:`` apply) and the same activation and output-rounding terms; the comparison itself is
:mod:`dmlconform.tolerance.core`'s. The derivations are written in each operator's spec file.

Symbols: u the unit roundoff of the working precision; c_pt the ``pointwise`` coefficient (a few
roundings per element); c_mean the ``mean`` coefficient (a float32 sum of n terms errs by
c_mean u g(n) times the sum of the magnitudes of its terms, g capped at pairwise growth
log2(n) + 1 by the strict model).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dmlconform.reference import more as model_activation
from dmlconform.spec import semantics
from dmlconform.spec.desc import OperatorDesc
from dmlconform.spec.model import Spec, load_spec
from dmlconform.tolerance import core as tolerance


def handles(desc: OperatorDesc, spec: Spec) -> bool:
    """Whether the desc's budget comes from this module rather than tolerance.budgets."""
    model = spec.operator(desc.operator).tolerance.get("model", "normalization")
    if model in MODELS:
        return True
    if model != "normalization" or semantics.kernel(desc, spec) != "normalization":
        return False
    try:
        return not semantics.centers(desc, spec)
    except semantics.SemanticsError:
        return False


def sum_growth(n: int, co: tolerance.Coefficients) -> float:
    """The growth of a float32 sum of n terms under the model's cap (:func:`tolerance.cap`)."""
    one_block = tolerance.growth(co.mean_growth, tolerance.block_length(co, n))
    return float(tolerance.cap(tolerance.growth(co.mean_growth, n), one_block, co, n))


def _f64(inputs: dict[str, Any], name: str | None, fill: float) -> Any:
    return np.asarray(inputs[name], dtype=np.float64) if name else fill


def _activation_error(
    plan: Any, y: np.ndarray, e_y: np.ndarray, co: tolerance.Coefficients, u: float, spec: Spec
) -> np.ndarray:
    """The error interval [y - e_y, y + e_y] pushed through the float64 activation, its branch
    points, its own error and its cancellation scale (as the normalization model)."""
    f = model_activation.activation(plan.activation, y, plan.activation_params)
    lo = model_activation.activation(plan.activation, y - e_y, plan.activation_params)
    hi = model_activation.activation(plan.activation, y + e_y, plan.activation_params)
    e = np.maximum(np.abs(lo - f), np.abs(hi - f))
    jumps = tolerance._branch_jumps(
        plan, np.broadcast_to(y, np.shape(f)), np.broadcast_to(e_y, np.shape(f)), f, spec
    )
    e = np.maximum(e, jumps) + co.activation_ulps * u * np.abs(f)
    return e + co.cancellation * u * tolerance.cancellation_scale(plan, y, spec)


_total = tolerance.with_output_rounding


def _coefficients(
    desc: OperatorDesc, spec: Spec, member: str, activation: str | None, overrides: dict[str, Any] | None
) -> tuple[tolerance.Coefficients, float]:
    tol = spec.operator(desc.operator).tolerance
    co = tolerance.coefficients(tol, desc.get(member, spec).data_type, activation, overrides)
    return co, tolerance.UNIT_ROUNDOFF[co.working_precision]


def pointwise_budgets(
    desc: OperatorDesc, reference: dict[str, np.ndarray], inputs: dict[str, Any], spec: Spec, overrides: Any
) -> tolerance.Budgets:
    """``model: pointwise`` (given statistics, nothing reduced): per element
    e_y = c_pt u (|Scale z| + |Scale| (|x| + |Mean|) / sqrt(Variance + Epsilon) + |Bias|): a few
    roundings of each term, including the folded form x * a + (b - Mean * a) with a = Scale / sd
    that inference kernels use, whose two products cancel."""
    plan = semantics.make_given_plan(desc, spec)
    co, u = _coefficients(desc, spec, plan.output, plan.activation, overrides)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    mean = np.asarray(inputs[plan.mean], dtype=np.float64)
    var = np.asarray(inputs[plan.variance], dtype=np.float64)
    scale, bias = _f64(inputs, plan.scale, 1.0), _f64(inputs, plan.bias, 0.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        sd = np.sqrt(var + plan.epsilon)
        z = (x - mean) / sd
        y = np.broadcast_to(scale * z + bias, x.shape)
        folded = np.abs(scale) * (np.abs(x) + np.abs(mean)) / sd
        e_y = np.broadcast_to(co.pointwise * u * (np.abs(scale * z) + folded + np.abs(bias)), x.shape)
        e = _activation_error(plan, y, e_y, co, u, spec)
        # Variance + Epsilon = 0: (x - Mean) / 0 is undefined by the docs; anything is accepted
        e = np.where(np.broadcast_to(var + plan.epsilon, x.shape) == 0, np.inf, e)
    return tolerance.Budgets({plan.output: _total(e, reference[plan.output], co)}, {plan.output: co})


def rms_budgets(
    desc: OperatorDesc, reference: dict[str, np.ndarray], inputs: dict[str, Any], spec: Spec, overrides: Any
) -> tolerance.Budgets:
    """``model: normalization`` with ``center`` false: ms = mean(x^2), a sum of n positive terms
    (relative error c_var u g(n)); rms = sqrt(ms + Epsilon) with half that plus c_pt u;
    z = x / rms errs by |z| (rel_rms + c_pt u); Scale, Bias, FusedAdd and the activation as in
    the normalization model. No mean: nothing cancels. Without the variance step z = x exactly."""
    plan = semantics.make_plan(desc, spec, uncentred_ok=True)
    co, u = _coefficients(desc, spec, plan.output, plan.activation, overrides)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    n = plan.reduction_length
    g = sum_growth(n, co)
    scale = _f64(inputs, plan.scale, 1.0)
    bias, add = _f64(inputs, plan.bias, 0.0), _f64(inputs, plan.fused_add, 0.0)
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
        e = _activation_error(plan, y, np.broadcast_to(e_y, x.shape), co, u, spec)
        if ms is not None:
            e = np.where(np.broadcast_to(ms + plan.epsilon, x.shape) == 0, np.inf, e)
    return tolerance.Budgets({plan.output: _total(e, reference[plan.output], co)}, {plan.output: co})


def reduction_grad_budgets(
    desc: OperatorDesc, reference: dict[str, np.ndarray], inputs: dict[str, Any], spec: Spec, overrides: Any
) -> tolerance.Budgets:
    """``model: reduction_grad`` (the spec files' derivation): the two gradient sums err by
    c_mean u g(n) times the sum of their terms' magnitudes (plus c_pt roundings per term); the
    input gradient is pointwise with given statistics, and with batch statistics carries the
    error of its two means and of the centring mean. With ``centre_with: mean`` the centre is the
    Mean member (spec doc_notes.bound-mean, settled by DirectML); with ``input`` the batch mean,
    and then the Mean member's difference from it is allowed for (either reading passes)."""
    plan = semantics.make_grad_plan(desc, spec)
    co, u = _coefficients(desc, spec, plan.output, None, overrides)
    n = plan.reduction_length
    g = sum_growth(n, co)
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
    coeffs: dict[str, tolerance.Coefficients] = {}
    for name, err in (
        (plan.output, e_dx),
        (plan.scale_gradient_output, e_scale),
        (plan.bias_gradient_output, e_bias),
    ):
        if name in reference:
            c, _ = _coefficients(desc, spec, name, None, overrides)
            out[name] = _total(
                np.reshape(np.broadcast_to(err, np.shape(err)), np.shape(err)), reference[name], c
            )
            coeffs[name] = c
    return tolerance.Budgets(out, coeffs)


MODELS: dict[str, Callable[..., tolerance.Budgets]] = {
    "pointwise": pointwise_budgets,
    "reduction_grad": reduction_grad_budgets,
}


def budgets(
    desc: OperatorDesc,
    reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec | None = None,
    overrides: dict[str, Any] | None = None,
) -> tolerance.Budgets:
    spec = spec or load_spec()
    model = spec.operator(desc.operator).tolerance.get("model", "normalization")
    fn = MODELS.get(model, rms_budgets)
    return fn(desc, reference, inputs, spec, overrides)
