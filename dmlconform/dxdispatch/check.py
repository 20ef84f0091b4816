"""``dxdispatch check``: judge what DxDispatch left in a bundle, and write the standard report.

Every exported case is judged by :func:`dmlconform.runner.checks.run_case`, the code a ``run``
uses, with :class:`ReplayGuard` standing in for the backend: its ``execute`` returns the outputs
DirectML wrote (read back from the buffers by their strides), its ``check`` accepts when DirectML
created the operator and raises ``Rejected`` when DxDispatch's log says creation failed. The
comparison, tolerance and messages are therefore those of a run, and the records, results.json,
summary.md and index.html are written by ``dmlconform.runner.results`` and ``dmlconform.report``.

Acceptance is judged at the device's level: DirectML validates a desc at the highest feature
level it implements whatever level a case was generated for, so each validation case is
re-validated at the level of the DirectML version the run recorded (``dxdispatch -S``). A desc
illegal at 4_1 but legal at 6_4 must be accepted by DirectML 1.15. A numeric case DirectML
refuses because its desc is not legal at the device's level (an operator newer than the DLL) is
skipped, not failed.

Anything the bundle does not hold (an output that was never written, a truncated or mistyped
file, a model edited after export) is an ``error`` record with a one-line message that quotes the
case's DxDispatch log, never a traceback.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dmlconform.dxdispatch import buffers
from dmlconform.dxdispatch.bundle import (
    ADAPTERS,
    DEPENDENCIES,
    EXIT_STATUS,
    LOG,
    MODEL,
    read_text,
)
from dmlconform.dxdispatch.desc_json import ModelError, NotExpressible, canonical
from dmlconform.dxdispatch.modelfile import Model, load_model_file
from dmlconform.errors import Rejected, Unsupported
from dmlconform.report.record import CaseRecord
from dmlconform.report.results_file import write_results_file
from dmlconform.runner.cases import Case
from dmlconform.runner.checks import run_case
from dmlconform.runner.results import (
    RunMeta,
    build_results,
    case_record,
    finish_record,
    spec_hash,
    versions,
)
from dmlconform.specification.desc import DescError, TensorDesc
from dmlconform.specification.spec import FeatureLevel, Spec
from dmlconform.specification.validate import validate
from dmlconform.tolerance.options import NO_OPTIONS

CREATE_FAILURES = ("ERROR creating dispatchable", "ERROR while initializing")


class CaseError(Exception):
    """The bundle does not hold what the case needs: an ``error`` record, not a verdict."""


# --------------------------------------------------------------------------------------------
# What the run recorded


@dataclass
class RunInfo:
    """The DirectML that ran the bundle, as the run scripts recorded it."""

    version: str | None
    level: FeatureLevel | None  # the device's feature level (None: unknown; cases are judged at their own)
    adapter: str | None
    note: str | None = None


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def level_for_version(version: str, spec: Spec) -> FeatureLevel | None:
    """The highest feature level a DirectML version implements (directml-facts.md's table:
    ``directml`` of each level in spec/common/feature_levels.yaml); None for a version outside
    the 1.x line (the inbox System32 DLL reports the Windows build instead)."""
    v = _version_tuple(version)
    if not v or v[0] != 1:
        return None
    best = None
    for lv in spec.levels:
        if _version_tuple(lv.directml) <= v:
            best = lv
    return best


def _field(text: str, label: str) -> str | None:
    """A ``- Label : value`` line of the DirectML block of ``dxdispatch -S``."""
    block = text.split("DirectML:", 1)[1] if "DirectML:" in text else ""
    block = re.split(r"\n\s*\n", block, maxsplit=1)[0]
    m = re.search(rf"^\s*-\s*{re.escape(label)}\s*:\s*(.+?)\s*$", block, re.M)
    return m.group(1) if m else None


def read_run_info(
    root: Path, spec: Spec, version: str | None = None, level: FeatureLevel | None = None
) -> RunInfo:
    """DirectML version (``-S``: Loaded Version, else the version in Configured Version), the
    device level for it, and the adapter; ``version``/``level`` override what was recorded.
    UnknownLevel for a recorded level this spec does not know."""
    deps = read_text(root / DEPENDENCIES) or ""
    note = None
    if level is None and version is not None:
        level = level_for_version(version, spec)
    elif version is None:
        loaded = _field(deps, "Loaded Version")
        configured = _field(deps, "Configured Version")
        m = re.search(r"\d+\.\d+(\.\d+)?", configured or "")
        version = loaded or (m.group(0) if m else None)
        if level is None:
            # the emulator names the level it played; DxDispatch itself prints no level
            emulated = _field(deps, "Emulated Feature Level")
            level = (
                spec.level(emulated) if emulated else (level_for_version(version, spec) if version else None)
            )
    if level is None:
        note = (
            f"DirectML version {version!r} maps to no feature level"
            if version
            else "no DirectML version recorded"
        ) + "; validation cases are judged at their own level (pass --directml-version to fix)"
    return RunInfo(version, level, _adapter(root), note)


def _adapter(root: Path) -> str | None:
    for log in sorted(root.glob(f"cases/*/{LOG}"))[:20]:
        m = re.search(r"Running on '(.+?)'", read_text(log) or "")
        if m:
            return m.group(1)
    text = (read_text(root / ADAPTERS) or "").strip()
    return text.splitlines()[0].strip() if text else None


# --------------------------------------------------------------------------------------------
# One case


@dataclass
class CaseRun:
    """What DxDispatch left in one case directory."""

    dir: Path
    exit_status: int | None
    log: str | None

    @classmethod
    def read(cls, case_dir: Path) -> CaseRun:
        status_text = read_text(case_dir / EXIT_STATUS)
        status = None
        if status_text is not None:
            try:
                status = int(status_text.strip().splitlines()[0])
            except (ValueError, IndexError):
                status = None
        return cls(case_dir, status, read_text(case_dir / LOG))

    @property
    def ran(self) -> bool:
        return self.log is not None or self.exit_status is not None

    def quote(self, lines: int = 4) -> str:
        """The end of the case's DxDispatch log, on one line."""
        if self.log is None:
            return (
                "no dxdispatch.log (the case was not run: run run_dxdispatch.ps1 or run_dxdispatch.sh first)"
            )
        text = [ln.strip() for ln in self.log.splitlines() if ln.strip()]
        errors = [ln for ln in text if "ERROR" in ln or "Failed" in ln or "error" in ln.lower()]
        shown = (errors or text)[-lines:]
        return "log: " + (" | ".join(shown) if shown else "(empty)")

    def creation_failure(self) -> str | None:
        if self.log is None:
            return None
        for ln in self.log.splitlines():
            if any(marker in ln for marker in CREATE_FAILURES):
                return ln.strip()
        return None

    def status_text(self) -> str:
        return "not recorded" if self.exit_status is None else str(self.exit_status)


