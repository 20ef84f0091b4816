"""The agreement matrix: the spec's verdicts beside DirectML's, per release, operator and rule.

Pure functions of (spec, corpus, answers): nothing here starts DirectML, so the published
table can be rebuilt from the answers files alone and the analysis is tested without Wine.

A probe is *expected* legal or illegal by the spec at the release's own maximum feature level
(:func:`judge`); a probe generated at a lower level keeps its generated level in the matrix (the
"level" column) but is judged where DirectML judges it. Two views:

- :func:`acceptance`: the probes generated at the release's level and below, by operator, the
  rules the spec says they break at the release's level (``legal`` for none) and generated level:
  legal accepted / refused, illegal refused / accepted (refusals counted by stage too), the
  answers that failed (neither accepted nor refused: no verdict, so neither agreement nor
  disagreement), and those DirectML cannot be asked.
- :func:`availability`: the level-bound changes of the spec (``spec-diff`` from the first level to
  the last: operators introduced, activations fusable from a level, rules switched on or off,
  support rows) held against the releases whose maximum levels straddle each one. The witnesses
  are the corpus's probes that break exactly the change's rule on the lower release's level and
  nothing on the upper one's; each release on either side must answer as its own level says.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from dmlconform.releases.acceptance import (
    ACCEPTED,
    ERROR,
    FAILED,
    INEXPRESSIBLE,
    REFUSED,
    Probe,
    ReleaseAnswers,
)
from dmlconform.specdiff.compare import level_diff
from dmlconform.specification.spec import Spec
from dmlconform.specification.validate import validate

LEGAL = "legal"


@dataclass(frozen=True)
class Judged:
    """A probe, DirectML's verdict, and the rules the spec says it breaks at the release's level;
    ``stage`` where DirectML answered (``ReleaseAnswers.stage``: the stage that refused or
    failed, the last one asked for an accepted probe), ``hresult`` that of a failed answer."""

    release: str
    probe: Probe
    verdict: str
    expected: tuple[str, ...]  # () : legal at the release's level
    stage: str | None = None
    hresult: int | None = None

    @property
    def expect_key(self) -> str:
        return "+".join(self.expected) if self.expected else LEGAL

    @property
    def asked(self) -> bool:
        return self.verdict in (ACCEPTED, REFUSED)

    @property
    def agrees(self) -> bool | None:
        """True / False where DirectML answered; None where it could not be asked."""
        if not self.asked:
            return None
        return (self.verdict == ACCEPTED) == (not self.expected)


class Expectations:
    """validate() at a level, memoised per (probe, level): ten releases share five levels."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self._memo: dict[tuple[str, str], tuple[str, ...]] = {}

    def __call__(self, probe: Probe, level: str) -> tuple[str, ...]:
        key = (probe.id, level)
        found = self._memo.get(key)
        if found is None:
            found = tuple(sorted({v.rule for v in validate(probe.desc, level, self.spec)}))
            self._memo[key] = found
        return found


def judge(expect: Expectations, probes: Iterable[Probe], answers: ReleaseAnswers) -> list[Judged]:
    out = []
    for p in probes:
        verdict = answers.verdicts.get(p.id)
        if verdict is not None:
            out.append(
                Judged(
                    answers.release,
                    p,
                    verdict,
                    expect(p, answers.max_feature_level),
                    answers.stage(p.id),
                    answers.hresults.get(p.id),
                )
            )
    return out


@dataclass
class Cell:
    """Counts of one matrix cell, by verdict; ``refused_at`` the refusals by stage."""

    accepted: int = 0
    refused: int = 0
    failed: int = 0
    inexpressible: int = 0
    error: int = 0
    refused_at: dict[str, int] = field(default_factory=dict)

    def add(self, verdict: str, stage: str | None = None) -> None:
        setattr(self, verdict, getattr(self, verdict) + 1)
        if verdict == REFUSED:
            key = stage or "?"
            self.refused_at[key] = self.refused_at.get(key, 0) + 1

    def merge(self, other: Cell) -> None:
        for v in (ACCEPTED, REFUSED, FAILED, INEXPRESSIBLE, ERROR):
            setattr(self, v, getattr(self, v) + getattr(other, v))
        for stage, n in other.refused_at.items():
            self.refused_at[stage] = self.refused_at.get(stage, 0) + n

    @property
    def total(self) -> int:
        return self.accepted + self.refused + self.failed + self.inexpressible + self.error


@dataclass
class Matrix:
    """One release's acceptance matrix: ``cells[(operator, expect_key, generated level)]``."""

    release: str
    level: str
    cells: dict[tuple[str, str, str], Cell] = field(default_factory=dict)

    def by_operator(self) -> dict[str, dict[str, Cell]]:
        """operator -> {"legal": Cell, "illegal": Cell} summed over rules and levels."""
        out: dict[str, dict[str, Cell]] = defaultdict(lambda: {LEGAL: Cell(), "illegal": Cell()})
        for (op, key, _), cell in self.cells.items():
            out[op][LEGAL if key == LEGAL else "illegal"].merge(cell)
        return dict(sorted(out.items()))

    def by_rule(self) -> dict[tuple[str, str], tuple[Cell, list[str]]]:
        """(operator, expect_key) -> (counts over levels, the generated levels)."""
        out: dict[tuple[str, str], tuple[Cell, list[str]]] = {}
        for (op, key, lv), cell in sorted(self.cells.items()):
            total, levels = out.setdefault((op, key), (Cell(), []))
            total.merge(cell)
            levels.append(lv)
        return out

    def totals(self) -> dict[str, Cell]:
        out = {LEGAL: Cell(), "illegal": Cell()}
        for (_, key, _), cell in self.cells.items():
            out[LEGAL if key == LEGAL else "illegal"].merge(cell)
        return out


