"""Provisioning for the DirectML backend: the pieces that real DirectML needs on Debian 12.

The stack is the Windows ``DirectML.dll`` under Wine 8.0, whose vkd3d translates D3D12 to Vulkan,
on Mesa's lavapipe (software Vulkan), with an X server for DXGI (shared/design/directml-on-linux.md).
Each step here is a plain, idempotent function: it returns at once when its result is already
cached under :func:`home`, and otherwise does the work or raises :class:`ProvisionError` with one
line naming the missing piece or the command to run. Nothing prints; progress goes to an optional
``log`` callable, so the CLI decides what the user sees.

Two traps shape the code. Bookworm's own lavapipe (Mesa 22.3) lacks descriptor indexing and
DirectML then returns S_OK with garbage, so lavapipe 25 is taken from bookworm-backports through a
private apt configuration that never touches the system's sources or lists. And Wine without an X
server cannot create a D3D12 device, so :func:`start_xvfb` gives each run a private Xvfb that dies
with its parent.

Steps take a lock file under :func:`home` so that parallel workers (pytest-xdist, several CLI
runs) provision once instead of racing on the same directories; results are moved into place
with a rename, so an interrupted step leaves nothing that looks finished.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dmlconform.backends.directml.releases import release

Log = Callable[[str], None] | None


class ProvisionError(RuntimeError):
    """A provisioning step could not complete; the message is one line saying what to do."""


# --------------------------------------------------------------------------------------------
# Where things go


def home() -> Path:
    """The directory all provisioned pieces are cached in.

    ``$DMLCONFORM_DIRECTML_HOME`` wins (tests and CI point it elsewhere), then the XDG cache
    directory, so that a Wine prefix (~700 MB) and the DLLs are kept across runs but never land
    in the project tree.
    """
    explicit = os.environ.get("DMLCONFORM_DIRECTML_HOME")
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME")
    base = Path(cache).expanduser() if cache else Path.home() / ".cache"
    return base / "dmlconform" / "directml"


def _say(log: Log, message: str) -> None:
    if log is not None:
        log(message)


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """Hold an exclusive lock named ``name`` under home(): one provisioner at a time per step."""
    locks = home() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _last_line(text: str | bytes | None) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _run(
    cmd: Sequence[str],
    *,
    what: str,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` with output captured; every failure becomes a one-line ProvisionError."""
    try:
        done = subprocess.run(
            list(cmd),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise ProvisionError(f"{what}: command {cmd[0]!r} not found") from None
    except subprocess.TimeoutExpired:
        raise ProvisionError(f"{what}: timed out after {timeout:g} s: {shlex.join(cmd)}") from None
    if done.returncode != 0:
        detail = _last_line(done.stderr) if done.stderr.strip() else _last_line(done.stdout)
        raise ProvisionError(f"{what}: exit {done.returncode}: {detail}")
    return done


# --------------------------------------------------------------------------------------------
# System packages


#: Debian packages of the stack: Wine (``wine`` is the launcher, ``wine64`` the loader and
#: wineserver), the Vulkan loader, Mesa's Vulkan drivers (whose dependencies the backports lavapipe
#: shares), Xvfb with xauth, and the mingw-w64 compiler that builds the Windows runner.
APT_PACKAGES: tuple[str, ...] = (
    "wine",
    "wine64",
    "libvulkan1",
    "mesa-vulkan-drivers",
    "xvfb",
    "xauth",
    "gcc-mingw-w64-x86-64",
)

_COMMAND_PACKAGES: dict[str, str] = {
    "wine": "wine",
    "wineboot": "wine",
    "wineserver": "wine64",
    "Xvfb": "xvfb",
    "xauth": "xauth",
    "x86_64-w64-mingw32-gcc": "gcc-mingw-w64-x86-64",
}


def _have_libvulkan() -> bool:
    if ctypes.util.find_library("vulkan"):
        return True
    try:
        listing = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "libvulkan.so.1 " in listing


def missing_system_pieces() -> list[str]:
    """The Debian packages (in ``APT_PACKAGES`` order, no repeats) whose commands or library are absent."""
    missing = {package for command, package in _COMMAND_PACKAGES.items() if shutil.which(command) is None}
    if not _have_libvulkan():
        missing.add("libvulkan1")
    return [package for package in APT_PACKAGES if package in missing]


def apt_command(packages: Iterable[str]) -> str:
    """The exact shell line that installs ``packages``: what a non-root user is told to run."""
    names = " ".join(shlex.quote(p) for p in packages)
    return (
        f"apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {names}"
    )


def install_system_pieces(log: Log = None) -> list[str]:
    """Install the missing Debian packages when root; return the ones installed (``[]`` if none).

    A non-root caller gets a ProvisionError carrying the exact line to run as root, because
    asking for a password from inside a test run is worse than a clear instruction.
    """
    missing = missing_system_pieces()
    if not missing:
        return []
    line = apt_command(missing)
    if os.geteuid() != 0:
        raise ProvisionError(f"not root: run as root: {line}")
    _say(log, f"installing {' '.join(missing)} (apt-get)")
    _run(["sh", "-c", line], what="apt-get install", timeout=1800)
    still = missing_system_pieces()
    if still:
        raise ProvisionError(f"apt-get finished but {' '.join(still)} still missing: {line}")
    return missing


# --------------------------------------------------------------------------------------------
# Lavapipe 25 from bookworm-backports, through a private apt configuration

#: The lavapipe the design measurements were made with (Mesa 25.0.7, bookworm-backports).
LAVAPIPE_VERSION = "25.0.7-2~bpo12+1"
_DEBIAN_SUITE = "bookworm"
_LAVAPIPE_PACKAGE = "mesa-vulkan-drivers"
_ICD_NAME = "lvp_icd.x86_64.json"


@dataclass(frozen=True)
class Mirror:
    """The machine's own Debian mirror, as its apt sources name it."""

    uri: str
    signed_by: str | None


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    """Fields of each deb822 stanza (keys lower-cased; continuation lines joined by newlines)."""
    fields: dict[str, str] = {}
    key: str | None = None
    for raw in text.splitlines() + [""]:
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if fields:
                yield fields
            fields, key = {}, None
        elif raw[0] in " \t":
            if key is not None:
                fields[key] += "\n" + raw.strip()
        elif ":" in raw:
            name, _, value = raw.partition(":")
            key = name.strip().lower()
            fields[key] = value.strip()


def _keyring(value: str | None) -> str | None:
    """A Signed-By value usable in a one-line entry: a keyring path, not an inline key block."""
    if value and value.strip().startswith("/") and "\n" not in value.strip():
        return value.strip()
    return None


def _mirror_from_deb822(text: str, suite: str) -> Mirror | None:
    for stanza in _deb822_stanzas(text):
        if stanza.get("enabled", "yes").lower() in ("no", "false", "0"):
            continue
        if "deb" not in stanza.get("types", "").split():
            continue
        if suite not in stanza.get("suites", "").split():
            continue
        uris = [u for u in stanza.get("uris", "").split() if u.startswith(("http://", "https://"))]
        if uris:
            return Mirror(uris[0], _keyring(stanza.get("signed-by")))
    return None


def _mirror_from_one_line(text: str, suite: str) -> Mirror | None:
    for raw in text.splitlines():
        tokens = raw.split("#", 1)[0].split()
        if not tokens or tokens[0] != "deb":
            continue
        tokens = tokens[1:]
        options: dict[str, str] = {}
        if tokens and tokens[0].startswith("["):
            joined = []
            while tokens:
                token = tokens.pop(0)
                joined.append(token)
                if token.endswith("]"):
                    break
            for option in " ".join(joined).strip("[] ").split():
                name, _, value = option.partition("=")
                options[name.lower()] = value
        if len(tokens) >= 2 and tokens[1] == suite and tokens[0].startswith(("http://", "https://")):
            return Mirror(tokens[0], _keyring(options.get("signed-by")))
    return None


def debian_mirror(
    sources_dir: Path = Path("/etc/apt/sources.list.d"),
    sources_list: Path = Path("/etc/apt/sources.list"),
    suite: str = _DEBIAN_SUITE,
) -> Mirror:
    """The URI (and keyring) of the first enabled ``deb`` source for ``suite`` on this machine.

    Read at run time, never written into the code: the machine's mirror is the one apt already
    reaches (a proxy, a snapshot or a local mirror), and backports is on every Debian mirror.
    deb822 ``*.sources`` files are read first, then ``*.list`` files and ``sources.list``.
    """
    candidates: list[tuple[Path, bool]] = []
    if sources_dir.is_dir():
        candidates += [(p, True) for p in sorted(sources_dir.glob("*.sources"))]
        candidates += [(p, False) for p in sorted(sources_dir.glob("*.list"))]
    candidates.append((sources_list, False))
    for path, deb822 in candidates:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        found = _mirror_from_deb822(text, suite) if deb822 else _mirror_from_one_line(text, suite)
        if found is not None:
            return found
    raise ProvisionError(
        f"no Debian '{suite}' deb source in {sources_dir}/*.sources, *.list or {sources_list}"
    )


def backports_line(mirror: Mirror, suite: str = _DEBIAN_SUITE) -> str:
    """The one sources line of the private apt configuration: the mirror's backports suite."""
    options = f"[signed-by={mirror.signed_by}] " if mirror.signed_by else ""
    return f"deb {options}{mirror.uri} {suite}-backports main\n"


def _apt_options(apt_dir: Path) -> list[str]:
    """apt options that confine apt to ``apt_dir``: the system's sources and lists stay untouched."""
    options = {
        "Dir::Etc::SourceList": str(apt_dir / "sources.list"),
        "Dir::Etc::SourceParts": "/nonexistent",
        "Dir::State::Lists": str(apt_dir / "lists"),
        "Dir::Cache": str(apt_dir / "cache"),
        "Debug::NoLocking": "1",
    }
    if os.geteuid() == 0:
        # apt drops to _apt for downloads, which cannot enter root's private cache directory.
        options["APT::Sandbox::User"] = "root"
    return [arg for name, value in options.items() for arg in ("-o", f"{name}={value}")]


def _installed_lavapipe(root: Path) -> Path | None:
    """A complete lavapipe under ``root``: the pinned version if present, else the newest other."""

    def complete(directory: Path) -> bool:
        icd = directory / _ICD_NAME
        if not icd.is_file():
            return False
        try:
            library = Path(json.loads(icd.read_text())["ICD"]["library_path"])
        except (OSError, ValueError, KeyError, TypeError):
            return False
        return library.is_file()

    pinned = root / LAVAPIPE_VERSION
    if complete(pinned):
        return pinned / _ICD_NAME
    others = [d for d in root.glob("*") if d.is_dir() and not d.name.startswith(".") and complete(d)]
    if others:
        return max(others, key=lambda d: d.stat().st_mtime) / _ICD_NAME
    return None


def installed_lavapipe() -> Path | None:
    """The ICD json of the lavapipe setup installed (None when there is none): what runs use."""
    return _installed_lavapipe(home() / "lavapipe")


def _backports_versions(apt_dir: Path) -> list[str]:
    """Versions of mesa-vulkan-drivers the private lists offer, newest first (apt-cache madison)."""
    done = _run(
        ["apt-cache", *_apt_options(apt_dir), "madison", _LAVAPIPE_PACKAGE],
        what="apt-cache madison",
        timeout=120,
    )
    versions = []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= 3 and parts[0] == _LAVAPIPE_PACKAGE and "Packages" in parts[2]:
            versions.append(parts[1])
    return versions


def _unresolved_libraries(library: Path) -> list[str]:
    done = _run(["ldd", str(library)], what=f"ldd {library.name}", timeout=60)
    return [line.split()[0] for line in done.stdout.splitlines() if "not found" in line]


def ensure_lavapipe(log: Log = None) -> Path:
    """Path of a Vulkan ICD json for lavapipe 25 under ``home()/lavapipe/<deb version>/``.

    Returns at once when a complete one is there. Otherwise runs apt with a private
    configuration under ``home()/apt`` (sources line from :func:`debian_mirror`, suite
    bookworm-backports) to download ``mesa-vulkan-drivers`` (the pinned ``LAVAPIPE_VERSION`` if the
    suite still has it, else the suite's current one, logged), unpacks it with ``dpkg-deb -x``
    and writes the json whose ``library_path`` is the unpacked ``libvulkan_lvp.so``. The deb
    version that was taken is written to ``version.txt`` next to the json.
    """
    root = home() / "lavapipe"
    with _locked("lavapipe"):
        found = _installed_lavapipe(root)
        if found is not None:
            return found
        apt_dir = home() / "apt"
        version = _lavapipe_version_to_take(apt_dir, log)
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".download-", dir=root) as download:
            final = _unpack_lavapipe(apt_dir, version, Path(download), root / version, log)
        _say(log, f"lavapipe {version} ready: {final / _ICD_NAME}")
        return final / _ICD_NAME


