"""The case data the HTML page embeds: one JSON blob the page's script builds the case table and
the detail panels from.

50,000 cases must stay well under 10 MB and parse in a fraction of a second, so the blob is
compact: one array per case with indexes into shared string tables, and the long parts (the desc
as YAML, the worst element, the outputs) only for the failures, up to a cap.
"""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

from dmlconform.report.findings import known_label, known_reason
from dmlconform.report.formatting import format_number
from dmlconform.report.results_reader import OUTCOMES, CaseRecord, Results

# Descs embedded for the case table's detail panel; past this, the panel points at the
# reproducer directory instead, which bounds the page size whatever the failure rate.
EMBEDDED_DESCS = 2000
# A row's message is cut to this many characters; the detail record then carries it whole.
ROW_MESSAGE_CHARS = 240

# The names of a row's fields, in its order: the page's script reads rows by these names.
COLUMNS = (
    "id",
    "index",
    "outcome",
    "op",
    "level",
    "dtype",
    "kind",
    "regime",
    "ulp",
    "abs",
    "budget",
    "msg",
    "detail",
    "ratio",
    "n",
    "agg",
    "known",
)
STRING_TABLES = ("ops", "levels", "dtypes", "kinds", "regimes", "msgs", "reasons")
_OUTCOME_INDEX = {o: i for i, o in enumerate(OUTCOMES)}


def _compact_float(value: float | None, digits: int) -> float | str | None:
    if value is None:
        return None
    if math.isnan(value) or math.isinf(value):
        return str(value)  # "inf" / "nan": JSON has no literal for them
    return float(f"{value:.{digits}g}")


_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml: ~20x faster on big runs


def desc_yaml(desc: Any) -> str | None:
    if desc is None:
        return None
    try:
        return yaml.dump(
            desc, Dumper=_YAML_DUMPER, sort_keys=False, default_flow_style=None, width=100, allow_unicode=True
        )
    except yaml.YAMLError:
        return json.dumps(desc, indent=1, default=str)


def _jsonable(value: Any) -> Any:
    """Free-form fields (info, worst) with non-finite floats spelled as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def canonical_id(kind: str, op: str, level: str, dt: str, index: int | None) -> str | None:
    if index is None:
        return None
    return f"{kind}[{op}-{level}-{dt}-{index:04d}]"


def _replay_field(case: CaseRecord, frame: tuple[str, str] | None) -> str | int | None:
    """The detail record's replay command: 0 when the case has none, None when the page can
    rebuild it from the shared frame around the reproducer path, else the command itself."""
    if case.replay is None:
        return 0
    if frame and case.reproducer and case.replay == case.reproducer.join(frame):
        return None
    return case.replay


def shrunk_line(shrunk: dict[str, Any]) -> str | None:
    """One line on a ``run --shrink`` result: sizes before and after, time, how it stopped."""
    if shrunk.get("error"):
        return f"not shrunk: {shrunk['error']}"
    before, after = shrunk.get("original") or {}, shrunk.get("shrunk") or {}
    if not after:
        return None
    return (
        f"{before.get('elements')} elements, {before.get('dimensions')} dims -> {after.get('elements')} "
        f"elements, {after.get('dimensions')} dims in {format_number(shrunk.get('seconds'), 2)} s "
        f"({shrunk.get('stopped')}; {len(shrunk.get('steps') or [])} steps)"
    )


def _shrunk_detail(case: CaseRecord) -> dict[str, Any] | None:
    shrunk = case.raw.get("shrunk")
    if not isinstance(shrunk, dict):
        return None
    out = {
        "line": shrunk_line(shrunk),
        "desc": desc_yaml(shrunk.get("desc")),
        "rep": shrunk.get("reproducer"),
        "cmd": shrunk.get("replay"),
        "m": shrunk.get("message"),
        "steps": shrunk.get("steps") or None,
    }
    return {k: v for k, v in out.items() if v is not None}


class _Strings:
    """The shared string tables: a row holds an index into one (-1 for None) instead of the
    string, which a run repeats thousands of times (operator, level, message)."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, int]] = {k: {} for k in STRING_TABLES}

    def intern(self, table: str, value: str | None) -> int:
        if value is None:
            return -1
        t = self.tables[table]
        if value not in t:
            t[value] = len(t)
        return t[value]


