"""The ``local_response`` kernel: each element over a power of its window's sum of squares
(LOCAL_RESPONSE_NORMALIZATION):

d = Bias + Alpha / divisor * the sum of Input^2 over the element's window, Output = Input d^-Beta.

The window runs over each of ``axes`` (the channels, or Height and Width within a channel) from
``below`` elements under an element to ``above`` over it, clipped to the tensor
(``semantics.window``; an even LocalSize reaches one further above: DirectML 1.15.4,
cases/directml/lrn-even-window). float64 suffices for the reference: every sum has positive
terms, so its error is a few 2^-53 of its magnitude, far below half a float32 ULP of the outputs
(``tests/test_reference_local.py`` holds it to mpmath).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dmlconform import reference
from dmlconform.errors import PlanError
from dmlconform.kernels.base import KernelPlan, common, f32, member_value, need, semantics_of
from dmlconform.kernels.registry import Kernel, SliceFacts
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec


@dataclass(frozen=True, kw_only=True)
class LocalResponsePlan(KernelPlan):
    """A local response normalization: ``local_size`` per windowed axis, ``below`` / ``above``
    the window's reach on each side, ``divisor`` what Alpha is divided by; Alpha, Beta and Bias
    as the C FLOATs they are passed as."""

    kernel: ClassVar[str] = "local_response"
    INPUT_FIELDS: ClassVar[tuple[str, ...]] = ("input",)
    OUTPUT_FIELDS: ClassVar[tuple[str, ...]] = ("output",)

    input: str
    output: str
    local_size: int
    below: int
    above: int
    divisor: float
    alpha: float
    beta: float
    bias: float

    @property
    def cross_channel(self) -> bool:
        """The window runs across channels (axis 1) rather than within a channel."""
        return self.axes == (1,)

    @property
    def may_be_identity(self) -> bool:
        """Alpha or Beta 0: Output = Input * Bias^-Beta, the input itself where that is 1 (a
        case no data can make judge anything: ``tolerance.degenerate``)."""
        return self.alpha == 0 or self.beta == 0

    @property
    def reduction_length(self) -> int:
        """The unclipped window's element count (LocalSize per windowed axis)."""
        return self.local_size ** len(self.axes)

    def window_length(self, axis: int) -> int:
        """How many elements a window along ``axis`` can hold at most (clipped to the axis)."""
        return min(self.shape[axis], self.local_size)


def _reach(kind: str, n: int) -> int:
    """How many neighbours a window of ``n`` reaches on one side (``semantics.window``)."""
    if kind == "floor_half":
        return (n - 1) // 2
    if kind == "ceil_half":
        return n // 2
    raise PlanError(f"semantics.window: {kind!r} is not understood (floor_half, ceil_half)")


def plan_fields(desc: OperatorDesc, spec: Spec) -> dict[str, Any]:
    """The fields of a local response plan (the gradient's too): the members it names for the
    flag, LocalSize, Alpha, Beta and Bias, and how the window is placed (``window``,
    ``within_channel``, ``within_channel_divisor``)."""
    sem = semantics_of(desc, spec)
    n = int(member_value(desc, sem["local_size"], spec, "LocalSize"))
    if n < 1:
        raise PlanError(f"{sem['local_size']['member']}: {n} is below 1")
    cross = bool(member_value(desc, sem["cross_channel"], spec, "the cross-channel flag"))
    window = sem.get("window") or {"below": "floor_half", "above": "ceil_half"}
    divisor = float(n)
    if not cross:
        if sem.get("within_channel", "square") != "square":
            raise PlanError(f"{desc.operator}: semantics.within_channel says no window within a channel")
        if sem.get("within_channel_divisor", "local_size") == "window_area":
            divisor = float(n) * n
    return {
        **common(desc, spec),
        "input": need(desc, sem, "input", spec),
        "output": need(desc, sem, "output", spec),
        "local_size": n,
        "below": _reach(window["below"], n),
        "above": _reach(window["above"], n),
        "divisor": divisor,
        "alpha": f32(member_value(desc, sem["alpha"], spec, "Alpha")),
        "beta": f32(member_value(desc, sem["beta"], spec, "Beta")),
        "bias": f32(member_value(desc, sem["bias_term"], spec, "Bias")),
    }


def build_plan(desc: OperatorDesc, spec: Spec) -> LocalResponsePlan:
    return LocalResponsePlan(**plan_fields(desc, spec))


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


def compute(plan: LocalResponsePlan, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = np.asarray(arrays[plan.input], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        y = x * np.power(local_response_terms(plan, x), -plan.beta)
    return {plan.output: y}


def execute(
    desc: OperatorDesc, inputs: dict[str, Any], spec: Spec, *, float64: bool = False, out: Any = None
) -> dict[str, np.ndarray]:
    return reference.compute_outputs(
        build_plan(desc, spec), compute, desc, inputs, spec, float64=float64, out=out
    )


def facts(desc: OperatorDesc, inputs: dict[str, np.ndarray], spec: Spec) -> dict[str, float]:
    """The largest window sum of squares of the case's input, the largest Bias + Alpha / divisor *
    that sum, and the largest denominator, that to the power Beta (what an element is divided
    by), in float64 (the gradient kernel's ``facts`` part too).

    An expectation names by them the cases whose windows leave a narrower type's range: DirectML's
    FLOAT16 gradient holds the sum in FLOAT16, which saturates past 65504 (and a square past
    it is infinite, the output 0); JAX's derivative of the quotient squares the denominator,
    which leaves the range past its square root (J1: cases/jax/quotient-vjp-squares-denominator)."""
    plan = build_plan(desc, spec)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    largest = float(np.max(region_sum(x * x, plan)))
    base = plan.bias + plan.alpha / plan.divisor * largest
    with np.errstate(over="ignore", invalid="ignore"):
        denominator = np.power(np.float64(base), plan.beta)
    return {
        "largest_window_square_sum": largest,
        "largest_denominator_base": float(base),
        "largest_denominator": float(denominator),
    }


def window_facts(plan: LocalResponsePlan, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Each element's window's ``window_square_sum`` and ``window_term``, d = Bias + Alpha /
    divisor * that sum, the value raised to -Beta (where Alpha passes LocalSize, d leaves a
    narrower type's range before the sum does)."""
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    sums = region_sum(x * x, plan)
    return {"window_square_sum": sums, "window_term": plan.bias + (plan.alpha / plan.divisor) * sums}


def slice_facts(desc: OperatorDesc, inputs: dict[str, Any], spec: Spec) -> SliceFacts:
    """:func:`window_facts`, one window per element. An output element reads its own window's
    only."""
    plan = build_plan(desc, spec)

    def spread(mask: np.ndarray) -> dict[str, np.ndarray]:
        return {plan.output: np.array(mask, dtype=bool)}

    return SliceFacts(window_facts(plan, inputs), spread)


KERNEL = Kernel(
    name="local_response",
    summary="each element over (Bias + Alpha / LocalSize * a window's sum of squares)^Beta",
    plan=build_plan,
    execute=execute,
    budgets="dmlconform.tolerance.local_response:local_response_budgets",
    model="local_response",
    relations=("same_output_as", "chained"),
    facts=facts,
    slice_facts=slice_facts,
    slice_fact_names=("window_square_sum", "window_term"),
    fact_names=("largest_window_square_sum", "largest_denominator_base", "largest_denominator"),
    bytes_per_element=104,
)
