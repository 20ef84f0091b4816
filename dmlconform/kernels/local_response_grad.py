"""The ``local_response_grad`` kernel: the vector-Jacobian product of ``local_response``
(LOCAL_RESPONSE_NORMALIZATION_GRAD) with the ``input_gradient`` member:

dy_j/dx_k = delta_jk d_j^-Beta - (2 Alpha Beta / divisor) x_j x_k d_j^(-Beta-1) [k in W(j)], so
out_k = g_k d_k^-Beta - (2 Alpha Beta / divisor) x_k * sum_{j : k in W(j)} g_j x_j d_j^(-Beta-1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dmlconform import reference
from dmlconform.kernels.base import need, semantics_of
from dmlconform.kernels.local_response import (
    LocalResponsePlan,
    facts,
    local_response_terms,
    plan_fields,
    region_sum,
    window_facts,
)
from dmlconform.kernels.registry import Kernel, SliceFacts
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec


@dataclass(frozen=True, kw_only=True)
class LocalResponseGradPlan(LocalResponsePlan):
    """A local response normalization's gradient: the forward plan plus ``input_gradient``."""

    kernel: ClassVar[str] = "local_response_grad"
    INPUT_FIELDS: ClassVar[tuple[str, ...]] = ("input", "input_gradient")

    input_gradient: str


def build_plan(desc: OperatorDesc, spec: Spec) -> LocalResponseGradPlan:
    sem = semantics_of(desc, spec)
    return LocalResponseGradPlan(
        **plan_fields(desc, spec), input_gradient=need(desc, sem, "input_gradient", spec)
    )


def compute(plan: LocalResponseGradPlan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    g = np.asarray(arrays[plan.input_gradient], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d = local_response_terms(plan, x)
        inner = region_sum(g * x * np.power(d, -plan.beta - 1.0), plan, transposed=True)
        out = g * np.power(d, -plan.beta) - (2.0 * plan.alpha * plan.beta / plan.divisor) * x * inner
    return {plan.output: out}


def execute(
    desc: OperatorDesc, inputs: dict[str, Any], spec: Spec, *, float64: bool = False, out: Any = None
) -> dict[str, np.ndarray]:
    return reference.compute_outputs(
        build_plan(desc, spec), compute, desc, inputs, spec, float64=float64, out=out
    )


def slice_facts(desc: OperatorDesc, inputs: dict[str, Any], spec: Spec) -> SliceFacts:
    """The windows' facts as for the forward (``window_square_sum``, ``window_term``). The
    gradient at k reads its own window's d_k and the d_j of every window that holds k (the
    transposed window: the formula above). An implementation that sums over the forward window
    where the transposed one is meant (DirectML's F9, even LocalSize) reads the windows W(k)
    holds: both regions count, so a window out of range decides every element within either
    reach of it."""
    plan = build_plan(desc, spec)

    def spread(mask: np.ndarray) -> dict[str, np.ndarray]:
        m = np.asarray(mask, dtype=np.float64)
        reach = (region_sum(m, plan) > 0) | (region_sum(m, plan, transposed=True) > 0)
        return {plan.output: reach | np.asarray(mask, dtype=bool)}

    return SliceFacts(window_facts(plan, inputs), spread)


KERNEL = Kernel(
    name="local_response_grad",
    summary="the vector-Jacobian product of local_response",
    plan=build_plan,
    execute=execute,
    budgets="dmlconform.tolerance.local_response:local_response_budgets",
    model="local_response",
    relations=("same_output_as", "chained", "directional_derivative"),
    derivative="dmlconform.tolerance.derivatives:local_response_domain",
    facts=facts,
    slice_facts=slice_facts,
    slice_fact_names=("window_square_sum", "window_term"),
    fact_names=("largest_window_square_sum", "largest_denominator_base", "largest_denominator"),
    bytes_per_element=200,
)
