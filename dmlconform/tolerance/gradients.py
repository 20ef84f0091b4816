"""``model: reduction_grad``: the batch-normalization gradients (their derivation is written in
the spec files).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dmlconform.kernels.normalization_grad import NormalizationGradPlan, build_plan
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec
from dmlconform.tolerance.options import ToleranceOptions
from dmlconform.tolerance.terms import (
    STORAGE_FLOOR,
    Budgets,
    Coefficients,
    member_coefficients,
    repetition,
    summed_growth,
    with_output_rounding,
)


@dataclass(frozen=True)
class GradientSums:
    """Each slice's sums over the reduced axes that the model reads (keepdims arrays in the numpy
    model, one per slice in the compiled judge's slice order); c is the input gradient's centre
    and M the Mean member. What the statistics leave unread is None (given statistics read the
    first two only; centred on M, the max, not the sum of |x|)."""

    abs_dy: np.ndarray  # sum |dy|
    abs_dy_xm: np.ndarray  # sum |dy (x - M)|
    dy_xc: np.ndarray | None = None  # sum dy (x - c)
    abs_dy_xc: np.ndarray | None = None  # sum |dy (x - c)|
    abs_x: np.ndarray | None = None  # sum |x| (c the batch mean)
    max_xc: np.ndarray | None = None  # max |x - c| (c the Mean member)


@dataclass(frozen=True)
class Repetition:
    """How often each value recurs in a slice, n over its distinct values
    (:func:`~dmlconform.tolerance.terms.repetition`), of the input gradient dy and of the input
    x (one per slice, keepdims in the numpy model): 1 where every value differs. A broadcast dy
    (zero strides) repeats its few values hundreds of times."""

    dy: Any = 1.0
    x: Any = 1.0


@dataclass(frozen=True)
class SliceErrors:
    """Per slice: the bias and scale gradients' errors, and what the input gradient's budget
    reads with batch statistics (None with given ones): mean|dy|, c1 = mean(dy xc),
    mean|dy xc| and e_xc, the error of the centred input; and the growth of the sums of dy
    (``g_dy``) and of dy (x - centre) (``g_dyx``), which the input gradient's means share."""

    e_bias: np.ndarray
    e_scale: np.ndarray
    abs_dy: np.ndarray | None = None
    c1: np.ndarray | None = None
    abs_c1: np.ndarray | None = None
    e_xc: np.ndarray | None = None
    g_dy: Any = 0.0
    g_dyx: Any = 0.0


def slice_errors(
    plan: NormalizationGradPlan,
    sums: GradientSums,
    mean: np.ndarray,
    batch_mean: np.ndarray | None,
    ve: np.ndarray,
    co: Coefficients,
    u: float,
    repeats: Repetition = Repetition(),
) -> SliceErrors:
    """The per-slice terms of ``model: reduction_grad`` from the slices' sums, Variance +
    Epsilon (``ve``) and the repetition of their terms, the numpy model's and the compiled
    judge's alike: e_bias = c_mean u g_dy sum|dy|, e_scale = (c_mean u (g_dyx + c_pt)
    sum|dy (x - Mean)| + n eta) / sqrt(ve) (unbounded where ve is 0; eta half the working
    precision's least subnormal, each product's underflow), and with batch statistics
    e_xc = c_pt u max|x - Mean| (centred on Mean: one rounding, no mean of n terms), or the
    centring mean's error, or the Mean member's difference from it (either reading).

    Each g is the sum's growth where its terms repeat (:func:`~dmlconform.tolerance.terms.summed_growth`): a
    float32 sum rounds a repeated term alike wherever its partial sum stays in one binade, so
    the errors of a value's r copies add up in step. dy's repetition for the sums of dy; for the
    terms dy (x - Mean), which repeat only where dy and x both do, the smaller of the two."""
    n = plan.reduction_length
    g_dy = summed_growth(n, co, u, repeats.dy)
    g_dyx = summed_growth(n, co, u, np.minimum(repeats.dy, repeats.x))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        e_bias = co.mean * u * g_dy * sums.abs_dy
        e_scale = co.mean * u * (g_dyx + co.pointwise) * sums.abs_dy_xm * (1.0 / np.sqrt(ve))
        # each product dy (x - Mean) rounds with an absolute error too, up to half the working
        # precision's least subnormal (gradual underflow): FLOAT16 arithmetic over deviations of
        # a few 2^-24 makes products among its subnormals, a product of 2.4 * 2^-24 rounding to
        # 2 * 2^-24, whatever its relative roundoff; over sqrt(ve) = 1e-6, 0.02 each. In float32
        # (2^-150) it is nothing
        e_scale = e_scale + n * STORAGE_FLOOR.get(co.working_precision, 0.0) / np.sqrt(ve)
        e_scale = np.where(ve == 0, np.inf, e_scale)
        if plan.statistics == "given":
            return SliceErrors(e_bias, e_scale, g_dy=g_dy, g_dyx=g_dyx)
        if plan.centres_on_mean:
            e_xc = co.pointwise * u * sums.max_xc
        else:
            g_x = summed_growth(n, co, u, repeats.x)
            e_xc = np.maximum(co.mean * u * g_x * (sums.abs_x / n), np.abs(mean - batch_mean))
        return SliceErrors(
            e_bias, e_scale, sums.abs_dy / n, sums.dy_xc / n, sums.abs_dy_xc / n, e_xc, g_dy, g_dyx
        )


