"""``dxdispatch emulate``: run a bundle the way DxDispatch would, on any dmlconform backend.

It reads each ``model.json`` with the strict model reader, uploads the resources (``.npy``
buffers, constants), creates every dispatchable (refused when the backend's ``check`` rejects the
desc: the reference backend's check is the validator at the emulated feature level, which is what
DirectML's creation-time validation is meant to be), runs the commands in order (``dispatch``
hands the backend the logical tensors read from the bound buffers by their strides and writes
its outputs back at their strided positions; ``writeFile`` saves the whole buffer), and leaves
what a real run leaves: ``dxdispatch.log``, ``exit_status.txt`` per case, and the run-wide
``dxdispatch-dependencies.txt`` / ``dxdispatch-adapters.txt`` naming a DirectML version that
stands for the emulated feature level. So the whole export -> run -> check round trip is tested
without Windows, and a bundle can be replayed against any backend.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dmlconform.dxdispatch import buffers
from dmlconform.dxdispatch.bundle import ADAPTERS, CASES_LIST, DEPENDENCIES, EXIT_STATUS, LOG, MODEL
from dmlconform.dxdispatch.desc_json import ModelError, bind_points
from dmlconform.dxdispatch.modelfile import Model, load_model_file
from dmlconform.errors import Rejected, Unsupported
from dmlconform.runner.backend_loading import open_backend
from dmlconform.runner.guard import backend_validates
from dmlconform.specification import layout
from dmlconform.specification.desc import TensorDesc
from dmlconform.specification.spec import FeatureLevel, Spec

E_FAIL = -2147467259  # 0x80004005 as DxDispatch's main returns it (an HRESULT)
E_INVALIDARG = -2147024809  # 0x80070057


@dataclass
class Emulator:
    """A backend plus the feature level it stands for."""

    backend: Any
    level: FeatureLevel
    spec: Spec

    @property
    def label(self) -> str:
        return f"dmlconform emulator (backend {getattr(self.backend, 'name', '?')}, feature level {self.level.name})"

    def refuse(self, desc: Any) -> str | None:
        """Why DirectML would refuse to create ``desc`` (None: it creates it)."""
        try:
            if backend_validates(self.backend):
                self.backend.check(desc)
            else:
                from dmlconform.backends.base import validate_or_reject

                validate_or_reject(desc, self.level, self.spec)
        except (Rejected, Unsupported) as exc:
            return str(exc) or type(exc).__name__
        return None


def load_emulator(name: str, options: dict[str, str], level: FeatureLevel | None, spec: Spec) -> Emulator:
    """The backend (asked to emulate ``level`` when it takes a feature_level option), opened as a
    run opens it (runner.backend_loading); raises ValueError with one line. Without ``level``,
    the backend's own (its name resolved here), else the spec's highest."""
    opened = open_backend(name, options, level=level)
    if level is None:
        claimed = opened.info.feature_level
        level = spec.level(claimed) if claimed else spec.levels[-1]
    return Emulator(opened.handle, level, spec)


def dependencies_text(em: Emulator) -> str:
    """What ``dxdispatch -S`` prints, with the DirectML version that introduced the level."""
    version = em.level.directml
    return (
        "DirectML:\n"
        f"- Configured Version : {em.label}\n"
        f"- Loaded Version     : {version}\n"
        f"- Emulated Feature Level : {em.level.name}\n\n"
    )


def adapters_text(em: Emulator) -> str:
    return f"{em.label}\n-Version: emulated\n-Hardware: false\n"


class _Stop(Exception):
    def __init__(self, code: int, message: str):
        self.code = code
        super().__init__(message)


def run_model(model_path: Path, out_dir: Path, em: Emulator) -> tuple[int, list[str]]:
    """Run one model file; (exit status, log lines), as DxDispatch's would be."""
    log: list[str] = []
    try:
        _run(model_path, out_dir, em, log)
    except _Stop as exc:
        log.append(str(exc))
        return exc.code, log
    return 0, log


def _run(model_path: Path, out_dir: Path, em: Emulator, log: list[str]) -> None:
    try:
        model = load_model_file(model_path, em.spec)
    except ModelError as exc:
        raise _Stop(E_FAIL, f"ERROR: failed to parse the model: {exc}") from None
    log.append(f"Running on '{em.label}'")
    data = _upload(model, model_path.parent)
    for name, d in model.dispatchables.items():
        why = em.refuse(d.desc)
        if why is not None:
            raise _Stop(E_INVALIDARG, f"ERROR creating dispatchable '{name}': {why}")
    for cmd in model.commands:
        if cmd.type == "dispatch":
            _dispatch(
                model,
                cmd.dispatchable or "",
                {**model.dispatchables[cmd.dispatchable].init_bindings, **cmd.bindings},
                data,
                em,
            )
        elif cmd.type == "writeFile":
            buf = data[cmd.resource]
            n = int(np.prod(cmd.dimensions)) if cmd.dimensions is not None else buf.size
            target = out_dir / (cmd.target or "")
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                np.save(target, buf[:n].reshape(cmd.dimensions or (buf.size,)), allow_pickle=False)
            except (OSError, ValueError) as exc:
                log.append(
                    f"Failed to write resource to file: {exc}"
                )  # DxDispatch logs, exit status unchanged
                continue
            log.append(f"Resource '{cmd.resource}' written to '{target}'")
        elif cmd.type == "print":
            log.append(f"Resource '{cmd.resource}': {data[cmd.resource].tolist()}")


