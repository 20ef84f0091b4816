"""The ``numpy`` backend: a straightforward FLOAT32 implementation, what a typical port does.

It is independent of the float64 reference (no shared kernels, different precision), so the
suite has something realistic to measure: inputs are cast to float32, the mean and the
population variance are computed by numpy in float32 (two passes) over the reduce axes, then
normalize, scale, bias, fused add, activation, and a cast to the output type. The other kernels
(given statistics, the gradients, local response, Lp) are their documented formulas in the same
plain float32 style, with their own window sums and norms. Every lowering reads the desc through
the public plan (``dc.plan``); no operator is named here.

Each step is a method so that the deliberately broken backends (``broken.py``) can each replace
exactly one of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

import dmlconform as dc
from dmlconform.backends import FEATURE_LEVEL_OPTION, BackendBase, Option, validate_or_reject

F32 = np.float32
_erf = np.frompyfunc(math.erf, 1, 1)
#: from this size on erf runs compiled (numba's math.erf, vectorized): math.erf per element
#: took 12 s of a 2^26-element case; below it, no compilation (a small run stays cold-start fast)
COMPILED_ERF_MIN = 1 << 16


def _erf64(v: np.ndarray) -> np.ndarray:
    if v.size < COMPILED_ERF_MIN:
        return _erf(v).astype(np.float64)
    from dmlconform.backends.compiled_erf import erf

    return erf(v)


def _gelu(x: np.ndarray, p: Mapping[str, float]) -> np.ndarray:
    # numpy has no erf; the C library's erf in float64 is what a port would use, exact to well
    # below FLOAT32's rounding
    e = _erf64(x.astype(np.float64) / math.sqrt(2.0)).astype(F32)
    return F32(0.5) * x * (F32(1.0) + e)


def _shrink(x: np.ndarray, p: Mapping[str, float]) -> np.ndarray:
    bias, threshold = F32(p["Bias"]), F32(p["Threshold"])
    return np.where(x > threshold, x - bias, np.where(x < -threshold, x + bias, F32(0.0))).astype(F32)


def _celu(x: np.ndarray, p: Mapping[str, float]) -> np.ndarray:
    a = F32(p["Alpha"])
    return np.maximum(F32(0.0), x) + np.minimum(F32(0.0), a * np.expm1(x / a))


#: ACTIVATION_X -> f(x float32, parameters with defaults applied) -> float32. Formulas from
#: spec/common/activations.yaml; softplus uses logaddexp so that it does not overflow to inf.
ACTIVATIONS: dict[str, Callable[[np.ndarray, Mapping[str, float]], np.ndarray]] = {
    "ACTIVATION_IDENTITY": lambda x, p: x,
    "ACTIVATION_LINEAR": lambda x, p: F32(p["Alpha"]) * x + F32(p["Beta"]),
    "ACTIVATION_SIGMOID": lambda x, p: F32(1.0) / (F32(1.0) + np.exp(-x)),
    "ACTIVATION_HARD_SIGMOID": lambda x, p: np.maximum(
        F32(0.0), np.minimum(F32(p["Alpha"]) * x + F32(p["Beta"]), F32(1.0))
    ),
    "ACTIVATION_TANH": lambda x, p: np.tanh(x),
    "ACTIVATION_SCALED_TANH": lambda x, p: F32(p["Alpha"]) * np.tanh(F32(p["Beta"]) * x),
    "ACTIVATION_RELU": lambda x, p: np.maximum(F32(0.0), x),
    "ACTIVATION_LEAKY_RELU": lambda x, p: np.where(x >= 0, x, F32(p["Alpha"]) * x),
    "ACTIVATION_THRESHOLDED_RELU": lambda x, p: np.where(x > F32(p["Alpha"]), x, F32(0.0)),
    "ACTIVATION_ELU": lambda x, p: np.where(x >= 0, x, F32(p["Alpha"]) * np.expm1(x)),
    "ACTIVATION_SCALED_ELU": lambda x, p: (
        F32(p["Gamma"]) * np.where(x > 0, x, F32(p["Alpha"]) * np.exp(x) - F32(p["Alpha"]))
    ),
    "ACTIVATION_SOFTPLUS": lambda x, p: np.logaddexp(F32(0.0), F32(p["Steepness"]) * x) / F32(p["Steepness"]),
    "ACTIVATION_PARAMETRIC_SOFTPLUS": lambda x, p: (
        F32(p["Alpha"]) * np.logaddexp(F32(0.0), F32(p["Beta"]) * x)
    ),
    "ACTIVATION_SOFTSIGN": lambda x, p: x / (F32(1.0) + np.abs(x)),
    "ACTIVATION_SHRINK": _shrink,
    "ACTIVATION_CELU": _celu,
    "ACTIVATION_GELU": _gelu,
}


def slice_rows(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``x`` as (slices, elements per slice): the reduced axes moved last and flattened."""
    keep = [i for i in range(x.ndim) if i not in axes]
    return np.transpose(x, keep + list(axes)).reshape(-1, math.prod(x.shape[a] for a in axes))


