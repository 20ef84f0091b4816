"""The ``normalization_grad`` kernel: the gradients of a batch normalization with respect to its
input, Scale and Bias (BATCH_NORMALIZATION_GRAD, BATCH_NORMALIZATION_TRAINING_GRAD), summed over
the axes where the statistics' sizes are 1.

``statistics: given`` treats Mean and Variance as constants; ``statistics: batch``
differentiates through the batch mean and variance (the standard batch-norm backward), the
variance taken about the Mean member where the spec says ``centre_with: mean``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dmlconform import reference
from dmlconform.errors import PlanError
from dmlconform.kernels.base import KernelPlan, common, f32, member_value, need, semantics_of, tensor
from dmlconform.kernels.registry import SAME_OUTPUT_RELATIONS, Kernel, SliceFacts, spread_over
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec


@dataclass(frozen=True, kw_only=True)
class NormalizationGradPlan(KernelPlan):
    """The batch-norm gradients: ``output`` (the input gradient), ``scale_gradient_output`` and
    ``bias_gradient_output``. ``statistics``: ``given`` or ``batch``; ``centre_with`` (batch
    only): ``input`` (Input's batch mean) or ``mean`` (the Mean member)."""

    kernel: ClassVar[str] = "normalization_grad"
    INPUT_FIELDS: ClassVar[tuple[str, ...]] = ("input", "input_gradient", "mean", "variance", "scale")
    OUTPUT_FIELDS: ClassVar[tuple[str, ...]] = ("output", "scale_gradient_output", "bias_gradient_output")

    input: str
    input_gradient: str
    mean: str
    variance: str
    scale: str
    output: str
    scale_gradient_output: str
    bias_gradient_output: str
    epsilon: float
    statistics: str = "given"
    centre_with: str = "input"

    @property
    def centres_on_mean(self) -> bool:
        """The input gradient centres Input on the Mean member rather than on its batch mean."""
        return self.statistics == "batch" and self.centre_with == "mean"

    @property
    def centre(self) -> str | None:
        """The Mean member, except where the gradient flows through Input's own batch mean."""
        return "mean" if self.statistics == "batch" and not self.centres_on_mean else self.mean


def build_plan(desc: OperatorDesc, spec: Spec) -> NormalizationGradPlan:
    sem = semantics_of(desc, spec)
    statistics = str(sem.get("statistics", "given"))
    if statistics not in ("given", "batch"):
        raise PlanError(f"semantics.statistics {statistics!r} is not understood (given, batch)")
    centre_with = str(sem.get("centre_with", "input"))
    if centre_with not in ("input", "mean"):
        raise PlanError(f"semantics.centre_with {centre_with!r} is not understood (input, mean)")
    return NormalizationGradPlan(
        **common(desc, spec),
        input=need(desc, sem, "input", spec),
        input_gradient=need(desc, sem, "input_gradient", spec),
        mean=need(desc, sem, "mean", spec),
        variance=need(desc, sem, "variance_input", spec),
        scale=need(desc, sem, "scale", spec),
        output=need(desc, sem, "output", spec),
        scale_gradient_output=need(desc, sem, "scale_gradient_output", spec),
        bias_gradient_output=need(desc, sem, "bias_gradient_output", spec),
        epsilon=f32(member_value(desc, sem.get("epsilon", 0.0), spec, "Epsilon")),
        statistics=statistics,
        centre_with=centre_with,
    )


def statistics_from_input(desc: OperatorDesc, spec: Spec) -> bool:
    """The Mean and Variance inputs are the input's own batch statistics
    (``semantics.statistics_from_input``): the data regimes draw them so."""
    return bool(semantics_of(desc, spec).get("statistics_from_input"))


def compute(plan: NormalizationGradPlan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The gradients in float64. Tensor-sized temporaries are updated in place (each fresh one
    cost about as much as its arithmetic at 2^26 elements); the operations and their order
    are the formulas', so the values are the same bits."""
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    dy = np.asarray(arrays[plan.input_gradient], dtype=np.float64)
    mean = np.asarray(arrays[plan.mean], dtype=np.float64)
    var = np.asarray(arrays[plan.variance], dtype=np.float64)
    scale = np.asarray(arrays[plan.scale], dtype=np.float64)
    axes = plan.axes
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_sd = 1.0 / np.sqrt(var + plan.epsilon)
        bias_grad = np.sum(dy, axis=axes, keepdims=True)
        dy_xm = x - mean
        dy_xm *= dy
        scale_grad = np.sum(dy_xm, axis=axes, keepdims=True) * inv_sd
        if plan.statistics == "given":
            dx = dy * (scale * inv_sd)
        else:
            if plan.centres_on_mean:  # dy (x - Mean) is the product the coefficient averages
                xc, dy_xc = x - mean, dy_xm
            else:
                xc = x - np.mean(x, axis=axes, keepdims=True)
                dy_xc = np.multiply(dy, xc, out=dy_xm)
            coef1 = np.mean(dy_xc, axis=axes, keepdims=True)
            del dy_xm, dy_xc
            dx = dy - np.mean(dy, axis=axes, keepdims=True)
            xc *= coef1
            xc /= var + plan.epsilon
            dx -= xc
            dx *= scale * inv_sd
    stat_shape = np.shape(mean)
    return {
        plan.output: np.broadcast_to(dx, x.shape),
        plan.scale_gradient_output: np.broadcast_to(scale_grad, stat_shape),
        plan.bias_gradient_output: np.broadcast_to(bias_grad, stat_shape),
    }


def execute(
    desc: OperatorDesc, inputs: dict[str, Any], spec: Spec, *, float64: bool = False, out: Any = None
) -> dict[str, np.ndarray]:
    return reference.compute_outputs(
        build_plan(desc, spec), compute, desc, inputs, spec, float64=float64, out=out
    )


def facts(desc: OperatorDesc, inputs: dict[str, Any], spec: Spec) -> dict[str, float]:
    """Over the case's channels, in float64: the largest |sum of InputGradient * (Input - Mean)|,
    the sum the scale gradient divides by the standard deviation; the largest and smallest
    Variance given; and the largest |derivative of sum(InputGradient * Output) with respect to
    the Variance|, |Scale * that sum| / (2 (Variance + Epsilon)^1.5), the "dvar" of the standard
    batch-norm backward, which chain-rule implementations of the batch statistics' gradient form.

    An expectation names by the sum the cases where it leaves FLOAT16's range: DirectML's FLOAT16
    BATCH_NORMALIZATION_GRAD holds it in FLOAT16, saturated at 65504
    (cases/directml/bng-fp16-gradient-sum), and JAX's vjp forms it in float16 (J4). By the
    Variance and dvar, the cases where 1 / sqrt(Variance + Epsilon)'s derivative or dvar leaves
    FLOAT16's normal range (J5: cases/jax/float16-rsqrt-derivative)."""
    plan = build_plan(desc, spec)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    products = (x - np.asarray(inputs[plan.mean], dtype=np.float64)) * np.asarray(
        inputs[plan.input_gradient], dtype=np.float64
    )
    sums = np.sum(products, axis=plan.axes, keepdims=True)
    variance = np.asarray(inputs[plan.variance], dtype=np.float64)
    scale = np.asarray(inputs[plan.scale], dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        dvar = np.abs(scale * sums) / (2.0 * (variance + plan.epsilon) ** 1.5)
    return {
        "largest_centred_gradient_sum": float(np.max(np.abs(sums))),
        "largest_variance": float(np.max(variance)),
        "smallest_variance": float(np.min(variance)),
        "largest_variance_gradient": float(np.nanmax(dvar)) if not np.isnan(dvar).all() else float("nan"),
    }


def slice_facts(desc: OperatorDesc, inputs: dict[str, Any], spec: Spec) -> SliceFacts:
    """``centred_gradient_sum``: each channel's |sum of InputGradient * (Input - Mean)| (Mean the
    member, as ``largest_centred_gradient_sum``). Scale's gradient is that sum over the standard
    deviation: it decides the channel's scale-gradient element. With given statistics the input
    gradient is InputGradient * Scale / sd, which does not read it; with batch statistics the
    input gradient's correction averages the same products, so it decides the channel's
    input-gradient elements too. The bias gradient sums InputGradient alone.

    ``centred_gradient_abs_sum``: each channel's sum of |InputGradient * (Input - Mean)|, what
    no partial sum of those products can pass in any order: where a narrower type accumulates
    them, a partial sum leaves its range only in a channel where this does (JAX's float16 vjp
    sums in order: 77636 on the way to a total of -39612)."""
    plan = build_plan(desc, spec)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    products = (x - np.asarray(inputs[plan.mean], dtype=np.float64)) * np.asarray(
        inputs[plan.input_gradient], dtype=np.float64
    )
    sums = np.abs(np.sum(products, axis=plan.axes, keepdims=True))
    abs_sums = np.sum(np.abs(products), axis=plan.axes, keepdims=True)
    decided = [plan.scale_gradient_output] + ([plan.output] if plan.statistics == "batch" else [])

    def spread(mask: np.ndarray) -> dict[str, np.ndarray]:
        out = {}
        for name in decided:
            t = tensor(desc, name, spec)
            elements = spread_over(mask, None if t is None else tuple(t.sizes))
            if elements is not None:
                out[name] = elements
        return out

    return SliceFacts({"centred_gradient_sum": sums, "centred_gradient_abs_sum": abs_sums}, spread)


KERNEL = Kernel(
    name="normalization_grad",
    summary="gradients of a batch normalization with respect to input, scale and bias",
    plan=build_plan,
    execute=execute,
    budgets="dmlconform.tolerance.gradients:reduction_grad_budgets",
    model="reduction_grad",
    relations=(*SAME_OUTPUT_RELATIONS, "directional_derivative"),
    judge="dmlconform.tolerance.judge:gradient_plan_for",
    derivative="dmlconform.tolerance.derivatives:normalization_domain",
    facts=facts,
    slice_facts=slice_facts,
    slice_fact_names=("centred_gradient_sum", "centred_gradient_abs_sum"),
    fact_names=(
        "largest_centred_gradient_sum",
        "largest_variance",
        "smallest_variance",
        "largest_variance_gradient",
    ),
    bytes_per_element=80,
)
