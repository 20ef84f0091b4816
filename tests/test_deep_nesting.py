"""Text nested deeper than a YAML parser can take is one line naming the file, never a crash:
libyaml's loader overflowed the C stack on a desc of 50,000 nested brackets (the process died
of SIGSEGV) and the pure-Python loader of a findings file raised RecursionError through
pytest's INTERNALERROR."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SMALL, dmlconform
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli_errors import one_error_line

from dmlconform.specification.yaml_text import MAX_NESTING, nesting_bound

DEEP = "[" * 50_000 + "]" * 50_000


def test_a_desc_nested_past_the_parser_is_one_line_not_a_segfault(tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text(DEEP)
    (tmp_path / "dashes.yaml").write_text("- " * 50_000 + "x\n")
    for name in ("deep.json", "dashes.yaml"):
        proc = dmlconform("validate", "-l", "6_4", name, cwd=tmp_path)
        assert proc.returncode == 2, (proc.returncode, proc.stderr[-500:])
        lines = proc.stderr.strip().splitlines()
        assert lines == [
            f"{name}: malformed YAML: nested too deeply to read (a limit of {MAX_NESTING} levels)"
        ]


@pytest.mark.parametrize(
    ("levels", "why"),
    [(50_000, "a limit of 1000 levels"), (700, "deeper than the Python parser's recursion takes")],
)
def test_a_findings_file_nested_past_the_parser_is_one_line(tmp_path: Path, levels: int, why: str) -> None:
    """Findings files are read by the pure-Python loader (for line numbers), which gives up
    near 500 levels: under the guard's limit, its RecursionError is the same one line."""
    (tmp_path / "deep.yaml").write_text("[" * levels + "]" * levels)
    proc = dmlconform("run", "--backend", "reference", *SMALL, "--expect", "deep.yaml", cwd=tmp_path)
    line = one_error_line(proc, "dmlconform run")
    assert line.endswith(f"deep.yaml: not valid YAML: nested too deeply to read ({why})"), line


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_leaves = st.one_of(st.integers(-5, 5), st.text("ab -:[", max_size=4), st.none())
_trees = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text("kq", min_size=1, max_size=3), inner, max_size=3)
    ),
    max_leaves=40,
)


@settings(max_examples=200, deadline=None)
@given(tree=_trees, flow=st.sampled_from([True, False, None, "json"]), indent=st.integers(0, 6))
def test_the_nesting_bound_is_never_below_the_real_depth(
    tree: Any, flow: bool | str | None, indent: int
) -> None:
    """The guard refuses by the bound, so the bound must hold: block style (indentation and
    ``- `` runs), flow style, the mixture PyYAML writes, and JSON."""
    if flow == "json":
        text = json.dumps(tree, indent=indent or None)
    else:
        text = yaml.safe_dump(tree, default_flow_style=flow, indent=max(indent, 2))
    assert yaml.safe_load(text) == tree
    assert nesting_bound(text) >= _depth(tree)