def _lavapipe_version_to_take(apt_dir: Path, log: Log) -> str:
    """Update the private apt lists under ``apt_dir`` from the backports suite and pick the deb
    version: the pinned one while the suite has it, else the suite's newest (logged)."""
    for sub in ("lists/partial", "cache/archives/partial"):
        (apt_dir / sub).mkdir(parents=True, exist_ok=True)
    mirror = debian_mirror()
    (apt_dir / "sources.list").write_text(backports_line(mirror))
    _say(log, f"apt-get update ({_DEBIAN_SUITE}-backports, private lists under {apt_dir})")
    _run(["apt-get", *_apt_options(apt_dir), "update"], what="apt-get update (backports)", timeout=300)
    versions = _backports_versions(apt_dir)
    if not versions:
        raise ProvisionError(f"{_LAVAPIPE_PACKAGE} not found in {_DEBIAN_SUITE}-backports at {mirror.uri}")
    version = LAVAPIPE_VERSION if LAVAPIPE_VERSION in versions else versions[0]
    if version != LAVAPIPE_VERSION:
        _say(log, f"lavapipe {LAVAPIPE_VERSION} is gone from backports; taking {version}")
    return version


def _unpack_lavapipe(apt_dir: Path, version: str, download: Path, final: Path, log: Log) -> Path:
    """Download the deb into ``download``, unpack it there, check that its library loads, write
    its ICD json and version.txt, and move the tree to ``final`` by rename (a tree is complete
    or absent)."""
    _say(log, f"downloading {_LAVAPIPE_PACKAGE}={version}")
    _run(
        ["apt-get", *_apt_options(apt_dir), "download", f"{_LAVAPIPE_PACKAGE}={version}"],
        what="apt-get download",
        timeout=600,
        cwd=download,
    )
    debs = sorted(download.glob("*.deb"))
    if len(debs) != 1:
        raise ProvisionError(f"apt-get download left {len(debs)} .deb files in {download}")
    staging = download / "tree"
    _run(["dpkg-deb", "-x", str(debs[0]), str(staging)], what="dpkg-deb -x", timeout=300)
    libraries = sorted(staging.rglob("libvulkan_lvp.so"))
    if not libraries:
        raise ProvisionError(f"no libvulkan_lvp.so in {debs[0].name}")
    unresolved = _unresolved_libraries(libraries[0])
    if unresolved:
        raise ProvisionError(
            f"lavapipe {version} needs {' '.join(unresolved)}: run as root: "
            f"{apt_command([_LAVAPIPE_PACKAGE])}"
        )
    library = final / libraries[0].relative_to(staging)
    icd = {
        "file_format_version": "1.0.0",
        "ICD": {"library_path": str(library), "api_version": "1.3.0"},
    }
    (staging / _ICD_NAME).write_text(json.dumps(icd, indent=2) + "\n")
    (staging / "version.txt").write_text(version + "\n")
    if final.exists():
        shutil.rmtree(final)  # incomplete leftovers: _installed_lavapipe did not accept it
    staging.rename(final)
    return final


