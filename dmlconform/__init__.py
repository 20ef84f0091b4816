"""dmlconform: conformance suite and spec-driven validator for DirectML operators.

The public API (see README): ``load_desc``, ``parse_desc``, ``validate``, ``execute``,
``load_spec``, and the backend exceptions ``Rejected`` / ``Unsupported``.
"""

from __future__ import annotations

from typing import Any

from dmlconform.errors import Rejected, Unsupported, Violation
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
    "OperatorDesc",
    "Rejected",
    "Spec",
    "SpecError",
    "TensorDesc",
    "Unsupported",
    "Violation",
    "execute",
    "load_desc",
    "load_spec",
    "parse_desc",
    "validate",
]


def execute(desc: OperatorDesc, inputs: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Run the float64 reference executor (imported lazily: numba start-up is not free)."""
    from dmlconform.reference import execute as _execute

    return _execute(desc, inputs, **kwargs)
