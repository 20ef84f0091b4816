"""results.json (see docs/results-json.md) and failure reproducers.

Records are built in two halves because of pytest-xdist: the process that ran a case knows the
desc, the error figures and the reproducer (``case_record``); only the controller knows the final
outcome after expectations (xfail) are applied and can merge every worker's records
(``finish_record``, ``build_results``). The half-record travels on the pytest report as an extra
attribute, which xdist serializes with the report, so a serial run and ``-n auto`` produce the
same file by the same code path.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import platform
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dmlconform import __version__
from dmlconform.report.classes import accuracy_classes, finding_counts
from dmlconform.report.record import CaseRecord
from dmlconform.report.results_file import jsonable
from dmlconform.runner.cases import Case, apply_when
from dmlconform.runner.judging import CaseResult
from dmlconform.runner.tiers import elements_and_length
from dmlconform.specification.desc import DescError, load_desc
from dmlconform.specification.rules import KINDS
from dmlconform.specification.spec import Spec

SCHEMA_VERSION = 1
OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")


def sanitize(case_id: str) -> str:
    """A directory name for a case id: ``numeric[A-5_2-FLOAT16-0042]`` -> ``numeric-A-5_2-FLOAT16-0042``."""
    text = case_id.replace("[", "-").replace("]", "")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("-_") or "case"


def replay_command(case_dir: Path, backend: str, options: dict[str, str]) -> str:
    parts = ["dmlconform", "replay", str(case_dir), "--backend", backend]
    for k, v in sorted(options.items()):
        parts += ["--backend-option", f"{k}={v}"]
    return shlex.join(parts)


def case_record(case: Case, nodeid: str, result: CaseResult | None, *, spec: Spec) -> CaseRecord:
    """The half of a case record known where the case ran (outcome and message come later)."""
    r = result
    # a metamorphic relation runs the desc with its ``when`` members forced (CrossChannel may widen n)
    ran = apply_when(case.desc, case.relation) if case.relation else case.desc
    elements, length = elements_and_length(ran, spec) if case.kind != "validation" else (None, None)
    return CaseRecord(
        id=case.id,
        nodeid=nodeid,
        kind=case.kind,
        operator=case.operator,
        feature_level=case.level.name,
        data_type=case.data_type,
        index=case.index,
        message=r.message if r else None,
        regime=(r.regime if r else case.regime) if case.kind != "validation" else None,
        expected=case.expected,
        rule=case.rule,
        relation=case.relation.id if case.relation else None,
        rules=list(r.rules) if r else [],
        desc=case.desc.to_dict(),
        reduction_length=length,
        elements=elements,
        errors=jsonable(r.errors) if r and r.errors else None,
        info=jsonable(r.info) if r and r.info is not None else None,
        models=dict(r.models) if r and r.models else None,
        accuracy_class=r.accuracy_class if r else None,
    )


def write_reproducer(
    report_dir: Path,
    case: Case,
    result: CaseResult,
    record: CaseRecord,
    backend: str,
    options: dict[str, str],
    tolerance: dict[str, str] | None = None,
) -> str:
    """Save a failing case as a self-contained directory; returns its path relative to the report."""
    rel = Path("failures") / sanitize(case.id)
    record.reproducer = rel.as_posix()
    save_reproducer(report_dir / rel, case, result, record, backend, options, tolerance)
    return rel.as_posix()


def save_reproducer(
    out: Path,
    case: Case,
    result: CaseResult,
    record: CaseRecord,
    backend: str,
    options: dict[str, str],
    tolerance: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write ``desc.yaml``, ``inputs.npz`` and ``case.json`` (the record plus what ``replay``
    needs: the case, the backend, the tolerance; the backend's traceback when it raised;
    ``extra`` adds fields) into ``out``; sets ``record.replay``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "desc.yaml").write_text(case.desc.to_yaml(), encoding="utf-8")
    arrays = {k: np.asarray(v) for k, v in (result.inputs or {}).items() if v is not None}
    np.savez(out / "inputs.npz", **arrays)
    record.replay = replay_command(out, backend, options)
    case_json = record.to_dict()
    case_json["outcome"] = result.status
    case_json["case"] = case.to_dict()
    case_json["backend"] = {"name": backend, "options": dict(options)}
    case_json["tolerance"] = dict(tolerance or {})
    if result.traceback:  # the backend raised: where, in full (the message names one frame)
        case_json["traceback"] = result.traceback
    case_json.update(extra or {})
    (out / "case.json").write_text(json.dumps(jsonable(case_json), indent=1), encoding="utf-8")


def finish_record(
    record: CaseRecord | dict[str, Any], outcome: str, message: str | None, duration: float
) -> dict[str, Any]:
    """The record of results.json: the half-record (or its dict, as it came back from an xdist
    worker) with the final outcome, message and duration."""
    out = (record if isinstance(record, CaseRecord) else CaseRecord.of(record)).to_dict()
    out["outcome"] = outcome
    out["message"] = None if outcome == "passed" else (message or out.get("message"))
    out["duration_s"] = round(float(duration), 6)
    return out


def summarize(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts = {"total": 0, "passed": 0, "failed": 0, "skipped": 0, "xfailed": 0, "xpassed": 0, "errors": 0}
    for r in records:
        counts["total"] += 1
        key = "errors" if r["outcome"] == "error" else r["outcome"]
        counts[key] = counts.get(key, 0) + 1
    return counts


#: Outcomes of a case that ran to a verdict: only these exercise a rule (a skipped case did not
#: run; an error is counted as failing but judged nothing).
RAN_OUTCOMES = ("passed", "failed", "xfailed", "xpassed")


def coverage(spec: Spec, operators: Iterable[str], records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Per operator, per rule id of the spec (every rule, even those no case touched): how many
    legal cases that ran depend on it (``RuleKind.at_edge``; ``None`` for a kind no legal desc
    can sit at the edge of: only an illegal desc exercises those), how many illegal descs that
    ran broke it, and how many of the cases counted failed."""
    cov: dict[str, dict[str, dict[str, int | None]]] = {}
    for name in operators:
        op = spec.operator(name)
        cov[op.name] = {
            r.id: {"legal": 0 if KINDS[r.kind].has_edge else None, "illegal": 0, "failed": 0}
            for r in spec.rules_for(op)
        }
    for rec in records:
        table = cov.get(rec["operator"])
        if table is None or rec["outcome"] not in (*RAN_OUTCOMES, "error"):
            continue
        illegal = rec.get("expected") == "illegal"
        for rid in rec.get("rules") or []:
            entry = table.setdefault(rid, {"legal": 0, "illegal": 0, "failed": 0})
            if rec["outcome"] in ("failed", "error"):
                entry["failed"] = (entry["failed"] or 0) + 1
            if rec["outcome"] == "error":
                continue
            side = "illegal" if illegal else "legal"
            entry[side] = (entry[side] or 0) + 1
    return cov


