"""Error metrics (ULP distance, absolute error) and the per-case error budget of a normalization.

Why per case: normalization amplifies the rounding error of its statistics by the conditioning
of the data (directml-facts.md, "Why a fixed rtol/atol cannot work here"). A careful float32
implementation is within a few ULPs on well-conditioned data and legitimately hundreds of ULPs
off on |mean|/std = 1e3, so the budget of every element is computed from that element's slice:
its reduction length ``n``, mean absolute value, variance, Epsilon, the element's |Scale|,
|Bias| and FusedAdd, the activation's slope and own error, and the output's rounding. The
coefficients and the derivation live in each operator's ``tolerance:`` section of the spec.

The model (u = unit roundoff of the working precision: float32, 2^-24, for FLOAT32 and FLOAT16
tensors alike, since FLOAT16 is normally computed in float32; probabilistic error growth of a
float32 sum of n terms, Higham & Mary 2019: g_mean = sqrt(n) + 1 for the part proportional to
|mean| -- a recursive sum's partial sums grow like k*|mean| -- and g_var = sqrt(log2 n) + 1
(``spread_growth``) for the part proportional to the spread, as for pairwise or blocked sums of
zero-mean terms; where a slice repeats its values (broadcast inputs, few-valued data) each is
summed r times (:func:`repetition`) and both grow like sqrt(n r), capped at the deterministic
(n - 1)/4, weighted by r - 1 below r = 2 (:func:`repeated_growth`)):

    e_mean  = c_mean * u * ((g_mean + g_corr) * |mean| + g_var * std)  error of the mean
    e_var   = c_var * u * ((g_mean + g_corr') * var + g_var * |mean| * std) + e_mean^2
                                                                       error of the variance
    rel_sd  = e_var / (2 (var + eps)) + c_pt * u
    e_z     = (e_mean + c_pt * u * |x - mean|) / sqrt(var + eps) + |z| * rel_sd
    e_y     = |scale| * e_z + c_pt * u * (|scale * z| + |bias| + |add|)
    e_act   = max over y' in {y +- e_y, b+- of branch points b within} of |f(y') - f(y)|
              + c_act * u * |f(y)| + c_canc * u * C(y)
    budget  = ulp_scale * (e_act + output_ulps * ulp_out(reference)) + atol

g_corr (:func:`correlated_growth`) is 0 unless the slice is (nearly) constant: there the
rounding errors of a sum are not random and grow linearly, up to g_corr = n/4 for a constant
slice (c_mean * g_corr * u |mean| = n/2 u |mean|, the deterministic bound of any summation order);
g_corr' is the same for the squares (x - mean)^2 whose mean the variance is (two-valued slices):
positive terms, which a sound implementation may sum recursively, hence g_mean; the |mean| * std
term is the kappa u relative error of one that updates a running mean (Welford).
C(y) (:func:`cancellation_scale`) is the fused activation's ``cancellation`` expression from
spec/common/activations.yaml: an absolute error scale for formulas that cancel (GELU's 1 + erf
at y << 0, ELU's exp(y) - 1 near 0), where the result is tiny but its float32 error is not.
(NormalizeVariance = false: sqrt(var + eps) is 1 and rel_sd is 0.) The statistics outputs get
e_mean and e_var, each plus the output rounding.

Which accuracy the suite requires (the spec's ``required`` model, ``default``): any order a GPU
kernel sums in -- chains of ceil(n / 32) terms, then a tree -- beside ``tight``, blocked
summation's -- any order within blocks of ``block`` (256) terms, pairwise across blocks -- as
numpy and PyTorch sum. Every growth term above is at most its value for one block
plus log2(n / block) (:func:`capped_growth`): the terms only a sequential loop needs are bounded
by the block, and the error grows like log2(n) beyond it. On top of that no element's budget
exceeds ``ceiling`` (2^-10 for FLOAT32, 2^-6 for FLOAT16) times the output's own scale
(:func:`output_scale`) plus the model's budget for one block, so an output off by 2^-8 of itself
fails at every n. The ``lenient`` model (uncapped growth, no ceiling) is what sequential float32
loops need at long reductions; a backend gets it only by asking (``--tolerance model=lenient`` or
its ``tolerance`` attribute), and the report says so.

Beside the per-element bound, :func:`aggregate_check` judges each slice's errors together: a
sound implementation's errors share the slice's mean and variance errors, so they fit a shift
and a scale of z plus pointwise noise (bounded in RMS). A systematic error fails there even
where every element is within its own budget. The shift is bounded by e_mean / sd; the scale
by the divisor's own error (:func:`own_divisor_error`: e_var without its e_mean^2, the centring
error), which does not grow with |mean| / std but for a running mean's kappa u, plus, below 0,
the shrink the fitted shift a brings with it, (1 + b)^2 + a^2 = 1 / (1 + e) for a two-pass
kernel (:func:`~dmlconform.tolerance.aggregate.shift_scale`). The squares' chain also counts
the small squares it absorbs (g_abs = sqrt(u) m^1.5 / 16, :func:`absorbed_growth`: one-signed
terms reaching down to 0), and so does the |mean| part of the mean's sum (one-signed data).

The models between ``default`` and ``lenient``: ``lanes`` (chains of ceil(n / 4): SIMD
accumulators of 4 to 16 lanes) and ``sequential`` (one chain of n), each a model of sums
(exact on exact-statistics data) with the default model's terms for its longer chain.

Calibration (tests/test_tolerance.py, tests/test_long_reductions.py): numpy float32, a careful
two-pass, PyTorch and ONNX Runtime (its blocked path at n >= 16384) pass at n = 2 .. 2^24 + 1
with at most ~0.26 of the budget; results 6 ULP off reach 0.93 of it on centred batch-norm data
and 12 ULP off 1.85x; an output 2^-8 too large fails at every n (1.7-5x at n = 2^22..2^24 on
|mean|/std ~ 1e3 data, 10^3 on centred data); statistics from sequential float32 sums fail from
n ~ 2^20 (70-4000x), float16 accumulation at any long reduction.

"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from dmlconform.kernels.normalization import NormalizationPlan, build_plan
from dmlconform.reference import activation_arrays as model_activation
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.slices import to_slices
from dmlconform.specification.spec import Spec
from dmlconform.tolerance.exact import exact_slices
from dmlconform.tolerance.options import ToleranceOptions
from dmlconform.tolerance.terms import (
    NARROWING_ULPS,
    STORAGE_FLOOR,
    UNIT_ROUNDOFF,
    AggregateModel,
    Budgets,
    Coefficients,
    absorbed_growth,
    as_f64,
    block_length,
    branch_jumps,
    cancellation_scale,
    cap,
    coefficients,
    correlated_growth,
    growth,
    repeated_growth,
    repetition,
    storage_roundoff,
    summed,
    ulp_of,
    with_output_rounding,
)


def _slice_stats(plan: NormalizationPlan, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each slice's mean and variance, and the spread (std) of its squared deviations: the
    variance is itself the mean of those squares, and its sum's rounding is correlated when
    they are (nearly) equal, as on two-valued data."""
    mean = x.mean(axis=plan.axes, keepdims=True)
    squares = (x - mean) ** 2
    var = squares.mean(axis=plan.axes, keepdims=True)
    squares_std = np.sqrt(((squares - var) ** 2).mean(axis=plan.axes, keepdims=True))
    return mean, var, squares_std


