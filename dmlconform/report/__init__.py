"""Reports from results.json: the self-contained index.html, summary.md for CI job pages, the
run-to-run diff that CI gates on, and the merge of a sharded run's reports. The runner writes
results.json (docs/results-json.md); everything here reads only that file (and a merge the shards'
reproducer directories and junit.xml), so a report can be regenerated, compared or merged long
after the run."""

from __future__ import annotations

from dmlconform.report.diff import CaseChange, Diff, ErrorChange, diff_results
from dmlconform.report.merge import MergeError, merge_reports
from dmlconform.report.pages import render_html, render_markdown, write_reports
from dmlconform.report.results_reader import CaseRecord, Results, ResultsError, load_results, results_path

__all__ = [
    "CaseChange",
    "CaseRecord",
    "Diff",
    "ErrorChange",
    "MergeError",
    "Results",
    "ResultsError",
    "diff_results",
    "load_results",
    "merge_reports",
    "render_html",
    "render_markdown",
    "results_path",
    "write_reports",
]