def lavapipe_version(icd_json: Path) -> str:
    """The Debian version of the lavapipe behind ``icd_json``, as recorded when it was unpacked."""
    recorded = icd_json.parent / "version.txt"
    try:
        return recorded.read_text().strip()
    except OSError:
        raise ProvisionError(f"no {recorded}: re-run ensure_lavapipe (delete {icd_json.parent})") from None


# --------------------------------------------------------------------------------------------
# DirectML.dll from an onnxruntime-directml Windows wheel

_WHEEL_MEMBER = "onnxruntime/capi/DirectML.dll"


def wheel_member(names: Iterable[str]) -> str:
    """The wheel member that is DirectML's DLL: ``onnxruntime/capi/DirectML.dll`` at the top of
    newer wheels, under ``<name>.data/purelib/`` in older ones (1.10.0-1.11.1 measured), so the
    path is matched by its ending. KeyError when no member matches."""
    for name in names:
        if name == _WHEEL_MEMBER or name.endswith("/" + _WHEEL_MEMBER):
            return name
    raise KeyError(_WHEEL_MEMBER)


_FILE_VERSION_KEY = "FileVersion\0".encode("utf-16-le")


def file_version(dll: Path) -> str:
    """The ``FileVersion`` string of a PE file's version resource, read without Wine.

    A VS_VERSIONINFO ``String`` is ``wLength, wValueLength, wType`` (three WORDs), the key in
    UTF-16LE with its NUL, NUL padding to a 32-bit boundary, then the value in UTF-16LE up to its
    NUL. The key is searched for in the raw bytes and accepted only where that header makes sense
    (text type, a length that covers key and value and stays inside the file), so the same word
    elsewhere in the file (a query string such as ``\\StringFileInfo\\...\\FileVersion``) is skipped.
    """
    try:
        data = dll.read_bytes()
    except OSError as exc:
        raise ProvisionError(f"cannot read {dll}: {exc.strerror}") from None
    start = 0
    while (at := data.find(_FILE_VERSION_KEY, start)) >= 0:
        start = at + 1
        struct = at - 6
        if struct < 0 or at % 2:
            continue
        length, value_length, kind = (
            int.from_bytes(data[struct + i : struct + i + 2], "little") for i in (0, 2, 4)
        )
        value_at = struct + ((6 + len(_FILE_VERSION_KEY) + 3) & ~3)
        end = struct + length
        if kind not in (0, 1) or end > len(data) or end <= value_at or value_length == 0:
            continue
        if data[at + len(_FILE_VERSION_KEY) : value_at].strip(b"\0"):
            continue
        raw = data[value_at:end]
        for index in range(0, len(raw) - 1, 2):
            if raw[index : index + 2] == b"\0\0":
                raw = raw[:index]
                break
        value = raw[: len(raw) & ~1].decode("utf-16-le", "replace").strip()
        if value:
            return value
    raise ProvisionError(f"no FileVersion in the version resource of {dll}")


