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


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run",
        help="run the conformance suite against a backend",
        description="Run the conformance suite against a backend (a pytest run with the dmlconform plugin) "
        "and write its report. Exit status: 0 nothing failed unexpectedly, 1 something did, 2 usage "
        "error, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM); an interrupted run still writes "
        "the report of the cases that ran.",
    )
    p.add_argument(
        "--backend",
        required=True,
        metavar="NAME",
        help=f"a registered backend ({', '.join(_registered())}) or package.module:Class",
    )
    p.add_argument(
        "--backend-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend option (repeatable)",
    )
    p.add_argument(
        "--feature-level", metavar="FL", help="feature level to test up to (default: the backend's)"
    )
    p.add_argument(
        "--operators",
        nargs="+",
        metavar="OP",
        help="operators to test (default: every one available at the level; 'dmlconform spec rules' lists them)",
    )
    p.add_argument(
        "--dtypes",
        nargs="+",
        metavar="TYPE",
        help="data types, e.g. FLOAT32 FLOAT16 (default: every type the support tables list)",
    )
    p.add_argument(
        "--kinds",
        nargs="+",
        metavar="KIND",
        help="item kinds, any of numeric, validation, metamorphic (default: all three; validation "
        "needs a backend that declares validates = True)",
    )
    p.add_argument(
        "--cases", type=int, metavar="N", help="cases per operator x level x data type (default 8)"
    )
    p.add_argument("--seed", type=int, metavar="S", help="generator seed (default 0)")
    p.add_argument(
        "--tier",
        choices=("smoke", "default", "stress"),
        help="size tier: smoke (quick subset), default (the default), stress (long reductions, big tensors)",
    )
    p.add_argument(
        "--max-elements",
        type=int,
        metavar="N",
        help="largest input of a tier's size case, in elements (default: smoke 2^16, default 2^22, stress 2^26)",
    )
    p.add_argument(
        "--expect",
        metavar="FILE",
        help="expected failures file ('<id or glob>  # reason' per line; default: none)",
    )
    p.add_argument("--report", metavar="DIR", help="report directory (default reports/<backend>-<UTC time>/)")
    p.add_argument(
        "--tolerance",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override the spec's tolerance (repeatable), e.g. model=lenient; shown in the report",
    )
    p.add_argument(
        "--isolate",
        action="store_true",
        help="run the backend in a worker process: a crash fails its case, not the run",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="per-call backend timeout in seconds (default 60; 0 disables it)",
    )
    p.add_argument(
        "--shard",
        metavar="K/N",
        help="run shard K of N (a deterministic 1/N of the cases; default: all); join the reports with "
        "'dmlconform report merge'",
    )
    p.add_argument(
        "--shrink",
        action="store_true",
        help="after the run, shrink each failure to a minimal reproducer (failures/<case>/shrunk/)",
    )
    p.add_argument(
        "--shrink-time",
        type=float,
        default=300.0,
        metavar="S",
        help="time for --shrink in all, shared out over the failures (default 300)",
    )
    p.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="extra pytest arguments after --")
    add_spec_dir(p)
    p.set_defaults(run=run)


def _registered() -> list[str]:
    """The registered backend names, for --help (entry points included)."""
    from dmlconform.backends.base import list_backends

    return sorted(list_backends())


def pytest_argv(args: argparse.Namespace, report_dir: Path, command: str) -> list[str]:
    from dmlconform.runner.plugin import SUITE_DIR, SUITE_FILE, plugin_args

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
        "-W",  # the CLI imported the plugin's package already; it has no asserts to rewrite
        "ignore::pytest.PytestAssertRewriteWarning",
        "--dml-backend",
        args.backend,
        "--dml-report",
        str(report_dir),
        "--junitxml",
        str(report_dir / "junit.xml"),
        "--dml-command",
        command,
    ]
    argv[0:0] = plugin_args()
    for kv in args.backend_option:
        argv += ["--dml-backend-option", kv]
    for kv in args.tolerance:
        argv += ["--dml-tolerance", kv]
    if args.feature_level:
        argv += ["--dml-feature-level", args.feature_level]
    if args.operators:
        argv += ["--dml-operators", *args.operators]
    if args.dtypes:
        argv += ["--dml-dtypes", *args.dtypes]
    if args.kinds:
        argv += ["--dml-kinds", *args.kinds]
    if args.cases is not None:
        argv += ["--dml-cases", str(args.cases)]
    if args.seed is not None:
        argv += ["--dml-seed", str(args.seed)]
    if args.tier:
        argv += ["--dml-tier", args.tier]
    if args.max_elements is not None:
        argv += ["--dml-max-elements", str(args.max_elements)]
    if args.expect:
        argv += ["--dml-expect", str(Path(args.expect).resolve())]
    if args.isolate:
        argv += ["--dml-isolate"]
    if args.timeout is not None:
        argv += ["--dml-timeout", str(args.timeout)]
    if getattr(args, "shard", None):
        argv += ["--dml-shard", args.shard]
    return argv + suite_arguments(list(args.pytest_args or []))


