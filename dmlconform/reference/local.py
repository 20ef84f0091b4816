"""Float64 references of the kernels that normalize by a neighbourhood or a norm: local response
normalization, its gradient, and Lp normalization (registry ``compute`` parts, run by
:func:`dmlconform.reference.more.execute`).

float64 suffices: every sum here has positive terms (squares, absolute values) or is the gradient's
short window sum, so its float64 error is a few 2^-53 relative to its magnitude, far below half a
float32 ULP of the outputs; ``tests/test_reference_local.py`` holds them to mpmath.
"""

from __future__ import annotations

import numpy as np

from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.semantics import (
    LocalResponsePlan,
    LpPlan,
    make_local_response_plan,
    make_lp_plan,
)
from dmlconform.specification.spec import Spec


def window_sum(values: np.ndarray, axis: int, below: int, above: int) -> np.ndarray:
    """out[c] = sum of values[k] for k in [c - below, c + above] within the axis (zero outside):
    one shifted add per offset, so no running sum and no cancellation between far elements."""
    length = values.shape[axis]
    out = np.zeros_like(values, dtype=np.float64)
    moved, dst = np.moveaxis(values, axis, 0), np.moveaxis(out, axis, 0)
    for k in range(-min(below, length - 1), min(above, length - 1) + 1):
        dst[max(-k, 0) : length - max(k, 0)] += moved[max(k, 0) : length + min(k, 0)]
    return out


def region_sum(values: np.ndarray, plan: LocalResponsePlan, *, transposed: bool = False) -> np.ndarray:
    """The sum over each element's window on every windowed axis (a product region).
    ``transposed``: over {i : the element is in W(i)}, the window mirrored (the gradient's)."""
    below, above = (plan.above, plan.below) if transposed else (plan.below, plan.above)
    out = np.asarray(values, dtype=np.float64)
    for axis in plan.axes:
        out = window_sum(out, axis, below, above)
    return out


def local_response_terms(plan: LocalResponsePlan, x: np.ndarray) -> np.ndarray:
    """d = Bias + Alpha / divisor * the window's sum of squares."""
    return plan.bias + (plan.alpha / plan.divisor) * region_sum(x * x, plan)


def local_response_facts(desc: OperatorDesc, inputs: dict[str, np.ndarray], spec: Spec) -> dict[str, float]:
    """The largest window sum of squares of the case's input and the largest denominator
    (Bias + Alpha / divisor * that sum)^Beta, what an element is divided by, in float64 (the
    registry's ``facts`` part of both local-response kernels; its ``fact_names`` are these keys).

    An expectation names by them the cases whose windows leave a narrower type's range: DirectML's
    FLOAT16 gradient holds the sum in FLOAT16, which saturates past 65504 (and a square past
    it is infinite, the output 0); JAX's derivative of the quotient squares the denominator,
    which leaves the range past its square root (cases/jax/quotient-vjp-squares-denominator)."""
    plan = make_local_response_plan(desc, spec)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    sums = region_sum(x * x, plan)
    with np.errstate(over="ignore"):
        denominator = np.power(plan.bias + (plan.alpha / plan.divisor) * np.max(sums), plan.beta)
    return {"largest_window_square_sum": float(np.max(sums)), "largest_denominator": float(denominator)}


def local_response(plan: LocalResponsePlan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        y = x * np.power(local_response_terms(plan, x), -plan.beta)
    return {plan.output: y}


def local_response_grad(plan: LocalResponsePlan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The vector-Jacobian product of :func:`local_response`: dy_j/dx_k = delta_jk d_j^-Beta -
    (2 Alpha Beta / divisor) x_j x_k d_j^(-Beta-1) [k in W(j)], so
    out_k = g_k d_k^-Beta - (2 Alpha Beta / divisor) x_k * sum_{j : k in W(j)} g_j x_j d_j^(-Beta-1)."""
    assert plan.input_gradient is not None
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    g = np.asarray(arrays[plan.input_gradient], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d = local_response_terms(plan, x)
        inner = region_sum(g * x * np.power(d, -plan.beta - 1.0), plan, transposed=True)
        out = g * np.power(d, -plan.beta) - (2.0 * plan.alpha * plan.beta / plan.divisor) * x * inner
    return {plan.output: out}


def squared_norm(plan: LpPlan, x: np.ndarray) -> np.ndarray:
    """Each slice's squared P-norm (keepdims shape): (sum |x|)^2 for P = 1, sum x^2 for P = 2,
    summed in float64 whatever ``x``'s type (no float64 copy of a FLOAT16 or FLOAT32 input for
    P = 1: the facts of a 2^26-element case)."""
    with np.errstate(over="ignore"):
        if plan.p == 1:
            norm = np.sum(np.abs(x), axis=plan.axes, keepdims=True, dtype=np.float64)
            return norm * norm
        return np.sum(np.square(x, dtype=np.float64), axis=plan.axes, keepdims=True)


def lp_facts(desc: OperatorDesc, inputs: dict[str, np.ndarray], spec: Spec) -> dict[str, float]:
    """The largest and smallest squared norm of the case's slices, in float64 (the registry's
    ``facts`` part of ``lp_normalization``; its ``fact_names`` are these keys).

    An expectation names by them the cases whose squared norm leaves a narrower type's range:
    DirectML holds it in FLOAT16, which saturates or overflows above 65504 and flushes to 0
    below 2^-24 (finding F10)."""
    plan = make_lp_plan(desc, spec)
    squared = squared_norm(plan, np.asarray(inputs[plan.input]))
    return {"largest_squared_norm": float(np.max(squared)), "smallest_squared_norm": float(np.min(squared))}


def lp_denominator(plan: LpPlan, x: np.ndarray) -> np.ndarray:
    """What each slice is divided by, Epsilon placed as the plan says (keepdims shape)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if plan.epsilon_placement == "inside_root":
            a = np.abs(x)
            s = np.sum(a if plan.p == 1 else a * a, axis=plan.axes, keepdims=True)
            return s + plan.epsilon if plan.p == 1 else np.sqrt(s + plan.epsilon)
        squared = squared_norm(plan, x)
        norm = np.sqrt(squared)
        if plan.epsilon_placement == "squared_norm":
            return np.sqrt(squared + plan.epsilon)
        if plan.epsilon_placement == "max":
            return np.maximum(norm, plan.epsilon)
        return norm + plan.epsilon


def lp_normalization(plan: LpPlan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {plan.output: x / lp_denominator(plan, x)}
