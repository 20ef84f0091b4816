"""The ``dmlconform`` command. Each verb lives in ``dmlconform/commands/<verb>.py`` with
``register(subparsers)`` and ``run(args) -> int``; this module only dispatches, so verbs can be
added without touching the others. Exit codes: 0 ok, 1 a finding (illegal desc, failed case,
regression), 2 unusable input or usage error. Errors are one line, never a traceback."""

from __future__ import annotations

import argparse
import importlib
import sys

VERBS = (
    "validate", "spec", "generate", "execute", "run", "replay", "shrink", "report", "spec_diff", "dxdispatch",
    "directml",
)  # fmt: skip


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 on usage errors; keep it one line
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dmlconform", description=__doc__.split(".")[0])
    parser.add_argument("--version", action="version", version="dmlconform 0.1.0")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for verb in VERBS:
        try:
            module = importlib.import_module(f"dmlconform.commands.{verb}")
        except ModuleNotFoundError as exc:
            if exc.name == f"dmlconform.commands.{verb}":
                continue  # verb not built yet
            raise
        module.register(sub)
    return parser


def add_spec_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spec-dir", metavar="DIR", default=None, help="use the spec in DIR instead of the bundled one"
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print("dmlconform: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the last line of defence: one line, never a traceback
        from dmlconform.desc import DescError
        from dmlconform.spec import SpecError

        if isinstance(exc, (DescError, SpecError)):
            print(f"dmlconform: error: {exc}", file=sys.stderr)
            return 2
        print(f"dmlconform: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("  (set DMLCONFORM_DEBUG=1 for the traceback)", file=sys.stderr)
        import os

        if os.environ.get("DMLCONFORM_DEBUG"):
            raise
        return 2


if __name__ == "__main__":
    sys.exit(main())
