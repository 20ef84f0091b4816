"""The kernel registry: for every computation an operator's spec can name (``semantics.kernel``),
the functions that serve it at each stage of the pipeline.

Why a table: an operator is YAML that names a kernel; the stages (semantics' plan, the float64
reference, the tolerance model, the relations the suite applies, the backends' lowerings) must
all agree on what that kernel is. Before, each stage found its part by testing kernel names, and
adding a kernel meant editing six files with nothing to say which. Now adding an operator that
reuses a kernel is YAML only; adding a kernel is one entry here plus its functions, and
``tests/test_kernel_registry.py`` fails if an entry lacks a part, a part does not import, an
operator names an unregistered kernel, or a backend that lowers kernels misses one.

Parts are ``"module:function"`` strings resolved on first use: the registry sits above every
stage without importing them (numba stays unloaded until a kernel needs it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from dmlconform.specification import semantics

if TYPE_CHECKING:
    from dmlconform.specification.desc import OperatorDesc
    from dmlconform.specification.spec import Spec


@dataclass(frozen=True)
class Kernel:
    """One computation and its parts (each ``"module:function"``)."""

    name: str
    #: what it computes, for docs and messages
    summary: str
    #: (desc, spec) -> the plan every later stage reads (semantics)
    plan: str
    #: (desc, inputs, spec, float64=, out=) -> outputs: the float64 reference
    execute: str
    #: (desc, reference outputs, inputs, spec, overrides) -> tolerance Budgets
    budgets: str
    #: the spec's ``tolerance.model`` name of that budget model (operators must agree)
    model: str
    #: relation kinds (spec ``relations:``) the suite checks on this kernel's outputs: a kind
    #: listed here must hold for every sound implementation of the kernel
    relations: tuple[str, ...]
    #: the kernel the desc runs instead when the spec's ``semantics.center`` evaluates false
    uncentred: str | None = None
    #: (plan, float64 input arrays) -> float64 outputs, for kernels run by reference.more
    compute: str | None = None
    #: (desc, backend outputs, reference outputs, inputs, spec, also_inputs) -> a plan when the
    #: compiled judge takes the comparison, else None (the numpy model judges)
    judge: str | None = None
    #: (desc, spec, inputs, member) -> (step size, judged elements or None): how the
    #: ``directional_derivative`` relation steps this gradient kernel's forward (required when
    #: ``relations`` lists that kind; dmlconform/tolerance/derivatives.py)
    derivative: str | None = None
    #: (desc, inputs, spec) -> {name: float}: facts of a case's data that an expectation's
    #: ``when`` may name (runner/expect.py), computed once the case ran; their names in
    #: ``fact_names``, which the expectations parser checks a predicate against
    facts: str | None = None
    fact_names: tuple[str, ...] = ()
    #: peak resident bytes per input element of a numeric case beyond the process's memory
    #: before it (inputs, both outputs, the float64 draw, the judge's work arrays): the worst
    #: of bench/bench_case_memory.py's figures for this kernel's largest stress cases at 2^24
    #: elements (numpy and reference backends, FLOAT32 and FLOAT16, two regimes) plus 25%,
    #: rounded up to 8; what runner.tiers admits a case by
    bytes_per_element: int = 200


_SAME = ("same_output_as", "shift_invariant", "chained")

KERNELS: dict[str, Kernel] = {
    k.name: k
    for k in (
        Kernel(
            name="normalization",
            bytes_per_element=80,
            summary="centred normalization over reduce axes, with optional scale, bias, add, activation",
            plan="dmlconform.specification.semantics:make_plan",
            execute="dmlconform.reference:execute_normalization",
            budgets="dmlconform.tolerance.normalization:budgets",
            model="normalization",
            relations=_SAME,
            uncentred="rms_normalization",
            judge="dmlconform.tolerance.judge:plan_for",
            facts="dmlconform.reference.numpy_ref:normalization_facts",
            fact_names=("largest_variance", "smallest_variance"),
        ),
        Kernel(
            name="rms_normalization",
            bytes_per_element=56,
            summary="the second moment about zero (the mean step off)",
            plan="dmlconform.specification.semantics:make_uncentred_plan",
            execute="dmlconform.reference.more:execute",
            compute="dmlconform.reference.more:rms_normalization",
            budgets="dmlconform.tolerance.rms:rms_budgets",
            model="normalization",
            relations=_SAME,
            judge="dmlconform.tolerance.judge:rms_plan_for",
            facts="dmlconform.reference.numpy_ref:normalization_facts",
            fact_names=("largest_variance", "smallest_variance"),
        ),
        Kernel(
            name="given_statistics",
            bytes_per_element=88,
            summary="normalization with given mean and variance (inference batch norm)",
            plan="dmlconform.specification.semantics:make_given_plan",
            execute="dmlconform.reference.more:execute",
            compute="dmlconform.reference.more:given_statistics",
            budgets="dmlconform.tolerance.pointwise:pointwise_budgets",
            model="pointwise",
            relations=_SAME,
            judge="dmlconform.tolerance.judge:given_plan_for",
            facts="dmlconform.reference.more:given_statistics_facts",
            fact_names=("largest_variance", "smallest_variance"),
        ),
        Kernel(
            name="normalization_grad",
            bytes_per_element=80,
            summary="gradients of a batch normalization with respect to input, scale and bias",
            plan="dmlconform.specification.semantics:make_grad_plan",
            execute="dmlconform.reference.more:execute",
            compute="dmlconform.reference.more:normalization_grad",
            budgets="dmlconform.tolerance.gradients:reduction_grad_budgets",
            judge="dmlconform.tolerance.judge:gradient_plan_for",
            model="reduction_grad",
            relations=(*_SAME, "directional_derivative"),
            derivative="dmlconform.tolerance.derivatives:normalization_domain",
            facts="dmlconform.reference.more:normalization_grad_facts",
            fact_names=("largest_centred_gradient_sum", "largest_variance", "smallest_variance"),
        ),
        Kernel(
            name="local_response",
            bytes_per_element=104,
            summary="each element over (Bias + Alpha / LocalSize * a window's sum of squares)^Beta",
            plan="dmlconform.specification.semantics:make_local_response_plan",
            execute="dmlconform.reference.more:execute",
            compute="dmlconform.reference.local:local_response",
            budgets="dmlconform.tolerance.local_response:local_response_budgets",
            model="local_response",
            relations=("same_output_as", "chained"),
            facts="dmlconform.reference.local:local_response_facts",
            fact_names=("largest_window_square_sum", "largest_denominator"),
        ),
        Kernel(
            name="local_response_grad",
            bytes_per_element=200,
            summary="the vector-Jacobian product of local_response",
            plan="dmlconform.specification.semantics:make_local_response_plan",
            execute="dmlconform.reference.more:execute",
            compute="dmlconform.reference.local:local_response_grad",
            budgets="dmlconform.tolerance.local_response:local_response_budgets",
            model="local_response",
            relations=("same_output_as", "chained", "directional_derivative"),
            derivative="dmlconform.tolerance.derivatives:local_response_domain",
            facts="dmlconform.reference.local:local_response_facts",
            fact_names=("largest_window_square_sum", "largest_denominator"),
        ),
        Kernel(
            name="lp_normalization",
            bytes_per_element=88,
            summary="each slice along an axis over its P-norm (P 1 or 2), Epsilon placed as the spec says",
            plan="dmlconform.specification.semantics:make_lp_plan",
            execute="dmlconform.reference.more:execute",
            compute="dmlconform.reference.local:lp_normalization",
            budgets="dmlconform.tolerance.lp_norm:lp_budgets",
            model="lp_norm",
            relations=("same_output_as", "chained"),
            facts="dmlconform.reference.local:lp_facts",
            fact_names=("largest_squared_norm", "smallest_squared_norm"),
        ),
    )
}


class UnknownKernel(LookupError):
    """The spec names a kernel the registry does not hold."""

    def __str__(self) -> str:  # LookupError would quote the message like a key
        return str(self.args[0]) if self.args else ""


def kernel_name(desc: OperatorDesc, spec: Spec) -> str:
    """The registry key of ``desc``: its operator's ``semantics.kernel``, or that kernel's
    ``uncentred`` variant where the spec's ``center`` flag evaluates false for this desc."""
    name = semantics.kernel(desc, spec)
    entry = KERNELS.get(name)
    if entry is None:
        raise UnknownKernel(f"{desc.operator}: no kernel {name!r} in the registry (dmlconform/kernels.py)")
    if entry.uncentred is not None:
        try:
            if not semantics.centers(desc, spec):
                return entry.uncentred
        except semantics.SemanticsError:
            pass  # the plan builder reports the missing member
    return name