@dataclass
class SliceStatistics:
    """Each slice's exact (float64) statistics in the keepdims shape: mean, variance, the spread
    of the squared deviations (the variance is itself their mean) and the repetition r."""

    mean: np.ndarray
    var: np.ndarray
    squares_std: np.ndarray
    repetition: np.ndarray
    #: slices whose float32 sums are exact in any order (:mod:`dmlconform.tolerance.exact`)
    exact: np.ndarray | None = None


@dataclass
class StatisticsErrors:
    """The errors a sound implementation may make in a slice's statistics: ``e_mean`` in the
    mean, ``e_var`` in the (population) variance (keepdims shape), and ``e_var_own``, the
    variance's error without the centring error e_mean^2 that a two-pass kernel adds (its
    deviations taken around a mean e_mean off): what the slice's scale may carry beyond the
    consequence of its shift (:func:`own_divisor_error`)."""

    e_mean: np.ndarray
    e_var: np.ndarray
    e_var_own: np.ndarray


def slice_statistics(plan: NormalizationPlan, x: np.ndarray) -> SliceStatistics:
    mean, var, squares_std = _slice_stats(plan, x)
    exact = exact_slices(to_slices(x, plan.axes), UNIT_ROUNDOFF["FLOAT32"]).reshape(np.shape(mean))
    return SliceStatistics(mean, var, squares_std, repetition(plan, x), exact)


@dataclass
class Growth:
    """How much the rounding errors of a slice's sums grow, per term (see the module docstring)."""

    mean: np.ndarray  # the |mean| part of the mean's sum (random, repeated and correlated rounding)
    spread: np.ndarray  # the spread part of both sums
    squares: np.ndarray  # the sum of the squared deviations
    running: float | np.ndarray  # a running mean's rounding in the variance (Welford): random


