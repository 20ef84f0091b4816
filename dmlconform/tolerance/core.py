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
(n - 1)/4):

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

Which accuracy the suite requires (the spec's ``required`` model, ``strict``): that of blocked
summation -- any order within blocks of ``block`` (256) terms, pairwise across blocks -- as GPU
reductions, numpy and PyTorch sum. Every growth term above is at most its value for one block
plus log2(n / block) (:func:`capped_growth`): the terms only a sequential loop needs are bounded
by the block, and the error grows like log2(n) beyond it. On top of that no element's budget
exceeds ``ceiling`` (2^-10 for FLOAT32, 2^-6 for FLOAT16) times the output's own scale
(:func:`output_scale`) plus the model's budget for one block, so an output off by 2^-8 of itself
fails at every n. The ``lenient`` model (uncapped growth, no ceiling) is what sequential float32
loops need at long reductions; a backend gets it only by asking (``--tolerance model=lenient`` or
its ``tolerance`` attribute), and the report says so.

Beside the per-element bound, :func:`aggregate_check` judges each slice's errors together: a
sound implementation's errors share the slice's mean and variance errors, so they fit a shift
and a scale of z (bounded by e_mean and rel_sd) plus pointwise noise (bounded in RMS). A
systematic error fails there even where every element is within its own budget.

Calibration (tests/test_tolerance.py, tests/test_long_reductions.py): numpy float32, a careful
two-pass, PyTorch and ONNX Runtime (its blocked path at n >= 16384) pass at n = 2 .. 2^24 + 1
with at most ~0.26 of the budget; results 6 ULP off reach 0.93 of it on centred batch-norm data
and 12 ULP off 1.85x; an output 2^-8 too large fails at every n (1.7-5x at n = 2^22..2^24 on
|mean|/std ~ 1e3 data, 10^3 on centred data); statistics from sequential float32 sums fail from
n ~ 2^20 (70-4000x), float16 accumulation at any long reduction.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dmlconform.generation.data import resolve_branch_points, to_slices
from dmlconform.reference import more as model_activation
from dmlconform.spec.desc import OperatorDesc
from dmlconform.spec.expr import evaluate
from dmlconform.spec.model import Spec, load_spec
from dmlconform.spec.semantics import Plan, make_plan

UNIT_ROUNDOFF = {"FLOAT32": 2.0**-24, "FLOAT16": 2.0**-11, "FLOAT64": 2.0**-53}
_INT_VIEW = {np.dtype(np.float16): np.int16, np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}

DEFAULT_COEFFICIENTS = {
    "mean": 2.0,
    "variance": 2.0,
    "pointwise": 4.0,
    "output_ulps": 1.0,
    "cancellation": 8.0,
}


# ---------------------------------------------------------------------------------------------
# Metrics


def ordinal(values: np.ndarray) -> np.ndarray:
    """Map floats to a monotonic integer line (int64): adjacent floats differ by 1, -0 == +0.

    The bit pattern read as a signed integer is monotonic for non-negative floats; negative ones
    are mirrored (``MIN - bits``) so the line is monotonic across zero too."""
    values = np.asarray(values)
    itype = _INT_VIEW.get(values.dtype)
    if itype is None:
        raise TypeError(f"no ULP metric for dtype {values.dtype}")
    bits = np.ascontiguousarray(values).view(itype).astype(np.int64)
    lowest = np.int64(np.iinfo(itype).min)
    return np.where(bits < 0, lowest - bits, bits)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many representable values of ``a``'s dtype lie between ``a`` and ``b`` (``b`` is
    rounded to that dtype first). NaN against NaN is 0; NaN against a number is +inf."""
    a = np.asarray(a)
    b = np.asarray(b).astype(a.dtype)
    dist = np.abs(ordinal(a) - ordinal(b)).astype(np.float64)
    na, nb = np.isnan(a), np.isnan(b)
    dist[na & nb] = 0.0
    dist[na ^ nb] = np.inf
    return dist


def ulp_of(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The spacing of ``dtype`` at |values| (rounded to ``dtype``), as float64."""
    v = np.abs(np.asarray(values, dtype=np.float64)).astype(dtype)
    with np.errstate(invalid="ignore"):
        return np.spacing(v).astype(np.float64)


# ---------------------------------------------------------------------------------------------
# Budget


@dataclass(frozen=True)
class Coefficients:
    """The spec's coefficients for one data type, after overrides."""

    working_precision: str
    mean: float
    variance: float
    pointwise: float
    output_ulps: float
    activation_ulps: float
    cancellation: float = 8.0
    mean_growth: str = "sqrt"
    spread_growth: str = "sqrt_log2"
    model: str = "strict"
    growth_cap: str = "blocked"
    block: float = 256.0
    ceiling: float | None = None
    aggregate_shift: float = 1.0
    aggregate_scale: float = 1.0
    aggregate_residual: float = 1.0
    ulp_scale: float = 1.0
    atol: float = 0.0
    max_ulp: float | None = None


TEXT_COEFFICIENTS = ("working_precision", "mean_growth", "spread_growth", "model", "growth_cap")


