"""``dmlconform shrink FAILURE_DIR``: the smallest case that still fails the same way.

Reads a reproducer (``failures/<case>/`` of a run), searches for a smaller desc and simpler data
that fail with the same signature on the same backend (see ``dmlconform.shrink``), and writes
the result as a reproducer of its own (``--out``, default ``FAILURE_DIR/shrunk``) that
``dmlconform replay`` runs. Its desc.yaml starts with comments saying what was removed.

Exit status: 0 a reproducer was written (smaller, or the original when nothing smaller fails),
1 the case does not fail on this backend, 2 unusable reproducer or backend.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmlconform.cli import add_spec_dir
from dmlconform.commands.replay import add_backend_arguments
from dmlconform.runner.directories import directory_problem

if TYPE_CHECKING:  # the search loads when the verb runs, not when the parsers are built
    from dmlconform.shrink.search import Shrunk


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "shrink",
        help="shrink a failing case to a minimal reproducer",
        description="Shrink a failing case saved by a run (failures/<case>/) to the smallest desc and data "
        "that fail the same way. Exit status: 0 written, 1 the case does not fail, 2 unusable input.",
    )
    p.add_argument(
        "case_dir", metavar="FAILURE_DIR", help="a reproducer directory (desc.yaml, inputs.npz, case.json)"
    )
    p.add_argument(
        "-o", "--out", metavar="DIR", help="where to write the shrunk reproducer (default FAILURE_DIR/shrunk)"
    )
    add_backend_arguments(p)
    p.add_argument(
        "--shrink-time",
        type=float,
        default=60.0,
        metavar="S",
        help="stop after S seconds with the smallest case so far (default 60; run --shrink's is the same "
        "option, for all its failures)",
    )
    # the option's name before it was run --shrink-time's too: still taken, not shown
    p.add_argument(
        "--max-time", dest="shrink_time", type=float, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_spec_dir(p)
    p.set_defaults(run=run)


def _err(message: str) -> int:
    print(f"dmlconform shrink: error: {message}", file=sys.stderr)
    return 2


def _remove_if_empty(out: Path, created: bool) -> None:
    """Leave no empty --out behind when nothing was written into the directory made for it."""
    if created:
        with contextlib.suppress(OSError):
            out.rmdir()


def run(args: argparse.Namespace) -> int:
    import os

    if args.spec_dir:
        os.environ["DMLCONFORM_SPEC_DIR"] = str(Path(args.spec_dir).resolve())
    from dmlconform.runner.options import given, parse_pairs
    from dmlconform.shrink.files import shrink_dir
    from dmlconform.shrink.search import NotFailing

    if args.shrink_time < 0:
        return _err("--shrink-time must not be negative")
    case_dir = Path(args.case_dir)
    out = Path(args.out) if args.out else case_dir / "shrunk"
    if out.resolve() == case_dir.resolve():
        return _err("--out must not be FAILURE_DIR itself (the original stays as it was)")
    created = not out.exists()
    problem = directory_problem(out, "--out")  # before the search: its result must have a place
    if problem:
        return _err(problem)
    try:
        options = parse_pairs(args.backend_option) if args.backend_option else None
        progress = None if args.quiet else (lambda line: print(f"  {line}", file=sys.stderr, flush=True))
        found, backend, record = shrink_dir(
            case_dir,
            out,
            backend=args.backend,
            options=options,
            isolate=args.isolate,
            timeout=given(args, "replay")["timeout"],
            max_seconds=args.shrink_time,
            progress=progress,
            tolerance_overrides=args.tolerance,
        )
    except ValueError as exc:
        _remove_if_empty(out, created)
        return _err(str(exc))
    except NotFailing as exc:
        _remove_if_empty(out, created)
        print(f"dmlconform shrink: {exc}; nothing to shrink", file=sys.stderr)
        return 1
    _print_result(found, backend, record, out)
    return 0


def _print_result(found: Shrunk, backend: str, record: dict[str, Any], out: Path) -> None:
    """What the search found: the failure, the sizes before and after, each step, and where the
    reproducer is."""
    (e0, d0), (e1, d1) = found.original_size, found.size
    print(f"case:     {found.case.id}")
    print(f"backend:  {backend}")
    print(f"failure:  {found.signature}")
    print(f"original: {e0} elements, {d0} dims")
    print(f"shrunk:   {e1} elements, {d1} dims ({len(found.steps)} steps, {found.tried} candidates run)")
    for step in found.steps:
        print(f"  {step}")
    print(f"time:     {found.seconds:.1f} s ({found.stopped})")
    print(f"written:  {out}")
    print(f"replay:   {record.get('replay') or ''}")
