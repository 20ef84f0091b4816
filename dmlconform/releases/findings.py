"""The findings registry (``findings.yaml``): what each disagreement and failure is, and why.

A release sweep sees three kinds of evidence: CreateOperator disagreements (``matrix``), failing
cases of conformance runs, and reproducers replayed on each release. Each finding claims some of
them: ``acceptance`` entries by the rule a probe breaks and DirectML's verdict (optionally the
fused activation's type or the operator), ``cases`` globs by case id (optionally only cases of
one reduction length), ``reproducers`` by the replay outcome that
shows it. Whatever no finding claims is *undecided*: the sweep reports it and the published table
lists it, so a new disagreement cannot hide behind an old decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from dmlconform.runner.expect import Expectation
from dmlconform.specification.desc import ActivationDesc

DECISIONS = (
    "spec-corrected",
    "directml-lax",
    "docs-contract",
    "directml-bug",
    "directml-precision",
    "stack",
)


@dataclass(frozen=True)
class Claim:
    """A CreateOperator disagreement a finding explains: DirectML's ``verdict`` on a probe the
    spec says breaks ``rule`` (``legal`` for a legal probe), optionally only with ``activation``
    or only for ``operator``."""

    rule: str
    verdict: str
    activation: str | None = None
    operator: str | None = None


@dataclass(frozen=True)
class Reproducer:
    path: str
    shows: str  # the replay outcome (passed | failed) that shows the finding


@dataclass(frozen=True)
class CaseClaim:
    """Failing cases a finding explains: ids matching ``pattern`` (a glob, brackets literal, as in
    --expect files), and only those reducing ``reduction_length`` elements when that is given
    (a case id does not say it: a metamorphic relation's MVN1 side over one-element slices)."""

    pattern: str
    reduction_length: int | None = None

    @classmethod
    def from_yaml(cls, raw: str | dict[str, Any]) -> CaseClaim:
        return cls(raw) if isinstance(raw, str) else cls(str(raw["id"]), raw.get("reduction_length"))


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    decision: str
    evidence: str
    acceptance: tuple[Claim, ...] = ()
    cases: tuple[CaseClaim, ...] = ()
    reproducers: tuple[Reproducer, ...] = ()
    experiment: str | None = None

    def claims_case(self, case_id: str, reduction_length: int | None = None) -> bool:
        return any(
            Expectation(c.pattern, self.id, 0).matches(case_id)
            and c.reduction_length in (None, reduction_length)
            for c in self.cases
        )


@dataclass(frozen=True)
class Registry:
    decisions: dict[str, str]
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    def get(self, finding_id: str) -> Finding:
        for f in self.findings:
            if f.id == finding_id:
                return f
        raise KeyError(finding_id)

    def explain_case(self, case_id: str, reduction_length: int | None = None) -> str | None:
        """The first finding that claims a failing case, or None."""
        return next((f.id for f in self.findings if f.claims_case(case_id, reduction_length)), None)

    def explain_disagreement(
        self, rules: tuple[str, ...], verdict: str, activation: str | None, operator: str | None = None
    ) -> list[str]:
        """The findings that together explain DirectML answering ``verdict`` on a probe the spec
        says breaks ``rules`` (empty: legal): every rule must be claimed, else []."""
        wanted = rules or ("legal",)
        found: list[str] = []
        for rule in wanted:
            owner = next(
                (
                    f.id
                    for f in self.findings
                    for c in f.acceptance
                    if c.rule == rule
                    and c.verdict == verdict
                    and c.activation in (None, activation)
                    and c.operator in (None, operator)
                ),
                None,
            )
            if owner is None:
                return []
            if owner not in found:
                found.append(owner)
        return found

    def explain_judged(self, judged: Any, spec: Any) -> list[str]:
        """:meth:`explain_disagreement` for a judged probe (``matrix.Judged``): the rules the spec
        says it breaks, DirectML's verdict, its fused activation and its operator."""
        desc = judged.probe.desc
        return self.explain_disagreement(
            judged.expected, judged.verdict, activation_of(desc, spec), desc.operator
        )


def _finding(raw: dict[str, Any], decisions: dict[str, str]) -> Finding:
    decision = raw["decision"]
    if decision not in decisions:
        raise ValueError(f"finding {raw.get('id')}: unknown decision {decision!r}")
    return Finding(
        id=str(raw["id"]),
        title=str(raw["title"]),
        decision=decision,
        evidence=" ".join(str(raw["evidence"]).split()),
        acceptance=tuple(Claim(**c) for c in raw.get("acceptance") or ()),
        cases=tuple(CaseClaim.from_yaml(c) for c in raw.get("cases") or ()),
        reproducers=tuple(Reproducer(**r) for r in raw.get("reproducers") or ()),
        experiment=raw.get("experiment"),
    )


def parse(text: str) -> Registry:
    raw = yaml.safe_load(text)
    decisions = {str(k): str(v) for k, v in raw["decisions"].items()}
    if set(decisions) != set(DECISIONS):
        raise ValueError(f"decisions must be exactly {', '.join(DECISIONS)}")
    findings = tuple(_finding(f, decisions) for f in raw["findings"])
    ids = [f.id for f in findings]
    if len(set(ids)) != len(ids):
        raise ValueError("finding ids must be unique")
    return Registry(decisions, findings)


@cache
def registry() -> Registry:
    """The project's findings (``findings.yaml`` beside this module)."""
    text = resources.files("dmlconform.releases").joinpath("findings.yaml").read_text(encoding="utf-8")
    return parse(text)


def activation_of(desc: Any, spec: Any) -> str | None:
    """The fused activation's type of a desc (None without one): what an acceptance claim may name."""
    op = spec.operator(desc.operator)
    for m in op.members:
        if m.type == "activation":
            act = desc.members.get(m.name)
            if isinstance(act, ActivationDesc):
                return act.type
    return None