def suite_arguments(extra: list[str]) -> list[str]:
    """The extra pytest arguments with pasted case ids (``validation[...]``, ``::numeric[...]``,
    ``.../test_conformance.py::...``) pointed at the suite file, so that pytest neither refuses
    them nor takes the current directory for the suite's (its conftest.py). A token right after
    an option that may take a value (``-k EXPR``) is that value and stays as it is; the plugin
    points any the command line leaves at the suite file itself."""
    from dmlconform.runner.plugin import suite_argument

    out = []
    for i, token in enumerate(extra):
        after_option = i > 0 and extra[i - 1].startswith("-") and "=" not in extra[i - 1]
        out.append(token if after_option else suite_argument(token))
    return out


def run(args: argparse.Namespace) -> int:
    import os

    import pytest

    from dmlconform.runner.plugin import default_report_dir

    if args.spec_dir:
        os.environ["DMLCONFORM_SPEC_DIR"] = str(Path(args.spec_dir).resolve())
    if args.cases is not None and args.cases < 1:
        print("dmlconform run: error: --cases must be at least 1", file=sys.stderr)
        return 2
    if getattr(args, "shard", None):
        from dmlconform.runner.cases import Shard

        try:
            Shard.parse(args.shard)
        except ValueError as exc:
            print(f"dmlconform run: error: {exc}", file=sys.stderr)
            return 2
    if args.max_elements is not None and args.max_elements < 1:
        print("dmlconform run: error: --max-elements must be at least 1", file=sys.stderr)
        return 2
    if args.shrink_time < 0:
        print("dmlconform run: error: --shrink-time must not be negative", file=sys.stderr)
        return 2
    report_dir = Path(args.report).resolve() if args.report else default_report_dir(args.backend)
    command = _reconstruct(args)
    code = pytest.main(pytest_argv(args, report_dir, command))
    code = int(code)
    if code == pytest.ExitCode.USAGE_ERROR:
        return 2  # pytest printed the one-line reason ("ERROR: ...")
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        print(
            "dmlconform run: error: no cases selected (check --operators, --dtypes, --feature-level)",
            file=sys.stderr,
        )
        return 2
    if code == pytest.ExitCode.INTERRUPTED:
        from dmlconform.runner import plugin as pytest_plugin

        if (report_dir / "results.json").is_file():
            print(f"dmlconform: results of the cases that ran (an incomplete run) in {report_dir}")
        return 143 if pytest_plugin.terminated_by == "SIGTERM" else 130  # 128 + the signal
    if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        if (report_dir / "results.json").is_file():
            if args.shrink and code == pytest.ExitCode.TESTS_FAILED:
                _shrink(args, report_dir)
            print(f"dmlconform: results in {report_dir}")
        return code
    return 2


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
    parts = ["dmlconform", "run", "--backend", args.backend]
    for kv in args.backend_option:
        parts += ["--backend-option", kv]
    for kv in args.tolerance:
        parts += ["--tolerance", kv]
    for flag, value in (
        ("--feature-level", args.feature_level),
        ("--cases", args.cases),
        ("--seed", args.seed),
        ("--tier", args.tier),
        ("--max-elements", args.max_elements),
        ("--expect", args.expect),
        ("--timeout", args.timeout),
        ("--shard", getattr(args, "shard", None)),
    ):
        if value is not None:
            parts += [flag, str(value)]
    for flag, values in (("--operators", args.operators), ("--dtypes", args.dtypes), ("--kinds", args.kinds)):
        if values:
            parts += [flag, *values]
    if args.isolate:
        parts.append("--isolate")
    if args.pytest_args:
        parts += ["--", *args.pytest_args]
    return shlex.join(parts)
