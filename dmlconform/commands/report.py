"""``dmlconform report``: regenerate a report directory's pages, or compare two runs.

    dmlconform report DIR                 rewrite DIR/index.html and DIR/summary.md from DIR/results.json
    dmlconform report diff OLD NEW        regressions, fixes and error changes between two runs
    dmlconform report merge R1 R2 ... --out R   join the reports of a sharded run (run --shard K/N)
    dmlconform report releases R1 R2 ...  one backend's runs on several releases, release by release

One subparser with a free first positional (rather than nested subparsers) because "report DIR"
must keep working: argparse would read DIR as an unknown sub-command. Exit status: 0 done / no
regression, 1 regressions (diff), 2 unusable input or usage error. ``diff`` and ``merge`` refuse a
report of an incomplete run (interrupted, stopped early) unless given ``--allow-incomplete``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

USAGE = (
    "dmlconform report DIR\n"
    "       dmlconform report diff OLD NEW [--format text|json|markdown] [--factor F] [--allow-incomplete]\n"
    "                                     [--allow-lost]\n"
    "       dmlconform report merge R1 R2 ... --out DIR [--allow-incomplete]\n"
    "       dmlconform report releases R1 R2 ... [--format text|json|markdown] [-o FILE]"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    from dmlconform.cli import add_spec_dir

    parser = subparsers.add_parser(
        "report",
        usage=USAGE,
        help="regenerate index.html and summary.md, diff two runs, or merge a sharded run's reports",
        description=(
            "'report DIR' rewrites DIR/index.html and DIR/summary.md from DIR/results.json. "
            "'report diff OLD NEW' compares two runs (results.json files or report directories): "
            "exit 1 when NEW has regressions (failing cases that passed, were expected failures or "
            "did not exist in OLD) or lost cases (cases of OLD absent or skipped in NEW; "
            "--allow-lost accepts them), 0 otherwise, 2 on unusable input or a report of an "
            "incomplete run (interrupted, stopped early, narrowed by -k or deselection). "
            "'report merge R1 R2 ... --out DIR' joins the reports of 'run --shard K/N' runs into the "
            "report the unsharded run would have written; exit 2 when the reports are from different "
            "settings, a shard is missing or given twice, or a report is incomplete."
        ),
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="DIR | diff OLD NEW | merge R...",
        help="a report directory, 'diff OLD NEW', or 'merge R1 R2 ...'",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="diff and releases output format (default text)",
    )
    parser.add_argument(
        "--factor",
        type=float,
        default=None,
        metavar="F",
        help="diff: report a case whose max ULP error changed by more than F times (default 1.5)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help="diff: write the diff to FILE too (default: standard output only)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="merge: the merged report directory (no default: required by merge)",
    )
    parser.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="diff, merge: accept reports of incomplete runs (a merge of them is marked incomplete)",
    )
    parser.add_argument(
        "--allow-lost",
        action="store_true",
        help="diff: do not fail when cases of OLD have no verdict in NEW (absent or skipped now)",
    )
    add_spec_dir(parser)  # accepted for symmetry with the other verbs; reports need no spec
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dmlconform.report import ResultsError

    paths: list[str] = args.paths
    try:
        if paths[0] == "merge":
            if args.factor is not None or args.format != "text" or args.output or args.allow_lost:
                return _usage("--format, --factor, --output and --allow-lost apply to 'report diff' only")
            if len(paths) < 2:
                return _usage("'report merge' takes the shards' report directories")
            if not args.out:
                return _usage("'report merge' needs --out DIR")
            return _merge(paths[1:], args)
        if args.out:
            return _usage("--out applies to 'report merge' only")
        if paths[0] == "releases":
            if args.factor is not None or args.allow_incomplete:
                return _usage("--factor and --allow-incomplete apply to 'report diff' and 'merge'")
            if len(paths) < 2:
                return _usage("'report releases' takes the runs' report directories")
            return _releases(paths[1:], args)
        if paths[0] == "diff" and len(paths) == 3:
            return _diff(paths[1], paths[2], args)
        if paths[0] == "diff":
            return _usage("'report diff' takes two paths: OLD NEW")
        if len(paths) != 1:
            return _usage("expected one report directory (or 'diff OLD NEW', or 'merge R1 R2 ...')")
        if (
            args.factor is not None
            or args.format != "text"
            or args.output
            or args.allow_incomplete
            or args.allow_lost
        ):
            return _usage(
                "--format, --factor, --output, --allow-incomplete and --allow-lost apply to 'report diff' only"
            )
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
    old, new = load_results(old_path), load_results(new_path)
    for label, results in (("OLD", old), ("NEW", new)):
        reason = results.incomplete_reason()
        if reason is not None and not args.allow_incomplete:
            print(
                f"dmlconform report diff: error: {label} {results.path}: incomplete run, {reason}; "
                "pass --allow-incomplete to compare anyway",
                file=sys.stderr,
            )
            return 2
    diff = diff_results(old, new, factor=factor, allow_lost=args.allow_lost)
    text = {"text": diff.format_text, "json": diff.format_json, "markdown": diff.format_markdown}[
        args.format
    ]()
    if not text.endswith("\n"):
        text += "\n"
    sys.stdout.write(text)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    if diff.lost and not args.allow_lost:
        print(
            f"dmlconform report diff: {diff.lost} case(s) of OLD have no verdict in NEW; "
            "pass --allow-lost if NEW is meant to cover less",
            file=sys.stderr,
        )
    return 1 if diff.fails else 0


def _releases(paths: list[str], args: argparse.Namespace) -> int:
    from dmlconform.report import load_results
    from dmlconform.report.releases import releases_view, render_json, render_markdown, render_text

    view = releases_view([load_results(p) for p in paths])
    render = {"text": render_text, "json": render_json, "markdown": render_markdown}[args.format]
    text = render(view)
    sys.stdout.write(text)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0


def _merge(paths: list[str], args: argparse.Namespace) -> int:
    from dmlconform.report import merge_reports

    merged, written = merge_reports(paths, Path(args.out), allow_incomplete=args.allow_incomplete)
    for path in written:
        print(f"wrote {path}")
    summary = merged["summary"]
    line = (
        f"merged {len(paths)} report(s): {summary['total']} cases: {summary['passed']} passed, "
        f"{summary['failed']} failed, {summary['skipped']} skipped, {summary['xfailed']} xfailed, "
        f"{summary['xpassed']} xpassed, {summary['errors']} errors"
    )
    print(line if merged["complete"] else f"{line} (INCOMPLETE: {merged['stop_reason']})")
    return 0
