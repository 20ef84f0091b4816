"""DirectML's own verdicts on the spec's descs: every probe through CreateOperator, per release.

The spec's rules were written from the docs; a DirectML release is the implementation they
describe, and its ``CreateOperator`` (then ``CompileOperator``, which refuses some descs that
CreateOperator took: F12) is a verdict on any desc. The *corpus* is what the generators make of
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

Verdicts: ``accepted`` (S_OK from CreateOperator and CompileOperator), ``refused`` (E_INVALIDARG
or E_NOTIMPL, with the stage that refused: ``create`` for CreateOperator, ``compile`` for
CompileOperator), ``failed`` (another failing HRESULT from one of DirectML's stages, such as
1.8.0's arithmetic overflow 0x8007023E at CompileOperator: kept with its stage and HRESULT, never
taken for a verdict on the desc, so neither agreement nor disagreement), ``inexpressible`` (the
desc breaks a desc-file rule that DirectML's C structs cannot carry: a count that differs from
its array, an omitted member; DirectML cannot be asked), ``error`` (anything else: a crash, a
timeout, a removed device; never taken as a verdict).

The answers file (format 2) keeps one letter per probe: ``A`` accepted, ``R`` refused by
CreateOperator, ``C`` refused by CompileOperator, ``D`` refused when executed (a backend whose
``check`` executes), ``F`` failed (its stage and HRESULT under ``failures``), ``X``
inexpressible, ``E`` error; ``details`` keep the message of every failure, error and refusal that
was not E_INVALIDARG. A file of another format is refused with one line: ask again.
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
from dmlconform.errors import STAGES, Failure, Rejected, Unsupported, hresult_hex
from dmlconform.generation.edges import edge_corpus
from dmlconform.generation.illegal import breakable_rules, illegal_descs
from dmlconform.generation.legal import legal_descs
from dmlconform.runner.cases import input_data_type, operator_data_types
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec
from dmlconform.specification.structure_builder import model_for
from dmlconform.specification.validate import validate

ACCEPTED, REFUSED, FAILED = "accepted", "refused", "failed"
INEXPRESSIBLE, ERROR = "inexpressible", "error"
VERDICTS = (ACCEPTED, REFUSED, FAILED, INEXPRESSIBLE, ERROR)
CREATE, COMPILE, EXECUTE = STAGES
#: How the published table and the messages name each stage.
STAGE_CALLS = {CREATE: "CreateOperator", COMPILE: "CompileOperator", EXECUTE: "execution"}
#: The answers file's letter of each (verdict, stage): a refusal's stage is in its letter.
_CODE = {
    (ACCEPTED, None): "A",
    (REFUSED, CREATE): "R",
    (REFUSED, COMPILE): "C",
    (REFUSED, EXECUTE): "D",
    (FAILED, None): "F",
    (INEXPRESSIBLE, None): "X",
    (ERROR, None): "E",
}
_VERDICT = {v: k for k, v in _CODE.items()}
#: The answers file format (bump on an incompatible change). 2: a refusal's stage in its letter,
#: ``failed`` answers with their stage and HRESULT, ``through``.
FORMAT = 2
E_INVALIDARG = 0x80070057


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
            model = model_for(name, lv, spec)
            if model.available:
                for dt in operator_data_types(spec, op, lv):
                    descs = legal_descs(
                        name, lv, seed=settings.seed, count=settings.legal, spec=spec, dtype=dt
                    )
                    for i, desc in enumerate(descs):
                        probes.append(
                            Probe(
                                f"{name}-{lv.name}-legal-{dt}-{i:02d}", name, lv.name, "legal", None, dt, desc
                            )
                        )
            for rule in breakable_rules(name, lv, spec):
                pairs = illegal_descs(
                    name, lv, seed=settings.seed, count=settings.illegal, spec=spec, rules=[rule]
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
    """One answer: the verdict, the stage that refused or failed (None otherwise), the HRESULT
    where the backend said it, and the message."""

    verdict: str
    detail: str = ""
    stage: str | None = None
    hresult: int | None = None


def ask(check: Callable[[OperatorDesc], None], desc: OperatorDesc) -> Answer:
    """DirectML's verdict on ``desc`` through a backend's ``check``. A refusal keeps the stage the
    backend names (``Rejected.stage``); one that names none (a validator standing in for
    DirectML) refused at ``create``. A :class:`Failure` with a stage is ``failed``."""
    try:
        check(desc)
    except Rejected as exc:
        stage = exc.stage if exc.stage in STAGES else CREATE
        return Answer(REFUSED, str(exc), stage, exc.hresult)
    except Unsupported as exc:
        return Answer(INEXPRESSIBLE, str(exc))
    except Failure as exc:
        if exc.stage in STAGES:
            return Answer(FAILED, str(exc), exc.stage, exc.hresult)
        return Answer(ERROR, str(exc))
    except (RunnerError, RuntimeError, OSError) as exc:
        return Answer(ERROR, str(exc))
    return Answer(ACCEPTED)


class AnswersFormatError(ValueError):
    """An answers file written in another format than this dmlconform reads (one line)."""


@dataclass
class ReleaseAnswers:
    """One release's answers to the corpus: ``verdicts`` by probe id; ``stages`` the stage of every
    refused and failed probe; ``hresults`` the HRESULT of every failed probe (and of a refusal
    that was not E_INVALIDARG, where the backend said it); ``details`` the message where the
    answer says more than the usual refusal (an error, a failure, a refusal that was not
    E_INVALIDARG). ``through``: the last stage the release was asked (an accepted probe got
    through every stage up to it)."""

    release: str
    file_version: str
    max_feature_level: str
    settings: Settings
    spec_hash: str
    verdicts: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    stages: dict[str, str] = field(default_factory=dict)
    hresults: dict[str, int] = field(default_factory=dict)
    through: str = COMPILE

    def record(self, probe_id: str, answer: Answer) -> None:
        """Keep ``answer`` to the probe ``probe_id``."""
        self.verdicts[probe_id] = answer.verdict
        if answer.verdict in (REFUSED, FAILED):
            assert answer.stage in STAGES, answer
            self.stages[probe_id] = answer.stage
        if answer.hresult is not None and (answer.verdict == FAILED or answer.hresult != E_INVALIDARG):
            self.hresults[probe_id] = answer.hresult & 0xFFFFFFFF
        unusual = answer.verdict == REFUSED and not _usual(answer)
        if answer.verdict in (ERROR, FAILED) or unusual:
            self.details[probe_id] = answer.detail

    def stage(self, probe_id: str) -> str | None:
        """Where the release answered the probe: the stage that refused or failed, ``through``
        for an accepted probe, None where it was not asked (or not about this probe)."""
        verdict = self.verdicts.get(probe_id)
        if verdict in (REFUSED, FAILED):
            return self.stages.get(probe_id)
        return self.through if verdict == ACCEPTED else None

    def failures(self) -> list[tuple[str, str, int | None]]:
        """(probe id, stage, HRESULT) of every failed probe, in corpus order."""
        return [
            (i, self.stages.get(i, "?"), self.hresults.get(i))
            for i, v in self.verdicts.items()
            if v == FAILED
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "release": self.release,
            "file_version": self.file_version,
            "max_feature_level": self.max_feature_level,
            "settings": self.settings.to_json(),
            "spec_hash": self.spec_hash,
            "seconds": round(self.seconds, 1),
            "through": self.through,
            "verdicts": "".join(
                _CODE[(v, self.stages.get(i) if v == REFUSED else None)] for i, v in self.verdicts.items()
            ),
            "ids": list(self.verdicts),
            "failures": {
                i: {"stage": stage, "hresult": None if h is None else hresult_hex(h)}
                for i, stage, h in self.failures()
            },
            "hresults": {
                i: hresult_hex(h) for i, h in self.hresults.items() if self.verdicts.get(i) != FAILED
            },
            "details": self.details,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ReleaseAnswers:
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        if raw.get("format") != FORMAT:
            found = raw.get("format")
            before = " (before refusals kept their stage)" if found == 1 else ""
            raise AnswersFormatError(
                f"answers of format {found!r}{before}, this dmlconform reads format {FORMAT}: "
                "ask the release again (dmlconform directml accept or sweep)"
            )
        ids, codes = raw["ids"], raw["verdicts"]
        if len(ids) != len(codes):
            raise ValueError("answers: ids and verdicts differ in length")
        unknown = set(codes) - {c for c in _VERDICT}
        if unknown:
            raise ValueError(f"answers: unknown verdict letter(s) {''.join(sorted(unknown))}")
        failures = raw.get("failures") or {}
        answers = cls(
            release=raw["release"],
            file_version=raw["file_version"],
            max_feature_level=raw["max_feature_level"],
            settings=Settings(**{"edges": 0, **raw["settings"]}),
            spec_hash=raw.get("spec_hash", ""),
            details=dict(raw.get("details") or {}),
            seconds=float(raw.get("seconds") or 0.0),
            through=raw.get("through", COMPILE),
        )
        for i, c in zip(ids, codes, strict=True):
            verdict, stage = _VERDICT[c]
            answers.verdicts[i] = verdict
            if verdict == FAILED:
                failure = failures.get(i)
                if not isinstance(failure, dict) or failure.get("stage") not in STAGES:
                    raise ValueError(f"answers: failed probe {i} has no stage under 'failures'")
                stage = failure["stage"]
                if failure.get("hresult") is not None:
                    answers.hresults[i] = int(str(failure["hresult"]), 16)
            if stage is not None:
                answers.stages[i] = stage
        for i, h in (raw.get("hresults") or {}).items():
            answers.hresults[i] = int(str(h), 16)
        return answers


def _usual(answer: Answer) -> bool:
    """A refusal with E_INVALIDARG (by its HRESULT, or its message where the backend gives none)."""
    if answer.hresult is not None:
        return answer.hresult & 0xFFFFFFFF == E_INVALIDARG
    return "E_INVALIDARG" in answer.detail


def ask_all(
    check: Callable[[OperatorDesc], None],
    probes: list[Probe],
    answers: ReleaseAnswers,
    progress: Callable[[int, int], None] | None = None,
) -> ReleaseAnswers:
    """Put every probe to ``check``, filling ``answers`` in corpus order."""
    start = time.monotonic()
    for i, probe in enumerate(probes):
        answers.record(probe.id, ask(check, probe.desc))
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


def failure_lines(answers: ReleaseAnswers) -> list[str]:
    """One line per (stage, HRESULT) of the release's failed answers: how many, and an example."""
    groups: dict[tuple[str, int | None], list[str]] = {}
    for probe_id, stage, hresult in answers.failures():
        groups.setdefault((stage, hresult), []).append(probe_id)
    return [
        f"FAILED: {len(ids)} probe(s) answered {hresult_hex(h) if h is not None else 'a failure'} by "
        f"{STAGE_CALLS.get(stage, stage)} (neither accepted nor refused), e.g. {ids[0]}"
        for (stage, h), ids in groups.items()
    ]


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
        except AnswersFormatError as exc:
            raise ValueError(f"{path}: {exc}") from None
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
    """Put each labelled desc to every release's CreateOperator and CompileOperator and print
    DirectML's answer (with the stage that refused) beside the validator's verdict at the
    release's level; returns the number of disagreements (a failed answer, neither accepted nor
    refused, is printed and not counted). What the experiments under cases/directml/ that settle
    a desc rule run (and exit 1 on)."""
    disagreements = 0
    for version in versions:
        backend = DirectMLBackend(version=version)
        try:
            out(f"DirectML {version}")
            for label, desc in labelled:
                legal = not validate(desc, backend.feature_level, spec)
                answer = ask(backend.check, desc)
                said = describe(answer)
                if answer.verdict not in (ACCEPTED, REFUSED):
                    out(
                        f"  {label:<64} {said}, validator {'legal' if legal else 'illegal'}   <- not a verdict"
                    )
                    continue
                accepted = answer.verdict == ACCEPTED
                disagreements += legal != accepted
                verdicts = f"{said}, validator {'legal' if legal else 'illegal'}"
                out(f"  {label:<64} {verdicts}" + ("" if legal == accepted else "   <- disagree"))
        finally:
            backend.close()
    return disagreements


def describe(answer: Answer) -> str:
    """``DirectML accepts``, ``DirectML refuses at CompileOperator``, ``DirectML fails at
    CompileOperator (0x8007023E)``, ``DirectML cannot be asked``, ``error: ...``."""
    where = STAGE_CALLS.get(answer.stage or "", answer.stage)
    if answer.verdict == ACCEPTED:
        return "DirectML accepts"
    if answer.verdict == REFUSED:
        return f"DirectML refuses at {where}"
    if answer.verdict == FAILED:
        code = "" if answer.hresult is None else f" ({hresult_hex(answer.hresult)})"
        return f"DirectML fails at {where}{code}"
    if answer.verdict == INEXPRESSIBLE:
        return "DirectML cannot be asked"
    return f"error: {answer.detail}"
