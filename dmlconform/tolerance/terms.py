"""The terms every budget model is built from: ULP metrics, the coefficients (typed, from the
spec's ``tolerance:`` section), how a float32 sum's error grows, the activation's error interval and
the output's rounding. Kept apart so that each model module reads as its derivation only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dmlconform.kernels import KernelPlan
from dmlconform.reference import activation_arrays as model_activation
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.expr import evaluate
from dmlconform.specification.slices import to_slices
from dmlconform.specification.spec import Spec, resolve_bounding_points
from dmlconform.tolerance.exact import summed_exactly
from dmlconform.tolerance.options import MODEL_ALIASES, TEXT_COEFFICIENTS, ToleranceOptions

UNIT_ROUNDOFF = {"FLOAT32": 2.0**-24, "FLOAT16": 2.0**-11, "FLOAT64": 2.0**-53}


_INT_VIEW = {np.dtype(np.float16): np.int16, np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


DEFAULT_COEFFICIENTS = {
    "mean": 2.0,
    "variance": 2.0,
    "pointwise": 4.0,
    "output_ulps": 1.0,
    "cancellation": 8.0,
    "divisor_evaluation": 2.0,
}


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
    np.subtract(lowest, bits, out=bits, where=bits < 0)  # in place: no second int64 array
    return bits


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many representable values of ``a``'s dtype lie between ``a`` and ``b`` (``b`` is
    rounded to that dtype first). NaN against NaN is 0; NaN against a number is +inf."""
    a = np.asarray(a)
    b = np.asarray(b).astype(a.dtype, copy=False)
    diff = ordinal(a)
    diff -= ordinal(b)
    dist = np.abs(diff, out=diff).astype(np.float64)
    del diff
    na, nb = np.isnan(a), np.isnan(b)
    dist[na & nb] = 0.0
    dist[na ^ nb] = np.inf
    return dist


