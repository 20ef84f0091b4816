"""The result of a spec diff: each change, the two sides it was found between, its witness.

A reversed diff yields the mirror image of a forward one: the same levels, before/after swapped,
``rule-on`` read as ``rule-off``; ``MIRROR`` is that pairing of kinds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import FeatureLevel, Spec

# Each kind and the kind a reversed diff reports for the same change.
MIRROR: dict[str, str] = {
    "operator-added": "operator-removed",
    "member-added": "member-removed",
    "member-changed": "member-changed",
    "support-dimension-counts": "support-dimension-counts",
    "support-data-types": "support-data-types",
    "rule-on": "rule-off",
    "rule-changed": "rule-changed",
    "rule-renamed": "rule-renamed",
    "activation-added": "activation-removed",
    "activation-changed": "activation-changed",
    "tensor-limit": "tensor-limit",
    "doc-note-added": "doc-note-removed",
    "doc-note-changed": "doc-note-changed",
    "feature-levels": "feature-levels",
}
MIRROR.update({v: k for k, v in list(MIRROR.items())})
KINDS = tuple(sorted(MIRROR))


@dataclass(frozen=True)
class Side:
    """One end of a comparison: a spec at a level; ``label`` is how the output names it."""

    spec: Spec
    level: FeatureLevel
    label: str


@dataclass(frozen=True)
class Witness:
    """A desc legal at ``legal_at`` and illegal at ``illegal_at`` (``violations`` there), or
    ``desc is None`` with ``reason`` saying why no single desc shows the change."""

    desc: OperatorDesc | None
    legal_at: str | None = None
    illegal_at: str | None = None
    violations: tuple[str, ...] = ()
    reason: str = ""
    tried: int = 0
    across_range: bool | None = None

    def to_json(self) -> dict[str, Any]:
        if self.desc is None:
            return {"found": False, "reason": self.reason, "tried": self.tried}
        return {
            "found": True,
            "legal_at": self.legal_at,
            "illegal_at": self.illegal_at,
            "violations": list(self.violations),
            "across_range": self.across_range,
            "desc": self.desc.to_dict(),
        }


@dataclass(frozen=True)
class Change:
    """One difference. ``level`` is where it happens (a level diff), or the level or range of
    levels ``"3_1..6_4"`` where two specs differ (a spec diff; ``"*"`` when not level-bound).
    ``before``/``after`` are JSON values (``None`` for "absent"); ``rule`` is the id of the rule
    whose verdict changes, ``source`` its citation."""

    level: str
    kind: str
    subject: str
    before: Any
    after: Any
    rule: str | None = None
    source: str = ""
    witness: Witness | None = field(default=None, compare=False)
    sides: tuple[Side, Side] | None = field(default=None, compare=False, repr=False)

    def key(self) -> tuple[Any, ...]:
        """Identity without the level, for merging the same difference over several levels."""
        return (self.kind, self.subject, _canon(self.before), _canon(self.after), self.rule)

    def mirrored(self) -> Change:
        subject = self.subject
        if self.kind == "rule-renamed":
            subject = " -> ".join(reversed(subject.split(" -> ")))
        sides = (self.sides[1], self.sides[0]) if self.sides else None
        return replace(
            self, kind=MIRROR[self.kind], subject=subject, before=self.after, after=self.before, sides=sides
        )

    def to_json(self) -> dict[str, Any]:
        out = {
            "level": self.level,
            "kind": self.kind,
            "subject": self.subject,
            "before": self.before,
            "after": self.after,
            "rule": self.rule,
            "source": self.source,
        }
        if self.witness is not None:
            out["witness"] = self.witness.to_json()
        return out


@dataclass
class DiffResult:
    """Every change, per operator, in output order. ``mode`` is ``levels`` or ``specs``."""

    mode: str
    from_: str
    to: str
    level: str | None = None
    operators: dict[str, list[Change]] = field(default_factory=dict)
    common: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.common) or any(self.operators.values())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "from": self.from_, "to": self.to}
        if self.mode == "specs":
            out["level"] = self.level
        out["operators"] = {
            name: {"changes": [c.to_json() for c in changes]} for name, changes in self.operators.items()
        }
        if self.common:
            out["common"] = {"changes": [c.to_json() for c in self.common]}
        return out


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
