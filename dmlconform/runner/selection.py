"""What a run selects: the options' operators, data types and kinds checked against the spec.

Checked once, before any case is generated, so that an unknown operator, data type, kind or
feature level costs one line (a :class:`~dmlconform.runner.options.SettingsError`) and not a
run. ``dmlconform run``, the pytest plugin and ``dxdispatch export`` resolve their selection
here.

Module-level imports stay light: the CLI imports this module to build ``dxdispatch``'s parsers;
case collection (``runner.cases``) loads when a selection is resolved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dmlconform.runner.defaults import DEFAULT_CASES
from dmlconform.runner.options import SettingsError, check_values

if TYPE_CHECKING:
    from dmlconform.specification.spec import FeatureLevel


def data_type_key(name: str) -> str:
    """A data type as the spec names it: ``float16`` and ``DML_TENSOR_DATA_TYPE_FLOAT16`` are FLOAT16."""
    return name.upper().removeprefix("DML_TENSOR_DATA_TYPE_")


def resolve_selection(
    spec: Any, values: Mapping[str, Any], level: FeatureLevel, prefix: str = "--", validation: bool = True
) -> Any:
    """The ``runner.cases.Selection`` the options ask for at ``level`` (resolved where the
    options entered: :func:`spec_level`); SettingsError with one line for an unknown operator,
    data type or kind."""
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
        # once each, however often named (lrn and LOCAL_RESPONSE_NORMALIZATION are one operator):
        # a repeated name collected every case twice under one id, and half "had no result"
        operators=tuple(dict.fromkeys(operators)),
        data_types=tuple(dict.fromkeys(dtypes)),
        cases=int(values.get("cases") or DEFAULT_CASES),
        seed=int(values.get("seed") or 0),
        kinds=kinds,
        validation=validation,
        tier=values.get("tier") or "default",
        max_elements=values.get("max_elements"),
    )


def spec_level(spec: Any, name: str | None) -> FeatureLevel | None:
    """The spec's feature level a user names (None for None), resolved here once, where the
    option enters: everything downstream compares and passes the object; SettingsError for an
    unknown one."""
    from dmlconform.specification.spec import UnknownLevel

    if not name:
        return None
    try:
        return spec.level(name)
    except UnknownLevel as exc:
        raise SettingsError(str(exc)) from None


def unsupported_data_types(
    spec: Any, level: FeatureLevel, operators: tuple[str, ...], dtypes: list[str]
) -> list[str]:
    """The asked-for data types that no selected operator's support table admits at any level up
    to ``level``: only illegal-type validation cases could run for them."""
    from dmlconform.runner.cases import Selection, selected_operators, supported_data_types

    ops = selected_operators(spec, Selection(level=level, operators=operators))
    have = supported_data_types(spec, ops, level)
    return [t for t in dtypes if t not in have]


def require_supported_data_types(spec: Any, selection: Any) -> None:
    """SettingsError when the selection names data types and no selected operator supports any
    of them at its level or below: such a run would have nothing to run."""
    from dmlconform.runner.cases import Selection, selected_operators, supported_data_types

    level = selection.level
    unsupported = unsupported_data_types(spec, level, selection.operators, list(selection.data_types))
    if selection.data_types and len(unsupported) == len(selection.data_types):
        ops = selected_operators(spec, Selection(level=level, operators=selection.operators))
        have = ", ".join(supported_data_types(spec, ops, level)) or "none"
        raise SettingsError(
            f"no selected operator supports {', '.join(selection.data_types)} at feature level {level.name} or below "
            f"(they support {have}): nothing to run"
        )
