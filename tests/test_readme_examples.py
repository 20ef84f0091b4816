"""The README's command examples show what the commands print today: each ``$ dmlconform ...``
block below is run and compared line by line (a README line ending in ``...`` abbreviates the
rest of the real line), so a figure cannot go stale unnoticed."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from dmlconform.cli import main

REPO = Path(__file__).resolve().parent.parent
CHECKED = (
    "dmlconform validate examples/descs --feature-level 4_0",
    "dmlconform validate examples/descs/mvn1_scale_only_elu.yaml --feature-level 4_0 --format json",
    "dmlconform spec-diff --from 4_0 --to 5_2",
)


def readme_example(command: str) -> list[str]:
    """The lines the README shows under ``$ command``, up to the end of its code block."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(f"$ {command}\n") + len(command) + 3
    return text[start : text.index("```", start)].rstrip("\n").splitlines()


def same(doc: list[str], real: list[str]) -> bool:
    if len(doc) != len(real):
        return False
    return all(
        d == r or (d.endswith("...") and r.startswith(d[:-3].rstrip()) and r != d[:-3].rstrip())
        for d, r in zip(doc, real, strict=True)
    )


@pytest.mark.parametrize("command", CHECKED)
def test_readme_example_is_current(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    main(shlex.split(command)[1:])
    real = capsys.readouterr().out.rstrip("\n").splitlines()
    doc = readme_example(command)
    assert same(doc, real), "README shows:\n" + "\n".join(doc) + "\n\nthe command prints:\n" + "\n".join(real)


def test_the_comparison_notices_a_stale_line() -> None:
    assert same(["a", "b ..."], ["a", "b c"])
    assert not same(["a", "6 change(s)"], ["a", "8 change(s)"])
    assert not same(["a"], ["a", "b"])