def kernel_of(desc: OperatorDesc, spec: Spec) -> Kernel:
    return KERNELS[kernel_name(desc, spec)]


@cache
def resolve(ref: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` part names."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def part(desc: OperatorDesc, spec: Spec, field: str) -> Callable[..., Any]:
    """The ``field`` part (plan, execute, compute, budgets, derivative) of the kernel serving ``desc``."""
    ref = getattr(kernel_of(desc, spec), field)
    if ref is None:
        raise UnknownKernel(f"{desc.operator}: kernel {kernel_name(desc, spec)!r} has no {field} part")
    return resolve(ref)


def problems(spec: Spec, registry: dict[str, Kernel] | None = None) -> list[str]:
    """Everything that keeps the registry from serving ``spec``: an operator naming an unknown
    kernel, a part that does not import, an operator whose ``tolerance.model`` or relation kinds
    its kernel does not serve. Empty when the registry is whole (the registry test asserts it)."""
    registry = KERNELS if registry is None else registry
    out: list[str] = []
    for kernel in registry.values():
        if kernel.uncentred is not None and kernel.uncentred not in registry:
            out.append(f"kernel {kernel.name}: uncentred variant {kernel.uncentred!r} is not registered")
        if "directional_derivative" in kernel.relations and kernel.derivative is None:
            out.append(f"kernel {kernel.name}: serves directional_derivative but has no derivative part")
        if bool(kernel.facts) != bool(kernel.fact_names):
            out.append(f"kernel {kernel.name}: a facts part and fact_names go together")
        for field in ("plan", "execute", "budgets", "compute", "judge", "derivative", "facts"):
            ref = getattr(kernel, field)
            if ref is None:
                continue
            try:
                fn = resolve(ref)
            except (ImportError, AttributeError) as exc:
                out.append(f"kernel {kernel.name}: {field} part {ref!r} does not resolve ({exc})")
                continue
            if not callable(fn):
                out.append(f"kernel {kernel.name}: {field} part {ref!r} is not callable")
    for op in spec.operators.values():
        name = str(op.semantics.get("kernel"))
        kernel = registry.get(name)
        if kernel is None:
            out.append(f"{op.name}: semantics.kernel {name!r} is not registered")
            continue
        variants = [kernel] + ([registry[kernel.uncentred]] if kernel.uncentred in registry else [])
        model = op.tolerance.get("model", "normalization")
        for k in variants:
            if k.model != model:
                out.append(f"{op.name}: tolerance.model {model!r}, but kernel {k.name} serves {k.model!r}")
        for rel in op.relations:  # a relation's ``when`` may pick the variant; the kernel decides
            if rel.kind not in kernel.relations:
                out.append(f"{op.name}: relation {rel.id} ({rel.kind}) is not served by kernel {kernel.name}")
    return out