def _version_matches(found: str, dml_version: str) -> bool:
    """FileVersion ``1.15.4+241025-...`` is DirectML 1.15.4 (but ``1.15.41`` is not)."""
    return re.match(re.escape(dml_version) + r"(?![0-9])", found) is not None


def ensure_dll(dml_version: str, log: Log = None) -> Path:
    """``home()/dll/<dml_version>/DirectML.dll``, downloaded from its wheel if absent, then verified.

    The wheel comes from PyPI through ``pip download`` (win_amd64, binary only, the table's
    ``--python-version``), the DLL is taken out of the wheel zip and moved into place by rename.
    The DLL's FileVersion must start with ``dml_version``: the wheel table is the one thing here
    that could silently test a different DirectML.
    """
    try:
        row = release(dml_version)
    except KeyError as exc:
        raise ProvisionError(exc.args[0]) from None
    dest = home() / "dll" / dml_version / "DirectML.dll"
    with _locked(f"dll-{dml_version}"):
        if not dest.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            requirement = f"{row.package}=={row.package_version}"
            _say(log, f"pip download {requirement} (DirectML {dml_version})")
            with tempfile.TemporaryDirectory(prefix=".download-", dir=dest.parent) as download:
                wheel = _download_wheel(requirement, row.python_version, download)
                partial = Path(download) / "DirectML.dll"
                _extract_dll(wheel, partial)
                found = file_version(partial)
                if not _version_matches(found, dml_version):
                    raise ProvisionError(
                        f"{requirement} carries DirectML {found}, not {dml_version}: fix releases.py"
                    )
                os.replace(partial, dest)
        found = file_version(dest)
        if not _version_matches(found, dml_version):
            raise ProvisionError(f"{dest} is DirectML {found}, not {dml_version}: delete it and retry")
    _say(log, f"DirectML {found}: {dest}")
    return dest


