"""``dmlconform replay CASE_DIR --backend NAME``: re-run one saved failing case alone.

A reproducer directory (written by a run into ``<report>/failures/<case>/``) holds ``desc.yaml``,
``inputs.npz`` and ``case.json``. Replay runs the very same check the suite ran
(``dmlconform.runner.checks.run_case``) on that desc and those inputs, so a fix can be verified
without re-running the suite, in a debugger or on another machine. ``desc.yaml`` is read rather
than the copy inside case.json, so a user can edit it to narrow a failure down.

Exit status: 0 the case passes now, 1 it still fails, 2 the case or backend cannot be used.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dmlconform.cli import add_spec_dir
from dmlconform.runner.options import add_arguments


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "replay",
        help="re-run one saved failing case",
        description="Re-run a failing case saved by a run (failures/<case>/) and print the comparison. "
        "Exit status: 0 passes now, 1 still fails, 2 unusable case or backend.",
    )
    p.add_argument(
        "case_dir", metavar="CASE_DIR", help="a reproducer directory (desc.yaml, inputs.npz, case.json)"
    )
    add_backend_arguments(p)
    add_spec_dir(p)
    p.set_defaults(run=run)


def add_backend_arguments(p: argparse.ArgumentParser) -> None:
    """The options that say which backend re-runs a saved case (replay and shrink), from the one
    table of run options (runner/options.py)."""
    add_arguments(p, "replay")


def _err(message: str) -> int:
    print(f"dmlconform replay: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    import os

    if args.spec_dir:
        os.environ["DMLCONFORM_SPEC_DIR"] = str(Path(args.spec_dir).resolve())
    from dmlconform.runner.backend_loading import open_saved_backend
    from dmlconform.runner.checks import run_case
    from dmlconform.runner.options import given, parse_pairs
    from dmlconform.runner.results import load_case_dir
    from dmlconform.runner.settings import saved_tolerance
    from dmlconform.specification.spec import load_spec

    spec = load_spec()
    case_dir = Path(args.case_dir)
    try:
        case, inputs, meta = load_case_dir(case_dir, spec)
    except ValueError as exc:
        return _err(str(exc))
    try:
        values = given(args, "replay")
        tolerance = saved_tolerance(spec, meta.get("tolerance"), args.tolerance)
        options = parse_pairs(args.backend_option) if args.backend_option else None
        guard, opened = open_saved_backend(meta, args.backend, options, args.isolate, values["timeout"])
        info = opened.info
    except ValueError as exc:
        return _err(str(exc))
    try:
        result = run_case(case, guard, spec, tolerance, inputs=inputs)
    except Exception as exc:
        return _err(f"internal error in dmlconform (not the backend): {type(exc).__name__}: {exc}")
    finally:
        guard.close()
    print(f"case:    {case.id}")
    print(f"backend: {info.name}" + (f" ({info.description})" if info.description else ""))
    if tolerance:
        print("tolerance: " + ", ".join(f"{k}={v}" for k, v in tolerance.pairs().items()))
    if case.kind == "validation":
        print(f"expect:  {case.expected}" + (f" (breaks rule {case.rule})" if case.rule else ""))
    _print_errors(result.errors, "other run" if case.kind == "metamorphic" else "reference")
    if result.info:
        print(f"info:    {json.dumps(result.info, default=str)}")
    if result.status == "passed":
        print("result:  PASSED")
        return 0
    if result.status == "skipped":
        print(f"result:  SKIPPED: {result.message}")
        return 2
    print(f"result:  FAILED: {result.message}")
    if result.traceback:  # the backend raised: the message names one frame, this is all of them
        print(result.traceback)
    return 1


def _f(value: Any, digits: int) -> str:
    return f"{value:.{digits}g}" if isinstance(value, (int, float)) else str(value)


def _print_errors(errors: dict[str, Any] | None, other: str) -> None:
    if not errors:
        return
    for member, o in (errors.get("outputs") or {}).items():
        print(
            f"output:  {member}: max {_f(o.get('max_ulp'), 4)} ULP, max abs error {_f(o.get('max_abs'), 3)}"
        )
    w = errors.get("worst")
    if w:
        print(f"worst:   {w.get('member')} at index {w.get('index')}")
        print(f"  backend    {w.get('backend')!r}")
        print(f"  {other:<10} {w.get('reference')!r}")
        print(f"  error      {_f(w.get('ulp'), 4)} ULP, {_f(w.get('abs'), 3)} absolute")
        budget_abs = w.get("budget_abs")
        print(
            f"  budget     {_f(w.get('budget_ulp'), 4)} ULP"
            + (f", {_f(budget_abs, 3)} absolute" if budget_abs is not None else "")
        )
