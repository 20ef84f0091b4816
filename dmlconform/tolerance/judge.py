"""The compiled judge: the tolerance model and the comparison of a large case in two passes.

:func:`dmlconform.tolerance.compare` hands a case here when its main input has more than
:data:`KERNEL_MIN_ELEMENTS` elements (the reference's own compile threshold, so that a run of
small cases never imports numba) and its kernel has a ``judge`` part in the registry: the centred
normalization, RMS, given-statistics and batch-norm gradients' models (:class:`SliceTerms` says
what they share). The numpy models stay the readable specification: the kernels compute the same
formulas (``tests/test_judge.py`` holds the two together to a relative 1e-12 on hypothesis-drawn
cases and every stress shape), and the per-slice terms (growth, statistics errors) are the numpy
model's own functions applied to the kernels' per-slice statistics.

Memory: beyond the inputs and outputs, a compare holds the per-slice arrays, the distinct-count
scratch of one slice per thread, or of one long slice (:mod:`dmlconform.tolerance.long_slices`)
at a time (8 bytes per element of the slice), float32 copies of FLOAT16
outputs and inputs (4 bytes per element each), float64 tables of the operands with their
broadcast indices (16 bytes per element for an operand as large as the input) and copies of
arrays whose rows the kernel cannot address in place (a layout no reference output has).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmlconform import tolerance as tl
from dmlconform.errors import PlanError
from dmlconform.kernels import given_statistics, normalization, normalization_grad, rms_normalization
from dmlconform.kernels.base import KernelPlan
from dmlconform.kernels.given_statistics import GivenStatisticsPlan
from dmlconform.kernels.normalization_grad import NormalizationGradPlan
from dmlconform.reference import MIRROR_MAX_ELEMENTS, _as_3d, _factor, _rows, contiguous_slices, short_rows
from dmlconform.reference import activation_arrays as model_activation
from dmlconform.reference.activations import activation_args
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.expr import postfix
from dmlconform.specification.slices import to_slices
from dmlconform.specification.spec import Spec, resolve_bounding_points
from dmlconform.tolerance import SliceStatistics
from dmlconform.tolerance.exact import summed_exactly
from dmlconform.tolerance.gradients import GradientSums, Repetition, rounded_budgets, slice_errors
from dmlconform.tolerance.normalization import ceiling_deltas, exact_replaces_growth, rounds_back
from dmlconform.tolerance.options import NO_OPTIONS, ToleranceOptions
from dmlconform.tolerance.terms import UNIT_ROUNDOFF, SummandStatistics, summed_growth
from dmlconform.tolerance.work_items import logical_index, merge_items, work_items, worst_of

KERNEL_MIN_ELEMENTS = MIRROR_MAX_ELEMENTS + 1
"""Cases whose main input has fewer elements are judged by the numpy model: the kernels'
compile time (or cache load) would not pay off, and cold start stays numba-free."""

_FLOATS = (np.dtype(np.float32), np.dtype(np.float16))


@dataclass(frozen=True)
class ModelTerms:
    """What the compiled pass leaves for the numpy model: the plan, the slices' statistics and
    their errors (in the kernel's slice order) and the working precision's unit roundoff.
    ``recount``: the statistics with every slice's repetition, where ``ss`` left the exact
    slices' uncounted (``slice_statistics(count_exact=False)``)."""

    plan: KernelPlan
    ss: Any  # tolerance.SliceStatistics
    st: Any  # tolerance.StatisticsErrors
    u: float
    recount: Callable[[], Any] | None = None

    def output_budgets(
        self, desc: OperatorDesc, reference: dict[str, Any], spec: Spec, tolerance: ToleranceOptions
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The statistics outputs' budgets and coefficients (the numpy model's own function),
        from statistics with every repetition counted where an output's coefficients read
        them on exact slices (a data type the main output's model does not hold exact)."""
        ss = self.ss
        if self.recount is not None and not all(
            exact_replaces_growth(co, self.u)
            for co in self._output_coefficients(desc, reference, spec, tolerance)
        ):
            ss = self.recount()
        return tl.statistics_output_budgets(desc, self.plan, ss, self.st, reference, spec, tolerance, self.u)

    def _output_coefficients(
        self, desc: OperatorDesc, reference: dict[str, Any], spec: Spec, tolerance: ToleranceOptions
    ) -> list[Any]:
        """The coefficients of the statistics outputs the reference holds."""
        tol = spec.operator(desc.operator).tolerance
        names = (self.plan.mean_output, self.plan.variance_output)
        return [
            tl.coefficients(tol, desc.get(name, spec).data_type, None, tolerance)
            for name in names
            if name and name in reference
        ]


Rows = tuple[np.ndarray, int, int, tuple[int, int, int]]
"""A tensor as the kernels address it: (flat float32, slice stride, row stride, (K, M, L))."""


def _slice_rows(arr: np.ndarray, perm: tuple[int, ...], n_kept: int, target: tuple[int, int, int] | None):
    """``arr`` (float32) as (flat, sk, sm, (K, M, L)) rows in the kernel's slice order; a copy
    only when its strides do not allow addressing it in place."""
    view = arr.transpose(perm)
    v3 = _as_3d(view, n_kept, target)
    if v3 is None or short_rows(v3.shape):
        # rows too short to read slice by slice (channels innermost), or a split ``target`` that
        # this tensor's strides do not allow (the input was gathered): contiguous slices, which
        # any (K, M, L) split addresses
        v3 = contiguous_slices(view, n_kept)
        if target is not None:
            v3 = v3.reshape(target)
    flat, sk, sm = _rows(v3)
    return flat, sk, sm, v3.shape


def _as_float32(arr: Any) -> tuple[np.ndarray, bool]:
    """(float32 array, was FLOAT16): the kernels read float32; FLOAT16 widens exactly."""
    from dmlconform.reference.gather import widen_half

    a = np.asarray(arr)
    if a.dtype == np.float16:
        return widen_half(a), True
    return (a if a.dtype == np.float32 else a.astype(np.float32)), False


def input_rows(slicing: Any, x: Any) -> tuple[Rows, tuple[int, ...], bool]:
    """The input as the kernels read it: its float32 rows (flat, sk, sm, (K, M, L)) in the slice
    order of ``slicing`` (anything with ``kept_axes`` and ``axes``), that order, and whether it
    was FLOAT16."""
    x32, half = _as_float32(x)
    perm = slicing.kept_axes + slicing.axes
    return _slice_rows(x32, perm, len(slicing.kept_axes), None), perm, half


def slice_statistics(
    plan: KernelPlan,
    x: np.ndarray,
    moments_only: bool = False,
    exactness: bool = True,
    count_exact: bool = True,
) -> tuple[Any, tuple, tuple[int, ...]]:
    """The numpy model's :class:`~dmlconform.tolerance.SliceStatistics` as (K,) arrays in the
    kernel's slice order, computed by the compiled statistics kernel; the input's rows
    (flat, sk, sm, (K, M, L)) and the axis order of the slice order. ``moments_only``: the mean
    and variance only (the spread and the repetition NaN); ``exactness``: whether to test which
    slices sum exactly (the centred model's; None without); ``count_exact``: whether to count
    the distinct values of those slices too (else their repetition is NaN: a model that holds
    them to their division reads none, :func:`~dmlconform.tolerance.normalization.exact_replaces_growth`,
    and the count is most of the pass on data whose values span a wide range)."""
    from dmlconform.reference.compiled import run_chunks
    from dmlconform.tolerance import judge_compiled as jk
    from dmlconform.tolerance import long_slices

    rows, perm, half = input_rows(plan, x)
    flat, sk, sm, shape = rows
    k_len, m_len, l_len = shape
    mean, var, sqstd, distinct, exact = (np.empty(k_len) for _ in range(5))
    limit = 1.0 / UNIT_ROUNDOFF["FLOAT32"]  # exactness of float32 sums (tolerance.exact)
    bits = flat.view(np.int32)
    # long slices: their moments here, the rest part by part on every thread
    by_parts = not moments_only and long_slices.is_long(shape)
    count_exact = count_exact or not exactness  # without the exact slices, every count is read

    def call(k0: int, k1: int) -> None:
        jk.slice_statistics(
            flat, bits, sk, sm, k0, k1, m_len, l_len, half, moments_only or by_parts, limit, count_exact,
            mean[k0:k1], var[k0:k1], sqstd[k0:k1], distinct[k0:k1], exact[k0:k1],
        )  # fmt: skip

    run_chunks(k_len, x.size, call)  # numba is loaded by now (judge_compiled)
    if by_parts:
        long_slices.fill_long_slices(rows, half, limit, mean, var, sqstd, distinct, exact, count_exact)
    n = m_len * l_len
    exact = None if moments_only or not exactness else exact > 0.0
    return SliceStatistics(mean, var, sqstd, n / np.maximum(distinct, 1.0), exact), rows, perm


@dataclass(frozen=True)
class Slicing:
    """How the element pass walks a tensor of ``shape``: one slice per index of the kept axes,
    the elements of ``axes`` within it (the reduced axes of a plan, or the axes along which the
    given statistics are constant)."""

    shape: tuple[int, ...]
    axes: tuple[int, ...]

    @property
    def kept_axes(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.shape)) if i not in self.axes)