def _download_wheel(requirement: str, python_version: str, download: str) -> Path:
    """The one Windows wheel ``pip download`` leaves in ``download`` for ``requirement``."""
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            "win_amd64",
            "--python-version",
            python_version,
            "--disable-pip-version-check",
            "--no-input",
            "--progress-bar",
            "off",
            requirement,
            "-d",
            download,
        ],
        what=f"pip download {requirement}",
        timeout=900,
    )
    wheels = sorted(Path(download).glob("*.whl"))
    if len(wheels) != 1:
        raise ProvisionError(f"pip download {requirement} left {len(wheels)} wheels")
    return wheels[0]


def _extract_dll(wheel_path: Path, partial: Path) -> None:
    """Copy the wheel's DirectML.dll to ``partial``; a wheel without one, or no zip, is an error."""
    try:
        with (
            zipfile.ZipFile(wheel_path) as wheel,
            wheel.open(wheel_member(wheel.namelist())) as member,
            open(partial, "wb") as out,
        ):
            shutil.copyfileobj(member, out, 1 << 20)
    except KeyError:
        raise ProvisionError(f"{wheel_path.name} has no {_WHEEL_MEMBER}") from None
    except zipfile.BadZipFile:
        raise ProvisionError(f"{wheel_path.name} is not a valid wheel (zip)") from None


