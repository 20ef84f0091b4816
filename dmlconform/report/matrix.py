"""The outcome matrix: operator x feature level x data type cells, coloured by pass rate.

Levels and data types have an order people expect ("10_0" after "6_4", FLOAT32 before FLOAT16)
that the other tables of the report follow too, so the sort keys live here with the matrix.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from dmlconform.report.results_reader import FAILING, OK, Results


def level_key(level: str) -> tuple[int, ...]:
    """Feature levels sort numerically ("10_0" after "6_4")."""
    return tuple(int(p) for p in re.findall(r"\d+", level)) or (10**6,)


def type_key(name: str) -> tuple[int, str]:
    """Floats first, then the rest by name; FLOAT32 before FLOAT16 (widest first)."""
    order = {"FLOAT64": 0, "FLOAT32": 1, "FLOAT16": 2}
    return (order.get(name, 3), name)


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


def build_matrix(results: Results) -> Matrix:
    cells: dict[tuple[str, str, str], Cell] = defaultdict(Cell)
    for case in results.cases:
        cell = cells[(case.operator, case.feature_level, case.data_type)]
        cell.counts[case.outcome] += 1
        cell.illegal += int(case.kind == "validation" and case.expected == "illegal")
    declared = [str(d) for d in results.data.get("data_types") or []]
    seen_types = {k[2] for k in cells}
    data_types = [d for d in declared if d in seen_types] + sorted(seen_types - set(declared), key=type_key)
    return Matrix(
        operators=sorted({k[0] for k in cells}),
        levels=sorted({k[1] for k in cells}, key=level_key),
        data_types=data_types,
        cells=dict(cells),
    )
