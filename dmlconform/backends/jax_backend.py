"""The ``jax`` backend (extra ``jax``): JAX on XLA (the CPU unless JAX finds another platform),
each operator lowered to the JAX a user writes (``jax_lowering.py``), XLA doing the reductions.

=====================  ===================================================================
path (``info.path``)   computation
=====================  ===================================================================
mean_var               the centred normalizations (MVN, MVN1, MVN2 UseMean TRUE, BNT):
                       ``jnp.mean``, ``jnp.var`` (two passes), ``lax.rsqrt``; flax's
                       ``LayerNorm(use_fast_variance=False)``
standardize            option ``path=standardize``: ``jax.nn.standardize`` with its default
                       ``algorithm="fast"`` (NormalizeVariance TRUE only)
rsqrt_mean_square      MVN2 UseMean FALSE: ``x * rsqrt(mean(x^2) + Epsilon)`` (flax's RMSNorm);
                       ``identity`` without NormalizeVariance
rsqrt_affine           BATCH_NORMALIZATION: ``(x - Mean) * (rsqrt(Variance + Epsilon) * Scale)
                       + Bias`` (flax's BatchNorm with running statistics)
vjp_given, vjp_batch   the batch-norm gradients: ``jax.vjp`` of that forward, the statistics
                       constant (given) or carrying the batch statistics' derivative (batch)
reduce_window          LRN: ``lax.reduce_window`` sum of squares, ``x / d ** Beta``
vjp_reduce_window      LRN_GRAD: ``jax.vjp`` of the LRN forward
linalg_norm            LP, Epsilon 0: ``x / jnp.linalg.norm(x, ord=P, axis)``
squared_norm           LP, Epsilon > 0: ``x / sqrt(norm^2 + Epsilon)``
=====================  ===================================================================

Why ``mean_var`` and not ``jax.nn.standardize`` by default: ``jax.nn.standardize`` is JAX's own
normalization, but its default algorithm computes the variance as E[x^2] - E[x]^2, which
cancels catastrophically on offset data (finding J7, cases/jax/standardize-one-pass-variance:
17 of the 20 large-offset MVN1 FLOAT32 numeric cases of the default tier it serves fail the
default model, 1.9 to 7.8e5 times the budget). Made the default, that finding would have to
cover the centred normalizations' whole large-offset regime, and the run would then judge
nothing of what XLA's reductions do there, the one thing this backend is for.
It would also not serve BNT, whose statistics outputs standardize does not return (a user
calls jnp.mean / jnp.var for those anyway). The two-pass formula is what flax's normalization
layers compute with ``use_fast_variance=False`` (their default is the fast form, in float32) and
what ``jax.nn.standardize(..., algorithm="stable")`` computes. The fast variance stays one option away (``path=standardize``),
its finding documented (docs/runtime-findings.md) with its reproducer, and a test that the
suite fails it.

FLOAT16 is computed natively by default (``float16=native``): JAX rounds every elementwise
step to float16 (its reductions accumulate in float32 and round the result). That is what a
JAX user's float16 model computes, and its cost is the FLOAT16 findings of
``dmlconform/known_findings/jax.yaml``. ``float16=float32`` computes in float32 and rounds the
outputs once: a workaround, off by default, so the findings stay visible.

x64 stays off (as a user has it): float32 is the working type; Epsilon and the other scalars
are Python floats, which jnp's weak typing computes in the arrays' type. Each structure (kernel,
attributes, which members are present, compute type, path) is jitted once and cached; jax.jit
retraces it per shape. ``last_info()`` records the path, the compute type and whether the
structure's compiled function was reused.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import jax
import jaxlib
import numpy as np

import dmlconform as dc
from dmlconform.backends import FEATURE_LEVEL_OPTION, BackendBase, Option
from dmlconform.backends import jax_lowering as low

PATHS = ("mean_var", "standardize")
COMPUTE_TYPES = (np.dtype(np.float32), np.dtype(np.float16))


class JaxBackend(BackendBase):
    """JAX on XLA; see the module docstring for the paths and the options' reasons."""

    name: ClassVar[str] = "jax"
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        FEATURE_LEVEL_OPTION,
        Option(
            "float16",
            "native",
            "FLOAT16 descs: computed in float16 as JAX does (every elementwise step rounded to "
            "float16), or in float32 with FLOAT16 only at the ends (a workaround of the FLOAT16 findings)",
            ("native", "float32"),
            travels=True,
        ),
        Option(
            "path",
            "auto",
            "the centred normalizations: mean_var (jnp.mean, jnp.var, lax.rsqrt) or standardize "
            "(jax.nn.standardize, its default one-pass variance); auto is mean_var",
            ("auto", *PATHS),
            travels=True,
        ),
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._compiled: dict[tuple[Any, ...], Callable[..., Any]] = {}

    # -- protocol ---------------------------------------------------------------------------

    def supports(self, desc: dc.OperatorDesc) -> bool | str:
        try:
            plan = dc.plan(desc)
        except dc.PlanError:  # a desc its kernel cannot read fails in execute, with the reason
            return True
        reason = self._unsupported(plan)
        return True if reason is None else reason

    def execute(self, desc: dc.OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        plan = dc.plan(desc)
        reason = self._unsupported(plan)
        if reason is not None:
            raise dc.Unsupported(reason)
        io = np.dtype(plan.dtype(plan.input))
        compute = np.dtype(np.float32) if self.options["float16"] == "float32" else io
        arrays = {
            m: np.asarray(inputs[m]).reshape(plan.aligned_sizes(m)).astype(compute, copy=False)
            for m in plan.inputs
        }
        values, path, reused = LOWERINGS[plan.kernel](self, plan, arrays, compute)
        self._last_info = {
            "path": path,
            "compute_dtype": compute.name,
            "platform": jax.default_backend(),
            "compiled_reused": reused,
        }
        if compute != io:
            self._last_info["upcast_reason"] = "option float16=float32"
        return plan.finish({m: np.asarray(v) for m, v in values.items()})

    def versions(self) -> dict[str, str]:
        return {**super().versions(), "jax": jax.__version__, "jaxlib": jaxlib.__version__}

    def describe(self) -> str:
        return (
            f"jax {jax.__version__} on XLA {jax.default_backend()} (FLOAT16 {self.options['float16']}, "
            f"feature level {self.feature_level})"
        )

    # -- helpers ----------------------------------------------------------------------------

    def _unsupported(self, plan: dc.KernelPlan) -> str | None:
        """The reason this backend leaves ``plan`` out, or None."""
        if plan.kernel not in LOWERINGS:
            return f"{plan.operator}: kernel {plan.kernel!r} has no JAX lowering in this backend"
        io = np.dtype(plan.dtype(plan.input))
        if io not in COMPUTE_TYPES:
            return f"data type {io.name} is not computed by the jax backend (float32 and float16 are)"
        if plan.activation is not None and plan.activation not in low.ACTIVATIONS:
            return f"fused activation {plan.activation} has no JAX mapping"
        if plan.kernel == "lp_normalization" and plan.epsilon_placement != "squared_norm":
            return f"Lp normalization's epsilon_placement {plan.epsilon_placement!r} has no JAX lowering here"
        if (
            plan.kernel == "normalization"
            and self.options["path"] == "standardize"
            and not plan.normalize_variance
        ):
            return "path=standardize: jax.nn.standardize always divides by the deviation (NormalizeVariance FALSE)"
        return None

    def _jitted(
        self, key: tuple[Any, ...], make: Callable[[], Callable[..., Any]]
    ) -> tuple[Callable[..., Any], bool]:
        """The compiled function of a structure, and whether it was already there."""
        fn = self._compiled.get(key)
        if fn is not None:
            return fn, True
        fn = self._compiled[key] = jax.jit(make())
        return fn, False


#: the input arrays a lowering gets (aligned to the input's rank, in the compute type), and what
#: it returns: the outputs by member, the path taken, whether the compiled function was reused
Arrays = Mapping[str, np.ndarray]
Lowered = tuple[dict[str, Any], str, bool]


def _member(arrays: Mapping[str, np.ndarray], member: str | None) -> np.ndarray | None:
    return None if member is None else arrays[member]


def _presence(*members: str | None) -> tuple[bool, ...]:
    return tuple(m is not None for m in members)


def _normalization(
    backend: JaxBackend, plan: dc.NormalizationPlan, arrays: Arrays, compute: np.dtype
) -> Lowered:
    standardize = backend.options["path"] == "standardize"
    path = "standardize" if standardize else "mean_var"
    static = dict(
        axes=tuple(plan.axes),
        normalize_variance=bool(plan.normalize_variance),
        epsilon=float(plan.epsilon),
        activation=plan.activation,
        params=dict(plan.activation_params),
        standardize=standardize,
    )
    key = ("normalization", compute.name, _presence(plan.scale, plan.bias, plan.fused_add), *_key(static))
    fn, reused = backend._jitted(key, lambda: functools.partial(low.normalization, **static))
    y, mean, var = fn(*(_member(arrays, m) for m in (plan.input, plan.scale, plan.bias, plan.fused_add)))
    values = {plan.output: y}
    if plan.mean_output is not None:
        values[plan.mean_output] = mean
    if plan.variance_output is not None:
        values[plan.variance_output] = var
    return values, path, reused


def _rms(backend: JaxBackend, plan: dc.RmsNormalizationPlan, arrays: Arrays, compute: np.dtype) -> Lowered:
    static = dict(
        axes=tuple(plan.axes),
        normalize_variance=bool(plan.normalize_variance),
        epsilon=float(plan.epsilon),
        activation=plan.activation,
        params=dict(plan.activation_params),
    )
    key = ("rms", compute.name, _presence(plan.scale, plan.bias, plan.fused_add), *_key(static))
    fn, reused = backend._jitted(key, lambda: functools.partial(low.rms_normalization, **static))
    y = fn(*(_member(arrays, m) for m in (plan.input, plan.scale, plan.bias, plan.fused_add)))
    return {plan.output: y}, ("rsqrt_mean_square" if plan.normalize_variance else "identity"), reused


def _given(backend: JaxBackend, plan: dc.GivenStatisticsPlan, arrays: Arrays, compute: np.dtype) -> Lowered:
    static = dict(
        epsilon=float(plan.epsilon), activation=plan.activation, params=dict(plan.activation_params)
    )
    key = ("given", compute.name, _presence(plan.scale, plan.bias), *_key(static))
    fn, reused = backend._jitted(key, lambda: functools.partial(low.given_statistics, **static))
    members = (plan.input, plan.mean, plan.variance, plan.scale, plan.bias)
    return {plan.output: fn(*(_member(arrays, m) for m in members))}, "rsqrt_affine", reused


def _grad(backend: JaxBackend, plan: dc.NormalizationGradPlan, arrays: Arrays, compute: np.dtype) -> Lowered:
    batch = plan.statistics == "batch"
    static = dict(
        axes=tuple(plan.axes),
        epsilon=float(plan.epsilon),
        batch=batch,
        centre_on_mean_member=plan.centre != "mean",
    )
    key = ("grad", compute.name, *_key(static))
    fn, reused = backend._jitted(key, lambda: functools.partial(low.normalization_grad, **static))
    members = (plan.input, plan.input_gradient, plan.mean, plan.variance, plan.scale)
    dx, dscale, dbias = fn(*(arrays[m] for m in members))
    values = {plan.output: dx, plan.scale_gradient_output: dscale, plan.bias_gradient_output: dbias}
    return values, ("vjp_batch" if batch else "vjp_given"), reused


def _lrn_static(plan: dc.LocalResponsePlan) -> dict[str, Any]:
    return dict(
        axes=tuple(plan.axes),
        below=int(plan.below),
        above=int(plan.above),
        alpha_over_divisor=float(plan.alpha) / float(plan.divisor),
        beta=float(plan.beta),
        bias=float(plan.bias),
    )


def _lrn(backend: JaxBackend, plan: dc.LocalResponsePlan, arrays: Arrays, compute: np.dtype) -> Lowered:
    static = _lrn_static(plan)
    fn, reused = backend._jitted(
        ("lrn", compute.name, *_key(static)), lambda: functools.partial(low.local_response, **static)
    )
    return {plan.output: fn(arrays[plan.input])}, "reduce_window", reused


def _lrn_grad(
    backend: JaxBackend, plan: dc.LocalResponseGradPlan, arrays: Arrays, compute: np.dtype
) -> Lowered:
    static = _lrn_static(plan)
    fn, reused = backend._jitted(
        ("lrn_grad", compute.name, *_key(static)),
        lambda: functools.partial(low.local_response_grad, **static),
    )
    return {plan.output: fn(arrays[plan.input], arrays[plan.input_gradient])}, "vjp_reduce_window", reused


def _lp(backend: JaxBackend, plan: dc.LpNormalizationPlan, arrays: Arrays, compute: np.dtype) -> Lowered:
    static = dict(axes=tuple(plan.axes), p=int(plan.p), epsilon=float(plan.epsilon))
    path = "linalg_norm" if static["epsilon"] == 0 else "squared_norm"

    def make() -> Callable[..., Any]:
        return lambda x: low.lp_normalization(x, **static)[0]

    fn, reused = backend._jitted(("lp", compute.name, *_key(static)), make)
    return {plan.output: fn(arrays[plan.input])}, path, reused


def _key(static: Mapping[str, Any]) -> tuple[Any, ...]:
    """The static arguments as a cache key (the activation's parameters as sorted pairs)."""
    return tuple(
        (k, tuple(sorted(v.items())) if isinstance(v, dict) else v) for k, v in sorted(static.items())
    )


#: This backend's lowering of each registered kernel (plan.kernel): (backend, plan, input arrays
#: in the compute type at their aligned shapes, compute type) -> (outputs, path, compiled reused)
LOWERINGS: dict[str, Callable[..., Any]] = {
    "normalization": _normalization,
    "rms_normalization": _rms,
    "given_statistics": _given,
    "normalization_grad": _grad,
    "local_response": _lrn,
    "local_response_grad": _lrn_grad,
    "lp_normalization": _lp,
}
