"""The ``dmlconform`` command. Each verb lives in ``dmlconform/commands/<verb>.py`` with
``register(subparsers)`` and ``run(args) -> int``; this module only dispatches, so verbs can be
added without touching the others. Exit codes: 0 ok, 1 a finding (illegal desc, failed case,
regression), 2 unusable input or usage error, 130 Ctrl-C, and run's 143 for SIGTERM
(:data:`EXIT_STATUS`). Errors are one line, never a traceback."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

VERBS = (
    "validate", "spec", "generate", "execute", "run", "replay", "shrink", "report", "implementations",
    "spec_diff", "dxdispatch", "directml",
)  # fmt: skip


#: What each verb's exit status means besides 0 (done) and 2 (unusable input or a usage error, one
#: line on stderr); every verb exits 130 on Ctrl-C. The top-level help prints it; a verb added to
#: VERBS needs its line here (tests/test_cli_help.py checks).
EXIT_STATUS = {
    "validate": "1 a desc is illegal",
    "spec": "lint: 1 problems found",
    "generate": "only 0 or 2",
    "execute": "only 0 or 2",
    "run": "1 a case failed (and no expectation said it would); 143 terminated (SIGTERM)",
    "replay": "1 the case still fails",
    "shrink": "1 the case does not fail on this backend",
    "report": "diff: 1 regressions or lost cases",
    "implementations": "1 a run did not finish",
    "spec_diff": "with --exit-code: 1 there are differences",
    "dxdispatch": "check: 1 a case failed or errored",
    "directml": "setup, info: 1 the self-test failed",
}


def exit_status_help() -> str:
    """The top-level help's table of exit statuses, verb by verb."""
    lines = [
        "exit status: 0 done, 2 unusable input or a usage error (one line on stderr), 130 interrupted",
        "(Ctrl-C), for every verb; besides:",
    ]
    width = max(len(v) for v in EXIT_STATUS) + 2
    lines += [f"  {verb.replace('_', '-'):<{width}}{text}" for verb, text in EXIT_STATUS.items()]
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    #: The action an argument list that names none means: ``report DIR`` is ``report render DIR``.
    #: A verb grown into actions keeps its older form working without a parser of its own.
    implicit_action: str | None = None

    def error(self, message: str) -> None:  # argparse exits 2 on usage errors; keep it one line
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if self.implicit_action is not None and args is not None:
            args = self._with_action(list(args))
        return super().parse_known_args(args, namespace)

    def _with_action(self, args: list[str]) -> list[str]:
        """``args`` with :attr:`implicit_action` put first when they start with no action and no
        option (``-h`` still asks for this parser's help)."""
        actions = next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        if not actions or not args or args[0] in actions or args[0].startswith("-"):
            return args
        return [str(self.implicit_action), *args]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dmlconform",
        description="A conformance suite and spec-driven validator for DirectML's normalization operators. "
        "'dmlconform VERB --help' for each verb.",
        epilog=exit_status_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the epilog is a table
    )
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
        "--spec-dir",
        metavar="DIR",
        default=None,
        help="use the spec in DIR (default: the bundled spec, or $DMLCONFORM_SPEC_DIR)",
    )


def prog(args: argparse.Namespace) -> str:
    """``dmlconform VERB [ACTION]`` of a parsed command line: the prefix of its error lines."""
    parts = ["dmlconform"]
    verb = getattr(args, "verb", None)
    if verb:
        parts.append(verb.replace("_", "-"))
        action = getattr(args, f"{verb}_verb", None)
        if isinstance(action, str):
            parts.append(action)
    return " ".join(parts)


def os_error_line(exc: OSError) -> str:
    """An OSError as one line: the file and the system's reason (``out: File exists``)."""
    where = exc.filename if exc.filename is not None else None
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{where}: {reason}" if where is not None else reason


#: the destinations of the options and arguments that name a file or directory, as a message
#: names them: an empty value (``--report "$DIR"`` with DIR unset) read as the option not given,
#: or as the working directory (``validate ""`` walked every file below it)
_PATH_OPTIONS = ("report", "out", "expect", "findings", "spec_dir", "inputs", "html", "from_spec", "to_spec")
_PATH_POSITIONALS = ("files", "desc", "dir", "case_dir", "reports", "old", "new")
PATH_ARGUMENTS = {d: "--" + d.replace("_", "-") for d in _PATH_OPTIONS} | {
    d: d.upper() for d in _PATH_POSITIONALS
}


def empty_path_option(args: argparse.Namespace) -> str | None:
    """The first path option or argument given an empty value (``--report``, ``DESC``), or None."""
    for dest, shown in PATH_ARGUMENTS.items():
        value = getattr(args, dest, None)
        if any(isinstance(v, str) and not v.strip() for v in (value if isinstance(value, list) else [value])):
            return shown
    return None


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
    except KeyboardInterrupt:  # Ctrl-C while the verbs load: one line, as later
        print("dmlconform: interrupted", file=sys.stderr)
        return 130
    if extra:  # as parse_args would, but naming the verb and action they were given to
        parser.exit(2, f"{prog(args)}: error: unrecognized arguments: {' '.join(extra)}\n")
    empty = empty_path_option(args)
    if empty:
        parser.exit(2, f"{prog(args)}: error: {empty}: an empty path (a variable left unset?)\n")
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    from dmlconform.runner.heap import retain_freed_memory

    retain_freed_memory()  # this process runs case after case: large blocks are reused, not refaulted
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print("dmlconform: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the last line of defence: one line, never a traceback
        from dmlconform.specification.desc import DescError
        from dmlconform.specification.spec import SpecError

        if isinstance(exc, (DescError, SpecError)):
            print(f"{prog(args)}: error: {exc}", file=sys.stderr)
            return 2
        if isinstance(exc, OSError):  # a file that cannot be written or read: the system's reason
            print(f"{prog(args)}: error: {os_error_line(exc)}", file=sys.stderr)
            return 2
        print(f"{prog(args)}: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("  (set DMLCONFORM_DEBUG=1 for the traceback)", file=sys.stderr)
        import os

        if os.environ.get("DMLCONFORM_DEBUG"):
            raise
        return 2


if __name__ == "__main__":
    sys.exit(main())
