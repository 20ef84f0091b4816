"""What a kernel entry holds: the parts every stage of the pipeline finds a kernel's work by.

Each kernel module (``dmlconform/kernels/<kernel>.py``) declares one :class:`Kernel` named
``KERNEL``; the package's ``__init__`` is the index that collects them. Parts on this floor or
below (the plan builder, the float64 reference, the data facts) are the functions themselves;
parts computed above it (the tolerance model, the compiled judge, the derivative relation's
step) are ``"module:function"`` strings resolved on first use, so the kernels import nothing
above them and numba stays unloaded until a kernel needs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

#: relation kinds every sound implementation of a normalization-like kernel must satisfy
SAME_OUTPUT_RELATIONS = ("same_output_as", "shift_invariant", "chained")

#: A part: the function itself, or ``"module:function"`` for one that lives above the kernels
Part = Callable[..., Any] | str


@dataclass(frozen=True)
class Kernel:
    """One computation and its parts."""

    name: str
    #: what it computes, for docs and messages
    summary: str
    #: (desc, spec) -> the kernel's typed plan (a :class:`~dmlconform.kernels.base.KernelPlan`)
    plan: Part
    #: (desc, inputs, spec, float64=, out=) -> outputs: the float64 reference
    execute: Part
    #: (desc, reference outputs, inputs, spec, overrides) -> tolerance Budgets
    budgets: Part
    #: the spec's ``tolerance.model`` name of that budget model (operators must agree)
    model: str
    #: relation kinds (spec ``relations:``) the suite checks on this kernel's outputs: a kind
    #: listed here must hold for every sound implementation of the kernel
    relations: tuple[str, ...]
    #: (desc, spec) -> the name of another kernel this desc runs instead, or None (the
    #: normalization kernel hands a desc whose mean step is off to ``rms_normalization``)
    variant: Callable[..., str | None] | None = None
    #: the kernels :attr:`variant` may name (checked by the registry's ``problems``)
    variants: tuple[str, ...] = ()
    #: (desc, backend outputs, reference outputs, inputs, spec, also_inputs) -> a plan when the
    #: compiled judge takes the comparison, else None (the numpy model judges)
    judge: Part | None = None
    #: (desc, spec, inputs, member) -> (step size, judged elements or None): how the
    #: ``directional_derivative`` relation steps this gradient kernel's forward (required when
    #: ``relations`` lists that kind; dmlconform/tolerance/derivatives.py)
    derivative: Part | None = None
    #: (desc, inputs, spec) -> {name: float}: facts of a case's data that an expectation's
    #: ``when`` may name (runner/expect.py), computed once the case ran; their names in
    #: ``fact_names``, which the expectations parser checks a predicate against
    facts: Part | None = None
    fact_names: tuple[str, ...] = ()
    #: peak resident bytes per input element of a numeric case beyond the process's memory
    #: before it (inputs, both outputs, the float64 draw, the judge's work arrays): the worst
    #: of bench/bench_case_memory.py's figures for this kernel's largest stress cases at 2^24
    #: elements (numpy and reference backends, FLOAT32 and FLOAT16, two regimes) plus 25%,
    #: rounded up to 8; what runner.tiers admits a case by
    bytes_per_element: int = 200


#: the part fields of :class:`Kernel`, in the order a problem report names them
PARTS = ("plan", "execute", "budgets", "judge", "derivative", "facts")


class UnknownKernel(LookupError):
    """The spec names a kernel the registry does not hold."""

    def __str__(self) -> str:  # LookupError would quote the message like a key
        return str(self.args[0]) if self.args else ""


@cache
def _import(ref: str) -> Callable[..., Any]:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def resolve(ref: Part) -> Callable[..., Any]:
    """The function a part is or names."""
    return _import(ref) if isinstance(ref, str) else ref
