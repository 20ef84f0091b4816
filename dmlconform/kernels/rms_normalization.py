"""The ``rms_normalization`` kernel: the normalization with its mean step off
(MEAN_VARIANCE_NORMALIZATION2 with UseMean FALSE, inferred: spec/operators/
mean_variance_normalization2.yaml). The statistic divided out is the second moment about zero:

Output = act(Scale * Input / sqrt(mean(Input^2) + Epsilon) + Bias + FusedAdd), or without the
division where the variance step is off too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dmlconform import reference
from dmlconform.kernels.base import KernelPlan
from dmlconform.kernels.normalization import facts, read_common, slice_facts
from dmlconform.kernels.registry import SAME_OUTPUT_RELATIONS, Kernel
from dmlconform.reference.activation_arrays import activation
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec


@dataclass(frozen=True, kw_only=True)
class RmsNormalizationPlan(KernelPlan):
    """An uncentred normalization: as :class:`~dmlconform.kernels.normalization.NormalizationPlan`
    without statistics outputs, the input not centred."""

    kernel: ClassVar[str] = "rms_normalization"
    INPUT_FIELDS: ClassVar[tuple[str, ...]] = ("input", "scale", "bias", "fused_add")
    OUTPUT_FIELDS: ClassVar[tuple[str, ...]] = ("output",)

    input: str
    output: str
    scale: str | None = None
    bias: str | None = None
    fused_add: str | None = None
    normalize_variance: bool = True
    epsilon: float = 0.0


def build_plan(desc: OperatorDesc, spec: Spec) -> RmsNormalizationPlan:
    return RmsNormalizationPlan(**read_common(desc, spec))


def _f64(arrays: dict[str, np.ndarray], name: str | None, fill: float) -> np.ndarray | float:
    return np.asarray(arrays[name], dtype=np.float64) if name else fill


def compute(plan: RmsNormalizationPlan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """float64: x / sqrt(mean(x^2) + Epsilon) (or x), Scale, Bias, FusedAdd, the activation."""
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    if plan.normalize_variance:
        ms = np.mean(x * x, axis=plan.axes, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = x / np.sqrt(ms + plan.epsilon)
    else:
        z = x
    y = _f64(arrays, plan.scale, 1.0) * z + _f64(arrays, plan.bias, 0.0) + _f64(arrays, plan.fused_add, 0.0)
    return {plan.output: activation(plan.activation, y, plan.activation_params)}


def execute(
    desc: OperatorDesc, inputs: dict[str, Any], spec: Spec, *, float64: bool = False, out: Any = None
) -> dict[str, np.ndarray]:
    return reference.compute_outputs(
        build_plan(desc, spec), compute, desc, inputs, spec, float64=float64, out=out
    )


KERNEL = Kernel(
    name="rms_normalization",
    summary="the second moment about zero (the mean step off)",
    plan=build_plan,
    execute=execute,
    budgets="dmlconform.tolerance.rms:rms_budgets",
    model="normalization",
    relations=SAME_OUTPUT_RELATIONS,
    judge="dmlconform.tolerance.judge:rms_plan_for",
    facts=facts,
    slice_facts=slice_facts,
    slice_fact_names=("variance",),
    fact_names=("largest_variance", "smallest_variance"),
    bytes_per_element=56,
)
