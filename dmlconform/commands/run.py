"""``dmlconform run``: the conformance suite against one backend, as a pytest run.

A wrapper over ``pytest.main`` so that a user needs no pytest knowledge, and so that the run is
the same thing CI gets with ``pytest --dml-backend ...``: the options map one to one onto the
plugin's ``--dml-*`` options, and anything after ``--`` goes to pytest (``-- -n auto`` for
pytest-xdist, ``-- -x`` to stop at the first failure). pytest is pointed at the suite file inside
the package with its own rootdir and ini file, so the run behaves the same from any directory and
does not pick up the current directory's conftest.py or pytest configuration.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from dmlconform.cli import add_spec_dir
from dmlconform.runner.options import SettingsError, add_arguments, check_values, command_line, given
from dmlconform.runner.options import pytest_argv as options_pytest_argv
from dmlconform.runner.stops import EXIT_STATUS, StopTrap

#: pytest's exit statuses this command reads (pytest.ExitCode; pytest itself loads when the run starts)
TESTS_FAILED, INTERRUPTED = 1, 2

#: Where a user goes next from ``run --help``: the expectations files and the broken backends.
EPILOG = (
    "Known findings: each built-in backend's apply by default (dmlconform/known_findings/*.yaml: each "
    "bounds its cases by desc predicates and a tolerance model they must still meet, or says they "
    "fail); --expect FILE adds yours (examples/expect-example.yaml, or the one-glob-per-line "
    "examples/expect-example.txt), --no-known-findings judges without them; docs/running.md "
    "describes the format. To watch the suite catch a bug: --backend "
    "dmlconform.backends.broken:UnbiasedVariance, or any class of dmlconform/backends/broken.py, each "
    "the numpy backend with one bug real implementations have had (its docstring says which cases "
    "expose it). After --, pytest's own options: -- -n auto (parallel), -- -x, -- --lf."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run",
        help="run the conformance suite against a backend",
        description="Run the conformance suite against a backend (a pytest run with the dmlconform plugin) "
        "and write its report. Exit status: 0 nothing failed unexpectedly, 1 something did, 2 usage "
        "error, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM); an interrupted run still writes "
        "the report of the cases that ran.",
        epilog=EPILOG,
    )
    add_arguments(p, "run")  # the run options, declared once in runner/options.py
    p.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="extra pytest arguments after --")
    add_spec_dir(p)
    p.set_defaults(run=run)


def pytest_argv(args: argparse.Namespace, report_dir: Path, command: str) -> list[str]:
    from dmlconform.runner.node_ids import SUITE_DIR, SUITE_FILE
    from dmlconform.runner.plugin import plugin_args

    argv = [
        str(SUITE_FILE),  # also the anchor of pytest's initial conftests: never the current directory's
        "--rootdir",
        str(SUITE_DIR),
        "-c",
        str(SUITE_DIR / "pytest.ini"),
        # --lf / --ff read the last run's failures from here: the directory the run starts in,
        # as pytest's own cache sits in a project (the suite's directory may be read-only)
        "-o",
        f"cache_dir={Path.cwd() / '.pytest_cache'}",
        "-p",  # a conformance run times nothing; pytest-benchmark would warn under -n (xdist)
        "no:benchmark",
        "-p",  # a conformance run has no property tests; that plugin imports hypothesis at its end
        "no:hypothesispytest",
        # the suite's items report through the plugin, not through asserts: rewriting every module
        # of the package (pytest does for a plugin's distribution) cost a second or more a run
        "--assert=plain",
        "--junitxml",
        str(report_dir / "junit.xml"),
        "--dml-command",
        command,
    ]
    argv[0:0] = plugin_args()
    argv += options_pytest_argv(argparse.Namespace(**{**vars(args), "report": str(report_dir)}))
    return argv + suite_arguments(list(args.pytest_args or []))


def suite_arguments(extra: list[str]) -> list[str]:
    """The extra pytest arguments with pasted case ids (``validation[...]``, ``::numeric[...]``,
    ``.../test_conformance.py::...``) pointed at the suite file, so that pytest neither refuses
    them nor takes the current directory for the suite's (its conftest.py). A token right after
    an option that may take a value (``-k EXPR``) is that value and stays as it is; the plugin
    points any the command line leaves at the suite file itself."""
    from dmlconform.runner.node_ids import suite_argument

    out = []
    for i, token in enumerate(extra):
        after_option = i > 0 and extra[i - 1].startswith("-") and "=" not in extra[i - 1]
        out.append(token if after_option else suite_argument(token))
    return out


def run(args: argparse.Namespace) -> int:
    import os

    from dmlconform.runner.report_directory import default_report_dir

    # one trap for the whole command, handed to the plugin, installed first: a Ctrl-C while pytest
    # loads (a quarter of a second) or the backend does stops the run as one while cases run does
    trap = StopTrap()
    trap.install()
    report_dir = Path(args.report).resolve() if args.report else default_report_dir(args.backend)
    command = _reconstruct(args)
    try:
        try:
            if args.spec_dir:
                os.environ["DMLCONFORM_SPEC_DIR"] = str(Path(args.spec_dir).resolve())
            check_values(given(args, "run"))
            import pytest

            code = int(pytest.main(pytest_argv(args, report_dir, command), plugins=[trap]))
        except SettingsError as exc:
            print(f"dmlconform run: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:  # before pytest's session could catch it (pytest starting)
            code = INTERRUPTED
        if trap.cut_short() and trap.completion is None:  # before the plugin's session existed
            from dmlconform.runner.unstarted import write_unstarted_report

            trap.completion = write_unstarted_report(report_dir, args.backend, command, trap)
    finally:
        trap.restore()  # before shrinking, which a Ctrl-C stops as it stops any other command
    if args.shrink and code == TESTS_FAILED and trap.completion:
        _shrink(args, report_dir)
    return _last_line(code, trap, report_dir)


def _last_line(code: int, trap: StopTrap, report_dir: Path) -> int:
    """Print the run's last line and return its exit status, from the completion the plugin
    judged (``trap.completion``): complete, or incomplete and why, in the words of every file."""
    import pytest

    from dmlconform.runner.console import incomplete_line

    done = trap.completion
    if done is None or code == pytest.ExitCode.USAGE_ERROR:
        if code == pytest.ExitCode.USAGE_ERROR:
            return 2  # pytest printed the one-line reason ("ERROR: ...")
        if code == pytest.ExitCode.INTERRUPTED:  # a KeyboardInterrupt no trap saw (not the main thread)
            return 130
        if code == pytest.ExitCode.NO_TESTS_COLLECTED:
            print(
                "dmlconform run: error: no cases selected (check --operators, --dtypes, --feature-level)",
                file=sys.stderr,
            )
        return 2
    written = (report_dir / "results.json").is_file()
    if done["complete"]:
        if written:
            print(f"dmlconform: results in {report_dir}")
        return code if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) else 2
    print(incomplete_line(done) + (f"; report written to {report_dir}" if written else "; no report written"))
    if done["status"] == "interrupted":
        return EXIT_STATUS.get(trap.signal_name or "SIGINT", 130)
    if done["status"] == "error":
        return 2  # dmlconform could not make its cases (pytest says 2 serially, 1 under xdist)
    return code if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) else 2


def _shrink(args: argparse.Namespace, report_dir: Path) -> None:
    from dmlconform.shrink.files import shrink_report

    print(f"dmlconform: shrinking the failures (at most {args.shrink_time:g} s in all)", flush=True)
    shrink_report(
        report_dir,
        max_seconds=args.shrink_time,
        isolate=args.isolate,
        timeout=args.timeout if args.timeout is not None else 60.0,
        log=lambda line: print(line, flush=True),
    )


def _reconstruct(args: argparse.Namespace) -> str:
    """The command line that reproduces this run (results.json, a failure's re-run line)."""
    line = command_line(["dmlconform", "run"], args, "run")
    return f"{line} -- {shlex.join(args.pytest_args)}" if args.pytest_args else line
