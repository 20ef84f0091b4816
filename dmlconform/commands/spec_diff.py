"""``dmlconform spec-diff [OPERATOR...] --from A --to B`` and
``dmlconform spec-diff [OPERATOR...] --from-spec DIR_A [--to-spec DIR_B] [-l FL]``.

The help text is DESCRIPTION below (plain text: argparse shows it as written).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dmlconform.cli import add_spec_dir
from dmlconform.specdiff.compare import level_diff, spec_diff
from dmlconform.specdiff.render import RENDERERS
from dmlconform.specdiff.witness import add_witnesses
from dmlconform.specification.spec import SpecError, UnknownLevel, load_spec

PROG = "dmlconform spec-diff"
DESCRIPTION = (
    "The first form (--from A --to B) answers what changed between feature levels A and B (a reversed "
    "range lists the same changes as removals); the second (--from-spec DIR_A [--to-spec DIR_B]) "
    "compares two spec directories, i.e. two revisions of the docs. --witness adds, per change, a desc "
    "legal on one side and illegal on the other, confirmed by the validator. Exit status: 0, or 1 "
    "with --exit-code when there are differences (as git diff --exit-code); 2 for an unknown operator "
    "or level, or an unusable spec directory."
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "spec-diff",
        help="what changed between two feature levels, or between two spec directories",
        description=DESCRIPTION,
    )
    p.add_argument(
        "operators",
        nargs="*",
        metavar="OPERATOR",
        help="operators to diff (DML_OPERATOR_ prefix optional); default: all",
    )
    p.add_argument(
        "--from",
        dest="from_level",
        metavar="A",
        help="feature level: 4_0, 4.0 or DML_FEATURE_LEVEL_4_0 (default: none; needed without --from-spec)",
    )
    p.add_argument(
        "--to",
        dest="to_level",
        metavar="B",
        help="feature level to compare with (default: none; needed with --from)",
    )
    p.add_argument("--from-spec", metavar="DIR_A", help="compare this spec directory ... (default: none)")
    p.add_argument(
        "--to-spec", metavar="DIR_B", help="... with this one (default: --spec-dir or the bundled spec)"
    )
    p.add_argument(
        "-l",
        "--feature-level",
        dest="level",
        metavar="FL",
        help="with --from-spec: compare at this feature level only (default: every level)",
    )
    # its name before every verb spelled a feature level -l/--feature-level: still taken, not shown
    p.add_argument("--level", dest="level", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument(
        "--format",
        choices=sorted(RENDERERS),
        default="text",
        help=f"output: {', '.join(sorted(RENDERERS))} (default text)",
    )
    p.add_argument(
        "--witness", action="store_true", help="show a desc legal on one side and illegal on the other"
    )
    p.add_argument("--exit-code", action="store_true", help="exit 1 when there are differences")
    add_spec_dir(p)
    p.set_defaults(run=run)


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    spec_mode = bool(args.from_spec or args.to_spec)
    try:
        if spec_mode:
            if args.from_level or args.to_level:
                return _fail("--from/--to compare levels; with --from-spec/--to-spec use --feature-level")
            if not args.from_spec:
                return _fail("--to-spec needs --from-spec")
            spec_a = load_spec(args.from_spec)
            spec_b = load_spec(args.to_spec or args.spec_dir)
            result = spec_diff(
                spec_a,
                spec_b,
                args.level,
                args.operators,
                label_a=args.from_spec,
                label_b=args.to_spec or args.spec_dir or "spec",
            )
        else:
            if args.level:
                return _fail("--feature-level goes with --from-spec; for a level range use --from and --to")
            if not args.from_level or not args.to_level:
                return _fail("give --from A and --to B (feature levels), or --from-spec DIR_A")
            spec = load_spec(args.spec_dir)
            result = level_diff(spec, args.from_level, args.to_level, args.operators)
    except (UnknownLevel, SpecError) as exc:
        return _fail(str(exc))
    except KeyError as exc:
        return _fail(str(exc.args[0]) if exc.args else "unknown operator")
    if args.witness:
        add_witnesses(result)
    sys.stdout.write(RENDERERS[args.format](result))
    return 1 if args.exit_code and result.changed else 0
