"""Known findings in a run: cases whose outcome an expectation explained, labelled by the finding
they belong to.

The page's table of findings, the badges on its failures and the case table's filter share one
label per finding ("F1", "O1": the id the known-findings files give it), so that a reader can go
from a finding to its cases and tell an understood failure from a new one.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from dmlconform.report.classes import case_excused, excused_text
from dmlconform.report.results_reader import CaseRecord, Results

# A known finding's label: its id when the expectation's reason starts with one ("F1: ...",
# "O1: ...", "T2: ..."), else the reason itself, cut to this many characters.
FINDING_ID = re.compile(r"\s*([A-Z][A-Za-z]{0,3}[0-9]+[a-z]?)\s*:")
KNOWN_LABEL_CHARS = 48


def known_reason(case: CaseRecord) -> str | None:
    """Why the case's outcome was expected (the matching expectation's reason), or None. A skipped
    case carries the reason too when an entry names it, but was not judged, so it has none here.
    The one place the report reads it: a record that later says "known finding" another way is
    read here as well."""
    if case.outcome == "skipped" or not case.expectation:
        return None
    return case.expectation


def known_label(reason: str) -> str:
    """The short label of a known finding: the finding id a reason starts with ("O1: ONNX
    Runtime LRN's approximate power" -> "O1"), else the reason, shortened to fit a table cell."""
    match = FINDING_ID.match(reason)
    if match:
        return match.group(1)
    text = " ".join(reason.split())
    return text if len(text) <= KNOWN_LABEL_CHARS else text[: KNOWN_LABEL_CHARS - 1] + "\u2026"


def known_findings(results: Results) -> list[dict[str, Any]]:
    """The known findings the run hit, one entry per label in order of first appearance: its
    distinct reasons, how many cases of each outcome it covered (xfailed: still there;
    xpassed: not seen this time) and what it excused (``excused``: the elements of a per-slice
    finding's slices, or whole cases; empty for a bound)."""
    found: dict[str, dict[str, Any]] = {}
    for case in results.cases:
        reason = known_reason(case)
        if reason is None:
            continue
        label = known_label(reason)
        entry = found.setdefault(label, {"label": label, "reasons": [], "outcomes": Counter(), "raw": []})
        if reason not in entry["reasons"]:
            entry["reasons"].append(reason)
        entry["outcomes"][case.outcome] += 1
        entry["raw"].append(case.raw or {})
    for entry in found.values():  # what its ``fails`` findings excused: slices' elements, or whole cases
        entry["excused"] = excused_text(case_excused(entry.pop("raw")))
    return list(found.values())
