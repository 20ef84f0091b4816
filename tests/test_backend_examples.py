"""docs/backends.md's two complete backends, written against the public plan API alone (LRN, and
the batch-normalization gradients), copied literally into files and run as a user runs them:
every case of their operators passes, every other operator's case is skipped with their reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import REPO, dmlconform

GRADS = ("BATCH_NORMALIZATION_GRAD", "BATCH_NORMALIZATION_TRAINING_GRAD")


def docs_example(file: str) -> str:
    """The python block of docs/backends.md that starts with ``# <file>``, exactly as written."""
    text = (REPO / "docs" / "backends.md").read_text()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        if block.startswith(f"# {file}\n"):
            return block
    raise AssertionError(f"docs/backends.md has no python block for {file}")


@pytest.mark.parametrize(
    ("file", "backend", "operators"),
    [
        ("lrnbackend.py", "lrnbackend:LrnBackend", ("LOCAL_RESPONSE_NORMALIZATION",)),
        ("gradbackend.py", "gradbackend:GradBackend", GRADS),
    ],
)
def test_the_docs_backend_copied_literally_passes_every_case_of_its_operators(
    tmp_path: Path, file: str, backend: str, operators: tuple[str, ...]
) -> None:
    (tmp_path / file).write_text(docs_example(file))
    proc = dmlconform(
        "run", "--backend", backend, "--operators", *operators, "MVN1",
        "--cases", "4", "--max-elements", "16384", "--report", "r", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    cases = json.loads((tmp_path / "r" / "results.json").read_text())["cases"]
    ran = [c for c in cases if c["outcome"] == "passed"]
    assert {c["operator"] for c in ran} == set(operators)
    assert all(c["outcome"] in ("passed", "skipped") for c in cases)
    numeric = [c for c in cases if c["operator"] in operators and c["kind"] == "numeric"]
    assert numeric and all(c["outcome"] == "passed" for c in numeric)
    others = [c for c in cases if c["operator"] not in operators]
    assert others and all(
        c["message"] == f"backend does not support this case: {c['operator']} is not implemented"
        for c in others
    )
