"""junit.xml from a run's results: the testsuite properties that say a run is incomplete, and the
whole file for a run whose pytest wrote none.

CI pages read junit.xml, not results.json, and count its tests as a whole run's unless the file
says otherwise. pytest's junitxml writes the file at the session's end; a run stopped before
that (a signal while pytest started or the backend loaded) or whose process died (its watcher
writes the report) has none, and an earlier run's would be read as this one's.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any


def completion_properties(done: dict[str, Any]) -> list[tuple[str, str]]:
    """junit.xml's testsuite properties for an incomplete run (``done``: its completion fields);
    none for a complete one."""
    if done.get("complete", True):
        return []
    out = []
    for key in ("complete", "status", "stop_reason", "collected", "ran"):
        value = done.get(key)
        text = "unknown" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        out.append((f"dmlconform_{key}", text))
    return out


def write_junit(path: Path, done: dict[str, Any], records: list[dict[str, Any]]) -> Path:
    """A junit.xml of ``records`` (results.json's cases) for a run whose pytest wrote none: one
    stopped before its session's end hook, or whose process died (its watcher writes it). The
    test cases as pytest's junitxml would write them (an xfailed case is a skip), and the
    completion's properties."""
    counts = {"error": 0, "failure": 0, "skipped": 0}
    cases = []
    for record in records:
        case = ET.Element(
            "testcase",
            classname=f"dmlconform.{record.get('operator')}",
            name=str(record.get("id") or record.get("nodeid")),
            time=f"{float(record.get('duration_s') or 0):.3f}",
        )
        outcome, message = record.get("outcome"), str(record.get("message") or "")
        tag = {"failed": "failure", "error": "error", "skipped": "skipped", "xfailed": "skipped"}.get(outcome)
        if tag is not None:
            counts[tag] += 1
            ET.SubElement(case, tag, message=message[:1000])
        cases.append(case)
    suite = ET.Element(
        "testsuite",
        name="pytest",
        errors=str(counts["error"]),
        failures=str(counts["failure"]),
        skipped=str(counts["skipped"]),
        tests=str(len(records)),
    )
    properties = completion_properties(done)
    if properties:
        props = ET.SubElement(suite, "properties")
        for name, value in properties:
            ET.SubElement(props, "property", name=name, value=value)
    suite.extend(cases)
    root = ET.Element("testsuites", name="pytest tests")
    root.append(suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?>' + ET.tostring(root, encoding="unicode"), encoding="utf-8"
    )
    return path