def _upload(model: Model, base: Path) -> dict[str, np.ndarray]:
    data = {}
    for name, r in model.resources.items():
        try:
            dtype = layout.numpy_dtype(r.data_type)
        except ValueError as exc:
            raise _Stop(E_FAIL, f"ERROR: resource '{name}': {exc}") from None
        if r.file is not None:
            try:
                arr = np.load(base / r.file, allow_pickle=False)
            except (OSError, ValueError, EOFError) as exc:
                raise _Stop(E_FAIL, f"ERROR: resource '{name}': cannot read {r.file}: {exc}") from None
            if arr.dtype != dtype:
                raise _Stop(
                    E_FAIL,
                    f"ERROR: Data type from file '{r.file}' does not match field 'initialValuesDataType'.",
                )
            if not arr.flags.c_contiguous:
                raise _Stop(E_FAIL, "ERROR: Fortran stride order unsupported")
            data[name] = np.array(arr.reshape(-1), dtype=dtype)
        else:
            value = float(r.value) if isinstance(r.value, str) else r.value
            data[name] = np.full(r.count, value, dtype=dtype)
    return data


def _dispatch(
    model: Model, name: str, bindings: dict[str, str], data: dict[str, np.ndarray], em: Emulator
) -> None:
    d = model.dispatchables[name]
    ins, outs = bind_points(d.desc, em.spec)
    inputs = {}
    for member in ins:
        t: TensorDesc = d.desc.members[member]
        try:
            inputs[member] = layout.from_buffer(data[bindings[member]], t)
        except ValueError as exc:
            raise _Stop(E_INVALIDARG, f"ERROR: binding {member} of '{name}': {exc}") from None
    try:
        with warnings.catch_warnings():  # a backend's overflow to inf is a value, judged by check
            warnings.simplefilter("ignore", RuntimeWarning)
            result = em.backend.execute(d.desc, inputs)
    except (Rejected, Unsupported) as exc:
        raise _Stop(E_INVALIDARG, f"ERROR dispatching '{name}': {exc}") from None
    except Exception as exc:  # a backend crash is a failed dispatch, not an emulator crash
        raise _Stop(E_FAIL, f"ERROR dispatching '{name}': {type(exc).__name__}: {exc}") from None
    for member in outs:
        t = d.desc.members[member]
        arr = result.get(member) if isinstance(result, dict) else None
        if not isinstance(arr, np.ndarray) or tuple(arr.shape) != tuple(t.sizes):
            raise _Stop(
                E_FAIL, f"ERROR dispatching '{name}': backend returned no {member} of Sizes {list(t.sizes)}"
            )
        try:
            buffers.write_into(data[bindings[member]], arr, t)
        except ValueError as exc:
            raise _Stop(E_INVALIDARG, f"ERROR: binding {member} of '{name}': {exc}") from None


def case_dirs(root: Path) -> list[tuple[Path, list[str]]]:
    """(case directory, files DxDispatch writes there) for every line of cases.txt."""
    text = (root / CASES_LIST).read_text(encoding="utf-8")
    out = []
    for line in text.splitlines():
        parts = line.split()
        if parts:
            out.append((root / parts[0], parts[1:]))
    return out


def emulate_bundle(root: Path, em: Emulator, progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Run every case of the bundle at ``root``; returns counts of exit statuses."""
    (root / DEPENDENCIES).write_text(dependencies_text(em), encoding="utf-8")
    (root / ADAPTERS).write_text(adapters_text(em), encoding="utf-8")
    dirs = case_dirs(root)
    counts = {"ok": 0, "failed": 0}
    for n, (case_dir, outputs) in enumerate(dirs, 1):
        for f in outputs:
            (case_dir / f).unlink(missing_ok=True)
        code, log = run_model(case_dir / MODEL, case_dir, em)
        (case_dir / LOG).write_text("".join(line + "\n" for line in log), encoding="utf-8")
        (case_dir / EXIT_STATUS).write_text(f"{code}\n", encoding="utf-8")
        counts["ok" if code == 0 else "failed"] += 1
        if progress and (n % 100 == 0 or n == len(dirs)):
            progress(f"emulated {n}/{len(dirs)} cases")
    return counts