def sum_growth(m: int, ss: SliceStatistics, co: Coefficients, u: float) -> Growth:
    """The growth terms of a sum of ``m`` of the slice's terms, each summed in any order.
    Repeated summands make any sum's rounding correlated: the mean's and the squares' alike (the
    squares of a slice have no more distinct values than the slice). The squares are of one sign
    and reach down to 0, so a long chain absorbs the smallest of them (:func:`absorbed_growth`);
    so are the values of one-signed data (the |mean| part: nothing where signs mix), whose
    smallest fall under the spacing of a long chain's partial sum (one loop over 2^22 values of
    the all_negative regime erred 2.65 times the random growth's bound before).
    A running mean's roundings do not repeat with the values (each update rounds at another
    count): their growth is the random one."""
    r = np.minimum(ss.repetition, m)  # a run of m terms repeats each value at most m times
    g_rep = repeated_growth(m, r)
    g_mean = np.maximum(growth(co.mean_growth, m), g_rep)
    g_corr = correlated_growth(m, np.abs(ss.mean), np.sqrt(ss.var), u)
    g_corr_var = correlated_growth(m, ss.var, ss.squares_std, u)
    return Growth(
        g_mean + g_corr + absorbed_growth(m, u),
        np.maximum(growth(co.spread_growth, m), g_rep),
        g_mean + g_corr_var + absorbed_growth(m, u),
        growth(co.spread_growth, m),
    )


def capped_growth(n: int, ss: SliceStatistics, co: Coefficients, u: float) -> Growth:
    """The growth terms of a slice's sums under the model's cap (:func:`cap`)."""
    full = sum_growth(n, ss, co, u)
    blk = sum_growth(block_length(co, n), ss, co, u) if co.growth_cap == "blocked" else full
    return Growth(
        cap(full.mean, blk.mean, co, n),
        cap(full.spread, blk.spread, co, n),
        cap(full.squares, blk.squares, co, n),
        cap(full.running, blk.running, co, n),
    )


def statistics_errors(
    plan: NormalizationPlan, ss: SliceStatistics, co: Coefficients, u: float, floor: bool = False
) -> StatisticsErrors:
    """e_mean and e_var of the module docstring, each growth term capped by the model.

    ``floor``: the same for a reduction of at most one block (``block`` terms), the errors
    that do not grow with n: the floor under the ceiling (:func:`output_scale`), which bounds
    only what accumulates beyond a block."""
    mean, var = ss.mean, ss.var
    n = plan.reduction_length
    # the floor is one block's (one thread's chain) growth, uncapped: capping a block again would
    # shrink a long chain back to ``block`` terms
    g = sum_growth(block_length(co, n), ss, co, u) if floor else capped_growth(n, ss, co, u)
    e_mean = co.mean * u * (g.mean * np.abs(mean) + g.spread * np.sqrt(var))
    # The variance is the mean of the squares (x - mean)^2: positive terms, so their sum grows like
    # the mean's |mean| part (a sound implementation may add them up recursively: a sequential
    # float32 loop errs ~35 u at n ~ 4000, past a pairwise allowance), correlated where they are
    # nearly equal (two-valued slices). An implementation may also update a running mean as it
    # goes (Welford; PyTorch's CUDA batch norm): each deviation then carries that mean's rounding,
    # u |mean|, a relative error of ~kappa u, kappa = |mean| / std (Chan, Golub & LeVeque 1983;
    # measured in float32: <= 2.1 kappa u for n = 2..2048): g_var * u * kappa * var =
    # g_var * u * |mean| * std, g_var the random growth (its roundings do not repeat with the values).
    e_var_own = co.variance * u * (g.squares * var + g.running * np.abs(mean) * np.sqrt(var))
    st = StatisticsErrors(e_mean, e_var_own + e_mean**2, e_var_own)
    return stored(exact_where_summed_exactly(st, ss, co, u, plan.reduction_length), ss, co)


def exact_where_summed_exactly(
    st: StatisticsErrors, ss: SliceStatistics, co: Coefficients, u: float, n: int
) -> StatisticsErrors:
    """On slices whose float32 sums are exact in any order (``ss.exact``) nothing grows with n:
    what is left is the division by n (or a product with its rounded reciprocal) and a running
    mean's rounding (Welford), each growth term 1. A coarser working precision than float32 has
    no such guarantee."""
    if not exact_applies(ss, co, u):
        return st
    mean, var = np.abs(ss.mean), ss.var
    # the division of an exact sum by n; a spread term for a kernel that scales each term by 1 / n
    # before it adds (no longer a sum of lattice values)
    e_mean = co.mean * u * (mean + np.sqrt(var))
    e_var_own = co.variance * u * (variance_rounds(ss, n) * var + mean * np.sqrt(var))
    return StatisticsErrors(
        np.where(ss.exact, e_mean, st.e_mean),
        np.where(ss.exact, e_var_own + e_mean**2, st.e_var),
        np.where(ss.exact, e_var_own, st.e_var_own),
    )


