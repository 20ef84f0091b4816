"""How values read in the report: error figures, markdown table cells and code spans, identifiers
that may wrap, JSON safe inside a <script> element. One place for them because the templates use
them as filters and the charts and the case data compose labels with them, and a figure must read
the same in a chart, on the page and in summary.md."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from markupsafe import Markup

# Where a long identifier (case id, operator, rule) may wrap: after these characters, so that
# "numeric[MEAN_VARIANCE_NORMALIZATION1-5_0-FLOAT16-0003]" breaks between words, not inside one.
BREAK_AFTER = re.compile(r"([-_\[\],/.=:])")


def breakable(text: Any) -> Markup:
    """Escaped text with a <wbr> after each separator of an identifier: a narrow column wraps a
    long id between its words (and copying the id still gives it whole, which a zero-width space
    would not)."""
    parts = BREAK_AFTER.split(str(text))
    return Markup("").join(
        Markup("{}<wbr>").format(part) if BREAK_AFTER.fullmatch(part) else Markup.escape(part)
        for part in parts
        if part
    )


def format_number(value: Any, digits: int = 4) -> str:
    """Error figures for people: 4 significant digits, infinities and NaN by name, '-' for none."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.{digits}g}"


def markdown_cell(text: Any) -> str:
    """Text safe in a markdown table cell: no raw HTML, no pipes or newlines breaking the row."""
    return (
        str(text)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("|", "\\|")
        .replace("\r", " ")
        .replace("\n", " ")
    )


def markdown_code(text: Any) -> str:
    """Text as a markdown code span, shown literally (a "~" in "8.0~repack" is no strikethrough)."""
    return "`" + str(text).replace("`", "'").replace("\r", " ").replace("\n", " ") + "`"


def json_for_script(data: Any) -> Markup:
    """JSON that cannot end or confuse its <script> element: every '<' (so no '</script>' and no
    '<!--') and the line separators JavaScript once treated as newlines are escaped."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)