def coefficients(
    op_tolerance: dict[str, Any], data_type: str, activation: str | None, overrides: dict[str, Any] | None
) -> Coefficients:
    """Coefficients for ``data_type`` from the operator's ``tolerance:`` section, overridden by
    ``overrides`` (any coefficient name, or ``ulp_scale``, ``atol``, ``max_ulp``).

    ``model`` (an override or the spec's ``required``) picks one of the section's ``models``:
    ``strict``, what the suite requires, or ``lenient``, which a backend must ask for by name
    (it admits summation orders whose error grows faster than pairwise summation's)."""
    overrides = dict(overrides or {})
    per_type: dict[str, Any] = dict(DEFAULT_COEFFICIENTS)
    per_type.update((op_tolerance.get("coefficients") or {}).get(data_type, {}))
    model = str(overrides.pop("model", op_tolerance.get("required", "strict")))
    models = op_tolerance.get("models") or {"strict": {}}
    if model not in models:
        raise ValueError(f"unknown tolerance model {model!r} (known: {', '.join(models)})")
    per_type.update(models[model] or {})
    acts = op_tolerance.get("activation_ulps") or {}
    act_ulps = float(acts.get(activation or "", acts.get("default", 4.0))) if activation else 0.0
    working = (op_tolerance.get("working_precision") or {}).get(data_type, "FLOAT32")
    values: dict[str, Any] = {"working_precision": working, "activation_ulps": act_ulps, "model": model}
    for key, value in per_type.items():
        if key in Coefficients.__dataclass_fields__:
            values[key] = value
    for key, value in overrides.items():
        if key not in Coefficients.__dataclass_fields__:
            raise ValueError(
                f"unknown tolerance override {key!r} (known: {', '.join(Coefficients.__dataclass_fields__)})"
            )
        values[key] = value
    for key, value in values.items():
        if value is not None and key not in TEXT_COEFFICIENTS:
            values[key] = float(value)
        elif value is not None:
            values[key] = str(value)
    return Coefficients(**values)


@dataclass
class Budgets:
    """Per-element absolute budgets for every output member (float64 arrays of their Sizes),
    and for the main output the terms its aggregate check needs (:class:`AggregateModel`)."""

    by_member: dict[str, np.ndarray]
    coefficients: dict[str, Coefficients]
    aggregate: AggregateModel | None = None


@dataclass
class AggregateModel:
    """What a sound implementation's error in the main output looks like, slice by slice.

    Every element of a slice shares that slice's mean and variance, so a sound implementation's
    errors are correlated by construction: e_i ~ w_i (a + b z_i) + r_i, with a the mean's error
    in units of sqrt(var + eps) (a shift), b the relative error of sqrt(var + eps) (a scale), w_i
    the output's sensitivity to z at element i (Scale times the activation's slope) and r_i
    pointwise rounding. ``shift`` and ``scale`` bound |a| and |b| per slice (keepdims shape):
    the same statistics errors the per-element budget is built from. ``residual`` bounds |r_i|
    per element: the element's budget less its statistics part. ``rounding`` is the part of it
    that rounding to the output type contributes, which need not be random: on lattice data
    (FLOAT16 inputs, few-valued slices) a sub-ULP shift flips whole binades of elements at once,
    a pattern that correlates with z."""

    plan: Plan
    z: np.ndarray
    w: np.ndarray
    shift: np.ndarray
    scale: np.ndarray
    residual: np.ndarray
    rounding: np.ndarray
    #: elements the fit leaves out: their error interval holds a branch point of the activation,
    #: where the output's sensitivity to z is no slope (a jump or a kink), or is so wide that the
    #: activation curves over it (an ill-conditioned slice); the per-element bound judges them
    excluded: np.ndarray | bool = False


def growth(kind: str, n: int) -> float:
    """How a float32 sum's error grows with its length n (probabilistic, Higham & Mary 2019):
    ``sqrt``: recursive summation, sqrt(n) + 1; ``sqrt_log2``: pairwise/blocked, sqrt(log2 n) + 1;
    ``log2``: the worst case of pairwise summation, log2(n) + 1."""
    if kind == "sqrt":
        return math.sqrt(n) + 1.0
    if kind == "sqrt_log2":
        return math.sqrt(math.log2(max(n, 1))) + 1.0
    if kind == "log2":
        return math.log2(max(n, 1)) + 1.0
    raise ValueError(f"unknown growth {kind!r} (known: sqrt, sqrt_log2, log2)")