def _replay_frame(notable: list[CaseRecord]) -> tuple[str, str] | None:
    """Replay commands differ only in the reproducer path: the (prefix, suffix) around it, stored
    once, so that a case needs its command only when it does not follow that pattern."""
    for case in notable:
        if case.replay and case.reproducer and case.reproducer in case.replay:
            at = case.replay.index(case.reproducer)
            return (case.replay[:at], case.replay[at + len(case.reproducer) :])
    return None


def _detail(case: CaseRecord, replay_frame: tuple[str, str] | None, full: bool) -> dict[str, Any]:
    """A notable case's detail record; without ``full`` only the pointers to its reproducer."""
    errors = case.errors or {}
    outputs = errors.get("outputs")
    message = case.message
    detail = {
        # The row carries the message unless it had to be shortened there.
        "m": message if message is not None and len(message) > ROW_MESSAGE_CHARS else None,
        "desc": desc_yaml(case.raw.get("desc")) if full else None,
        "w": _jsonable(errors.get("worst")) if full else None,
        "out": _jsonable(outputs)
        if full and isinstance(outputs, dict) and (len(outputs) > 1 or case.aggregate)
        else None,
        "info": _jsonable(case.raw.get("info")) if full else None,
        "exp": case.expected,
        "rule": case.rule,
        "rep": case.reproducer,
        "cmd": _replay_field(case, replay_frame),
        "shr": _shrunk_detail(case) if full else None,
    }
    return {k: v for k, v in detail.items() if v is not None}


def _details(
    notable: list[CaseRecord], replay_frame: tuple[str, str] | None
) -> tuple[dict[int, int], list[dict[str, Any]]]:
    """The detail records of the notable cases, and each case's (by id()) index among them."""
    detail_index: dict[int, int] = {}
    details = []
    for n, case in enumerate(notable):
        detail_index[id(case)] = len(details)
        full = n < EMBEDDED_DESCS  # past the cap: only pointers to the reproducer, to bound the size
        details.append(_detail(case, replay_frame, full))
    return detail_index, details


def _row(case: CaseRecord, strings: _Strings, detail_index: dict[int, int]) -> list[Any]:
    """The case's row, its fields in the order of :data:`COLUMNS`."""
    kind, op, lvl, dt = case.kind, case.operator, case.feature_level, case.data_type
    message = case.message
    if message is not None and len(message) > ROW_MESSAGE_CHARS:
        message = message[: ROW_MESSAGE_CHARS - 1] + "\u2026"
    return [
        0 if case.id == canonical_id(kind, op, lvl, dt, case.index) else case.id,
        case.index if case.index is not None else -1,
        _OUTCOME_INDEX[case.outcome],
        strings.intern("ops", op),
        strings.intern("levels", lvl),
        strings.intern("dtypes", dt),
        strings.intern("kinds", kind),
        strings.intern("regimes", case.regime),
        _compact_float(case.max_ulp, 4),
        _compact_float(case.max_abs, 3),
        _compact_float(case.budget_ulp, 4),
        strings.intern("msgs", message),
        detail_index.get(id(case), -1),
        _compact_float(case.ratio, 3),
        case.reduction_length,
        _compact_float(case.aggregate_ratio, 3),
        strings.intern("reasons", known_reason(case)),
    ]


def build_case_data(results: Results, notable: list[CaseRecord]) -> dict[str, Any]:
    """The embedded blob: one array per case, strings interned in shared tables."""
    strings = _Strings()
    replay_frame = _replay_frame(notable)
    detail_index, details = _details(notable, replay_frame)
    data: dict[str, Any] = {
        "v": 1,
        "cols": list(COLUMNS),
        "outcomes": list(OUTCOMES),
        "rows": [_row(case, strings, detail_index) for case in results.cases],
        "details": details,
        "replay": list(replay_frame) if replay_frame else None,
    }
    for name, table in strings.tables.items():
        data[name] = list(table)
    data["labels"] = [known_label(reason) for reason in data["reasons"]]
    return data
