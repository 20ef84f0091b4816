"""Input data for a desc, in named regimes that expose real implementation bugs.

Every regime draws in float64, rounds once to the tensor's data type and returns arrays in that
type, so the inputs are exact: the reference and the backend see the same numbers. Arrays have
the tensor's logical shape (its Sizes, C-contiguous); buffer layout is ``dmlconform.specification.layout``'s
job. One exception to "any values": an input with a zero stride reads one element for a whole
dimension, so its array is made constant along that dimension (otherwise no buffer could hold it).

Which tensor is the normalized input, the Scale, the Bias, which axes are reduced, Epsilon and the
fused activation are all read from the operator's ``semantics`` in the spec; nothing here names an
operator.

Regimes (:data:`REGIMES`):

- ``standard_normal``: N(0, 1).
- ``large_offset``: per reduction slice, |mean| / std = kappa up to :data:`KAPPA_LIMIT` (1e3 for
  FLOAT32, 1e2 for FLOAT16): cancellation in one-pass variance.
- ``spread_near_sqrt_eps``: std of each slice within [0.3, 3] * sqrt(Epsilon): whether Epsilon is
  added inside the square root, and where.
- ``constant_slices``: some reduction slices constant (zero variance; division by sqrt(Epsilon)).
  Not with Epsilon 0 where the variance is divided out: 0 / 0 is undefined.
- ``short_reduction``: applies to descs whose reduction has 1 or 2 elements (make them with
  ``reductions.reduction_descs``): biased vs unbiased variance.
- ``long_reduction``: applies to descs whose reduction has >= 10^5 elements (make one with
  ``reductions.long_reduction_desc``); offset data, so accumulation error shows.
- ``fp16_square_overflow``: FLOAT16 only: every |x| in [400, 48000], so x*x overflows FLOAT16 while
  x - mean stays representable: statistics kept in fp16 break.
- ``all_negative``: strictly negative values (NaN-for-negative-input bugs).
- ``activation_branches``: the pre-activation value (Scale * z + Bias + FusedAdd) lands near each
  branch point of the fused activation (``branch_points`` in the spec, possibly a parameter):
  each slice is +-a pairs, half of them tiny (plus a 0 when odd), so some z are ~0 whatever the
  spread, and Bias (or FusedAdd) holds a branch point per element. Not for 2-element reductions
  (z is always +-1 there); without Bias/FusedAdd only the branch point 0 is reachable.
- ``exact_statistics``: every reduction exact in float32 in any order, at every n (after
  oneDNN's benchdnn, which fills normalization inputs so; this is its own construction): each
  slice is c + a_i on a lattice of 2^s, the a_i integer +-pairs (plus a 0, or a (-2, 1, 1)
  triple, when odd), so the sum is n c exactly, the mean c, the deviations a_i 2^s, and every
  partial sum of the values and of the squared deviations an integer below 2^23 lattice steps;
  past that length the slice is sparse (most a_i 0). The budget then holds only the elementwise
  steps (``tolerance.normalization.exact_slices``). FLOAT16 slices that are short enough centre
  half a FLOAT16 ULP off a FLOAT16 number (c odd, 2049 <= c < 4096, values even): statistics
  stored as FLOAT16 move the mean by a whole lattice step, which only the ``fp16-statistics``
  model admits.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmlconform.errors import PlanError
from dmlconform.generation.exact_statistics import exact_operand, exact_rows
from dmlconform.generation.reductions import reduction_axes, reduction_size
from dmlconform.kernels.base import MemberRoles, centres, member_roles, normalizes_variance, written_epsilon
from dmlconform.specification.desc import ActivationDesc, OperatorDesc, TensorDesc
from dmlconform.specification.slices import from_slices, slice_shape, to_slices
from dmlconform.specification.spec import Spec, resolve_branch_points

REGIMES: tuple[str, ...] = (
    "standard_normal",
    "large_offset",
    "spread_near_sqrt_eps",
    "constant_slices",
    "short_reduction",
    "long_reduction",
    "fp16_square_overflow",
    "all_negative",
    "activation_branches",
    "exact_statistics",
)

KAPPA_LIMIT: dict[str, float] = {"FLOAT32": 1e3, "FLOAT16": 1e2, "FLOAT64": 1e3}
"""The largest |mean| / std that ``large_offset`` produces, per data type."""

SCALE_MAGNITUDE = (0.5, 2.0)
"""|Scale| as drawn (either sign)."""
BIAS_MAGNITUDE = 1.0
"""|Bias| as drawn at most (outside ``activation_branches``, which puts it at branch points)."""

LONG_REDUCTION = 100_000
EXACT_TYPES = ("FLOAT32", "FLOAT16")
SHORT_REDUCTION = 2
FP16_SQUARE_RANGE = (400.0, 48_000.0)


class RegimeNotApplicable(ValueError):
    """The regime makes no sense for this desc (see :func:`regimes_for`)."""


# --------------------------------------------------------------------------------------------
# What the desc means, from the spec's semantics


def _roles(desc: OperatorDesc, spec: Spec) -> MemberRoles:
    return member_roles(spec.operator(desc.operator))


def _tensor(desc: OperatorDesc, name: str | None) -> TensorDesc | None:
    """The tensor a role names; None where it names none or the desc leaves it null."""
    t = desc.members.get(name) if name else None
    return t if isinstance(t, TensorDesc) else None


#: Epsilon as the desc writes it (the regimes draw spreads near its square root)
epsilon = written_epsilon


def activation(desc: OperatorDesc, spec: Spec) -> ActivationDesc | None:
    name = _activation_member(desc, spec)
    value = desc.members.get(name) if name else None
    return value if isinstance(value, ActivationDesc) else None


def _activation_member(desc: OperatorDesc, spec: Spec) -> str | None:
    """The member holding the fused activation, None where the operator has none."""
    return _roles(desc, spec).activation


def branch_points(desc: OperatorDesc, spec: Spec) -> list[float]:
    """The fused activation's branch points, parameters resolved (as written, else default)."""
    a = activation(desc, spec)
    act = spec.activations.get(a.type) if a else None
    if a is None or act is None:
        return []
    return resolve_branch_points(act, {p.name: p.default for p in act.parameters} | a.param_dict)