def correlated_growth(n: int, abs_mean: np.ndarray, std: np.ndarray, u: float) -> np.ndarray:
    """Extra growth of the |mean| part of a float32 sum's error where its rounding errors are
    *not* random: on a constant (or nearly constant) slice every partial sum k*mean rounds the
    same way, so a recursive sum errs by up to ~n/4 u |mean| (measured: numpy's outer-axis
    reductions, ONNX Runtime's ReduceMean), far above the probabilistic sqrt(n) u |mean|.

    Step k of a sum rounds at the spacing of its partial sum, <= 2u * k|mean|. Its error is
    random only while the data's spread reaches below that spacing, i.e. for k < k0 =
    std / (2u |mean|); each later step gets the deterministic bound u * k|mean|. Summed and
    divided by n: u |mean| (n - k0^2/n) / 2, which with the spec's c_mean = 2 means
    g_corr = (n - 1 - k0^2/n) / 4 (about n/4 on a constant slice: c_mean * g_corr ~ n/2, the
    tight deterministic bound of any summation order of n equal terms; 0 for n = 1). Zero whenever n <= k0: on
    standard-normal data, and at |mean|/std = 1e3 up to n ~ 8000, the budget is unchanged."""
    abs_mean = np.asarray(abs_mean, dtype=np.float64)
    std = np.asarray(std, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        k0 = np.where(abs_mean > 0, std / (2.0 * u * abs_mean), np.inf)
    k0 = np.minimum(k0, float(n))
    return np.maximum(0.0, (n - 1) - k0 * k0 / n) / 4.0  # n - 1 additions: a 1-element mean is exact


def repetition(plan: Plan, x: np.ndarray) -> np.ndarray:
    """r per slice: n over the number of distinct values in it, i.e. how often each value is a
    summand, on average. A float32 sum's rounding errors are random only while its summands
    are: identical summands round alike (broadcast inputs, whose zero strides repeat each
    element; quantized or two-valued data), so its errors add up in correlated groups and its
    |mean| part grows like sqrt(n r) rather than sqrt(n) (measured: recursive float32 sums of
    2- to 50-level data, 1.5-10x over the sqrt(n) allowance; ONNX Runtime on a broadcast
    input). Returned in the keepdims shape of the slice statistics; 1 where all values differ."""
    slices = np.sort(to_slices(x, plan.axes), axis=1)
    distinct = 1 + np.count_nonzero(np.diff(slices, axis=1), axis=1)
    stat_shape = [1 if i in plan.axes else d for i, d in enumerate(x.shape)]
    return (slices.shape[1] / distinct).reshape(stat_shape)


def repeated_growth(n: int, r: np.ndarray) -> np.ndarray:
    """The growth of a float32 sum of n terms in correlated groups of r (:func:`repetition`):
    sqrt(n r) + 1, capped at the deterministic (n - 1)/4 + 1 (c_mean * (n - 1)/4 u |mean| is
    the n/2 u |mean| bound of any summation order); 0 where r = 1, adding nothing."""
    return np.where(r > 1.0, np.minimum(np.sqrt(n * r), (n - 1) / 4.0) + 1.0, 0.0)


def _branch_jumps(
    plan: Plan, y: np.ndarray, e_y: np.ndarray, f: np.ndarray, spec: Spec
) -> np.ndarray | float:
    """max |f(b+-) - f(y)| over the activation's branch points b (spec ``branch_points``) that
    lie within [y - e_y, y + e_y]: at a discontinuity (SHRINK with Bias != Threshold,
    THRESHOLDED_RELU) the supremum over the interval is a one-sided limit at b, not an endpoint."""
    act = spec.activations.get(plan.activation) if plan.activation else None
    if act is None or not act.branch_points:
        return 0.0
    out: np.ndarray | float = 0.0
    # plan.activation_params holds every parameter (defaults filled) as the C FLOAT it is passed as
    for b in resolve_branch_points(act, plan.activation_params):
        inside = np.abs(y - b) <= e_y
        sides = model_activation.activation(
            plan.activation,
            np.array([np.nextafter(b, -np.inf), b, np.nextafter(b, np.inf)]),
            plan.activation_params,
        )
        jump = np.max(np.abs(sides[:, None] - np.ravel(f)[None, :]), axis=0).reshape(np.shape(f))
        out = np.maximum(out, np.where(inside, jump, 0.0))
    return out


CURVED_FROM = 2.0**-6
"""Error intervals narrower than this (in pre-activation units) are taken as linear: every
activation's curvature scale is about 1 there (or its parameters', which are O(1) in the docs'
examples), so only ill-conditioned slices (a constant slice under a tiny Epsilon) reach it."""
CURVATURE_RTOL = 2.0**-4


def _curved(plan: Plan, y: np.ndarray, e_y: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """Elements where the activation is not linear over their error interval: its secant over
    the interval differs from the slope over a sixteenth of it by more than CURVATURE_RTOL. The
    aggregate fit weighs each element's error by one slope, which holds only where the output
    is linear in the error; the per-element bound judges the others."""
    shape = np.shape(slope)
    y, e_y = np.broadcast_to(y, shape), np.broadcast_to(e_y, shape)
    wide = np.isfinite(e_y) & (e_y > CURVED_FROM)
    out = np.zeros(shape, dtype=bool)
    if wide.any():
        yw, ew = y[wide], e_y[wide] / 16.0
        hi = model_activation.activation(plan.activation, yw + ew, plan.activation_params)
        lo = model_activation.activation(plan.activation, yw - ew, plan.activation_params)
        near = (hi - lo) / (2.0 * ew)
        full = np.broadcast_to(slope, shape)[wide]
        out[wide] = np.abs(full - near) > CURVATURE_RTOL * np.maximum(np.abs(full), np.abs(near))
    return out


def cancellation_scale(plan: Plan, y: np.ndarray, spec: Spec) -> np.ndarray | float:
    """C(y): the fused activation's ``cancellation`` expression (spec/common/activations.yaml),
    the magnitude of the terms a floating-point evaluation of it combines. An implementation of
    the documented formula errs by a few u times C(y) even where f(y) is tiny (GELU's 1 + erf
    for y << 0), which no relative (ULP) allowance covers. 0 with no activation or none given."""
    act = spec.activations.get(plan.activation) if plan.activation else None
    if act is None or act.cancellation is None:
        return 0.0
    return np.abs(evaluate(act.cancellation, x=y, **plan.activation_params))


def _slice_stats(plan: Plan, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


@dataclass
class StatisticsErrors:
    """The errors a sound implementation may make in a slice's statistics: ``e_mean`` in the
    mean, ``e_var`` in the (population) variance (keepdims shape)."""

    e_mean: np.ndarray
    e_var: np.ndarray


def slice_statistics(plan: Plan, x: np.ndarray) -> SliceStatistics:
    mean, var, squares_std = _slice_stats(plan, x)
    return SliceStatistics(mean, var, squares_std, repetition(plan, x))


@dataclass
class Growth:
    """How much the rounding errors of a slice's sums grow, per term (see the module docstring)."""

    mean: np.ndarray  # the |mean| part of the mean's sum (random, repeated and correlated rounding)
    spread: np.ndarray  # the spread part of both sums
    squares: np.ndarray  # the sum of the squared deviations


def sum_growth(m: int, ss: SliceStatistics, co: Coefficients, u: float) -> Growth:
    """The growth terms of a sum of ``m`` of the slice's terms, each summed in any order.
    Repeated summands make any sum's rounding correlated: the mean's and the squares' alike (the
    squares of a slice have no more distinct values than the slice)."""
    r = np.minimum(ss.repetition, m)  # a run of m terms repeats each value at most m times
    g_rep = repeated_growth(m, r)
    g_mean = np.maximum(growth(co.mean_growth, m), g_rep)
    g_corr = correlated_growth(m, np.abs(ss.mean), np.sqrt(ss.var), u)
    g_corr_var = correlated_growth(m, ss.var, ss.squares_std, u)
    return Growth(g_mean + g_corr, np.maximum(growth(co.spread_growth, m), g_rep), g_mean + g_corr_var)


def block_length(co: Coefficients, n: int) -> int:
    """The block of the strict model's blocked summation, for a reduction of n terms."""
    return int(min(n, max(co.block, 1.0)))


def cap(full: Any, one_block: Any, co: Coefficients, n: int) -> Any:
    """A growth term under the model's cap.

    ``growth_cap: blocked`` (the strict model) is the accuracy of blocked summation: any order
    within blocks of ``block`` terms (a sequential loop included), pairwise across blocks, so
    a term is at most its value for one block (``one_block``) plus log2(n / block). Terms that
    only a sequential loop needs (sqrt(n), repeated values, correlated rounding) are thus
    bounded by the block's, and the error grows like log2(n) beyond it. ``log2``: pairwise
    summation alone; ``none`` (the lenient model): the term as it is, growing with n."""
    if co.growth_cap in ("none", "") or n <= 1:
        return full
    if co.growth_cap == "blocked":
        return np.minimum(full, one_block + math.log2(n / block_length(co, n)))
    return np.minimum(full, growth(co.growth_cap, n))


def capped_growth(n: int, ss: SliceStatistics, co: Coefficients, u: float) -> Growth:
    """The growth terms of a slice's sums under the model's cap (:func:`cap`)."""
    full = sum_growth(n, ss, co, u)
    blk = sum_growth(block_length(co, n), ss, co, u) if co.growth_cap == "blocked" else full
    return Growth(
        cap(full.mean, blk.mean, co, n),
        cap(full.spread, blk.spread, co, n),
        cap(full.squares, blk.squares, co, n),
    )


def statistics_errors(
    plan: Plan, ss: SliceStatistics, co: Coefficients, u: float, floor: bool = False
) -> StatisticsErrors:
    """e_mean and e_var of the module docstring, each growth term capped by the model.

    ``floor``: the same for a reduction of at most one block (``block`` terms), the errors
    that do not grow with n: the floor under the ceiling (:func:`output_scale`), which bounds
    only what accumulates beyond a block."""
    mean, var = ss.mean, ss.var
    n = plan.reduction_length
    g = capped_growth(block_length(co, n) if floor else n, ss, co, u)
    e_mean = co.mean * u * (g.mean * np.abs(mean) + g.spread * np.sqrt(var))
    # The variance is the mean of the squares (x - mean)^2: positive terms, so their sum grows like
    # the mean's |mean| part (a sound implementation may add them up recursively: a sequential
    # float32 loop errs ~35 u at n ~ 4000, past a pairwise allowance), correlated where they are
    # nearly equal (two-valued slices). An implementation may also update a running mean as it
    # goes (Welford; PyTorch's CUDA batch norm): each deviation then carries that mean's rounding,
    # u |mean|, a relative error of ~kappa u, kappa = |mean| / std (Chan, Golub & LeVeque 1983;
    # measured in float32: <= 2.1 kappa u for n = 2..2048): g_var * u * kappa * var =
    # g_var * u * |mean| * std.
    e_var = co.variance * u * (g.squares * var + g.spread * np.abs(mean) * np.sqrt(var)) + e_mean**2
    return StatisticsErrors(e_mean, e_var)


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
    plan: Plan, ss: SliceStatistics, st: StatisticsErrors, co: Coefficients, u: float
) -> np.ndarray:
    """The relative error of sqrt(var + eps): half the variance's, plus a few roundings (0 when
    the variance is not normalized: the divisor is 1)."""
    if not plan.normalize_variance:
        return np.zeros_like(ss.var)
    return st.e_var / (2.0 * (ss.var + plan.epsilon)) + co.pointwise * u


def pre_activation_error(
    plan: Plan,
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


def with_output_rounding(err: Any, ref: np.ndarray, co: Coefficients) -> np.ndarray:
    """``err`` plus the rounding of the result to the output type, scaled and offset by the
    overrides. The implementation rounds a value that may lie anywhere within ``err`` of the
    reference, so the rounding is output_ulps ULP at |reference| + err: at a reference of 0 (a
    cancellation) an ULP of the reference itself would be a denormal's. Unbounded stays
    unbounded (0/0 elements, whose reference and ULP are NaN)."""
    ref = np.asarray(ref)
    dtype = ref.dtype if ref.dtype.kind == "f" else np.dtype(np.float32)
    shaped = np.broadcast_to(np.asarray(err, dtype=np.float64), ref.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        reach = np.minimum(np.abs(ref.astype(np.float64)) + shaped, float(np.finfo(dtype).max))
        out = co.ulp_scale * (shaped + co.output_ulps * ulp_of(reach, dtype)) + co.atol
    return np.where(np.isposinf(shaped), np.inf, np.asarray(out, dtype=np.float64))


def budgets(
    desc: OperatorDesc,
    reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec | None = None,
    overrides: dict[str, Any] | None = None,
) -> Budgets:
    """The allowed absolute error of every output element (see the module docstring)."""
    spec = spec or load_spec()
    plan = make_plan(desc, spec)
    tol = spec.operator(desc.operator).tolerance
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    out_tensor = desc.get(plan.output, spec)
    co = coefficients(tol, out_tensor.data_type, plan.activation, overrides)
    u = UNIT_ROUNDOFF[co.working_precision]
    ss = slice_statistics(plan, x)
    st = statistics_errors(plan, ss, co, u)
    mean, var, e_mean = ss.mean, ss.var, st.e_mean
    scale = np.asarray(inputs[plan.scale], np.float64) if plan.scale else 1.0
    bias = np.asarray(inputs[plan.bias], np.float64) if plan.bias else 0.0
    add = np.asarray(inputs[plan.fused_add], np.float64) if plan.fused_add else 0.0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        z, y, e_y, sd, rel_sd = pre_activation_error(plan, x, ss, st, co, u, scale, bias, add)
        if co.ceiling is not None:
            # the floor's e_y differs from e_y only in its statistics terms, which are per slice
            floor = statistics_errors(plan, ss, co, u, floor=True)
            d_shift = (e_mean - floor.e_mean) / sd
            d_rel = rel_sd - divisor_error(plan, ss, floor, co, u)
            e_floor = e_y - np.abs(scale) * (d_shift + np.abs(z) * d_rel)
            unit = 1.0 if plan.normalize_variance else np.sqrt(var)
            e_y = np.minimum(e_y, co.ceiling * output_scale(z, unit, scale, bias, add) + e_floor)
            del e_floor
        straddles: np.ndarray | bool = False  # elements whose error interval holds a branch point
        if plan.activation in (None, "ACTIVATION_IDENTITY"):
            f, e_act, slope = y, e_y, 1.0
        else:
            f = model_activation.activation(plan.activation, y, plan.activation_params)
            lo = model_activation.activation(plan.activation, y - e_y, plan.activation_params)
            hi = model_activation.activation(plan.activation, y + e_y, plan.activation_params)
            e_act = np.maximum(np.abs(lo - f), np.abs(hi - f))
            # sensitivity of the output to y: the activation's secant over the error interval
            slope = np.where(e_y > 0, (hi - lo) / (2.0 * e_y), 1.0)
            del lo, hi
            jumps = _branch_jumps(
                plan, np.broadcast_to(y, np.shape(f)), np.broadcast_to(e_y, np.shape(f)), f, spec
            )
            straddles = (np.asarray(jumps) > 0) | _curved(plan, y, e_y, slope)
            e_act = np.maximum(e_act, jumps)
            e_act = e_act + co.activation_ulps * u * np.abs(f)
            e_act = e_act + co.cancellation * u * cancellation_scale(plan, y, spec)
        if plan.normalize_variance:
            # Epsilon 0 on a constant slice: (x - mean) / sqrt(0) is 0/0, which the docs leave
            # undefined; any value (NaN included) is accepted there.
            e_act = np.where(np.broadcast_to(var + plan.epsilon, np.shape(e_act)) == 0, np.inf, e_act)

    def total(err: np.ndarray, member: str, tensor_coeffs: Coefficients) -> np.ndarray:
        ref = np.asarray(reference[member])
        shaped = np.broadcast_to(err, ref.shape) if np.ndim(err) == ref.ndim else np.reshape(err, ref.shape)
        return with_output_rounding(shaped, ref, tensor_coeffs)

    result = {plan.output: total(e_act, plan.output, co)}
    coeffs = {plan.output: co}
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        shape = np.shape(result[plan.output])
        w = np.broadcast_to(np.asarray(scale) * slope, shape)
        zb = np.broadcast_to(z, shape)
        shift_bound = e_mean / sd
        statistic_part = np.abs(w) * (shift_bound + np.abs(zb) * rel_sd)
        # pointwise rounding not explained by a shift and a scale: the element's budget less its
        # statistics part, plus the rounding of an implementation that folds the affine map
        # (y = (Scale / sd) x + (Bias - mean Scale / sd)), whose terms are |x| / sd and |mean| / sd
        folded = co.pointwise * u * np.abs(w) * np.broadcast_to((np.abs(x) + np.abs(mean)) / sd, shape)
        residual = np.maximum(result[plan.output] - statistic_part, result[plan.output] - e_act) + folded
    ref_out = np.asarray(reference[plan.output])
    rounding = co.output_ulps * ulp_of(
        ref_out, ref_out.dtype if ref_out.dtype.kind == "f" else np.dtype(np.float32)
    )
    aggregate = AggregateModel(
        plan,
        zb,
        w,
        shift_bound,
        np.broadcast_to(rel_sd, np.shape(shift_bound)),
        residual,
        rounding,
        straddles,
    )
    stats_budgets, stats_coeffs = statistics_output_budgets(desc, plan, ss, st, reference, spec, overrides, u)
    result.update(stats_budgets)
    coeffs.update(stats_coeffs)
    return Budgets(result, coeffs, aggregate)


def statistics_output_budgets(
    desc: OperatorDesc,
    plan: Plan,
    ss: SliceStatistics,
    st: StatisticsErrors,
    reference: dict[str, np.ndarray],
    spec: Spec,
    overrides: dict[str, Any] | None,
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
            c = coefficients(tol, desc.get(name, spec).data_type, None, overrides)
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


# ---------------------------------------------------------------------------------------------
# Aggregate check


FIT_SUMS = ("aa", "bb", "cc", "dd", "ee", "count", "d2", "rb2", "round2")
"""The per-slice sums the aggregate check needs, in this order (the compiled judge accumulates
the same ones in one pass): sum w^2, w wz, wz^2, w d, wz d (wz = w z), the count of w != 0,
sum d^2, the residual bounds' squares and the output roundings' squares, over usable elements."""


def fit_sums(
    w: np.ndarray, z: np.ndarray, d: np.ndarray, r_bound: np.ndarray, rounding: np.ndarray
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
        ]
    )


def aggregate_from_sums(
    sums: np.ndarray, shift: np.ndarray, scale: np.ndarray, co: Coefficients
) -> dict[str, float]:
    """The aggregate figures from each slice's :data:`FIT_SUMS` (``sums[i]`` per slice) and its
    shift and scale bounds (the mean's error in units of sqrt(var + eps), the divisor's relative
    error): per slice the least-squares a, b of d ~ w (a + b z) (rows where z does not vary fit
    a alone), the residual's RMS from the sums (sum (d - w(a + b z))^2 expanded: its rounding is
    ~1e-16 of sum d^2, far below any bound that matters), and each figure over its bound."""
    aa, bb, cc, dd, ee, count, d2, rb2, round2 = sums
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
        noise = 4 * rms_bound
        shift_bound = co.ulp_scale * co.aggregate_shift * (shift + (noise + aligned) * np.sqrt(var_a))
        scale_bound = co.ulp_scale * co.aggregate_scale * (scale + (noise + aligned) * np.sqrt(var_b))
        return {
            "shift": _worst(np.abs(a), shift_bound),
            "scale": _worst(np.abs(b), scale_bound),
            "residual": _worst(rms_r, co.ulp_scale * co.aggregate_residual * rms_bound),
        }


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
        for v in (model.w, model.z, d, model.residual, model.rounding)
    ]
    with np.errstate(invalid="ignore", over="ignore"):
        sums = fit_sums(*rows)
    shift = _per_row(model.shift, model.plan, got.shape)
    scale = _per_row(model.scale, model.plan, got.shape)
    return aggregate_from_sums(sums, shift, scale, co)


def _per_row(stat: np.ndarray, plan: Plan, shape: tuple[int, ...]) -> np.ndarray:
    """A keepdims statistic as one value per slice, in :func:`to_slices` row order."""
    kept = [1 if i in plan.axes else s for i, s in enumerate(shape)]
    return to_slices(np.ascontiguousarray(np.broadcast_to(stat, kept)), plan.axes)[:, 0]


def _worst(value: np.ndarray, bound: np.ndarray) -> float:
    ratio = np.where(value == 0, 0.0, value / bound)
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    return float(ratio.max()) if ratio.size else 0.0


# ---------------------------------------------------------------------------------------------
# Comparison


@dataclass
class OutputComparison:
    """One output member: its worst element (largest error / budget) and summary metrics."""

    member: str
    passed: bool
    max_ulp: float
    max_abs: float
    worst_index: tuple[int, ...] | None = None
    backend_value: float | None = None
    reference_value: float | None = None
    budget: float | None = None
    budget_ulp: float | None = None
    ratio: float = 0.0
    failing_elements: int = 0
    message: str = ""
    aggregate: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["worst_index"] = list(self.worst_index) if self.worst_index is not None else None
        return d


@dataclass
class Comparison:
    """The verdict on one case: ``passed`` and, per output member, where the error is worst.

    ``nonfinite_inputs``: the inputs hold NaN or Inf; DirectML leaves that behaviour undefined,
    so the case is reported as information and always passes."""

    passed: bool
    outputs: dict[str, OutputComparison] = field(default_factory=dict)
    nonfinite_inputs: bool = False
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "nonfinite_inputs": self.nonfinite_inputs,
            "message": self.message,
            "outputs": {k: v.to_dict() for k, v in self.outputs.items()},
        }


def overflowed_alike(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Where the reference overflowed to +-inf, the backend's value is right if it is that inf
    or the largest finite value of that sign (a saturating conversion); anything else there,
    NaN included, is an error of unbounded size."""
    big = float(np.finfo(ref.dtype).max) if ref.dtype.kind == "f" else np.inf
    with np.errstate(invalid="ignore"):
        return np.isinf(ref) & (np.sign(got) == np.sign(ref)) & (np.abs(got.astype(np.float64)) >= big)


def _compare_member(
    member: str, got: Any, ref: np.ndarray, budget: np.ndarray, co: Coefficients
) -> OutputComparison:
    ref = np.asarray(ref)
    if got is None:
        return OutputComparison(
            member, False, math.inf, math.inf, message=f"{member}: backend returned no output"
        )
    got = np.asarray(got)
    if got.shape != ref.shape:
        return OutputComparison(
            member,
            False,
            math.inf,
            math.inf,
            message=f"{member}: shape {list(got.shape)}, expected {list(ref.shape)}",
        )
    got_t = got.astype(ref.dtype)
    ulps = ulp_distance(got_t, ref)
    with np.errstate(invalid="ignore"):
        err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    same = (got_t == ref) | (np.isnan(got_t) & np.isnan(ref)) | overflowed_alike(got_t, ref)
    err = np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(err == 0, 0.0, err / budget)
    # an element with an unbounded budget (0/0, undefined) accepts anything: never the worst;
    # one whose reference overflowed to inf is not unbounded: only that overflow is right
    unbounded = np.isposinf(budget) & ~np.isinf(ref)
    ratio = np.where(unbounded, 0.0, np.where(np.isnan(ratio), np.inf, ratio))
    budget = np.where(np.isinf(ref) & ~same, 0.0, budget)
    if co.max_ulp is not None:  # a fixed ULP budget replaces the analysis
        with np.errstate(divide="ignore"):
            ratio = np.where(ulps == 0, 0.0, ulps / max(co.max_ulp, 1e-300))
        failing = ulps > co.max_ulp
    else:
        failing = err > budget
    if not ratio.size:
        return OutputComparison(member, True, 0.0, 0.0, message=f"{member}: ok; no elements")
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
    return member_comparison(
        member,
        failing=int(failing.sum()),
        max_ulp=float(ulps.max()),
        max_abs=float(err.max()),
        index=idx,
        got=float(got[idx]),
        ref=float(ref[idx]),
        budget=float(budget[idx]),
        ratio=float(ratio[idx]),
        co=co,
        dtype=ref.dtype,
    )


def _fmt(v: float, digits: int = 3) -> str:
    return f"{v:.{digits}g}"


def member_comparison(
    member: str,
    *,
    failing: int,
    max_ulp: float,
    max_abs: float,
    index: tuple[int, ...],
    got: float,
    ref: float,
    budget: float,
    ratio: float,
    co: Coefficients,
    dtype: np.dtype,
) -> OutputComparison:
    """One member's verdict from its figures (the numpy model's and the compiled judge's alike).

    The message says what decided: the worst element (largest error over its own budget), its
    error and its budget in the unit that decided (absolute error for the model, ULP under a
    fixed ``max_ulp``), and how they compare. A budget in ULP is given only where it means
    something: not at a reference of 0 or a subnormal, whose ULP is a denormal's."""
    dtype = np.dtype(dtype) if np.dtype(dtype).kind == "f" else np.dtype(np.float32)
    ulp_here = float(ulp_of(np.asarray([ref]), dtype)[0])
    if co.max_ulp is not None:
        budget = float(co.max_ulp * ulp_here)
        budget_ulp: float | None = float(co.max_ulp)
    else:
        meaningful = math.isfinite(budget) and math.isfinite(ref) and abs(ref) >= float(np.finfo(dtype).tiny)
        budget_ulp = budget / ulp_here if meaningful else None
    out = OutputComparison(
        member=member,
        passed=failing == 0,
        max_ulp=max_ulp,
        max_abs=max_abs,
        failing_elements=failing,
        worst_index=index,
        backend_value=got,
        reference_value=ref,
        budget=budget,
        budget_ulp=budget_ulp,
        ratio=ratio,
    )
    out.message = (
        f"{member}: {'ok' if out.passed else f'FAIL ({failing} elements over budget)'}; "
        + worst_element(out, co)
    )
    return out


def worst_element(out: OutputComparison, co: Coefficients) -> str:
    """``worst at [i]: got g, want r; <error> <relation> <budget> (<ratio> of it)`` in the unit
    that decided; an element whose budget is unbounded (undefined by the docs) says so."""
    where = f"worst at {list(out.worst_index or ())}: got {out.backend_value!r}, want {out.reference_value!r}"
    if co.max_ulp is not None:
        err_ulp = float(
            ulp_distance(np.asarray([out.backend_value], np.float64), np.asarray([out.reference_value]))[0]
        )
        rel = ">" if err_ulp > co.max_ulp else "<="
        return f"{where}; {_fmt(err_ulp, 4)} ULP {rel} max_ulp {_fmt(co.max_ulp, 4)}"
    err = abs(out.backend_value - out.reference_value) if out.backend_value != out.reference_value else 0.0
    if math.isnan(out.backend_value) and math.isnan(out.reference_value):
        err = 0.0
    elif math.isnan(err):
        err = math.inf
    if math.isinf(out.budget or 0.0) and (out.budget or 0.0) > 0:
        return f"{where}; abs error {_fmt(err)}, budget unbounded (the docs leave the value undefined)"
    if out.budget is None or math.isnan(out.budget):
        return f"{where}; abs error {_fmt(err)}, no budget (the reference is not a number)"
    rel = ">" if err > out.budget else "<="
    return f"{where}; abs error {_fmt(err)} {rel} budget {_fmt(out.budget)} ({_fmt(out.ratio)} of it)"


def _judge_aggregate(
    b: Budgets,
    outputs: dict[str, OutputComparison],
    outputs_backend: dict[str, Any],
    outputs_reference: dict[str, np.ndarray],
) -> None:
    """Add the aggregate figures to the main output's comparison; over 1 fails it."""
    assert b.aggregate is not None
    name = b.aggregate.plan.output
    main, co = outputs.get(name), b.coefficients.get(name)
    if main is None or main.worst_index is None or co is None or co.max_ulp is not None:
        return
    got = np.asarray(outputs_backend.get(name))
    main.aggregate = aggregate_check(
        b.aggregate, got, np.asarray(outputs_reference[name]), b.by_member[name], co
    )
    _aggregate_verdict(main)


def _aggregate_verdict(main: OutputComparison) -> None:
    """Fold the aggregate figures into the main output's verdict and message; over 1 fails."""
    assert main.aggregate is not None
    over = {k: v for k, v in main.aggregate.items() if v > 1.0}
    figures = ", ".join(f"{k} {v:.3g}" for k, v in main.aggregate.items())
    if over:
        main.passed = False
        main.message = (
            f"{main.member}: FAIL (aggregate: {figures} of the bound: a systematic error);"
            + main.message.partition(";")[2]
        )
    else:
        main.message += f"; aggregate {figures} of the bound"


def compare(
    desc: OperatorDesc,
    outputs_backend: dict[str, Any],
    outputs_reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec | None = None,
    overrides: dict[str, Any] | None = None,
    also_inputs: tuple[dict[str, Any], ...] = (),
) -> Comparison:
    """Compare a backend's outputs against the reference's (rounded) outputs, element by element,
    each against its own budget. ``overrides``: e.g. {"ulp_scale": 2.0}, {"max_ulp": 6},
    {"mean": 4.0}, {"atol": 1e-6}. ``also_inputs``: other input sets the compared outputs were
    computed from (a metamorphic relation's second run); each element gets the largest of the
    budgets, since either run's data may be the worse conditioned."""
    spec = spec or load_spec()
    from dmlconform.tolerance import models as tolerance_models  # the other kernels' models (tolerance.model

    budgets_of = tolerance_models.budgets if tolerance_models.handles(desc, spec) else budgets
    names = [m.name for m in spec.operator(desc.operator).input_members]
    nonfinite = any(
        not np.all(np.isfinite(np.asarray(inputs[m], dtype=np.float64))) for m in names if m in inputs
    )
    from dmlconform.tolerance import judge  # numba-free; imports its kernels only for large cases

    plan = judge.plan_for(desc, outputs_backend, outputs_reference, inputs, spec, also_inputs)
    if plan is not None:
        main, terms = judge.judge_normalization(
            desc,
            outputs_backend[plan.output],
            outputs_reference[plan.output],
            inputs,
            spec,
            overrides,
            plan=plan,
        )
        by_member, coeffs = statistics_output_budgets(
            desc, plan, terms.ss, terms.st, outputs_reference, spec, overrides, terms.u
        )
        outputs = {plan.output: main}
        for name in by_member:
            outputs[name] = _compare_member(
                name, outputs_backend.get(name), outputs_reference[name], by_member[name], coeffs[name]
            )
        if main.aggregate is not None:
            _aggregate_verdict(main)
    else:
        b = budgets_of(desc, outputs_reference, inputs, spec, overrides)
        for other in also_inputs:
            wider = budgets_of(desc, outputs_reference, other, spec, overrides).by_member
            b.by_member = {k: np.maximum(v, wider[k]) for k, v in b.by_member.items()}
        outputs = {
            name: _compare_member(
                name,
                outputs_backend.get(name),
                outputs_reference[name],
                b.by_member[name],
                b.coefficients[name],
            )
            for name in b.by_member
        }
        if b.aggregate is not None and not also_inputs:
            _judge_aggregate(b, outputs, outputs_backend, outputs_reference)
    passed = all(o.passed for o in outputs.values())
    lines = [o.message for o in outputs.values()]
    if nonfinite:
        lines.insert(0, "inputs hold NaN or Inf: behaviour undefined by DirectML, reported as information")
        passed = True
    return Comparison(passed, outputs, nonfinite, "\n".join(lines))