def exact_applies(ss: SliceStatistics, co: Coefficients, u: float) -> bool:
    """Some slice is summed exactly (``ss.exact``), in float32 or finer, under a model that admits
    sums only: where the exact-slice terms replace the growth terms."""
    return exact_replaces_growth(co, u) and ss.exact is not None and bool(np.any(ss.exact))


def exact_replaces_growth(co: Coefficients, u: float) -> bool:
    """Whether the model, in this working precision, holds a slice whose sums are exact to their
    division (:func:`exact_where_summed_exactly`): its statistics errors then read none of the
    growth terms, and so not the slice's repetition, which the compiled judge need not count
    there (:func:`dmlconform.tolerance.judge.slice_statistics`)."""
    return summed(co) and u <= UNIT_ROUNDOFF["FLOAT32"]


def variance_rounds(ss: SliceStatistics, n: int) -> np.ndarray:
    """1 where the division of an exact sum of squares by n may round (the variance is no float32
    number, or n is no power of two, so that a product with 1 / n may round), else 0."""
    representable = np.float32(ss.var).astype(np.float64) == ss.var
    return np.where(representable & (n & (n - 1) == 0), 0.0, 1.0)


def exact_divisor_rounding(
    plan: NormalizationPlan, ss: SliceStatistics, n: int, co: Coefficients, u: float
) -> np.ndarray:
    """On slices summed exactly, the relative error of sqrt(var + eps) counted from the data: the
    float32 addition of Epsilon rounds to a value known here (what every correctly rounded add
    gives), then u for the square root unless it is exact on an exactly computed variance, and u
    for 1 / sd (or a reciprocal square root) unless sd is a power of two; but never less than
    ``divisor_evaluation`` u for the evaluation of 1 / sqrt(w) itself. With the exact-divisor
    data of the ``exact_statistics`` regime correctly rounded steps are exact, yet a sound kernel
    need not be: an rsqrt estimate refined by one float32 Newton step lands an ULP off, and a
    variance a few u low (a running mean's, PyTorch's CPU layer_norm) moves a correctly rounded
    1 / sd one ULP up, 2 u above a power of two, in every slice alike (the spec's derivation)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        v32 = np.float32(ss.var).astype(np.float64)
        w = np.float32(v32 + float(np.float32(plan.epsilon))).astype(np.float64)
        r = np.sqrt(w).astype(np.float32).astype(np.float64)
        true = np.sqrt(ss.var + plan.epsilon)
        added = np.abs(np.sqrt(w) - true) / true
        sqrt_rounds = (variance_rounds(ss, n) > 0) | (r * r != w)
        power_of_two = np.frexp(r)[0] == 0.5
    counted = u * (sqrt_rounds.astype(float) + (~power_of_two).astype(float))
    return added + np.maximum(counted, co.divisor_evaluation * u)


def stored(st: StatisticsErrors, ss: SliceStatistics, co: Coefficients) -> StatisticsErrors:
    """The errors once the statistics are rounded to the type they are stored in (the
    ``fp16-statistics`` model: a FLOAT16 tensor's mean and variance stored as FLOAT16 after float32
    accumulation): one rounding of each, relative and, for a value among the type's subnormals,
    absolute (a variance under 2^-25 is 0 in FLOAT16), and the deviations then taken around the
    rounded mean, whose error enters the variance squared. Unchanged where they are kept in working precision."""
    us = storage_roundoff(co)
    if not us:
        return st
    floor = STORAGE_FLOOR.get(co.data_type, 0.0) * NARROWING_ULPS[co.narrowing]
    e_mean = st.e_mean + us * (np.abs(ss.mean) + st.e_mean) + floor
    e_var = st.e_var + us * (ss.var + st.e_var) + floor + e_mean**2 - st.e_mean**2
    return StatisticsErrors(e_mean, e_var, st.e_var_own + us * (ss.var + st.e_var_own) + floor)


def rounds_back(co: Coefficients) -> bool:
    """Whether a slice's outputs near numbers of the output type round back to them (on_grid's
    premise): under round-to-nearest narrowing a small error does. Under narrowing toward zero
    (a stack that truncates float32 to FLOAT16: cases/directml/float16-batch-norm) an output a
    hair below such a number in magnitude, as the exact answer is where sqrt(var + Epsilon) is not
    exact, or any small error that way, drops a whole ULP toward zero, in every element of the
    slice at once: a scale in step with |y|, which the fit must be allowed to see. So no slice is
    on the grid there (DirectML 1.15.4's FLOAT16 MVN over three slices of 2^20 exact-statistics
    values with Epsilon 1: every output one FLOAT16 ULP toward zero, aggregate scale 113x its
    on-grid bound under the narrowing model, within it otherwise)."""
    return co.narrowing == "nearest"


def on_grid(
    plan: NormalizationPlan, y: np.ndarray, exact: np.ndarray | None, out_dtype: np.dtype
) -> np.ndarray | None:
    """Slices (keepdims) summed exactly whose outputs y (float64, before rounding; no activation)
    lie within 1/16 of an ULP of a number of the output type: where a sound implementation's steps
    are exact, it returns those numbers, and its small errors round back to them. ``exact``: the
    slices summed exactly, keepdims."""
    if exact is None or not np.any(exact) or plan.activation not in (None, "ACTIVATION_IDENTITY"):
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        rounded = y.astype(out_dtype).astype(np.float64)
        close = np.abs(y - rounded) <= ulp_of(rounded, out_dtype) / 16.0
    return exact & np.all(close, axis=plan.axes, keepdims=True)


def grid_slices(
    plan: NormalizationPlan, inputs: dict[str, Any], ss: SliceStatistics, out_dtype: np.dtype
) -> np.ndarray | None:
    """:func:`on_grid` from the inputs (the compiled judge computes no y of its own)."""
    if ss.exact is None or not np.any(ss.exact) or plan.activation not in (None, "ACTIVATION_IDENTITY"):
        return None
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    mean = x.mean(axis=plan.axes, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        sd = np.sqrt(((x - mean) ** 2).mean(axis=plan.axes, keepdims=True) + plan.epsilon)
        z = (x - mean) / sd if plan.normalize_variance else x - mean
        y = as_f64(inputs, plan.scale, 1.0) * z + as_f64(inputs, plan.bias, 0.0)
        y = y + as_f64(inputs, plan.fused_add, 0.0)
    grid = on_grid(plan, y, np.reshape(ss.exact, np.shape(mean)), out_dtype)
    return None if grid is None else np.ravel(grid)


def output_scale(z: np.ndarray, unit: Any, scale: Any, bias: Any, add: Any) -> np.ndarray:
    """The output's own scale, element by element, before the activation: |Scale| max(unit, |z|)
    + |Bias| + |FusedAdd|, ``unit`` the natural size of z: 1 for a standardized deviation (the
    slice's std), the slice's std when the variance is not normalized. The ceiling is relative to
    this, so a result off by a fixed fraction of itself fails wherever |z| is near its largest,
    at any n. The ceiling bounds only what accumulates beyond one block of the reduction: the
    budget of a reduction of one block is its floor (where the output's scale is zero, as on a
    constant slice whose variance is not normalized, the floor is all there is)."""
    return np.abs(scale) * np.maximum(unit, np.abs(z)) + np.abs(bias) + np.abs(add)


def divisor_error(
    plan: NormalizationPlan, ss: SliceStatistics, st: StatisticsErrors, co: Coefficients, u: float
) -> np.ndarray:
    """The relative error of sqrt(var + eps): half the variance's, plus a few roundings (0 when
    the variance is not normalized: the divisor is 1)."""
    if not plan.normalize_variance:
        return np.zeros_like(ss.var)
    steps = co.pointwise * u
    if exact_applies(ss, co, u):
        counted = exact_divisor_rounding(plan, ss, plan.reduction_length, co, u)
        steps = np.where(ss.exact, np.minimum(counted, steps), steps)
    return st.e_var / (2.0 * (ss.var + plan.epsilon)) + steps


def own_divisor_error(
    plan: NormalizationPlan, ss: SliceStatistics, st: StatisticsErrors, co: Coefficients, u: float
) -> np.ndarray:
    """The relative error of sqrt(var + eps) that the slice's shift does not explain: from the
    variance's own error (``e_var_own``: its sum of squared deviations and a running mean's
    rounding, neither of which grows with |mean| / std but for that rounding's kappa u), the
    bound the aggregate fit holds the slice's scale to beside the consequence of its measured
    shift (:func:`~dmlconform.tolerance.aggregate.aggregate_from_sums`). A two-pass kernel's
    mean off by e_mean makes its variance e_mean^2 larger, exactly: the per-element budget
    allows for that at the shift's bound, the fit at the shift it finds."""
    return divisor_error(plan, ss, StatisticsErrors(st.e_mean, st.e_var_own, st.e_var_own), co, u)


