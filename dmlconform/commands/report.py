"""``dmlconform report``: regenerate a report directory's pages, or compare two runs.

    dmlconform report DIR                 rewrite DIR/index.html and DIR/summary.md from DIR/results.json
    dmlconform report diff OLD NEW        regressions, fixes and error changes between two runs

One subparser with a free first positional (rather than nested subparsers) because "report DIR"
must keep working: argparse would read DIR as an unknown sub-command. Exit status: 0 done / no
regression, 1 regressions (diff), 2 unusable input or usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

USAGE = (
    "dmlconform report DIR\n       dmlconform report diff OLD NEW [--format text|json|markdown] [--factor F]"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    from dmlconform.cli import add_spec_dir

    parser = subparsers.add_parser(
        "report",
        usage=USAGE,
        help="regenerate index.html and summary.md, or diff two runs",
        description=(
            "'report DIR' rewrites DIR/index.html and DIR/summary.md from DIR/results.json. "
            "'report diff OLD NEW' compares two runs (results.json files or report directories): "
            "exit 1 when NEW has regressions (failing cases that passed, were expected failures or "
            "did not exist in OLD), 0 otherwise, 2 on unusable input."
        ),
    )
    parser.add_argument(
        "paths", nargs="+", metavar="DIR | diff OLD NEW", help="a report directory, or 'diff OLD NEW'"
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="diff output format (default text)",
    )
    parser.add_argument(
        "--factor",
        type=float,
        default=None,
        metavar="F",
        help="diff: report a case whose max ULP error changed by more than F times (default 1.5)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", default=None, help="diff: write the diff to FILE too"
    )
    add_spec_dir(parser)  # accepted for symmetry with the other verbs; reports need no spec
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dmlconform.report import ResultsError

    paths: list[str] = args.paths
    try:
        if paths[0] == "diff" and len(paths) == 3:
            return _diff(paths[1], paths[2], args)
        if paths[0] == "diff":
            return _usage("'report diff' takes two paths: OLD NEW")
        if len(paths) != 1:
            return _usage("expected one report directory (or 'diff OLD NEW')")
        if args.factor is not None or args.format != "text" or args.output:
            return _usage("--format, --factor and --output apply to 'report diff' only")
        return _regenerate(Path(paths[0]))
    except ResultsError as exc:
        print(f"dmlconform report: error: {exc}", file=sys.stderr)
        return 2


def _usage(message: str) -> int:
    print(f"dmlconform report: error: {message}\nusage: {USAGE}", file=sys.stderr)
    return 2


def _regenerate(report_dir: Path) -> int:
    from dmlconform.report import write_reports

    if report_dir.is_file() and report_dir.name == "results.json":
        report_dir = report_dir.parent
    if not report_dir.is_dir():
        print(f"dmlconform report: error: {report_dir}: not a report directory", file=sys.stderr)
        return 2
    for path in write_reports(report_dir):
        print(f"wrote {path}")
    return 0


def _diff(old_path: str, new_path: str, args: argparse.Namespace) -> int:
    from dmlconform.report import diff_results, load_results
    from dmlconform.report.diff import DEFAULT_FACTOR

    factor = DEFAULT_FACTOR if args.factor is None else args.factor
    if not factor > 1:
        return _usage("--factor must be greater than 1")
    diff = diff_results(load_results(old_path), load_results(new_path), factor=factor)
    text = {"text": diff.format_text, "json": diff.format_json, "markdown": diff.format_markdown}[
        args.format
    ]()
    if not text.endswith("\n"):
        text += "\n"
    sys.stdout.write(text)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    return 1 if diff.has_regressions else 0