# --------------------------------------------------------------------------------------------
# Wine: environment, prefix, X server

_DLL_OVERRIDES = "winemenubuilder.exe=d;winedbg.exe=d;mscoree=d;mshtml=d"


def environment(prefix: Path, icd_json: Path | None, display: str | None) -> dict[str, str]:
    """The environment Wine + vkd3d + lavapipe ran DirectML in, layered over ``os.environ``.

    Why each entry: ``VKD3D_CONFIG=virtual_heaps`` (without it every descriptor heap costs 1-2 s
    on lavapipe), ``VK_ICD_FILENAMES`` (lavapipe 25, not bookworm's 22.3 that lacks descriptor
    indexing), ``WINEDLLOVERRIDES`` (no Mono / Gecko prompts, no menu entries in $HOME, and no
    debugger that hangs two minutes on a crash), ``XDG_CACHE_HOME`` (Mesa's shader cache kept
    under home(), warm across runs), ``XDG_RUNTIME_DIR`` (private, mode 700, created here).
    ``display`` None removes an inherited DISPLAY (wineboot needs none); ``icd_json`` None
    removes VK_ICD_FILENAMES (nothing Vulkan runs then).
    """
    runtime = home() / "run"
    runtime.mkdir(parents=True, exist_ok=True)
    runtime.chmod(0o700)
    cache = home() / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        {
            "WINEPREFIX": str(prefix),
            "WINEARCH": "win64",
            "WINEDEBUG": "-all",
            "WINEDLLOVERRIDES": _DLL_OVERRIDES,
            "XDG_RUNTIME_DIR": str(runtime),
            "XDG_CACHE_HOME": str(cache),
            "VKD3D_CONFIG": "virtual_heaps",
        }
    )
    for name, value in (
        ("DISPLAY", display),
        ("VK_ICD_FILENAMES", None if icd_json is None else str(icd_json)),
    ):
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def ensure_prefix(log: Log = None) -> Path:
    """``home()/prefix``, a 64-bit Wine prefix, created with ``wineboot -i`` if it has no system.reg.

    wineboot needs no X server (checked with Wine 8.0: exit 0, same registry), so none is started.
    The prefix is built under a temporary name and renamed into place after ``wineserver -w``
    (Wine keeps no absolute prefix path inside it), so a killed wineboot leaves no half prefix
    that a later call would take for a finished one.
    """
    prefix = home() / "prefix"
    with _locked("prefix"):
        if (prefix / "system.reg").is_file():
            return prefix
        building = home() / f".prefix-{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        env = environment(building, None, None)
        _say(log, f"wineboot -i (new Wine prefix, ~700 MB): {prefix}")
        try:
            _run(["wineboot", "-i"], what="wineboot -i", timeout=600, env=env)
            _run(["wineserver", "-w"], what="wineserver -w", timeout=180, env=env)
        except ProvisionError:
            with contextlib.suppress(ProvisionError):
                _run(["wineserver", "-k"], what="wineserver -k", timeout=30, env=env)
            shutil.rmtree(building, ignore_errors=True)
            raise
        if not (building / "system.reg").is_file():
            shutil.rmtree(building, ignore_errors=True)
            raise ProvisionError(f"wineboot -i exited 0 but wrote no system.reg (WINEPREFIX={building})")
        if prefix.exists():
            shutil.rmtree(prefix)  # a prefix without system.reg is not one
        building.rename(prefix)
    return prefix


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None]:
    """A preexec_fn asking the kernel to SIGTERM the child when its parent thread exits.

    Resolved before fork so the child only makes one libc call. Note that the signal follows the
    *thread* that forked: start Xvfb from a thread that lives as long as the run.
    """
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    return preexec


