"""Reports from results.json: the self-contained index.html, summary.md for CI job pages, and the
run-to-run diff that CI gates on. The runner writes results.json (docs/results-json.md); everything
here reads only that file, so a report can be regenerated or compared long after the run."""

from __future__ import annotations

from dmlconform.report.diff import CaseChange, Diff, ErrorChange, diff_results
from dmlconform.report.model import CaseRecord, Results, ResultsError, load_results, results_path
from dmlconform.report.render import render_html, render_markdown, write_reports

__all__ = [
    "CaseChange",
    "CaseRecord",
    "Diff",
    "ErrorChange",
    "Results",
    "ResultsError",
    "diff_results",
    "load_results",
    "render_html",
    "render_markdown",
    "results_path",
    "write_reports",
]
