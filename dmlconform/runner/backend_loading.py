"""Opening a backend once and putting it behind its guard once.

``dmlconform run`` (through the pytest plugin), ``replay``, ``shrink`` and ``dxdispatch
emulate`` open their backend here, so that a backend that cannot load costs one line (a
:class:`~dmlconform.runner.options.SettingsError`) the same way in each, and so that a
reproducer replays with the options the run resolved (:class:`OpenedBackend`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dmlconform.backends import load_backend
from dmlconform.runner.guard import BackendFailure, ProcessGuard, ThreadGuard, backend_info
from dmlconform.runner.options import DEFAULT_TIMEOUT, SettingsError, check_values
from dmlconform.specification.spec import FeatureLevel


@dataclass
class OpenedBackend:
    """A loaded backend (or the ProcessGuard that loaded it in a worker), its BackendInfo, and the
    options it was loaded with (``feature_level`` added when it accepted the level asked for,
    and its ``travels`` options at their resolved values, so a reproducer replays the same)."""

    handle: Any
    info: Any
    name: str
    options: dict[str, str]


def _load(
    name: str, options: dict[str, str], isolate: bool, timeout: float, level: FeatureLevel | None
) -> tuple[Any, Any]:
    if isolate:
        guard = ProcessGuard(name, options, timeout or None, level=level)
        try:
            guard._start()
        except BackendFailure as exc:
            raise SettingsError(
                str(exc).replace("backend worker could not load", "cannot load backend")
            ) from None
        return guard, guard.info
    try:
        backend = load_backend(name, options, level)
    except Exception as exc:  # BackendError and anything a third-party constructor raises
        text = str(exc).strip().splitlines()
        raise SettingsError(
            text[0] if text else f"cannot load backend {name!r}: {type(exc).__name__}"
        ) from None
    return backend, backend_info(backend)


def open_backend(
    name: str,
    options: Mapping[str, str] | None = None,
    *,
    level: FeatureLevel | None = None,
    isolate: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> OpenedBackend:
    """Load a backend; SettingsError with one line. With ``level`` (and no ``feature_level``
    option), a backend that declares the option (the built-ins, which emulate any level) is
    given its name, so that its check() judges descs at the level under test; one that declares none
    is loaded as it is. A backend that fails to load with the level fails the run: it is not
    loaded again without it."""
    options = dict(options or {})
    handle, info = _load(name, options, isolate, timeout, level)
    if level is not None and "feature_level" not in options and info.takes_level:
        options["feature_level"] = level.name
    return OpenedBackend(handle, info, name, {**info.travelling, **options})


def guard_for(opened: OpenedBackend, isolate: bool, timeout: float, isolate_flag: str = "--isolate") -> Any:
    """The guard every backend call goes through: the worker process of an isolated backend,
    else a thread with a timeout."""
    if isinstance(opened.handle, ProcessGuard):
        return opened.handle
    if isolate:
        return ProcessGuard(opened.name, opened.options, timeout or None)
    return ThreadGuard(opened.handle, timeout or None, isolate_flag=isolate_flag)


def open_saved_backend(
    meta: Mapping[str, Any],
    backend: str | None,
    options: dict[str, str] | None,
    isolate: bool,
    timeout: float,
) -> tuple[Any, OpenedBackend]:
    """(guard, opened backend) to re-run a saved case (replay, shrink): the backend and options
    saved in its case.json unless others are given; SettingsError with one line."""
    check_values({"timeout": timeout})
    saved = meta.get("backend") or {}
    name = backend or saved.get("name")
    if not name:
        raise SettingsError("no --backend given and case.json names none")
    if options is None:
        options = dict(saved.get("options") or {}) if name == saved.get("name") else {}
    opened = open_backend(name, options, isolate=isolate, timeout=timeout)
    return guard_for(opened, isolate, timeout), opened
