"""Rendering results.json into index.html (self-contained) and summary.md.

The HTML page must open from a CI artifact on any machine, offline, so everything is inline: CSS,
the script, the charts (SVG computed here) and the case data (one JSON blob). Server-side parts go
through Jinja with autoescape on; the script only ever writes data with ``textContent``. The blob
is compact (arrays with indexes into shared string tables, descs only for failures) so that 50,000
cases stay well under 10 MB and the page parses in a fraction of a second.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml
from markupsafe import Markup

from dmlconform.report.classes import LADDER, accuracy_classes
from dmlconform.report.classes import known_findings as finding_counts
from dmlconform.report.model import (
    FAILING,
    NOTABLE,
    OK,
    OUTCOMES,
    CaseRecord,
    Results,
    load_results,
    skip_reasons,
)

# Failures rendered as full entries in the page itself (the rest open from the case table).
FAILURE_ENTRIES = 100
# Descs embedded for the case table's detail panel; past this, the panel points at the
# reproducer directory instead, which bounds the page size whatever the failure rate.
EMBEDDED_DESCS = 2000
ROW_MESSAGE_CHARS = 240
SUMMARY_TOP_FAILURES = 10
# A known finding's label: its id when the expectation's reason starts with one ("F1: ...",
# "O1: ...", "T2: ..."), else the reason itself, cut to this many characters.
FINDING_ID = re.compile(r"\s*([A-Z][A-Za-z]{0,3}[0-9]+[a-z]?)\s*:")
KNOWN_LABEL_CHARS = 48
# Where a long identifier (case id, operator, rule) may wrap: after these characters, so that
# "numeric[MEAN_VARIANCE_NORMALIZATION1-5_0-FLOAT16-0003]" breaks between words, not inside one.
BREAK_AFTER = re.compile(r"([-_\[\],/.=:])")
CHART_WIDTH, CHART_HEIGHT = 300, 130

_TEMPLATES = Path(__file__).parent / "templates"


def _environment(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["num"] = format_number
    env.filters["md"] = markdown_cell
    env.filters["mdcode"] = markdown_code
    env.filters["breakable"] = breakable
    return env


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


def level_key(level: str) -> tuple[int, ...]:
    """Feature levels sort numerically ("10_0" after "6_4")."""
    return tuple(int(p) for p in re.findall(r"\d+", level)) or (10**6,)


def json_for_script(data: Any) -> Markup:
    """JSON that cannot end or confuse its <script> element: every '<' (so no '</script>' and no
    '<!--') and the line separators JavaScript once treated as newlines are escaped."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


# --------------------------------------------------------------------------- matrix


@dataclass
class Cell:
    """One operator x level x data type cell of the matrix. ``illegal`` counts its cases that
    are illegal descs (validation cases the backend must reject)."""

    counts: Counter = field(default_factory=Counter)
    illegal: int = 0

    @property
    def illegal_only(self) -> bool:
        """Every case here is an illegal desc: a pass means "rejected", never "supported" (a
        data type the operator does not support appears only so)."""
        return self.total > 0 and self.illegal == self.total

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def ran(self) -> int:
        return self.total - self.counts["skipped"]

    @property
    def ok(self) -> int:
        return sum(self.counts[o] for o in OK)

    @property
    def failing(self) -> int:
        return sum(self.counts[o] for o in FAILING)

    @property
    def rate(self) -> float | None:
        return self.ok / self.ran if self.ran else None

    @property
    def colour(self) -> str:
        """Red (0%) to green (100%) through yellow; grey when nothing ran."""
        rate = self.rate
        if rate is None:
            return "#e3e3e3"
        if self.illegal_only and rate == 1:
            return "#dde5f2"  # every illegal desc rejected: blue-grey, not the green of support
        # Any failure is warm (red at 0%, amber near 100%), so 99% never passes for green.
        hue = 120 if rate == 1 else 45 * rate
        return f"hsl({hue:.0f}, 65%, {80 if rate == 1 else 70}%)"

    @property
    def title(self) -> str:
        parts = [f"{o}: {n}" for o, n in sorted(self.counts.items()) if n]
        return ", ".join(parts)


@dataclass
class Matrix:
    operators: list[str]
    levels: list[str]
    data_types: list[str]
    cells: dict[tuple[str, str, str], Cell]

    @property
    def rows(self) -> list[tuple[str, str]]:
        """(operator, data type) pairs that have cases: the matrix's rows, levels being its columns.
        Only present pairs, since validation cases bring many data types to a few levels each."""
        present = {(op, dt) for op, _, dt in self.cells}
        return [(op, dt) for op in self.operators for dt in self.data_types if (op, dt) in present]

    def row_count(self, op: str) -> int:
        return sum(1 for o, _ in self.rows if o == op)

    def cell(self, op: str, level: str, dt: str) -> Cell | None:
        return self.cells.get((op, level, dt))

    def row_total(self, op: str, dt: str) -> Cell:
        total = Cell()
        for (o, _, d), cell in self.cells.items():
            if o == op and d == dt:
                total.counts.update(cell.counts)
                total.illegal += cell.illegal
        return total

    def illegal_only(self, op: str, dt: str) -> bool:
        """The row holds only illegal descs of this type: shown as rejection tests, not support."""
        return self.row_total(op, dt).illegal_only

    def operator_total(self, op: str) -> Cell:
        total = Cell()
        for (o, _, _), cell in self.cells.items():
            if o == op:
                total.counts.update(cell.counts)
                total.illegal += cell.illegal
        return total


