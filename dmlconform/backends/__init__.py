"""Backends: the protocol the runner calls, the loader behind ``--dml-backend``, and the
built-in implementations (``reference``, ``numpy``, ``onnxruntime``, ``torch``).

Only the protocol, base class and loader are imported here; each backend module is imported on
demand by :func:`load_backend`, so that a missing optional extra (onnxruntime, torch) costs
nothing until that backend is asked for.
"""

from __future__ import annotations

from dmlconform.backends.base import (
    BUILTIN_BACKENDS,
    ENTRY_POINT_GROUP,
    Backend,
    BackendBase,
    BackendError,
    NormalizationPlan,
    Option,
    list_backends,
    load_backend,
    make_plan,
)

__all__ = [
    "BUILTIN_BACKENDS",
    "ENTRY_POINT_GROUP",
    "Backend",
    "BackendBase",
    "BackendError",
    "NormalizationPlan",
    "Option",
    "list_backends",
    "load_backend",
    "make_plan",
]
