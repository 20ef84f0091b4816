"""``dxdispatch export``: the selected cases as a directory DxDispatch can run, plus a manifest.

Which backend calls a case makes (one ``execute`` for a numeric case, two for a metamorphic one,
one ``check`` for a validation case) is not re-derived here: each case is run once through
:func:`dmlconform.runner.checks.run_case` against a recording stand-in that answers like the
reference, and every call it records becomes one DxDispatch dispatchable. ``check`` later replays
the very same ``run_case`` with DirectML's files standing in for the backend, so a numeric,
validation or metamorphic case is judged by the code a ``run`` uses, with the same input data
(``Case.input_seed``).

Layout (the interface ``check``, ``emulate`` and the run scripts share)::

    DIR/manifest.json              what was exported: versions, spec hash, selection, every case
    DIR/cases.txt                  one line per runnable case: its directory, then its output files
    DIR/run_dxdispatch.ps1 / .sh   run every case with DxDispatch (Windows / WSL)
    DIR/cases/<case>/model.json    the DxDispatch model; inputs beside it as .npy buffers
    after a run:
    DIR/cases/<case>/<outputs>.npy, dxdispatch.log, exit_status.txt
    DIR/dxdispatch-dependencies.txt (dxdispatch -S), DIR/dxdispatch-adapters.txt (--show_adapters)
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dmlconform import __version__, execute
from dmlconform.dxdispatch import buffers, scripts
from dmlconform.dxdispatch.desc_json import NotExpressible, bind_points, desc_json, export_desc, operator_type
from dmlconform.errors import Rejected
from dmlconform.report.results_file import jsonable
from dmlconform.runner.cases import Case, Selection, collect
from dmlconform.runner.checks import run_case
from dmlconform.runner.results import sanitize, spec_hash  # one hash: report merge compares it
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.spec import Spec
from dmlconform.tolerance.options import NO_OPTIONS

FORMAT = "dmlconform-dxdispatch-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CASES_LIST = "cases.txt"
MODEL = "model.json"
LOG = "dxdispatch.log"
EXIT_STATUS = "exit_status.txt"
DEPENDENCIES = "dxdispatch-dependencies.txt"
ADAPTERS = "dxdispatch-adapters.txt"


@dataclass
class Call:
    """One backend call a case made: ``execute`` (desc, inputs) or ``check`` (desc)."""

    method: str
    desc: OperatorDesc
    inputs: dict[str, np.ndarray] | None = None


@dataclass
class RecordingGuard:
    """Stands in for a guarded backend while a case is exported: records each call and answers
    as a correct implementation would (reference outputs; ``check`` accepts), so that ``run_case``
    goes down the path it takes on a passing backend and makes every call it would make."""

    spec: Spec
    calls: list[Call] = field(default_factory=list)

    def call(self, method: str, desc: OperatorDesc, inputs: Any = None) -> tuple[Any, Any]:
        if method == "check":
            self.calls.append(Call("check", desc))
            return None, None
        self.calls.append(Call("execute", desc, {k: np.asarray(v) for k, v in dict(inputs).items()}))
        try:
            return execute(desc, dict(inputs), spec=self.spec), None
        except Exception as exc:  # the reference refuses what DirectML would refuse: record only
            raise Rejected(str(exc)) from None

    def close(self) -> None:
        pass


def _prefix(i: int, n: int) -> str:
    return "" if n == 1 else f"op{i}_"


def build_model(calls: list[Call], spec: Spec) -> tuple[dict[str, Any], dict[str, np.ndarray], list[dict]]:
    """(model, input buffers by file name, dispatch entries for the manifest) for a case's calls.

    An ``execute`` call becomes a dispatchable, its input resources (``sourcePath`` .npy buffers),
    output resources (NaN-filled constants of TotalTensorSizeInBytes), a ``dispatch`` and one
    ``writeFile`` per output (the whole buffer, as 1-D ``dimensions``). A ``check`` call becomes a
    dispatchable that is only created (DxDispatch creates and compiles every dispatchable before
    the first command) and a one-element marker written after creation succeeded.
    Raises :class:`NotExpressible`."""
    model = _ModelParts(spec)
    for i, call in enumerate(calls):
        model.add(call, f"op{i}", _prefix(i, len(calls)))
    return (
        {"resources": model.resources, "dispatchables": model.dispatchables, "commands": model.commands},
        model.files,
        model.entries,
    )


@dataclass
class _ModelParts:
    """A DxDispatch model as its calls are added: each call appends to every part in call order,
    so the model's resources and commands read in the order the case made its calls."""

    spec: Spec
    resources: dict[str, Any] = field(default_factory=dict)
    dispatchables: dict[str, Any] = field(default_factory=dict)
    commands: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, np.ndarray] = field(default_factory=dict)
    entries: list[dict[str, Any]] = field(default_factory=list)

    def add(self, call: Call, name: str, pre: str) -> None:
        desc = export_desc(call.desc, self.spec)
        dispatchable: dict[str, Any] = {
            "type": operator_type(desc),
            "desc": desc_json(call.desc, self.spec),
            "executionFlags": ["NONE"],
        }
        self.dispatchables[name] = dispatchable
        entry: dict[str, Any] = {"dispatchable": name, "method": call.method, "inputs": {}, "outputs": {}}
        if call.method == "check":
            self._add_creation(desc, pre, dispatchable, entry)
        else:
            self._add_dispatch(call, desc, name, pre, dispatchable, entry)
        self.entries.append(entry)

    def _add_creation(
        self, desc: OperatorDesc, pre: str, dispatchable: dict[str, Any], entry: dict[str, Any]
    ) -> None:
        """A ``check`` call: the dispatchable is only created; a marker written after says it was."""
        marker = f"{pre}created"
        self.resources[marker] = {
            "initialValuesDataType": "UINT32",
            "initialValues": {"valueCount": 1, "value": 1},
        }
        self.commands.append(
            {"type": "writeFile", "resource": marker, "targetPath": f"{marker}.npy", "dimensions": [1]}
        )
        entry["created"] = f"{marker}.npy"
        init = _owned_init_bindings(desc, self.spec, pre, self.resources)
        if init:
            dispatchable["bindings"] = init

    def _add_dispatch(
        self,
        call: Call,
        desc: OperatorDesc,
        name: str,
        pre: str,
        dispatchable: dict[str, Any],
        entry: dict[str, Any],
    ) -> None:
        """An ``execute`` call: its inputs and outputs as resources, a dispatch, and a writeFile
        per output."""
        ins, outs = bind_points(desc, self.spec)
        init_bindings, bindings = self._bind_inputs(call, desc, ins, pre, entry)
        for member in outs:
            t = desc.members[member]
            res = f"{pre}{member}"
            n = buffers.buffer_elements(t)
            value: Any = "nan" if np.isnan(buffers.sentinel(t)) else 0
            self.resources[res] = {
                "initialValuesDataType": t.data_type,
                "initialValues": {"valueCount": n, "value": value},
            }
            bindings[member] = res
            entry["outputs"][member] = f"{res}.npy"
        if init_bindings:
            dispatchable["bindings"] = init_bindings
        self.commands.append({"type": "dispatch", "dispatchable": name, "bindings": bindings})
        for member in outs:
            res = f"{pre}{member}"
            n = self.resources[res]["initialValues"]["valueCount"]
            self.commands.append(
                {"type": "writeFile", "resource": res, "targetPath": f"{res}.npy", "dimensions": [n]}
            )

    def _bind_inputs(
        self, call: Call, desc: OperatorDesc, ins: list[str], pre: str, entry: dict[str, Any]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """(initialization bindings, dispatch bindings) of a call's inputs, each a .npy buffer."""
        init_bindings: dict[str, str] = {}
        bindings: dict[str, str] = {}
        for member in ins:
            t: TensorDesc = desc.members[member]
            arr = (call.inputs or {}).get(member)
            if arr is None:
                raise NotExpressible(f"{member} is in the desc but the case gave it no data")
            res = f"{pre}{member}"
            file = f"{res}.npy"
            self.files[file] = buffers.input_buffer(arr, t)
            self.resources[res] = {
                "initialValuesDataType": t.data_type,
                "initialValues": {"sourcePath": file},
            }
            # OWNED_BY_DML inputs are bound once, at initialization (dispatchable-level bindings).
            (init_bindings if t.effective_flags == "OWNED_BY_DML" else bindings)[member] = res
            entry["inputs"][member] = file
        return init_bindings, bindings


#: Largest zero buffer a creation-only model binds for an OWNED_BY_DML input (legal descs are far
#: smaller; an illegal desc with a huge tensor is refused at creation, before initialization).
OWNED_INIT_LIMIT = 16 * 2**20


def _owned_init_bindings(
    desc: OperatorDesc, spec: Spec, pre: str, resources: dict[str, Any]
) -> dict[str, str]:
    """Zero-filled initialization bindings for the OWNED_BY_DML inputs of a creation-only model:
    DxDispatch initializes every dispatchable it creates, and DirectML's initializer reads the
    data of OWNED_BY_DML tensors, so leaving them unbound could fail a legal desc."""
    init = {}
    for member in bind_points(desc, spec)[0]:
        t: TensorDesc = desc.members[member]
        if t.effective_flags != "OWNED_BY_DML":
            continue
        try:
            n = buffers.buffer_elements(t)
            size = n * buffers.npy_dtype(t).itemsize
        except (ValueError, OverflowError):
            continue
        if 0 < size <= OWNED_INIT_LIMIT:
            res = f"{pre}{member}"
            resources[res] = {
                "initialValuesDataType": t.data_type,
                "initialValues": {"valueCount": n, "value": 0},
            }
            init[member] = res
    return init


def output_files(entry: dict[str, Any]) -> list[str]:
    """Every file DxDispatch writes for a manifest case (outputs and creation markers)."""
    out: list[str] = []
    for d in entry.get("dispatches") or []:
        out += list((d.get("outputs") or {}).values())
        if d.get("created"):
            out.append(d["created"])
    return out


def expectation(case: Case) -> str:
    if case.kind == "validation":
        return "refuse" if case.expected == "illegal" else "accept"
    return "outputs"


def export_case(case: Case, spec: Spec, root: Path, rel: str) -> dict[str, Any]:
    """Write one case's directory; return its manifest entry (never raises for a bad case)."""
    entry: dict[str, Any] = {
        "id": case.id,
        "kind": case.kind,
        "operator": case.operator,
        "feature_level": case.level.name,
        "data_type": case.data_type,
        "regime": case.regime,
        "expect": expectation(case),
        "rule": case.rule,
        "dir": rel,
        "status": "exported",
        "reason": None,
        "dispatches": [],
        "case": case.to_dict(),
    }
    guard = RecordingGuard(spec)
    try:
        with warnings.catch_warnings():  # overflow to inf in the reference is a value, not news
            warnings.simplefilter("ignore", RuntimeWarning)
            result = run_case(case, guard, spec, NO_OPTIONS)
    except Exception as exc:
        entry.update(
            status="error", reason=f"dmlconform could not prepare the case: {type(exc).__name__}: {exc}"
        )
        return entry
    if not guard.calls:
        entry.update(status="skipped", reason=result.message or "the case makes no backend call")
        return entry
    try:
        model, files, dispatches = build_model(guard.calls, spec)
    except NotExpressible as exc:
        entry.update(status="not_expressible", reason=f"no DxDispatch model can carry this desc: {exc}")
        return entry
    case_dir = root / rel
    case_dir.mkdir(parents=True, exist_ok=True)
    (case_dir / MODEL).write_text(json.dumps(model, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    for name, buf in files.items():
        buffers.save_buffer(case_dir / name, buf)
    entry["dispatches"] = dispatches
    return entry


def _utc() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def export_bundle(
    root: Path,
    spec: Spec,
    sel: Selection,
    command: str,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Export every case of ``sel`` into ``root``; returns the manifest (also written)."""
    t0 = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    cases = list(collect(spec, sel))
    entries: list[dict[str, Any]] = []
    used: set[str] = set()
    for n, case in enumerate(cases, 1):
        rel = f"cases/{sanitize(case.id)}"
        while rel in used:
            rel += "_"
        used.add(rel)
        entries.append(export_case(case, spec, root, rel))
        if progress and (n % 50 == 0 or n == len(cases)):
            progress(f"exported {n}/{len(cases)} cases")
    selection = {k: (list(v) if isinstance(v, tuple) else v) for k, v in sel.to_dict().items()}
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "dmlconform": __version__,
        "spec_hash": spec_hash(spec),
        "created": _utc(),
        "command": command,
        "seed": sel.seed,
        "feature_level": sel.level.name,
        "selection": selection,
        "export_seconds": round(time.monotonic() - t0, 3),
        "cases": entries,
    }
    (root / MANIFEST).write_text(
        json.dumps(jsonable(manifest), indent=1, allow_nan=False) + "\n", encoding="utf-8"
    )
    runnable = [e for e in entries if e["status"] == "exported"]
    lines = [" ".join([e["dir"], *output_files(e)]) for e in runnable]
    (root / CASES_LIST).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    scripts.write_scripts(root)
    return manifest


class BundleError(Exception):
    """A bundle that cannot be used (no manifest, another format); one line for the CLI."""


def load_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(
            f"{path}: no manifest (not a bundle written by 'dmlconform dxdispatch export')"
        ) from None
    except (OSError, ValueError) as exc:
        raise BundleError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BundleError(f"{path}: not a dmlconform DxDispatch bundle manifest")
    if data.get("format_version") != FORMAT_VERSION:
        raise BundleError(
            f"{path}: bundle format version {data.get('format_version')}, expected {FORMAT_VERSION}"
        )
    if not isinstance(data.get("cases"), list):
        raise BundleError(f"{path}: no case list")
    return data


def read_text(path: Path) -> str | None:
    """A text file the run scripts wrote (PowerShell may write UTF-16 or UTF-8 with a BOM)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16", errors="replace")
    return raw.decode("utf-8-sig", errors="replace")


def stderr_progress(message: str) -> None:
    print(f"dmlconform dxdispatch: {message}", file=sys.stderr, flush=True)
