"""The ``lp_normalization`` kernel: each slice along an axis over its P-norm (P 1 or 2), Epsilon
placed as the spec says (LP_NORMALIZATION; ``semantics.epsilon_placement``, settled on DirectML
1.15.4 by cases/directml/lp-epsilon-placement):

squared_norm: x / sqrt(norm^2 + Epsilon); max: x / max(norm, Epsilon); add: x / (norm + Epsilon);
inside_root: x / (sum |x|^P + Epsilon)^(1/P).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dmlconform import reference
from dmlconform.errors import PlanError
from dmlconform.kernels.base import KernelPlan, common, f32, member_value, need, semantics_of
from dmlconform.kernels.registry import Kernel
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec

EPSILON_PLACEMENTS = ("squared_norm", "max", "add", "inside_root")


@dataclass(frozen=True, kw_only=True)
class LpNormalizationPlan(KernelPlan):
    """An Lp normalization along ``axes``: ``p`` 1 or 2, ``epsilon`` placed as
    ``epsilon_placement`` says (one of :data:`EPSILON_PLACEMENTS`)."""

    kernel: ClassVar[str] = "lp_normalization"
    INPUT_FIELDS: ClassVar[tuple[str, ...]] = ("input",)
    OUTPUT_FIELDS: ClassVar[tuple[str, ...]] = ("output",)

    input: str
    output: str
    p: int
    epsilon: float
    epsilon_placement: str


def build_plan(desc: OperatorDesc, spec: Spec) -> LpNormalizationPlan:
    sem = semantics_of(desc, spec)
    p = int(member_value(desc, sem["p"], spec, "P"))
    if p not in (1, 2):
        raise PlanError(f"{sem['p']['member']}: {p} is not 1 or 2")
    placement = str(sem.get("epsilon_placement", "squared_norm"))
    if placement not in EPSILON_PLACEMENTS:
        raise PlanError(f"semantics.epsilon_placement {placement!r} is not understood")
    return LpNormalizationPlan(
        **common(desc, spec),
        input=need(desc, sem, "input", spec),
        output=need(desc, sem, "output", spec),
        p=p,
        epsilon=f32(member_value(desc, sem.get("epsilon", 0.0), spec, "Epsilon")),
        epsilon_placement=placement,
    )


def squared_norm(plan: LpNormalizationPlan, x: np.ndarray) -> np.ndarray:
    """Each slice's squared P-norm (keepdims shape): (sum |x|)^2 for P = 1, sum x^2 for P = 2,
    summed in float64 whatever ``x``'s type (no float64 copy of a FLOAT16 or FLOAT32 input for
    P = 1: the facts of a 2^26-element case)."""
    with np.errstate(over="ignore"):
        if plan.p == 1:
            norm = np.sum(np.abs(x), axis=plan.axes, keepdims=True, dtype=np.float64)
            return norm * norm
        return np.sum(np.square(x, dtype=np.float64), axis=plan.axes, keepdims=True)


def denominator(plan: LpNormalizationPlan, x: np.ndarray) -> np.ndarray:
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


def compute(plan: LpNormalizationPlan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {plan.output: x / denominator(plan, x)}


def execute(
    desc: OperatorDesc, inputs: dict[str, Any], spec: Spec, *, float64: bool = False, out: Any = None
) -> dict[str, np.ndarray]:
    return reference.compute_outputs(
        build_plan(desc, spec), compute, desc, inputs, spec, float64=float64, out=out
    )


def facts(desc: OperatorDesc, inputs: dict[str, np.ndarray], spec: Spec) -> dict[str, float]:
    """The largest and smallest squared norm of the case's slices, in float64.

    An expectation names by them the cases whose squared norm leaves a narrower type's range:
    DirectML holds it in FLOAT16, which saturates or overflows above 65504 and flushes to 0
    below 2^-24 (finding F10)."""
    plan = build_plan(desc, spec)
    squared = squared_norm(plan, np.asarray(inputs[plan.input]))
    return {"largest_squared_norm": float(np.max(squared)), "smallest_squared_norm": float(np.min(squared))}


KERNEL = Kernel(
    name="lp_normalization",
    summary="each slice along an axis over its P-norm (P 1 or 2), Epsilon placed as the spec says",
    plan=build_plan,
    execute=execute,
    budgets="dmlconform.tolerance.lp_norm:lp_budgets",
    model="lp_norm",
    relations=("same_output_as", "chained"),
    facts=facts,
    fact_names=("largest_squared_norm", "smallest_squared_norm"),
    bytes_per_element=88,
)
