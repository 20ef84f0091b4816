"""A conformance run's settings (:class:`Settings`), resolved and checked once per process.

The pytest plugin resolves them from its ``--dml-*`` options (``dmlconform run`` hands its own
over as those): the spec, the backend opened at the level asked for, the selection, the known
findings and expectations, the tolerance overrides and the report directory, each checked
before any case runs. Errors are :class:`~dmlconform.runner.options.SettingsError` with one
line that names options as the user spelled them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmlconform.runner import tiers
from dmlconform.runner.backend_loading import OpenedBackend, open_backend
from dmlconform.runner.cases import Selection, Shard
from dmlconform.runner.directories import directory_problem
from dmlconform.runner.expect import ExpectError, load_expectations, shipped_findings
from dmlconform.runner.options import BY_DEST, SettingsError, check_values, parse_pairs
from dmlconform.runner.selection import require_supported_data_types, resolve_selection, spec_level
from dmlconform.specification.spec import FeatureLevel, SpecError, UnknownLevel, load_spec
from dmlconform.tolerance import coefficients
from dmlconform.tolerance.options import ToleranceOptions


@dataclass
class Settings:
    """The settings of a conformance run, resolved and checked once per process. What the run
    covers is its :class:`~dmlconform.runner.cases.Selection` (the level among it), held here
    once: collection, the header and results.json all read that one object."""

    backend: str
    options: dict[str, str]
    selection: Selection
    report_dir: Path | None
    expect_file: str | None
    isolate: bool
    timeout: float
    command: str
    #: the run's changes to the spec's tolerance, parsed and checked once (tolerance_options)
    tolerance: ToleranceOptions
    info: Any = None
    expectations: list[Any] = field(default_factory=list)
    shard: Any = None  # runner.cases.Shard, or None for the whole run
    notes: list[str] = field(default_factory=list)  # said in the header (dmlconform: note: ...)
    isolate_flag: str = "--isolate"  # how the user asks for isolation, for messages
    #: the directories this run made for its report (missing_dirs), removed again when the run
    #: ends in a usage error: arguments found bad after start-up leave no empty report behind
    created_dirs: tuple[Path, ...] = ()


def resolve_settings(
    values: Mapping[str, Any], *, prefix: str, command: str, check_report: bool = True
) -> tuple[Settings, Any]:
    """(Settings, the opened backend's handle) from the run options' values (``options.given``);
    SettingsError with one line naming options as spelled with ``prefix``. ``check_report``:
    whether the report directory must be writable (not asked of an xdist worker)."""

    def spelled(dest: str) -> str:
        return BY_DEST[dest].spelled(prefix)

    spec = _load_spec()
    check_values(values, prefix)
    asked = spec_level(spec, values.get("feature_level"))
    opened = _open_backend(values, asked)
    level, notes = _level_and_notes(spec, opened.info, asked, spelled("feature_level"))
    validates = bool(getattr(opened.info, "validates", False))
    selection = resolve_selection(spec, values, level, prefix, validation=validates)
    require_supported_data_types(spec, selection)
    notes += _tier_notes(selection, spelled("cases"))
    expectations, note = _expectations(spec, values, opened.info)
    notes += [note] if note else []
    tolerance = _tolerance(spec, values, opened.info)
    report_dir = Path(values["report"]).resolve() if values.get("report") else None
    created = _report_dirs(report_dir, spelled("report")) if report_dir and check_report else ()
    settings = Settings(
        backend=values["backend"],
        options=opened.options,
        selection=selection,
        report_dir=report_dir,
        expect_file=values.get("expect"),
        isolate=bool(values.get("isolate")),
        timeout=values["timeout"],
        command=command,
        info=opened.info,
        expectations=expectations,
        tolerance=tolerance,
        shard=Shard.parse(values["shard"]) if values.get("shard") else None,
        notes=notes,
        isolate_flag=spelled("isolate"),
        created_dirs=created,
    )
    return settings, opened.handle


def _tier_notes(selection: Selection, cases_flag: str) -> list[str]:
    """What the tier does with the cases asked for, where it does not take them as asked (the
    smoke tier keeps at most its own number of numeric and metamorphic cases per group)."""
    cap = tiers.tier(selection.tier).seeded_cases
    if cap is None or selection.cases <= cap:
        return []
    return [
        f"the {selection.tier} tier runs {cap} numeric and metamorphic cases per group, not the "
        f"{selection.cases} of {cases_flag} (validation cases: {selection.cases}); --tier default runs them all"
    ]


def _open_backend(values: Mapping[str, Any], asked: FeatureLevel | None) -> OpenedBackend:
    """The backend the options name, with its options, at the feature level asked for (the
    object the run tests at: the backend is handed its name)."""
    return open_backend(
        values["backend"],
        parse_pairs(values.get("backend_option")),
        level=asked,
        isolate=bool(values.get("isolate")),
        timeout=values["timeout"],
    )


def _load_spec() -> Any:
    """The spec the run judges by; SettingsError when ``--spec-dir`` (DMLCONFORM_SPEC_DIR)
    names no usable spec."""
    try:
        return load_spec()
    except SpecError as exc:
        raise SettingsError(str(exc)) from None


def _level_and_notes(
    spec: Any, info: Any, asked: FeatureLevel | None, level_flag: str
) -> tuple[FeatureLevel, list[str]]:
    """(the level the run tests, the header's notes on the backend's claim): the level asked
    for, else the backend's own; SettingsError when neither names one."""
    if asked is None and not info.feature_level:
        raise SettingsError(f"backend {info.name!r} states no feature_level; pass {level_flag}")
    own, notes = backend_claim(spec, info, asked, level_flag)
    level = asked or own
    assert level is not None  # no level asked: backend_claim raised unless the spec knows the claim
    return level, notes


def _expectations(spec: Any, values: Mapping[str, Any], info: Any) -> tuple[list[Any], str | None]:
    """(the ``--expect`` file's expectations, then the backend's shipped known findings unless
    ``--no-known-findings``; the header's note on those findings); SettingsError with file:line."""
    expectations: list[Any] = []
    note = None
    try:
        if values.get("expect"):
            expectations = load_expectations(values["expect"], spec)
        if not values.get("no_known_findings"):
            known, note = shipped_findings(info.name or values["backend"], info.versions, spec=spec)
            expectations += known
    except ExpectError as exc:
        raise SettingsError(str(exc)) from None
    return expectations, note


def _tolerance(spec: Any, values: Mapping[str, Any], info: Any) -> ToleranceOptions:
    """The backend's own tolerance options with the run's ``--tolerance`` overrides on top."""
    try:
        return tolerance_options(
            spec,
            {
                **(getattr(info, "tolerance", None) or {}),
                **parse_pairs(values.get("tolerance"), "tolerance override"),
            },
        )
    except ValueError as exc:
        raise SettingsError(str(exc).replace("backend option", "tolerance override")) from None


def _report_dirs(report: Path, flag: str) -> tuple[Path, ...]:
    """The directories making the report directory creates (see :attr:`Settings.created_dirs`);
    SettingsError when it cannot take files. Asked last: a usage error found before leaves no
    directory behind."""
    created = missing_dirs(report)
    problem = directory_problem(report, flag)
    if problem:
        raise SettingsError(problem)
    return created


def missing_dirs(path: Path) -> tuple[Path, ...]:
    """``path`` and those of its parents that do not exist yet, deepest first: what making
    ``path`` creates, and what a run that ends in a usage error removes again."""
    return tuple(p for p in (path, *path.parents) if not p.exists())


def backend_claim(
    spec: Any, info: Any, asked: FeatureLevel | None, level_flag: str
) -> tuple[FeatureLevel | None, list[str]]:
    """(the backend's own feature level as this spec knows it, or None; what the header must
    say about it against the level asked for). ``asked``: the run's ``--feature-level``, or None.
    SettingsError when the backend claims a level this spec does not know and none was asked
    for: a level the spec has not got cannot be tested, and testing another without a word would
    misreport the run."""
    claimed = info.feature_level
    if not claimed:
        return None, []
    try:
        own = spec.level(claimed)
    except UnknownLevel:
        known = f"{spec.levels[0].name} to {spec.levels[-1].name}"
        if asked is None:
            raise SettingsError(
                f"backend {info.name!r} claims feature level {claimed!r}, which this spec does not know "
                f"(it knows {known}); pass {level_flag} to test it at one it knows"
            ) from None
        return None, [
            f"backend {info.name} claims feature level {claimed}, which this spec does not know "
            f"(it knows {known}): tested at {asked.name}, as {level_flag} asks"
        ]
    if asked is not None and own < asked:
        return own, [
            f"tested at {asked.name}, above the {own.name} backend {info.name} claims ({level_flag} asks)"
        ]
    return own, []


def saved_tolerance(spec: Any, saved: Mapping[str, Any] | None, overrides: Any) -> ToleranceOptions:
    """The tolerance a saved case is judged under again (replay, shrink): the one it was judged
    under (its case.json), with ``--tolerance`` overrides on top; ValueError in one line."""
    try:
        return tolerance_options(spec, {**(saved or {}), **parse_pairs(overrides, "tolerance override")})
    except ValueError as exc:
        raise SettingsError(str(exc).replace("backend option", "tolerance override")) from None


def tolerance_options(spec: Any, pairs: Mapping[str, Any]) -> ToleranceOptions:
    """The run's tolerance options from ``KEY=VALUE`` pairs; ValueError (one line) for a value
    that is no number, or a key or model name some operator's tolerance section refuses, before
    any case runs."""
    options = ToleranceOptions.parse(pairs)
    for op in spec.operators.values():
        for dt in sorted((op.tolerance.get("coefficients") or {}) if op.tolerance else {}):
            coefficients(op.tolerance, dt, None, options)
    return options
