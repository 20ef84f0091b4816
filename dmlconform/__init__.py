"""dmlconform: conformance suite and spec-driven validator for DirectML operators.

The public API (see README and docs/backends.md): ``load_desc``, ``parse_desc``, ``validate``,
``execute``, ``load_spec``; ``plan`` and the kernels' plan types (what a backend reads a desc
through); the backend exceptions ``Rejected`` / ``Unsupported``; ``PlanError``.
"""

from __future__ import annotations

from dmlconform.errors import PlanError, Rejected, Unsupported, Violation
from dmlconform.kernels import (
    GivenStatisticsPlan,
    KernelPlan,
    LocalResponseGradPlan,
    LocalResponsePlan,
    LpNormalizationPlan,
    NormalizationGradPlan,
    NormalizationPlan,
    RmsNormalizationPlan,
    execute,
    plan,
)
from dmlconform.specification.desc import (
    ActivationDesc,
    DescError,
    OperatorDesc,
    TensorDesc,
    load_desc,
    parse_desc,
)
from dmlconform.specification.spec import Spec, SpecError, load_spec
from dmlconform.specification.validate import validate

__version__ = "0.1.0"

__all__ = [
    "ActivationDesc",
    "DescError",
    "GivenStatisticsPlan",
    "KernelPlan",
    "LocalResponseGradPlan",
    "LocalResponsePlan",
    "LpNormalizationPlan",
    "NormalizationGradPlan",
    "NormalizationPlan",
    "OperatorDesc",
    "PlanError",
    "Rejected",
    "RmsNormalizationPlan",
    "Spec",
    "SpecError",
    "TensorDesc",
    "Unsupported",
    "Violation",
    "execute",
    "load_desc",
    "load_spec",
    "parse_desc",
    "plan",
    "validate",
]
