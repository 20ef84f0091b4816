"""``--help`` of every verb and action says what it does, how it exits, what each option defaults
to and which values it takes, in plain text (no reStructuredText markup from docstrings)."""

from __future__ import annotations

import argparse
import re

import pytest
from helpers import REPO

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


#: One idea, one spelling on every verb: the long option, its short flag. Found by what the option
#: holds (a feature level's metavar is FL; an output's dest is out), so a verb added later with
#: its own spelling of either is caught too.
def _idea(action: argparse.Action) -> tuple[str, str] | None:
    if action.metavar == "FL":
        return "--feature-level", "-l"
    if action.dest == "out":
        return "--out", "-o"
    return None


#: Spellings that name an idea another spelling names on the other verbs: still accepted (hidden
#: aliases), never shown.
RETIRED = {"--max-time", "--output", "--level"}


def test_one_idea_has_one_spelling_on_every_verb() -> None:
    checked = set()
    for name, parser in PARSERS:
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or not action.option_strings:
                continue
            assert not RETIRED & set(action.option_strings), f"{name}: {action.option_strings} shown"
            idea = _idea(action)
            if idea is not None:
                assert set(idea) <= set(action.option_strings), f"{name}: {action.option_strings}"
                checked.add((name, idea[0]))
    for verb in ("validate", "generate", "run", "dxdispatch export", "dxdispatch check", "spec-diff"):
        assert (f"dmlconform {verb}", "--feature-level") in checked, verb
    for verb in ("generate", "execute", "shrink", "report diff", "report merge", "report releases"):
        assert (f"dmlconform {verb}", "--out") in checked, verb
    # the time a shrink may take: one name on both verbs that shrink
    for verb in ("run", "shrink"):
        assert any("--shrink-time" in a.option_strings for a in dict(PARSERS)[f"dmlconform {verb}"]._actions)


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["run", "--backend", "reference", "-l", "5_1"], "feature_level", "5_1"),
        (["shrink", "d", "--max-time", "5"], "shrink_time", 5.0),
        (["shrink", "d", "--shrink-time", "5"], "shrink_time", 5.0),
        (["report", "diff", "a", "b", "--output", "f"], "out", "f"),
        (["execute", "d.yaml", "--output", "o.npz"], "out", "o.npz"),
        (["spec-diff", "--from-spec", "s", "--level", "5_1"], "level", "5_1"),
        (["spec-diff", "--from-spec", "s", "-l", "5_1"], "level", "5_1"),
    ],
)
def test_short_flags_and_older_spellings_parse(argv: list[str], dest: str, value: object) -> None:
    """-l on run as on validate and generate; each older spelling lands where the shown one does."""
    assert getattr(build_parser().parse_args(argv), dest) == value


def test_the_plugin_takes_no_short_flag() -> None:
    """pytest's -l is --showlocals (and pytest refuses a plugin's lowercase short flag): the plugin's
    options stay --dml-* only, while the CLI's --feature-level has -l."""
    from dmlconform.runner.options import add_pytest_options

    class Group:
        names: list[str] = []

        def addoption(self, *names: str, **kwargs: object) -> None:
            self.names += names

    add_pytest_options(Group())
    assert "--dml-feature-level" in Group.names and all(n.startswith("--dml-") for n in Group.names)


def test_top_level_help_says_what_each_verb_returns() -> None:
    """Every verb has its line in the exit-status table; run's 143 (SIGTERM) and Ctrl-C's 130 are
    there, not only 0, 1 and 2."""
    from dmlconform.cli import VERBS

    text = build_parser().format_help()
    table = text[text.index("exit status:") :]
    assert "130 interrupted" in " ".join(table.split())
    rows = {line.split()[0]: line for line in table.splitlines() if line.startswith("  ")}
    for verb in VERBS:
        assert verb.replace("_", "-") in rows, f"{verb} has no exit status line"
    assert "143 terminated (SIGTERM)" in rows["run"] and "1 " in rows["run"]


def test_run_help_leads_to_the_expectations_and_the_broken_backends() -> None:
    from dmlconform.backends.base import load_backend

    text = " ".join(dict(PARSERS)["dmlconform run"].format_help().split())
    for named_file in re.findall(r"(?:examples|dmlconform/known_findings)/[\w.*-]+", text):
        assert list(REPO.glob(named_file)), named_file  # every file the help names exists
    assert "dmlconform/known_findings/*.yaml" in text and "--no-known-findings" in text
    named = re.search(r"--backend (dmlconform\.backends\.broken:\w+)", text)
    assert named, text
    assert load_backend(named.group(1)).name.startswith("broken:")  # the named one loads as shown


def test_directml_versions_check_help_states_no_timing() -> None:
    """--check's help said 'about 2 s' where the README said 1.3 s: it says what it does instead."""
    parser = dict(PARSERS)["dmlconform directml versions"]
    (check,) = [a for a in parser._actions if "--check" in a.option_strings]
    assert not re.search(r"\d+(\.\d+)? ?s\b", check.help or "") and "known data" in (check.help or "")
