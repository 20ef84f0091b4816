"""``dmlconform generate OPERATOR --feature-level FL [--illegal] [--count N] [--seed S]
[--with-data] [--regime R] --out DIR``.

Writes ``count`` desc files (YAML) made by the seeded generators, so a run is reproducible from
its command line. An illegal desc's file starts with ``# expect: illegal rule=<id>`` and carries
the rule id in its name; a legal one starts with ``# expect: legal``. With ``--with-data`` each
desc also gets ``<name>.npz`` (one array per input member, in the member's data type and logical
shape) for the regime given, or else the first applicable of each desc's regimes in rotation.
Exit 0 on success, 2 on unusable input (unknown operator, level or regime).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmlconform.cli import add_spec_dir
from dmlconform.runner.directories import directory_problem
from dmlconform.specification.spec import FeatureLevel, Operator, Spec, SpecError, UnknownLevel, load_spec

if TYPE_CHECKING:  # the generators load when the verb runs, not when the parsers are built
    from dmlconform.specification.desc import OperatorDesc

#: a desc to write: (desc, the first line of its file, its file name without extension)
_Item = tuple["OperatorDesc", str, str]


def register(sub: Any) -> None:
    from dmlconform.generation.data import REGIMES

    p = sub.add_parser(
        "generate",
        help="write generated legal or illegal desc files (and inputs)",
        description="Write desc files made by the seeded generators (the same command line writes the "
        "same files): legal descs built from the support tables and rules, or with --illegal descs "
        "that each break exactly one rule (named in the file name and its first line), or with --edges "
        "the whole edge corpus: every legal desc at the edge of a rule (a range's end, the least and "
        "largest alignment and buffer, unusual strides, NaN and infinite scalars, 2^32 - 1 elements) "
        "made from --count legal descs per data type. Exit status: "
        "0 written, 2 unusable input (unknown operator, level or regime, an --out that is a file or "
        "cannot be written).",
    )
    p.add_argument("operator", metavar="OPERATOR", help="e.g. MEAN_VARIANCE_NORMALIZATION1")
    p.add_argument(
        "-l", "--feature-level", required=True, metavar="FL", help="e.g. 5_2 or DML_FEATURE_LEVEL_5_2"
    )
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--illegal", action="store_true", help="descs that break exactly one rule each")
    kind.add_argument(
        "--edges",
        action="store_true",
        help="the edge corpus: legal descs at each rule's edge (--count bases)",
    )
    p.add_argument(
        "--count",
        "-n",
        type=int,
        default=None,
        metavar="N",
        help="how many descs (default 20); with --edges, legal descs per data type to take edges of (default 1)",
    )
    p.add_argument("--seed", type=int, default=0, metavar="S", help="generator seed (default 0)")
    p.add_argument("--with-data", action="store_true", help="also write inputs as <name>.npz (legal descs)")
    p.add_argument(
        "--regime",
        metavar="R",
        default=None,
        help="input regime for --with-data, one of " + ", ".join(REGIMES) + " (default: each desc's "
        "applicable regimes in rotation)",
    )
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="directory to write (created if absent)")
    add_spec_dir(p)
    p.set_defaults(run=run)


def _slug(rule: str) -> str:
    """A rule id (or ``member:Epsilon``) as a file-name part."""
    return rule.replace(":", "-")


def _error(message: str) -> int:
    print(f"dmlconform generate: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from dmlconform.generation import data

    try:
        spec = load_spec(args.spec_dir)
        level = spec.level(args.feature_level)
        op = spec.operator(args.operator)
    except (SpecError, UnknownLevel) as exc:
        return _error(str(exc))
    except KeyError as exc:
        return _error(str(exc.args[0]) if exc.args else str(exc))
    if args.count is None:
        args.count = 1 if args.edges else 20
    problem = _unusable_options(args, data.REGIMES)
    if problem:
        return _error(problem)
    out = Path(args.out)
    problem = directory_problem(out, "--out")
    if problem:
        return _error(problem)
    written, inputs = _write(args, _descs(args, op, level, spec), out, spec)
    kind = "illegal" if args.illegal else "edge" if args.edges else "legal"
    extra = f" and {inputs} input files" if args.with_data else ""
    if args.illegal and written == 0 and args.count:
        print(f"no rule of {op.name} can be broken alone at {level.name}", file=sys.stderr)
    if not args.illegal and written == 0 and args.count:
        print(f"{op.name} is not available at {level.name} (introduced in {op.introduced})", file=sys.stderr)
    print(f"wrote {written} {kind} {op.name} descs at {level.name}{extra} to {out}")
    return 0


def _unusable_options(args: argparse.Namespace, regimes: Iterable[str]) -> str | None:
    """Why the options cannot be used together (None: they can), checked before anything is written."""
    if args.count < 0:
        return "--count must be >= 0"
    if args.regime is not None and args.regime not in regimes:
        return f"unknown regime {args.regime!r} (known: {', '.join(regimes)})"
    if (args.illegal or args.edges) and args.with_data:
        return "--with-data applies to legal descs only (not to --illegal or --edges)"
    return None


def _descs(args: argparse.Namespace, op: Operator, level: FeatureLevel, spec: Spec) -> Iterator[_Item]:
    """(desc, first line of its file, file name stem) of each desc to write, in seed order."""
    from dmlconform.generation.illegal import illegal_descs
    from dmlconform.generation.legal import legal_descs

    stem = op.name.lower()
    if args.illegal:
        return (
            (d, f"# expect: illegal rule={rule}\n", f"{stem}_{level.name}_{i:04d}_illegal_{rule}")
            for i, (d, rule) in enumerate(illegal_descs(op.name, level, args.seed, args.count, spec=spec))
        )
    if args.edges:
        from dmlconform.generation.edges import edge_corpus

        return (
            (
                e.desc,
                f"# expect: legal edge={e.rule}: {e.label}\n",
                f"{stem}_{level.name}_{i:04d}_edge_{_slug(e.rule)}",
            )
            for i, e in enumerate(edge_corpus(op.name, level, spec, args.seed, max(args.count, 1)))
        )
    return (
        (d, "# expect: legal\n", f"{stem}_{level.name}_{i:04d}_legal")
        for i, d in enumerate(legal_descs(op.name, level, args.seed, args.count, spec=spec))
    )


def _write(args: argparse.Namespace, items: Iterator[_Item], out: Path, spec: Spec) -> tuple[int, int]:
    """Write each desc file (and with --with-data its inputs); return how many of each."""
    from dmlconform.generation import data

    written = inputs = 0
    for i, (desc, header, name) in enumerate(items):
        (out / f"{name}.yaml").write_text(header + desc.to_yaml(), encoding="utf-8")
        written += 1
        if args.with_data:
            import numpy as np

            applicable = data.regimes_for(desc, spec)
            regime = args.regime if args.regime is not None else applicable[i % len(applicable)]
            if regime not in applicable:
                continue
            np.savez(out / f"{name}.npz", **data.make_inputs(desc, regime, args.seed, spec=spec))
            inputs += 1
    return written, inputs
