"""The ``numpy`` backend: a straightforward FLOAT32 implementation, what a typical port does.

It is independent of the float64 reference (no shared kernels, different precision), so the
suite has something realistic to measure: inputs are cast to float32, the mean and the
population variance are computed by numpy in float32 (two passes) over the reduce axes, then
normalize, scale, bias, fused add, activation, and a cast to the output type. Everything is
driven by the operator's ``semantics:`` (through :class:`NormalizationPlan`); no operator is
named here.

Each step is a method so that the deliberately broken backends (``broken.py``) can each replace
exactly one of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import ClassVar

import numpy as np

from dmlconform.backends import numpy_local
from dmlconform.backends.base import (
    FEATURE_LEVEL_OPTION,
    BackendBase,
    NormalizationPlan,
    Option,
    finish_outputs,
    lowering,
    make_plan,
    validate_or_reject,
)
from dmlconform.errors import Unsupported
from dmlconform.specification import semantics
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.slices import to_slices
from dmlconform.specification.spec import Spec

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


def reduce_sum(x: np.ndarray, axes: tuple[int, ...], dtype: type, mean: bool = False) -> np.ndarray:
    """Sum (or mean) over ``axes``, kept as 1s, summed pairwise.

    numpy sums pairwise only along a contiguous innermost axis; over strided or outer axes it
    adds sequentially, which at long reductions errs past the suite's required (blocked
    summation) accuracy. So the reduced axes are moved last and made one contiguous row first,
    as a careful port lays out a reduction."""
    x = np.asarray(x)
    if not axes:
        return x.astype(dtype)
    rows = np.ascontiguousarray(to_slices(x, axes))
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

    def check(self, desc: OperatorDesc) -> None:
        """Rejected (with the rule ids) for a desc illegal at this backend's feature level."""
        validate_or_reject(desc, self.feature_level, self.spec)

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return lowering(LOWERINGS, desc, self.spec, "the numpy backend")(self, desc, inputs)

    def _normalization(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The centred normalization, one overridable step per method."""
        plan = make_plan(desc, self.spec)
        with np.errstate(all="ignore"):
            x = self.load(inputs, plan, plan.input)
            axes = self.reduce_axes(plan)
            mean, var = self.statistics(x, axes)
            y = self.normalize(x, mean, var, plan)
            y = self.scale_bias(y, inputs, plan)
            y = self.add_and_activate(y, inputs, plan)
            mean, var = self.reported_statistics(mean, var, x, axes)
        values: dict[str, np.ndarray] = {plan.output: y}
        if "mean" in plan.stats_outputs:
            values[plan.stats_outputs["mean"]] = mean
        if "variance" in plan.stats_outputs:
            values[plan.stats_outputs["variance"]] = var
        self._last_info = {
            "path": "numpy",
            "compute_dtype": np.dtype(self.compute_dtype).name,
            "axes": list(axes),
        }
        return finish_outputs(plan, values)

    # -- the neighbourhood and norm kernels (numpy_local.py reads these) ---------------------

    def lrn_window(self, plan: semantics.LocalResponsePlan) -> tuple[int, int]:
        """(below, above): how far the window reaches on each side (semantics.window)."""
        return plan.below, plan.above

    def lrn_alpha(self, plan: semantics.LocalResponsePlan, dt: type) -> np.floating:
        """What the window's sum of squares is multiplied by: Alpha / LocalSize."""
        return dt(plan.alpha) / dt(plan.divisor)

    def lp_norm(self, x: np.ndarray, plan: semantics.LpPlan, dt: type) -> np.ndarray:
        """The slices' P-norms along the plan's axes (keepdims), sums pairwise."""
        if plan.p == 1:
            return self.sum_over(np.abs(x), plan.axes, dt)
        return np.sqrt(self.sum_over(x * x, plan.axes, dt))

    def sum_over(self, x: np.ndarray, axes: tuple[int, ...], dt: type, mean: bool = False) -> np.ndarray:
        """A sum (or mean) over ``axes`` as the kernels beside the centred normalization take it
        (the mean square, the gradients' sums, the Lp norms): pairwise (:func:`reduce_sum`)."""
        return reduce_sum(x, axes, dt, mean=mean)

    def lp_denominator(self, norm: np.ndarray, plan: semantics.LpPlan, dt: type) -> np.ndarray:
        """Epsilon placed as semantics.epsilon_placement says."""
        eps = dt(plan.epsilon)
        if plan.epsilon_placement == "squared_norm":
            return np.sqrt(norm * norm + eps)
        if plan.epsilon_placement == "max":
            return np.maximum(norm, eps)
        if plan.epsilon_placement == "add":
            return norm + eps
        raise Unsupported(
            f"epsilon_placement {plan.epsilon_placement!r} is not implemented by the numpy backend"
        )

    def describe(self) -> str:
        return f"numpy {np.__version__}, {np.dtype(self.compute_dtype).name} (feature level {self.feature_level})"

    # -- steps (one per method, so that a broken backend can replace one) ----------------------

    def load(self, inputs: Mapping[str, np.ndarray], plan: NormalizationPlan, member: str) -> np.ndarray:
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

    def reduce_axes(self, plan: NormalizationPlan) -> tuple[int, ...]:
        return plan.axes

    def statistics(self, x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Two-pass mean and population variance, kept with reduced dims of 1."""
        mean = reduce_sum(x, axes, self.compute_dtype, mean=True)
        d = x - mean
        var = reduce_sum(d * d, axes, self.compute_dtype, mean=True)
        return mean, var

    def normalize(
        self, x: np.ndarray, mean: np.ndarray, var: np.ndarray, plan: NormalizationPlan
    ) -> np.ndarray:
        d = x - mean
        if not plan.normalize_variance:
            return d
        return d / np.sqrt(var + self.compute_dtype(plan.epsilon))

    def scale_bias(
        self, y: np.ndarray, inputs: Mapping[str, np.ndarray], plan: NormalizationPlan
    ) -> np.ndarray:
        """Null Scale is 1 and null Bias is 0; both broadcast (numpy rules, right-aligned)."""
        if plan.scale is not None:
            y = y * self.load(inputs, plan, plan.scale)
        if plan.bias is not None:
            y = y + self.load(inputs, plan, plan.bias)
        return y

    def add_and_activate(
        self, y: np.ndarray, inputs: Mapping[str, np.ndarray], plan: NormalizationPlan
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

    def activate(self, y: np.ndarray, plan: NormalizationPlan) -> np.ndarray:
        if plan.activation is None:
            return y
        fn = ACTIVATIONS.get(plan.activation)
        if fn is None:
            raise Unsupported(f"fused activation {plan.activation} is not implemented by the numpy backend")
        return np.asarray(fn(y, plan.activation_params), dtype=self.compute_dtype)


# --------------------------------------------------------------------------------------------
# The kernels beside the centred normalization (semantics.kernel / semantics.center), in the
# same plain float32 style: what a port computes from the documented formulas.


def _arr(inputs: Mapping[str, np.ndarray], name: str | None, dtype: type) -> np.ndarray | None:
    return None if name is None else np.asarray(inputs[name]).astype(dtype, copy=False)


def _act(y: np.ndarray, act: str | None, params: Mapping[str, float], dtype: type) -> np.ndarray:
    if act is None:
        return y
    fn = ACTIVATIONS.get(act)
    if fn is None:
        raise Unsupported(f"fused activation {act} is not implemented by the numpy backend")
    return np.asarray(fn(y, params), dtype=dtype)


def _rms(
    backend: NumpyBackend, desc: OperatorDesc, inputs: Mapping[str, np.ndarray], dt: type
) -> dict[str, np.ndarray]:
    """center false: x / sqrt(mean(x^2) + Epsilon) (or x), Scale, Bias, activation."""
    plan = semantics.make_plan(desc, backend.spec, uncentred_ok=True)
    x = _arr(inputs, plan.input, dt)
    y = x
    if plan.normalize_variance:
        ms = backend.sum_over(x * x, plan.axes, dt, mean=True)
        y = x / np.sqrt(ms + dt(plan.epsilon))
    for name, op in ((plan.scale, np.multiply), (plan.bias, np.add), (plan.fused_add, np.add)):
        if name is not None:
            y = op(y, _arr(inputs, name, dt))
    return {plan.output: _act(y, plan.activation, plan.activation_params, dt)}


def _given(
    desc: OperatorDesc, inputs: Mapping[str, np.ndarray], dt: type, spec: Spec
) -> dict[str, np.ndarray]:
    """Scale * (x - Mean) / sqrt(Variance + Epsilon) + Bias, activation."""
    plan = semantics.make_given_plan(desc, spec)
    x = _arr(inputs, plan.input, dt)
    y = (x - _arr(inputs, plan.mean, dt)) / np.sqrt(_arr(inputs, plan.variance, dt) + dt(plan.epsilon))
    if plan.scale is not None:
        y = y * _arr(inputs, plan.scale, dt)
    if plan.bias is not None:
        y = y + _arr(inputs, plan.bias, dt)
    return {plan.output: _act(np.broadcast_to(y, x.shape), plan.activation, plan.activation_params, dt)}


def _grad(
    backend: NumpyBackend, desc: OperatorDesc, inputs: Mapping[str, np.ndarray], dt: type
) -> dict[str, np.ndarray]:
    """The batch-norm gradients: sums over the axes where the statistics' sizes are 1."""
    reduce_sum = backend.sum_over
    plan = semantics.make_grad_plan(desc, backend.spec)
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


def _elementwise(compute: Callable[..., dict[str, np.ndarray]]) -> Callable[..., dict[str, np.ndarray]]:
    """A lowering from a function of (desc, inputs, compute dtype, spec) to the desc's outputs."""
    return _hooked(lambda backend, desc, inputs, dt: compute(desc, inputs, dt, backend.spec))


def _hooked(compute: Callable[..., dict[str, np.ndarray]]) -> Callable[..., dict[str, np.ndarray]]:
    """A lowering from a function of (backend, desc, inputs, compute dtype): the local kernels
    read the backend's hooks, so that a broken backend can replace one step."""

    def lower(
        backend: NumpyBackend, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        with np.errstate(all="ignore"):
            values = compute(backend, desc, inputs, backend.compute_dtype)
        backend._last_info = {"path": f"numpy-{semantics.kernel(desc, backend.spec)}"}
        return finish_desc_outputs(desc, values, backend.spec)

    return lower


#: This backend's lowering of each registered kernel (dmlconform/kernels.py); the numpy backend,
#: the independent implementation every kernel is cross-checked against, lowers all of them
#: (tests/test_kernel_registry.py).
LOWERINGS: dict[str, Callable[..., dict[str, np.ndarray]]] = {
    "normalization": NumpyBackend._normalization,
    "rms_normalization": _hooked(_rms),
    "given_statistics": _elementwise(_given),
    "normalization_grad": _hooked(_grad),
    **{name: _hooked(fn) for name, fn in numpy_local.KERNELS.items()},
}


def finish_desc_outputs(
    desc: OperatorDesc, values: Mapping[str, np.ndarray], spec: Spec
) -> dict[str, np.ndarray]:
    """Each output broadcast to its Sizes and cast to its DataType (for the kernels that have no
    NormalizationPlan; the other backends' mappings of them use it too)."""
    out = {}
    for name, value in values.items():
        t = desc.get(name, spec)
        arr = np.broadcast_to(np.asarray(value), tuple(t.sizes))
        with np.errstate(over="ignore"):  # FLOAT16 overflow is inf, as the type says
            out[name] = np.ascontiguousarray(arr, dtype=np.dtype(spec.data_types[t.data_type].numpy))
    return out
