"""What "fails the same way" means for a shrunk case.

A smaller case is only worth reporting if it shows the bug the original showed: a shrink that
wanders from "Mean out of budget" to "the backend raised on a 1-element tensor" has found a
different bug (or none), and whoever fixes the implementation would chase the wrong one. So
each failure is reduced to a signature, and a candidate is accepted only when its own failure
carries the original's:

- numeric and metamorphic cases out of budget: the output member that failed (the worst
  element's) must fail again per element, at least as far past its budget as the original
  (capped at twice the budget); one that failed only in aggregate (a systematic error every
  element hides) must fail in aggregate again, likewise;
- a legal desc the backend rejected: rejected again; an illegal desc it accepted: accepted again
  (the candidate breaking the same one rule is checked before it runs, see ``search``);
- anything else (the backend raised, hung, returned the wrong shape; a relation's own check):
  the same message up to its first colon, numbers left out, so "timed out after 60 s" and
  "raised ValueError" are told apart but two different indices are not.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from dmlconform.report.results_reader import json_number
from dmlconform.runner.cases import Case
from dmlconform.runner.judging import CaseResult


@dataclass(frozen=True)
class Signature:
    """How a case failed: ``kind`` (out-of-budget | systematic | rejected-legal |
    accepted-illegal | failed), ``detail`` (the failing output member, the broken rule, or the
    message's head) and, for the two budget kinds, ``strength``: the error / budget a candidate
    must reach again (the original's, capped at 2, so a shrunk case never fails by a hair when
    the original failed clearly)."""

    kind: str
    detail: str = ""
    strength: float = 0.0

    def __str__(self) -> str:
        text = f"{self.kind}: {self.detail}" if self.detail else self.kind
        return text + (f" (>= {self.strength:.3g}x its bound)" if self.strength else "")


STRENGTH_CAP = 2.0


def _figure(value: Any) -> float | None:
    """A ratio from the JSON-safe errors (infinities and NaN arrive as strings); NaN (a NaN where
    the reference has a number) counts as infinitely far out."""
    number = json_number(value)
    return math.inf if number is not None and math.isnan(number) else number


def element_ratios(errors: dict[str, Any] | None) -> dict[str, float]:
    """Per output member: the worst element's error / budget."""
    out: dict[str, float] = {}
    for member, figures in ((errors or {}).get("outputs") or {}).items():
        r = _figure(figures.get("ratio")) if isinstance(figures, dict) else None
        if r is not None:
            out[member] = r
    return out


def aggregate_ratios(errors: dict[str, Any] | None) -> dict[str, float]:
    """Per output member: the largest aggregate figure / bound (shift, scale, residual)."""
    out: dict[str, float] = {}
    for member, figures in ((errors or {}).get("outputs") or {}).items():
        agg = figures.get("aggregate") if isinstance(figures, dict) else None
        values = [v for v in map(_figure, (agg or {}).values()) if v is not None]
        if values:
            out[member] = max(values)
    return out


def _message_head(message: str | None) -> str:
    head = (message or "").split(":", 1)[0]
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", head).strip()[:120]


def _strongest(ratios: dict[str, float], prefer: str | None) -> tuple[str, float] | None:
    over = {m: r for m, r in ratios.items() if r > 1.0}
    if not over:
        return None
    member = prefer if prefer in over else max(sorted(over), key=lambda m: over[m])
    return member, over[member]


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
    worst = ((result.errors or {}).get("worst") or {}).get("member")
    for kind, ratios in (
        ("out-of-budget", element_ratios(result.errors)),
        ("systematic", aggregate_ratios(result.errors)),
    ):
        found = _strongest(ratios, worst)
        if found:
            return Signature(kind, found[0], min(found[1], STRENGTH_CAP))
    return Signature("failed", _message_head(result.message))


def same_failure(original: Signature, case: Case, result: CaseResult) -> bool:
    """Does ``result`` show the failure ``original`` describes, at least as clearly?"""
    if result.status != "failed":
        return False
    if original.kind in ("out-of-budget", "systematic"):
        ratios = element_ratios if original.kind == "out-of-budget" else aggregate_ratios
        return ratios(result.errors).get(original.detail, 0.0) >= max(original.strength, 1.0 + 1e-9)
    found = signature(case, result)
    return found is not None and (found.kind, found.detail) == (original.kind, original.detail)
