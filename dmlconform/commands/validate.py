"""``dmlconform validate FILE... --feature-level FL [--format text|json]``.

Exit 0 when every file is legal, 1 when any is illegal, 2 when any cannot be used (unreadable,
malformed, unknown operator/member/type) or the level is unknown. Unusable files are reported
and the others still validated: one bad file should not hide the verdicts on the rest.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dmlconform.cli import add_spec_dir
from dmlconform.specification.desc import DescError, load_desc
from dmlconform.specification.spec import SpecError, UnknownLevel, load_spec
from dmlconform.specification.validate import validate

DESC_SUFFIXES = (".yaml", ".yml", ".json")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "validate",
        help="check desc files against the spec at a feature level",
        description="Check desc files (DxDispatch-shaped YAML or JSON) against the spec at a feature level "
        "and name every rule each one breaks, with its source. Exit status: 0 every file legal, 1 any "
        "illegal, 2 any unusable (unreadable, malformed, unknown operator, member, data type or level; "
        "the other files are still judged).",
    )
    p.add_argument(
        "files", nargs="+", metavar="FILE", help="desc files (YAML or JSON) or directories of them"
    )
    p.add_argument(
        "-l", "--feature-level", required=True, metavar="FL", help="e.g. 5_2, 5.2 or DML_FEATURE_LEVEL_5_2"
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default), or json: one object per file, "
        '{"file", "operator", "feature_level", "legal", "violations": [{"rule", "member", "message", "source"}]}',
    )
    add_spec_dir(p)
    p.set_defaults(run=run)


def expand(paths: list[str]) -> list[Path]:
    """Files as given; directories expand to their desc files, sorted, recursively."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.suffix in DESC_SUFFIXES and f.is_file()))
        else:
            out.append(p)
    return out


def run(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec_dir)
        level = spec.level(args.feature_level)
    except (SpecError, UnknownLevel) as exc:
        print(f"dmlconform validate: error: {exc}", file=sys.stderr)
        return 2
    results: list[dict[str, Any]] = []
    status = 0
    for path in expand(args.files):
        entry: dict[str, Any] = {"file": str(path), "operator": None, "feature_level": level.name}
        try:
            desc = load_desc(path, spec)
        except DescError as exc:
            entry.update(legal=None, violations=[], error=exc.one_line())
            results.append(entry)
            status = 2
            continue
        violations = validate(desc, level, spec)
        entry.update(
            operator=desc.operator, legal=not violations, violations=[v.to_dict() for v in violations]
        )
        results.append(entry)
        if violations and status == 0:
            status = 1
    if not results:
        print("dmlconform validate: error: no desc files found", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(results, indent=2))
    else:
        for entry in results:
            print_text(entry)
    return status


def print_text(entry: dict[str, Any]) -> None:
    if entry.get("error"):
        print(f"{entry['error']}", file=sys.stderr)
        return
    n = len(entry["violations"])
    verdict = "legal" if entry["legal"] else f"illegal ({n} violation{'' if n == 1 else 's'})"
    print(f"{entry['file']}: {entry['operator']} at {entry['feature_level']}: {verdict}")
    for v in entry["violations"]:
        print(f"  [{v['rule']}] {v['member']}: {v['message']}")
        print(f"      source: {v['source']}")