def acceptance(spec: Spec, judged: list[Judged], release: str, level: str) -> Matrix:
    """The matrix of the probes generated at ``level`` (the release's) and below."""
    top = spec.level(level)
    m = Matrix(release, level)
    for j in judged:
        if spec.level(j.probe.level) <= top:
            m.cells.setdefault((j.probe.operator, j.expect_key, j.probe.level), Cell()).add(
                j.verdict, j.stage
            )
    return m


def disagreements(judged: Iterable[Judged]) -> list[Judged]:
    """Every probe DirectML answered otherwise than the spec at its level (all generated levels)."""
    return [j for j in judged if j.agrees is False]


def failures(judged: Iterable[Judged]) -> list[Judged]:
    """Every probe whose answer failed (neither accepted nor refused; all generated levels)."""
    return [j for j in judged if j.verdict == FAILED]


# --------------------------------------------------------------------------------------------
# Availability: level-bound changes against straddling releases


@dataclass
class Boundary:
    """One level-bound change of the spec and what the releases on either side said.

    ``below`` / ``above``: (release, level) with level < / >= ``level``; ``results``: per
    release, (agreeing answers, witnesses asked); ``witnesses``: probe ids (empty where none
    exists or the change is not straddled)."""

    operator: str
    level: str
    kind: str
    rule: str
    subject: str
    below: list[tuple[str, str]]
    above: list[tuple[str, str]]
    witnesses: list[str] = field(default_factory=list)
    results: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def straddled(self) -> bool:
        return bool(self.below) and bool(self.above)

    @property
    def agrees(self) -> bool | None:
        if not self.straddled or not self.witnesses:
            return None
        return all(ok == n for ok, n in self.results.values())

    def reason(self) -> str:
        if not self.below:
            return f"no release here is below {self.level}"
        if not self.above:
            return f"no release here reaches {self.level}"
        if not self.witnesses:
            return "no probe breaks this rule alone on one side and nothing on the other"
        return ""


def spec_boundaries(spec: Spec) -> list[tuple[str, str, str, str, str]]:
    """(operator, level, kind, rule, subject) of every rule-bound change from the first level to
    the last (``spec-diff``); one entry per (operator, level, rule)."""
    levels = spec.levels
    diff = level_diff(spec, levels[0], levels[-1])
    out: dict[tuple[str, str, str], tuple[str, str, str, str, str]] = {}
    for op, changes in diff.operators.items():
        for c in changes:
            if c.rule:
                key = (op, c.level, c.rule)
                if key in out:
                    prev = out[key]
                    out[key] = (*prev[:4], f"{prev[4]}, {c.subject}")
                else:
                    out[key] = (op, c.level, c.kind, c.rule, c.subject)
    return list(out.values())


def availability(
    spec: Spec, expect: Expectations, probes: list[Probe], releases: list[ReleaseAnswers]
) -> list[Boundary]:
    """Each level-bound change held against the releases that straddle it (see the module doc)."""
    by_release = {a.release: a for a in releases}
    reaches = {a.release: spec.level(a.max_feature_level) for a in releases}  # resolved once
    out = []
    for op, level, kind, rule, subject in spec_boundaries(spec):
        boundary = spec.level(level)
        below = [(a.release, a.max_feature_level) for a in releases if reaches[a.release] < boundary]
        above = [(a.release, a.max_feature_level) for a in releases if reaches[a.release] >= boundary]
        b = Boundary(op, level, kind, rule, subject, below, above)
        out.append(b)
        if not b.straddled:
            continue
        low = max((lv for _, lv in below), key=spec.level)
        high = min((lv for _, lv in above), key=spec.level)
        for p in probes:
            if p.operator != op:
                continue
            at_low, at_high = expect(p, low), expect(p, high)
            relaxed = at_low == (rule,) and not at_high
            restricted = not at_low and at_high == (rule,)
            if relaxed or restricted:
                b.witnesses.append(p.id)
        if not b.witnesses:
            continue
        ids = set(b.witnesses)
        witnesses = [p for p in probes if p.id in ids]
        for release, lv in below + above:
            # At a release's own level a witness must still differ by this rule alone (a release
            # further down may see another rule too): only those judge this change.
            want: tuple[str, ...] = (rule,) if (release, lv) in below else ()
            own = [p for p in witnesses if expect(p, lv) == want]
            judged = [j for j in judge(expect, own, by_release[release]) if j.asked]
            b.results[release] = (sum(1 for j in judged if j.agrees), len(judged))
    return out
