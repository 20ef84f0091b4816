"""Violations: errors as values, like jsonschema's ValidationError, for descs that break a rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Violation:
    """One broken rule: which rule, which member (a path such as ``ScaleTensor.Sizes[1]``), why,
    and where the rule is written (the doc page and section, and the seed file)."""

    rule: str
    member: str
    message: str
    source: str
    source_detail: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "member": self.member, "message": self.message, "source": self.source}

    def __str__(self) -> str:
        return f"[{self.rule}] {self.member}: {self.message}"


class Rejected(Exception):
    """Raised by a backend's ``check`` for a desc it considers illegal."""


class Unsupported(Exception):
    """Raised by a backend for a desc it does not implement: the case is skipped, not failed."""