def _numpy_dtype(spec: Spec, dtype: str) -> np.dtype:
    name = spec.data_types[dtype].numpy
    if name is None:
        raise RegimeNotApplicable(f"data type {dtype} has no numpy equivalent")
    return np.dtype(name)


# --------------------------------------------------------------------------------------------
# Slices along the reduction axes


def standardize_along(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``x`` with each slice over ``axes`` at zero mean and unit (population) std, in place and
    in its own layout (a slice-ordered copy of a 2^26-element float64 tensor cost seconds);
    a slice of std 0 becomes 0."""
    x -= x.mean(axis=axes, keepdims=True)
    std = np.sqrt(np.square(x).mean(axis=axes, keepdims=True))
    np.divide(x, std, out=x, where=std > 0)
    np.copyto(x, 0.0, where=std == 0)
    return x


# --------------------------------------------------------------------------------------------
# Regimes


def regimes_for(desc: OperatorDesc, spec: Spec) -> list[str]:
    """The regimes that make sense for ``desc``, in :data:`REGIMES` order."""
    inp = _tensor(desc, _roles(desc, spec).input)
    if inp is None:
        return []
    n = reduction_size(desc, spec)
    out = ["standard_normal"]
    if n >= 2:
        out.append("large_offset")
    eps = epsilon(desc, spec)
    if eps and eps > 0 and normalizes_variance(desc, spec) and n >= 2:
        out.append("spread_near_sqrt_eps")
    if n >= 2 and not (normalizes_variance(desc, spec) and not eps):
        # with Epsilon 0 a constant slice divides 0 by 0, which the docs leave undefined
        out.append("constant_slices")
    if n <= SHORT_REDUCTION:
        out.append("short_reduction")
    if n >= LONG_REDUCTION:
        out.append("long_reduction")
    if inp.data_type == "FLOAT16":
        out.append("fp16_square_overflow")
    out.append("all_negative")
    if _branch_targets(desc, spec) and n != 2:  # two elements always normalize to +-1
        out.append("activation_branches")
    if n >= 2 and inp.data_type in EXACT_TYPES:
        out.append("exact_statistics")
    return out


def regime_desc(desc: OperatorDesc, regime: str, spec: Spec) -> OperatorDesc:
    """The desc a case of ``regime`` runs. ``exact_statistics`` runs without a fused activation
    (where the activation is an optional member): its cases exist to judge the normalization to
    a few ULP, and an activation's own error (several ULP for tanh, GELU, softplus) hides that;
    the other regimes draw the activations. A desc that neither centres nor divides keeps it:
    without it the case would compute its input (MVN2 with UseMean and NormalizeVariance false).
    Every other regime runs the desc as drawn."""
    name = _activation_member(desc, spec)
    if regime != "exact_statistics" or name is None or desc.members.get(name) is None:
        return desc
    member = spec.operator(desc.operator).member(name)
    nullable = member is not None and member.nullable
    try:
        normalizes = centres(desc, spec) or normalizes_variance(desc, spec)
    except PlanError:
        normalizes = False
    return desc.replace(**{name: None}) if nullable and normalizes else desc


def _branch_targets(desc: OperatorDesc, spec: Spec) -> list[float]:
    """Branch points the regime can reach: 0 always (z near 0, no Scale/Bias shift needed when
    Bias is absent), others only through a Bias or FusedAdd tensor."""
    points = branch_points(desc, spec)
    roles = _roles(desc, spec)
    shifter = _tensor(desc, roles.fused_add) or _tensor(desc, roles.bias)
    if shifter is not None and shifter.element_count >= len(points):
        return points
    return [p for p in points if p == 0.0]


def _rng(desc: OperatorDesc, regime: str, seed: int, draw: int = 0) -> np.random.Generator:
    """The stream of one draw; draw 0 is the stream every case had before redraws existed."""
    text = json.dumps(desc.to_dict(), sort_keys=True, default=str)
    key = [seed, zlib.crc32(regime.encode()), zlib.crc32(text.encode())]
    return np.random.default_rng(key + [draw] if draw else key)


@dataclass
class _MainDraw:
    """The normalized input being drawn for one regime: its compact array (standard normal at
    first, transformed in place, in its own layout: no slice-ordered copies) and the geometry of
    its reduction slices."""

    desc: OperatorDesc
    spec: Spec
    data_type: str
    rng: np.random.Generator
    base: np.ndarray
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    kept: tuple[int, ...]  # the shape with the reduced axes as 1: one value per slice
    n_slices: int
    m: int  # elements per slice (of the compact array)

    def per_slice(self, values: np.ndarray) -> np.ndarray:
        """Per-slice draws, (K, 1) as before, reshaped to broadcast over each slice's elements."""
        return np.reshape(values, self.kept)


def _main_input(desc: OperatorDesc, regime: str, rng: np.random.Generator, spec: Spec) -> np.ndarray:
    t = _tensor(desc, _roles(desc, spec).input)
    assert t is not None
    shape = _compact_shape(t)
    axes = reduction_axes(desc, spec)
    base = rng.standard_normal(shape)
    if regime in ("standard_normal", "short_reduction"):
        return base
    kept = slice_shape(shape, axes)
    draw = _MainDraw(
        desc,
        spec,
        t.data_type,
        rng,
        base,
        shape,
        axes,
        kept,
        math.prod(kept),
        math.prod(shape[a] for a in axes),
    )
    regime_draw = _MAIN_INPUT_DRAWS.get(regime)
    if regime_draw is None:
        raise RegimeNotApplicable(f"unknown regime {regime!r} (known: {', '.join(REGIMES)})")
    return regime_draw(draw)


def _large_offset(d: _MainDraw) -> np.ndarray:
    limit = KAPPA_LIMIT.get(d.data_type, 1e3)
    kappa = d.per_slice(limit * 10 ** d.rng.uniform(-1.0, 0.0, size=(d.n_slices, 1)))
    sign = d.per_slice(d.rng.choice([-1.0, 1.0], size=(d.n_slices, 1)))
    if d.data_type == "FLOAT16":
        std = np.ones(d.kept)  # offset <= 100, spacing there 0.0625
    else:
        std = d.per_slice(10 ** d.rng.uniform(-2.0, 2.0, size=(d.n_slices, 1)))
    x = standardize_along(d.base, d.axes) if d.m >= 2 else d.base
    x *= std
    x += sign * kappa * std
    return x


def _spread_near_sqrt_eps(d: _MainDraw) -> np.ndarray:
    eps = epsilon(d.desc, d.spec) or 0.0
    std = math.sqrt(eps) * 10 ** d.rng.uniform(math.log10(0.3), math.log10(3.0), size=(d.n_slices, 1))
    x = standardize_along(d.base, d.axes) if d.m >= 2 else d.base
    x *= d.per_slice(std)
    return x


def _constant_slices(d: _MainDraw) -> np.ndarray:
    const = d.rng.random(d.n_slices) < 0.5
    const[d.rng.integers(0, d.n_slices)] = True
    values = d.rng.uniform(-4.0, 4.0, size=d.n_slices)
    np.copyto(d.base, d.per_slice(values), where=d.per_slice(const))
    return d.base


def _long_reduction(d: _MainDraw) -> np.ndarray:
    d.base += 3.0
    return d.base


def _fp16_square_overflow(d: _MainDraw) -> np.ndarray:
    lo, hi = FP16_SQUARE_RANGE
    center = d.per_slice(np.exp(d.rng.uniform(math.log(2.5 * lo), math.log(hi / 1.6), size=(d.n_slices, 1))))
    spread = center * d.per_slice(d.rng.uniform(0.05, 0.3, size=(d.n_slices, 1)))
    sign = d.per_slice(d.rng.choice([-1.0, 1.0], size=(d.n_slices, 1)))
    base = d.base
    np.clip(base, -2.0, 2.0, out=base)
    base *= spread
    base += center
    np.clip(base, lo, hi, out=base)
    base *= sign
    return base


def _all_negative(d: _MainDraw) -> np.ndarray:
    base = d.base
    np.abs(base, out=base)
    base *= d.rng.uniform(0.5, 3.0)
    base += 0.05
    np.negative(base, out=base)
    return base


def _activation_branches(d: _MainDraw) -> np.ndarray:
    """+-a pairs (a zero mean that survives rounding) with half of the pairs tiny, plus a 0 when
    the slice is odd: those elements normalize to z ~ 0 whatever the spread."""
    s = to_slices(d.base, d.axes)
    k = d.m // 2
    a = np.abs(s[:, :k]) + 0.1
    a[:, : (k + 1) // 2] *= 1e-2
    parts = [a, -a] + ([np.zeros((s.shape[0], 1))] if d.m % 2 else [])
    return from_slices(d.rng.permuted(np.concatenate(parts, axis=1), axis=1), d.shape, d.axes)


def _exact_statistics(d: _MainDraw) -> np.ndarray:
    n = reduction_size(d.desc, d.spec)  # the broadcast repeats each compact element n / m times
    rows = exact_rows(d.rng, d.n_slices, d.m, n, d.data_type, epsilon(d.desc, d.spec) or 0.0)
    return from_slices(rows, d.shape, d.axes)


_MAIN_INPUT_DRAWS: dict[str, Callable[[_MainDraw], np.ndarray]] = {
    "large_offset": _large_offset,
    "spread_near_sqrt_eps": _spread_near_sqrt_eps,
    "constant_slices": _constant_slices,
    "long_reduction": _long_reduction,
    "fp16_square_overflow": _fp16_square_overflow,
    "all_negative": _all_negative,
    "activation_branches": _activation_branches,
    "exact_statistics": _exact_statistics,
}
"""How each regime transforms the standard normal draw of the normalized input (standard_normal
and short_reduction keep it)."""


def effective_reduction_size(desc: OperatorDesc, spec: Spec) -> int:
    """The number of distinct input elements a reduction slice reads: ``reduction_size`` less
    the reduced dimensions the input broadcasts (zero strides): 1 where every slice is one value
    repeated, whatever the data."""
    t = _tensor(desc, _roles(desc, spec).input)
    if t is None:
        return 0
    compact = _compact_shape(t)
    return math.prod(compact[a] for a in reduction_axes(desc, spec))


def _compact_shape(t: TensorDesc) -> tuple[int, ...]:
    """The tensor's Sizes with 1 where its stride is 0: an input with a zero stride holds one
    value along that dimension, so the regime draws the compact array and it is broadcast
    afterwards (duplicating elements keeps each slice's mean, spread and constancy)."""
    if t.strides is None or len(t.strides) != len(t.sizes):
        return t.sizes
    return tuple(1 if st == 0 else s for s, st in zip(t.sizes, t.strides, strict=True))


def make_inputs(
    desc: OperatorDesc, regime: str, seed: int = 0, *, spec: Spec, draw: int = 0
) -> dict[str, np.ndarray]:
    """Arrays for every present input tensor member of ``desc``, in the member's data type and
    logical shape. Raises :class:`RegimeNotApplicable` for a regime not in
    ``regimes_for(desc)``. ``draw``: another draw of the same regime, for a case whose first
    judges nothing (``dmlconform.tolerance.degenerate``)."""
    if regime not in REGIMES:
        raise RegimeNotApplicable(f"unknown regime {regime!r} (known: {', '.join(REGIMES)})")
    if regime not in regimes_for(desc, spec):
        raise RegimeNotApplicable(f"regime {regime} does not apply to this desc")
    op = spec.operator(desc.operator)
    roles = member_roles(op)
    rng = _rng(desc, regime, seed, draw)
    targets = _branch_targets(desc, spec) if regime == "activation_branches" else []
    shifter = roles.fused_add if _tensor(desc, roles.fused_add) else roles.bias
    out: dict[str, np.ndarray] = {}
    for m in op.input_members:
        t = _tensor(desc, m.name)
        if t is None:
            continue
        shape = _compact_shape(t)
        if m.name == roles.input:
            x = _main_input(desc, regime, rng, spec)
            if roles.batch_statistics:
                x = _fit_batch_statistics(desc, roles, x, rng, spec)
        else:
            x = _operand(m.name, roles, regime, rng, shape, targets, shifter)
        arr = np.asarray(x, dtype=np.float64).astype(_numpy_dtype(spec, t.data_type)).reshape(shape)
        out[m.name] = np.ascontiguousarray(np.broadcast_to(arr, t.sizes))
    if roles.statistics_from_input and roles.input in out:
        _statistics_from_input(desc, roles, out, spec)
    return out


def _operand(
    name: str,
    roles: MemberRoles,
    regime: str,
    rng: np.random.Generator,
    shape: tuple[int, ...],
    targets: list[float],
    shifter: Any,
) -> np.ndarray:
    """The compact array of an input other than the normalized one, by the role it plays (Scale, Bias, FusedAdd, a variance); ``shifter`` is the member that moves the
    pre-activation value onto the branch points ``targets`` (FusedAdd where present, else
    Bias)."""
    if regime == "exact_statistics" and name in roles.operands:
        return exact_operand(rng, shape, scale=name == roles.scale)
    if name == roles.scale:
        return rng.uniform(*SCALE_MAGNITUDE, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    if regime == "activation_branches" and name == shifter and targets:
        x = rng.permutation(np.resize(np.asarray(targets), math.prod(shape))).reshape(shape)
        return x + rng.uniform(-1e-3, 1e-3, size=shape)
    if regime == "activation_branches" and name in (roles.bias, roles.fused_add):
        return np.zeros(shape)
    if name == roles.bias:
        return rng.uniform(-BIAS_MAGNITUDE, BIAS_MAGNITUDE, size=shape)
    if name == roles.variance:
        return rng.uniform(0.25, 4.0, size=shape)  # a variance: never negative
    return rng.standard_normal(shape)


def slice_statistics(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population variance over ``axes`` (kept as 1s), taken around each slice's first
    element: exact for a constant slice (mean = its value, variance 0), which a plain float64
    mean of n equal values need not be."""
    shift = x[tuple(slice(0, 1) if i in axes else slice(None) for i in range(x.ndim))]
    d = x - shift
    m = d.mean(axis=axes, keepdims=True)
    return shift + m, ((d - m) ** 2).mean(axis=axes, keepdims=True)


def _statistics_tensors(desc: OperatorDesc, roles: MemberRoles, rank: int) -> list[tuple[str, TensorDesc]]:
    """(member, tensor) of the Mean and Variance inputs the desc sets at the input's rank."""
    out = []
    for name in (roles.mean, roles.variance):
        t = _tensor(desc, name)
        if name and t is not None and len(t.sizes) == rank:
            out.append((name, t))
    return out


def shared_statistics_axes(desc: OperatorDesc, spec: Spec) -> tuple[int, ...]:
    """Input dimensions that are not reduced but along which a statistics input holds one value
    (a zero stride): every slice along them is given the same mean and variance."""
    roles = _roles(desc, spec)
    inp = _tensor(desc, roles.input)
    if inp is None:
        return ()
    compact_in = _compact_shape(inp)
    reduced = set(reduction_axes(desc, spec))
    dims: set[int] = set()
    for _, t in _statistics_tensors(desc, roles, len(inp.sizes)):
        dims |= {
            i for i, s in enumerate(_compact_shape(t)) if s == 1 and i not in reduced and compact_in[i] > 1
        }
    return tuple(sorted(dims))


def _fit_batch_statistics(
    desc: OperatorDesc, roles: MemberRoles, x: np.ndarray, rng: np.random.Generator, spec: Spec
) -> np.ndarray:
    """The compact main input (float64, before rounding) reshaped so that the statistics inputs
    can be its slices' own statistics, which the formula reads (mean(Input) over the reduced
    dimensions):

    - slices that share one statistics element (along :func:`shared_statistics_axes`) become
      random permutations of the first of them: the same values, so the same mean and variance
      exactly, in a different order (a stats tensor broadcast over a dimension the operator does
      not reduce cannot hold a different mean per slice, and averaging the slices' means would
      give none of them its own);
    - a slice whose variance the variance input's data type cannot hold (FLOAT16 past 65504 /
      4) has its deviations from its mean scaled down until it can."""
    axes = reduction_axes(desc, spec)
    shared = shared_statistics_axes(desc, spec)
    if shared:
        first = x[tuple(slice(0, 1) if i in shared else slice(None) for i in range(x.ndim))]
        rows = rng.permuted(to_slices(np.broadcast_to(first, x.shape), axes), axis=1)
        x = from_slices(rows, x.shape, axes)
    limits = [
        float(np.finfo(_numpy_dtype(spec, t.data_type)).max) / 4.0
        for name, t in _statistics_tensors(desc, roles, x.ndim)
        if name == roles.variance
    ]
    if limits:
        mean = x.mean(axis=axes, keepdims=True)
        var = np.square(x - mean).mean(axis=axes, keepdims=True)
        limit = min(limits)
        shrink = np.sqrt(limit / np.where(var > limit, var, limit))
        x = mean + (x - mean) * shrink
    return x


def _statistics_from_input(
    desc: OperatorDesc, roles: MemberRoles, out: dict[str, np.ndarray], spec: Spec
) -> None:
    """``semantics.statistics_from_input``: the mean and variance inputs are the input's own
    statistics, rounded to their type, as a framework feeds them: so each regime's conditioning
    (large offsets, spreads near sqrt(Epsilon), constant slices) reaches the computation.

    With batch statistics (the formula reads mean(Input): ``MemberRoles.batch_statistics``) they are
    exactly each slice's statistics over the reduced dimensions: the input itself and a variance
    of 0 for a reduction over one element, and the one value shared along a broadcast dimension
    (:func:`_fit_batch_statistics` made the slices there equal). With given statistics they are
    realistic values only, over the dimensions where each tensor holds one value (size 1 or a
    zero stride); where that is no dimension, the drawn values stay."""
    x = out[roles.input].astype(np.float64)
    batch = roles.batch_statistics
    reduced = reduction_axes(desc, spec) if batch else ()
    eps = epsilon(desc, spec)
    for name, t in _statistics_tensors(desc, roles, x.ndim):
        if name not in out:
            continue
        compact = _compact_shape(t)
        ones = tuple(i for i, s in enumerate(compact) if s == 1 and x.shape[i] > 1)
        axes = reduced if batch else ones
        if not batch and not axes:  # given statistics, one value per element: keep the draw
            continue
        mean, var = slice_statistics(x, axes)
        value = mean if name == roles.mean else var
        if batch:  # along a shared dimension every slice has these statistics: take the first
            value = value[tuple(slice(0, 1) if i in ones else slice(None) for i in range(x.ndim))]
        with np.errstate(over="ignore"):
            arr = value.astype(_numpy_dtype(spec, t.data_type))
        if not np.all(np.isfinite(arr)):  # a FLOAT16 variance past 65504 cannot be fed: keep the draw
            continue
        if not batch and name == roles.variance and np.any(arr.astype(np.float64) + (eps or 0.0) == 0):
            continue  # realistic, but Variance + Epsilon = 0 is undefined: keep the draw
        out[name] = np.ascontiguousarray(np.broadcast_to(arr, t.sizes))