class ReplayGuard:
    """The guard ``run_case`` calls, answered from the files of one case (see the module doc)."""

    def __init__(
        self,
        entry: dict[str, Any],
        model: Model,
        run: CaseRun,
        spec: Spec,
        illegal_on_device: str | None,
        info: dict,
    ):
        self.dispatches = list(entry.get("dispatches") or [])
        self.model = model
        self.run = run
        self.spec = spec
        self.illegal_on_device = illegal_on_device
        self.info = info
        self.index = 0

    def close(self) -> None:
        pass

    def call(self, method: str, desc: Any, inputs: Any = None) -> tuple[Any, Any]:
        if self.index >= len(self.dispatches):
            raise CaseError(
                "the case made more backend calls than the bundle holds (exported by another dmlconform?)"
            )
        d = self.dispatches[self.index]
        self.index += 1
        if d.get("method") != method:
            raise CaseError(
                f"call {self.index}: the case asks for {method}, the bundle holds {d.get('method')}"
            )
        name = d.get("dispatchable")
        held = self.model.dispatchables.get(name)
        if held is None:
            raise CaseError(f"model.json has no dispatchable {name!r}")
        try:
            same = canonical(desc, self.spec) == canonical(held.desc, self.spec)
        except NotExpressible:
            same = False
        if not same:
            raise CaseError(
                f"model.json's {name} is not the case's desc (the model was edited, or another spec)"
            )
        if method == "check":
            if (self.run.dir / d.get("created", "")).is_file():
                return None, None
            self._refused_or_error(d.get("created", "the creation marker"))
        self._check_inputs(d, held.desc, inputs or {})
        outputs = {}
        for member, file in (d.get("outputs") or {}).items():
            path = self.run.dir / file
            if not path.is_file():
                self._refused_or_error(file)
            t: TensorDesc = held.desc.members[member]
            try:
                outputs[member] = buffers.output_array(path, t)
            except buffers.BufferError as exc:
                raise CaseError(f"{exc} ({self.run.quote(2)})") from None
        return outputs, dict(self.info)

    def _refused_or_error(self, missing: str) -> None:
        refusal = self.run.creation_failure()
        if refusal is not None:
            if self.illegal_on_device:
                raise Unsupported(
                    f"DirectML refused the desc, which is not legal at the device's level: {self.illegal_on_device}"
                )
            raise Rejected(f"DirectML refused to create it: {refusal}")
        raise CaseError(
            f"{missing} was not written (DxDispatch exit status {self.run.status_text()}); {self.run.quote()}"
        )

    def _check_inputs(self, d: dict[str, Any], desc: Any, inputs: dict[str, np.ndarray]) -> None:
        """The case's data (regenerated from its seed) must be what the bundle fed DirectML."""
        for member, file in (d.get("inputs") or {}).items():
            try:
                held = buffers.output_array(self.run.dir / file, desc.members[member])
            except buffers.BufferError as exc:
                raise CaseError(f"input {exc}") from None
            given = inputs.get(member)
            if given is None or not np.array_equal(np.asarray(given), held, equal_nan=True):
                raise CaseError(
                    f"input {file} is not the case's data (edited, or exported by another dmlconform)"
                )


