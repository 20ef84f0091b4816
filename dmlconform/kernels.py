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

if TYPE_CHECKING:
    from dmlconform.specification.desc import OperatorDesc
    from dmlconform.specification.model import Spec


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
    #: relation kinds (spec ``relations:``) the suite can check on this kernel's outputs
    relations: tuple[str, ...]
    #: the kernel the desc runs instead when the spec's ``semantics.center`` evaluates false
    uncentred: str | None = None
    #: (plan, float64 input arrays) -> float64 outputs, for kernels run by reference.more
    compute: str | None = None
    #: (desc, backend outputs, reference outputs, inputs, spec, also_inputs) -> a plan when the
    #: compiled judge takes the comparison, else None (the numpy model judges)
    judge: str | None = None


_SAME = ("same_output_as", "shift_invariant", "chained")

KERNELS: dict[str, Kernel] = {
    k.name: k
    for k in (
        Kernel(
            name="normalization",
            summary="centred normalization over reduce axes, with optional scale, bias, add, activation",
            plan="dmlconform.specification.semantics:make_plan",
            execute="dmlconform.reference:execute_normalization",
            budgets="dmlconform.tolerance.normalization:budgets",
            model="normalization",
            relations=_SAME,
            uncentred="rms_normalization",
            judge="dmlconform.tolerance.judge:plan_for",
        ),
        Kernel(
            name="rms_normalization",
            summary="the second moment about zero (the mean step off)",
            plan="dmlconform.specification.semantics:make_uncentred_plan",
            execute="dmlconform.reference.more:execute",
            compute="dmlconform.reference.more:rms_normalization",
            budgets="dmlconform.tolerance.rms:rms_budgets",
            model="normalization",
            relations=_SAME,
        ),
        Kernel(
            name="given_statistics",
            summary="normalization with given mean and variance (inference batch norm)",
            plan="dmlconform.specification.semantics:make_given_plan",
            execute="dmlconform.reference.more:execute",
            compute="dmlconform.reference.more:given_statistics",
            budgets="dmlconform.tolerance.pointwise:pointwise_budgets",
            model="pointwise",
            relations=_SAME,
        ),
        Kernel(
            name="normalization_grad",
            summary="gradients of a batch normalization with respect to input, scale and bias",
            plan="dmlconform.specification.semantics:make_grad_plan",
            execute="dmlconform.reference.more:execute",
            compute="dmlconform.reference.more:normalization_grad",
            budgets="dmlconform.tolerance.gradients:reduction_grad_budgets",
            model="reduction_grad",
            relations=(*_SAME, "directional_derivative"),
        ),
    )
}


class UnknownKernel(KeyError):
    """The spec names a kernel the registry does not hold."""


def kernel_name(desc: OperatorDesc, spec: Spec) -> str:
    """The registry key of ``desc``: its operator's ``semantics.kernel``, or that kernel's
    ``uncentred`` variant where the spec's ``center`` flag evaluates false for this desc."""
    from dmlconform.specification import semantics

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
    """The ``field`` part (plan, execute, compute, budgets) of the kernel serving ``desc``."""
    ref = getattr(kernel_of(desc, spec), field)
    if ref is None:
        raise UnknownKernel(f"{desc.operator}: kernel {kernel_name(desc, spec)!r} has no {field} part")
    return resolve(ref)
