"""``dmlconform spec lint [--spec-dir DIR]`` and ``dmlconform spec show OPERATOR``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dmlconform.cli import add_spec_dir
from dmlconform.specification.spec import SpecError, default_spec_dir, format_source, load_spec, spec_paths


def register(sub: Any) -> None:
    p = sub.add_parser(
        "spec",
        help="check or show the spec",
        description="Check the machine-readable spec (lint) or list its rules (rules). Exit status: that "
        "of the action.",
    )
    verbs = p.add_subparsers(dest="spec_verb", metavar="lint|rules", required=True)
    lint_p = verbs.add_parser(
        "lint",
        help="check spec files against the schema and for consistency",
        description="Check the spec files against their JSON Schemas and for consistency: rules naming "
        "unknown members or levels, duplicate ids, support rows out of order, and every quoted sentence "
        "against the seed document it cites (skipped, with a note, where the seeds are not found, as in "
        "an installed package). Findings are printed as file:line:column: message. Exit status: 0 "
        "clean, 1 problems found, 2 the spec or --seeds-dir cannot be read.",
    )
    add_spec_dir(lint_p)
    lint_p.add_argument(
        "--seeds-dir",
        metavar="DIR",
        help="seed documents for the quote checks (default: shared/seeds beside the spec's parent "
        "directory or the current one; none found: quote checks skipped, and said so)",
    )
    lint_p.set_defaults(run=run_lint)
    rules_p = verbs.add_parser(
        "rules",
        help="list an operator's rules with their levels and sources",
        description="List every rule of an operator (or of all) with its kind, level range, whether it "
        "is inferred, and the doc page and section it comes from. Exit status: 0, 2 unknown operator "
        "or unusable spec.",
    )
    rules_p.add_argument("operator", nargs="?", help="operator name (default: all)")
    add_spec_dir(rules_p)
    rules_p.set_defaults(run=run_rules)


def run_lint(args: argparse.Namespace) -> int:
    from dmlconform.specification.lint import default_seeds_dir, lint

    spec_dir = Path(args.spec_dir) if args.spec_dir else default_spec_dir()
    seeds = Path(args.seeds_dir) if args.seeds_dir else default_seeds_dir(spec_dir)
    if args.seeds_dir and not seeds.is_dir():
        print(f"dmlconform spec lint: error: --seeds-dir {seeds}: not a directory", file=sys.stderr)
        return 2
    try:
        findings = lint(spec_dir, seeds)
    except SpecError as exc:
        print(f"dmlconform spec lint: error: {exc}", file=sys.stderr)
        return 2
    if seeds is None:
        # an installed package has the spec but not the doc seeds it quotes: say what was not done
        print(
            "dmlconform spec lint: note: quote checks skipped: the seed documents were not found "
            f"(looked for shared/seeds beside {spec_dir.resolve().parent} and the current directory); "
            "pass --seeds-dir DIR to check every quoted sentence against its seed",
            file=sys.stderr,
        )
    for f in findings:
        print(f)
    n_files = len(spec_paths(spec_dir))  # overlays: the files they resolve to
    if findings:
        print(f"{len(findings)} problem(s) in {spec_dir}", file=sys.stderr)
        return 1
    checked = f"quotes checked against {seeds}" if seeds is not None else "quotes not checked: no seeds"
    print(f"{spec_dir}: {n_files} spec files OK ({checked})")
    return 0


def run_rules(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec_dir)
        ops = [spec.operator(args.operator)] if args.operator else list(spec.operators.values())
    except (SpecError, KeyError) as exc:
        print(f"dmlconform spec rules: error: {exc}", file=sys.stderr)
        return 2
    for op in ops:
        print(f"{op.name} (introduced {op.introduced})")
        for rule in spec.rules_for(op):
            span = ""
            if rule.since or rule.until:
                span = f" [{rule.since or op.introduced}..{rule.until or ''})"
            tag = " (inferred)" if rule.inferred else ""
            print(f"  {rule.id:34} {rule.kind:30}{span}{tag}")
            print(f"  {'':34} {format_source(rule.source)}")
    return 0