def _nodeid(entry: dict[str, Any]) -> str:
    return f"dxdispatch::{entry.get('id')}"


def _bare_record(entry: dict[str, Any], outcome: str, message: str) -> dict[str, Any]:
    """The finished record of a case that cannot be rebuilt (its desc no longer parses)."""
    case = entry.get("case") or {}
    record = CaseRecord(
        id=str(entry.get("id")),
        nodeid=_nodeid(entry),
        kind=entry.get("kind"),
        operator=entry.get("operator"),
        feature_level=entry.get("feature_level"),
        data_type=entry.get("data_type"),
        index=case.get("index", 0),
        regime=entry.get("regime"),
        expected=case.get("expected"),
        rule=entry.get("rule"),
        desc=case.get("desc"),
    )
    return finish_record(record, outcome, message, 0.0)


def judge_case(root: Path, entry: dict[str, Any], spec: Spec, run_info: RunInfo) -> dict[str, Any]:
    """The finished results.json record of one manifest case."""
    t0 = time.monotonic()
    try:
        case = Case.from_dict(entry["case"], spec)
    except (DescError, KeyError, TypeError, ValueError) as exc:
        return _bare_record(entry, "error", f"the bundle's case cannot be read with this spec: {exc}")
    status = entry.get("status")
    if status != "exported":
        rec = case_record(case, _nodeid(entry), None, spec=spec)
        outcome = "error" if status == "error" else "skipped"
        return finish_record(rec, outcome, entry.get("reason") or f"not exported ({status})", 0.0)
    device_level = run_info.level.name if run_info.level else None
    info = {"directml": run_info.version, "adapter": run_info.adapter, "device_level": device_level}
    judged, note = _judged_case(case, spec, run_info)
    illegal = None
    if run_info.level is not None and case.kind != "validation":
        found = validate(case.desc, run_info.level, spec)
        illegal = f"{found[0]} (at {run_info.level.name})" if found else None
    case_dir = root / entry["dir"]
    run = CaseRun.read(case_dir)
    rec = case_record(case, _nodeid(entry), None, spec=spec)
    try:
        model = load_model_file(case_dir / MODEL, spec)
        guard = ReplayGuard(entry, model, run, spec, illegal, info)
        with warnings.catch_warnings():  # overflow to inf in the reference is a value, not news
            warnings.simplefilter("ignore", RuntimeWarning)
            result = run_case(judged, guard, spec, NO_OPTIONS)
    except ModelError as exc:
        return finish_record(rec, "error", f"model.json unusable: {exc}", time.monotonic() - t0)
    except CaseError as exc:
        return finish_record(rec, "error", str(exc), time.monotonic() - t0)
    rec = case_record(case, _nodeid(entry), result, spec=spec)
    if case.kind == "validation":
        rec.expected = judged.expected
        rec.rule = judged.rule
    rec.info = {**(rec.info or {}), **info, **({"note": note} if note else {})}
    message = result.message
    if note and result.status != "passed":
        message = f"{message} [{note}]"
    return finish_record(rec, result.status, message, time.monotonic() - t0)