def versions(backend_versions: dict[str, str]) -> dict[str, str]:
    """The versions a report names. Read from the installed distributions, not by importing:
    importing numba alone costs half a second, and a run whose cases stay on the reference's
    numpy path never needs it."""
    out = {"python": platform.python_version()}
    for dist in ("numpy", "numba", "pytest"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[dist] = importlib.metadata.version(dist)
    out.update({str(k): str(v) for k, v in backend_versions.items()})
    return out


@dataclass
class RunMeta:
    """Everything about the run that is not a case."""

    backend: str
    backend_options: dict[str, str]
    backend_level: str | None
    backend_description: str
    feature_level: str
    seed: int
    cases_per_group: int
    operators: list[str]
    data_types: list[str]
    command: str
    started: str
    finished: str
    duration_s: float
    versions: dict[str, str] = field(default_factory=dict)
    tolerance: dict[str, str] = field(default_factory=dict)
    # complete, status, stop_reason, exit_status, collected, ran (see docs/results-json.md)
    completion: dict[str, Any] = field(default_factory=dict)
    shard: dict[str, int] | None = None
    selection: dict[str, Any] = field(default_factory=dict)
    spec_hash: str | None = None
    tier: str = "default"
    max_elements: int | None = None


def spec_hash(spec: Spec) -> str:
    """sha256 over the spec directory's files (relative path and bytes, in path order): two runs
    with different hashes judged cases by different rules, so their reports must not be merged."""
    digest = hashlib.sha256()
    root = Path(spec.directory)
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml", ".json")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def completion_fields(completion: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    """The completeness fields of results.json; a run that did not say counts as complete only
    when it recorded every case it ran (the API path of build_results without a session)."""
    ran = len(records)
    return {
        "complete": bool(completion.get("complete", True)),
        "status": completion.get("status", "complete"),
        "stop_reason": completion.get("stop_reason"),
        "exit_status": completion.get("exit_status"),
        "collected": completion.get("collected", ran),
        "ran": completion.get("ran", ran),
        "deselected": int(completion.get("deselected") or 0),
    }


def build_results(meta: RunMeta, spec: Spec, records: list[dict[str, Any]]) -> dict[str, Any]:
    records = sorted(records, key=lambda r: r["nodeid"])
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "dmlconform", "version": __version__},
        "backend": {
            "name": meta.backend,
            "options": dict(meta.backend_options),
            "feature_level": meta.backend_level,
            "description": meta.backend_description,
        },
        "feature_level": meta.feature_level,
        "seed": meta.seed,
        "cases_per_group": meta.cases_per_group,
        "tier": meta.tier,
        "max_elements": meta.max_elements,
        "operators": list(meta.operators),
        "data_types": list(meta.data_types),
        "command": meta.command,
        "started": meta.started,
        "finished": meta.finished,
        "duration_s": round(meta.duration_s, 3),
        **completion_fields(meta.completion, records),
        "shard": dict(meta.shard) if meta.shard else None,
        "selection": jsonable(meta.selection),
        "spec_hash": meta.spec_hash,
        "versions": dict(meta.versions),
        "tolerance": {"overrides": dict(meta.tolerance), "model": meta.tolerance.get("model", "default")},
        "summary": summarize(records),
        "known_findings": finding_counts(records),
        "accuracy_classes": accuracy_classes(records),
        "cases": records,
        "coverage": coverage(spec, meta.operators, records),
    }


def load_case_dir(case_dir: Path, spec: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(Case, inputs, case.json) from a reproducer directory (:func:`save_reproducer` wrote
    it; replay and shrink read it); ValueError with one line."""
    if not case_dir.is_dir():
        raise ValueError(f"{case_dir}: not a directory")
    try:
        meta = json.loads((case_dir / "case.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{case_dir / 'case.json'}: cannot read: {exc}") from None
    raw = meta.get("case")
    if not isinstance(raw, dict):
        raise ValueError(f"{case_dir / 'case.json'}: no 'case' entry (not a dmlconform reproducer)")
    try:
        case = Case.from_dict(raw, spec)
        if (case_dir / "desc.yaml").is_file():
            from dataclasses import replace

            case = replace(case, desc=load_desc(case_dir / "desc.yaml", spec))
    except (DescError, KeyError) as exc:
        raise ValueError(f"{case_dir}: {exc}") from None
    try:
        with np.load(case_dir / "inputs.npz") as npz:
            inputs = {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{case_dir / 'inputs.npz'}: cannot read: {exc}") from None
    return case, inputs, meta
