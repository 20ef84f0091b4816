"""DirectML's own verdicts on the spec's descs: every probe through CreateOperator, per release.

The spec's rules were written from the docs; a DirectML release is the implementation they
describe, and its ``CreateOperator`` (with ``CompileOperator``, which never refused what
CreateOperator accepted) is a verdict on any desc. The *corpus* is what the generators make of
the spec: at every feature level, ``legal`` descs per data type, and ``illegal`` descs per rule
that can be broken alone (each breaks that rule and nothing else at its level, with its data
type, layout and members drawn like any other). Every release is asked about the whole corpus,
whatever level a desc was generated at: a desc is judged against the spec *at the release's own
maximum feature level* (DirectML validates at the level it implements), so the descs generated
above a release's level are the evidence for the level-bound rules (``matrix.availability``).

The edge corpus (``dmlconform.generation.edges``) adds, per operator and level, every legal desc
at the edge of a rule made from one legal desc per data type: alignments of 16 and 2^31, stated
buffer sizes at their least and largest, outputs with permuted, overlapping or size-1 zero
strides, inputs read through zero or repeated strides, NaN and infinite Epsilons, 2^32 - 1
elements. It found F17 (an output's repeated strides), which no generated legal desc carried.

The corpus is a pure function of (spec, seed, counts): a probe's id names its operator, level,
kind, rule or data type and index, and the answers file keeps only ids and verdicts, so the
descs are re-made from the settings rather than stored ten times over.

Verdicts: ``accepted`` (S_OK), ``refused`` (E_INVALIDARG / E_NOTIMPL at CreateOperator or
CompileOperator), ``inexpressible`` (the desc breaks a desc-file rule that DirectML's C structs
cannot carry: a count that differs from its array, an omitted member; DirectML cannot be asked),
``error`` (anything else: a crash, a timeout, another HRESULT; never taken as a verdict).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmlconform.backends.directml.backend import DirectMLBackend
from dmlconform.backends.directml.client import RunnerError
from dmlconform.errors import Rejected, Unsupported
from dmlconform.generation import descs as generate
from dmlconform.generation.edges import edge_corpus
from dmlconform.runner.cases import input_data_type, operator_data_types
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.model import Spec
from dmlconform.specification.validate import validate

ACCEPTED, REFUSED, INEXPRESSIBLE, ERROR = "accepted", "refused", "inexpressible", "error"
VERDICTS = (ACCEPTED, REFUSED, INEXPRESSIBLE, ERROR)
_CODE = {ACCEPTED: "A", REFUSED: "R", INEXPRESSIBLE: "X", ERROR: "E"}
_VERDICT = {v: k for k, v in _CODE.items()}
#: The answers file format (bump on an incompatible change).
FORMAT = 1


@dataclass(frozen=True)
class Settings:
    """What the corpus is made of: per level, ``legal`` descs per data type, ``illegal`` descs
    per breakable rule, and the edge corpus of ``edges`` descs per data type, from generator seed
    ``seed``. (Answers files written before ``edges`` existed read as ``edges: 0``.)"""

    seed: int = 0
    legal: int = 12
    illegal: int = 6
    edges: int = 1  # legal descs per data type whose every rule edge is a probe (0: none)

    def to_json(self) -> dict[str, int]:
        return {"seed": self.seed, "legal": self.legal, "illegal": self.illegal, "edges": self.edges}


@dataclass(frozen=True)
class Probe:
    """One desc of the corpus: generated at ``level``, legal there or breaking ``rule`` alone."""

    id: str
    operator: str
    level: str
    kind: str  # legal | illegal | edge
    rule: str | None  # illegal: the rule broken; edge: the rule at whose edge it sits
    data_type: str | None
    desc: OperatorDesc


def _data_type(spec: Spec, desc: OperatorDesc) -> str | None:
    return input_data_type(spec.operator(desc.operator), desc)


def corpus(spec: Spec, settings: Settings = Settings()) -> list[Probe]:
    """Every probe, in a fixed order (operator, level, legal by data type, illegal by rule)."""
    probes: list[Probe] = []
    for name in sorted(spec.operators):
        op = spec.operator(name)
        for lv in spec.levels:
            model = generate.model_for(name, lv.name, spec)
            if model.available:
                for dt in operator_data_types(spec, op, lv.name):
                    descs = generate.legal_descs(
                        name, lv.name, seed=settings.seed, count=settings.legal, spec=spec, dtype=dt
                    )
                    for i, desc in enumerate(descs):
                        probes.append(
                            Probe(
                                f"{name}-{lv.name}-legal-{dt}-{i:02d}", name, lv.name, "legal", None, dt, desc
                            )
                        )
            for rule in generate.breakable_rules(name, lv.name, spec):
                pairs = generate.illegal_descs(
                    name, lv.name, seed=settings.seed, count=settings.illegal, spec=spec, rules=[rule]
                )
                for i, (desc, _) in enumerate(pairs):
                    probes.append(
                        Probe(
                            f"{name}-{lv.name}-illegal-{rule}-{i:02d}",
                            name,
                            lv.name,
                            "illegal",
                            rule,
                            _data_type(spec, desc),
                            desc,
                        )
                    )
            if settings.edges and model.available:
                edges = edge_corpus(name, lv.name, spec, seed=settings.seed, bases=settings.edges)
                for i, edge in enumerate(edges):
                    probes.append(
                        Probe(
                            f"{name}-{lv.name}-edge-{edge.rule}-{i:03d}",
                            name,
                            lv.name,
                            "edge",
                            edge.rule,
                            _data_type(spec, edge.desc),
                            edge.desc,
                        )
                    )
    return probes


# --------------------------------------------------------------------------------------------
# Asking DirectML


@dataclass(frozen=True)
class Answer:
    verdict: str
    detail: str = ""


def ask(check: Callable[[OperatorDesc], None], desc: OperatorDesc) -> Answer:
    """DirectML's verdict on ``desc`` through a backend's ``check``."""
    try:
        check(desc)
    except Rejected as exc:
        return Answer(REFUSED, str(exc))
    except Unsupported as exc:
        return Answer(INEXPRESSIBLE, str(exc))
    except (RunnerError, RuntimeError, OSError) as exc:
        return Answer(ERROR, str(exc))
    return Answer(ACCEPTED)


@dataclass
class ReleaseAnswers:
    """One release's answers to the corpus (``verdicts`` by probe id; ``details`` only where the
    answer says more than the usual refusal, e.g. an error or a refusal that was not E_INVALIDARG)."""

    release: str
    file_version: str
    max_feature_level: str
    settings: Settings
    spec_hash: str
    verdicts: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "release": self.release,
            "file_version": self.file_version,
            "max_feature_level": self.max_feature_level,
            "settings": self.settings.to_json(),
            "spec_hash": self.spec_hash,
            "seconds": round(self.seconds, 1),
            "verdicts": "".join(_CODE[v] for v in self.verdicts.values()),
            "ids": list(self.verdicts),
            "details": self.details,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ReleaseAnswers:
        if raw.get("format") != FORMAT:
            raise ValueError(f"answers format {raw.get('format')!r}, expected {FORMAT}")
        ids, codes = raw["ids"], raw["verdicts"]
        if len(ids) != len(codes):
            raise ValueError("answers: ids and verdicts differ in length")
        return cls(
            release=raw["release"],
            file_version=raw["file_version"],
            max_feature_level=raw["max_feature_level"],
            settings=Settings(**{"edges": 0, **raw["settings"]}),
            spec_hash=raw.get("spec_hash", ""),
            verdicts={i: _VERDICT[c] for i, c in zip(ids, codes, strict=True)},
            details=dict(raw.get("details") or {}),
            seconds=float(raw.get("seconds") or 0.0),
        )


def _usual(detail: str) -> bool:
    return "E_INVALIDARG" in detail


def ask_all(
    check: Callable[[OperatorDesc], None],
    probes: list[Probe],
    answers: ReleaseAnswers,
    progress: Callable[[int, int], None] | None = None,
) -> ReleaseAnswers:
    """Put every probe to ``check``, filling ``answers`` in corpus order."""
    start = time.monotonic()
    for i, probe in enumerate(probes):
        answer = ask(check, probe.desc)
        answers.verdicts[probe.id] = answer.verdict
        if answer.verdict == ERROR or (answer.verdict == REFUSED and not _usual(answer.detail)):
            answers.details[probe.id] = answer.detail
        if progress is not None and (i + 1) % 1000 == 0:
            progress(i + 1, len(probes))
    answers.seconds = time.monotonic() - start
    return answers


def ask_release(
    version: str,
    probes: list[Probe],
    settings: Settings,
    spec: Spec,
    progress: Callable[[int, int], None] | None = None,
) -> ReleaseAnswers:
    """Open DirectML ``version`` (its self-test must pass: BackendError otherwise) and ask it
    about every probe at the level it implements."""
    from dmlconform.runner.results import spec_hash

    backend = DirectMLBackend(version=version)
    try:
        answers = ReleaseAnswers(
            release=version,
            file_version=backend.stack_info.get("directml", "?"),
            max_feature_level=backend.feature_level,
            settings=settings,
            spec_hash=spec_hash(spec),
        )
        return ask_all(backend.check, probes, answers, progress)
    finally:
        backend.close()


def answers_path(out: Path, release: str) -> Path:
    return out / f"acceptance-{release}.json"


def write_answers(answers: ReleaseAnswers, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = answers_path(out, answers.release)
    path.write_text(json.dumps(answers.to_json()) + "\n", encoding="utf-8")
    return path


def load_answers(out: Path) -> list[ReleaseAnswers]:
    """Every ``acceptance-*.json`` under ``out``, in release order (ValueError: one line)."""
    found = []
    for path in sorted(out.glob("acceptance-*.json")):
        try:
            found.append(ReleaseAnswers.from_json(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not an acceptance answers file ({exc})") from None
    return sorted(found, key=lambda a: release_key(a.release))


def release_key(version: str) -> tuple[int, ...]:
    """``"1.15.4"`` -> (1, 15, 4): releases sort by number, not text."""
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def by_id(probes: list[Probe]) -> dict[str, Probe]:
    return {p.id: p for p in probes}


def iter_answered(probes: list[Probe], answers: ReleaseAnswers) -> Iterator[tuple[Probe, str]]:
    """(probe, verdict) for every probe the release was asked about."""
    for p in probes:
        v = answers.verdicts.get(p.id)
        if v is not None:
            yield p, v


def experiment(
    versions: list[str],
    labelled: list[tuple[str, OperatorDesc]],
    spec: Spec,
    out: Callable[[str], None] = print,
) -> int:
    """Put each labelled desc to every release's CreateOperator and print DirectML's answer beside
    the validator's verdict at the release's level; returns the number of disagreements. What
    the experiments under cases/directml/ that settle a desc rule run (and exit 1 on)."""
    disagreements = 0
    for version in versions:
        backend = DirectMLBackend(version=version)
        try:
            out(f"DirectML {version}")
            for label, desc in labelled:
                legal = not validate(desc, backend.feature_level, spec)
                accepted = ask(backend.check, desc).verdict == ACCEPTED
                disagreements += legal != accepted
                verdicts = f"DirectML {'accepts' if accepted else 'refuses'}, validator {'legal' if legal else 'illegal'}"
                out(f"  {label:<64} {verdicts}" + ("" if legal == accepted else "   <- disagree"))
        finally:
            backend.close()
    return disagreements
