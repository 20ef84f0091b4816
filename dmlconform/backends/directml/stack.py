"""The DirectML stack on this machine: which pieces setup left where, the runner's build, and a
started runner with the display it needs.

A verdict on DirectML means nothing without the stack it ran on (the DLL's release, vkd3d's
translation, lavapipe's arithmetic), so :meth:`Stack.describe` travels into every report.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dmlconform.backends.directml import provision
from dmlconform.backends.directml.client import Runner, RunnerCommand
from dmlconform.backends.directml.releases import DEFAULT_DML_VERSION, release

SETUP_COMMAND = "dmlconform directml setup"
#: The compiler setup builds the runner with (Debian's gcc-mingw-w64-x86-64).
MINGW_GCC = "x86_64-w64-mingw32-gcc"
#: The wave size the runner reports with ``wave_ops`` on: 32, NVIDIA's and a common AMD and Intel
#: one. DirectML picks some FLOAT32 reductions by the WaveOps answer (every GPU reports WaveOps;
#: vkd3d 1.6 does not), and by the lane count too: measured on 1.15.4, MVN1 (2, 3, 17, 33) over
#: {2, 3} is bit-identical at 16, 32, 64 and 128 lanes but takes the no-wave reduction at 8 (bit
#: for bit) and 4 (the same error), while BATCH_NORMALIZATION_TRAINING over 2 x 65537 takes the
#: wave one at 8 lanes already.
WAVE_LANES = 32


class StackMissing(RuntimeError):
    """A piece of the stack is absent; the message is one line naming it and the fix."""


def runner_source() -> bytes:
    return resources.files("dmlconform.backends.directml").joinpath("runner.c").read_bytes()


def runner_path(home: Path | None = None) -> Path:
    """Where the runner built from this package's ``runner.c`` lives: named by the source's
    hash, so an edited runner is rebuilt and two versions of the project can share a home."""
    digest = hashlib.sha256(runner_source()).hexdigest()[:12]
    return (home or provision.home()) / "runner" / f"runner-{digest}.exe"


def build_runner(log: provision.Log = None) -> Path:
    """Compile the runner with mingw-w64 (idempotent: an existing build of this source is kept)."""
    exe = runner_path()
    if exe.is_file():
        return exe
    if shutil.which(MINGW_GCC) is None:
        raise provision.ProvisionError(
            f"{MINGW_GCC} not found (package gcc-mingw-w64-x86-64): run {SETUP_COMMAND} as root"
        )
    exe.parent.mkdir(parents=True, exist_ok=True)
    src = exe.with_suffix(".c")
    src.write_bytes(runner_source())
    tmp = exe.with_name(exe.name + ".tmp")
    cmd = [MINGW_GCC, "-O2", "-Wall", "-municode", "-o", str(tmp), str(src), "-ld3d12", "-ldxgi"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or not tmp.is_file():
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if "error" in ln] or ["(no output)"]
        raise provision.ProvisionError(f"building the DirectML runner failed: {lines[0].strip()}")
    os.replace(tmp, exe)
    if log:
        log(f"runner: built {exe.name} with {MINGW_GCC}")
    return exe


def wave_ops_flag(wave_ops: bool) -> str:
    """The runner's ``--wave-ops`` argument (runner.c: LANES, or off)."""
    return f"--wave-ops={WAVE_LANES if wave_ops else 'off'}"


def windows_path(path: Path) -> str:
    """A Linux path as Wine's Z: drive shows it (Wine maps Z: to /)."""
    return "Z:" + str(path.resolve()).replace("/", "\\")


@dataclass(frozen=True)
class Stack:
    """The installed pieces one runner needs."""

    dll: Path
    runner: Path
    prefix: Path
    icd_json: Path
    dml_version: str

    def file_version(self) -> str:
        return provision.file_version(self.dll)

    def command(self, display: str, wave_ops: bool = True) -> RunnerCommand:
        """How to start a runner on ``display``; ``wave_ops`` is what the device tells DirectML
        (on: WaveOps with :data:`WAVE_LANES` lanes, as a GPU; off: none, this stack's truth)."""
        env = provision.environment(self.prefix, self.icd_json, display)
        return RunnerCommand(
            ["wine", str(self.runner), windows_path(self.dll), wave_ops_flag(wave_ops)],
            env,
            cwd=str(self.runner.parent),
        )

    def describe(self) -> dict[str, str]:
        """The stack without starting anything (the runner adds what only DirectML can say)."""

        def safely(fn: Callable[[], str]) -> str:
            try:
                return fn()
            except (provision.ProvisionError, OSError) as exc:
                return f"unknown ({exc})"

        wine = safely(provision.wine_version)
        return {
            "directml": safely(self.file_version),
            "vulkan_driver": f"lavapipe (Mesa {safely(lambda: provision.lavapipe_version(self.icd_json))}, on the CPU)",
            "wine": wine,
            # Debian's changelog of Wine 8.0: "Bundled vkd3d upgraded to version 1.6" (not measured)
            "vkd3d": "1.6, bundled with Wine 8.0" if wine.startswith("wine-8.0") else "bundled with Wine",
            "directml_dll": str(self.dll),
        }


def locate(version: str | None = None, dll: str | Path | None = None) -> Stack:
    """The installed stack for a DirectML ``version`` (or an explicit ``dll``), or StackMissing
    naming the missing piece and the setup command that provides it."""
    home = provision.home()
    missing = [p for p in provision.missing_system_pieces() if p != "gcc-mingw-w64-x86-64"]  # build only
    if missing:
        raise StackMissing(f"DirectML stack: missing {', '.join(missing)}: run {SETUP_COMMAND}")
    if dll:
        dll_path = Path(dll).expanduser()
        if not dll_path.is_file():
            raise StackMissing(f"DirectML stack: dll={dll_path} does not exist")
        dml_version = "custom"
    else:
        dml_version = version or DEFAULT_DML_VERSION
        try:
            release(dml_version)
        except KeyError as exc:
            raise StackMissing(str(exc).strip("'\"")) from None
        dll_path = home / "dll" / dml_version / "DirectML.dll"
        if not dll_path.is_file():
            raise StackMissing(
                f"DirectML {dml_version} is not installed under {home}: run {SETUP_COMMAND} --version {dml_version}"
            )
    icd = provision.installed_lavapipe()
    if icd is None:
        raise StackMissing(
            f"DirectML stack: lavapipe (Mesa 25) is not installed under {home}: run {SETUP_COMMAND}"
        )
    prefix = home / "prefix"
    if not (prefix / "system.reg").is_file():
        raise StackMissing(f"DirectML stack: no Wine prefix under {home}: run {SETUP_COMMAND}")
    exe = runner_path(home)
    if not exe.is_file():
        raise StackMissing(
            f"DirectML stack: the runner for this dmlconform is not built: run {SETUP_COMMAND}"
        )
    return Stack(dll_path, exe, prefix, icd, dml_version)


class Session:
    """A started runner and its private X server. One per process (each pytest-xdist worker
    has its own); both die with the process that started them. ``wave_ops`` defaults to on, what
    DirectML sees on a GPU (the backend's default too)."""

    def __init__(self, stack: Stack, start_timeout: float = 120.0, wave_ops: bool = True) -> None:
        self.stack = stack
        self.wave_ops = wave_ops
        self._xvfb, display = provision.start_xvfb()
        self.runner = Runner(stack.command(display, wave_ops), start_timeout=start_timeout)

    def close(self) -> None:
        try:
            self.runner.stop()
        finally:
            provision.stop_xvfb(self._xvfb)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
