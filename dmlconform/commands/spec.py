"""``dmlconform spec lint [--spec-dir DIR]`` and ``dmlconform spec show OPERATOR``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dmlconform.cli import add_spec_dir
from dmlconform.spec import SpecError, default_spec_dir, format_source, load_spec, spec_paths


def register(sub: Any) -> None:
    p = sub.add_parser("spec", help="check or show the spec")
    verbs = p.add_subparsers(dest="spec_verb", metavar="lint|rules", required=True)
    lint_p = verbs.add_parser("lint", help="check spec files against the schema and for consistency")
    add_spec_dir(lint_p)
    lint_p.add_argument(
        "--seeds-dir", metavar="DIR", help="seed documents for quote checks (default ../shared/seeds)"
    )
    lint_p.set_defaults(run=run_lint)
    rules_p = verbs.add_parser("rules", help="list an operator's rules with their levels and sources")
    rules_p.add_argument("operator", nargs="?", help="operator name (default: all)")
    add_spec_dir(rules_p)
    rules_p.set_defaults(run=run_rules)


def run_lint(args: argparse.Namespace) -> int:
    from dmlconform.speclint import lint

    spec_dir = Path(args.spec_dir) if args.spec_dir else default_spec_dir()
    try:
        findings = lint(spec_dir, Path(args.seeds_dir) if args.seeds_dir else None)
    except SpecError as exc:
        print(f"dmlconform spec lint: error: {exc}", file=sys.stderr)
        return 2
    for f in findings:
        print(f)
    n_files = len(spec_paths(spec_dir))  # overlays: the files they resolve to
    if findings:
        print(f"{len(findings)} problem(s) in {spec_dir}", file=sys.stderr)
        return 1
    print(f"{spec_dir}: {n_files} spec files OK")
    return 0


def run_rules(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec_dir)
        ops = [spec.operator(args.operator)] if args.operator else list(spec.operators.values())
    except (SpecError, KeyError) as exc:
        print(f"dmlconform spec rules: error: {str(exc).strip(chr(39))}", file=sys.stderr)
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