def rounded_budgets(
    desc: OperatorDesc,
    spec: Spec,
    errors: dict[str, np.ndarray],
    reference: dict[str, np.ndarray],
    tolerance: ToleranceOptions,
) -> tuple[dict[str, np.ndarray], dict[str, Coefficients]]:
    """Each output's error (of its reference's shape, or as many values in its C order) with
    its output rounding, for the outputs the reference holds."""
    out: dict[str, np.ndarray] = {}
    coeffs: dict[str, Coefficients] = {}
    for name, err in errors.items():
        if name in reference:
            c, _ = member_coefficients(desc, spec, name, None, tolerance)
            out[name] = with_output_rounding(np.reshape(err, np.shape(reference[name])), reference[name], c)
            coeffs[name] = c
    return out, coeffs


def reduction_grad_budgets(
    desc: OperatorDesc,
    reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
) -> Budgets:
    """``model: reduction_grad`` (the spec files' derivation): the two gradient sums err by
    c_mean u g(n) times the sum of their terms' magnitudes (plus c_pt roundings per term); the
    input gradient is pointwise with given statistics, and with batch statistics carries the
    error of its two means and of the centring mean. With ``centre_with: mean`` the centre is the
    Mean member (spec doc_notes.bound-mean, settled by DirectML); with ``input`` the batch mean,
    and then the Mean member's difference from it is allowed for (either reading passes)."""
    plan = build_plan(desc, spec)
    co, u = member_coefficients(desc, spec, plan.output, None, tolerance)
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
        repeats = Repetition(repetition(plan, dy), repetition(plan, x))
        work = np.abs(dy)
        sums, m_x, xc = _slice_sums(plan, x, dy, mean, work)
        st = slice_errors(plan, sums, mean, m_x, ve, co, u, repeats)
        if plan.statistics == "given":
            e_dx = _given_input_error(dy, scale, inv_sd, work, co, u)
        else:
            assert xc is not None
            del x
            _batch_input_error(work, dy, xc, ve, st, co, u)
            del xc
            work *= np.abs(scale) * inv_sd
            e_dx = work
        del dy
        undefined = ve == 0
        if undefined.any():
            e_dx = np.where(np.broadcast_to(undefined, np.shape(e_dx)), np.inf, e_dx)
    errors = {plan.output: e_dx, plan.scale_gradient_output: st.e_scale, plan.bias_gradient_output: st.e_bias}
    return Budgets(*rounded_budgets(desc, spec, errors, reference, tolerance))


