"""A run session: the run options declared once, resolved once, and the backend opened once.

Why this module exists: ``dmlconform run``, the pytest plugin's ``--dml-*`` options,
``dxdispatch export``, ``replay``, ``shrink`` and ``dxdispatch emulate`` take overlapping sets of
options. Each option is one :class:`RunOption` row of :data:`OPTIONS` (name, type, default,
help, which commands take it); the argparse arguments (:func:`add_arguments`), the plugin's
pytest options (:func:`add_pytest_options`), the argv ``run`` hands to pytest
(:func:`pytest_argv`) and the command line a report records (:func:`command_line`) are all
generated from the rows, so an option has one spelling (``--NAME``, ``--dml-NAME`` under plain
pytest) and one default. Selection and tolerance overrides are checked once
(:func:`resolve_selection`, :func:`resolve_settings`), and a backend is opened and put behind its
guard once (:func:`open_backend`, :func:`guard_for`, :func:`open_saved_backend`).

Errors are :class:`SettingsError` (a ``ValueError``) with one line that names the option as the
user spelled it; each caller turns that into its own usage error.

Module-level imports stay light: the pytest plugin imports this module in every pytest process
(the project's own test runs included) just to declare its options.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmlconform.runner.defaults import DEFAULT_CASES
from dmlconform.runner.directories import directory_problem

if TYPE_CHECKING:  # loaded when a run resolves its settings (tolerance_options)
    from dmlconform.tolerance.options import ToleranceOptions

#: Cases per operator x level x data type when none is asked for (runner.cases.Selection's too).
#: Per-call backend timeout in seconds (0 disables it).
DEFAULT_TIMEOUT = 60.0
TIERS = ("smoke", "default", "stress")
TIER_SIZES = "smoke 2^16, default 2^22, stress 2^26"

#: The commands that take run options. "run" is ``dmlconform run`` and the plugin's ``--dml-*``
#: options; "export" ``dxdispatch export``; "replay" ``replay`` and ``shrink``; "emulate"
#: ``dxdispatch emulate``.
COMMANDS = ("run", "export", "replay", "emulate")


class SettingsError(ValueError):
    """A run option or its combination cannot be used; the message is one line."""


def _at_least_one(value: Any, spelled: str) -> str | None:
    return f"{spelled} must be at least 1" if value is not None and value < 1 else None


def _not_negative(value: Any, spelled: str) -> str | None:
    return f"{spelled} must not be negative (0 disables it)" if value is not None and value < 0 else None


def _shard(value: Any, spelled: str) -> str | None:
    from dmlconform.runner.cases import Shard

    if value is None:
        return None
    try:
        Shard.parse(value)
    except ValueError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class RunOption:
    """One run option: ``--NAME`` on the command line, ``--dml-NAME`` under plain pytest.

    ``help`` may hold ``{default}``; ``helps`` replaces it for a command whose meaning differs
    (``"pytest"`` names the plugin's spelling). ``default`` is the value a command uses when
    the option is not given (None: the command decides, as the help says)."""

    name: str
    help: str
    type: Callable[[str], Any] | None = str  # None: a flag (store_true)
    default: Any = None
    commands: frozenset[str] = frozenset({"run"})
    metavar: str | None = None
    many: bool = False  # nargs="+"
    repeat: bool = False  # action="append", KEY=VALUE pairs
    choices: tuple[str, ...] | None = None
    pytest: bool = True  # the plugin takes it as --dml-NAME (under "run")
    recorded: bool = True  # part of the command line a report records
    path: bool = False  # a file or directory: handed to pytest resolved
    check: Callable[[Any, str], str | None] | None = None
    helps: Mapping[str, str] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    #: the short flag of the same idea on every verb (``-l`` is validate's and generate's
    #: --feature-level); the CLI's only: pytest's own short flags are taken (-l is --showlocals)
    short: str | None = None

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def flag(self) -> bool:
        return self.type is None

    def spelled(self, prefix: str = "--") -> str:
        return f"{prefix}{self.name}"

    def help_for(self, command: str) -> str:
        text = self.helps.get(command, self.help)
        default = f"{self.default:g}" if isinstance(self.default, float) else self.default
        return text.format(default=default)

    def kwargs(self, command: str, default: Any) -> dict[str, Any]:
        """argparse / pytest ``addoption`` keyword arguments."""
        out: dict[str, Any] = {"dest": self.dest, "help": self.help_for(command), "default": default}
        if self.flag:
            out["action"] = "store_true"
            return out
        out["metavar"] = self.metavar
        if self.repeat:
            out["action"] = "append"
        else:
            out["type"] = self.type
        if self.many:
            out["nargs"] = "+"
        if self.choices:
            out["choices"] = self.choices
        return out


_RUN_EXPORT = frozenset({"run", "export"})

#: Every run option, in the order a recorded command line names them.
OPTIONS: tuple[RunOption, ...] = (
    RunOption(
        "backend",
        "backend under test: a registered name (reference, numpy, gpu-style, onnxruntime, torch, directml, or one "
        "registered under the entry-point group dmlconform.backends) or package.module:Class",
        metavar="NAME",
        commands=frozenset({"run", "replay", "emulate"}),
        required=frozenset({"run", "emulate"}),
        helps={
            "replay": "backend to run (default: the one that failed)",
            "emulate": "registered backend or package.module:Class",
        },
    ),
    RunOption(
        "backend-option",
        "backend option (repeatable)",
        metavar="KEY=VALUE",
        repeat=True,
        commands=frozenset({"run", "replay", "emulate"}),
        helps={
            "replay": "backend option (repeatable; default: the options saved with the case, for its backend)"
        },
    ),
    RunOption(
        "tolerance",
        "override the spec's tolerance (repeatable), e.g. model=lenient, ulp_scale=2; shown in the report",
        metavar="KEY=VALUE",
        repeat=True,
    ),
    RunOption(
        "feature-level",
        "feature level to test up to (default: the backend's)",
        metavar="FL",
        short="-l",
        commands=frozenset({"run", "export", "emulate"}),
        helps={
            "export": "feature level to export up to (default: the highest)",
            "emulate": "feature level to emulate (default: the backend's)",
        },
    ),
    RunOption(
        "cases",
        "cases per operator x level x data type (default {default})",
        type=int,
        default=DEFAULT_CASES,
        metavar="N",
        commands=_RUN_EXPORT,
        check=_at_least_one,
    ),
    RunOption(
        "seed", "generator seed (default {default})", type=int, default=0, metavar="S", commands=_RUN_EXPORT
    ),
    RunOption(
        "tier",
        "size tier: smoke (quick subset), default (the default), stress (long reductions, big tensors)",
        default="default",
        choices=TIERS,
        commands=_RUN_EXPORT,
    ),
    RunOption(
        "max-elements",
        f"largest input of a tier's size case, in elements (default: {TIER_SIZES})",
        type=int,
        metavar="N",
        commands=_RUN_EXPORT,
        check=_at_least_one,
    ),
    RunOption(
        "expect",
        "known findings file, added to the backend's own (findings *.yaml, or '<id or glob>  # reason' "
        "per line; default: none; docs/running.md)",
        metavar="FILE",
        path=True,
    ),
    RunOption(
        "no-known-findings",
        "judge without the backend's shipped known findings (dmlconform/known_findings/<backend>.yaml)",
        type=None,
        default=False,
    ),
    RunOption(
        "timeout",
        "per-call backend timeout in seconds (default {default}; 0 disables it)",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        commands=frozenset({"run", "replay"}),
        check=_not_negative,
    ),
    RunOption(
        "shard",
        "run shard K of N (a deterministic 1/N of the cases; default: all); join the reports with "
        "'dmlconform report merge'",
        metavar="K/N",
        check=_shard,
    ),
    RunOption(
        "operators",
        "operators to test (default: every one available at the level; 'dmlconform spec rules' lists them)",
        metavar="OP",
        many=True,
        commands=_RUN_EXPORT,
    ),
    RunOption(
        "dtypes",
        "data types, e.g. FLOAT32 FLOAT16 (default: every type the support tables list)",
        metavar="TYPE",
        many=True,
        commands=_RUN_EXPORT,
    ),
    RunOption(
        "kinds",
        "item kinds, any of numeric, validation, metamorphic (default: all three; validation needs a "
        "backend that declares validates = True)",
        metavar="KIND",
        many=True,
        commands=_RUN_EXPORT,
    ),
    RunOption(
        "isolate",
        "run the backend in a worker process: a crash or hang fails its case, not the run",
        type=None,
        default=False,
        commands=frozenset({"run", "replay"}),
    ),
    RunOption(
        "report",
        "report directory (default reports/<backend>-<UTC time>/)",
        metavar="DIR",
        recorded=False,
        path=True,
        helps={"pytest": "report directory: results.json, junit.xml, failures/ (default: no report)"},
    ),
    RunOption(
        "shrink",
        "after the run, shrink each failure to a minimal reproducer (failures/<case>/shrunk/)",
        type=None,
        default=False,
        pytest=False,
        recorded=False,
    ),
    RunOption(
        "shrink-time",
        "time for --shrink in all, shared out over the failures (default {default})",
        type=float,
        default=300.0,
        metavar="S",
        pytest=False,
        recorded=False,
        check=_not_negative,
    ),
)

BY_DEST = {o.dest: o for o in OPTIONS}


def options_for(command: str) -> list[RunOption]:
    return [o for o in OPTIONS if command in o.commands]


# -- generated argument parsers -----------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The command's run options as argparse arguments. A value left out stays None (False for
    a flag), so that :func:`command_line` records only what was typed."""
    for o in options_for(command):
        kwargs = o.kwargs(command, False if o.flag else None)
        if command in o.required:
            kwargs["required"] = True
        parser.add_argument(*([o.short] if o.short else []), o.spelled(), **kwargs)


def add_pytest_options(group: Any) -> None:
    """The plugin's ``--dml-*`` options (pytest's ``OptionGroup``), with their real defaults."""
    for o in options_for("run"):
        if o.pytest:
            default = [] if o.repeat else o.default
            group.addoption(o.spelled("--dml-"), **{**o.kwargs("pytest", default), "dest": f"dml_{o.dest}"})


def given(source: Any, command: str, prefix: str = "") -> dict[str, Any]:
    """The command's option values from an argparse namespace (``prefix`` "") or pytest's
    ``config.option`` (``prefix`` "dml_"), every one present: a value not given is its default."""
    out = {}
    for o in options_for(command):
        value = getattr(source, prefix + o.dest, None)
        if value is None or (o.repeat and not value):
            value = [] if o.repeat else o.default
        out[o.dest] = value
    return out


def check_values(values: Mapping[str, Any], prefix: str = "--") -> None:
    """Each option's own check (``--cases`` at least 1 ...); SettingsError with one line."""
    for dest, value in values.items():
        o = BY_DEST.get(dest)
        problem = o.check(value, o.spelled(prefix)) if o and o.check else None
        if problem:
            raise SettingsError(problem)


def pytest_argv(args: argparse.Namespace) -> list[str]:
    """The ``--dml-*`` argv for the run options given on ``dmlconform run``'s command line."""
    argv: list[str] = []
    for o in options_for("run"):
        if o.pytest:
            argv += _words(o, getattr(args, o.dest, None), "--dml-", resolve=True)
    return argv


def command_line(words: Iterable[str], args: argparse.Namespace, command: str) -> str:
    """The command line that reproduces this call, options as typed (for results.json, a
    bundle's manifest, a failure's "re-run alone")."""
    parts = list(words)
    for o in options_for(command):
        if o.recorded:
            parts += _words(o, getattr(args, o.dest, None), "--")
    return shlex.join(parts)


def _words(o: RunOption, value: Any, prefix: str, resolve: bool = False) -> list[str]:
    if value is None or value is False or (isinstance(value, list) and not value):
        return []
    if o.flag:
        return [o.spelled(prefix)]
    if o.repeat:
        return [w for v in value for w in (o.spelled(prefix), str(v))]
    if o.many:
        return [o.spelled(prefix), *map(str, value)]
    text = str(Path(value).resolve()) if resolve and o.path else str(value)
    return [o.spelled(prefix), text]


# -- resolution -----------------------------------------------------------------------------


def parse_pairs(pairs: Iterable[str] | None, what: str = "backend option") -> dict[str, str]:
    """``KEY=VALUE`` strings as a dict; SettingsError naming ``what`` for one that is not."""
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"{what} {pair!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def data_type_key(name: str) -> str:
    """A data type as the spec names it: ``float16`` and ``DML_TENSOR_DATA_TYPE_FLOAT16`` are FLOAT16."""
    return name.upper().removeprefix("DML_TENSOR_DATA_TYPE_")


def resolve_selection(
    spec: Any, values: Mapping[str, Any], level: str, prefix: str = "--", validation: bool = True
) -> Any:
    """The ``runner.cases.Selection`` the options ask for at ``level`` (already a spec level
    name); SettingsError with one line for an unknown operator, data type or kind."""
    from dmlconform.runner.cases import KINDS, Selection

    check_values(values, prefix)
    operators = []
    for name in values.get("operators") or []:
        try:
            operators.append(spec.operator(name).name)
        except KeyError as exc:
            raise SettingsError(str(exc.args[0])) from None
    dtypes = []
    for name in values.get("dtypes") or []:
        key = data_type_key(name)
        if key not in spec.data_types:
            raise SettingsError(f"unknown data type {name!r} (known: {', '.join(spec.data_types)})")
        dtypes.append(key)
    kinds = tuple(values.get("kinds") or KINDS)
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise SettingsError(f"unknown item kind {bad[0]!r} (known: {', '.join(KINDS)})")
    return Selection(
        level=level,
        operators=tuple(operators),
        data_types=tuple(dtypes),
        cases=int(values.get("cases") or DEFAULT_CASES),
        seed=int(values.get("seed") or 0),
        kinds=kinds,
        validation=validation,
        tier=values.get("tier") or "default",
        max_elements=values.get("max_elements"),
    )


def spec_level(spec: Any, name: str | None) -> str | None:
    """A feature level as the spec names it (None for None); SettingsError for an unknown one."""
    from dmlconform.specification.model import UnknownLevel

    if not name:
        return None
    try:
        return spec.level(name).name
    except UnknownLevel as exc:
        raise SettingsError(str(exc)) from None


# -- the backend ----------------------------------------------------------------------------


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
    name: str, options: dict[str, str], isolate: bool, timeout: float, level: str | None
) -> tuple[Any, Any]:
    from dmlconform.runner.guard import BackendFailure, ProcessGuard, backend_info

    if isolate:
        guard = ProcessGuard(name, options, timeout or None, level=level)
        try:
            guard._start()
        except BackendFailure as exc:
            raise SettingsError(
                str(exc).replace("backend worker could not load", "cannot load backend")
            ) from None
        return guard, guard.info
    from dmlconform.backends import load_backend

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
    level: str | None = None,
    isolate: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> OpenedBackend:
    """Load a backend; SettingsError with one line. With ``level`` (and no ``feature_level``
    option), a backend that declares the option (the built-ins, which emulate any level) is
    given it, so that its check() judges descs at the level under test; one that declares none
    is loaded as it is. A backend that fails to load with the level fails the run: it is not
    loaded again without it."""
    options = dict(options or {})
    handle, info = _load(name, options, isolate, timeout, level)
    if level and "feature_level" not in options and info.takes_level:
        options["feature_level"] = level
    return OpenedBackend(handle, info, name, {**info.travelling, **options})


