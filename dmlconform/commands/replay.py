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
    """The options that say which backend re-runs a saved case (replay and shrink)."""
    p.add_argument("--backend", metavar="NAME", help="backend to run (default: the one that failed)")
    p.add_argument(
        "--backend-option",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="backend option (repeatable; default: the options saved with the case, for its backend)",
    )
    p.add_argument(
        "--isolate",
        action="store_true",
        help="run the backend in a worker process: a crash or hang fails the call, not the command",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="backend call timeout in seconds (default 60; 0 disables it)",
    )


def open_backend(
    meta: dict[str, Any],
    backend: str | None,
    options: dict[str, str] | None,
    isolate: bool,
    timeout: float,
) -> tuple[Any, Any, str, dict[str, str]]:
    """(guard, BackendInfo, backend name, options) for re-running a saved case: the backend and
    options saved in case.json unless others are given; ValueError with one line."""
    from dmlconform.runner.guard import ProcessGuard, ThreadGuard
    from dmlconform.runner.plugin import load_backend_info

    if timeout < 0:
        raise ValueError("--timeout must not be negative (0 disables it)")
    saved = meta.get("backend") or {}
    name = backend or saved.get("name")
    if not name:
        raise ValueError("no --backend given and case.json names none")
    if options is None:
        options = dict(saved.get("options") or {}) if name == saved.get("name") else {}
    handle, info = load_backend_info(name, options, isolate, timeout)
    guard = handle if isinstance(handle, ProcessGuard) else ThreadGuard(handle, timeout or None)
    return guard, info, name, options


def _err(message: str) -> int:
    print(f"dmlconform replay: error: {message}", file=sys.stderr)
    return 2


def load_case_dir(case_dir: Path, spec: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(Case, inputs, case.json) from a reproducer directory; ValueError with one line."""
    import numpy as np

    from dmlconform.runner.cases import Case
    from dmlconform.specification.desc import DescError, load_desc

    if not case_dir.is_dir():
        raise ValueError(f"{case_dir}: not a directory")
    try:
        meta = json.loads((case_dir / "case.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{case_dir / 'case.json'}: cannot read: {exc}") from None
    raw = meta.get("case")
    if not isinstance(raw, dict):
        raise ValueError(f"{case_dir / 'case.json'}: no 'case' entry (not a dmlconform reproducer)")
    try:
        case = Case.from_dict(raw, spec)
        if (case_dir / "desc.yaml").is_file():
            from dataclasses import replace

            case = replace(case, desc=load_desc(case_dir / "desc.yaml", spec))
    except (DescError, KeyError) as exc:
        raise ValueError(f"{case_dir}: {exc}") from None
    try:
        with np.load(case_dir / "inputs.npz") as npz:
            inputs = {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{case_dir / 'inputs.npz'}: cannot read: {exc}") from None
    return case, inputs, meta


def run(args: argparse.Namespace) -> int:
    import os

    if args.spec_dir:
        os.environ["DMLCONFORM_SPEC_DIR"] = str(Path(args.spec_dir).resolve())
    from dmlconform.runner.checks import run_case
    from dmlconform.runner.plugin import parse_backend_options
    from dmlconform.specification.model import load_spec

    spec = load_spec()
    case_dir = Path(args.case_dir)
    try:
        case, inputs, meta = load_case_dir(case_dir, spec)
    except ValueError as exc:
        return _err(str(exc))
    try:
        options = parse_backend_options(args.backend_option) if args.backend_option is not None else None
        guard, info, _, _ = open_backend(meta, args.backend, options, args.isolate, args.timeout)
    except ValueError as exc:
        return _err(str(exc))
    try:
        result = run_case(case, guard, spec, inputs=inputs, tolerance=meta.get("tolerance") or None)
    except Exception as exc:
        return _err(f"internal error in dmlconform (not the backend): {type(exc).__name__}: {exc}")
    finally:
        guard.close()
    print(f"case:    {case.id}")
    print(f"backend: {info.name}" + (f" ({info.description})" if info.description else ""))
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