def _type_key(name: str) -> tuple[int, str]:
    """Floats first, then the rest by name; FLOAT32 before FLOAT16 (widest first)."""
    order = {"FLOAT64": 0, "FLOAT32": 1, "FLOAT16": 2}
    return (order.get(name, 3), name)


def build_matrix(results: Results) -> Matrix:
    cells: dict[tuple[str, str, str], Cell] = defaultdict(Cell)
    for case in results.cases:
        cell = cells[(case.operator, case.feature_level, case.data_type)]
        cell.counts[case.outcome] += 1
        cell.illegal += int(case.kind == "validation" and case.expected == "illegal")
    declared = [str(d) for d in results.data.get("data_types") or []]
    seen_types = {k[2] for k in cells}
    data_types = [d for d in declared if d in seen_types] + sorted(seen_types - set(declared), key=_type_key)
    return Matrix(
        operators=sorted({k[0] for k in cells}),
        levels=sorted({k[1] for k in cells}, key=level_key),
        data_types=data_types,
        cells=dict(cells),
    )


# --------------------------------------------------------------------------- charts


@dataclass
class Bar:
    x: float
    y: float
    w: float
    h: float
    label: str
    count: int
    over: bool


@dataclass
class Chart:
    """A histogram drawn as inline SVG by the template (so all text in it is autoescaped)."""

    title: str
    xlabel: str
    bars: list[Bar]
    ticks: list[tuple[float, str]]
    marker_x: float | None
    marker_label: str
    max_count: int
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT


_PLOT_LEFT, _PLOT_RIGHT, _PLOT_TOP, _PLOT_BOTTOM = 34, 6, 8, 22


def _histogram(
    title: str,
    xlabel: str,
    bins: list[tuple[str, int, bool]],
    ticks: dict[int, str],
    marker_bin: float | None,
    marker_label: str,
) -> Chart:
    """Bars on a log count axis: a single outlier bin must not flatten the rest."""
    plot_w = CHART_WIDTH - _PLOT_LEFT - _PLOT_RIGHT
    plot_h = CHART_HEIGHT - _PLOT_TOP - _PLOT_BOTTOM
    max_count = max((n for _, n, _ in bins), default=0)
    scale = math.log10(max_count + 1) or 1.0
    width = plot_w / max(len(bins), 1)
    bars = []
    for i, (label, count, over) in enumerate(bins):
        h = plot_h * math.log10(count + 1) / scale if count else 0.0
        bars.append(
            Bar(
                x=round(_PLOT_LEFT + i * width + 0.5, 1),
                y=round(_PLOT_TOP + plot_h - h, 1),
                w=round(max(width - 1, 0.5), 1),
                h=round(h, 1),
                label=label,
                count=count,
                over=over,
            )
        )
    tick_list: list[tuple[float, str]] = []
    last = max(ticks, default=-1)
    for i, text in sorted(ticks.items()):  # greedy: no two labels closer than their text needs

        def clear(
            prev: tuple[float, str], x: float = _PLOT_LEFT + (i + 0.5) * width, text: str = text
        ) -> bool:
            return x - prev[0] >= 5.5 * max(len(text), len(prev[1]), 3)

        if i == last:  # the last label ("inf") wins over its neighbours
            while tick_list and not clear(tick_list[-1]):
                tick_list.pop()
        if not tick_list or clear(tick_list[-1]):
            tick_list.append((round(_PLOT_LEFT + (i + 0.5) * width, 1), text))
    marker_x = None if marker_bin is None else round(_PLOT_LEFT + marker_bin * width, 1)
    return Chart(title, xlabel, bars, tick_list, marker_x, marker_label, max_count)


_ULP_MIN_EXP, _ULP_MAX_EXP = -4, 24  # bins (2^(e-1), 2^e]; below and above are clamped


def _ulp_bin(ulp: float) -> int:
    """0: exactly 0 ULP; 1..: log2 bins; last: infinite or NaN."""
    n_log = _ULP_MAX_EXP - _ULP_MIN_EXP + 1
    if math.isnan(ulp) or math.isinf(ulp):
        return n_log + 1
    if ulp <= 0:
        return 0
    e = min(max(math.ceil(math.log2(ulp)), _ULP_MIN_EXP), _ULP_MAX_EXP)
    return 1 + e - _ULP_MIN_EXP


def _ulp_label(b: int) -> str:
    n_log = _ULP_MAX_EXP - _ULP_MIN_EXP + 1
    if b == 0:
        return "0 ULP"
    if b == n_log + 1:
        return "inf/NaN"
    e = b - 1 + _ULP_MIN_EXP
    return f"({format_number(2.0 ** (e - 1))}, {format_number(2.0**e)}] ULP"


_RATIO_MIN_EXP, _RATIO_MAX_EXP = -12, 12


