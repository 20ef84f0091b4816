"""``dmlconform report releases R1 R2 ...``: one backend's runs on several releases, side by side.

A run names the release of the stack it ran on (``versions[<backend>]``, e.g. DirectML's
FileVersion) and the feature level it was judged at. Given the reports of runs on several
releases, this view orders them by release and shows, per release, the verdicts and the worst
error / budget per operator and data type, then, between consecutive releases, what changed:
the cases both ran whose outcome flipped (named), the cases whose error moved past the diff's
factor, and how many cases only one of them ran (runs judged at different feature levels share
the cases of the levels both reach: a case id names its level).

Reads results.json only, like ``report diff`` (whose comparison it reuses for each step), and
names no backend: the release is whatever the backend wrote as its own version.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from dmlconform.report.diff import DEFAULT_FACTOR, CaseChange, ErrorChange, diff_results
from dmlconform.report.results_reader import FAILING, OUTCOMES, Results, ResultsError

NUMERIC_KINDS = ("numeric", "metamorphic")


def release_of(results: Results) -> str:
    """The release a run's backend reported (``versions[<backend>]``), else the backend's name."""
    value = results.versions.get(results.backend_name)
    return str(value) if value else results.backend_name or "?"


def short_release(release: str) -> str:
    """``1.15.4+241025-1615.1.dml-1.15.fac7597`` -> ``1.15.4`` (build metadata dropped)."""
    return release.split("+", 1)[0].strip() or release


def release_key(release: str) -> tuple[Any, ...]:
    """Numbers compare as numbers (1.9.1 < 1.12.0); anything else sorts after, by text."""
    parts = re.findall(r"\d+", short_release(release))
    return (0, tuple(int(p) for p in parts)) if parts else (1, release)


@dataclass
class Worst:
    """The worst error / budget of one operator and data type in one run (and which case)."""

    ratio: float
    case: str


@dataclass
class Release:
    """One run: its release, level, verdict counts and worst ratios."""

    release: str
    level: str
    path: str
    summary: dict[str, int]
    spec_hash: str
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)  # operator -> outcome -> n
    worst: dict[tuple[str, str], Worst] = field(default_factory=dict)  # (operator, data type)

    @property
    def label(self) -> str:
        return short_release(self.release)

    def to_json(self) -> dict[str, Any]:
        return {
            "release": self.release,
            "label": self.label,
            "feature_level": self.level,
            "path": self.path,
            "summary": self.summary,
            "spec_hash": self.spec_hash,
            "outcomes": self.outcomes,
            "worst": [
                {"operator": op, "data_type": dt, "ratio": _finite(w.ratio), "case": w.case}
                for (op, dt), w in sorted(self.worst.items())
            ],
        }


@dataclass
class Step:
    """What changed from one release to the next."""

    older: str
    newer: str
    common: int
    to_failing: list[CaseChange]
    to_passing: list[CaseChange]
    error_changes: list[ErrorChange]
    only_newer: int
    only_newer_failing: int
    only_older: int

    def to_json(self) -> dict[str, Any]:
        def change(c: CaseChange) -> dict[str, Any]:
            return {"id": c.id, "before": c.before, "after": c.after, "message": c.message}

        return {
            "older": self.older,
            "newer": self.newer,
            "common": self.common,
            "to_failing": [change(c) for c in self.to_failing],
            "to_passing": [change(c) for c in self.to_passing],
            "error_changes": [
                {
                    "id": e.id,
                    "before_ulp": _finite(e.before_ulp),
                    "after_ulp": _finite(e.after_ulp),
                    "budget_ulp": _finite(e.budget_ulp),
                    "worse": e.worse,
                }
                for e in self.error_changes
            ],
            "only_newer": self.only_newer,
            "only_newer_failing": self.only_newer_failing,
            "only_older": self.only_older,
        }


@dataclass
class ReleasesView:
    releases: list[Release]
    steps: list[Step]
    backend: str

    @property
    def same_spec(self) -> bool:
        return len({r.spec_hash for r in self.releases}) <= 1

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "same_spec": self.same_spec,
            "releases": [r.to_json() for r in self.releases],
            "steps": [s.to_json() for s in self.steps],
        }


def _finite(x: float | None) -> float | str | None:
    if x is None:
        return None
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf" if x < 0 else "nan")


def _release(results: Results) -> Release:
    data = results.data
    rel = Release(
        release=release_of(results),
        level=str(data.get("feature_level") or ""),
        path=str(results.path),
        summary=results.summary(),
        spec_hash=str(data.get("spec_hash") or ""),
    )
    for case in results.cases:
        counts = rel.outcomes.setdefault(case.operator, dict.fromkeys(OUTCOMES, 0))
        counts[case.outcome] = counts.get(case.outcome, 0) + 1
        ratio = case.ratio
        if ratio is not None and not math.isfinite(ratio) and not case.failing:
            ratio = None  # a passing case with an undefined worst element (NaN where anything goes)
        if case.kind in NUMERIC_KINDS and ratio is not None:
            key = (case.operator, case.data_type or "")
            best = rel.worst.get(key)
            if best is None or not ratio <= best.ratio:
                rel.worst[key] = Worst(ratio, case.id)
    return rel


def releases_view(runs: list[Results], factor: float = DEFAULT_FACTOR) -> ReleasesView:
    """The runs ordered by release, and what changed between consecutive ones."""
    if not runs:
        raise ResultsError("no runs given")
    backends = {r.backend_name for r in runs}
    if len(backends) > 1:
        raise ResultsError(
            f"runs of different backends ({', '.join(sorted(backends))}): one backend's releases"
        )
    ordered = sorted(runs, key=lambda r: release_key(release_of(r)))
    labels = [short_release(release_of(r)) for r in ordered]
    if len(set(labels)) != len(labels):
        raise ResultsError(f"two runs of the same release ({', '.join(labels)}): one run per release")
    steps = []
    for old, new in zip(ordered, ordered[1:], strict=False):
        d = diff_results(old, new, factor=factor)
        old_ids = {c.id for c in old.cases}
        common = [c for c in new.cases if c.id in old_ids]
        only_newer = [c for c in new.cases if c.id not in old_ids]
        steps.append(
            Step(
                older=short_release(release_of(old)),
                newer=short_release(release_of(new)),
                common=len(common),
                to_failing=[c for c in d.regressions if c.before is not None],
                to_passing=d.fixed,
                error_changes=d.error_changes,
                only_newer=len(only_newer),
                only_newer_failing=sum(1 for c in only_newer if c.outcome in FAILING),
                only_older=len(d.removed),
            )
        )
    return ReleasesView([_release(r) for r in ordered], steps, ordered[0].backend_name)


# --------------------------------------------------------------------------------------------
# Rendering


def _ratio(w: Worst | None) -> str:
    if w is None:
        return "-"
    if not math.isfinite(w.ratio):
        return "inf"
    return f"{w.ratio:.3g}"


def _operators(view: ReleasesView) -> list[tuple[str, str]]:
    keys: set[tuple[str, str]] = set()
    for r in view.releases:
        keys |= set(r.worst)
    return sorted(keys)


def render_text(view: ReleasesView, limit: int = 20) -> str:
    lines = [f"{view.backend}: {len(view.releases)} release(s)"]
    if not view.same_spec:
        lines.append("warning: the runs were judged against different specs (spec_hash differs)")
    lines.append("")
    lines.append(
        f"{'release':<9} {'level':<6} {'total':>6} {'passed':>7} {'failed':>7} {'errors':>7} {'skipped':>8}"
    )
    for r in view.releases:
        s = r.summary
        lines.append(
            f"{r.label:<9} {r.level:<6} {s.get('total', 0):>6} {s.get('passed', 0):>7} {s.get('failed', 0):>7} "
            f"{s.get('errors', 0):>7} {s.get('skipped', 0):>8}"
        )
    lines += ["", "worst error / budget (numeric and metamorphic cases; > 1 fails):"]
    header = f"  {'operator':<36} {'type':<8} " + " ".join(f"{r.label:>8}" for r in view.releases)
    lines.append(header)
    for op, dt in _operators(view):
        cells = " ".join(f"{_ratio(r.worst.get((op, dt))):>8}" for r in view.releases)
        lines.append(f"  {op:<36} {dt:<8} {cells}")
    for s in view.steps:
        lines += [
            "",
            f"{s.older} -> {s.newer}: {s.common} cases in both: {len(s.to_failing)} now failing, "
            f"{len(s.to_passing)} now passing, {len(s.error_changes)} error change(s); "
            f"{s.only_newer} only in {s.newer} ({s.only_newer_failing} failing), {s.only_older} only in {s.older}",
        ]
        for title, changes in (("now failing", s.to_failing), ("now passing", s.to_passing)):
            for c in changes[:limit]:
                lines.append(f"  {title}: {c.id}  {c.before} -> {c.after}")
            if len(changes) > limit:
                lines.append(f"  ... {len(changes) - limit} more {title}")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|")


def render_markdown(view: ReleasesView, limit: int = 20, heading: str = "##") -> str:
    lines = [f"{heading} Release by release", ""]
    if not view.same_spec:
        lines += ["**The runs were judged against different specs (spec_hash differs).**", ""]
    lines += [
        "| release | level | total | passed | failed | errors | skipped |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in view.releases:
        s = r.summary
        lines.append(
            f"| {r.label} | {r.level} | {s.get('total', 0)} | {s.get('passed', 0)} | {s.get('failed', 0)} | "
            f"{s.get('errors', 0)} | {s.get('skipped', 0)} |"
        )
    lines += [
        "",
        "Worst error / budget per operator and data type (numeric and metamorphic cases; above 1 fails):",
        "",
        "| operator | type | " + " | ".join(r.label for r in view.releases) + " |",
        "|---|---|" + "---:|" * len(view.releases),
    ]
    for op, dt in _operators(view):
        cells = " | ".join(_ratio(r.worst.get((op, dt))) for r in view.releases)
        lines.append(f"| {op} | {dt} | {cells} |")
    lines += ["", f"{heading}# What changed between consecutive releases", ""]
    lines += [
        "| from | to | cases in both | now failing | now passing | error changes | only in the newer (failing) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for s in view.steps:
        lines.append(
            f"| {s.older} | {s.newer} | {s.common} | {len(s.to_failing)} | {len(s.to_passing)} | "
            f"{len(s.error_changes)} | {s.only_newer} ({s.only_newer_failing}) |"
        )
    for s in view.steps:
        flips = [("now failing", c) for c in s.to_failing] + [("now passing", c) for c in s.to_passing]
        if not flips:
            continue
        lines += ["", f"{s.older} -> {s.newer}:", ""]
        for title, c in flips[:limit]:
            lines.append(f"- {title}: `{_md(c.id)}` ({c.before} -> {c.after})")
        if len(flips) > limit:
            lines.append(f"- ... {len(flips) - limit} more")
    return "\n".join(lines) + "\n"


def render_json(view: ReleasesView) -> str:
    return json.dumps(view.to_json(), indent=1) + "\n"
