"""What "fails the same way" means for a shrunk case.

A smaller case is only worth reporting if it shows the bug the original showed: a shrink that
wanders from "Mean out of budget" to "the backend raised on a 1-element tensor" has found a
different bug (or none), and whoever fixes the implementation would chase the wrong one. So
each failure is reduced to a signature, and a candidate is accepted only when its own failure
carries the original's:

- numeric and metamorphic cases out of budget: the output member that failed (the worst
  element's, else the one whose aggregate figures broke their bound) must fail again;
- a legal desc the backend rejected: rejected again; an illegal desc it accepted: accepted again
  (the candidate breaking the same one rule is checked before it runs, see ``search``);
- anything else (the backend raised, hung, returned the wrong shape; a relation's own check):
  the same message up to its first colon, numbers left out, so "timed out after 60 s" and
  "raised ValueError" are told apart but two different indices are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dmlconform.runner.cases import Case
from dmlconform.runner.checks import CaseResult


@dataclass(frozen=True)
class Signature:
    """How a case failed: ``kind`` (out-of-budget | rejected-legal | accepted-illegal | failed)
    and ``detail`` (the failing output member, the broken rule, or the message's head)."""

    kind: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail else self.kind


def failing_members(errors: dict[str, Any] | None) -> list[str]:
    """Output members out of budget (per element or in aggregate), the worst element's first."""
    if not errors:
        return []
    out: list[str] = []
    worst = errors.get("worst") or {}
    ratio = errors.get("ratio")
    if worst.get("member") and _over(ratio):
        out.append(str(worst["member"]))
    for member, figures in sorted((errors.get("outputs") or {}).items()):
        if not isinstance(figures, dict) or member in out:
            continue
        agg = figures.get("aggregate") or {}
        if _over(figures.get("ratio")) or any(_over(v) for v in agg.values()):
            out.append(member)
    return out


def _over(value: Any) -> bool:
    """Past its bound: > 1, or NaN (a NaN where the reference has a number is no pass). The
    figures are JSON-safe already, so infinities and NaN arrive as the strings "inf", "nan"."""
    if isinstance(value, str) and value.lower() in ("inf", "nan"):
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not value <= 1.0


def _message_head(message: str | None) -> str:
    head = (message or "").split(":", 1)[0]
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", head).strip()[:120]


def signature(case: Case, result: CaseResult) -> Signature | None:
    """The failure's signature; None when the case did not fail."""
    if result.status != "failed":
        return None
    if case.kind == "validation":
        if case.expected == "illegal":
            return Signature("accepted-illegal", case.rule or "")
        return Signature("rejected-legal")
    if (result.message or "").startswith("backend rejected a legal desc"):
        return Signature("rejected-legal")
    members = failing_members(result.errors)
    if members:
        return Signature("out-of-budget", members[0])
    return Signature("failed", _message_head(result.message))


def same_failure(original: Signature, case: Case, result: CaseResult) -> bool:
    """Does ``result`` show the failure ``original`` describes?"""
    if result.status != "failed":
        return False
    if original.kind == "out-of-budget":
        return original.detail in failing_members(result.errors)
    return signature(case, result) == original
