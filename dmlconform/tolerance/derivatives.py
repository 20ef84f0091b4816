"""Where and how far the ``directional_derivative`` relation steps, per kernel.

The relation (runner/relations.py) is generic: central differences of the forward operator along a
random direction against the backend's gradient. What is kernel-specific is the scale on which
the forward is smooth (the step must stay in its linear region, yet be far above the input's
rounding) and which elements the comparison may judge. Each gradient kernel names its function
here as its ``derivative`` part (dmlconform/kernels/); the signature is
``(desc, spec, inputs, member) -> (step size, judged)``: a step size broadcastable to
``inputs[member]`` and a boolean mask of the elements the relation judges, or None for all.
"""

from __future__ import annotations

import numpy as np

from dmlconform.kernels.local_response import build_plan as local_response_plan
from dmlconform.kernels.normalization_grad import NormalizationGradPlan
from dmlconform.kernels.normalization_grad import build_plan as normalization_grad_plan
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec

DERIVATIVE_STEP = 2.0**-8
"""Central-difference step, relative to the kernel's smoothness scale (for the normalization
gradient each slice's sqrt(var + Epsilon), for local response sqrt(x^2 + Bias / a) per element)."""
OWN_STATISTICS_RTOL = 2.0**-10
"""MeanTensor and VarianceTensor count as the slice's own statistics within this fraction of
sqrt(var + Epsilon), resp. var + Epsilon (their float32 rounding is 2^-24 relative; the data
regimes' substitutes differ by O(1))."""
WELL_CONDITIONED = 2.0**-7
"""A slice takes part when four ULPs of its data (in the input's type) are at most this fraction
of sqrt(var + Epsilon)."""


def _comparable_slices(
    xf: np.ndarray,
    own_var: np.ndarray,
    dtype: np.dtype,
    axes: tuple[int, ...],
    inputs: dict[str, np.ndarray],
    plan: NormalizationGradPlan,
) -> np.ndarray:
    """Per slice (keepdims; ``own_var`` is the slice's variance), whether the finite-difference
    relation can judge it.

    The forward normalizes by the slice's own statistics; the gradient by MeanTensor and
    VarianceTensor (it centres on MeanTensor, as DirectML does: doc_notes bound-mean). They
    are one function only where the two agree (the data regimes give a constant slice under
    Epsilon 0 a positive VarianceTensor, to keep the gradient defined). And a slice where a few
    ULPs of the data are not small against sqrt(var + Epsilon) has a gradient no implementation
    in the input's precision computes to the relation's tolerance (the mean's error enters it
    divided by that, and squared over var + Epsilon): it says nothing either way."""
    eps = float(plan.epsilon)
    own_mean = xf.mean(axis=axes, keepdims=True) if axes else xf
    given_var = np.asarray(inputs[plan.variance], dtype=np.float64)
    given_mean = np.asarray(inputs[plan.mean], dtype=np.float64)
    scale = np.sqrt(own_var + eps)
    two_ulps = 2 * float(np.finfo(dtype).eps)  # relative: a rounded statistic is this close
    own = np.abs(given_var - own_var) <= OWN_STATISTICS_RTOL * (own_var + eps)
    own &= np.abs(given_mean - own_mean) <= OWN_STATISTICS_RTOL * scale + two_ulps * np.abs(own_mean)
    peak = np.max(np.abs(xf), axis=axes, keepdims=True) if axes else np.abs(xf)
    return own & (2 * two_ulps * peak <= WELL_CONDITIONED * scale)


def normalization_domain(
    desc: OperatorDesc, spec: Spec, inputs: dict[str, np.ndarray], member: str
) -> tuple[np.ndarray, np.ndarray]:
    """The batch-norm gradient: steps of sqrt(var + Epsilon) per slice (on a constant slice a
    step of the data's own size would leave the linear region entirely); judged where the given
    statistics are the slice's own and the slice is well conditioned, or, with one element per
    slice, where MeanTensor is the element itself (the forward is constant there and the
    gradient, centred on MeanTensor, is 0 only then)."""
    x = np.asarray(inputs[member])
    xf = x.astype(np.float64)
    plan = normalization_grad_plan(desc, spec)
    axes = plan.axes
    var = xf.var(axis=axes, keepdims=True) if axes else np.zeros_like(xf)
    size = np.sqrt(var + float(plan.epsilon)) * DERIVATIVE_STEP
    if x.size > np.size(inputs[plan.variance]):
        judged = _comparable_slices(xf, var, x.dtype, axes, inputs, plan)
    else:
        given = np.asarray(inputs[plan.mean], dtype=np.float64)
        judged = np.broadcast_to(given, xf.shape) == xf
    return np.broadcast_to(size, xf.shape), np.broadcast_to(judged, xf.shape)


def local_response_domain(
    desc: OperatorDesc, spec: Spec, inputs: dict[str, np.ndarray], member: str
) -> tuple[np.ndarray, None]:
    """Local response: x d^-Beta with d = Bias + a * (window sum of x^2), a = Alpha / divisor.
    Every d that x_k enters is at least Bias + a x_k^2, so d^-Beta bends on a scale of at least
    s_k = sqrt(x_k^2 + Bias / a) in x_k, and a step of DERIVATIVE_STEP * s_k moves each such d by
    at most 2 DERIVATIVE_STEP relatively per window element: linear to the relation's
    tolerance. One step size for all elements fails here: large-offset data mixes elements of 2
    and 5e4, and a step of the data's root mean square throws the small ones far past their own
    bend. Every finite element is judged (d > 0 as Bias > 0)."""
    xf = np.asarray(inputs[member], dtype=np.float64)
    plan = local_response_plan(desc, spec)
    a = abs(float(plan.alpha)) / float(plan.divisor)
    reach = abs(float(plan.bias)) / a if a > 0 else float(np.max(np.abs(xf), initial=0.0)) ** 2
    return np.sqrt(xf * xf + reach) * DERIVATIVE_STEP, None
