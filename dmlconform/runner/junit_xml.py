"""What the plugin adds to pytest's junit.xml: a classname per operator, and testsuite properties
for an incomplete run.

CI pages read junit.xml, not results.json: they group test cases by classname, and they count
tests as a whole run's unless the file says otherwise. pytest has no public hook for either, so
both go through its junitxml plugin's internals, and a pytest that moved them leaves junit.xml as
pytest writes it (the report says the same).
"""

from __future__ import annotations

from typing import Any

import pytest

from dmlconform.runner.node_ids import case_operator


def junit_classname(config: pytest.Config, report: pytest.TestReport) -> None:
    """junit.xml's classname: ``dmlconform.<OPERATOR>`` (CI pages group test cases by it),
    not the one suite file every case shares. Set before junitxml records the report (it
    keeps attributes already set on the test case)."""
    operator = case_operator(report.nodeid)
    if operator is None:
        return
    try:
        from _pytest.junitxml import xml_key

        xml = config.stash.get(xml_key, None)
    except ImportError:  # pytest moved its junitxml internals: the default classname stays
        return
    if xml is not None:
        xml.node_reporter(report).add_attribute("classname", f"dmlconform.{operator}")


def mark_junit_incomplete(config: pytest.Config, done: dict[str, Any]) -> None:
    """Testsuite properties in junit.xml for an incomplete run (``done``: its completion fields),
    whose test counts a CI page would otherwise show as a whole run's. A complete run's junit.xml
    is left as pytest writes it."""
    if done.get("complete", True):
        return
    try:
        from _pytest.junitxml import xml_key

        xml = config.stash.get(xml_key, None)
    except ImportError:  # pytest moved its junitxml internals: the report says it anyway
        return
    if xml is None:
        return
    for key in ("complete", "status", "stop_reason", "collected", "ran"):
        value = done.get(key)
        xml.add_global_property(
            f"dmlconform_{key}", str(value).lower() if isinstance(value, bool) else str(value)
        )
