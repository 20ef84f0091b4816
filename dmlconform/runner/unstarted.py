"""The report of a run that a signal stopped before its pytest session existed: while pytest
started, or the backend loaded (torch's import alone takes seconds).

No case was collected and the run's settings may be unknown, so the report is small: the
backend as named on the command line, the command, the cause. It is written all the same, and
the directory's earlier report cleared: a report directory holds one run, and an earlier run's
complete report left there would read as this run's.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from dmlconform import __version__
from dmlconform.report import write_reports
from dmlconform.report.junit_file import write_junit
from dmlconform.report.results_file import write_results_file
from dmlconform.runner.report_directory import clear_earlier_run
from dmlconform.runner.results import SCHEMA_VERSION, completion_fields, summarize
from dmlconform.runner.stops import StopTrap


def unstarted_results(backend: str, command: str, completion: dict[str, Any]) -> dict[str, Any]:
    """results.json of a run stopped before it started (docs/results-json.md): no case, no
    settings beyond those the command line names."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "dmlconform", "version": __version__},
        "backend": {"name": backend, "options": {}, "feature_level": None, "description": ""},
        "feature_level": None,
        "command": command,
        "started": now,
        "finished": now,
        **completion_fields(completion, []),
        "summary": summarize([]),
        "cases": [],
    }


def write_unstarted_report(report_dir: Path, backend: str, command: str, trap: StopTrap) -> dict[str, Any]:
    """results.json, index.html, summary.md and junit.xml of a run ``trap``'s signal stopped
    before it started; returns the completion fields. Best effort: a directory that cannot be
    written leaves the console's line as the only word."""
    completion = {
        "complete": False,
        "status": "interrupted",
        "stop_reason": trap.cause(),
        "exit_status": 2,
        "collected": None,
        "ran": 0,
        "deselected": 0,
    }
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
        clear_earlier_run(report_dir, str(report_dir / "junit.xml"))
        write_results_file(report_dir, unstarted_results(backend, command, completion))
        write_reports(report_dir)
        write_junit(report_dir / "junit.xml", completion, [])
    except (OSError, ValueError):  # the console's line says no report was written
        pass
    return completion
