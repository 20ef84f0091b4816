"""Rule coverage: per operator, which validation rules the run exercised, from which side (a legal
desc at the rule's edge, an illegal desc breaking it) and whether any of those cases failed.

A rule no case reaches is a gap in the suite, not in the backend; the table shows it as such.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from dmlconform.report.results_reader import Results


@dataclass
class RuleCoverage:
    """One rule's row. ``legal`` is None for a rule no legal desc can sit at the edge of
    (presence and equality rules): only an illegal case exercises those."""

    rule: str
    legal: int | None
    illegal: int
    failed: int

    @property
    def status(self) -> str:
        if self.failed:
            return "failing"
        if not self.legal and not self.illegal:
            return "untested"
        if self.legal is None or (self.legal and self.illegal):
            return "tested"
        return "legal only" if self.legal else "illegal only"


def _count(value: Any) -> int | None:
    return None if value is None else int(value or 0)


def build_coverage(results: Results) -> list[dict[str, Any]]:
    """Rows per operator from results["coverage"]; derived from the cases' "rules" if absent
    (counting the cases that ran, as ``results.coverage`` does)."""
    coverage = results.coverage
    if not coverage:
        derived: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
        for case in results.cases:
            if case.outcome == "skipped":
                continue
            for rule in case.raw.get("rules") or []:
                entry = derived[case.operator].setdefault(str(rule), {"legal": 0, "illegal": 0, "failed": 0})
                side = "illegal" if case.expected == "illegal" and case.rule == rule else "legal"
                entry[side] += 1
                entry["failed"] += int(case.failing)
        coverage = derived
    tables = []
    for op in sorted(coverage):
        rules = coverage[op] if isinstance(coverage[op], dict) else {}
        rows = [
            RuleCoverage(
                rule=str(rule),
                legal=_count((counts or {}).get("legal", 0)),
                illegal=int((counts or {}).get("illegal", 0) or 0),
                failed=int((counts or {}).get("failed", 0) or 0),
            )
            for rule, counts in rules.items()
        ]
        statuses = Counter(r.status for r in rows)
        tables.append(
            {"operator": op, "rows": rows, "statuses": statuses, "covered": len(rows) - statuses["untested"]}
        )
    return tables
