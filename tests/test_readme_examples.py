"""The README and the docs show what the commands print today: each ``$ dmlconform ...`` example
below is run and compared line by line (a shown line ending in ``...`` abbreviates the rest of
the real line), and every count the README states is computed here from the code, so a figure
cannot go stale unnoticed. The README stays a user's document: short, with no commit hash."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from dmlconform.cli import main

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
#: (file, command) pairs whose output the file shows; run from the repository root.
CHECKED = (
    ("README.md", "dmlconform validate examples/descs --feature-level 4_0"),
    ("README.md", "dmlconform spec-diff --from 4_0 --to 5_2 MVN1 BATCH_NORMALIZATION_TRAINING"),
    ("docs/spec-tools.md", "dmlconform validate examples/descs --feature-level 4_0"),
    (
        "docs/spec-tools.md",
        "dmlconform validate examples/descs/mvn1_scale_only_elu.yaml --feature-level 4_0 --format json",
    ),
    ("docs/spec-tools.md", "dmlconform spec-diff --from 4_0 --to 5_2"),
)
#: The README's generate / execute example: each command uses what the one before wrote.
SEQUENCE = (
    "dmlconform generate MEAN_VARIANCE_NORMALIZATION1 --feature-level 5_1 --count 3 --seed 7 --with-data --out gen",
    "dmlconform generate MEAN_VARIANCE_NORMALIZATION1 -l 5_1 --illegal --count 4 --out gen2",
    "dmlconform execute gen/mean_variance_normalization1_5_1_0000_legal.yaml"
    " --inputs gen/mean_variance_normalization1_5_1_0000_legal.npz",
)
MAIN_COMMAND = 'python -m pip install ".[ort]" && dmlconform run --backend onnxruntime'
TEST_COMMAND = 'python -m pip install -q ".[all]" && python -m pytest -n 2 -q --durations=20'
MAX_LINES = 350


def example(text: str, command: str) -> list[str]:
    """The lines shown under ``$ command``, up to the next ``$ `` line or the end of its block."""
    start = text.index(f"$ {command}\n") + len(command) + 3
    block = text[start : text.index("```", start)].rstrip("\n").splitlines()
    ends = [i for i, line in enumerate(block) if line.startswith("$ ")]
    return block[: ends[0]] if ends else block


def same(doc: list[str], real: list[str]) -> bool:
    if len(doc) != len(real):
        return False
    return all(
        d == r or (d.endswith("...") and r.startswith(d[:-3].rstrip()) and r != d[:-3].rstrip())
        for d, r in zip(doc, real, strict=True)
    )


def printed(command: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """What ``command`` prints on stdout, run in process in the current directory."""
    main(shlex.split(command)[1:])
    return capsys.readouterr().out.rstrip("\n").splitlines()


def section(title: str) -> str:
    """The README's text under the ``## title`` heading, up to the next ``## `` heading."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


@pytest.mark.parametrize(("doc", "command"), CHECKED)
def test_example_is_current(
    doc: str, command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    real = printed(command, capsys)
    shown = example((REPO / doc).read_text(encoding="utf-8"), command)
    assert same(shown, real), (
        f"{doc} shows:\n" + "\n".join(shown) + "\n\nthe command prints:\n" + "\n".join(real)
    )


def test_generate_and_execute_examples_are_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's generate and execute commands, in order, in a fresh directory as a user
    would run them; docs/reference.md shows the same execute."""
    monkeypatch.chdir(tmp_path)
    readme = README.read_text(encoding="utf-8")
    for command in SEQUENCE:
        real = printed(command, capsys)
        shown = example(readme, command)
        assert same(shown, real), (
            "README shows:\n" + "\n".join(shown) + "\n\nthe command prints:\n" + "\n".join(real)
        )
    reference_doc = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    assert example(reference_doc, SEQUENCE[-1]) == example(readme, SEQUENCE[-1])


def test_the_intro_names_every_operator_of_the_spec() -> None:
    """The README lists the operators instead of counting them; the list is the spec's."""
    from dmlconform.specification.spec import load_spec

    intro = README.read_text(encoding="utf-8").split("\n## ", 1)[0]
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", intro))
    assert named == set(load_spec().operators)


def test_the_two_commands_are_two_and_the_test_command_is_the_one_ci_runs() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", section("The two commands"), re.S)
    assert [b.strip() for b in blocks] == [MAIN_COMMAND, TEST_COMMAND]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert TEST_COMMAND in ci  # a line of .ci/run is the README's test command, as written


def test_the_main_runs_case_count_is_what_the_run_collects() -> None:
    """The case count in the README's output of its main command, against the collection that
    command makes (the backend's own level and capabilities, every default option)."""
    pytest.importorskip("onnxruntime")
    from dmlconform.runner.cases import collect
    from dmlconform.runner.options import given
    from dmlconform.runner.settings import resolve_settings
    from dmlconform.specification.spec import load_spec

    shown = example(section("The two commands"), "dmlconform run --backend onnxruntime")
    counts = [m for line in shown if (m := re.match(r"dmlconform: (\d+) cases: ", line))]
    assert len(counts) == 1, "the main command's output shows no 'dmlconform: N cases: ...' line"
    values = given(argparse.Namespace(backend="onnxruntime"), "run")
    settings, _ = resolve_settings(values, prefix="--", command="readme", check_report=False)
    assert int(counts[0].group(1)) == sum(1 for _ in collect(load_spec(), settings.selection))


def test_the_readme_is_short_and_names_no_commit() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES
    hexes = re.findall(r"(?<![\w.])[0-9a-f]{7,40}(?![\w.])", text)
    assert [h for h in hexes if re.search(r"\d", h) and re.search(r"[a-f]", h)] == []


def test_the_comparison_notices_a_stale_line() -> None:
    assert same(["a", "b ..."], ["a", "b c"])
    assert not same(["a", "6 change(s)"], ["a", "8 change(s)"])
    assert not same(["a"], ["a", "b"])


def test_an_example_ends_at_the_next_prompt() -> None:
    text = "```\n$ one\nx\n$ two\ny\n```\n"
    assert example(text, "one") == ["x"]
    assert example(text, "two") == ["y"]