def _ratio_bin(ratio: float) -> int:
    if math.isnan(ratio) or math.isinf(ratio):
        return _RATIO_MAX_EXP - _RATIO_MIN_EXP + 1
    if ratio <= 0:
        return 0
    e = min(max(math.ceil(math.log2(ratio)), _RATIO_MIN_EXP), _RATIO_MAX_EXP)
    return e - _RATIO_MIN_EXP


def _power_label(e: int) -> str:
    """2**e for an axis: "1/8" rather than "0.125", which is shorter and reads as a ratio."""
    return f"1/{2**-e}" if e < 0 else str(2**e)


def build_charts(results: Results) -> list[dict[str, Any]]:
    """Per operator and data type: the ULP error histogram and the error/budget ratio histogram."""
    groups: dict[tuple[str, str], list[CaseRecord]] = defaultdict(list)
    for case in results.cases:
        if case.max_ulp is not None:
            groups[(case.operator, case.data_type)].append(case)
    charts = []
    for (op, dt), cases in sorted(groups.items()):
        n_ulp = _ULP_MAX_EXP - _ULP_MIN_EXP + 3
        ulp_counts = [0] * n_ulp
        over = [False] * n_ulp
        budgets: Counter = Counter()
        for case in cases:
            b = _ulp_bin(case.max_ulp)  # type: ignore[arg-type]
            ulp_counts[b] += 1
            if case.ratio is not None and case.ratio > 1:
                over[b] = True
            if case.budget_ulp is not None:
                budgets[case.budget_ulp] += 1
        # Trim empty log bins on both sides so the populated range fills the chart.
        used = [i for i in range(1, n_ulp - 1) if ulp_counts[i]]
        budget = budgets.most_common(1)[0][0] if budgets else None
        if budget is not None and budget > 0 and math.isfinite(budget):
            used.append(_ulp_bin(budget))
        lo, hi = (min(used), max(used)) if used else (1, 1)
        lo, hi = max(1, lo - 1), min(n_ulp - 2, hi + 1)
        keep = [0, *range(lo, hi + 1), n_ulp - 1]
        bins = [(_ulp_label(b), ulp_counts[b], over[b]) for b in keep]
        ticks: dict[int, str] = {0: "0"}
        for pos, b in enumerate(keep[1:-1], start=1):
            e = b - 1 + _ULP_MIN_EXP
            if e % 2 == 0 or hi - lo < 8:
                ticks[pos] = _power_label(e)
        ticks[len(keep) - 1] = "inf"
        marker = None
        if budget is not None and budget > 0 and math.isfinite(budget):
            bb = _ulp_bin(budget)
            if bb in keep:
                marker = keep.index(bb) + 1.0  # the budget is the upper edge of its bin
        ulp_chart = _histogram(
            f"{op} {dt}: max ULP error ({len(cases)} cases)",
            "max ULP error (log2 bins), count on a log scale",
            bins,
            ticks,
            marker,
            f"budget {format_number(budget)} ULP" if budget is not None else "",
        )
        n_ratio = _RATIO_MAX_EXP - _RATIO_MIN_EXP + 2
        ratio_counts = [0] * n_ratio
        for case in cases:
            if case.ratio is not None:
                ratio_counts[_ratio_bin(case.ratio)] += 1
        one = -_RATIO_MIN_EXP  # the bin (1/2, 1]: the last one inside the budget
        used = [b for b in range(n_ratio - 1) if ratio_counts[b]] + [one, one + 1]
        keep = [*range(max(0, min(used) - 1), min(n_ratio - 2, max(used) + 1) + 1), n_ratio - 1]
        rbins = []
        for b in keep:
            if b == n_ratio - 1:
                label = "inf/NaN x budget"
            elif b == 0:
                label = f"0 to {_power_label(_RATIO_MIN_EXP)} x budget"
            else:
                e = b + _RATIO_MIN_EXP
                label = f"({_power_label(e - 1)}, {_power_label(e)}] x budget"
            rbins.append((label, ratio_counts[b], b > one))
        rticks = {
            pos: _power_label(b + _RATIO_MIN_EXP) for pos, b in enumerate(keep[:-1]) if (b - one) % 2 == 0
        }
        rticks[len(keep) - 1] = "inf"
        ratio_chart = _histogram(
            f"{op} {dt}: error / budget",
            "max ULP / budget ULP (log2 bins); right of the line fails",
            rbins,
            rticks,
            float(keep.index(one) + 1),
            "budget",
        )
        failing = sum(1 for c in cases if c.ratio is not None and c.ratio > 1)
        charts.append(
            {"operator": op, "data_type": dt, "ulp": ulp_chart, "ratio": ratio_chart, "over": failing}
        )
    return charts


# --------------------------------------------------------------------------- accuracy by size

SIZE_BANDS: tuple[tuple[str, float, float], ...] = (
    ("n below 1e3", 0, 1e3),
    ("1e3 to 1e5", 1e3, 1e5),
    ("1e5 to 1e6", 1e5, 1e6),
    ("1e6 and up", 1e6, math.inf),
)
"""Reduction-length bands of the accuracy table (results.json ``reduction_length``)."""

