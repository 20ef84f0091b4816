"""The ``given_statistics`` kernel: normalization by a given mean and variance, elementwise
(BATCH_NORMALIZATION, the inference batch norm):

Output = act(Scale * (Input - Mean) / sqrt(Variance + Epsilon) + Bias), Mean, Variance, Scale
and Bias broadcast to the input's shape; nothing is reduced. ``axes`` are the dims the
statistics were taken over (``semantics.reduce_axes``: where Mean's size is 1), which the data
regimes and the budgets read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dmlconform import reference
from dmlconform.kernels.base import (
    KernelPlan,
    common,
    f32,
    fused_activation,
    member_value,
    need,
    present,
    semantics_of,
)
from dmlconform.kernels.registry import SAME_OUTPUT_RELATIONS, Kernel
from dmlconform.reference.activation_arrays import activation
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec


@dataclass(frozen=True, kw_only=True)
class GivenStatisticsPlan(KernelPlan):
    """A normalization by the ``mean`` and ``variance`` input members."""

    kernel: ClassVar[str] = "given_statistics"
    INPUT_FIELDS: ClassVar[tuple[str, ...]] = ("input", "mean", "variance", "scale", "bias")
    OUTPUT_FIELDS: ClassVar[tuple[str, ...]] = ("output",)

    input: str
    mean: str
    variance: str
    output: str
    scale: str | None = None
    bias: str | None = None
    epsilon: float = 0.0

    @property
    def centre(self) -> str | None:
        return self.mean


def build_plan(desc: OperatorDesc, spec: Spec) -> GivenStatisticsPlan:
    sem = semantics_of(desc, spec)
    activation_type, params = fused_activation(desc, sem, spec)
    return GivenStatisticsPlan(
        **common(desc, spec),
        input=need(desc, sem, "input", spec),
        mean=need(desc, sem, "mean", spec),
        variance=need(desc, sem, "variance_input", spec),
        scale=present(desc, sem, "scale", spec),
        bias=present(desc, sem, "bias", spec),
        output=need(desc, sem, "output", spec),
        epsilon=f32(member_value(desc, sem.get("epsilon", 0.0), spec, "Epsilon")),
        activation=activation_type,
        activation_params=params,
    )


def compute(plan: GivenStatisticsPlan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """float64, elementwise: the documented formula with the given statistics broadcast."""
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    mean = np.asarray(arrays[plan.mean], dtype=np.float64)
    var = np.asarray(arrays[plan.variance], dtype=np.float64)
    scale = np.asarray(arrays[plan.scale], dtype=np.float64) if plan.scale else 1.0
    bias = np.asarray(arrays[plan.bias], dtype=np.float64) if plan.bias else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):  # Variance + Epsilon 0: undefined, any value
        z = (x - mean) / np.sqrt(var + plan.epsilon)
        y = scale * z + bias
    return {plan.output: activation(plan.activation, np.broadcast_to(y, x.shape), plan.activation_params)}


def execute(
    desc: OperatorDesc, inputs: dict[str, Any], spec: Spec, *, float64: bool = False, out: Any = None
) -> dict[str, np.ndarray]:
    return reference.compute_outputs(
        build_plan(desc, spec), compute, desc, inputs, spec, float64=float64, out=out
    )


def facts(desc: OperatorDesc, inputs: dict[str, Any], spec: Spec) -> dict[str, float]:
    """The smallest Variance given (float64): where an Epsilon the implementation drops would
    show (OpenVINO's FLOAT16 graphs round an Epsilon under 2^-25 to 0: OV6)."""
    plan = build_plan(desc, spec)
    return {"smallest_variance": float(np.min(np.asarray(inputs[plan.variance], dtype=np.float64)))}


KERNEL = Kernel(
    name="given_statistics",
    summary="normalization with given mean and variance (inference batch norm)",
    plan=build_plan,
    execute=execute,
    budgets="dmlconform.tolerance.pointwise:pointwise_budgets",
    model="pointwise",
    relations=SAME_OUTPUT_RELATIONS,
    judge="dmlconform.tolerance.judge:given_plan_for",
    facts=facts,
    fact_names=("smallest_variance",),
    bytes_per_element=88,
)
