"""What each installed DirectML release did on this stack: the self-test's record per release.

The release table (``releases.py``) says what was measured when it was written; whether a release
runs *here* is decided by running it: ``directml setup`` and ``directml info`` start a runner on
the release, ask DirectML its maximum feature level and run the self-test, and the outcome is
written to ``<home>/dll/<version>/status.json``. ``directml versions`` lists those records and
release sweeps take the releases whose self-test passed: a release that crashes or records nothing
(1.5.1 and 1.10.1 under Wine 8.0 + lavapipe 25) is reported as unable to run here and never
judged, whatever the table says.

A record names the runner and lavapipe it was measured with: after either changes, the record is
stale and ``versions`` says so (re-run ``directml info --version V`` or ``versions --check``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dmlconform.backends.directml import provision, stack
from dmlconform.backends.directml.backend import account
from dmlconform.backends.directml.client import RunnerError
from dmlconform.backends.directml.releases import RELEASES
from dmlconform.backends.directml.stack import runner_path
from dmlconform.specification.spec import Spec

STATUS_FILE = "status.json"


@dataclass(frozen=True)
class Status:
    """The self-test's verdict on one release on this stack.

    ``runs`` is True only when a runner started, DirectML reported a feature level and the
    self-test's outputs matched the reference; ``detail`` is the self-test's line, or why the
    runner did not start. ``max_feature_level`` is what the DLL reported ("" when it never got
    that far); ``runner`` and ``lavapipe`` identify the stack the record holds for."""

    dml_version: str
    runs: bool
    detail: str
    file_version: str = ""
    max_feature_level: str = ""
    float16: str = ""
    runner: str = ""
    lavapipe: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Status:
        fields = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        return cls(**fields)


def status_path(dml_version: str, home: Path | None = None) -> Path:
    return (home or provision.home()) / "dll" / dml_version / STATUS_FILE


def installed(dml_version: str, home: Path | None = None) -> bool:
    return ((home or provision.home()) / "dll" / dml_version / "DirectML.dll").is_file()


def write(status: Status, home: Path | None = None) -> Path:
    """Record ``status`` (atomically: a reader never sees half a record)."""
    path = status_path(status.dml_version, home)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{STATUS_FILE}.{os.getpid()}")
    tmp.write_text(json.dumps(status.to_json(), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read(dml_version: str, home: Path | None = None) -> Status | None:
    """The recorded status, or None when the release was never checked (or the record is unreadable)."""
    try:
        return Status.from_json(json.loads(status_path(dml_version, home).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def current_stack(home: Path | None = None) -> tuple[str, str]:
    """(runner build, lavapipe version) of this installation: what a fresh record would name."""
    runner = runner_path(home).name
    icd = provision.installed_lavapipe()
    try:
        lavapipe = provision.lavapipe_version(icd) if icd is not None else ""
    except provision.ProvisionError:
        lavapipe = ""
    return runner, lavapipe


def stale(status: Status, home: Path | None = None) -> bool:
    """Whether ``status`` was measured with another runner build or lavapipe than installed now."""
    return (status.runner, status.lavapipe) != current_stack(home)


def measure(dml_version: str, spec: Spec) -> Status:
    """Start a runner on ``dml_version``, ask DirectML what it is and run the self-test.

    Never raises for a release that cannot run: a runner that does not start (1.5.1 crashes on
    vkd3d's zero wave lane count) or a self-test that fails (1.10.1 records nothing) is a Status
    with ``runs`` False and the reason. A piece of the stack that is missing raises StackMissing."""
    found = stack.locate(dml_version)
    runner, lavapipe = current_stack()
    try:
        file_version = found.file_version()
    except provision.ProvisionError as exc:
        file_version = f"unknown ({exc})"
    base = {"dml_version": dml_version, "file_version": file_version, "runner": runner, "lavapipe": lavapipe}
    try:
        with stack.Session(found) as session:
            info, test = account(session, spec)
    except (RunnerError, OSError, RuntimeError) as exc:
        return Status(runs=False, detail=f"the runner did not start: {exc}", **base)
    level = info.get("max_feature_level", "")
    runs = test.passed and bool(level)
    detail = test.detail if level else "DirectML reported no feature level (the device did not start)"
    return Status(
        runs=runs,
        detail=("self-test passed: " if runs else "self-test failed: ") + detail,
        max_feature_level=level,
        float16=info.get("float16", ""),
        **base,
    )


def runnable(versions: list[str] | None = None, home: Path | None = None) -> list[str]:
    """The installed releases (of ``versions``, default all known) whose recorded self-test
    passed on the current stack, oldest first: what a release sweep judges."""
    wanted = versions or [r.dml_version for r in RELEASES]
    out = []
    for v in wanted:
        s = read(v, home)
        if installed(v, home) and s is not None and s.runs and not stale(s, home):
            out.append(v)
    return out