def start_xvfb(timeout: float = 10.0) -> tuple[subprocess.Popen[bytes], str]:
    """Start a private Xvfb on a free display; return the process and its ``":N"``.

    ``-displayfd`` lets Xvfb pick a free display and tells us which, so parallel runs never
    collide on a fixed number. TCP is off; the unix socket stays, since that is how Wine's X11
    driver connects. The child gets PR_SET_PDEATHSIG, so a killed runner leaves no Xvfb behind.
    """
    if shutil.which("Xvfb") is None:
        raise ProvisionError(f"Xvfb not found: run as root: {apt_command(['xvfb', 'xauth'])}")
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen(
                ["Xvfb", "-displayfd", str(write_end), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                pass_fds=(write_end,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                preexec_fn=_die_with_parent(),
            )
        except OSError as exc:
            os.close(read_end)
            raise ProvisionError(f"Xvfb did not start: {exc}") from None
        finally:
            os.close(write_end)
        try:
            number = _read_line(read_end, timeout)
        finally:
            os.close(read_end)
        if not number.isdigit():
            status = "named no display" if proc.poll() is None else f"exited ({proc.returncode})"
            stop_xvfb(proc)
            errors.seek(0)
            raise ProvisionError(f"Xvfb {status} within {timeout:g} s: {_last_line(errors.read())}")
    return proc, f":{int(number)}"


def _read_line(fd: int, timeout: float) -> str:
    """What arrives on ``fd`` up to a newline, EOF or ``timeout`` seconds, stripped."""
    received = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in received:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 64)
        if not chunk:  # the writer exited or closed the fd
            break
        received += chunk
    return received.decode("ascii", "replace").strip()


def stop_xvfb(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """Terminate an Xvfb from :func:`start_xvfb` (SIGKILL if SIGTERM is not enough); idempotent."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def wine_version() -> str:
    """``wine --version`` (e.g. ``wine-8.0 (Debian 8.0~repack-4)``), for the report's environment."""
    done = _run(["wine", "--version"], what="wine --version", timeout=60)
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if not lines:
        raise ProvisionError("wine --version printed nothing")
    return lines[0]
