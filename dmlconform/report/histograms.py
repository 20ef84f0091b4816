"""The per operator and data type histograms: max ULP error, and error over budget.

Drawn as inline SVG by the template from the geometry computed here (bars, ticks, the budget's
marker), so that the page needs no chart library and every label in it is autoescaped.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dmlconform.report.formatting import format_number
from dmlconform.report.results_reader import CaseRecord, Results

CHART_WIDTH, CHART_HEIGHT = 300, 130


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


_N_ULP = _ULP_MAX_EXP - _ULP_MIN_EXP + 3  # 0 ULP, the log2 bins, inf/NaN
_N_RATIO = _RATIO_MAX_EXP - _RATIO_MIN_EXP + 2


def build_charts(results: Results) -> list[dict[str, Any]]:
    """Per operator and data type: the ULP error histogram and the error/budget ratio histogram."""
    groups: dict[tuple[str, str], list[CaseRecord]] = defaultdict(list)
    for case in results.cases:
        if case.max_ulp is not None:
            groups[(case.operator, case.data_type)].append(case)
    charts = []
    for (op, dt), cases in sorted(groups.items()):
        failing = sum(1 for c in cases if c.ratio is not None and c.ratio > 1)
        charts.append(
            {
                "operator": op,
                "data_type": dt,
                "ulp": _ulp_chart(op, dt, cases),
                "ratio": _ratio_chart(op, dt, cases),
                "over": failing,
            }
        )
    return charts


def _budget_bin(budget: float | None) -> int | None:
    """The budget's ULP bin; None when it has no place on the axis (none, zero or infinite)."""
    if budget is not None and budget > 0 and math.isfinite(budget):
        return _ulp_bin(budget)
    return None


def _ulp_counts(cases: Sequence[CaseRecord]) -> tuple[list[int], list[bool], float | None]:
    """Cases per ULP bin, whether a bin holds a case over its budget, and the group's budget
    (the most common one: the marker stands for the group, whose cases may differ)."""
    ulp_counts = [0] * _N_ULP
    over = [False] * _N_ULP
    budgets: Counter = Counter()
    for case in cases:
        b = _ulp_bin(case.max_ulp)  # type: ignore[arg-type]
        ulp_counts[b] += 1
        if case.ratio is not None and case.ratio > 1:
            over[b] = True
        if case.budget_ulp is not None:
            budgets[case.budget_ulp] += 1
    budget = budgets.most_common(1)[0][0] if budgets else None
    return ulp_counts, over, budget


def _ulp_window(ulp_counts: list[int], budget: float | None) -> tuple[list[int], int, int]:
    """The bins drawn (0 ULP, the log bins from lo to hi, inf/NaN) and lo, hi: empty log bins
    are trimmed on both sides, to one past the populated range and the budget's bin, so that
    what is populated fills the chart."""
    used = [i for i in range(1, _N_ULP - 1) if ulp_counts[i]]
    budget_bin = _budget_bin(budget)
    if budget_bin is not None:
        used.append(budget_bin)
    lo, hi = (min(used), max(used)) if used else (1, 1)
    lo, hi = max(1, lo - 1), min(_N_ULP - 2, hi + 1)
    return [0, *range(lo, hi + 1), _N_ULP - 1], lo, hi


def _ulp_ticks(keep: list[int], lo: int, hi: int) -> dict[int, str]:
    """Labels by bin position: every power of four, every power of two on a narrow range."""
    ticks: dict[int, str] = {0: "0"}
    for pos, b in enumerate(keep[1:-1], start=1):
        e = b - 1 + _ULP_MIN_EXP
        if e % 2 == 0 or hi - lo < 8:
            ticks[pos] = _power_label(e)
    ticks[len(keep) - 1] = "inf"
    return ticks


def _ulp_chart(op: str, dt: str, cases: Sequence[CaseRecord]) -> Chart:
    ulp_counts, over, budget = _ulp_counts(cases)
    keep, lo, hi = _ulp_window(ulp_counts, budget)
    bins = [(_ulp_label(b), ulp_counts[b], over[b]) for b in keep]
    marker = None
    budget_bin = _budget_bin(budget)
    if budget_bin is not None and budget_bin in keep:
        marker = keep.index(budget_bin) + 1.0  # the budget is the upper edge of its bin
    return _histogram(
        f"{op} {dt}: max ULP error ({len(cases)} cases)",
        "max ULP error (log2 bins), count on a log scale",
        bins,
        _ulp_ticks(keep, lo, hi),
        marker,
        f"budget {format_number(budget)} ULP" if budget is not None else "",
    )


def _ratio_label(b: int) -> str:
    if b == _N_RATIO - 1:
        return "inf/NaN x budget"
    if b == 0:
        return f"0 to {_power_label(_RATIO_MIN_EXP)} x budget"
    e = b + _RATIO_MIN_EXP
    return f"({_power_label(e - 1)}, {_power_label(e)}] x budget"


def _ratio_chart(op: str, dt: str, cases: Sequence[CaseRecord]) -> Chart:
    """Always shows both sides of the budget (the bins (1/2, 1] and (1, 2]), whatever the cases."""
    ratio_counts = [0] * _N_RATIO
    for case in cases:
        if case.ratio is not None:
            ratio_counts[_ratio_bin(case.ratio)] += 1
    one = -_RATIO_MIN_EXP  # the bin (1/2, 1]: the last one inside the budget
    used = [b for b in range(_N_RATIO - 1) if ratio_counts[b]] + [one, one + 1]
    keep = [*range(max(0, min(used) - 1), min(_N_RATIO - 2, max(used) + 1) + 1), _N_RATIO - 1]
    rbins = [(_ratio_label(b), ratio_counts[b], b > one) for b in keep]
    rticks = {pos: _power_label(b + _RATIO_MIN_EXP) for pos, b in enumerate(keep[:-1]) if (b - one) % 2 == 0}
    rticks[len(keep) - 1] = "inf"
    return _histogram(
        f"{op} {dt}: error / budget",
        "max ULP / budget ULP (log2 bins); right of the line fails",
        rbins,
        rticks,
        float(keep.index(one) + 1),
        "budget",
    )