def _judged_case(case: Case, spec: Spec, run_info: RunInfo) -> tuple[Case, str | None]:
    """A validation case re-judged at the device's level (other kinds unchanged)."""
    if case.kind != "validation" or run_info.level is None or run_info.level == case.level:
        return case, None
    found = validate(case.desc, run_info.level, spec)
    expected = "illegal" if found else "legal"
    ids = [v.rule for v in found]
    rule = case.rule if case.rule in ids else (ids[0] if ids else None)
    note = None
    if expected != case.expected:
        was = (
            f"illegal at {case.level.name} (rule {case.rule})"
            if case.expected == "illegal"
            else f"legal at {case.level.name}"
        )
        at = run_info.level.name
        now = f"illegal at {at} (rule {rule})" if found else f"legal at {at}"
        note = f"generated {was}, {now}, the level of DirectML {run_info.version}"
    return replace(case, level=run_info.level, expected=expected, rule=rule), note


# --------------------------------------------------------------------------------------------
# The whole bundle


def _utc() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def never_run(root: Path, manifest: dict[str, Any]) -> str | None:
    """Why the bundle cannot be judged because DxDispatch never ran it (None: some case ran).

    A case ran when its directory holds the run script's dxdispatch.log or exit_status.txt;
    judging a bundle none of whose cases ran would report every case as an error of DirectML's
    instead of saying the one thing that is wrong."""
    exported = [
        e for e in manifest.get("cases") or [] if isinstance(e, dict) and e.get("status") == "exported"
    ]
    if not exported:
        return None
    if any(CaseRun.read(root / str(e.get("dir") or "")).ran for e in exported):
        return None
    return (
        f"{root} has not been run: none of its {len(exported)} exported cases has a {LOG} or {EXIT_STATUS} "
        "(run run_dxdispatch.ps1 or run_dxdispatch.sh in it first, or 'dmlconform dxdispatch emulate')"
    )


def check_bundle(
    root: Path,
    manifest: dict[str, Any],
    spec: Spec,
    report_dir: Path,
    command: str,
    run_info: RunInfo,
    progress: Any = None,
) -> dict[str, Any]:
    """Judge every case, write results.json, junit.xml, summary.md and index.html; return results."""
    started, t0 = _utc(), time.monotonic()
    records = _judge_cases(root, manifest["cases"], spec, run_info, progress)
    meta = _run_meta(manifest, spec, command, run_info, started, t0)
    results = build_results(meta, spec, records)
    results["bundle"] = {
        "path": str(root),
        "spec_hash": manifest.get("spec_hash"),
        "spec_hash_now": spec_hash(spec),
        "note": run_info.note,
    }
    write_results_file(report_dir, results)
    write_junit(report_dir / "junit.xml", results)
    try:
        from dmlconform.report import write_reports

        write_reports(report_dir)
    except Exception as exc:  # the verdict does not depend on the renderer (as in a run)
        results["report_error"] = f"{type(exc).__name__}: {exc}"
    return results