def ulp_of(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The spacing of ``dtype`` at |values| (rounded to ``dtype``), as float64; NaN for NaN.

    At and beyond the largest finite value (inf included) it is the spacing just below it, the
    top binade's: a finite answer there lies that far from its neighbour. numpy's spacing is inf
    there (the next value up is inf), and an infinite budget accepted any answer, NaN and the
    negated value included, wherever a reference reached the top of its type; an answer that
    rounded up to inf is judged by :func:`overflow_within` instead."""
    dtype = np.dtype(dtype)
    info = np.finfo(dtype)
    shape = np.shape(values)
    v = np.array(values, dtype=np.float64, ndmin=1)  # |values|, clamped below the top, in this one copy
    np.abs(v, out=v)
    np.minimum(v, float(np.nextafter(info.max, dtype.type(0))), out=v)
    if dtype == np.float64:
        return np.spacing(v).reshape(shape)
    # From the float64 bits, not through numpy's float16 conversions: they take ~80 ns per element
    # where the values are float16 subnormals (an LP-normalized FLOAT16 slice of 2^20: seconds per
    # case). Round the significand to dtype's nmant bits (ties to even); the binade of the rounded
    # value, floored at the smallest normal one (every subnormal has that spacing), gives 2^(e - nmant).
    nan = np.isnan(v)
    bits = v.view(np.int64)
    drop = 52 - info.nmant
    tie = np.right_shift(bits, drop)
    np.bitwise_and(tie, 1, out=tie)
    bits += (1 << (drop - 1)) - 1
    bits += tie
    del tie
    np.right_shift(bits, 52, out=bits)  # the biased float64 exponent of the rounded value
    np.maximum(bits, 1023 + info.minexp, out=bits)
    bits -= info.nmant
    np.left_shift(bits, 52, out=bits)
    v[nan] = np.nan
    return v.reshape(shape)


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
    model: str = ""  # always set by coefficients(): an override or the spec's ``required``
    growth_cap: str = "blocked"
    block: float = 256.0
    #: the fewest threads a GPU kernel reduces a slice with: chains of ceil(n / threads) terms
    threads: float | None = None
    #: ``input``: statistics rounded once to the tensor's data type (FLOAT16 stored as FLOAT16)
    statistics_storage: str = "working"
    #: the type the elementwise steps round in (centring, 1/sd, Scale, Bias, the value before the
    #: activation), where it is wider than the working precision's: ``pointwise`` counts its
    #: roundings (empty: the working precision)
    pointwise_precision: str = ""
    #: how a value is rounded to a type narrower than the working precision (the statistics'
    #: storage, ``pointwise_precision``'s steps): ``nearest`` errs half an ULP of that type,
    #: ``toward_zero`` (truncation) up to a whole one, twice as much
    narrowing: str = "nearest"
    data_type: str = ""
    ceiling: float | None = None
    #: the relative error (in u) a sound kernel may make evaluating 1 / sqrt(w) from a float32
    #: w = var + eps, where correctly rounded steps are exact (a power of four): the floor of
    #: the divisor's rounding on slices summed exactly (normalization.exact_divisor_rounding)
    divisor_evaluation: float = 2.0
    aggregate_shift: float = 1.0
    aggregate_scale: float = 1.0
    aggregate_residual: float = 1.0
    ulp_scale: float = 1.0
    atol: float = 0.0
    max_ulp: float | None = None


def coefficients(
    op_tolerance: dict[str, Any], data_type: str, activation: str | None, options: ToleranceOptions
) -> Coefficients:
    """Coefficients for ``data_type`` from the operator's ``tolerance:`` section, changed by the
    run's ``options`` (:class:`~dmlconform.tolerance.options.ToleranceOptions`).

    ``options.model`` (else the spec's ``required``) picks one of the section's ``models``:
    ``default``, what the suite requires, ``tight``, or ``lenient``, which a backend must ask for
    by name (it admits summation orders whose error grows faster than pairwise summation's)."""
    key = (id(op_tolerance), data_type, activation, options)
    hit = _PARSED.get(key)
    if hit is not None and hit[0] is op_tolerance:
        return hit[1]
    co = _parse_coefficients(op_tolerance, data_type, activation, options)
    _PARSED[key] = (op_tolerance, co)
    return co


#: coefficients parsed once per (operator's tolerance section, data type, activation, options):
#: a run compares thousands of cases of a few descs' kinds
_PARSED: dict[tuple[Any, ...], tuple[dict[str, Any], Coefficients]] = {}


def _parse_coefficients(
    op_tolerance: dict[str, Any], data_type: str, activation: str | None, options: ToleranceOptions
) -> Coefficients:
    per_type: dict[str, Any] = dict(DEFAULT_COEFFICIENTS)
    per_type.update((op_tolerance.get("coefficients") or {}).get(data_type, {}))
    # the spec's ``required`` model (schema: every tolerance section names it)
    model = options.model or str(op_tolerance["required"])
    model = MODEL_ALIASES.get(model, model)
    models = op_tolerance.get("models") or {model: {}}
    if model not in models:
        raise ValueError(f"unknown tolerance model {model!r} (known: {', '.join(models)})")
    per_type.update(models[model] or {})
    acts = op_tolerance.get("activation_ulps") or {}
    act_ulps = float(acts.get(activation or "", acts.get("default", 4.0))) if activation else 0.0
    working = (op_tolerance.get("working_precision") or {}).get(data_type, "FLOAT32")
    values: dict[str, Any] = {
        "working_precision": working,
        "activation_ulps": act_ulps,
        "model": model,
        "data_type": data_type,
    }
    for key, value in per_type.items():
        if key in Coefficients.__dataclass_fields__:
            values[key] = value
    changed = {k: v for k, v in options.changes().items() if k != "model"}
    for key in changed:
        if key not in Coefficients.__dataclass_fields__:
            raise ValueError(
                f"unknown tolerance override {key!r} (known: {', '.join(Coefficients.__dataclass_fields__)})"
            )
    values.update(changed)
    for key, value in values.items():
        if value is not None and key not in TEXT_COEFFICIENTS:
            values[key] = float(value)
        elif value is not None:
            values[key] = str(value)
            known = WORDS.get(key)
            if known is not None and values[key] not in known:
                raise ValueError(f"tolerance {key}={values[key]!r}: not one of {', '.join(known)}")
    return Coefficients(**_in_pointwise_precision(values))


def _in_pointwise_precision(values: dict[str, Any]) -> dict[str, Any]:
    """``pointwise`` in units of the working precision's roundoff: a FLOAT16 elementwise step
    on float32 statistics errs 2^13 times a float32 one (DirectML's FLOAT16 shaders)."""
    narrow = values.get("pointwise_precision")
    if narrow and UNIT_ROUNDOFF[narrow] > UNIT_ROUNDOFF[values["working_precision"]]:
        values["pointwise"] *= NARROWING_ULPS[values.get("narrowing") or "nearest"] * (
            UNIT_ROUNDOFF[narrow] / UNIT_ROUNDOFF[values["working_precision"]]
        )
    return values


#: a narrowing rounding's error in units of the narrower type's unit roundoff (half an ULP):
#: round to nearest's 1, truncation's 2 (a whole ULP: DirectML's F6, this stack's float32 ->
#: float16 conversion)
NARROWING_ULPS = {"nearest": 1.0, "toward_zero": 2.0}


#: the kinds :func:`growth` knows
GROWTH_KINDS = ("sqrt", "sqrt_log2", "log2")
#: the values the worded coefficients take (the schema's enums; growth(): the growth kinds)
WORDS: dict[str, tuple[str, ...]] = {
    "working_precision": tuple(UNIT_ROUNDOFF),
    "statistics_storage": ("working", "input"),
    "pointwise_precision": tuple(UNIT_ROUNDOFF),
    "narrowing": tuple(NARROWING_ULPS),
    "growth_cap": ("blocked", *GROWTH_KINDS, "none"),  # any other than blocked and none: growth()'s
    "mean_growth": GROWTH_KINDS,
    "spread_growth": GROWTH_KINDS,
}


def summed(co: Coefficients) -> bool:
    """The model admits sums in some order only (its growth capped by blocks or chains): exactness
    in any summation order holds the statistics to their division. The ``lenient`` model also
    admits a running mean (Welford), whose updates round on any data: it keeps its growth."""
    return co.growth_cap == "blocked"


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

    plan: KernelPlan
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
    #: slices (keepdims) whose outputs are float numbers before rounding (exact statistics and
    #: divisor, grid operands, no activation): a sound implementation's outputs carry no rounding
    #: there for the fit to mistake for a shift or a scale (:func:`~dmlconform.tolerance.aggregate.aggregate_from_sums`)
    on_grid: np.ndarray | None = None
    #: per element, how far the fused activation bends away from its secant over the error
    #: interval (normalization._through_activation): what a shift of the slice's mean may put
    #: into the element beyond the secant, lined up with z at worst; 0 without an activation
    bend: np.ndarray | float = 0.0


@dataclass
class Budgets:
    """Per-element absolute budgets for every output member (float64 arrays of their Sizes),
    and for the main output the terms its aggregate check needs (:class:`AggregateModel`)."""

    by_member: dict[str, np.ndarray]
    coefficients: dict[str, Coefficients]
    aggregate: AggregateModel | None = None


class BudgetModel(Protocol):
    """What a kernel's ``budgets`` part is (``dmlconform.kernels``, a ``"module:function"`` the
    registry resolves by name): the budgets of every output of ``desc`` from its inputs and the
    reference's outputs, under the spec's tolerance with the run's ``tolerance`` changes.
    Declared here so that the budget models (:mod:`~dmlconform.tolerance.normalization`,
    :mod:`~dmlconform.tolerance.rms`, :mod:`~dmlconform.tolerance.pointwise`,
    :mod:`~dmlconform.tolerance.gradients`, :mod:`~dmlconform.tolerance.local_response`,
    :mod:`~dmlconform.tolerance.lp_norm`) and the comparison that calls them agree on one
    signature, which the registry's strings cannot check."""

    def __call__(
        self,
        desc: OperatorDesc,
        reference: dict[str, np.ndarray],
        inputs: dict[str, Any],
        spec: Spec,
        tolerance: ToleranceOptions,
    ) -> Budgets: ...


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
    raise ValueError(f"unknown growth {kind!r} (known: {', '.join(GROWTH_KINDS)})")


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


def repetition(plan: KernelPlan, x: np.ndarray) -> np.ndarray:
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
    the n/2 u |mean| bound of any summation order), from r = 2 on (every value twice or more:
    the measured groups); 0 where r = 1, adding nothing.

    Between, it is weighted by r - 1, which is at least the share of summands that repeat an
    earlier one (1 - 1/r): only they can round alike. Continuous data repeat a few values by
    chance (standard-normal float32: r = 1.0004 at 2^16, 1.03 at 2^22), which add no correlated
    rounding; the full term there, a step at r = 1, held a slice's mean to 10 to 30 times the
    bound of the same data without the repeats (2^16 to 2^20: a shift of 100 to 375 u sd passed
    where 10 to 12 u fails), tests/test_repetition_continuity.py."""
    weight = np.clip(np.asarray(r, dtype=np.float64) - 1.0, 0.0, 1.0)
    return np.where(r > 1.0, weight * (np.minimum(np.sqrt(n * r), (n - 1) / 4.0) + 1.0), 0.0)


ABSORPTION = 1.0 / 16.0
"""The coefficient of :func:`absorbed_growth` (measured: 0.033 / c_var for chi-square terms)."""


def absorbed_growth(m: int, u: float) -> float:
    """The growth of a float32 chain of m terms of one sign whose values reach down to 0 (the
    squared deviations of a variance: a chi-square's density grows without bound at 0), from
    the terms it absorbs. Step k adds to a partial sum near k mean whose spacing is up to
    2u k mean; a term below half of it is lost and one near it rounds toward the grid, so the
    error is no longer random but one-sided, about the mass of the terms under u k mean:
    (u k)^1.5 mean for chi-square terms. Summed over the chain and divided by m: ~(u m)^1.5, in
    units of u: sqrt(u) m^1.5 (measured, sequential float32 sums of m = 2^10 to 2^22 squared
    normal deviates: 0.033 sqrt(u) m^1.5 u relative, 69000 u = 0.4 % at m = 2^22, always low;
    with c_var = 2, ``ABSORPTION`` = 1/16 allows 3.8 times that). 0.06 for a block of 256,
    1450 for a 32-thread chain at n = 2^22 (a random growth of 362), 32768 for one of 2^20."""
    return ABSORPTION * math.sqrt(u) * float(m) ** 1.5


def branch_jumps(
    plan: KernelPlan, y: np.ndarray, e_y: np.ndarray, f: np.ndarray, spec: Spec
) -> np.ndarray | float:
    """max |f(b+-) - f(y)| over the activation's branch points and extrema b (spec
    ``branch_points``, ``extrema``) that lie within [y - e_y, y + e_y]: at a discontinuity (SHRINK
    with Bias != Threshold, THRESHOLDED_RELU) the supremum over the interval is a one-sided limit
    at b, and over an interval holding GELU's minimum it is that minimum, not an endpoint."""
    act = spec.activations.get(plan.activation) if plan.activation else None
    if act is None or not (act.branch_points or act.extrema):
        return 0.0
    out: np.ndarray | float = 0.0
    # plan.activation_params holds every parameter (defaults filled) as the C FLOAT it is passed as
    for b in resolve_bounding_points(act, plan.activation_params):
        inside = np.abs(y - b) <= e_y
        sides = model_activation.activation(
            plan.activation,
            np.array([np.nextafter(b, -np.inf), b, np.nextafter(b, np.inf)]),
            plan.activation_params,
        )
        jump = np.max(np.abs(sides[:, None] - np.ravel(f)[None, :]), axis=0).reshape(np.shape(f))
        out = np.maximum(out, np.where(inside, jump, 0.0))
    return out


def cancellation_scale(plan: KernelPlan, y: np.ndarray, spec: Spec) -> np.ndarray | float:
    """C(y): the fused activation's ``cancellation`` expression (spec/common/activations.yaml),
    the magnitude of the terms a floating-point evaluation of it combines. An implementation of
    the documented formula errs by a few u times C(y) even where f(y) is tiny (GELU's 1 + erf
    for y << 0), which no relative (ULP) allowance covers. 0 with no activation or none given."""
    act = spec.activations.get(plan.activation) if plan.activation else None
    if act is None or act.cancellation is None:
        return 0.0
    return np.abs(evaluate(act.cancellation, x=y, **plan.activation_params))


def block_length(co: Coefficients, n: int) -> int:
    """The longest sequential run of a sum of n terms under the model: a block of ``block``
    terms, or, where the model admits GPU orders (``threads``), a thread's chain of
    ceil(n / threads) terms when that is longer (the tree over the chains adds log2 of their
    number, :func:`cap`)."""
    block = max(co.block, 1.0)
    if co.threads:
        block = max(block, math.ceil(n / co.threads))
    return int(min(n, block))


def storage_roundoff(co: Coefficients) -> float:
    """The unit roundoff of the type the statistics are stored in, when that is narrower than
    the working precision (``statistics_storage: input`` on a FLOAT16 tensor); 0 otherwise."""
    if co.statistics_storage != "input" or co.data_type not in UNIT_ROUNDOFF:
        return 0.0
    stored = UNIT_ROUNDOFF[co.data_type]
    return stored * NARROWING_ULPS[co.narrowing] if stored > UNIT_ROUNDOFF[co.working_precision] else 0.0


#: half the smallest subnormal of a type: what storing a statistic in it costs at the least,
#: however small the value (a FLOAT16 variance of 1e-6 is a subnormal held to 2^-24, 6%; one
#: under 2^-25 is 0): the absolute part beside :func:`storage_roundoff`'s relative one, and
#: beside the unit roundoff of any product computed in that type (gradual underflow)
STORAGE_FLOOR = {"FLOAT32": 2.0**-150, "FLOAT16": 2.0**-25}


def cap(full: Any, one_block: Any, co: Coefficients, n: int) -> Any:
    """A growth term under the model's cap.

    ``growth_cap: blocked`` (the tight and default models) is the accuracy of blocked summation: any order
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


def overflow_edge(dtype: np.dtype) -> float:
    """The smallest magnitude that rounds to inf in ``dtype`` (round to nearest: the largest
    finite value plus half the top binade's spacing; the tie rounds to the even significand, inf)."""
    top = float(np.finfo(dtype).max)
    return top + float(ulp_of(np.asarray(top), dtype)) / 2


def overflow_within(got: np.ndarray, ref: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """Where the reference is finite but its budget reaches the magnitudes that round to inf
    (:func:`overflow_edge`), the backend's inf of the reference's sign is within the budget: a
    sound implementation's result there may round up to inf."""
    if ref.dtype.kind != "f":
        return np.zeros(ref.shape, bool)
    edge = overflow_edge(ref.dtype)
    over = np.isinf(got)
    if not over.any():
        return over
    with np.errstate(invalid="ignore"):
        over &= np.isfinite(ref) & (np.sign(got) == np.sign(ref))
        over &= np.abs(ref.astype(np.float64)) + budget >= edge
    return over


def overflowed_alike(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Where the reference overflowed to +-inf, the backend's value is right if it is that inf
    or the largest finite value of that sign (a saturating conversion); anything else there,
    NaN included, is an error of unbounded size."""
    big = float(np.finfo(ref.dtype).max) if ref.dtype.kind == "f" else np.inf
    with np.errstate(invalid="ignore"):
        return np.isinf(ref) & (np.sign(got) == np.sign(ref)) & (np.abs(got.astype(np.float64)) >= big)


def reduction_growth(n: int, co: Coefficients) -> float:
    """The growth of a float32 sum of n terms under the model's cap (:func:`cap`)."""
    one_block = growth(co.mean_growth, block_length(co, n))
    return float(cap(growth(co.mean_growth, n), one_block, co, n))


@dataclass(frozen=True)
class SummandStatistics:
    """What the summands of one-signed sums (|x|, x^2) are per slice, for their growth
    (:func:`summed_growth`): how often each value recurs (:func:`repetition`), their mean and
    their spread."""

    repetition: Any
    mean: Any
    std: Any
    #: slices whose sum is exact in any order (tolerance.exact.summed_exactly): nothing grows
    exact: Any = False


def summand_statistics(plan: Any, terms: np.ndarray) -> SummandStatistics:
    """:class:`SummandStatistics` of ``terms`` (float32: what a float32 kernel adds) over the
    plan's axes, keepdims."""
    t = np.asarray(terms, dtype=np.float64)
    mean = t.mean(axis=plan.axes, keepdims=True)
    std = np.sqrt(((t - mean) ** 2).mean(axis=plan.axes, keepdims=True))
    rows = to_slices(np.asarray(terms, dtype=np.float32), plan.axes)
    exact = summed_exactly(rows, UNIT_ROUNDOFF["FLOAT32"]).reshape(np.shape(mean))
    return SummandStatistics(repetition(plan, t), mean, std, exact)


def summed_growth(
    n: int, co: Coefficients, u: float, r: Any = 1.0, terms: SummandStatistics | None = None
) -> Any:
    """The growth of a float32 sum of n terms (as :func:`reduction_growth`) counting what the
    terms' values do to it, under the model's cap (:func:`cap`):

    - where they repeat each value r times on average (:func:`repetition`, per slice), a run of
      m of them grows like the larger of the random growth and sqrt(m min(r, m))
      (:func:`repeated_growth`): a float32 sum rounds the copies of a value alike;
    - where they are of one sign and reach down to the spacing of the partial sum, a long chain
      absorbs the smallest of them (:func:`absorbed_growth`): sequential float32 sums of |x| at
      n = 2^22 err 20000 u, of x^2 61000 u, where sqrt(n) is 2048. Where signs mix, the lost
      terms' errors cancel; the models apply it to the sum of the terms' magnitudes regardless.

    - where ``terms`` says so (one-signed sums: Lp norms, a mean square), the summands' own
      repetition replaces r, and where their spread falls below the spacing of the partial sum
      (offset data, a constant slice) the rounding is no longer random (:func:`correlated_growth`);
      and where their sum is exact in any order (``terms.exact``, under a model of sums) nothing
      grows at all, however often they repeat (exact-statistics data).

    The same as :func:`reduction_growth` where r is 1, but for the absorbed part, which is below
    0.1 for a block of 256 and 1.4 for a chain of 2048."""
    if terms is not None:
        r = terms.repetition

    def of(m: int) -> Any:
        repeated = np.maximum(growth(co.mean_growth, m), repeated_growth(m, np.minimum(r, m)))
        if terms is not None:
            repeated = repeated + correlated_growth(m, terms.mean, terms.std, u)
        return repeated + absorbed_growth(m, u)

    one_block = of(block_length(co, n)) if co.growth_cap == "blocked" else None
    capped = cap(of(n), one_block, co, n)
    if terms is not None and summed(co):  # exact in any order: only the final rounding is left
        return np.where(terms.exact, 0.0, capped)
    return capped


def as_f64(inputs: dict[str, Any], name: str | None, fill: float) -> Any:
    return np.asarray(inputs[name], dtype=np.float64) if name else fill


def activation_error(
    plan: Any, y: np.ndarray, e_y: np.ndarray, co: Coefficients, u: float, spec: Spec
) -> np.ndarray:
    """The error interval [y - e_y, y + e_y] pushed through the float64 activation, its branch
    points, its own error and its cancellation scale (as the normalization model). Without an
    activation the interval is e_y itself: (y + e_y) - y would add only its float64 rounding
    (up to half an ULP of y, 1e-8 of a small e_y), which the compiled judge does not make."""
    if plan.activation in (None, "ACTIVATION_IDENTITY"):
        return np.asarray(e_y)
    f = model_activation.activation(plan.activation, y, plan.activation_params)
    lo = model_activation.activation(plan.activation, y - e_y, plan.activation_params)
    hi = model_activation.activation(plan.activation, y + e_y, plan.activation_params)
    e = np.maximum(np.abs(lo - f), np.abs(hi - f))
    jumps = branch_jumps(plan, np.broadcast_to(y, np.shape(f)), np.broadcast_to(e_y, np.shape(f)), f, spec)
    e = np.maximum(e, jumps) + co.activation_ulps * u * np.abs(f)
    return e + co.cancellation * u * cancellation_scale(plan, y, spec)


def member_coefficients(
    desc: OperatorDesc, spec: Spec, member: str, activation: str | None, options: ToleranceOptions
) -> tuple[Coefficients, float]:
    tol = spec.operator(desc.operator).tolerance
    co = coefficients(tol, desc.get(member, spec).data_type, activation, options)
    return co, UNIT_ROUNDOFF[co.working_precision]