ACC_WIDTH, ACC_HEIGHT = 720, 340
_ACC_LEFT, _ACC_RIGHT, _ACC_TOP, _ACC_BOTTOM = 58, 16, 12, 40
_ACC_FLOOR_EXP = -8  # error/budget below 1e-8 (exact results included) sits on the floor
_ACC_CLIP_EXP = 3  # the main axis ends at 1e3; worse ratios go to the band above the break
_ACC_BAND, _ACC_GAP = 34, 14  # the overflow band's height and the break's gap under it (px)
# One colour per operator, told apart by people with the common colour-vision deficiencies
# (Okabe and Ito's palette, black left out); past eight operators, evenly spaced hues.
_PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#8c564b", "#f0e442")
# Per data type, in the run's order: a marker and a line dash.
_MARKERS = ("circle", "square", "diamond", "triangle")
_DASHES = ("", "6 3", "2 2", "8 3 2 3")


def operator_colours(operators: list[str]) -> dict[str, str]:
    """A distinct colour for each operator, stable for a given set of operators."""
    ops = sorted(set(operators))
    if len(ops) <= len(_PALETTE):
        return {op: _PALETTE[i] for i, op in enumerate(ops)}
    return {op: f"hsl({round(360 * i / len(ops))}, 70%, 42%)" for i, op in enumerate(ops)}


def _worse(a: float | None, b: float | None) -> bool:
    """Whether ratio ``a`` is worse than ``b`` (NaN counts as the worst)."""
    if a is None:
        return False
    return b is None or math.isnan(a) or (not math.isnan(b) and a > b)


def accuracy_cases(results: Results) -> list[CaseRecord]:
    """Numeric cases with an error/budget figure and a reduction length (metamorphic cases
    compare the backend with itself under a doubled budget: not on the same scale)."""
    return [
        c
        for c in results.cases
        if c.kind == "numeric" and c.ratio is not None and c.reduction_length is not None
    ]


