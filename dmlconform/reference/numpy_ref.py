"""An independent plain-numpy float64 implementation, to cross-check the numba kernel.

Written the obvious way (numpy broadcasting, ``mean``/``var`` over the axes, activations from
their spec formulas with numpy ufuncs) and sharing nothing with the kernel but the resolved
:class:`~dmlconform.kernels.NormalizationPlan`, so a slip in the kernel's index factorization,
summation or activation code shows up as a disagreement in the tests. It is also the vectorized
float64 activation the tolerance model uses to propagate an error bound through the activation.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _p(params: dict[str, float], name: str) -> float:
    return float(params[name])


def activation(act_type: str | None, x: np.ndarray, params: dict[str, float]) -> np.ndarray:
    """Activation ``act_type`` of float64 ``x``, by the formulas in spec/common/activations.yaml."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if act_type in (None, "ACTIVATION_IDENTITY"):
            return x.copy()
        if act_type == "ACTIVATION_LINEAR":
            return _p(params, "Alpha") * x + _p(params, "Beta")
        if act_type == "ACTIVATION_SIGMOID":
            return np.where(
                x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x)))
            )
        if act_type == "ACTIVATION_HARD_SIGMOID":
            return np.clip(_p(params, "Alpha") * x + _p(params, "Beta"), 0.0, 1.0)
        if act_type == "ACTIVATION_TANH":
            return np.tanh(x)
        if act_type == "ACTIVATION_SCALED_TANH":
            return _p(params, "Alpha") * np.tanh(_p(params, "Beta") * x)
        if act_type == "ACTIVATION_RELU":
            return np.where(x > 0, x, np.where(np.isnan(x), x, 0.0))
        if act_type == "ACTIVATION_LEAKY_RELU":
            return np.where(x >= 0, x, np.where(np.isnan(x), x, _p(params, "Alpha") * x))
        if act_type == "ACTIVATION_THRESHOLDED_RELU":
            return np.where(x > _p(params, "Alpha"), x, np.where(np.isnan(x), x, 0.0))
        if act_type == "ACTIVATION_ELU":
            return np.where(
                x >= 0, x, np.where(np.isnan(x), x, _p(params, "Alpha") * np.expm1(np.minimum(x, 0)))
            )
        if act_type == "ACTIVATION_SCALED_ELU":
            a, g = _p(params, "Alpha"), _p(params, "Gamma")
            return np.where(x > 0, g * x, np.where(np.isnan(x), x, g * a * np.expm1(np.minimum(x, 0))))
        if act_type == "ACTIVATION_SOFTPLUS":
            s = _p(params, "Steepness")
            return np.logaddexp(0.0, s * x) / s
        if act_type == "ACTIVATION_PARAMETRIC_SOFTPLUS":
            return _p(params, "Alpha") * np.logaddexp(0.0, _p(params, "Beta") * x)
        if act_type == "ACTIVATION_SOFTSIGN":
            return x / (1.0 + np.abs(x))
        if act_type == "ACTIVATION_SHRINK":
            b, t = _p(params, "Bias"), _p(params, "Threshold")
            return np.where(x > t, x - b, np.where(x < -t, x + b, np.where(np.isnan(x), x, 0.0)))
        if act_type == "ACTIVATION_CELU":
            a = _p(params, "Alpha")
            return np.maximum(0.0, x) + np.minimum(0.0, a * np.expm1(x / a))
        if act_type == "ACTIVATION_GELU":
            return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    raise ValueError(f"no numpy formula for activation {act_type!r}")


def compute(plan: Any, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every output of ``plan`` in float64 (statistics in the stat shape)."""
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    axes = plan.axes
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    z = (x - mean) / np.sqrt(var + plan.epsilon) if plan.normalize_variance else x - mean
    scale = np.asarray(arrays[plan.scale], dtype=np.float64) if plan.scale else 1.0
    bias = np.asarray(arrays[plan.bias], dtype=np.float64) if plan.bias else 0.0
    add = np.asarray(arrays[plan.fused_add], dtype=np.float64) if plan.fused_add else 0.0
    y = activation(plan.activation, scale * z + bias + add, plan.activation_params)
    out = {plan.output: y}
    if plan.mean_output:
        out[plan.mean_output] = mean
    if plan.variance_output:
        out[plan.variance_output] = var
    return out
