"""The aggregate check: a sound implementation's errors in one slice share that slice's
statistics errors, so they fit a shift and a scale of z plus pointwise noise. A systematic error
fails here even where every element is within its own budget.
"""

from __future__ import annotations

import numpy as np

from dmlconform.kernels import KernelPlan
from dmlconform.specification.slices import to_slices
from dmlconform.tolerance.terms import AggregateModel, Coefficients, summed

FIT_SUMS = ("aa", "bb", "cc", "dd", "ee", "count", "d2", "rb2", "round2", "bend2")


def fit_sums(
    w: np.ndarray, z: np.ndarray, d: np.ndarray, r_bound: np.ndarray, rounding: np.ndarray, bend: np.ndarray
) -> np.ndarray:
    """:data:`FIT_SUMS` of rows (one slice per row; unusable elements zeroed by the caller)."""
    wz = w * z
    return np.stack(
        [
            np.sum(w * w, axis=1),
            np.sum(w * wz, axis=1),
            np.sum(wz * wz, axis=1),
            np.sum(w * d, axis=1),
            np.sum(wz * d, axis=1),
            np.sum(w != 0, axis=1).astype(np.float64),
            np.sum(d * d, axis=1),
            np.sum(r_bound * r_bound, axis=1),
            np.sum(rounding * rounding, axis=1),
            np.sum(bend * bend, axis=1),
        ]
    )


def aggregate_from_sums(
    sums: np.ndarray,
    shift: np.ndarray,
    scale: np.ndarray,
    co: Coefficients,
    on_grid: np.ndarray | None = None,
    divides: bool = False,
) -> dict[str, float]:
    """The aggregate figures from each slice's :data:`FIT_SUMS` (``sums[i]`` per slice) and its
    shift and scale bounds (the mean's error in units of sqrt(var + eps); the divisor's own
    relative error, :func:`~dmlconform.tolerance.normalization.own_divisor_error`): per slice
    the least-squares a, b of d ~ w (a + b z) (rows where z does not vary fit a alone), the
    residual's RMS from the sums (sum (d - w(a + b z))^2 expanded: its rounding is ~1e-16 of
    sum d^2, far below any bound that matters), and each figure over its bound.
    ``on_grid``: slices whose exact outputs are float numbers already; rounding to the output type
    moves nothing there, so none of it is allowed to line up with z. ``divides``: the output is
    divided by the slice's computed sqrt(var + eps), so its scale also carries the consequence
    of its shift (:func:`shift_scale`)."""
    aa, bb, cc, dd, ee, count, d2, rb2, round2, bend2 = sums
    fit_rb2 = rb2
    if on_grid is not None:
        if summed(co):
            # on such slices an implementation that sums is exact at every step: what the fit may
            # see of its noise is one output ULP an element (a last step rounded its own way), not
            # the per-element budget, which allows for the roundings of data off the grid (a
            # running mean, which the lenient model admits, rounds on any data: not there)
            fit_rb2 = np.where(on_grid, np.minimum(round2, rb2), rb2)
        round2 = np.where(on_grid, 0.0, round2)
    det = aa * cc - bb * bb
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        full = det > 1e-12 * np.maximum(aa * cc, 1e-300)
        a = np.where(full, (cc * dd - bb * ee) / det, np.where(aa > 0, dd / aa, 0.0))
        b = np.where(full, (aa * ee - bb * dd) / det, 0.0)
        var_a = np.where(full, cc / det, np.where(aa > 0, 1.0 / aa, 0.0))
        var_b = np.where(full, aa / det, 0.0)
        count = np.maximum(count, 1.0)
        res2 = d2 - 2 * a * dd - 2 * b * ee + a * a * aa + 2 * a * b * bb + b * b * cc
        rms_r = np.sqrt(np.maximum(res2, 0.0) / count)
        rms_bound = np.sqrt(rb2 / count)
        # what the fit may see of the rounding to the output type at worst (Cauchy-Schwarz: the
        # fit's row of (X^T X)^-1 X^T has norm sqrt(var)), and of the rest at four standard deviations
        aligned = np.sqrt(round2)
        noise = 4 * np.sqrt(fit_rb2 / count)
        shift_noise = (noise + aligned) * np.sqrt(var_a)
        # and of the activation's bend, at worst too, in proportion to the shift the fit finds
        # (measured here before the bend enters) over the shift bound it was computed at
        bent = _bend_at_shift(bend2, np.abs(a) + shift_noise, shift)
        aligned = aligned + bent
        shift_noise = (noise + aligned) * np.sqrt(var_a)
        shift_bound = co.ulp_scale * co.aggregate_shift * (shift + shift_noise)
        # a shift shrinks the slice (its divisor grows, never shrinks): the scale may reach that
        # much further below 0 than above (shift_scale); the figure is what the shift leaves
        # unexplained over the scale's own bound
        k = co.ulp_scale * co.aggregate_scale
        shrink = np.zeros_like(b)
        if divides:  # the shrink beyond the own bound that the shift explains (NaN: no fit, none)
            shrink = shift_scale(np.minimum(np.abs(a), shift) + shift_noise, 2.0 * scale) - scale
            shrink = np.where(np.isnan(shrink), 0.0, np.maximum(shrink, 0.0))
        explained = np.where(b < 0, k * shrink, 0.0)
        scale_bound = k * (scale + (noise + aligned) * np.sqrt(var_b))
        figures = {
            "shift": _worst(np.abs(a), shift_bound),
            "scale": _worst(np.maximum(np.abs(b) - explained, 0.0), scale_bound),
            "residual": _worst(rms_r, co.ulp_scale * co.aggregate_residual * rms_bound),
        }
        # (sqrt(round2) + bent)^2 per slice, round2 itself, bit for bit, where nothing bends
        aligned2 = np.where(bent > 0, round2 + bent * (2.0 * np.sqrt(round2) + bent), round2)
        pooled = _pooled_scale(full, aa, bb, cc, dd, ee, fit_rb2, aligned2, count, (scale, shrink), co)
        if pooled is not None:
            figures["pooled scale"] = pooled
        return figures