def _judge_cases(
    root: Path, entries: list[Any], spec: Spec, run_info: RunInfo, progress: Any
) -> list[dict[str, Any]]:
    """A record per manifest entry, in manifest order; an entry that breaks the judge is an error."""
    records = []
    for n, entry in enumerate(entries, 1):
        try:
            records.append(judge_case(root, entry, spec, run_info))
        except Exception as exc:  # a hand-edited manifest must not cost the other cases
            if not isinstance(entry, dict):
                entry = {"id": f"manifest-entry-{n}"}
            records.append(
                _bare_record(entry, "error", f"internal error in dmlconform: {type(exc).__name__}: {exc}")
            )
        if progress and (n % 100 == 0 or n == len(entries)):
            progress(f"checked {n}/{len(entries)} cases")
    return records


def _run_meta(
    manifest: dict[str, Any], spec: Spec, command: str, run_info: RunInfo, started: str, t0: float
) -> RunMeta:
    """The run's metadata as a ``run`` records it: the bundle's selection, DirectML as the backend;
    it finishes now."""
    entries = manifest["cases"]
    sel = manifest.get("selection") or {}
    operators = list(
        sel.get("operators") or sorted({e.get("operator") for e in entries if e.get("operator")})
    )
    dtypes = list(sel.get("data_types") or sorted({e["data_type"] for e in entries if e.get("data_type")}))
    desc = f"DirectML {run_info.version or '(version not recorded)'} via DxDispatch"
    if run_info.adapter:
        desc += f" on {run_info.adapter}"
    extra = {"directml": run_info.version or "unknown", "dxdispatch_adapter": run_info.adapter or "unknown"}
    extra["bundle_dmlconform"] = str(manifest.get("dmlconform"))
    return RunMeta(
        backend="directml",
        backend_options={},
        backend_level=run_info.level.name if run_info.level else None,
        backend_description=desc,
        feature_level=str(manifest.get("feature_level")),
        seed=int(manifest.get("seed") or 0),
        cases_per_group=int(sel.get("cases") or 0),
        operators=operators,
        data_types=dtypes,
        command=command,
        started=started,
        finished=_utc(),
        duration_s=time.monotonic() - t0,
        versions=versions(extra),
        spec_hash=spec_hash(spec),
    )


def write_junit(path: Path, results: dict[str, Any]) -> None:
    """junit.xml with one testcase per record, as a ``run`` writes through pytest."""
    cases = results["cases"]
    s = results["summary"]
    suite = ET.Element(
        "testsuite",
        name="dmlconform-dxdispatch",
        tests=str(s["total"]),
        failures=str(s["failed"]),
        errors=str(s["errors"]),
        skipped=str(s["skipped"] + s.get("xfailed", 0)),
        time=f"{results.get('duration_s', 0.0):.3f}",
    )
    for r in cases:
        tc = ET.SubElement(
            suite,
            "testcase",
            classname="dxdispatch",
            name=str(r["id"]),
            time=f"{r.get('duration_s') or 0.0:.6f}",
        )
        msg = str(r.get("message") or "")
        if r["outcome"] == "failed":
            ET.SubElement(tc, "failure", message=msg).text = msg
        elif r["outcome"] == "error":
            ET.SubElement(tc, "error", message=msg).text = msg
        elif r["outcome"] in ("skipped", "xfailed"):
            ET.SubElement(tc, "skipped", message=msg)
    root = ET.Element("testsuites")
    root.append(suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
