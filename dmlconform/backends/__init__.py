"""Backends: the protocol the runner calls, the loader behind ``--dml-backend``, the base class
and options a backend author builds on, and the built-in implementations.

What a backend author uses from here (docs/backends.md): :class:`BackendBase`, :class:`Option`,
``FEATURE_LEVEL_OPTION`` and :func:`validate_or_reject`, beside ``dmlconform`` itself (``plan``
and the plan types). Each backend module is imported on demand by :func:`load_backend`, so that
a missing optional extra (onnxruntime, torch, ...) costs nothing until that backend is asked for.
"""

from __future__ import annotations

from dmlconform.backends.base import (
    BUILTIN_BACKENDS,
    ENTRY_POINT_GROUP,
    FEATURE_LEVEL_OPTION,
    Backend,
    BackendBase,
    BackendError,
    Option,
    list_backends,
    load_backend,
    validate_or_reject,
)

__all__ = [
    "BUILTIN_BACKENDS",
    "ENTRY_POINT_GROUP",
    "FEATURE_LEVEL_OPTION",
    "Backend",
    "BackendBase",
    "BackendError",
    "Option",
    "list_backends",
    "load_backend",
    "validate_or_reject",
]