def _bend_at_shift(bend2: np.ndarray, found: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """sqrt(bend2), the activation's bend over the full error interval, scaled to a shift of
    ``found`` where the interval's shift part is ``bound``: found / bound of it, at most all of it
    (all of it where the bound is 0: the interval is then the other terms', which no shift
    scales). The bend grows as the square of the error where the activation is smooth over the
    interval, but only linearly across a kink of f'' (SOFTSIGN at 0: f(y + e) + f(y - e) - 2 f(y)
    = 4 |y| e - 2 y |y| once e > |y|), so the square of the ratio would miss it: MVN2 + SOFTSIGN
    by one sequential loop, found / bound = 0.13, still failed at 1.41 times the scale bound."""
    with np.errstate(invalid="ignore", divide="ignore"):
        part = np.where(bound > 0, np.minimum(found / np.where(bound > 0, bound, 1.0), 1.0), 1.0)
    return np.where(bend2 > 0, np.sqrt(bend2) * part, 0.0)


def shift_scale(shift: np.ndarray, own: np.ndarray | float = 0.0) -> np.ndarray:
    """The most a slice shifted by a may shrink: 1 - sqrt(1 - a^2 - e) (1 once a^2 + e >= 1),
    e the relative error of the kernel's own sum of squared deviations.

    A kernel whose mean is off by delta takes its deviations around it, and their mean square is
    var + delta^2 exactly (the cross term sums to 0), whatever order it sums them in, times
    1 + e for its own rounding. Its output (z - delta / sd) * sd / sqrt((sd^2 + delta^2)(1 + e))
    (sd = sqrt(var + eps)) is the reference's shifted by a and scaled by 1 + b with
    (1 + b)^2 + a^2 = 1 / (1 + e): a slice's scale follows from its shift, at any |mean| / std
    (e = 0: 1 + b = sqrt(1 - a^2)). Near |a| = 1 (a mean many standard deviations off, as one
    loop over 2^22 offset values makes it) 1 - a^2 is small and e decides, hence inside the root.
    A running mean (Welford) rounds within the sum of squares instead, which e counts (its kappa
    u term). On long chains at |mean| / std = 1e3 the shift is legitimately 0.2 standard
    deviations (a 32-thread kernel at n = 2^22), and its scale 2 % with it."""
    a2 = np.minimum(np.square(shift) + own, 1.0)
    return a2 / (1.0 + np.sqrt(1.0 - a2))  # 1 - sqrt(1 - a2), without its cancellation at small a2


def _pooled_scale(
    full: np.ndarray,
    aa: np.ndarray,
    bb: np.ndarray,
    cc: np.ndarray,
    dd: np.ndarray,
    ee: np.ndarray,
    rb2: np.ndarray,
    round2: np.ndarray,
    count: np.ndarray,
    scale: tuple[np.ndarray, np.ndarray],
    co: Coefficients,
) -> float | None:
    """One scale b shared by every slice (each keeping its own shift), over its bound: a
    systematic error of a few ULP is the same in every slice, where a sound implementation's
    slices err each within their own divisor's bound, in either direction. Short slices fit it
    poorly alone (a few elements each); pooled, the noise shrinks with the whole tensor. The fit
    weighs slice k by w_k = cc_k - bb_k^2 / aa_k, so a sound implementation's pooled b is at most
    sum w_k bound_k / sum w_k; noise and aligned rounding as in each slice's fit, pooled.
    ``scale``: the slices' own bounds and the shrink their shifts explain (:func:`shift_scale`),
    which a pooled b below 0 may take as the slices do; ``round2``: per slice, the square of what
    may line up with z there (the output rounding and the activation's bend)."""
    w = np.where(full, cc - bb * bb / np.where(aa > 0, aa, 1.0), 0.0)
    total = float(w.sum())
    if not np.isfinite(total) or total <= 0 or np.count_nonzero(w) < 2:
        return None
    b = float(np.sum(np.where(full, ee - bb * dd / np.where(aa > 0, aa, 1.0), 0.0))) / total
    bound = float(np.sum(w * scale[0])) / total
    if b < 0:
        explained = float(np.sum(np.where(w > 0, w * scale[1], 0.0))) / total
        b = min(0.0, b + co.ulp_scale * co.aggregate_scale * explained)
    per_element = np.sqrt(
        np.sum(np.where(full, rb2, 0.0)) / max(float(np.sum(np.where(full, count, 0.0))), 1.0)
    )
    noise = 4 * per_element
    aligned = np.sqrt(float(np.sum(np.where(full, round2, 0.0))))
    limit = co.ulp_scale * co.aggregate_scale * (bound + (noise + aligned) / np.sqrt(total))
    return _worst(np.abs(np.asarray([b])), np.asarray([limit]))


def aggregate_check(
    model: AggregateModel, got: np.ndarray, ref: np.ndarray, budget: np.ndarray, co: Coefficients
) -> dict[str, float]:
    """The whole output's errors against what a sound implementation's can be, in the manner of
    TOSA's compliance verifier for dot products (reference_model/src/verify), adapted to
    normalization: per slice, the error is fitted as w (a + b z) + r (:class:`AggregateModel`);
    |a| must stay within the mean's error, |b| within sqrt(var + eps)'s, each plus four standard
    deviations of what pointwise noise of the residual bound's size would put into the fit and
    the most that rounding to the output type can put into it when it lines up, and
    the residual's RMS within the RMS of its per-element bounds. A systematic error (every
    element off by the same fraction, or by a constant) fails here even where each element is
    within its own budget. Returns each figure over its bound (the largest over slices)."""
    axes = model.plan.axes
    with np.errstate(invalid="ignore", over="ignore"):
        d = got.astype(np.float64) - ref.astype(np.float64)
    usable = np.isfinite(d) & np.isfinite(budget) & np.isfinite(model.w) & np.isfinite(model.z)
    usable &= ~np.broadcast_to(model.excluded, got.shape)
    rows = [
        to_slices(np.ascontiguousarray(np.where(usable, np.broadcast_to(v, got.shape), 0.0)), axes)
        for v in (model.w, model.z, d, model.residual, model.rounding, model.bend)
    ]
    with np.errstate(invalid="ignore", over="ignore"):
        sums = fit_sums(*rows)
    shift = _per_row(model.shift, model.plan, got.shape)
    scale = _per_row(model.scale, model.plan, got.shape)
    grid = None if model.on_grid is None else _per_row(model.on_grid, model.plan, got.shape)
    return aggregate_from_sums(sums, shift, scale, co, grid, bool(model.plan.normalize_variance))


def _per_row(stat: np.ndarray, plan: KernelPlan, shape: tuple[int, ...]) -> np.ndarray:
    """A keepdims statistic as one value per slice, in :func:`to_slices` row order."""
    kept = [1 if i in plan.axes else s for i, s in enumerate(shape)]
    return to_slices(np.ascontiguousarray(np.broadcast_to(stat, kept)), plan.axes)[:, 0]


def _worst(value: np.ndarray, bound: np.ndarray) -> float:
    ratio = np.where(value == 0, 0.0, value / bound)
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    return float(ratio.max()) if ratio.size else 0.0
