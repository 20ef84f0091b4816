"""Reading YAML (and JSON) text that a user hands the suite: desc files, spec directories,
findings files.

Why a guard before the parser: libyaml's loader recurses in C once per nesting level, and a file
of 50,000 nested brackets overflows the C stack (a segfault, not an exception; 20,000 still
load); the pure-Python loader raises RecursionError a few hundred levels down. Neither is one
line naming the file. A desc is four levels deep and the spec's files a dozen, so text that may
nest deeper than :data:`MAX_NESTING` is refused before any parser sees it."""

from __future__ import annotations

import re
from typing import Any

import yaml

#: libyaml's safe loader where PyYAML has it: every process that runs cases loads the spec, and the
#: pure-Python parser took 2 s of a small run's start (its nodes keep line and column too)
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_NESTING = 1000
"""The deepest nesting read: far below libyaml's crash (between 20,000 and 50,000 levels)."""

# a line's leading run of indentation and block indicators: each block level needs one of them
_BLOCK_PREFIX = re.compile(r"^[ \t?:-]*", re.MULTILINE)
_BRACKETS = re.compile(r"[\[\]{}]")


class NestedTooDeeply(yaml.YAMLError):
    """Text that may nest deeper than a parser can take; a YAMLError, so that every reader's
    one-line message for malformed YAML names it."""

    problem_mark = None

    def __init__(self, limit: str = f"a limit of {MAX_NESTING} levels") -> None:
        self.problem = f"nested too deeply to read ({limit})"
        super().__init__(self.problem)


def nesting_bound(text: str) -> int:
    """An upper bound of the text's nesting depth: its deepest flow nesting (brackets, counted
    inside quoted strings too) plus its longest run of leading indentation and block
    indicators (a block level is one more column of indentation, or a ``-``/``?``/``:``)."""
    opens = text.count("[") + text.count("{")
    flow = opens
    if opens > MAX_NESTING:
        flow = depth = 0
        for m in _BRACKETS.finditer(text):
            depth += 1 if m.group() in "[{" else -1
            flow = max(flow, depth)
    block = max((len(p) for p in _BLOCK_PREFIX.findall(text)), default=0)
    return flow + block + 1


def refuse_deep(text: str) -> None:
    """Raise :class:`NestedTooDeeply` where the text may nest deeper than :data:`MAX_NESTING`."""
    if nesting_bound(text) > MAX_NESTING:
        raise NestedTooDeeply


def load_yaml(text: str, loader: Any = None) -> Any:
    """``yaml.load`` with a safe loader (libyaml's by default) behind :func:`refuse_deep`; a
    RecursionError of the pure-Python loader is :class:`NestedTooDeeply` too."""
    refuse_deep(text)
    try:
        return yaml.load(text, Loader=loader or YAML_LOADER)  # noqa: S506 - safe loaders only
    except RecursionError:  # the pure-Python loader: under 500 levels
        raise NestedTooDeeply("deeper than the Python parser's recursion takes") from None