@dataclass(frozen=True)
class GradientTerms:
    """What the compiled pass leaves for the gradients' reduced outputs: the errors of the
    scale and bias gradients' sums, one per slice (:func:`dmlconform.tolerance.gradients.reduction_grad_budgets`)."""

    plan: NormalizationGradPlan
    e_scale: np.ndarray
    e_bias: np.ndarray

    def output_budgets(
        self, desc: OperatorDesc, reference: dict[str, Any], spec: Spec, tolerance: ToleranceOptions
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The scale and bias gradients' budgets (their errors with the output rounding)."""
        errors = {self.plan.scale_gradient_output: self.e_scale, self.plan.bias_gradient_output: self.e_bias}
        return rounded_budgets(desc, spec, errors, reference, tolerance)


Operand = tuple[np.ndarray, np.ndarray, np.ndarray, bool]
"""A tensor as the element pass reads it: (T[Ks, Rs], tk[K], tr[n], constant within a slice)
(:func:`dmlconform.reference._factor`)."""


def per_slice(values: np.ndarray) -> Operand:
    """One value per slice as an operand."""
    k = values.size
    return values.reshape(k, 1).astype(np.float64), np.arange(k, dtype=np.int64), np.zeros(1, np.int64), True


@dataclass(frozen=True)
class SliceTerms:
    """What the element pass reads, in the kernel's slice order, whichever model made it.

    Every model the compiled judge serves is y = act(Scale z + Bias + FusedAdd) with
    z = (x - centre) / sd and e_z = (e_mean + c_dev dev + c_w |w|) / sd + |z| rel_sd, where
    dev = |x - centre|, or |x| + |centre| where ``dev_folded`` (given statistics: inference kernels
    fold the mean into the bias, x a + (Bias - Mean a), whose two products cancel), and e_y =
    |Scale| e_z + c_pt u (|Scale z| + |Bias| + |FusedAdd|), without |Scale z| where z is not
    rounded (``z_rounds``). The centre and 1 / sd are operands (per slice where statistics are
    taken, as broadcast where they are given); e_mean, rel_sd, c_dev and the ceiling's terms are
    per slice. The models differ only in these terms, so one element pass serves them all; 1 / sd
    infinite (a zero divisor) leaves the value undefined.

    The gradients fit the same form with y the input gradient and w the output gradient dy
    (:func:`_gradient_terms`): their e_dx is |Scale| / sd times a per-slice constant, a
    per-slice multiple of |x - centre| and one of |dy|."""

    slicing: Any  # shape, axes, kept_axes: the plan itself, or a Slicing
    rows: Rows  # the input
    perm: tuple[int, ...]  # kept axes then axes: the slice order
    operands: tuple[str | None, str | None, str | None]  # scale, bias, fused add
    centre: Operand
    inverse_sd: Operand
    e_mean: np.ndarray
    rel_sd: np.ndarray
    c_dev: float | np.ndarray  # c_pt u, or one per slice; 0 where z is the input itself (no statistic taken)
    dev_folded: bool = False
    #: the second per-element input (rows as ``rows``) and its coefficient (the gradients' dy)
    weight: Rows | None = None
    c_w: float = 0.0
    z_rounds: bool = True
    #: (ceiling, d_shift, d_rel, unit) where the model caps e_y at a multiple of |y|'s scale
    ceiling: tuple[float, np.ndarray, np.ndarray, np.ndarray] | None = None
    #: what the other outputs' budgets take (None: the model has no other outputs)
    model: ModelTerms | GradientTerms | None = None
    #: (e_mean / sd, the divisor's own relative error, on-grid slices or None) per slice where the
    #: model checks the aggregate fit (the centred model)
    aggregate: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None


def _output_dtype(co: Any) -> np.dtype:
    """The output type the coefficients were read for (their data type's numpy type)."""
    return np.dtype(np.float16) if co.data_type == "FLOAT16" else np.dtype(np.float32)


def _inverse(sd: np.ndarray) -> np.ndarray:
    """1 / sd (inf for a zero divisor): the element pass multiplies, a division per element
    would bound it (rounding: 1e-16 of z)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / sd


def _centred_terms(plan: KernelPlan, inputs: dict[str, Any], co: Any, u: float) -> SliceTerms:
    """The normalization model's terms (:func:`dmlconform.tolerance.budgets`) from the slices'
    statistics: the numpy model's own functions on (K,) arrays."""
    from dmlconform.tolerance.grid_compiled import grid_slices

    x = inputs[plan.input]
    count_exact = not exact_replaces_growth(co, u)
    ss, rows, perm = slice_statistics(plan, x, count_exact=count_exact)
    st = tl.statistics_errors(plan, ss, co, u)
    var = ss.var
    ceiling = None
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        sd = np.sqrt(var + plan.epsilon) if plan.normalize_variance else np.ones_like(var)
        rel_sd = tl.divisor_error(plan, ss, st, co, u)
        if co.ceiling is not None:
            d_shift, d_rel = ceiling_deltas(plan, ss, st, co, u, sd, rel_sd)
            unit = np.ones_like(var) if plan.normalize_variance else np.sqrt(var)
            ceiling = (co.ceiling, d_shift, d_rel, unit)
        shift = st.e_mean / sd  # sd 0: an undefined slice (Epsilon 0)
        own_scale = tl.own_divisor_error(plan, ss, st, co, u)
    return SliceTerms(
        plan, rows, perm, (plan.scale, plan.bias, plan.fused_add), per_slice(ss.mean), per_slice(_inverse(sd)),
        st.e_mean, rel_sd, co.pointwise * u, ceiling=ceiling,
        model=ModelTerms(plan, ss, st, u, None if count_exact else lambda: slice_statistics(plan, x)[0]),
        aggregate=(shift, own_scale, grid_slices(plan, inputs, ss.exact, rows, perm, _output_dtype(co)) if rounds_back(co) else None),
    )  # fmt: skip


def _rms_terms(plan: KernelPlan, inputs: dict[str, Any], co: Any, u: float) -> SliceTerms:
    """The RMS model's terms (:func:`dmlconform.tolerance.rms.rms_budgets`): centre 0, sd the root
    of the mean square (var + mean^2 of the slice, both non-negative: no cancellation) plus
    Epsilon, rel_sd its relative error; without the variance step z is the input itself."""
    operands = (plan.scale, plan.bias, plan.fused_add)
    if not plan.normalize_variance:
        rows, perm, _ = input_rows(plan, inputs[plan.input])
        zero = np.zeros(rows[3][0])
        return SliceTerms(plan, rows, perm, operands, per_slice(zero), per_slice(zero + 1.0), zero, zero, 0.0)
    ss, rows, perm = slice_statistics(plan, inputs[plan.input], moments_only=True)
    ms = ss.var + ss.mean * ss.mean
    x32, _ = _as_float32(inputs[plan.input])
    squares = x32 * x32  # the float32 squares a kernel adds
    sq = slice_statistics(plan, squares, exactness=False)[0]
    exact = summed_exactly(to_slices(squares, plan.axes), UNIT_ROUNDOFF["FLOAT32"])
    del squares
    summands = SummandStatistics(sq.repetition, sq.mean, np.sqrt(sq.var), exact)
    growth = summed_growth(plan.reduction_length, co, u, terms=summands)
    zero = np.zeros_like(ms)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        rel = co.variance * u * growth * ms / (2.0 * (ms + plan.epsilon)) + co.pointwise * u
        sd = np.sqrt(ms + plan.epsilon)
    return SliceTerms(
        plan, rows, perm, operands, per_slice(zero), per_slice(_inverse(sd)), zero, rel, co.pointwise * u
    )


MIN_SLICE = 1 << 12
"""Given statistics that vary along the axes they vary along leave slices at least this long, or
the whole tensor is one slice: a slice costs the element pass a setup (its lanes, one block of
operands), which short slices would not repay."""


def given_slicing(plan: GivenStatisticsPlan, inputs: dict[str, Any]) -> Slicing:
    """One slice per value of the given statistics where their slices are long (per channel:
    Mean and 1/sd constant within a slice, no per-element index), else the whole tensor as one
    slice, which the work items cut for the threads (statistics as large as the input)."""
    nd = len(plan.shape)
    sizes = [(1,) * (nd - np.ndim(inputs[m])) + np.shape(inputs[m]) for m in (plan.mean, plan.variance)]
    within = tuple(i for i in range(nd) if all(s[i] == 1 for s in sizes))
    if math.prod(plan.shape[i] for i in within) < MIN_SLICE:
        within = tuple(range(nd))
    return Slicing(tuple(plan.shape), within)


def _given_terms(plan: GivenStatisticsPlan, inputs: dict[str, Any], co: Any, u: float) -> SliceTerms:
    """The given-statistics model's terms (:func:`dmlconform.tolerance.pointwise.pointwise_budgets`):
    Mean and 1 / sqrt(Variance + Epsilon) as broadcast operands (each may vary along any axes),
    nothing reduced, the deviation folded."""
    slicing = given_slicing(plan, inputs)
    rows, perm, _ = input_rows(slicing, inputs[plan.input])
    var = np.asarray(inputs[plan.variance], np.float64)
    with np.errstate(invalid="ignore"):
        inverse_sd = _inverse(np.sqrt(var + plan.epsilon))
    zero = np.zeros(rows[3][0])
    return SliceTerms(
        slicing, rows, perm, (plan.scale, plan.bias, None), _factor(inputs[plan.mean], slicing, perm, 0.0),
        _factor(inverse_sd, slicing, perm, 1.0), zero, zero, co.pointwise * u, dev_folded=True,
    )  # fmt: skip


def _per_slice_values(slicing: Slicing, values: Any) -> np.ndarray:
    """A statistic of the reduced shape (size 1 along the slicing's axes) as one float64 per
    slice, in the slice order."""
    keep = tuple(1 if i in slicing.axes else n for i, n in enumerate(slicing.shape))
    return np.broadcast_to(np.asarray(values, np.float64), keep).reshape(-1)


def gradient_sums(x_rows: Rows, dy_rows: Rows, mean: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Per slice (rows, :data:`judge_compiled.G_ABS_DY`... columns) the sums of the gradients'
    model, by the compiled kernel over work items (a long slice uses every thread)."""
    from dmlconform.reference.compiled import run_chunks
    from dmlconform.tolerance import judge_compiled as jk

    x, x_sk, x_sm, shape = x_rows
    dy, d_sk, d_sm, _ = dy_rows
    k_len, m_len, l_len = shape
    item_k, item_p0, item_p1 = work_items(k_len, m_len * l_len)
    sums = np.empty((item_k.size, jk.N_GRADIENT_SUMS))

    def call(i0: int, i1: int) -> None:
        jk.gradient_sums(x, x_sk, x_sm, dy, d_sk, d_sm, item_k[i0:i1], item_p0[i0:i1], item_p1[i0:i1], l_len,
                         mean, centre, sums[i0:i1])  # fmt: skip

    run_chunks(item_k.size, x.size, call)
    if item_k.size == k_len:
        return sums
    parts = sums.reshape(k_len, -1, jk.N_GRADIENT_SUMS)
    out = parts.sum(axis=1)
    out[:, jk.G_MAX_XC] = parts[:, :, jk.G_MAX_XC].max(axis=1)
    return out


def _gradient_terms(plan: NormalizationGradPlan, inputs: dict[str, Any], co: Any, u: float) -> SliceTerms:
    """The gradients' model (:func:`dmlconform.tolerance.gradients.reduction_grad_budgets`): its
    per-slice terms (:func:`~dmlconform.tolerance.gradients.slice_errors`) from the kernel's
    sums. Given statistics: e_dx = c_pt u |dy| |Scale| / sd. Batch statistics:
    e_dx = |Scale| / sd (c_pt u |dy| + P + Q |x - centre|) with, per slice,
    P = (c_pt u + c_mean u g_dy) mean|dy| + e_xc |c1| / ve + e_xc^2 mean|dy| / ve and
    Q = (c_pt u + c_mean u g_dyx) mean|dy xc| / ve + e_xc mean|dy| / ve, the numpy model's terms
    grouped by what multiplies them (all non-negative: the grouping moves the budget by
    roundings only). The sums' growth reads how often x's and dy's values repeat in each slice
    (the statistics kernel's distinct counts)."""
    from dmlconform.tolerance import judge_compiled as jk

    slicing = Slicing(tuple(plan.shape), tuple(plan.axes))
    dy_stats, dy_rows, _ = slice_statistics(slicing, inputs[plan.input_gradient], exactness=False)
    r_dy = dy_stats.repetition
    batch_mean = r_x = None
    if plan.statistics == "batch" and not plan.centres_on_mean or np.any(r_dy > 1.0):
        # x's repetition counts where dy's does (the terms dy (x - M)) or for the batch mean
        x_stats, rows, perm = slice_statistics(slicing, inputs[plan.input], exactness=False)
        r_x = x_stats.repetition
        batch_mean = x_stats.mean if plan.statistics == "batch" and not plan.centres_on_mean else None
    else:
        rows, perm, _ = input_rows(slicing, inputs[plan.input])
    mean = _per_slice_values(slicing, inputs[plan.mean])
    var = _per_slice_values(slicing, inputs[plan.variance])
    centre = mean if batch_mean is None else batch_mean
    sums = gradient_sums(rows, dy_rows, mean, centre)
    ve = var + plan.epsilon
    repeats = Repetition(r_dy, r_dy if r_x is None else r_x)  # r_dy 1: min(r_dy, r_x) is 1 whatever r_x is
    st = slice_errors(
        plan,
        GradientSums(*(sums[:, c] for c in range(jk.N_GRADIENT_SUMS))),
        mean,
        batch_mean,
        ve,
        co,
        u,
        repeats,
    )
    cu, cmu = co.pointwise * u, co.mean * u
    zero = np.zeros_like(var)
    p_term, q_term = zero, zero
    if st.e_xc is not None:
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            p_term = (
                (cu + cmu * st.g_dy) * st.abs_dy
                + st.e_xc * np.abs(st.c1) / ve
                + st.e_xc * st.e_xc * st.abs_dy / ve
            )
            q_term = (cu + cmu * st.g_dyx) * st.abs_c1 / ve + st.e_xc * st.abs_dy / ve
    with np.errstate(invalid="ignore"):
        inverse_sd = _inverse(np.sqrt(ve))
    return SliceTerms(
        slicing, rows, perm, (plan.scale, None, None), per_slice(centre), per_slice(inverse_sd), p_term, zero,
        q_term, weight=dy_rows, c_w=cu, z_rounds=False, model=GradientTerms(plan, st.e_scale, st.e_bias),
    )  # fmt: skip


@dataclass(frozen=True)
class CompiledCase:
    """A case the compiled judge takes: the kernel's plan and the function that makes its
    model's per-slice terms."""

    plan: Any
    terms: Callable[[Any, dict[str, Any], Any, float], SliceTerms]

    @property
    def output(self) -> str:
        return str(self.plan.output)


def _branch_tables(plan: KernelPlan, spec: Spec) -> tuple[np.ndarray, np.ndarray]:
    act = spec.activations.get(plan.activation) if plan.activation else None
    points = resolve_bounding_points(act, plan.activation_params) if act else []
    sides = np.zeros((len(points), 3))
    for i, b in enumerate(points):
        sides[i] = model_activation.activation(
            plan.activation,
            np.array([np.nextafter(b, -np.inf), b, np.nextafter(b, np.inf)]),
            plan.activation_params,
        )
    return np.asarray(points, dtype=np.float64), sides


def _cancellation(plan: KernelPlan, spec: Spec) -> tuple[np.ndarray, np.ndarray]:
    act = spec.activations.get(plan.activation) if plan.activation else None
    if act is None or act.cancellation is None:
        return np.zeros(0, np.int64), np.zeros(0)
    return postfix(act.cancellation, "x", dict(plan.activation_params))


@dataclass
class _ElementPass:
    """The element pass's results: per-item figures, the budgets it stored (slice order), and
    what the verdict and the statistics outputs take from the model."""

    fig: np.ndarray
    store: np.ndarray
    items: tuple[np.ndarray, np.ndarray, np.ndarray]  # (slice, first, end) of each work item
    n_slice: int
    co: Any
    terms: SliceTerms


def _element_pass(
    desc: OperatorDesc,
    got: np.ndarray,
    ref: np.ndarray,
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
    jp: CompiledCase,
    keep_budgets: bool,
    sample: int = 0,
    terms: SliceTerms | None = None,
) -> _ElementPass:
    """The model's per-slice terms and the compiled element pass over every element, or over
    the first ``sample`` elements in slice order (:func:`sample_budgets`). ``terms``: the
    terms an earlier pass on these inputs with these coefficients made (not recomputed)."""
    from dmlconform.reference.compiled import run_chunks
    from dmlconform.tolerance import judge_compiled as jk

    plan = jp.plan
    tol = spec.operator(desc.operator).tolerance
    co = tl.coefficients(tol, desc.get(plan.output, spec).data_type, plan.activation, tolerance)
    u = tl.UNIT_ROUNDOFF[co.working_precision]
    t = terms if terms is not None else jp.terms(plan, inputs, co, u)
    tensors, half = _tensor_arguments(t, got, ref)
    model = _model_arguments(t, inputs, plan, spec, co, u)
    output = _output_arguments(co)
    k_len, m_len, l_len = t.rows[3]
    n_slice = m_len * l_len
    items = sample_items(k_len, n_slice, sample) if sample else work_items(k_len, n_slice)
    fig = np.empty((items[0].size, jk.N_FIGURES))
    # pages a sample does not reach are never touched, so never resident
    store = np.empty(k_len * n_slice if keep_budgets else 0)

    def call(i0: int, i1: int) -> None:
        item_k, item_p0, item_p1 = (a[i0:i1] for a in items)
        jk.judge_normalization(
            *tensors, item_k, item_p0, item_p1, l_len, n_slice, *model, half, *output, fig[i0:i1], store
        )

    run_chunks(items[0].size, t.rows[0].size, call)
    fig = fig if sample else merge_items(fig, items[0], k_len)
    return _ElementPass(fig, store, items, n_slice, co, t)


def _tensor_arguments(t: SliceTerms, got: np.ndarray, ref: np.ndarray) -> tuple[tuple[Any, ...], bool]:
    """The element pass's per-element tensors as it addresses them: the input, the weight
    (the gradients' dy, else the input again), the answer and the reference (float32 rows and
    their bits, in the terms' slice order); and whether the output is FLOAT16."""
    x_flat, x_sk, x_sm, shape = t.rows
    w_flat, w_sk, w_sm, _ = t.weight or t.rows
    n_kept = len(t.slicing.kept_axes)
    got32, half = _as_float32(np.asarray(got).astype(np.asarray(ref).dtype, copy=False))
    ref32, _ = _as_float32(ref)
    g_flat, g_sk, g_sm, _ = _slice_rows(got32, t.perm, n_kept, shape)
    r_flat, r_sk, r_sm, _ = _slice_rows(ref32, t.perm, n_kept, shape)
    tensors = (
        x_flat, x_sk, x_sm, w_flat, w_sk, w_sm, g_flat, g_flat.view(np.int32), g_sk, g_sm,
        r_flat, r_flat.view(np.int32), r_sk, r_sm,
    )  # fmt: skip
    return tensors, half


def _model_arguments(
    t: SliceTerms, inputs: dict[str, Any], plan: KernelPlan, spec: Spec, co: Any, u: float
) -> tuple[Any, ...]:
    """The element pass's model arguments after the work items: the operands (Scale, Bias,
    FusedAdd), the centre and 1 / sd, the per-slice terms, the pointwise coefficients and the
    fused activation's tables."""
    c_dev = np.broadcast_to(np.asarray(t.c_dev, np.float64), t.e_mean.shape).copy()
    zero = np.zeros_like(t.e_mean)
    ceiling, d_shift, d_rel, unit = t.ceiling or (math.nan, zero, zero, zero)
    operands = [
        _factor(inputs[name] if name else None, t.slicing, t.perm, fill)
        for name, fill in zip(t.operands, (1.0, 0.0, 0.0), strict=True)
    ]
    code, pa, pb = activation_args(plan.activation, plan.activation_params)
    branch, sides = _branch_tables(plan, spec)
    canc_ops, canc_consts = _cancellation(plan, spec)
    return (
        *operands[0], *operands[1], *operands[2], *t.centre, *t.inverse_sd,
        t.e_mean, t.rel_sd, c_dev, d_shift, d_rel, unit,
        co.pointwise, u, t.c_w, t.z_rounds, t.dev_folded, ceiling, code, pa, pb,
        co.activation_ulps, co.cancellation, canc_ops, canc_consts, branch, sides,
        tl.CURVED_FROM, tl.CURVATURE_RTOL,
    )  # fmt: skip


def _output_arguments(co: Any) -> tuple[float, float, float, float, bool]:
    """The element pass's output coefficients: (ulp_scale, output_ulps, atol, max_ulp or NaN,
    whether a fixed ULP budget replaces the model)."""
    return (
        co.ulp_scale,
        co.output_ulps,
        co.atol,
        math.nan if co.max_ulp is None else co.max_ulp,
        co.max_ulp is not None,
    )


def judge_normalization(
    desc: OperatorDesc,
    got: np.ndarray,
    ref: np.ndarray,
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
    budget_out: np.ndarray | None = None,
    plan: CompiledCase | None = None,
    terms: SliceTerms | None = None,
) -> tuple[Any, ModelTerms | None]:
    """A normalization model's comparison of the main output, compiled. Returns the
    :class:`~dmlconform.tolerance.OutputComparison` of the main output and the centred model's
    per-slice terms, which the numpy model's statistics-output budgets take (None for the
    other models: they have no statistics outputs). ``budget_out``: a float64 array of the
    output's shape that receives every budget (tests); ``plan``: the registry's judge plan
    (:func:`plan_for` and its kind), the centred model's by default; ``terms``: its per-slice
    terms on these inputs without tolerance options where :func:`sample_budgets` made them."""
    from dmlconform.tolerance import judge_compiled as jk

    jp = plan or CompiledCase(normalization.build_plan(desc, spec), _centred_terms)
    p = _element_pass(desc, got, ref, inputs, spec, tolerance, jp, budget_out is not None, terms=terms)
    slicing = p.terms.slicing
    if budget_out is not None:
        logical = p.store.reshape(tuple(slicing.shape[i] for i in p.terms.perm))
        budget_out[...] = logical.transpose(tuple(np.argsort(p.terms.perm)))
    out = _member_from_figures(jp.output, p.fig, slicing, p.co, np.asarray(ref).dtype)
    if p.co.max_ulp is None and p.terms.aggregate is not None:
        shift, scale, grid = p.terms.aggregate
        sums = p.fig[:, jk.F_AA : jk.F_BEND2 + 1].T
        out.aggregate = tl.aggregate_from_sums(
            sums, shift, scale, p.co, grid, p.terms.slicing.normalize_variance
        )
    return out, p.terms.model


def sample_items(k_len: int, n_slice: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slice, first, end) of the first ``count`` elements in slice order (at least one slice's
    first element)."""
    if n_slice >= count:
        return np.zeros(1, np.int64), np.zeros(1, np.int64), np.full(1, count, np.int64)
    whole = min(k_len, count // n_slice)
    return np.arange(whole, dtype=np.int64), np.zeros(whole, np.int64), np.full(whole, n_slice, np.int64)


def sample_budgets(
    desc: OperatorDesc,
    reference: dict[str, Any],
    inputs: dict[str, Any],
    spec: Spec,
    plan: CompiledCase,
    count: int,
) -> tuple[np.ndarray, np.ndarray, SliceTerms]:
    """The main output's budgets at its first ``count`` elements in the kernel's slice order:
    (their C-order flat indices, their budgets, the per-slice terms, which the comparison of
    the same case takes back). What a question about some element needs
    (:mod:`dmlconform.tolerance.degenerate`: is some element judged, does an answer fail
    somewhere) without the pass over every element."""
    ref = reference[plan.output]
    p = _element_pass(desc, ref, ref, inputs, spec, NO_OPTIONS, plan, True, sample=count)
    item_k, item_p0, item_p1 = p.items
    ks = np.repeat(item_k, item_p1 - item_p0)
    pos = np.concatenate([np.arange(a, b) for a, b in zip(item_p0, item_p1, strict=True)])
    slicing = p.terms.slicing
    kept_shape = tuple(slicing.shape[i] for i in slicing.kept_axes)
    red_shape = tuple(slicing.shape[i] for i in slicing.axes)
    at = logical_index(ks, pos, slicing, kept_shape, red_shape)
    return at, p.store[ks * p.n_slice + pos], p.terms


def _member_from_figures(member: str, fig: np.ndarray, plan: KernelPlan, co: Any, dtype: np.dtype) -> Any:
    from dmlconform.tolerance import judge_compiled as jk

    k, index = worst_of(fig, plan)
    row = fig[k]
    return tl.member_comparison(
        member,
        failing=int(fig[:, jk.F_FAIL].sum()),
        max_ulp=float(fig[:, jk.F_ULP].max()),
        max_abs=float(fig[:, jk.F_ABS].max()),
        index=index,
        got=float(row[jk.F_GOT]),
        ref=float(row[jk.F_REF]),
        budget=float(row[jk.F_BUDGET]),
        ratio=float(row[jk.F_RATIO]),
        co=co,
        dtype=dtype,
    )


def _takes(plan: Any, outputs_backend: dict[str, Any], outputs_reference: dict[str, Any],
           inputs: dict[str, Any]) -> bool:  # fmt: skip
    """Whether the compiled judge takes this comparison: a large floating input, and outputs of
    the plan's shape (the numpy path words a mismatch)."""
    x = np.asarray(inputs.get(plan.input))
    if x.size < KERNEL_MIN_ELEMENTS or x.dtype not in _FLOATS:
        return False
    got, ref = outputs_backend.get(plan.output), outputs_reference.get(plan.output)
    if not isinstance(got, np.ndarray) or got.shape != tuple(plan.shape) or got.dtype.kind != "f":
        return False
    return isinstance(ref, np.ndarray) and ref.dtype in _FLOATS and ref.shape == got.shape


def _plan_if_taken(
    make: Callable[[OperatorDesc, Spec], Any],
    terms: Callable[[Any, dict[str, Any], Any, float], SliceTerms],
    desc: OperatorDesc,
    outputs_backend: dict[str, Any],
    outputs_reference: dict[str, Any],
    inputs: dict[str, Any],
    spec: Spec,
) -> CompiledCase | None:
    """A kernel's ``judge`` part: the plan ``make`` builds and the model's ``terms`` when the
    compiled judge takes this comparison; None when the numpy model does (small cases,
    mismatched outputs, a desc the plan builder refuses)."""
    try:
        plan = make(desc, spec)
    except PlanError:
        return None
    return CompiledCase(plan, terms) if _takes(plan, outputs_backend, outputs_reference, inputs) else None


def plan_for(desc: OperatorDesc, outputs_backend: dict[str, Any], outputs_reference: dict[str, Any],
             inputs: dict[str, Any], spec: Spec) -> CompiledCase | None:  # fmt: skip
    """The centred normalization kernel's ``judge`` part (:func:`_plan_if_taken`)."""
    return _plan_if_taken(
        normalization.build_plan, _centred_terms, desc, outputs_backend, outputs_reference, inputs, spec
    )


def rms_plan_for(desc: OperatorDesc, outputs_backend: dict[str, Any], outputs_reference: dict[str, Any],
                 inputs: dict[str, Any], spec: Spec) -> CompiledCase | None:  # fmt: skip
    """The RMS normalization kernel's ``judge`` part."""
    return _plan_if_taken(
        rms_normalization.build_plan,
        _rms_terms,
        desc,
        outputs_backend,
        outputs_reference,
        inputs,
        spec,
    )


def given_plan_for(desc: OperatorDesc, outputs_backend: dict[str, Any], outputs_reference: dict[str, Any],
                   inputs: dict[str, Any], spec: Spec) -> CompiledCase | None:  # fmt: skip
    """The given-statistics kernel's ``judge`` part."""
    return _plan_if_taken(
        given_statistics.build_plan, _given_terms, desc, outputs_backend, outputs_reference, inputs, spec
    )


def gradient_plan_for(desc: OperatorDesc, outputs_backend: dict[str, Any], outputs_reference: dict[str, Any],
                      inputs: dict[str, Any], spec: Spec) -> CompiledCase | None:  # fmt: skip
    """The batch-normalization gradients' kernel's ``judge`` part."""
    return _plan_if_taken(
        normalization_grad.build_plan, _gradient_terms, desc, outputs_backend, outputs_reference, inputs, spec
    )