def build_bands(results: Results) -> dict[str, Any]:
    """The worst error/budget per (operator, data type) and size band, and over all of them:
    how close to its limit an implementation is, and where that grows."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    total: dict[str, Any] = {label: None for label, _, _ in SIZE_BANDS}
    for case in accuracy_cases(results):
        n = case.reduction_length or 0
        label = next(lab for lab, lo, hi in SIZE_BANDS if lo <= n < hi)
        row = rows.setdefault((case.operator, case.data_type), {lab: None for lab, _, _ in SIZE_BANDS})
        for table in (row, total):
            cell = table[label]
            if cell is None:
                table[label] = cell = {"ratio": case.ratio, "case": case.id, "n": n, "count": 0, "over": 0}
            elif _worse(case.ratio, cell["ratio"]):
                cell.update(ratio=case.ratio, case=case.id, n=n)
            cell["count"] += 1
            cell["over"] += int(case.ratio is not None and not case.ratio <= 1)
    ordered = sorted(rows.items(), key=lambda kv: (kv[0][0], _type_key(kv[0][1])))
    return {
        "bands": [label for label, _, _ in SIZE_BANDS],
        "rows": [{"operator": op, "data_type": dt, "cells": cells} for (op, dt), cells in ordered],
        "total": total,
        "any": bool(rows),
    }


@dataclass
class Point:
    x: float
    y: float
    n: int
    ratio: float
    case: str
    clipped: str  # "", "floor" (below the axis), "over" (above the break), "top" (inf/NaN)


@dataclass
class Series:
    """One operator and data type: its colour is the operator's, marker and dash the type's."""

    label: str
    colour: str
    points: list[Point]
    worst: float | None
    operator: str = ""
    data_type: str = ""
    marker: str = "circle"
    dash: str = ""

    @property
    def segments(self) -> list[str]:
        """Polyline paths through the points in order of n, broken at clipped points (an exact
        result on the floor, a ratio above the break: markers, not plunges and spikes of the
        line) so that the curves stay readable."""
        out: list[list[Point]] = [[]]
        for p in self.points:
            if p.clipped:
                out.append([])
            else:
                out[-1].append(p)
        return [" ".join(f"{p.x},{p.y}" for p in seg) for seg in out if len(seg) > 1]

    @property
    def path(self) -> str:
        return " ".join(f"{p.x},{p.y}" for p in self.points)


@dataclass
class LegendEntry:
    label: str
    colour: str = ""
    marker: str = ""
    dash: str = ""
    worst: float | None = None


@dataclass
class AccuracyChart:
    """Error/budget against reduction length, both on log scales, one series per group.

    The main y axis ends at 10^_ACC_CLIP_EXP (or lower): a failing run's ratios of 1e40 would
    otherwise squash the line at 1, which is what the chart is for. Worse points sit in a band
    above a break (``band``: its top and bottom y, and the y of its inf/NaN row), with their
    exact figures in their tooltips and in the table of bands."""

    series: list[Series]
    xticks: list[tuple[float, str]]
    yticks: list[tuple[float, str]]
    one_y: float
    plot: tuple[int, int, int, int]  # left, top, right, bottom edges (the main axis's top)
    band: tuple[float, float, float] | None = None  # top, bottom, inf/NaN row; None: no band
    band_label: str = ""
    over: int = 0  # points in the band
    operators: list[LegendEntry] = field(default_factory=list)
    data_types: list[LegendEntry] = field(default_factory=list)
    width: int = ACC_WIDTH
    height: int = ACC_HEIGHT


def _decade(e: int) -> str:
    return {0: "1", 1: "10", 2: "100"}.get(e, f"1e{e}")


def accuracy_chart(
    groups: dict[tuple[str, str], list[CaseRecord]], data_types: list[str] | None = None
) -> AccuracyChart | None:
    """The chart for ``groups`` ((operator, data type) -> cases). Per group and log2 bin of n
    (ceil(log2 n), so that both sides of every power of two stay apart), the worst case is a
    point; the points of a group are joined in order of n. None when no case has both figures."""
    picked: dict[tuple[str, str], dict[int, CaseRecord]] = {}
    for key, cases in groups.items():
        for case in cases:
            if case.ratio is None or case.reduction_length is None:
                continue
            b = math.ceil(math.log2(max(case.reduction_length, 1)))
            best = picked.setdefault(key, {}).get(b)
            if best is None or _worse(case.ratio, best.ratio):
                picked[key][b] = case
    if not picked:
        return None
    chosen = [c for bins in picked.values() for c in bins.values()]
    ns = [max(c.reduction_length or 1, 1) for c in chosen]
    finite = [c.ratio for c in chosen if c.ratio is not None and math.isfinite(c.ratio) and c.ratio > 0]
    x_lo, x_hi = math.floor(math.log10(min(ns))), max(math.ceil(math.log10(max(ns))), 1)
    if x_hi == x_lo:
        x_hi += 1
    y_lo = max(math.floor(math.log10(min(finite))) if finite else -3, _ACC_FLOOR_EXP)
    y_lo = min(y_lo, -1)
    clip = 10.0**_ACC_CLIP_EXP
    over = [c.ratio for c in chosen if c.ratio is not None and not c.ratio <= clip]
    if over:
        y_hi = _ACC_CLIP_EXP
    else:
        y_hi = min(max(math.ceil(math.log10(max(finite))) if finite else 0, 0) + 1, _ACC_CLIP_EXP)
    left, right, bottom = _ACC_LEFT, ACC_WIDTH - _ACC_RIGHT, ACC_HEIGHT - _ACC_BOTTOM
    band_top = _ACC_TOP
    top = _ACC_TOP + (_ACC_BAND + _ACC_GAP if over else 0)
    band_bottom = band_top + _ACC_BAND
    over_finite = [math.log10(r) for r in over if math.isfinite(r)]
    over_lo, over_hi = (min(over_finite), max(over_finite)) if over_finite else (0.0, 0.0)

    def px(n: float) -> float:
        return round(left + (math.log10(n) - x_lo) / (x_hi - x_lo) * (right - left), 1)

    def py(e: float) -> float:
        return round(bottom - (e - y_lo) / (y_hi - y_lo) * (bottom - top), 1)

    def py_over(e: float) -> float:
        """Inside the band, below its inf/NaN row: ordered, on a compressed log scale."""
        lo_y, hi_y = band_bottom - 5, band_top + 14
        if over_hi == over_lo:
            return round((lo_y + hi_y) / 2, 1)
        return round(lo_y - (e - over_lo) / (over_hi - over_lo) * (lo_y - hi_y), 1)

    types = [t for t in (data_types or []) if any(k[1] == t for k in picked)]
    types += sorted({k[1] for k in picked} - set(types), key=_type_key)
    colours = operator_colours([k[0] for k in picked])
    series = []
    for (op, dt), bins in sorted(picked.items(), key=lambda kv: (kv[0][0], types.index(kv[0][1]))):
        points = []
        for case in sorted(bins.values(), key=lambda c: c.reduction_length or 0):
            r = case.ratio
            assert r is not None
            n = max(case.reduction_length or 1, 1)
            if math.isnan(r) or math.isinf(r):
                y, clipped = float(band_top + 5), "top"
            elif r > clip:
                y, clipped = py_over(math.log10(r)), "over"
            elif r <= 10.0**y_lo:
                y, clipped = py(float(y_lo)), "floor"
            else:
                y, clipped = py(min(math.log10(r), float(y_hi))), ""
            points.append(Point(px(n), y, n, r, case.id, clipped))
        worst = None
        for case in bins.values():
            if _worse(case.ratio, worst):
                worst = case.ratio
        t = types.index(dt)
        series.append(
            Series(
                f"{op} {dt}",
                colours[op],
                points,
                worst,
                operator=op,
                data_type=dt,
                marker=_MARKERS[t % len(_MARKERS)],
                dash=_DASHES[t % len(_DASHES)],
            )
        )
    step = 1 if x_hi - x_lo <= 8 else 2
    xticks = [(px(10.0**e), _decade(e)) for e in range(x_lo, x_hi + 1, step)]
    ystep = 1 if y_hi - y_lo <= 8 else 2
    yticks = [(py(e), _decade(e) if e >= 0 else f"1e{e}") for e in range(y_lo, y_hi + 1, ystep)]
    operators = []
    for op in sorted(colours):
        worst = None
        for s in series:
            if s.operator == op and _worse(s.worst, worst):
                worst = s.worst
        operators.append(LegendEntry(op, colour=colours[op], worst=worst))
    data_type_entries = [
        LegendEntry(dt, marker=_MARKERS[i % len(_MARKERS)], dash=_DASHES[i % len(_DASHES)])
        for i, dt in enumerate(types)
    ]
    return AccuracyChart(
        series,
        xticks,
        yticks,
        py(0.0),
        (left, top, right, bottom),
        band=(float(band_top), float(band_bottom), float(band_top + 5)) if over else None,
        band_label=f"> {_decade(_ACC_CLIP_EXP)}",
        over=len(over),
        operators=operators,
        data_types=data_type_entries,
    )


def build_accuracy(results: Results) -> AccuracyChart | None:
    """One series per operator and data type (a run has one backend)."""
    groups: dict[tuple[str, str], list[CaseRecord]] = defaultdict(list)
    for case in accuracy_cases(results):
        groups[(case.operator, case.data_type)].append(case)
    return accuracy_chart(groups, [str(d) for d in results.data.get("data_types") or []])


def tier_text(data: dict[str, Any]) -> str | None:
    """The header's tier line ("stress, size cases up to 67,108,864 elements"); None for runs
    from before tiers existed."""
    tier = data.get("tier")
    if not tier:
        return None
    cap = data.get("max_elements")
    return f"{tier}" + (f", size cases up to {cap:,} input elements" if isinstance(cap, int) else "")


# --------------------------------------------------------------------------- coverage


@dataclass
class RuleCoverage:
    """One rule's row. ``legal`` is None for a rule no legal desc can sit at the edge of
    (presence and equality rules): only an illegal case exercises those."""

    rule: str
    legal: int | None
    illegal: int
    failed: int

    @property
    def status(self) -> str:
        if self.failed:
            return "failing"
        if not self.legal and not self.illegal:
            return "untested"
        if self.legal is None or (self.legal and self.illegal):
            return "tested"
        return "legal only" if self.legal else "illegal only"


def _count(value: Any) -> int | None:
    return None if value is None else int(value or 0)


def build_coverage(results: Results) -> list[dict[str, Any]]:
    """Rows per operator from results["coverage"]; derived from the cases' "rules" if absent
    (counting the cases that ran, as ``results.coverage`` does)."""
    coverage = results.coverage
    if not coverage:
        derived: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
        for case in results.cases:
            if case.outcome == "skipped":
                continue
            for rule in case.raw.get("rules") or []:
                entry = derived[case.operator].setdefault(str(rule), {"legal": 0, "illegal": 0, "failed": 0})
                side = "illegal" if case.expected == "illegal" and case.rule == rule else "legal"
                entry[side] += 1
                entry["failed"] += int(case.failing)
        coverage = derived
    tables = []
    for op in sorted(coverage):
        rules = coverage[op] if isinstance(coverage[op], dict) else {}
        rows = [
            RuleCoverage(
                rule=str(rule),
                legal=_count((counts or {}).get("legal", 0)),
                illegal=int((counts or {}).get("illegal", 0) or 0),
                failed=int((counts or {}).get("failed", 0) or 0),
            )
            for rule, counts in rules.items()
        ]
        statuses = Counter(r.status for r in rows)
        tables.append(
            {"operator": op, "rows": rows, "statuses": statuses, "covered": len(rows) - statuses["untested"]}
        )
    return tables


# --------------------------------------------------------------------------- known findings


def known_reason(case: CaseRecord) -> str | None:
    """Why the case's outcome was expected (the matching expectation's reason), or None. A skipped
    case carries the reason too when an entry names it, but was not judged, so it has none here.
    The one place the report reads it: a record that later says "known finding" another way is
    read here as well."""
    if case.outcome == "skipped" or not case.expectation:
        return None
    return case.expectation


def known_label(reason: str) -> str:
    """The short label of a known finding: the finding id a reason starts with ("O1: ONNX
    Runtime LRN's approximate power" -> "O1"), else the reason, shortened to fit a table cell."""
    match = FINDING_ID.match(reason)
    if match:
        return match.group(1)
    text = " ".join(reason.split())
    return text if len(text) <= KNOWN_LABEL_CHARS else text[: KNOWN_LABEL_CHARS - 1] + "\u2026"


def known_findings(results: Results) -> list[dict[str, Any]]:
    """The known findings the run hit, one entry per label in order of first appearance: its
    distinct reasons and how many cases of each outcome it covered (xfailed: still there;
    xpassed: not seen this time)."""
    found: dict[str, dict[str, Any]] = {}
    for case in results.cases:
        reason = known_reason(case)
        if reason is None:
            continue
        label = known_label(reason)
        entry = found.setdefault(label, {"label": label, "reasons": [], "outcomes": Counter()})
        if reason not in entry["reasons"]:
            entry["reasons"].append(reason)
        entry["outcomes"][case.outcome] += 1
    return list(found.values())


# --------------------------------------------------------------------------- case data


def _compact_float(value: float | None, digits: int) -> float | str | None:
    if value is None:
        return None
    if math.isnan(value) or math.isinf(value):
        return str(value)  # "inf" / "nan": JSON has no literal for them
    return float(f"{value:.{digits}g}")


_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml: ~20x faster on big runs


def _desc_yaml(desc: Any) -> str | None:
    if desc is None:
        return None
    try:
        return yaml.dump(
            desc, Dumper=_YAML_DUMPER, sort_keys=False, default_flow_style=None, width=100, allow_unicode=True
        )
    except yaml.YAMLError:
        return json.dumps(desc, indent=1, default=str)


def _jsonable(value: Any) -> Any:
    """Free-form fields (info, worst) with non-finite floats spelled as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def severity_key(case: CaseRecord) -> tuple[int, int, float, str]:
    """Worst first: crashes (error), then numerical failures by how far past their budget, then
    outcome-only failures (a wrong accept/reject), which have no figure to rank by."""
    ratio = case.ratio
    return (
        0 if case.outcome == "error" else 1,
        0 if ratio is not None else 1,
        -ratio if ratio is not None and not math.isnan(ratio) else 0.0,
        case.id,
    )


def canonical_id(kind: str, op: str, level: str, dt: str, index: int | None) -> str | None:
    if index is None:
        return None
    return f"{kind}[{op}-{level}-{dt}-{index:04d}]"


def _replay_field(case: CaseRecord, frame: tuple[str, str] | None) -> str | int | None:
    """The detail record's replay command: 0 when the case has none, None when the page can
    rebuild it from the shared frame around the reproducer path, else the command itself."""
    if case.replay is None:
        return 0
    if frame and case.reproducer and case.replay == case.reproducer.join(frame):
        return None
    return case.replay


def shrunk_line(shrunk: dict[str, Any]) -> str | None:
    """One line on a ``run --shrink`` result: sizes before and after, time, how it stopped."""
    if shrunk.get("error"):
        return f"not shrunk: {shrunk['error']}"
    before, after = shrunk.get("original") or {}, shrunk.get("shrunk") or {}
    if not after:
        return None
    return (
        f"{before.get('elements')} elements, {before.get('dimensions')} dims -> {after.get('elements')} "
        f"elements, {after.get('dimensions')} dims in {format_number(shrunk.get('seconds'), 2)} s "
        f"({shrunk.get('stopped')}; {len(shrunk.get('steps') or [])} steps)"
    )


def _shrunk_detail(case: CaseRecord) -> dict[str, Any] | None:
    shrunk = case.raw.get("shrunk")
    if not isinstance(shrunk, dict):
        return None
    out = {
        "line": shrunk_line(shrunk),
        "desc": _desc_yaml(shrunk.get("desc")),
        "rep": shrunk.get("reproducer"),
        "cmd": shrunk.get("replay"),
        "m": shrunk.get("message"),
        "steps": shrunk.get("steps") or None,
    }
    return {k: v for k, v in out.items() if v is not None}


def build_case_data(results: Results, notable: list[CaseRecord]) -> dict[str, Any]:
    """The embedded blob: one array per case, strings interned in shared tables."""
    tables: dict[str, dict[str, int]] = {
        k: {} for k in ("ops", "levels", "dtypes", "kinds", "regimes", "msgs", "reasons")
    }

    def intern(table: str, value: str | None) -> int:
        if value is None:
            return -1
        t = tables[table]
        if value not in t:
            t[value] = len(t)
        return t[value]

    # Replay commands differ only in the reproducer path: store "prefix, suffix" once and, per
    # case, the command only when it does not follow that pattern.
    replay_frame: tuple[str, str] | None = None
    for case in notable:
        if case.replay and case.reproducer and case.reproducer in case.replay:
            at = case.replay.index(case.reproducer)
            replay_frame = (case.replay[:at], case.replay[at + len(case.reproducer) :])
            break
    detail_index: dict[int, int] = {}
    details = []
    for n, case in enumerate(notable):
        detail_index[id(case)] = len(details)
        errors = case.errors or {}
        outputs = errors.get("outputs")
        message = case.message
        full = n < EMBEDDED_DESCS  # past the cap: only pointers to the reproducer, to bound the size
        details.append(
            {
                # The row carries the message unless it had to be shortened there.
                "m": message if message is not None and len(message) > ROW_MESSAGE_CHARS else None,
                "desc": _desc_yaml(case.raw.get("desc")) if full else None,
                "w": _jsonable(errors.get("worst")) if full else None,
                "out": _jsonable(outputs)
                if full and isinstance(outputs, dict) and (len(outputs) > 1 or case.aggregate)
                else None,
                "info": _jsonable(case.raw.get("info")) if full else None,
                "exp": case.expected,
                "rule": case.rule,
                "rep": case.reproducer,
                "cmd": _replay_field(case, replay_frame),
                "shr": _shrunk_detail(case) if full else None,
            }
        )
        details[-1] = {k: v for k, v in details[-1].items() if v is not None}
    outcome_index = {o: i for i, o in enumerate(OUTCOMES)}
    rows = []
    for case in results.cases:
        kind, op, lvl, dt = case.kind, case.operator, case.feature_level, case.data_type
        message = case.message
        if message is not None and len(message) > ROW_MESSAGE_CHARS:
            message = message[: ROW_MESSAGE_CHARS - 1] + "\u2026"
        rows.append(
            [
                0 if case.id == canonical_id(kind, op, lvl, dt, case.index) else case.id,
                case.index if case.index is not None else -1,
                outcome_index[case.outcome],
                intern("ops", op),
                intern("levels", lvl),
                intern("dtypes", dt),
                intern("kinds", kind),
                intern("regimes", case.regime),
                _compact_float(case.max_ulp, 4),
                _compact_float(case.max_abs, 3),
                _compact_float(case.budget_ulp, 4),
                intern("msgs", message),
                detail_index.get(id(case), -1),
                _compact_float(case.ratio, 3),
                case.reduction_length,
                _compact_float(case.aggregate_ratio, 3),
                intern("reasons", known_reason(case)),
            ]
        )
    data: dict[str, Any] = {
        "v": 1,
        "cols": [
            "id",
            "index",
            "outcome",
            "op",
            "level",
            "dtype",
            "kind",
            "regime",
            "ulp",
            "abs",
            "budget",
            "msg",
            "detail",
            "ratio",
            "n",
            "agg",
            "known",
        ],
        "outcomes": list(OUTCOMES),
        "rows": rows,
        "details": details,
        "replay": list(replay_frame) if replay_frame else None,
    }
    for name, table in tables.items():
        data[name] = list(table)
    data["labels"] = [known_label(reason) for reason in data["reasons"]]
    return data


# --------------------------------------------------------------------------- pages


def _levels_sorted(values: list[str]) -> list[str]:
    return sorted(values, key=level_key)


def incompleteness(results: Results) -> dict[str, Any] | None:
    """What the page must say first when the run did not finish; None for a complete run."""
    if results.complete:
        return None
    collected = results.data.get("collected")
    ran = len(results.cases)
    if isinstance(collected, int):
        scope = f"{ran} of {collected} collected cases ran; {max(collected - ran, 0)} have no result"
    else:
        scope = f"{ran} cases ran; how many were collected is unknown"
    return {
        "status": str(results.data.get("status") or "incomplete"),
        "reason": str(results.data.get("stop_reason") or "the run did not say why"),
        "scope": scope,
        "exit_status": results.data.get("exit_status"),
    }


def build_context(results: Results) -> dict[str, Any]:
    data = results.data
    summary = results.summary()
    notable = sorted((c for c in results.cases if c.outcome in NOTABLE), key=severity_key)
    matrix = build_matrix(results)
    ran = summary["total"] - summary["skipped"]
    ok = summary["passed"] + summary["xfailed"]
    stacks = results.stacks
    in_stacks = frozenset().union(*(stack.keys for stack in stacks))
    # The header's versions line leaves out what the stack lines show.
    versions = {k: v for k, v in results.versions.items() if k not in in_stacks}
    tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
    return {
        "results": results,
        "data": data,
        "incomplete": incompleteness(results),
        "backend": results.backend,
        "backend_options": results.backend.get("options")
        if isinstance(results.backend.get("options"), dict)
        else {},
        "versions": versions,
        "stacks": stacks,
        "tool": tool,
        "summary": summary,
        "pass_rate": (ok / ran) if ran else None,
        "matrix": matrix,
        "failures": notable[:FAILURE_ENTRIES],
        "failure_count": sum(1 for c in results.cases if c.failing),
        "notable_count": len(notable),
        "charts": build_charts(results),
        "accuracy": build_accuracy(results),
        "bands": build_bands(results),
        "tier": tier_text(data),
        "coverage": build_coverage(results),
        "known": known_findings(results),
        "known_reason": known_reason,
        "known_label": known_label,
        "case_data": build_case_data(results, notable),
        "embedded_descs": min(len(notable), EMBEDDED_DESCS),
        "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "json_for_script": json_for_script,
        "desc_yaml": _desc_yaml,
        "shrunk_line": shrunk_line,
        "top_failures": notable[:SUMMARY_TOP_FAILURES],
        "skip_reasons": skip_reasons({"outcome": c.outcome, "message": c.message} for c in results.cases),
        "levels_sorted": _levels_sorted,
        **classes_context(results),
    }


def classes_context(results: Results) -> dict[str, Any]:
    """The known findings the run hit and the accuracy class per operator x data type
    (report/classes.py), computed from the cases as written."""
    raw = [c.raw or {"outcome": c.outcome, "kind": c.kind} for c in results.cases]
    table = accuracy_classes(raw)
    types = sorted({dt for row in table.values() for dt in row}, key=lambda t: (t != "FLOAT32", t))
    return {
        "known_findings": finding_counts(raw),
        "accuracy_classes": table,
        "class_types": types,
        "class_ladder": LADDER,
    }


def render_html(results: Results) -> str:
    return _environment(autoescape=True).get_template("index.html.j2").render(build_context(results))


def render_markdown(results: Results, html_name: str = "index.html") -> str:
    context = build_context(results)
    context["html_name"] = html_name
    return _environment(autoescape=False).get_template("summary.md.j2").render(context)


def write_reports(report_dir: str | Path) -> list[Path]:
    """Read report_dir/results.json and write index.html and summary.md beside it.

    Raises ResultsError when results.json is missing or unusable. Returns the written paths."""
    report_dir = Path(report_dir)
    results = load_results(report_dir / "results.json")
    html_path = report_dir / "index.html"
    md_path = report_dir / "summary.md"
    html_path.write_text(render_html(results), encoding="utf-8")
    md_path.write_text(render_markdown(results), encoding="utf-8")
    return [html_path, md_path]
