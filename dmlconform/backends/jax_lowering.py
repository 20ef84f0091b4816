"""The ``jax`` backend's lowerings: each kernel as the JAX a user writes, as functions of plain
values (jax arrays, None for an absent member, and Python numbers for the desc's attributes).

Why functions of plain values: the backend (``jax_backend.py``) reads a desc through the plan
API and jits one of these per structure; the tests call them directly on small arrays against
numpy float64 formulas, so a lowering is checked without the suite around it.

What a JAX user writes, and so what these are:

- statistics: ``jnp.mean`` and ``jnp.var`` (two passes: the variance is the mean of squared
  deviations from the mean), ``lax.rsqrt``, multiplied by Scale first and added to Bias after,
  as flax's ``LayerNorm(use_fast_variance=False)`` / ``_normalize`` does. XLA does every
  reduction (jnp's reductions of float16 accumulate in float32 and round the result to float16).
- ``standardize``: ``jax.nn.standardize(x, axes, epsilon=...)`` with its default algorithm
  ("fast": E[x^2] - E[x]^2, clipped at 0), the option path (the backend's module docstring).
- activations through ``jax.nn`` where its parameterization is DirectML's, composed from jnp
  otherwise (HARD_SIGMOID, SCALED_TANH, THRESHOLDED_RELU, SHRINK, parameterized SOFTPLUS);
- the gradients through ``jax.vjp`` of the forward: the batch statistics' derivative flows in
  through ``lax.stop_gradient`` (their values stay the given Mean and Variance, as the spec's
  formula takes them);
- local response normalization: the window's sum of squares by ``lax.reduce_window`` with
  ``lax.add`` (XLA's windowed reduction; differentiable: it lowers to reduce_window_sum, whose
  transpose is a padded reduce_window; a Python ``lambda a, b: a + b`` or ``jnp.add`` there is
  a generic reduction that ``jax.vjp`` refuses), divided by ``jnp.power(d, Beta)``;
- Lp normalization through ``jnp.linalg.norm`` where Epsilon is 0, else the sum it takes with
  Epsilon added before the root.

Scalars are Python floats, so jnp's weak typing computes them in the arrays' type: in float16
an Epsilon of 1e-12 is 0 and an activation's Alpha is rounded to float16, as in a user's code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array


def _shrink(x: Array, p: Mapping[str, float]) -> Array:
    bias, threshold = p["Bias"], p["Threshold"]
    return jnp.where(x > threshold, x - bias, jnp.where(x < -threshold, x + bias, jnp.zeros_like(x)))


#: ACTIVATION_X -> f(x, parameters as C FLOATs). jax.nn where its parameterization is DirectML's
#: (its hard_sigmoid is relu6(x + 3) / 6, its selu has fixed constants, its softplus no
#: steepness: those are composed from jnp and the jax.nn function they specialize).
ACTIVATIONS: dict[str, Callable[[Array, Mapping[str, float]], Array]] = {
    "ACTIVATION_IDENTITY": lambda x, p: x,
    "ACTIVATION_LINEAR": lambda x, p: x * p["Alpha"] + p["Beta"],
    "ACTIVATION_SIGMOID": lambda x, p: jax.nn.sigmoid(x),
    "ACTIVATION_HARD_SIGMOID": lambda x, p: jnp.clip(x * p["Alpha"] + p["Beta"], 0.0, 1.0),
    "ACTIVATION_TANH": lambda x, p: jnp.tanh(x),
    "ACTIVATION_SCALED_TANH": lambda x, p: jnp.tanh(x * p["Beta"]) * p["Alpha"],
    "ACTIVATION_RELU": lambda x, p: jax.nn.relu(x),
    "ACTIVATION_LEAKY_RELU": lambda x, p: jax.nn.leaky_relu(x, p["Alpha"]),
    "ACTIVATION_THRESHOLDED_RELU": lambda x, p: jnp.where(x > p["Alpha"], x, jnp.zeros_like(x)),
    "ACTIVATION_ELU": lambda x, p: jax.nn.elu(x, p["Alpha"]),
    "ACTIVATION_SCALED_ELU": lambda x, p: jax.nn.elu(x, p["Alpha"]) * p["Gamma"],
    "ACTIVATION_SOFTPLUS": lambda x, p: jax.nn.softplus(x * p["Steepness"]) / p["Steepness"],
    "ACTIVATION_PARAMETRIC_SOFTPLUS": lambda x, p: jax.nn.softplus(x * p["Beta"]) * p["Alpha"],
    "ACTIVATION_SOFTSIGN": lambda x, p: jax.nn.soft_sign(x),
    "ACTIVATION_SHRINK": _shrink,
    "ACTIVATION_CELU": lambda x, p: jax.nn.celu(x, p["Alpha"]),
    "ACTIVATION_GELU": lambda x, p: jax.nn.gelu(x, approximate=False),
}


def activate(y: Array, activation: str | None, params: Mapping[str, float]) -> Array:
    return y if activation is None else ACTIVATIONS[activation](y, params)


def _affine(
    x: Array, mean: Array, var: Array | None, epsilon: float, scale: Array | None, bias: Array | None
) -> Array:
    """(x - mean) * (rsqrt(var + epsilon) * scale) + bias, flax's ``_normalize`` order; no
    rsqrt where ``var`` is None (NormalizeVariance FALSE)."""
    mul = None if var is None else lax.rsqrt(var + epsilon)
    if scale is not None:
        mul = scale if mul is None else mul * scale
    y = x - mean
    if mul is not None:
        y = y * mul
    return y if bias is None else y + bias


def normalization(
    x: Array,
    scale: Array | None,
    bias: Array | None,
    fused_add: Array | None,
    *,
    axes: tuple[int, ...],
    normalize_variance: bool,
    epsilon: float,
    activation: str | None,
    params: Mapping[str, float],
    standardize: bool = False,
) -> tuple[Array, Array, Array]:
    """(Output, mean, variance) of a centred normalization (keepdims statistics).
    ``standardize``: the normalized tensor from ``jax.nn.standardize`` with its default
    algorithm; the statistics outputs still come from jnp.mean / jnp.var (standardize returns
    none)."""
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.var(x, axis=axes, keepdims=True)
    if standardize and normalize_variance:
        y = jax.nn.standardize(x, axis=axes, epsilon=epsilon)
        y = _affine(y, jnp.zeros((), y.dtype), None, epsilon, scale, bias)
    else:
        y = _affine(x, mean, var if normalize_variance else None, epsilon, scale, bias)
    if fused_add is not None:
        y = y + fused_add
    return activate(y, activation, params), mean, var


def rms_normalization(
    x: Array,
    scale: Array | None,
    bias: Array | None,
    fused_add: Array | None,
    *,
    axes: tuple[int, ...],
    normalize_variance: bool,
    epsilon: float,
    activation: str | None,
    params: Mapping[str, float],
) -> Array:
    """x * rsqrt(mean(x^2) + Epsilon) * Scale + Bias (flax's RMSNorm: use_mean=False)."""
    var = jnp.mean(jnp.square(x), axis=axes, keepdims=True) if normalize_variance else None
    y = _affine(x, jnp.zeros((), x.dtype), var, epsilon, scale, bias)
    if fused_add is not None:
        y = y + fused_add
    return activate(y, activation, params)


def given_statistics(
    x: Array,
    mean: Array,
    var: Array,
    scale: Array | None,
    bias: Array | None,
    *,
    epsilon: float,
    activation: str | None,
    params: Mapping[str, float],
) -> Array:
    """Batch normalization with given statistics, elementwise (flax's BatchNorm with
    use_running_average=True)."""
    y = _affine(x, mean, var, epsilon, scale, bias)
    return activate(jnp.broadcast_to(y, x.shape), activation, params)


def normalization_grad(
    x: Array,
    dy: Array,
    mean: Array,
    var: Array,
    scale: Array,
    *,
    axes: tuple[int, ...],
    epsilon: float,
    batch: bool,
    centre_on_mean_member: bool,
) -> tuple[Array, Array, Array]:
    """(OutputGradient, OutputScaleGradient, OutputBiasGradient): ``jax.vjp`` of the forward
    y = (x - Mean) * rsqrt(Variance + Epsilon) * Scale + Bias at (x, Scale, Bias = 0), Scale and
    Bias taken at the statistics' shape so that their cotangents are the sums over ``axes``.

    ``batch`` (statistics: batch): Mean and Variance keep their given values but carry the
    derivative of the batch mean, mean(x), and of the (population) variance, mean((x - c)^2),
    c the Mean member where ``centre_on_mean_member`` (the spec's centre_with: mean), else the
    batch mean. Each is added as its first-order term at x: with d = x - stop_gradient(x),
    exactly 0 in value, Mean + mean(d) and Variance + 2 mean(d * stop_gradient(x - c)) are Mean
    and Variance, and their derivatives are the batch statistics'. (The form b - stop_gradient(b)
    with the statistic b itself is the same in float32, but where b leaves FLOAT16's range it
    is inf - inf: a NaN of the lowering's making, not of the runtime's.)"""
    stat_shape = mean.shape
    scale_b = jnp.broadcast_to(scale, stat_shape)
    bias_b = jnp.zeros(stat_shape, x.dtype)

    def forward(x: Array, scale: Array, bias: Array) -> Array:
        m, v = mean, var
        if batch:
            d = x - lax.stop_gradient(x)
            centre = mean if centre_on_mean_member else jnp.mean(x, axis=axes, keepdims=True)
            m = m + jnp.mean(d, axis=axes, keepdims=True)
            v = v + 2.0 * jnp.mean(d * lax.stop_gradient(x - centre), axis=axes, keepdims=True)
        return _affine(x, m, v, epsilon, scale, bias)

    y, vjp = jax.vjp(forward, x, scale_b, bias_b)
    dx, dscale, dbias = vjp(jnp.broadcast_to(dy, y.shape).astype(y.dtype))
    return dx, dscale, dbias


def window_sum(values: Array, axes: tuple[int, ...], below: int, above: int) -> Array:
    """Each element's sum of ``values`` from ``below`` under it to ``above`` over it along every
    axis of ``axes`` (zero outside the tensor): XLA's reduce_window."""
    rank = values.ndim
    window = tuple(below + above + 1 if a in axes else 1 for a in range(rank))
    padding = tuple((below, above) if a in axes else (0, 0) for a in range(rank))
    return lax.reduce_window(values, 0.0, lax.add, window, (1,) * rank, padding)


def local_response(
    x: Array,
    *,
    axes: tuple[int, ...],
    below: int,
    above: int,
    alpha_over_divisor: float,
    beta: float,
    bias: float,
) -> Array:
    """x / (Bias + Alpha / divisor * window sum of x^2) ** Beta."""
    d = bias + alpha_over_divisor * window_sum(jnp.square(x), axes, below, above)
    return x / jnp.power(d, beta)


def local_response_grad(
    x: Array,
    dy: Array,
    *,
    axes: tuple[int, ...],
    below: int,
    above: int,
    alpha_over_divisor: float,
    beta: float,
    bias: float,
) -> Array:
    """``jax.vjp`` of :func:`local_response` at x, applied to dy."""

    def forward(x: Array) -> Array:
        return local_response(
            x,
            axes=axes,
            below=below,
            above=above,
            alpha_over_divisor=alpha_over_divisor,
            beta=beta,
            bias=bias,
        )

    _, vjp = jax.vjp(forward, x)
    (dx,) = vjp(dy)
    return dx


def lp_normalization(x: Array, *, axes: tuple[int, ...], p: int, epsilon: float) -> tuple[Array, str]:
    """(x / its slice's P-norm with Epsilon added to the squared norm, the path taken):
    ``linalg_norm`` (Epsilon 0: x / jnp.linalg.norm), ``squared_norm`` (sqrt(norm^2 + Epsilon),
    the norm a sum of squares for P 2, jnp.linalg.norm's ord=1 sum squared for P 1)."""
    one_axis = len(axes) == 1
    if p == 1:
        norm = (
            jnp.linalg.norm(x, ord=1, axis=axes[0], keepdims=True)
            if one_axis
            else jnp.sum(jnp.abs(x), axis=axes, keepdims=True)
        )
        if epsilon == 0:
            return x / norm, "linalg_norm"
        return x / jnp.sqrt(jnp.square(norm) + epsilon), "squared_norm"
    if epsilon == 0:
        norm = (
            jnp.linalg.norm(x, ord=2, axis=axes[0], keepdims=True)
            if one_axis
            else jnp.sqrt(jnp.sum(jnp.square(x), axis=axes, keepdims=True))
        )
        return x / norm, "linalg_norm"
    return x / jnp.sqrt(jnp.sum(jnp.square(x), axis=axes, keepdims=True) + epsilon), "squared_norm"