def reduce_sum(x: np.ndarray, axes: tuple[int, ...], dtype: type, mean: bool = False) -> np.ndarray:
    """Sum (or mean) over ``axes``, kept as 1s, summed pairwise.

    numpy sums pairwise only along a contiguous innermost axis; over strided or outer axes it
    adds sequentially, which at long reductions errs past the suite's required (blocked
    summation) accuracy. So the reduced axes are moved last and made one contiguous row first,
    as a careful port lays out a reduction."""
    x = np.asarray(x)
    if not axes:
        return x.astype(dtype)
    rows = np.ascontiguousarray(slice_rows(x, axes))
    total = rows.mean(axis=1, dtype=dtype) if mean else rows.sum(axis=1, dtype=dtype)
    return total.reshape([1 if i in axes else s for i, s in enumerate(x.shape)])


class NumpyBackend(BackendBase):
    """Float32 numpy implementation; validates descs with the spec's validator in ``check``."""

    name: ClassVar[str] = "numpy"
    OPTIONS: ClassVar[tuple[Option, ...]] = (FEATURE_LEVEL_OPTION,)
    #: the dtype statistics and the normalization are computed in
    compute_dtype: ClassVar[type] = np.float32
    #: check() below rejects every desc illegal at feature_level: run the validation cases
    validates: ClassVar[bool] = True

    # -- protocol ---------------------------------------------------------------------------

    def check(self, desc: dc.OperatorDesc) -> None:
        """Rejected (with the rule ids) for a desc illegal at this backend's feature level."""
        validate_or_reject(desc, self.feature_level, self.spec)

    def execute(self, desc: dc.OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        plan = dc.plan(desc, self.spec)
        with np.errstate(all="ignore"):
            values = LOWERINGS[plan.kernel](self, plan, inputs)
        self._last_info = {"path": f"numpy-{plan.kernel}", "compute_dtype": np.dtype(self.compute_dtype).name}
        if isinstance(plan, dc.NormalizationPlan):
            self._last_info.update(path="numpy", axes=list(self.reduce_axes(plan)))
        return plan.finish(values)

    def _normalization(
        self, plan: dc.NormalizationPlan, inputs: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """The centred normalization, one overridable step per method."""
        x = self.load(inputs, plan, plan.input)
        axes = self.reduce_axes(plan)
        mean, var = self.statistics(x, axes)
        y = self.normalize(x, mean, var, plan)
        y = self.scale_bias(y, inputs, plan)
        y = self.add_and_activate(y, inputs, plan)
        mean, var = self.reported_statistics(mean, var, x, axes)
        values: dict[str, np.ndarray] = {plan.output: y}
        if plan.mean_output:
            values[plan.mean_output] = mean
        if plan.variance_output:
            values[plan.variance_output] = var
        return values

    # -- the neighbourhood and norm kernels' steps -------------------------------------------

    def lrn_window(self, plan: dc.LocalResponsePlan) -> tuple[int, int]:
        """(below, above): how far the window reaches on each side (the plan's)."""
        return plan.below, plan.above

    def lrn_alpha(self, plan: dc.LocalResponsePlan, dt: type) -> np.floating:
        """What the window's sum of squares is multiplied by: Alpha / the plan's divisor."""
        return dt(plan.alpha) / dt(plan.divisor)

    def lp_norm(self, x: np.ndarray, plan: dc.LpNormalizationPlan, dt: type) -> np.ndarray:
        """The slices' P-norms along the plan's axes (keepdims), sums pairwise."""
        if plan.p == 1:
            return reduce_sum(np.abs(x), plan.axes, dt)
        return np.sqrt(reduce_sum(x * x, plan.axes, dt))

    def lp_denominator(self, norm: np.ndarray, plan: dc.LpNormalizationPlan, dt: type) -> np.ndarray:
        """Epsilon placed as the plan's epsilon_placement says."""
        eps = dt(plan.epsilon)
        if plan.epsilon_placement == "squared_norm":
            return np.sqrt(norm * norm + eps)
        if plan.epsilon_placement == "max":
            return np.maximum(norm, eps)
        if plan.epsilon_placement == "add":
            return norm + eps
        raise dc.Unsupported(
            f"epsilon_placement {plan.epsilon_placement!r} is not implemented by the numpy backend"
        )

    def describe(self) -> str:
        return f"numpy {np.__version__}, {np.dtype(self.compute_dtype).name} (feature level {self.feature_level})"

    # -- steps (one per method, so that a broken backend can replace one) ----------------------

    def load(self, inputs: Mapping[str, np.ndarray], plan: dc.KernelPlan, member: str) -> np.ndarray:
        """The input as a compute-dtype array of its Sizes (views may be strided: fine)."""
        if member not in inputs:
            raise KeyError(f"input {member} was not provided")
        arr = np.asarray(inputs[member])
        sizes = plan.sizes(member)
        if arr.shape != sizes:
            if arr.size != math.prod(sizes):
                raise ValueError(f"{member}: array of shape {arr.shape} for Sizes {list(sizes)}")
            arr = arr.reshape(sizes)
        return arr.astype(self.compute_dtype, copy=False)

    def reduce_axes(self, plan: dc.NormalizationPlan) -> tuple[int, ...]:
        return plan.axes

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Two-pass mean and population variance, kept with reduced dims of 1."""
        mean = reduce_sum(x, axes, self.compute_dtype, mean=True)
        d = x - mean
        var = reduce_sum(d * d, axes, self.compute_dtype, mean=True)
        return mean, var

    def normalize(
        self, x: np.ndarray, mean: np.ndarray, var: np.ndarray, plan: dc.NormalizationPlan
    ) -> np.ndarray:
        d = x - mean
        if not plan.normalize_variance:
            return d
        return d / np.sqrt(var + self.compute_dtype(plan.epsilon))

    def scale_bias(
        self, y: np.ndarray, inputs: Mapping[str, np.ndarray], plan: dc.NormalizationPlan
    ) -> np.ndarray:
        """Null Scale is 1 and null Bias is 0; both broadcast (numpy rules, right-aligned)."""
        if plan.scale is not None:
            y = y * self.load(inputs, plan, plan.scale)
        if plan.bias is not None:
            y = y + self.load(inputs, plan, plan.bias)
        return y

    def add_and_activate(
        self, y: np.ndarray, inputs: Mapping[str, np.ndarray], plan: dc.NormalizationPlan
    ) -> np.ndarray:
        """FusedAdd, then the activation (the docs: the addition comes before it)."""
        if plan.fused_add is not None:
            y = y + self.load(inputs, plan, plan.fused_add)
        return self.activate(y, plan)

    def reported_statistics(
        self, mean: np.ndarray, var: np.ndarray, x: np.ndarray, axes: tuple[int, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The statistics written to the mean / variance outputs: the ones normalized with."""
        return mean, var

    def activate(self, y: np.ndarray, plan: dc.KernelPlan) -> np.ndarray:
        return _act(y, plan.activation, plan.activation_params, self.compute_dtype)


# --------------------------------------------------------------------------------------------
# The kernels beside the centred normalization, in the same plain float32 style: what a port
# computes from the documented formulas. Each is (backend, plan, inputs) -> {output: value}.


def _arr(inputs: Mapping[str, np.ndarray], name: str | None, dtype: type) -> np.ndarray | None:
    return None if name is None else np.asarray(inputs[name]).astype(dtype, copy=False)


def _act(y: np.ndarray, act: str | None, params: Mapping[str, float], dtype: type) -> np.ndarray:
    if act is None:
        return y
    fn = ACTIVATIONS.get(act)
    if fn is None:
        raise dc.Unsupported(f"fused activation {act} is not implemented by the numpy backend")
    return np.asarray(fn(y, params), dtype=dtype)


def _rms(backend: NumpyBackend, plan: dc.RmsNormalizationPlan, inputs: Mapping[str, np.ndarray]) -> dict:
    """No mean step: x / sqrt(mean(x^2) + Epsilon) (or x), Scale, Bias, FusedAdd, activation."""
    dt = backend.compute_dtype
    x = _arr(inputs, plan.input, dt)
    y = x
    if plan.normalize_variance:
        ms = reduce_sum(x * x, plan.axes, dt, mean=True)
        y = x / np.sqrt(ms + dt(plan.epsilon))
    for name, op in ((plan.scale, np.multiply), (plan.bias, np.add), (plan.fused_add, np.add)):
        if name is not None:
            y = op(y, _arr(inputs, name, dt))
    return {plan.output: _act(y, plan.activation, plan.activation_params, dt)}


def _given(backend: NumpyBackend, plan: dc.GivenStatisticsPlan, inputs: Mapping[str, np.ndarray]) -> dict:
    """Scale * (x - Mean) / sqrt(Variance + Epsilon) + Bias, activation."""
    dt = backend.compute_dtype
    x = _arr(inputs, plan.input, dt)
    y = (x - _arr(inputs, plan.mean, dt)) / np.sqrt(_arr(inputs, plan.variance, dt) + dt(plan.epsilon))
    if plan.scale is not None:
        y = y * _arr(inputs, plan.scale, dt)
    if plan.bias is not None:
        y = y + _arr(inputs, plan.bias, dt)
    return {plan.output: _act(np.broadcast_to(y, x.shape), plan.activation, plan.activation_params, dt)}


def _grad(backend: NumpyBackend, plan: dc.NormalizationGradPlan, inputs: Mapping[str, np.ndarray]) -> dict:
    """The batch-norm gradients: sums over the axes where the statistics' sizes are 1."""
    dt = backend.compute_dtype
    x, dy = _arr(inputs, plan.input, dt), _arr(inputs, plan.input_gradient, dt)
    mean, var = _arr(inputs, plan.mean, dt), _arr(inputs, plan.variance, dt)
    scale = _arr(inputs, plan.scale, dt)
    axes = plan.axes
    inv_sd = dt(1.0) / np.sqrt(var + dt(plan.epsilon))
    scale_grad = reduce_sum(dy * (x - mean), axes, dt) * inv_sd
    bias_grad = reduce_sum(dy, axes, dt)
    if plan.statistics == "given":
        dx = dy * (scale * inv_sd)
    else:
        xc = x - (mean if plan.centres_on_mean else reduce_sum(x, axes, dt, mean=True))
        dyc = dy - reduce_sum(dy, axes, dt, mean=True)
        coef1 = reduce_sum(dy * xc, axes, dt, mean=True)
        dx = scale * inv_sd * (dyc - xc * coef1 / (var + dt(plan.epsilon)))
    return {plan.output: dx, plan.scale_gradient_output: scale_grad, plan.bias_gradient_output: bias_grad}


def window_sum(values: np.ndarray, axis: int, below: int, above: int, dt: type) -> np.ndarray:
    """out[c] = sum of values[c - below .. c + above] along ``axis`` (clipped), in ``dt``: one
    shifted add per offset (a running sum's difference would cancel against far elements)."""
    length = values.shape[axis]
    moved = np.moveaxis(np.asarray(values, dtype=dt), axis, 0)
    out = np.zeros_like(moved)
    for k in range(-min(below, length - 1), min(above, length - 1) + 1):
        out[max(-k, 0) : length - max(k, 0)] += moved[max(k, 0) : length + min(k, 0)]
    return np.moveaxis(out, 0, axis)


def _region_sum(values: np.ndarray, axes: tuple[int, ...], below: int, above: int, dt: type) -> np.ndarray:
    for axis in axes:
        values = window_sum(values, axis, below, above, dt)
    return values


def _lrn_terms(backend: NumpyBackend, plan: dc.LocalResponsePlan, x: np.ndarray, dt: type) -> np.ndarray:
    below, above = backend.lrn_window(plan)
    return dt(plan.bias) + backend.lrn_alpha(plan, dt) * _region_sum(x * x, plan.axes, below, above, dt)


def _local_response(
    backend: NumpyBackend, plan: dc.LocalResponsePlan, inputs: Mapping[str, np.ndarray]
) -> dict:
    """x * (Bias + Alpha / LocalSize * window sum of x^2)^-Beta."""
    dt = backend.compute_dtype
    x = np.asarray(inputs[plan.input]).astype(dt)
    return {plan.output: x * np.power(_lrn_terms(backend, plan, x, dt), dt(-plan.beta))}


def _local_response_grad(
    backend: NumpyBackend, plan: dc.LocalResponseGradPlan, inputs: Mapping[str, np.ndarray]
) -> dict:
    """g d^-Beta - 2 Alpha Beta / LocalSize * x * (the mirrored window's sum of g x d^(-Beta-1))."""
    dt = backend.compute_dtype
    x = np.asarray(inputs[plan.input]).astype(dt)
    g = np.asarray(inputs[plan.input_gradient]).astype(dt)
    d = _lrn_terms(backend, plan, x, dt)
    below, above = backend.lrn_window(plan)
    inner = _region_sum(g * x * np.power(d, dt(-plan.beta - 1.0)), plan.axes, above, below, dt)
    coef = dt(2.0) * backend.lrn_alpha(plan, dt) * dt(plan.beta)
    return {plan.output: g * np.power(d, dt(-plan.beta)) - coef * x * inner}


def _lp(backend: NumpyBackend, plan: dc.LpNormalizationPlan, inputs: Mapping[str, np.ndarray]) -> dict:
    """x / sqrt(norm^2 + Epsilon) (the spec's epsilon_placement), norm's sum taken pairwise."""
    dt = backend.compute_dtype
    x = np.asarray(inputs[plan.input]).astype(dt)
    return {plan.output: x / backend.lp_denominator(backend.lp_norm(x, plan, dt), plan, dt)}


#: This backend's lowering of each kernel (``plan.kernel``): the numpy backend, the independent
#: implementation every kernel is cross-checked against, lowers all of them
#: (tests/test_kernel_registry.py).
LOWERINGS: dict[str, Callable[[Any, Any, Mapping[str, np.ndarray]], dict[str, np.ndarray]]] = {
    "normalization": NumpyBackend._normalization,
    "rms_normalization": _rms,
    "given_statistics": _given,
    "normalization_grad": _grad,
    "local_response": _local_response,
    "local_response_grad": _local_response_grad,
    "lp_normalization": _lp,
}
