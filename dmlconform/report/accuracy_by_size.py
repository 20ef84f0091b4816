"""Accuracy by problem size: how close to its error budget each operator and data type comes as
the reduction length grows, as a table of size bands and as a chart (error/budget against n).

A budget that holds for small n and not for large n is the typical accumulation bug; both views
put the worst case of each size where it can be seen and opened.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dmlconform.report.matrix import type_key
from dmlconform.report.results_reader import CaseRecord, Results

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
    ordered = sorted(rows.items(), key=lambda kv: (kv[0][0], type_key(kv[0][1])))
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


@dataclass
class _Scale:
    """Where a point goes: log10 of n across, log10 of error/budget up the main axis, or into
    the band above the break for a ratio past the clip (ordered there on a scale of its own)."""

    x_lo: int
    x_hi: int
    y_lo: int
    y_hi: int
    top: int  # the main axis's top edge: lower by the band and the gap when there is a band
    over_lo: float  # log10 of the band's smallest and largest finite ratios
    over_hi: float
    left: ClassVar[int] = _ACC_LEFT
    right: ClassVar[int] = ACC_WIDTH - _ACC_RIGHT
    bottom: ClassVar[int] = ACC_HEIGHT - _ACC_BOTTOM
    band_top: ClassVar[int] = _ACC_TOP
    band_bottom: ClassVar[int] = _ACC_TOP + _ACC_BAND

    def px(self, n: float) -> float:
        return round(
            self.left + (math.log10(n) - self.x_lo) / (self.x_hi - self.x_lo) * (self.right - self.left), 1
        )

    def py(self, e: float) -> float:
        return round(self.bottom - (e - self.y_lo) / (self.y_hi - self.y_lo) * (self.bottom - self.top), 1)

    def py_over(self, e: float) -> float:
        """Inside the band, below its inf/NaN row: ordered, on a compressed log scale."""
        lo_y, hi_y = self.band_bottom - 5, self.band_top + 14
        if self.over_hi == self.over_lo:
            return round((lo_y + hi_y) / 2, 1)
        return round(lo_y - (e - self.over_lo) / (self.over_hi - self.over_lo) * (lo_y - hi_y), 1)

    def point(self, case: CaseRecord) -> Point:
        """The case's point, clipped to the floor, into the band or onto its inf/NaN row."""
        r = case.ratio
        assert r is not None
        n = max(case.reduction_length or 1, 1)
        if math.isnan(r) or math.isinf(r):
            y, clipped = float(self.band_top + 5), "top"
        elif r > 10.0**_ACC_CLIP_EXP:
            y, clipped = self.py_over(math.log10(r)), "over"
        elif r <= 10.0**self.y_lo:
            y, clipped = self.py(float(self.y_lo)), "floor"
        else:
            y, clipped = self.py(min(math.log10(r), float(self.y_hi))), ""
        return Point(self.px(n), y, n, r, case.id, clipped)

    def xticks(self) -> list[tuple[float, str]]:
        step = 1 if self.x_hi - self.x_lo <= 8 else 2
        return [(self.px(10.0**e), _decade(e)) for e in range(self.x_lo, self.x_hi + 1, step)]

    def yticks(self) -> list[tuple[float, str]]:
        step = 1 if self.y_hi - self.y_lo <= 8 else 2
        return [
            (self.py(e), _decade(e) if e >= 0 else f"1e{e}") for e in range(self.y_lo, self.y_hi + 1, step)
        ]


def _scale(chosen: list[CaseRecord]) -> tuple[_Scale, list[float]]:
    """The axes for the chosen cases, and the ratios past the clip (drawn in the band). The main
    axis spans the finite ratios' decades from 0.1 or lower (never below the floor) to 10 or
    higher (never past the clip), so that the line at 1 always has room on both sides."""
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
    top = _ACC_TOP + (_ACC_BAND + _ACC_GAP if over else 0)
    over_finite = [math.log10(r) for r in over if math.isfinite(r)]
    over_lo, over_hi = (min(over_finite), max(over_finite)) if over_finite else (0.0, 0.0)
    return _Scale(x_lo, x_hi, y_lo, y_hi, top, over_lo, over_hi), over


