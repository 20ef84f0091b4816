"""What the plugin adds to pytest's junit.xml: a classname per operator, and testsuite properties
for an incomplete run (report/junit_file.py writes the file where pytest wrote none).

CI pages read junit.xml, not results.json: they group test cases by classname, and they count
tests as a whole run's unless the file says otherwise. pytest has no public hook for either, so
both go through its junitxml plugin's internals, and a pytest that moved them leaves junit.xml as
pytest writes it (the report says the same).
"""

from __future__ import annotations

from typing import Any

import pytest

from dmlconform.report.junit_file import completion_properties
from dmlconform.runner.node_ids import case_operator


def junit_classname(config: pytest.Config, report: pytest.TestReport) -> None:
    """junit.xml's classname: ``dmlconform.<OPERATOR>`` (CI pages group test cases by it),
    not the one suite file every case shares. Set before junitxml records the report (it
    keeps attributes already set on the test case)."""
    operator = case_operator(report.nodeid)
    if operator is None:
        return
    xml = _log_xml(config)  # None: the default classname stays
    if xml is not None:
        xml.node_reporter(report).add_attribute("classname", f"dmlconform.{operator}")


def _log_xml(config: pytest.Config) -> Any:
    """pytest's junitxml plugin object of this run, or None (no --junitxml, or a pytest that moved
    its internals: junit.xml is then as pytest writes it, and the report says the rest)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:
        return None
    return config.stash.get(xml_key, None)


def mark_junit_incomplete(config: pytest.Config, done: dict[str, Any]) -> None:
    """Testsuite properties in junit.xml for an incomplete run (``done``: its completion fields),
    whose test counts a CI page would otherwise show as a whole run's. A complete run's junit.xml
    is left as pytest writes it. Called again (a signal while the report was written), it
    replaces the properties it set before."""
    xml = _log_xml(config)
    if xml is None:
        return
    kept = getattr(xml, "global_properties", None)
    if isinstance(kept, list):
        kept[:] = [p for p in kept if not str(p[0]).startswith("dmlconform_")]
    for name, value in completion_properties(done):
        xml.add_global_property(name, value)


def rewrite_junit(config: pytest.Config) -> None:
    """Write junit.xml again, with the properties as they are now: junitxml wrote it at the
    session's end, before a signal changed what the run's files must say."""
    xml = _log_xml(config)
    if xml is not None:
        xml.pytest_sessionfinish()
