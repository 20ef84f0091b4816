"""The kernels: every computation an operator's spec can name (``semantics.kernel``), one module
each, and this index of them.

Why one module per kernel: an operator is YAML that names a kernel, and every stage (the plan a
desc is read into, the float64 reference, the data facts an expectation names, the tolerance
model, the compiled judge, the relations, the backends' lowerings) must agree on what that
kernel is. A kernel's module holds its plan type and builder, its reference, its facts, and
names the parts that live above it (:mod:`dmlconform.kernels.registry`). Adding an operator
that reuses a kernel is YAML only; adding a kernel is its module (found here by its ``KERNEL``),
its YAML and each backend's lowering; ``tests/test_kernel_registry.py`` fails while a part is
missing.

The public face (re-exported by ``dmlconform``): :func:`plan`, the plan types, :func:`execute`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

import numpy as np

from dmlconform.errors import PlanError
from dmlconform.kernels.base import KernelPlan, input_member, kernel_named
from dmlconform.kernels.given_statistics import GivenStatisticsPlan
from dmlconform.kernels.local_response import LocalResponsePlan
from dmlconform.kernels.local_response_grad import LocalResponseGradPlan
from dmlconform.kernels.lp_normalization import LpNormalizationPlan
from dmlconform.kernels.normalization import NormalizationPlan
from dmlconform.kernels.normalization_grad import NormalizationGradPlan
from dmlconform.kernels.registry import PARTS, Kernel, UnknownKernel, resolve
from dmlconform.kernels.rms_normalization import RmsNormalizationPlan
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import KERNEL_NAMES, Spec, spec_or_default

__all__ = [
    "KERNELS",
    "GivenStatisticsPlan",
    "Kernel",
    "KernelPlan",
    "LocalResponseGradPlan",
    "LocalResponsePlan",
    "LpNormalizationPlan",
    "NormalizationGradPlan",
    "NormalizationPlan",
    "PlanError",
    "RmsNormalizationPlan",
    "UnknownKernel",
    "execute",
    "input_member",
    "kernel_name",
    "kernel_of",
    "part",
    "plan",
    "problems",
    "resolve",
]

#: modules of this package that are not kernels
_NOT_KERNELS = frozenset({"base", "registry"})


def _collect() -> dict[str, Kernel]:
    """Every kernel module's ``KERNEL``, by name: the package is the index."""
    found: dict[str, Kernel] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name in _NOT_KERNELS:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        kernel = getattr(module, "KERNEL", None)
        if isinstance(kernel, Kernel):
            found[kernel.name] = kernel
    return found


KERNELS: dict[str, Kernel] = _collect()
KERNEL_NAMES.update(KERNELS)  # what semantics.kernel may name (the spec schema's enum)


def kernel_name(desc: OperatorDesc, spec: Spec) -> str:
    """The registry key of ``desc``: its operator's ``semantics.kernel``, or the kernel that
    kernel's ``variant`` hands this desc to (the uncentred normalization)."""
    name = kernel_named(spec.operator(desc.operator))
    entry = KERNELS.get(name)
    if entry is None:
        raise UnknownKernel(f"{desc.operator}: no kernel {name!r} in the registry (dmlconform/kernels/)")
    other = entry.variant(desc, spec) if entry.variant is not None else None
    return other or name


def kernel_of(desc: OperatorDesc, spec: Spec) -> Kernel:
    return KERNELS[kernel_name(desc, spec)]


def part(desc: OperatorDesc, spec: Spec, field: str) -> Callable[..., Any]:
    """The ``field`` part (plan, execute, budgets, judge, derivative, facts) of ``desc``'s kernel."""
    ref = getattr(kernel_of(desc, spec), field)
    if ref is None:
        raise UnknownKernel(f"{desc.operator}: kernel {kernel_name(desc, spec)!r} has no {field} part")
    return resolve(ref)


def plan(desc: OperatorDesc, spec: Spec | None = None) -> KernelPlan:
    """``desc`` read into its kernel's typed plan (one frozen dataclass per kernel: see the
    ``*Plan`` types here and docs/backends.md). PlanError for a desc that lacks what its kernel
    needs; UnknownKernel (a LookupError) for an operator whose kernel is not registered."""
    spec = spec_or_default(spec)
    return part(desc, spec, "plan")(desc, spec)


def execute(
    desc: OperatorDesc,
    inputs: dict[str, Any],
    spec: Spec | None = None,
    *,
    float64: bool = False,
    out: dict[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """The float64 reference: every output of ``desc`` from ``inputs`` (member name -> array of
    its Sizes), rounded once to its DataType (float64 values with ``float64=True``), written
    into ``out``'s preallocated arrays where given. Raises ``reference.InputError`` for a missing
    or misshapen array and PlanError for a desc the reference cannot run."""
    spec = spec_or_default(spec)
    return part(desc, spec, "execute")(desc, inputs, spec, float64=float64, out=out)


def problems(spec: Spec, registry: dict[str, Kernel] | None = None) -> list[str]:
    """Everything that keeps the registry from serving ``spec``: an operator naming an unknown
    kernel, a part that does not import, an operator whose ``tolerance.model`` or relation kinds
    its kernel does not serve. Empty when the registry is whole (the registry test asserts it)."""
    registry = KERNELS if registry is None else registry
    out: list[str] = []
    for kernel in registry.values():
        for other in kernel.variants:
            if other not in registry:
                out.append(f"kernel {kernel.name}: variant {other!r} is not registered")
        if bool(kernel.variant) != bool(kernel.variants):
            out.append(f"kernel {kernel.name}: a variant part and its variants go together")
        if "directional_derivative" in kernel.relations and kernel.derivative is None:
            out.append(f"kernel {kernel.name}: serves directional_derivative but has no derivative part")
        if bool(kernel.facts) != bool(kernel.fact_names):
            out.append(f"kernel {kernel.name}: a facts part and fact_names go together")
        for field in PARTS:
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
        name = kernel_named(op)
        kernel = registry.get(name)
        if kernel is None:
            out.append(f"{op.name}: semantics.kernel {name!r} is not registered")
            continue
        variants = [kernel] + [registry[v] for v in kernel.variants if v in registry]
        model = op.tolerance.get("model", "normalization")
        for k in variants:
            if k.model != model:
                out.append(f"{op.name}: tolerance.model {model!r}, but kernel {k.name} serves {k.model!r}")
        for rel in op.relations:  # a relation's ``when`` may pick the variant; the kernel decides
            if rel.kind not in kernel.relations:
                out.append(f"{op.name}: relation {rel.id} ({rel.kind}) is not served by kernel {kernel.name}")
    return out
