"""Backend protocol, an optional base class, and the loader behind ``--dml-backend``.

A backend is anything with ``name``, ``feature_level`` and ``execute(desc, inputs)`` (and,
optionally, ``supports(desc)`` and, with ``validates = True``, ``check(desc)``: see
:class:`Backend`); the runner duck-types it, so third-party backends need not import
this module. :class:`BackendBase` exists because every built-in backend needs the same chores:
keyword options given as strings on the command line (validated, with a clear error for an
unknown one), the details of the last case for the report (``last_info``), and version strings.

A backend reads a desc through its kernel's plan (``dmlconform.plan``: docs/backends.md), the
public API every built-in backend is written against.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

import dmlconform
from dmlconform.distribution import ENTRY_POINT_GROUP, builtin_backends, extra_for_package
from dmlconform.errors import Rejected
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import FeatureLevel, Spec, UnknownLevel, load_spec
from dmlconform.specification.validate import validate

#: The built-in backends, name -> ``module:Class``: pyproject.toml's entry points, the one
#: declaration (``dmlconform.distribution``), read the same in a source checkout
BUILTIN_BACKENDS: dict[str, str] = builtin_backends()

DEFAULT_FEATURE_LEVEL = "6_4"


class BackendError(Exception):
    """A backend that cannot be loaded or configured; the message is one line, for the CLI."""


@runtime_checkable
class Backend(Protocol):
    """What the runner needs: ``name``, ``feature_level`` and ``execute``. Optional, and so not
    part of the protocol check:

    - ``supports(desc)``: True, or the reason (a string) the backend does not implement ``desc``.
      Asked once for every desc a case sends, before anything else, in every kind of case; an
      unsupported desc skips its case with that reason. (``Unsupported`` raised by ``supports``,
      ``execute`` or ``check`` skips the case too.)
    - ``validates = True`` with ``check(desc)``: ``check`` raises ``Rejected`` for every desc
      illegal at ``feature_level`` and returns for every legal one; the run then adds validation
      cases. ``check`` without ``validates = True`` is never called (the run says so).
    """

    name: str
    feature_level: str

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...


# --------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class Option:
    """One backend option. Values arrive as strings (``--dml-backend-option key=value``), so
    each option says how to parse its string and, if it is an enumeration, its choices.
    ``travels``: results depend on it, so its value is saved with the run and every reproducer
    even when left at its default (a replay then uses the same, whatever the default becomes)."""

    name: str
    default: str
    help: str
    choices: tuple[str, ...] | None = None
    parse: Callable[[str], Any] = str
    travels: bool = False

    def convert(self, backend: str, raw: Any) -> Any:
        text = str(raw).strip()
        if self.choices is not None and text not in self.choices:
            raise BackendError(
                f"backend {backend!r}: option {self.name}={text!r} is not one of {', '.join(self.choices)}"
            )
        try:
            return self.parse(text)
        except (TypeError, ValueError) as exc:
            raise BackendError(f"backend {backend!r}: option {self.name}={text!r}: {exc}") from None


def _parse_level(text: str) -> str:
    try:
        return load_spec().level(text).name
    except UnknownLevel as exc:
        raise ValueError(str(exc)) from None


def _parse_positive_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must be a whole number >= 0")
    return value


FEATURE_LEVEL_OPTION = Option(
    "feature_level",
    DEFAULT_FEATURE_LEVEL,
    "the highest DML feature level the backend claims (check() validates at this level)",
    parse=_parse_level,
)


class BackendBase:
    """Optional base class: option parsing, ``last_info``, ``describe`` and ``versions``.

    Subclasses list their options in ``OPTIONS`` and implement :meth:`execute`; ``supports``
    and ``check`` are not defined here, as most backends need neither. A subclass that judges
    legality defines ``check`` and sets ``validates = True``.
    """

    name: ClassVar[str] = "base"
    #: True when ``check`` rejects every illegal desc (the run adds validation cases)
    validates: ClassVar[bool] = False
    OPTIONS: ClassVar[tuple[Option, ...]] = (FEATURE_LEVEL_OPTION,)

    def __init__(self, **options: Any) -> None:
        known = {opt.name: opt for opt in self.OPTIONS}
        unknown = sorted(set(options) - set(known))
        if unknown:
            listing = ", ".join(sorted(known)) or "none"
            raise BackendError(f"backend {self.name!r}: unknown option {unknown[0]!r} (options: {listing})")
        self.options: dict[str, Any] = {}
        self._travelling: dict[str, str] = {}
        for opt in self.OPTIONS:
            raw = options.get(opt.name, opt.default)
            self.options[opt.name] = opt.convert(self.name, raw)
            if opt.travels:
                self._travelling[opt.name] = str(raw).strip()
        self.feature_level: str = self.options["feature_level"]
        #: the spec this backend reads descs through: the protocol's ``execute(desc, inputs)``
        #: carries none, so it is loaded once here and every step is handed this one
        self.spec: Spec = load_spec()
        self._last_info: dict[str, Any] = {}

    def travelling_options(self) -> dict[str, str]:
        """The ``travels`` options as given or defaulted (strings): what a run saves beside the
        options the user typed."""
        return dict(self._travelling)

    @classmethod
    def option_help(cls) -> dict[str, str]:
        """``{option: "help (default: x)"}``, for ``dmlconform backends`` style listings."""
        return {o.name: f"{o.help} (default: {o.default})" for o in cls.OPTIONS}

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def last_info(self) -> dict[str, Any]:
        """Details of the last ``execute`` (which library path, compute dtype, cache hit)."""
        return dict(self._last_info)

    def versions(self) -> dict[str, str]:
        return {"dmlconform": dmlconform.__version__, "numpy": np.__version__}

    def describe(self) -> str:
        return f"{self.name} (feature level {self.feature_level})"


def validate_or_reject(desc: OperatorDesc, level: str | FeatureLevel, spec: Spec) -> None:
    """``check`` for backends that trust the spec: :class:`Rejected` naming every rule id."""
    violations = validate(desc, level, spec)
    if violations:
        ids = ", ".join(dict.fromkeys(v.rule for v in violations))
        detail = "; ".join(str(v) for v in violations)
        raise Rejected(f"illegal at feature level {level} ({ids}): {detail}")


# --------------------------------------------------------------------------------------------
# Loader


def list_backends() -> dict[str, str]:
    """Registered backend names -> ``module:Class``: the built-in ones and every other package's
    entry point in the group (which may not shadow a built-in name)."""
    names = dict(BUILTIN_BACKENDS)
    try:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            names.setdefault(ep.name, ep.value)
    except Exception:  # a broken installation must not hide the built-ins
        pass
    return names


def _current_directory_importable() -> None:
    """Put the current directory first on ``sys.path`` if it is not there, as ``python -m`` does.

    A user's ``mybackend.py`` beside them must load with ``dmlconform run --backend
    mybackend:MyBackend`` as it does with ``python -m pytest --dml-backend ...``; an installed
    console script starts with its own bin directory on the path instead of the current one.
    Every ``module:Class`` target given by the user goes through here: run, replay, the isolated
    worker (registered names are installed packages and need no such help)."""
    cwd = os.getcwd()
    here = {os.path.abspath(p or os.curdir) for p in sys.path}
    if cwd not in here:
        sys.path.insert(0, cwd)


def _import_target(target: str, label: str, from_cwd: bool = False) -> type:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise BackendError(f"backend {label!r}: expected package.module:ClassName, got {target!r}")
    if from_cwd:
        _current_directory_importable()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        extra = extra_for_package(missing)
        if extra is not None:
            raise BackendError(
                f"backend {label!r} needs {missing}, which is not installed: pip install dmlconform[{extra}]"
            ) from None
        raise BackendError(f"backend {label!r}: cannot import {module_name}: {exc}") from None
    except Exception as exc:  # an import-time crash in a third-party backend module
        raise BackendError(
            f"backend {label!r}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise BackendError(f"backend {label!r}: {module_name} has no attribute {attr!r}") from None
    return obj


def takes_level(factory: Any) -> bool:
    """Whether a backend's factory declares a ``feature_level`` option (BackendBase's ``OPTIONS``,
    or a parameter of that name): such a backend can be asked to judge legality at the level a
    run tests (the built-ins emulate any level). A factory that only takes ``**kwargs`` is not
    asked: it declared no such option."""
    declared = getattr(factory, "OPTIONS", None)
    if declared is not None:
        return any(getattr(o, "name", None) == "feature_level" for o in declared)
    try:
        return "feature_level" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


def load_backend(
    spec: str, options: Mapping[str, str] | None = None, level: FeatureLevel | None = None
) -> Backend:
    """The backend named ``spec`` (a registered name, or ``package.module:ClassName``),
    constructed with ``options`` as keyword arguments, plus ``feature_level=level.name`` when a
    ``level`` is given, the options name none and the backend declares the option
    (:func:`takes_level`): the protocol hands a backend the level's name, not the spec's object.
    Every failure is a one-line BackendError."""
    options = dict(options or {})
    spec = spec.strip()
    if ":" in spec:
        target = spec
    else:
        registry = list_backends()
        if spec not in registry:
            raise BackendError(
                f"unknown backend {spec!r} (registered: {', '.join(sorted(registry))}; "
                "or give package.module:ClassName)"
            )
        target = registry[spec]
    factory = _import_target(target, spec, from_cwd=":" in spec)
    if not callable(factory):
        raise BackendError(f"backend {spec!r}: {target} is not a class or factory")
    if level is not None and "feature_level" not in options and takes_level(factory):
        options["feature_level"] = level.name
    try:
        backend = factory(**options)
    except BackendError:
        raise
    except TypeError as exc:
        raise BackendError(f"backend {spec!r}: bad options {sorted(options)}: {exc}") from None
    except Exception as exc:
        raise BackendError(f"backend {spec!r}: construction failed: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(backend, "execute", None)):
        raise BackendError(f"backend {spec!r}: {target} has no execute(desc, inputs) method")
    if not getattr(backend, "name", None):
        # A duck-typed backend without a name is reported under the spec it was loaded by. A
        # missing feature_level is left missing: the runner then asks for --dml-feature-level.
        with contextlib.suppress(Exception):
            backend.name = spec
    return backend
