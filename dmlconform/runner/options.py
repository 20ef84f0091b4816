"""The run options, declared once: one :class:`RunOption` row of :data:`OPTIONS` per option.

Why this module exists: ``dmlconform run``, the pytest plugin's ``--dml-*`` options,
``dxdispatch export``, ``replay``, ``shrink`` and ``dxdispatch emulate`` take overlapping sets of
options. Each option is one :class:`RunOption` row of :data:`OPTIONS` (name, type, default,
help, which commands take it); the argparse arguments (:func:`add_arguments`), the plugin's
pytest options (:func:`add_pytest_options`), the argv ``run`` hands to pytest
(:func:`pytest_argv`) and the command line a report records (:func:`command_line`) are all
generated from the rows, so an option has one spelling (``--NAME``, ``--dml-NAME`` under plain
pytest) and one default. Each option's own check (:func:`check_values`) runs once; the
selection (``runner.selection``), the run's settings (``runner.settings``) and the backend
(``runner.backend_loading``) are resolved from the values.

Errors are :class:`SettingsError` (a ``ValueError``) with one line that names the option as the
user spelled it; each caller turns that into its own usage error.

Module-level imports stay light: the CLI imports this module to build its parsers, and the
pytest plugin in every pytest process (the project's own test runs included) just to declare
its options.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmlconform.distribution import builtin_backends
from dmlconform.runner.defaults import DEFAULT_CASES

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
        builtins = ", ".join(builtin_backends()) if "{builtins}" in text else ""
        return text.format(default=default, builtins=builtins)

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
        "backend under test: a registered name (the built-in {builtins}, or one registered under the "
        "entry-point group dmlconform.backends) or package.module:Class",
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
        commands=frozenset({"run", "replay"}),
        helps={"replay": "override the tolerance the case was judged under (repeatable), e.g. model=lenient"},
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


def parse_pairs(pairs: Iterable[str] | None, what: str = "backend option") -> dict[str, str]:
    """``KEY=VALUE`` strings as a dict; SettingsError naming ``what`` for one that is not."""
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"{what} {pair!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out
