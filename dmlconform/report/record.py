"""The case record of results.json (docs/results-json.md), declared once.

Why one dataclass: the runner (``runner.results.case_record``), ``dxdispatch check`` (for a case it
cannot rebuild) and the report (``report.model.CaseRecord`` reads the file back through it) handle
the same record; declared once, a new field is added in one place, and a record written by any of
them has every key the others read. It sits in the report package because the report must read
results.json without the runner, and the runner already depends on the report (it renders one).

A record crosses process boundaries (pytest-xdist serializes it on the test report) and is written
as JSON, so it travels as the plain dict :meth:`CaseRecord.to_dict` gives, keys in field order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class CaseRecord:
    """One case of results.json: the keys of its JSON object are these fields."""

    id: str
    nodeid: str = ""
    kind: str = ""  # numeric | validation | metamorphic
    operator: str = ""
    feature_level: str = ""
    data_type: str | None = None
    index: int | None = 0
    outcome: str | None = None  # known only where expectations are applied (the controller)
    message: str | None = None
    duration_s: float | None = None
    regime: str | None = None  # numeric/metamorphic: the input-data regime
    expected: str | None = None  # validation: legal | illegal
    rule: str | None = None  # validation of an illegal desc: the rule it breaks
    relation: str | None = None  # metamorphic: the relation's id
    rules: list[str] = field(default_factory=list)  # rule ids the case exercised (coverage)
    desc: dict[str, Any] | None = None
    reduction_length: int | None = None
    elements: int | None = None
    errors: dict[str, Any] | None = None
    info: dict[str, Any] | None = None
    reproducer: str | None = None  # failures/<case>, relative to the report
    replay: str | None = None  # the command that replays the reproducer
    expectation: str | None = None  # the reason of the expected-failure entry that matched
    known_finding: str | None = None  # the finding (F1, O1, ...) an xfailed case is known as
    # what a ``fails`` finding excused: {"finding", "scope": "slices", "elements", "of", "outputs"}
    # (the elements of its slices) or {"finding", "scope": "case", "why"}; None where none did
    excused: dict[str, Any] | None = None
    models: dict[str, bool] | None = None  # tolerance model -> whether the outputs meet it
    accuracy_class: str | None = None  # the tightest model of the ladder the case meets, or "none"

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of results.json (only the declared fields, in order)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(CaseRecord)}

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(CaseRecord))

    @classmethod
    def of(cls, data: dict[str, Any]) -> CaseRecord:
        """A record from its dict (extra keys, such as ``shrunk``, are not fields and stay out)."""
        return cls(**{k: data[k] for k in cls.field_names() if k in data})


def _plain(value: Any) -> Any:
    return asdict(value) if hasattr(value, "__dataclass_fields__") else value
