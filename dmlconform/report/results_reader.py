"""Loading results.json (docs/results-json.md) into a tolerant, typed model.

The report must render whatever an interrupted or older run left behind, so every field except the
case list is optional and missing values fall back to neutral defaults; only input that cannot be a
results file at all (missing, not JSON, no case list) raises :class:`ResultsError`, which the CLI
turns into a one-line error and exit status 2.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from dmlconform.report import record

SUPPORTED_SCHEMA_VERSIONS = (1,)
OUTCOMES = ("passed", "failed", "error", "xpassed", "xfailed", "skipped")
FAILING = frozenset({"failed", "error"})
# Outcomes worth a detailed entry (desc, worst element, replay): the failing ones, plus an
# unexpected pass, which means an xfail mark is stale.
NOTABLE = frozenset({"failed", "error", "xpassed"})
OK = frozenset({"passed", "xfailed"})
# How a stack's name reads in a report header ("DirectML stack"); other names show as written.
STACK_TITLES = {"directml": "DirectML"}


def skip_reasons(records: Iterable[dict[str, Any]]) -> list[tuple[str, int]]:
    """Why cases were skipped: each distinct reason with its count, most frequent first (a run
    that skips 412 cases says for what, once, not 412 times)."""
    counts: dict[str, int] = {}
    for r in records:
        if r.get("outcome") == "skipped":
            reason = str(r.get("message") or "no reason given").strip().splitlines()[0]
            counts[reason] = counts.get(reason, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


class ResultsError(Exception):
    """results.json is missing or cannot be read as a results file."""


@dataclass
class CaseRecord(record.CaseRecord):
    """One case of results.json as the report reads it: the record's fields (report/record.py)
    parsed tolerantly, ``raw`` as written for the failure details, and the figures derived from it."""

    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING

    @cached_property
    def max_ulp(self) -> float | None:
        return json_number(self.errors.get("max_ulp")) if self.errors else None

    @cached_property
    def max_abs(self) -> float | None:
        return json_number(self.errors.get("max_abs")) if self.errors else None

    @cached_property
    def budget_ulp(self) -> float | None:
        return json_number(self.errors.get("budget_ulp")) if self.errors else None

    @cached_property
    def ratio(self) -> float | None:
        """How far past (>1) or inside (<1) its budget the case landed: the worst element's
        error / budget (``errors.ratio``, else ``worst.abs / worst.budget_abs``), else, for
        records without an absolute budget, max_ulp / budget_ulp."""
        if not self.errors:
            return None
        exact = json_number(self.errors.get("ratio"))
        if exact is not None:
            return exact
        worst = self.errors.get("worst")
        if isinstance(worst, dict):  # the worst element is the one with the largest error / budget
            err, allowed = json_number(worst.get("abs")), json_number(worst.get("budget_abs"))
            if err is not None and allowed is not None:
                if err == 0 or allowed == math.inf:
                    return 0.0
                return err / allowed if allowed > 0 else math.inf
        ulp, budget = self.max_ulp, self.budget_ulp
        if ulp is None or budget is None:
            return None
        if budget <= 0:
            return math.inf if ulp > 0 else 0.0
        return ulp / budget

    @cached_property
    def aggregate(self) -> dict[str, float]:
        """The aggregate figures (shift, scale, residual; each over its bound, > 1 fails), the
        largest of each over the outputs; empty when the record has none."""
        out: dict[str, float] = {}
        outputs = (self.errors or {}).get("outputs")
        for figures in outputs.values() if isinstance(outputs, dict) else ():
            agg = figures.get("aggregate") if isinstance(figures, dict) else None
            for key, value in agg.items() if isinstance(agg, dict) else ():
                v = json_number(value)
                if v is not None and (key not in out or not v <= out[key]):
                    out[str(key)] = v
        return out

    @cached_property
    def aggregate_ratio(self) -> float | None:
        """The largest aggregate figure (None without any)."""
        return max(self.aggregate.values(), default=None)

    @classmethod
    def from_dict(cls, data: dict[str, Any], position: int) -> CaseRecord:
        if not isinstance(data, dict):
            raise ResultsError(f"case #{position} is not an object")
        outcome = str(data.get("outcome") or "error")
        errors = data.get("errors")
        index = data.get("index")
        return cls(
            id=str(data.get("id") or data.get("nodeid") or f"case-{position}"),
            outcome=outcome if outcome in OUTCOMES else "error",
            kind=str(data.get("kind") or ""),
            operator=str(data.get("operator") or ""),
            feature_level=str(data.get("feature_level") or ""),
            data_type=str(data.get("data_type") or ""),
            index=index if isinstance(index, int) else None,
            message=None if data.get("message") is None else str(data.get("message")),
            duration_s=json_number(data.get("duration_s")),
            regime=None if data.get("regime") is None else str(data.get("regime")),
            expected=None if data.get("expected") is None else str(data.get("expected")),
            rule=None if data.get("rule") is None else str(data.get("rule")),
            errors=errors if isinstance(errors, dict) else None,
            reproducer=None if data.get("reproducer") is None else str(data.get("reproducer")),
            replay=None if data.get("replay") is None else str(data.get("replay")),
            reduction_length=_int(data.get("reduction_length")),
            elements=_int(data.get("elements")),
            nodeid=str(data.get("nodeid") or ""),
            relation=_text(data.get("relation")),
            rules=[str(r) for r in data.get("rules") or [] if r is not None]
            if isinstance(data.get("rules"), list)
            else [],
            desc=data.get("desc") if isinstance(data.get("desc"), dict) else None,
            info=data.get("info") if isinstance(data.get("info"), dict) else None,
            expectation=_text(data.get("expectation")),
            known_finding=_text(data.get("known_finding")),
            models=data.get("models") if isinstance(data.get("models"), dict) else None,
            accuracy_class=_text(data.get("accuracy_class")),
            raw=data,
        )


@dataclass
class StackFact:
    """One fact of a backend's stack: its ``versions`` key, a label for people, and its value;
    ``values`` has one entry per distinct value when the shards of a merged run differ, each with
    the shards ("2/4") that had it (empty when there is a single value)."""

    key: str
    label: str
    values: list[tuple[str, list[str]]]

    @property
    def value(self) -> str:
        """The value, or every distinct value with its shards: "a (shard 1/2); b (shard 2/2)"."""
        if len(self.values) == 1:
            return self.values[0][0]
        return "; ".join(f"{v} ({_shards_text(shards)})" for v, shards in self.values)


def _shards_text(shards: list[str]) -> str:
    return ("shard " if len(shards) == 1 else "shards ") + ", ".join(shards)


@dataclass
class Stack:
    """What a backend reported of the software and hardware it ran on: the ``versions`` keys
    ``<name>.<fact>``, and ``<name>`` itself, its release. Generic: a backend adds stack facts by
    adding such keys (the directml backend: ``directml``, ``directml.wine``, ...)."""

    name: str
    facts: list[StackFact]

    @property
    def title(self) -> str:
        return f"{STACK_TITLES.get(self.name, self.name)} stack"

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(f.key for f in self.facts)


def stacks_of(
    versions: dict[str, Any],
    backend_name: str | None = None,
    shards: list[tuple[str, dict[str, Any]]] | None = None,
) -> list[Stack]:
    """The stacks in a ``versions`` table: one per name N with keys ``N.<fact>`` where N is the
    backend's name or itself a key (so a package named "zope.interface" is no stack). Facts keep
    the order the backend wrote them in, the release (key N) first. ``shards``: (shard, versions)
    of each shard of a merged run, whose differing values are all shown."""
    tables = shards or [("", versions)]
    keys: list[str] = list(dict.fromkeys(k for _, table in tables for k in table))
    names: list[str] = []
    for key in keys:
        name, dot, fact = key.partition(".")
        if dot and fact and name not in names and (name == backend_name or any(name in t for _, t in tables)):
            names.append(name)
    stacks = []
    for name in names:
        facts = []
        for key in [name, *(k for k in keys if k.startswith(name + ".") and k != name + ".")]:
            if not any(key in t for _, t in tables):
                continue
            grouped: dict[str, list[str]] = {}
            for shard, table in tables:
                grouped.setdefault(str(table[key]) if key in table else "(not reported)", []).append(shard)
            fact = key[len(name) + 1 :] if key != name else "release"
            if fact.startswith(name + "_"):
                fact = fact[len(name) + 1 :]  # "directml.directml_dll" reads "dll"
            values = list(grouped.items()) if len(grouped) > 1 else [(next(iter(grouped)), [])]
            facts.append(StackFact(key, fact.replace("_", " "), values))
        stacks.append(Stack(name, facts))
    return stacks


@dataclass
class Results:
    """A whole results.json; ``data`` is the parsed document for fields the model does not lift."""

    cases: list[CaseRecord]
    data: dict[str, Any]
    path: Path | None = None

    @property
    def backend(self) -> dict[str, Any]:
        backend = self.data.get("backend")
        return backend if isinstance(backend, dict) else {"name": str(backend or "?")}

    @property
    def backend_name(self) -> str:
        return str(self.backend.get("name") or "?")

    @property
    def versions(self) -> dict[str, Any]:
        versions = self.data.get("versions")
        return versions if isinstance(versions, dict) else {}

    @property
    def stacks(self) -> list[Stack]:
        """The backend's stack facts (see :func:`stacks_of`); for a merged run, over its shards
        (``merged_from`` carries the versions of a shard whose versions differ from the first's)."""
        merged = self.data.get("merged_from")
        shards = None
        if isinstance(merged, list) and merged:
            shards = [
                (
                    str(m.get("shard") or i + 1),
                    m["versions"] if isinstance(m.get("versions"), dict) else self.versions,
                )
                for i, m in enumerate(merged)
                if isinstance(m, dict)
            ]
        return stacks_of(self.versions, self.backend_name, shards or None)

    @property
    def coverage(self) -> dict[str, dict[str, dict[str, int]]]:
        coverage = self.data.get("coverage")
        return coverage if isinstance(coverage, dict) else {}

    @property
    def complete(self) -> bool:
        """False when the run says it did not finish (interrupted, stopped early, still running).
        A file without the field (written before it existed) cannot tell and counts as complete."""
        return self.data.get("complete") is not False

    def incomplete_reason(self) -> str | None:
        """One line on why the run is incomplete, or None when it is complete."""
        if self.complete:
            return None
        reason = str(self.data.get("stop_reason") or self.data.get("status") or "incomplete")
        collected = self.data.get("collected")
        of = f" of {collected}" if isinstance(collected, int) else ""
        return f"{reason}, {len(self.cases)}{of} cases ran"

    def summary(self) -> dict[str, int]:
        """Counts recomputed from the cases, so a hand-edited or truncated summary cannot lie."""
        counts = {"total": len(self.cases), **{o: 0 for o in OUTCOMES}}
        for case in self.cases:
            counts[case.outcome] += 1
        counts["errors"] = counts.pop("error")
        return counts


def json_number(value: Any) -> float | None:
    """A float from JSON, where a writer may have spelled infinity/NaN as strings."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def results_path(path: str | Path) -> Path:
    """Accept either a results.json file or the report directory holding one."""
    path = Path(path)
    return path / "results.json" if path.is_dir() else path


def load_results(path: str | Path) -> Results:
    """Read and model a results.json (or a report directory); ResultsError when unusable."""
    file = results_path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsError(f"{file}: no such file") from None
    except OSError as exc:
        raise ResultsError(f"{file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ResultsError(f"{file}: not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{file}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise ResultsError(f"{file}: not a dmlconform results file (no 'cases' list)")
    version = data.get("schema_version", 1)
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise ResultsError(f"{file}: unsupported schema_version {version!r}")
    cases = [CaseRecord.from_dict(case, i) for i, case in enumerate(data["cases"])]
    return Results(cases=cases, data=data, path=file)
