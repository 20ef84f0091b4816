"""The findings registry (``findings.yaml``): what each disagreement and failure is, and why.

A release sweep sees three kinds of evidence: CreateOperator / CompileOperator disagreements
(``matrix``), failing cases of conformance runs, and reproducers replayed on each release. Each
finding claims some of them: ``acceptance`` entries by the rule a probe breaks, DirectML's verdict,
the stage that gave it and the operator (optionally the fused activation's type and a desc
predicate, ``when``: predicates.py), ``cases`` globs by case id (optionally only cases of one
reduction length), ``reproducers`` by the replay outcome that shows it. Whatever no finding
claims is *undecided*: the sweep reports it, the published table lists it and ``publish`` fails,
so a new disagreement cannot hide behind an old decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from dmlconform.errors import STAGES
from dmlconform.releases import predicates
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


#: The verdicts an acceptance claim may explain (a failed answer is no verdict: nothing to explain).
CLAIM_VERDICTS = ("accepted", "refused")
CLAIM_KEYS = ("rule", "verdict", "stage", "operator", "activation", "when")


@dataclass(frozen=True)
class Claim:
    """A disagreement a finding explains: DirectML's ``verdict`` at ``stage`` on a probe of one of
    ``operators`` that the spec says breaks ``rule`` (``legal`` for a legal probe), optionally
    only with the fused ``activation`` and only where the desc predicate ``when`` holds.

    ``stage`` is where DirectML answered: a refusal by CreateOperator (``create``) is not one by
    CompileOperator (``compile``). An accepted probe got through every stage asked, so a claim
    that ``create`` accepts it (what validating a desc is about) covers it, as does one that
    ``compile`` does; ``execute`` covers only answers of a probe that was executed."""

    rule: str
    verdict: str
    stage: str
    operators: tuple[str, ...]
    activation: str | None = None
    when: predicates.Predicate | None = None

    @classmethod
    def from_yaml(cls, raw: Any, finding: str) -> Claim:
        def bad(message: str) -> ValueError:
            return ValueError(f"finding {finding}: acceptance claim {raw!r}: {message}")

        if not isinstance(raw, dict):
            raise bad("a claim is a mapping")
        unknown = [k for k in raw if k not in CLAIM_KEYS]
        if unknown:
            raise bad(f"unknown key {unknown[0]!r} (known: {', '.join(CLAIM_KEYS)})")
        for key in ("rule", "verdict", "stage", "operator"):
            if raw.get(key) in (None, "", []):
                raise bad(f"needs {key!r} (a claim names the rule, verdict, stage and operator)")
        if raw["verdict"] not in CLAIM_VERDICTS:
            raise bad(f"verdict is one of {', '.join(CLAIM_VERDICTS)}")
        if raw["stage"] not in STAGES:
            raise bad(f"stage is one of {', '.join(STAGES)}")
        ops = raw["operator"] if isinstance(raw["operator"], list) else [raw["operator"]]
        try:
            when = predicates.parse(raw.get("when"))
        except ValueError as exc:
            raise bad(f"when: {exc}") from None
        return cls(
            rule=str(raw["rule"]),
            verdict=str(raw["verdict"]),
            stage=str(raw["stage"]),
            operators=tuple(str(o) for o in ops),
            activation=raw.get("activation"),
            when=when,
        )

    def covers(self, rule: str, answer: Answer) -> bool:
        """Whether this claim explains DirectML's ``answer`` on a probe breaking ``rule``."""
        if rule != self.rule or answer.verdict != self.verdict or answer.operator not in self.operators:
            return False
        if not _at(self.verdict, self.stage, answer.stage):
            return False
        if self.activation not in (None, answer.activation):
            return False
        return self.when is None or (
            answer.desc is not None and self.when.holds(answer.desc, answer.data_type)
        )


def _at(verdict: str, claimed: str, answered: str | None) -> bool:
    """A refusal is claimed at the stage that gave it; an acceptance at any stage it got through."""
    if answered not in STAGES:
        return False
    if verdict == "accepted":
        return STAGES.index(claimed) <= STAGES.index(answered)
    return claimed == answered


@dataclass(frozen=True)
class Answer:
    """What a claim is held against: DirectML's ``verdict`` at ``stage`` on a desc of ``operator``
    (with its fused ``activation``, its input ``data_type`` and the ``desc`` itself for ``when``)."""

    verdict: str
    stage: str | None
    operator: str
    activation: str | None = None
    desc: Any = None
    data_type: str | None = None


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

    def explain_disagreement(self, rules: tuple[str, ...], answer: Answer) -> list[str]:
        """The findings that together explain DirectML's ``answer`` on a probe the spec says
        breaks ``rules`` (empty: legal): every rule must be claimed, else []."""
        wanted = rules or ("legal",)
        found: list[str] = []
        for rule in wanted:
            owner = next(
                (f.id for f in self.findings for c in f.acceptance if c.covers(rule, answer)),
                None,
            )
            if owner is None:
                return []
            if owner not in found:
                found.append(owner)
        return found

    def explain_judged(self, judged: Any, spec: Any) -> list[str]:
        """:meth:`explain_disagreement` for a judged probe (``matrix.Judged``): the rules the spec
        says it breaks, DirectML's verdict and the stage that gave it, its operator, fused
        activation, data type and desc."""
        desc = judged.probe.desc
        answer = Answer(
            judged.verdict,
            judged.stage,
            desc.operator,
            activation_of(desc, spec),
            desc,
            judged.probe.data_type,
        )
        return self.explain_disagreement(judged.expected, answer)


def _finding(raw: dict[str, Any], decisions: dict[str, str]) -> Finding:
    decision = raw["decision"]
    if decision not in decisions:
        raise ValueError(f"finding {raw.get('id')}: unknown decision {decision!r}")
    return Finding(
        id=str(raw["id"]),
        title=str(raw["title"]),
        decision=decision,
        evidence=" ".join(str(raw["evidence"]).split()),
        acceptance=tuple(Claim.from_yaml(c, str(raw["id"])) for c in raw.get("acceptance") or ()),
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
