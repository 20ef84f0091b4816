"""Expectations files: known failures, one per line, each with the reason it is known.

    numeric[MEAN_VARIANCE_NORMALIZATION1-5_2-FLOAT16-0042]  # epsilon placement, bug 123
    numeric[MEAN_VARIANCE_NORMALIZATION-*-FLOAT16-*]  fp16 statistics overflow
    # a comment line

The pattern is a test id (or a full node id) or an ``fnmatch`` glob over either; ``[`` and ``]``
in a pattern are literal (test ids are full of them, and character classes are never needed
here). Everything after ``#`` or the first run of whitespace is the reason. A reason is required:
an expectation without one rots, because nobody remembers why it was added.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path


class ExpectError(ValueError):
    """An expectations file that cannot be used (``path:line: message``)."""


@dataclass(frozen=True)
class Expectation:
    pattern: str
    reason: str
    line: int

    def matches(self, test_id: str, nodeid: str = "") -> bool:
        rx = _compile(self.pattern)
        return bool(
            rx.fullmatch(test_id)
            or (nodeid and (rx.fullmatch(nodeid) or nodeid.endswith("::" + self.pattern)))
        )


def _compile(pattern: str) -> re.Pattern[str]:
    # fnmatch treats [...] as a character class; escape brackets so ids match literally.
    escaped = pattern.replace("[", "\0L").replace("]", "\0R")
    rx = fnmatch.translate(escaped).replace("\0L", r"\[").replace("\0R", r"\]")
    return re.compile(rx)


def parse_expectations(text: str, source: str = "<expectations>") -> list[Expectation]:
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "#" in line:
            pattern, reason = line.split("#", 1)
        else:
            parts = line.split(None, 1)
            pattern, reason = parts[0], parts[1] if len(parts) > 1 else ""
        pattern, reason = pattern.strip(), reason.strip()
        if " " in pattern:
            pattern, extra = pattern.split(None, 1)
            reason = f"{extra} {reason}".strip()
        if not reason:
            raise ExpectError(f"{source}:{n}: expectation {pattern!r} has no reason")
        out.append(Expectation(pattern, reason, n))
    return out


def load_expectations(path: str | Path) -> list[Expectation]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ExpectError(f"{p}: cannot read expectations file: {exc.strerror or exc}") from None
    return parse_expectations(text, str(p))


def match(expectations: list[Expectation], test_id: str, nodeid: str = "") -> Expectation | None:
    """The first expectation naming this case, or None."""
    for e in expectations:
        if e.matches(test_id, nodeid):
            return e
    return None