def _worst_per_bin(
    groups: dict[tuple[str, str], list[CaseRecord]],
) -> dict[tuple[str, str], dict[int, CaseRecord]]:
    """The worst case per group and log2 bin of n; cases lacking either figure are left out."""
    picked: dict[tuple[str, str], dict[int, CaseRecord]] = {}
    for key, cases in groups.items():
        for case in cases:
            if case.ratio is None or case.reduction_length is None:
                continue
            b = math.ceil(math.log2(max(case.reduction_length, 1)))
            best = picked.setdefault(key, {}).get(b)
            if best is None or _worse(case.ratio, best.ratio):
                picked[key][b] = case
    return picked


def _worst_ratio(ratios: Iterable[float | None]) -> float | None:
    worst = None
    for ratio in ratios:
        if _worse(ratio, worst):
            worst = ratio
    return worst


def _type_order(picked: dict[tuple[str, str], Any], data_types: list[str] | None) -> list[str]:
    """The data types drawn: the run's order first, then any others widest first."""
    types = [t for t in (data_types or []) if any(k[1] == t for k in picked)]
    types += sorted({k[1] for k in picked} - set(types), key=type_key)
    return types


def _series(
    picked: dict[tuple[str, str], dict[int, CaseRecord]],
    types: list[str],
    colours: dict[str, str],
    scale: _Scale,
) -> list[Series]:
    """One series per group, by operator then data type, its points in order of n."""
    series = []
    for (op, dt), bins in sorted(picked.items(), key=lambda kv: (kv[0][0], types.index(kv[0][1]))):
        points = [scale.point(case) for case in sorted(bins.values(), key=lambda c: c.reduction_length or 0)]
        t = types.index(dt)
        series.append(
            Series(
                f"{op} {dt}",
                colours[op],
                points,
                _worst_ratio(case.ratio for case in bins.values()),
                operator=op,
                data_type=dt,
                marker=_MARKERS[t % len(_MARKERS)],
                dash=_DASHES[t % len(_DASHES)],
            )
        )
    return series


def _legend(
    series: list[Series], colours: dict[str, str], types: list[str]
) -> tuple[list[LegendEntry], list[LegendEntry]]:
    """The two legends: operators by colour (each with its worst ratio), data types by marker."""
    operators = [
        LegendEntry(op, colour=colours[op], worst=_worst_ratio(s.worst for s in series if s.operator == op))
        for op in sorted(colours)
    ]
    data_types = [
        LegendEntry(dt, marker=_MARKERS[i % len(_MARKERS)], dash=_DASHES[i % len(_DASHES)])
        for i, dt in enumerate(types)
    ]
    return operators, data_types


def accuracy_chart(
    groups: dict[tuple[str, str], list[CaseRecord]], data_types: list[str] | None = None
) -> AccuracyChart | None:
    """The chart for ``groups`` ((operator, data type) -> cases). Per group and log2 bin of n
    (ceil(log2 n), so that both sides of every power of two stay apart), the worst case is a
    point; the points of a group are joined in order of n. None when no case has both figures."""
    picked = _worst_per_bin(groups)
    if not picked:
        return None
    scale, over = _scale([c for bins in picked.values() for c in bins.values()])
    types = _type_order(picked, data_types)
    colours = operator_colours([k[0] for k in picked])
    series = _series(picked, types, colours, scale)
    operators, data_type_entries = _legend(series, colours, types)
    band_top, band_bottom = scale.band_top, scale.band_bottom
    return AccuracyChart(
        series,
        scale.xticks(),
        scale.yticks(),
        scale.py(0.0),
        (scale.left, scale.top, scale.right, scale.bottom),
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