def guard_for(opened: OpenedBackend, isolate: bool, timeout: float, isolate_flag: str = "--isolate") -> Any:
    """The guard every backend call goes through: the worker process of an isolated backend,
    else a thread with a timeout."""
    from dmlconform.runner.guard import ProcessGuard, ThreadGuard

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


# -- a conformance run's settings -------------------------------------------------------------


@dataclass
class Settings:
    """The settings of a conformance run, resolved and checked once per process."""

    backend: str
    options: dict[str, str]
    level: str
    operators: tuple[str, ...]
    data_types: tuple[str, ...]
    cases: int
    seed: int
    report_dir: Path | None
    expect_file: str | None
    isolate: bool
    timeout: float
    kinds: tuple[str, ...]
    command: str
    #: the run's changes to the spec's tolerance, parsed and checked once (tolerance_options)
    tolerance: ToleranceOptions
    info: Any = None
    expectations: list[Any] = field(default_factory=list)
    shard: Any = None  # runner.cases.Shard, or None for the whole run
    tier: str = "default"
    max_elements: int | None = None  # None: the tier's default
    notes: list[str] = field(default_factory=list)  # said in the header (dmlconform: note: ...)
    isolate_flag: str = "--isolate"  # how the user asks for isolation, for messages
    #: the directories this run made for its report (missing_dirs), removed again when the run
    #: ends in a usage error: arguments found bad after start-up leave no empty report behind
    created_dirs: tuple[Path, ...] = ()

    def selection(self) -> Any:
        """The ``runner.cases.Selection`` of this run: what collection covers (before --shard)."""
        from dmlconform.runner.cases import Selection

        return Selection(
            level=self.level,
            operators=self.operators,
            data_types=self.data_types,
            cases=self.cases,
            seed=self.seed,
            kinds=self.kinds,
            validation=bool(getattr(self.info, "validates", False)),
            tier=self.tier,
            max_elements=self.max_elements,
        )