def pre_activation_error(
    plan: NormalizationPlan,
    x: np.ndarray,
    ss: SliceStatistics,
    st: StatisticsErrors,
    co: Coefficients,
    u: float,
    scale: Any,
    bias: Any,
    add: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(z, y, e_y, sd, rel_sd): the standardized deviation, the pre-activation value Scale z +
    Bias + Add, the error a sound implementation may make in it given the statistics' errors
    ``st``, the slice's sqrt(var + eps) (1 without NormalizeVariance) and that divisor's
    relative error."""
    mean, var = ss.mean, ss.var
    sd = np.sqrt(var + plan.epsilon) if plan.normalize_variance else np.ones_like(var)
    rel_sd = divisor_error(plan, ss, st, co, u)
    z = (x - mean) / sd
    e_z = (st.e_mean + co.pointwise * u * np.abs(x - mean)) / sd + np.abs(z) * rel_sd
    y = scale * z + bias + add
    e_y = np.abs(scale) * e_z + co.pointwise * u * (np.abs(scale * z) + np.abs(bias) + np.abs(add))
    return z, y, e_y, sd, rel_sd


CURVED_FROM = 2.0**-6


CURVATURE_RTOL = 2.0**-4


def _curved(
    plan: NormalizationPlan, y: np.ndarray, e_y: np.ndarray, f: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Elements where the activation is not linear over their error interval (``f``, ``lo``,
    ``hi``: the activation at y, y - e_y and y + e_y, which the budget took): its secant over the
    interval differs from the slope over a sixteenth of it, or its slopes over the interval's
    two halves differ from each other, by more than CURVATURE_RTOL. The aggregate fit weighs each
    element's error by one slope, which holds only where the output is linear in the error; the
    per-element bound judges the others. Both tests are needed: two symmetric secants differ only
    through the third derivative, so over a bend (GELU near 0) they agree while a shift delta still
    moves the output by f'' delta^2 / 2 on the same side for every element, which the fit reads as a
    scale (OpenVINO's sequential mean, 3.5 standard deviations off at |mean| / sd = 525 on MVN2
    with a fused GELU: 2.46 times the scale bound with every element within 0.23 of its budget);
    the halves' slopes differ by f'' e there."""
    shape = np.broadcast_shapes(np.shape(f), np.shape(lo), np.shape(hi), np.shape(e_y))
    y, e_y = np.broadcast_to(y, shape), np.broadcast_to(e_y, shape)
    wide = np.isfinite(e_y) & (e_y > CURVED_FROM)
    out = np.zeros(shape, dtype=bool)
    if wide.any():
        yw, e = y[wide], e_y[wide]
        fw, low, high = (np.broadcast_to(v, shape)[wide] for v in (f, lo, hi))
        ew = e / 16.0
        act, params = plan.activation, plan.activation_params
        near = (
            model_activation.activation(act, yw + ew, params)
            - model_activation.activation(act, yw - ew, params)
        ) / (2.0 * ew)
        full = (high - low) / (2.0 * e)
        up, down = (high - fw) / e, (fw - low) / e
        out[wide] = (np.abs(full - near) > CURVATURE_RTOL * np.maximum(np.abs(full), np.abs(near))) | (
            np.abs(up - down) > CURVATURE_RTOL * np.maximum(np.abs(up), np.abs(down))
        )
    return out


class Operands(NamedTuple):
    """Scale, Bias and FusedAdd as float64 (arrays, or 1, 0 and 0 where absent)."""

    scale: Any
    bias: Any
    add: Any


def _operands(plan: NormalizationPlan, inputs: dict[str, Any]) -> Operands:
    return Operands(
        np.asarray(inputs[plan.scale], np.float64) if plan.scale else 1.0,
        np.asarray(inputs[plan.bias], np.float64) if plan.bias else 0.0,
        np.asarray(inputs[plan.fused_add], np.float64) if plan.fused_add else 0.0,
    )


@dataclass
class ElementErrors:
    """The main output's terms element by element (broadcast shapes) that its budget and the
    aggregate fit read: z, y before the activation, the slice's sqrt(var + eps) and its relative
    error, the error after the activation (unbounded where the value is undefined), the
    activation's slope over the error interval, the elements the fit leaves out
    (:class:`~dmlconform.tolerance.terms.AggregateModel`'s ``excluded``) and its bend over the
    interval (:func:`_through_activation`)."""

    z: np.ndarray
    y: np.ndarray
    sd: np.ndarray
    rel_sd: np.ndarray
    e_act: np.ndarray
    slope: np.ndarray | float
    straddles: np.ndarray | bool
    bend: np.ndarray | float


def budgets(
    desc: OperatorDesc,
    reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
) -> Budgets:
    """The allowed absolute error of every output element (see the module docstring)."""
    plan = build_plan(desc, spec)
    tol = spec.operator(desc.operator).tolerance
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    out_tensor = desc.get(plan.output, spec)
    co = coefficients(tol, out_tensor.data_type, plan.activation, tolerance)
    u = UNIT_ROUNDOFF[co.working_precision]
    ss = slice_statistics(plan, x)
    st = statistics_errors(plan, ss, co, u)
    ops = _operands(plan, inputs)
    el = element_errors(plan, x, ss, st, co, u, ops, spec)
    ref_out = np.asarray(reference[plan.output])
    main = _rounded(el.e_act, ref_out, co)
    aggregate = _aggregate_model(plan, x, ss, st, co, u, ops.scale, el, main, ref_out)
    result = {plan.output: main}
    coeffs = {plan.output: co}
    stats_budgets, stats_coeffs = statistics_output_budgets(desc, plan, ss, st, reference, spec, tolerance, u)
    result.update(stats_budgets)
    coeffs.update(stats_coeffs)
    return Budgets(result, coeffs, aggregate)


def element_errors(
    plan: NormalizationPlan,
    x: np.ndarray,
    ss: SliceStatistics,
    st: StatisticsErrors,
    co: Coefficients,
    u: float,
    ops: Operands,
    spec: Spec,
) -> ElementErrors:
    """The main output's error before its rounding, element by element (e_act of the module
    docstring, under the ceiling where the model has one), and the terms the fit reads."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        z, y, e_y, sd, rel_sd = pre_activation_error(plan, x, ss, st, co, u, *ops)
        if co.ceiling is not None:
            e_y = _under_ceiling(plan, ss, st, co, u, ops, z, e_y, sd, rel_sd)
        e_act, slope, straddles, bend = _through_activation(plan, y, e_y, co, u, spec)
        if plan.normalize_variance:
            # Epsilon 0 on a constant slice: (x - mean) / sqrt(0) is 0/0, which the docs leave
            # undefined; any value (NaN included) is accepted there.
            e_act = np.where(np.broadcast_to(ss.var + plan.epsilon, np.shape(e_act)) == 0, np.inf, e_act)
    return ElementErrors(z, y, sd, rel_sd, e_act, slope, straddles, bend)


def ceiling_deltas(
    plan: NormalizationPlan,
    ss: SliceStatistics,
    st: StatisticsErrors,
    co: Coefficients,
    u: float,
    sd: Any,
    rel_sd: Any,
) -> tuple[Any, Any]:
    """(shift, relative divisor error) per slice that the floor (the same error for a reduction
    of one block) does not have: the floor's e_y differs from e_y only in these statistics
    terms, and the ceiling caps the difference (the numpy model here, the compiled judge's terms)."""
    floor = statistics_errors(plan, ss, co, u, floor=True)
    return (st.e_mean - floor.e_mean) / sd, rel_sd - divisor_error(plan, ss, floor, co, u)


def _under_ceiling(
    plan: NormalizationPlan,
    ss: SliceStatistics,
    st: StatisticsErrors,
    co: Coefficients,
    u: float,
    ops: Operands,
    z: np.ndarray,
    e_y: np.ndarray,
    sd: np.ndarray,
    rel_sd: np.ndarray,
) -> np.ndarray:
    """e_y capped at ``co.ceiling`` times the output's own scale (:func:`output_scale`) plus
    the floor, the same error for a reduction of one block."""
    d_shift, d_rel = ceiling_deltas(plan, ss, st, co, u, sd, rel_sd)
    e_floor = e_y - np.abs(ops.scale) * (d_shift + np.abs(z) * d_rel)
    unit = 1.0 if plan.normalize_variance else np.sqrt(ss.var)
    assert co.ceiling is not None
    return np.minimum(e_y, co.ceiling * output_scale(z, unit, ops.scale, ops.bias, ops.add) + e_floor)


def _through_activation(
    plan: NormalizationPlan, y: np.ndarray, e_y: np.ndarray, co: Coefficients, u: float, spec: Spec
) -> tuple[np.ndarray, np.ndarray | float, np.ndarray | bool, np.ndarray | float]:
    """(e_act, slope, straddles, bend): the error after the fused activation (e_y without one),
    the activation's secant over the error interval, the elements whose interval holds a branch
    point or over which the activation curves (:func:`_curved`), and the bend: how far the
    activation departs from that secant at the interval's ends, |f(y + e_y) + f(y - e_y) - 2 f(y)|
    / 2 (0 where e_y is unbounded). An error within e_y moves the output by the secant times it
    plus up to the bend, of the same sign wherever the activation bends the same way: a shift of
    the mean common to a slice then puts f'' delta^2 / 2 into every element, odd in z across a
    kink of f'' (SOFTSIGN at 0), which the fit would read as a scale (one sequential loop, MVN2 +
    SOFTSIGN over 2^20 + 1 values at |mean| / sd = 107, Epsilon 100: 7.57 times the scale bound
    under the sequential and lenient models, every element within 0.13 of its budget). The fit
    allows it lined up with z at worst, scaled to the shift it finds (aggregate_from_sums)."""
    if plan.activation in (None, "ACTIVATION_IDENTITY"):
        return e_y, 1.0, False, 0.0
    f = model_activation.activation(plan.activation, y, plan.activation_params)
    lo = model_activation.activation(plan.activation, y - e_y, plan.activation_params)
    hi = model_activation.activation(plan.activation, y + e_y, plan.activation_params)
    e_act = np.maximum(np.abs(lo - f), np.abs(hi - f))
    # sensitivity of the output to y: the activation's secant over the error interval
    slope = np.where(e_y > 0, (hi - lo) / (2.0 * e_y), 1.0)
    bend = np.abs(hi + lo - 2.0 * f) / 2.0
    bend = np.where(np.isfinite(bend), bend, 0.0)
    curved = _curved(plan, y, e_y, f, lo, hi)
    del lo, hi
    jumps = branch_jumps(plan, np.broadcast_to(y, np.shape(f)), np.broadcast_to(e_y, np.shape(f)), f, spec)
    straddles = (np.asarray(jumps) > 0) | curved
    e_act = np.maximum(e_act, jumps)
    e_act = e_act + co.activation_ulps * u * np.abs(f)
    e_act = e_act + co.cancellation * u * cancellation_scale(plan, y, spec)
    return e_act, slope, straddles, bend


def _rounded(err: np.ndarray, ref: np.ndarray, co: Coefficients) -> np.ndarray:
    """An output's budget: its error (broadcast, or reshaped, to the reference's shape) with
    the output rounding."""
    shaped = np.broadcast_to(err, ref.shape) if np.ndim(err) == ref.ndim else np.reshape(err, ref.shape)
    return with_output_rounding(shaped, ref, co)


def _aggregate_model(
    plan: NormalizationPlan,
    x: np.ndarray,
    ss: SliceStatistics,
    st: StatisticsErrors,
    co: Coefficients,
    u: float,
    scale: Any,
    el: ElementErrors,
    budget: np.ndarray,
    ref_out: np.ndarray,
) -> AggregateModel:
    """What the aggregate fit of the main output reads (:class:`AggregateModel`), from its
    per-element terms and ``budget``."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        shape = np.shape(budget)
        w = np.broadcast_to(np.asarray(scale) * el.slope, shape)
        zb = np.broadcast_to(el.z, shape)
        shift_bound = st.e_mean / el.sd
        statistic_part = np.abs(w) * (shift_bound + np.abs(zb) * el.rel_sd)
        # pointwise rounding not explained by a shift and a scale: the element's budget less its
        # statistics part, plus the rounding of an implementation that folds the affine map
        # (y = (Scale / sd) x + (Bias - mean Scale / sd)), whose terms are |x| / sd and |mean| / sd
        folded = co.pointwise * u * np.abs(w) * np.broadcast_to((np.abs(x) + np.abs(ss.mean)) / el.sd, shape)
        residual = np.maximum(budget - statistic_part, budget - el.e_act) + folded
        own_scale = own_divisor_error(plan, ss, st, co, u)
    out_dtype = ref_out.dtype if ref_out.dtype.kind == "f" else np.dtype(np.float32)
    rounding = co.output_ulps * ulp_of(ref_out, out_dtype)
    return AggregateModel(
        plan,
        zb,
        w,
        shift_bound,
        np.broadcast_to(own_scale, np.shape(shift_bound)),
        residual,
        rounding,
        el.straddles,
        on_grid(plan, el.y, ss.exact, out_dtype) if rounds_back(co) else None,
        np.broadcast_to(el.bend, shape),
    )


def statistics_output_budgets(
    desc: OperatorDesc,
    plan: NormalizationPlan,
    ss: SliceStatistics,
    st: StatisticsErrors,
    reference: dict[str, np.ndarray],
    spec: Spec,
    tolerance: ToleranceOptions,
    u: float,
) -> tuple[dict[str, np.ndarray], dict[str, Coefficients]]:
    """The budgets of the mean and variance outputs (e_mean, e_var, each under the ceiling and
    with the output rounding): per slice, so the compiled judge shares this with the model."""
    tol = spec.operator(desc.operator).tolerance
    mean, var = ss.mean, ss.var
    result: dict[str, np.ndarray] = {}
    coeffs: dict[str, Coefficients] = {}
    for name, err, own_scale, floor_err in (
        (plan.mean_output, st.e_mean, np.abs(mean) + np.sqrt(var), "e_mean"),
        (plan.variance_output, st.e_var, var, "e_var"),
    ):
        if name and name in reference:
            c = coefficients(tol, desc.get(name, spec).data_type, None, tolerance)
            if c.ceiling is not None:
                fl = getattr(statistics_errors(plan, ss, c, u, floor=True), floor_err)
                if floor_err == "e_var":
                    # deviations are taken around the computed mean: its error squared is in any
                    # variance, the only error there is on a constant slice (second order)
                    fl = fl + st.e_mean**2
                err = np.minimum(err, c.ceiling * own_scale + fl)
            shape = np.shape(reference[name])
            result[name] = with_output_rounding(np.reshape(err, shape), np.asarray(reference[name]), c)
            coeffs[name] = c
    return result, coeffs
