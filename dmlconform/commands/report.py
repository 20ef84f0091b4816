"""``dmlconform report ACTION``: regenerate a report directory's pages, or compare or join runs.

    dmlconform report render DIR          rewrite DIR/index.html and DIR/summary.md from DIR/results.json
    dmlconform report DIR                 the same (render is the action a bare directory means)
    dmlconform report diff OLD NEW        regressions, fixes and error changes between two runs
    dmlconform report merge R1 R2 ... -o R   join the reports of a sharded run (run --shard K/N)
    dmlconform report releases R1 R2 ...  one backend's runs on several releases, release by release

Sub-commands like the other verbs' actions, each with its own help and options; ``report DIR``
keeps working because the parser reads an argument list that names no action as ``render``
(``cli._Parser.implicit_action``). Exit status: 0 done / no regression, 1 regressions (diff), 2
unusable input or usage error. ``diff`` and ``merge`` refuse a report of an incomplete run
(interrupted, stopped early) unless given ``--allow-incomplete``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

Action = Callable[[argparse.Namespace], int]

FORMATS = ("text", "json", "markdown")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="regenerate a report's pages, diff two runs, merge a sharded run, or compare releases",
        description="Regenerate a report directory's pages (render; 'report DIR' is short for "
        "'report render DIR'), compare two runs (diff), join the reports of a sharded run (merge) or "
        "put one backend's runs on several releases side by side (releases). 'dmlconform report "
        "ACTION --help' for each. Exit status: that of the action.",
    )
    parser.implicit_action = "render"  # type: ignore[attr-defined]  # report DIR = report render DIR
    actions = parser.add_subparsers(dest="report_verb", metavar="ACTION", required=True)
    _render(actions)
    _diff_parser(actions)
    _merge_parser(actions)
    _releases_parser(actions)


def _common(p: argparse.ArgumentParser) -> None:
    from dmlconform.cli import add_spec_dir

    add_spec_dir(p)  # accepted for symmetry with the other verbs; reports need no spec


def _out(p: argparse.ArgumentParser, help: str, metavar: str = "FILE") -> None:
    """``-o/--out``, the output option of every verb; ``--output`` (diff's spelling before) hidden."""
    p.add_argument("-o", "--out", metavar=metavar, default=None, help=help)
    p.add_argument("--output", dest="out", metavar=metavar, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")


def _render(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser(
        "render",
        help="rewrite DIR/index.html and DIR/summary.md from DIR/results.json (also: report DIR)",
        description="Rewrite DIR/index.html and DIR/summary.md from DIR/results.json (after editing it, "
        "or with a newer dmlconform); 'dmlconform report DIR' does the same. Exit status: 0 written, "
        "2 not a report directory.",
    )
    p.add_argument("dir", metavar="DIR", help="a report directory (or its results.json)")
    _common(p)
    p.set_defaults(run=lambda args: _regenerate(Path(args.dir)))  # the same call as before: a path


def _diff_parser(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser(
        "diff",
        help="regressions, fixes and error changes between two runs",
        description="Compare two runs (results.json files or report directories). Exit status: 1 when "
        "NEW has regressions (failing cases that passed, were expected failures or did not exist in OLD) "
        "or lost cases (cases of OLD absent or skipped in NEW; --allow-lost accepts them), 0 otherwise, "
        "2 on unusable input or a report of an incomplete run (interrupted, stopped early, narrowed by "
        "-k or deselection).",
    )
    p.add_argument("old", metavar="OLD", help="the earlier run: a report directory or its results.json")
    p.add_argument("new", metavar="NEW", help="the later run: a report directory or its results.json")
    _format(p)
    p.add_argument(
        "--factor",
        type=float,
        default=None,
        metavar="F",
        help="report a case whose max ULP error changed by more than F times (default 1.5)",
    )
    _out(p, "write the diff to FILE too (default: standard output only)")
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="compare reports of incomplete runs too (default: refuse them)",
    )
    p.add_argument(
        "--allow-lost",
        action="store_true",
        help="do not fail when cases of OLD have no verdict in NEW (absent or skipped now; default: fail)",
    )
    _common(p)
    p.set_defaults(run=_guarded(_diff))


def _merge_parser(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser(
        "merge",
        help="join the reports of a sharded run (run --shard K/N)",
        description="Join the reports of 'run --shard K/N' runs into the report the unsharded run would "
        "have written. Exit status: 0 written, 2 when the reports are from different settings, a shard is "
        "missing or given twice, or a report is incomplete (without --allow-incomplete).",
    )
    p.add_argument("reports", nargs="+", metavar="R", help="the shards' report directories")
    # checked by the action, not by argparse: main() returns 2 for it rather than exiting
    p.add_argument("-o", "--out", metavar="DIR", help="the merged report directory (no default: required)")
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="merge reports of incomplete runs too; the merged report is marked incomplete (default: refuse)",
    )
    _common(p)
    p.set_defaults(run=_guarded(_merge))


def _releases_parser(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser(
        "releases",
        help="one backend's runs on several releases, release by release",
        description="Put one backend's runs on several releases (report directories, e.g. a sweep's "
        "runs/*) side by side, release by release. Exit status: 0 printed, 2 unusable reports (or "
        "two of the same release).",
    )
    p.add_argument("reports", nargs="+", metavar="R", help="the runs' report directories")
    _format(p)
    _out(p, "write the view to FILE too (default: standard output only)")
    _common(p)
    p.set_defaults(run=_guarded(_releases))


def _guarded(action: Action) -> Action:
    """``action`` with an unusable report (ResultsError) as one line and exit 2."""

    def run(args: argparse.Namespace) -> int:
        from dmlconform.report import ResultsError

        try:
            return action(args)
        except ResultsError as exc:
            print(f"dmlconform report {args.report_verb}: error: {exc}", file=sys.stderr)
            return 2

    return run


def _usage(message: str, action: str) -> int:
    print(f"dmlconform report {action}: error: {message}", file=sys.stderr)
    return 2


def _regenerate(report_dir: Path) -> int:
    from dmlconform.report import ResultsError, write_reports

    if report_dir.is_file() and report_dir.name == "results.json":
        report_dir = report_dir.parent
    if not report_dir.is_dir():
        return _usage(f"{report_dir}: not a report directory", "render")
    try:
        written = write_reports(report_dir)
    except ResultsError as exc:
        return _usage(str(exc), "render")
    for path in written:
        print(f"wrote {path}")
    return 0


def _diff(args: argparse.Namespace) -> int:
    from dmlconform.report import diff_results, load_results
    from dmlconform.report.diff import DEFAULT_FACTOR

    factor = DEFAULT_FACTOR if args.factor is None else args.factor
    if not factor > 1:
        return _usage("--factor must be greater than 1", "diff")
    old, new = load_results(args.old), load_results(args.new)
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
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if diff.lost and not args.allow_lost:
        print(
            f"dmlconform report diff: {diff.lost} case(s) of OLD have no verdict in NEW; "
            "pass --allow-lost if NEW is meant to cover less",
            file=sys.stderr,
        )
    return 1 if diff.fails else 0


def _releases(args: argparse.Namespace) -> int:
    from dmlconform.report import load_results
    from dmlconform.report.releases import releases_view, render_json, render_markdown, render_text

    view = releases_view([load_results(p) for p in args.reports])
    render = {"text": render_text, "json": render_json, "markdown": render_markdown}[args.format]
    text = render(view)
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


def _merge(args: argparse.Namespace) -> int:
    from dmlconform.report import merge_reports

    paths = args.reports
    if not args.out:
        return _usage("merge needs -o/--out DIR (the merged report directory)", "merge")
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