def resolve_settings(
    values: Mapping[str, Any], *, prefix: str, command: str, check_report: bool = True
) -> tuple[Settings, Any]:
    """(Settings, the opened backend's handle) from the run options' values (:func:`given`);
    SettingsError with one line naming options as spelled with ``prefix``. ``check_report``:
    whether the report directory must be writable (not asked of an xdist worker)."""
    from dmlconform.runner.cases import Shard
    from dmlconform.runner.expect import ExpectError, known_findings, load_expectations
    from dmlconform.specification.model import SpecError, load_spec

    def spelled(dest: str) -> str:
        return BY_DEST[dest].spelled(prefix)

    try:
        spec = load_spec()
    except SpecError as exc:  # --spec-dir (DMLCONFORM_SPEC_DIR) names no usable spec
        raise SettingsError(str(exc)) from None
    report = values.get("report")
    check_values(values, prefix)
    asked_name = values.get("feature_level")
    opened = open_backend(
        values["backend"],
        parse_pairs(values.get("backend_option")),
        level=asked_name,
        isolate=bool(values.get("isolate")),
        timeout=values["timeout"],
    )
    info = opened.info
    if not (asked_name or info.feature_level):
        raise SettingsError(f"backend {info.name!r} states no feature_level; pass {spelled('feature_level')}")
    asked = spec_level(spec, asked_name)
    notes = claim_notes(spec, info, asked, spelled("feature_level"))
    level = asked or spec.level(info.feature_level).name
    selection = resolve_selection(spec, values, level, prefix)
    unsupported = unsupported_data_types(spec, level, selection.operators, list(selection.data_types))
    if selection.data_types and len(unsupported) == len(selection.data_types):
        from dmlconform.runner.cases import Selection, selected_operators, supported_data_types

        ops = selected_operators(spec, Selection(level=level, operators=selection.operators))
        have = ", ".join(supported_data_types(spec, ops, level)) or "none"
        raise SettingsError(
            f"no selected operator supports {', '.join(selection.data_types)} at feature level {level} or below "
            f"(they support {have}): nothing to run"
        )
    expectations: list[Any] = []
    try:
        if values.get("expect"):
            expectations = load_expectations(values["expect"], spec)
        if not values.get("no_known_findings"):
            known, note = known_findings(info.name or values["backend"], info.versions, spec)
            expectations += known
            notes += [note] if note else []
    except ExpectError as exc:
        raise SettingsError(str(exc)) from None
    try:
        tolerance = tolerance_options(
            spec,
            {
                **(getattr(info, "tolerance", None) or {}),
                **parse_pairs(values.get("tolerance"), "tolerance override"),
            },
        )
    except ValueError as exc:
        raise SettingsError(str(exc).replace("backend option", "tolerance override")) from None
    created: tuple[Path, ...] = ()
    if report and check_report:  # last: a usage error above leaves no directory behind
        created = missing_dirs(Path(report).resolve())
        problem = directory_problem(Path(report).resolve(), spelled("report"))
        if problem:
            raise SettingsError(problem)
    settings = Settings(
        backend=values["backend"],
        options=opened.options,
        level=level,
        operators=selection.operators,
        data_types=selection.data_types,
        cases=selection.cases,
        seed=selection.seed,
        report_dir=Path(report).resolve() if report else None,
        expect_file=values.get("expect"),
        isolate=bool(values.get("isolate")),
        timeout=values["timeout"],
        kinds=selection.kinds,
        command=command,
        info=info,
        expectations=expectations,
        tolerance=tolerance,
        shard=Shard.parse(values["shard"]) if values.get("shard") else None,
        tier=selection.tier,
        max_elements=selection.max_elements,
        notes=notes,
        isolate_flag=spelled("isolate"),
        created_dirs=created,
    )
    return settings, opened.handle


