"""The numpy backend's FLOAT32 lowerings of the neighbourhood and norm kernels (local_response,
local_response_grad, lp_normalization): what a port computes from the formulas, independent of
the float64 reference (its own window sums, in float32).

Each reads its choices through the backend (``lrn_window``, ``lrn_alpha``, ``lp_norm``,
``lp_denominator``) so that a deliberately broken backend (``broken.py``) changes exactly one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dmlconform.specification import semantics
from dmlconform.specification.desc import OperatorDesc

#: ``backend`` below is the NumpyBackend whose step hooks (window sums, norms) a broken backend
#: overrides; typed Any so that this module does not import the backend that imports it


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


def _lrn_terms(backend: Any, plan: semantics.LocalResponsePlan, x: np.ndarray, dt: type) -> np.ndarray:
    below, above = backend.lrn_window(plan)
    return dt(plan.bias) + backend.lrn_alpha(plan, dt) * _region_sum(x * x, plan.axes, below, above, dt)


def local_response(
    backend: Any, desc: OperatorDesc, inputs: Mapping[str, np.ndarray], dt: type
) -> dict[str, np.ndarray]:
    """x * (Bias + Alpha / LocalSize * window sum of x^2)^-Beta."""
    plan = semantics.make_local_response_plan(desc, backend.spec)
    x = np.asarray(inputs[plan.input]).astype(dt)
    return {plan.output: x * np.power(_lrn_terms(backend, plan, x, dt), dt(-plan.beta))}


def local_response_grad(
    backend: Any, desc: OperatorDesc, inputs: Mapping[str, np.ndarray], dt: type
) -> dict[str, np.ndarray]:
    """g d^-Beta - 2 Alpha Beta / LocalSize * x * (the mirrored window's sum of g x d^(-Beta-1))."""
    plan = semantics.make_local_response_plan(desc, backend.spec)
    x = np.asarray(inputs[plan.input]).astype(dt)
    g = np.asarray(inputs[plan.input_gradient]).astype(dt)
    d = _lrn_terms(backend, plan, x, dt)
    below, above = backend.lrn_window(plan)
    inner = _region_sum(g * x * np.power(d, dt(-plan.beta - 1.0)), plan.axes, above, below, dt)
    coef = dt(2.0) * backend.lrn_alpha(plan, dt) * dt(plan.beta)
    return {plan.output: g * np.power(d, dt(-plan.beta)) - coef * x * inner}


def lp_normalization(
    backend: Any, desc: OperatorDesc, inputs: Mapping[str, np.ndarray], dt: type
) -> dict[str, np.ndarray]:
    """x / sqrt(norm^2 + Epsilon) (the spec's epsilon_placement), norm's sum taken pairwise."""
    plan = semantics.make_lp_plan(desc, backend.spec)
    x = np.asarray(inputs[plan.input]).astype(dt)
    return {plan.output: x / backend.lp_denominator(backend.lp_norm(x, plan, dt), plan, dt)}


#: kernel name -> lowering of the local kernels (NumpyBackend.LOWERINGS takes them in)
KERNELS = {
    "local_response": local_response,
    "local_response_grad": local_response_grad,
    "lp_normalization": lp_normalization,
}
