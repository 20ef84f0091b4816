"""``--help`` of every verb and action says what it does, how it exits, what each option defaults
to and which values it takes, in plain text (no reStructuredText markup from docstrings)."""

from __future__ import annotations

import argparse
import re

import pytest

from dmlconform.backends.base import list_backends
from dmlconform.cli import build_parser


def every_parser() -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(f"{name} {sub}", child)

    walk("dmlconform", build_parser())
    return found


PARSERS = every_parser()
TAKES_NO_VALUE = (
    argparse._StoreTrueAction,
    argparse._StoreFalseAction,
    argparse._HelpAction,
    argparse._VersionAction,
    argparse._CountAction,
)


def _leaf(parser: argparse.ArgumentParser) -> bool:
    return not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def test_every_verb_is_walked() -> None:
    names = {name for name, _ in PARSERS}
    for verb in ("validate", "spec lint", "spec rules", "generate", "execute", "run", "replay", "shrink"):
        assert f"dmlconform {verb}" in names
    for verb in ("report", "spec-diff", "dxdispatch export", "dxdispatch check", "dxdispatch emulate"):
        assert f"dmlconform {verb}" in names
    for verb in ("directml setup", "directml info", "directml versions"):
        assert f"dmlconform {verb}" in names


@pytest.mark.parametrize(("name", "parser"), PARSERS, ids=[n for n, _ in PARSERS])
def test_help_describes_exits_defaults_and_choices(name: str, parser: argparse.ArgumentParser) -> None:
    text = " ".join(parser.format_help().split())  # argparse wraps lines anywhere
    assert parser.description and len(parser.description) > 30, f"{name}: no description"
    assert "``" not in text and not re.search(r":(class|func|meth|mod):", text), f"{name}: markup"
    if _leaf(parser) or name == "dmlconform":
        assert re.search(r"\bexit status\b|\bexit [012]\b", text, re.I), f"{name}: exit codes not stated"
    for action in parser._actions:
        if not action.option_strings or isinstance(action, TAKES_NO_VALUE):
            continue
        if action.help == argparse.SUPPRESS:  # a hidden alias: an older spelling of a shown option
            assert any(a.dest == action.dest and a.help != argparse.SUPPRESS for a in parser._actions), (
                f"{name} {action.option_strings}: hidden, and the alias of no shown option"
            )
            continue
        flag = action.option_strings[-1]
        helps = (action.help or "").lower()
        if not action.required and not isinstance(action, argparse._AppendAction):
            assert "default" in helps, f"{name} {flag}: the default is not stated ({action.help!r})"
        for choice in action.choices or ():
            assert str(choice) in text, f"{name} {flag}: choice {choice!r} not shown"


def test_run_help_lists_the_registered_backends() -> None:
    run = dict(PARSERS)["dmlconform run"]
    text = " ".join(run.format_help().split())
    for backend in list_backends():
        assert backend in text, f"backend {backend} not listed in run --help"
    assert "package.module:Class" in text