def missing_dirs(path: Path) -> tuple[Path, ...]:
    """``path`` and those of its parents that do not exist yet, deepest first: what making
    ``path`` creates, and what a run that ends in a usage error removes again."""
    return tuple(p for p in (path, *path.parents) if not p.exists())


def claim_notes(spec: Any, info: Any, asked: str | None, level_flag: str) -> list[str]:
    """What the header must say about the backend's own feature level against the level asked
    for (``asked``: the run's ``--feature-level``, or None). SettingsError when the backend claims
    a level this spec does not know and none was asked for: a level the spec has not got cannot be
    tested, and testing another without a word would misreport the run."""
    from dmlconform.specification.model import UnknownLevel

    claimed = info.feature_level
    if not claimed:
        return []
    level = asked or claimed
    try:
        own = spec.level(claimed)
    except UnknownLevel:
        known = f"{spec.levels[0].name} to {spec.levels[-1].name}"
        if asked is None:
            raise SettingsError(
                f"backend {info.name!r} claims feature level {claimed!r}, which this spec does not know "
                f"(it knows {known}); pass {level_flag} to test it at one it knows"
            ) from None
        return [
            f"backend {info.name} claims feature level {claimed}, which this spec does not know "
            f"(it knows {known}): tested at {level}, as {level_flag} asks"
        ]
    if own.index < spec.level(level).index:
        return [f"tested at {level}, above the {own.name} backend {info.name} claims ({level_flag} asks)"]
    return []


def unsupported_data_types(spec: Any, level: str, operators: tuple[str, ...], dtypes: list[str]) -> list[str]:
    """The asked-for data types that no selected operator's support table admits at any level up
    to ``level``: only illegal-type validation cases could run for them."""
    from dmlconform.runner.cases import Selection, selected_operators, supported_data_types

    ops = selected_operators(spec, Selection(level=level, operators=operators))
    have = supported_data_types(spec, ops, level)
    return [t for t in dtypes if t not in have]


def tolerance_options(spec: Any, pairs: Mapping[str, Any]) -> ToleranceOptions:
    """The run's tolerance options from ``KEY=VALUE`` pairs; ValueError (one line) for a value
    that is no number, or a key or model name some operator's tolerance section refuses, before
    any case runs."""
    from dmlconform.tolerance import coefficients
    from dmlconform.tolerance.options import ToleranceOptions

    options = ToleranceOptions.parse(pairs)
    for op in spec.operators.values():
        for dt in sorted((op.tolerance.get("coefficients") or {}) if op.tolerance else {}):
            coefficients(op.tolerance, dt, None, options)
    return options