def _slice_sums(
    plan: NormalizationGradPlan, x: np.ndarray, dy: np.ndarray, mean: np.ndarray, work: np.ndarray
) -> tuple[GradientSums, np.ndarray | None, np.ndarray | None]:
    """The slices' sums the model reads (keepdims), the batch mean where the centre is the
    batch's own (else None) and, with batch statistics, the centred input x - centre (else
    None). ``work`` (|dy| on entry, overwritten) holds each summand in turn."""
    axes = plan.axes

    def total(a: np.ndarray) -> np.ndarray:
        return np.sum(a, axis=axes, keepdims=True)

    sum_abs_dy = total(work)
    np.subtract(x, mean, out=work)  # |dy (x - Mean)|
    work *= dy
    np.abs(work, out=work)
    sums = GradientSums(sum_abs_dy, total(work))
    m_x = xc = None
    if plan.statistics == "batch":
        if not plan.centres_on_mean:
            m_x = np.mean(x, axis=axes, keepdims=True)
        xc = x - (mean if m_x is None else m_x)
        np.multiply(dy, xc, out=work)
        sums = replace(sums, dy_xc=total(work))
        np.abs(work, out=work)
        sums = replace(sums, abs_dy_xc=total(work))
        if m_x is None:
            np.abs(xc, out=work)
            sums = replace(sums, max_xc=np.max(work, axis=axes, keepdims=True))
        else:
            np.abs(x, out=work)
            sums = replace(sums, abs_x=total(work))
    return sums, m_x, xc


def _given_input_error(
    dy: np.ndarray, scale: np.ndarray, inv_sd: np.ndarray, work: np.ndarray, co: Coefficients, u: float
) -> np.ndarray:
    """The input gradient's error with given statistics: pointwise, e_dx = c_pt u |dy Scale /
    sqrt(ve)| (``work`` overwritten)."""
    np.multiply(dy, scale, out=work)
    work *= inv_sd
    np.abs(work, out=work)
    return co.pointwise * u * work


def _batch_input_error(
    work: np.ndarray,
    dy: np.ndarray,
    xc: np.ndarray,
    ve: np.ndarray,
    st: SliceErrors,
    co: Coefficients,
    u: float,
) -> None:
    """The input gradient's error with batch statistics, before its factor |Scale| / sqrt(ve),
    into ``work`` (``xc`` is overwritten by its magnitude)::

        e_dx = |Scale| / sqrt(ve) * (
            c_pt u (|dy| + abs_dy + |xc| abs_c1 / ve)
          + c_mean u (g_dy abs_dy + g_dyx |xc| abs_c1 / ve)
          + e_xc (|c1| / ve + |xc| abs_dy / ve)
          + e_xc^2 abs_dy / ve)

    (g_dy and g_dyx: the growth of the sums of dy and of dy xc, :func:`slice_errors`.)

    The last term is second order: the centring error in xc times its error in c1. The
    first-order terms vanish on a constant slice (xc = c1 = 0 exactly), where a float32 mean
    off by one ULP still leaves e_xc^2 |dy| / (var + eps): with Epsilon 1e-12, ~2e5 (the numpy
    backend failed the constant_slices regime of BATCH_NORMALIZATION_TRAINING_GRAD at --cases
    32 without it)."""
    abs_dy, c1, abs_c1, e_xc = st.abs_dy, st.c1, st.abs_c1, st.e_xc
    abs_xc = np.abs(xc, out=xc)
    term = np.multiply(abs_xc, abs_c1)
    term /= ve  # |xc| abs_c1 / ve
    np.abs(dy, out=work)
    work += abs_dy
    work += term
    work *= co.pointwise * u  # the c_pt term
    term *= co.mean * u * st.g_dyx
    term += co.mean * u * st.g_dy * abs_dy
    work += term  # + the c_mean term
    np.multiply(abs_xc, abs_dy, out=term)
    term /= ve
    term += np.abs(c1) / ve
    term *= e_xc
    work += term  # + the e_xc term
    work += e_xc * e_xc * abs_dy / ve
