"""DirectML provisioning: the release table, the cache layout, the private apt and pip steps.

Everything but the last tests runs without network, Wine or root: subprocesses are replaced by
fakes that do what apt, dpkg-deb, pip and wineboot would do to the file system, so the steps'
own logic (which version, which paths, what is left behind on failure, what returns early) is
what is tested. The Xvfb tests need Xvfb, and the last test provisions the real stack (cached under
home(), so only the first run is slow) and creates a DirectML device under Wine with it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from dmlconform.backends.directml import provision
from dmlconform.backends.directml.provision import Mirror, ProvisionError
from dmlconform.backends.directml.releases import DEFAULT_DML_VERSION, RELEASES, Release, release

DOC_VERSIONS = [
    "1.5.1",
    "1.8.0",
    "1.9.0",
    "1.9.1",
    "1.10.1",
    "1.12.0",
    "1.12.1",
    "1.13.1",
    "1.14.1",
    "1.15.1",
    "1.15.2",
    "1.15.4",
]

# What `pip index versions onnxruntime-directml --platform win_amd64 --only-binary=:all:` lists
# per --python-version (design doc, checked again when the table was written).
PIP_LISTS = {"3.8": ("1.9.0", "1.19.2"), "3.10": ("1.12.0", "1.23.0"), "3.12": ("1.17.0", "1.24.4")}


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


# --------------------------------------------------------------------------------------------
# releases


def test_release_table_covers_the_doc_rows_once_each() -> None:
    assert [r.dml_version for r in RELEASES] == DOC_VERSIONS
    assert len({r.package_version for r in RELEASES}) == len(RELEASES)
    assert all(r.package == "onnxruntime-directml" for r in RELEASES)
    assert release(DEFAULT_DML_VERSION).dml_version == DEFAULT_DML_VERSION == "1.15.4"
    assert release("1.15.4").package_version == "1.24.4"
    assert release("1.15.4").python_version == "3.12"
    assert release("1.9.1").package_version == "1.13.1"


def test_each_wheel_is_listed_for_its_python_version() -> None:
    for row in RELEASES:
        low, high = PIP_LISTS[row.python_version]
        assert _key(low) <= _key(row.package_version) <= _key(high), row


def test_runs_here_false_only_where_the_doc_says_with_the_reason() -> None:
    broken = {r.dml_version: r.note for r in RELEASES if not r.runs_here}
    assert set(broken) == {"1.5.1", "1.10.1"}
    assert "WaveLaneCountMin" in broken["1.5.1"]
    assert "ID3D12Device5" in broken["1.10.1"]
    assert release("1.5.1").max_feature_level is None
    assert release("1.10.1").max_feature_level == "5_2"
    assert release("1.13.1").max_feature_level == "6_2"


def test_release_is_frozen() -> None:
    with pytest.raises(AttributeError):
        release("1.15.4").runs_here = False  # type: ignore[misc]
    assert isinstance(release("1.8.0"), Release)


def test_unknown_release_lists_the_known_versions() -> None:
    with pytest.raises(KeyError) as caught:
        release("9.9")
    message = caught.value.args[0]
    assert "'9.9'" in message and "\n" not in message
    assert message.endswith(", ".join(DOC_VERSIONS))


# --------------------------------------------------------------------------------------------
# home and environment


def test_home_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    monkeypatch.delenv("DMLCONFORM_DIRECTML_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert provision.home() == tmp_path / "h" / ".cache" / "dmlconform" / "directml"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert provision.home() == tmp_path / "xdg" / "dmlconform" / "directml"
    monkeypatch.setenv("DMLCONFORM_DIRECTML_HOME", str(tmp_path / "explicit"))
    assert provision.home() == tmp_path / "explicit"
    monkeypatch.setenv("DMLCONFORM_DIRECTML_HOME", "")
    assert provision.home() == tmp_path / "xdg" / "dmlconform" / "directml"


@pytest.fixture
def dml_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    home = tmp_path / "dmlhome"
    monkeypatch.setenv("DMLCONFORM_DIRECTML_HOME", str(home))
    return home


def test_environment(dml_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", ":42")
    monkeypatch.setenv("VK_ICD_FILENAMES", "/somewhere/else.json")
    monkeypatch.setenv("DMLCONFORM_TEST_MARKER", "kept")
    env = provision.environment(Path("/p"), Path("/icd.json"), ":7")
    assert env["WINEPREFIX"] == "/p"
    assert env["WINEARCH"] == "win64"
    assert env["WINEDEBUG"] == "-all"
    assert env["DISPLAY"] == ":7"
    assert env["VK_ICD_FILENAMES"] == "/icd.json"
    assert env["VKD3D_CONFIG"] == "virtual_heaps"
    assert env["XDG_CACHE_HOME"] == str(dml_home / "cache")
    assert env["WINEDLLOVERRIDES"] == "winemenubuilder.exe=d;winedbg.exe=d;mscoree=d;mshtml=d"
    assert env["DMLCONFORM_TEST_MARKER"] == "kept"
    runtime = Path(env["XDG_RUNTIME_DIR"])
    assert runtime == dml_home / "run"
    assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
    assert (dml_home / "cache").is_dir()
    bare = provision.environment(Path("/p"), None, None)
    assert "DISPLAY" not in bare and "VK_ICD_FILENAMES" not in bare
    assert os.environ["DISPLAY"] == ":42"  # os.environ itself untouched


# --------------------------------------------------------------------------------------------
# system packages


def test_apt_command_text() -> None:
    assert provision.apt_command(["xvfb", "xauth"]) == (
        "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends xvfb xauth"
    )
    assert provision.apt_command(provision.APT_PACKAGES).endswith(
        "wine wine64 libvulkan1 mesa-vulkan-drivers xvfb xauth gcc-mingw-w64-x86-64"
    )


def test_missing_system_pieces_maps_commands_to_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    absent = {"wineboot", "Xvfb", "x86_64-w64-mingw32-gcc", "wineserver"}
    monkeypatch.setattr(
        provision.shutil, "which", lambda name: None if name in absent else f"/usr/bin/{name}"
    )
    monkeypatch.setattr(provision, "_have_libvulkan", lambda: False)
    assert provision.missing_system_pieces() == [
        "wine",
        "wine64",
        "libvulkan1",
        "xvfb",
        "gcc-mingw-w64-x86-64",
    ]
    monkeypatch.setattr(provision.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(provision, "_have_libvulkan", lambda: True)
    assert provision.missing_system_pieces() == []


def _forbid_subprocesses(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(cmd, **kwargs):
        raise AssertionError(f"ran {cmd}")

    monkeypatch.setattr(provision, "_run", refuse)


def test_install_system_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    _forbid_subprocesses(monkeypatch)
    monkeypatch.setattr(provision, "missing_system_pieces", lambda: [])
    assert provision.install_system_pieces() == []

    monkeypatch.setattr(provision, "missing_system_pieces", lambda: ["xvfb", "xauth"])
    monkeypatch.setattr(provision.os, "geteuid", lambda: 1000)
    with pytest.raises(ProvisionError) as caught:
        provision.install_system_pieces()
    assert str(caught.value) == f"not root: run as root: {provision.apt_command(['xvfb', 'xauth'])}"

    calls: list[list[str]] = []
    answers = iter([["xvfb"], []])
    monkeypatch.setattr(provision, "missing_system_pieces", lambda: next(answers))
    monkeypatch.setattr(provision.os, "geteuid", lambda: 0)
    monkeypatch.setattr(provision, "_run", lambda cmd, **kw: calls.append(cmd))
    assert provision.install_system_pieces(log=lambda _: None) == ["xvfb"]
    assert calls == [["sh", "-c", provision.apt_command(["xvfb"])]]


def test_install_failure_is_one_line_with_the_last_stderr_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provision, "missing_system_pieces", lambda: ["xvfb"])
    monkeypatch.setattr(provision.os, "geteuid", lambda: 0)
    real_run = subprocess.run

    def fake(cmd, **kwargs):
        assert cmd[:2] == ["sh", "-c"] and "apt-get install" in cmd[2]
        return real_run(
            ["sh", "-c", "echo first >&2; echo 'E: Unable to locate package xvfb' >&2; exit 100"], **kwargs
        )

    monkeypatch.setattr(provision.subprocess, "run", fake)
    with pytest.raises(ProvisionError) as caught:
        provision.install_system_pieces()
    assert str(caught.value) == "apt-get install: exit 100: E: Unable to locate package xvfb"


def test_run_reports_missing_command_and_timeout() -> None:
    with pytest.raises(ProvisionError, match="command 'no-such-command-dmlconform' not found"):
        provision._run(["no-such-command-dmlconform"], what="probe", timeout=5)
    with pytest.raises(ProvisionError, match=r"^nap: timed out after 0.2 s: sleep 5$"):
        provision._run(["sleep", "5"], what="nap", timeout=0.2)


# --------------------------------------------------------------------------------------------
# mirror discovery

DEB822 = """\
Types: deb
URIs: http://security.mirror.invalid/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
Enabled: no
URIs: http://disabled.mirror.invalid/debian
Suites: bookworm
Components: main

Types: deb-src
URIs: http://source.mirror.invalid/debian
Suites: bookworm
Components: main

Types: deb
# http://snapshot.mirror.invalid/archive/debian/20250520T000000Z
URIs: http://main.mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""

ONE_LINE = """\
# deb http://commented.mirror.invalid/debian bookworm main
deb-src http://source.mirror.invalid/debian bookworm main
deb https://vendor.invalid/apt cloud-sdk-bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://line.mirror.invalid/debian bookworm main contrib
"""


def test_mirror_from_deb822_sources(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "debian.sources").write_text(DEB822)
    (tmp_path / "d" / "vendor.sources.disabled").write_text(DEB822.replace("main.mirror", "wrong.mirror"))
    mirror = provision.debian_mirror(tmp_path / "d", tmp_path / "absent.list")
    assert mirror == Mirror(
        "http://main.mirror.invalid/debian", "/usr/share/keyrings/debian-archive-keyring.gpg"
    )
    assert provision.backports_line(mirror) == (
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://main.mirror.invalid/debian bookworm-backports main\n"
    )


def test_mirror_from_one_line_sources(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "vendor.list").write_text("deb https://vendor.invalid/apt cloud-sdk-bookworm main\n")
    (tmp_path / "sources.list").write_text(ONE_LINE)
    mirror = provision.debian_mirror(tmp_path / "d", tmp_path / "sources.list")
    assert mirror == Mirror(
        "http://line.mirror.invalid/debian", "/usr/share/keyrings/debian-archive-keyring.gpg"
    )
    (tmp_path / "sources.list").write_text("deb http://plain.mirror.invalid/debian bookworm main\n")
    mirror = provision.debian_mirror(tmp_path / "d", tmp_path / "sources.list")
    assert mirror == Mirror("http://plain.mirror.invalid/debian", None)
    assert (
        provision.backports_line(mirror) == "deb http://plain.mirror.invalid/debian bookworm-backports main\n"
    )


def test_inline_key_is_not_a_keyring(tmp_path: Path) -> None:
    inline = "Types: deb\nURIs: http://m.invalid/debian\nSuites: bookworm\nSigned-By:\n -----BEGIN PGP\n .\n"
    (tmp_path / "x.sources").write_text(inline)
    assert provision.debian_mirror(tmp_path, tmp_path / "none") == Mirror("http://m.invalid/debian", None)


def test_no_mirror_is_a_provision_error(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text("deb https://vendor.invalid/apt cloud-sdk-bookworm main\n")
    with pytest.raises(ProvisionError, match="no Debian 'bookworm' deb source"):
        provision.debian_mirror(tmp_path / "nodir", tmp_path / "sources.list")


# --------------------------------------------------------------------------------------------
# file_version


def _version_string(key: str, value: str) -> bytes:
    """A VS_VERSIONINFO String: wLength, wValueLength, wType, key, pad to 32 bits, value."""
    key_bytes = (key + "\0").encode("utf-16-le")
    value_bytes = (value + "\0").encode("utf-16-le")
    head = 6 + len(key_bytes)
    pad = b"\0" * (-head % 4)
    body = (
        struct.pack("<HHH", head + len(pad) + len(value_bytes), len(value) + 1, 1)
        + key_bytes
        + pad
        + value_bytes
    )
    return body + b"\0" * (-len(body) % 4)


def fake_dll(version: str) -> bytes:
    """Junk, a decoy query string naming FileVersion, then a StringTable with the real entry."""
    decoy = "\\StringFileInfo\\040904B0\\FileVersion\0" + "9.9.9\0"
    table = (
        _version_string("CompanyName", "Microsoft Corporation")
        + _version_string("FileDescription", "DirectML")
        + _version_string("FileVersion", version)
        + _version_string("ProductVersion", "2.0.0")
    )
    blob = b"MZ" + bytes(range(256)) * 3 + decoy.encode("utf-16-le")
    return blob + b"\0" * (-len(blob) % 4) + table + b"\xff" * 64


def test_file_version_reads_the_version_resource(tmp_path: Path) -> None:
    dll = tmp_path / "DirectML.dll"
    dll.write_bytes(fake_dll("1.15.4+241025-1615.1.dml-1.15.fac7597"))
    assert provision.file_version(dll) == "1.15.4+241025-1615.1.dml-1.15.fac7597"
    dll.write_bytes(b"\0\0" + fake_dll("1.8.0"))  # the resource at another 32-bit phase
    assert provision.file_version(dll) == "1.8.0"


def test_file_version_without_resource(tmp_path: Path) -> None:
    dll = tmp_path / "x.dll"
    dll.write_bytes(b"MZ" + "\\StringFileInfo\\FileVersion\0".encode("utf-16-le") + b"\0" * 8)
    with pytest.raises(ProvisionError, match="no FileVersion"):
        provision.file_version(dll)
    with pytest.raises(ProvisionError, match="cannot read"):
        provision.file_version(tmp_path / "absent.dll")


def test_version_match_is_on_a_component_boundary() -> None:
    assert provision._version_matches("1.15.4+241025-1615.1.dml-1.15.fac7597", "1.15.4")
    assert provision._version_matches("1.9.1.0", "1.9.1")
    assert not provision._version_matches("1.15.41", "1.15.4")
    assert not provision._version_matches("1.15.2+x", "1.15.4")


# --------------------------------------------------------------------------------------------
# ensure_lavapipe


def _fake_lavapipe(directory: Path, version: str) -> Path:
    library = directory / "usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"\x7fELF")
    icd = directory / "lvp_icd.x86_64.json"
    icd.write_text(json.dumps({"file_format_version": "1.0.0", "ICD": {"library_path": str(library)}}))
    (directory / "version.txt").write_text(version + "\n")
    return icd


def test_ensure_lavapipe_returns_a_cached_one_without_apt(
    dml_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _forbid_subprocesses(monkeypatch)
    monkeypatch.setattr(provision, "debian_mirror", lambda: pytest.fail("read the sources"))
    other = _fake_lavapipe(dml_home / "lavapipe" / "25.9.9-1~bpo12+1", "25.9.9-1~bpo12+1")
    assert provision.ensure_lavapipe() == other  # the pinned one is absent: a complete other one
    pinned = _fake_lavapipe(dml_home / "lavapipe" / provision.LAVAPIPE_VERSION, provision.LAVAPIPE_VERSION)
    assert provision.ensure_lavapipe() == pinned
    assert provision.lavapipe_version(pinned) == "25.0.7-2~bpo12+1"


class FakeApt:
    """Stands in for apt-get, apt-cache, dpkg-deb and ldd, recording the commands."""

    def __init__(self, offered: list[str], missing_libraries: str = "") -> None:
        self.offered = offered
        self.missing_libraries = missing_libraries
        self.calls: list[list[str]] = []

    def __call__(self, cmd, *, what, timeout, env=None, cwd=None):
        self.calls.append(list(cmd))
        stdout = ""
        if cmd[0] == "apt-cache":
            stdout = "".join(
                f"mesa-vulkan-drivers | {v} | http://m.invalid/debian bookworm-backports/main amd64 Packages\n"
                for v in self.offered
            )
        elif cmd[0] == "apt-get" and cmd[-2] == "download":
            version = cmd[-1].split("=", 1)[1]
            (cwd / f"mesa-vulkan-drivers_{version}_amd64.deb").write_bytes(b"!<arch>\n")
        elif cmd[0] == "dpkg-deb":
            target = Path(cmd[3]) / "usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"
            target.parent.mkdir(parents=True)
            target.write_bytes(b"\x7fELF")
        elif cmd[0] == "ldd":
            stdout = "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6\n" + self.missing_libraries
        return subprocess.CompletedProcess(cmd, 0, stdout, "")


def test_ensure_lavapipe_downloads_into_a_private_apt(
    dml_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    apt = FakeApt(["25.2.0-1~bpo12+1", provision.LAVAPIPE_VERSION])
    monkeypatch.setattr(provision, "_run", apt)
    monkeypatch.setattr(provision, "debian_mirror", lambda: Mirror("http://m.invalid/debian", "/k.gpg"))
    icd = provision.ensure_lavapipe()
    final = dml_home / "lavapipe" / provision.LAVAPIPE_VERSION
    assert icd == final / "lvp_icd.x86_64.json"
    data = json.loads(icd.read_text())
    assert data == {
        "file_format_version": "1.0.0",
        "ICD": {
            "library_path": str(final / "usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"),
            "api_version": "1.3.0",
        },
    }
    assert Path(data["ICD"]["library_path"]).is_file()
    assert provision.lavapipe_version(icd) == provision.LAVAPIPE_VERSION
    assert (dml_home / "apt" / "sources.list").read_text() == (
        "deb [signed-by=/k.gpg] http://m.invalid/debian bookworm-backports main\n"
    )
    apt_calls = [c for c in apt.calls if c[0] in ("apt-get", "apt-cache")]
    assert [c[-1] for c in apt_calls] == [
        "update",
        "mesa-vulkan-drivers",
        f"mesa-vulkan-drivers={provision.LAVAPIPE_VERSION}",
    ]
    for call in apt_calls:  # never the system's sources, lists or cache
        assert f"Dir::Etc::SourceList={dml_home}/apt/sources.list" in call
        assert "Dir::Etc::SourceParts=/nonexistent" in call
        assert f"Dir::State::Lists={dml_home}/apt/lists" in call
        assert f"Dir::Cache={dml_home}/apt/cache" in call
        assert "Debug::NoLocking=1" in call
    assert sorted(p.name for p in (dml_home / "lavapipe").iterdir()) == [provision.LAVAPIPE_VERSION]

    monkeypatch.setattr(provision, "_run", lambda *a, **k: pytest.fail("apt ran again"))
    assert provision.ensure_lavapipe() == icd


def test_ensure_lavapipe_takes_the_current_one_when_the_pin_is_gone(
    dml_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provision, "_run", FakeApt(["25.2.0-1~bpo12+1"]))
    monkeypatch.setattr(provision, "debian_mirror", lambda: Mirror("http://m.invalid/debian", None))
    said: list[str] = []
    icd = provision.ensure_lavapipe(log=said.append)
    assert icd == dml_home / "lavapipe" / "25.2.0-1~bpo12+1" / "lvp_icd.x86_64.json"
    assert provision.lavapipe_version(icd) == "25.2.0-1~bpo12+1"
    assert any("gone" in line and "25.2.0-1~bpo12+1" in line for line in said)
    monkeypatch.setattr(provision, "_run", lambda *a, **k: pytest.fail("apt ran again"))
    assert provision.ensure_lavapipe() == icd


def test_ensure_lavapipe_incomplete_cache_is_redone(dml_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    icd = _fake_lavapipe(dml_home / "lavapipe" / provision.LAVAPIPE_VERSION, provision.LAVAPIPE_VERSION)
    Path(json.loads(icd.read_text())["ICD"]["library_path"]).unlink()
    monkeypatch.setattr(provision, "_run", FakeApt([provision.LAVAPIPE_VERSION]))
    monkeypatch.setattr(provision, "debian_mirror", lambda: Mirror("http://m.invalid/debian", None))
    assert provision.ensure_lavapipe() == icd
    assert Path(json.loads(icd.read_text())["ICD"]["library_path"]).is_file()


def test_ensure_lavapipe_unresolved_libraries(dml_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    apt = FakeApt([provision.LAVAPIPE_VERSION], "\tlibLLVM-19.so.1 => not found\n")
    monkeypatch.setattr(provision, "_run", apt)
    monkeypatch.setattr(provision, "debian_mirror", lambda: Mirror("http://m.invalid/debian", None))
    with pytest.raises(ProvisionError, match=r"needs libLLVM-19.so.1: run as root: apt-get update &&"):
        provision.ensure_lavapipe()
    assert list((dml_home / "lavapipe").iterdir()) == []  # nothing that looks finished


def test_ensure_lavapipe_nothing_offered(dml_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provision, "_run", FakeApt([]))
    monkeypatch.setattr(provision, "debian_mirror", lambda: Mirror("http://m.invalid/debian", None))
    with pytest.raises(ProvisionError, match="mesa-vulkan-drivers not found in bookworm-backports"):
        provision.ensure_lavapipe()


def test_lavapipe_version_unrecorded(tmp_path: Path) -> None:
    with pytest.raises(ProvisionError, match="re-run ensure_lavapipe"):
        provision.lavapipe_version(tmp_path / "lvp_icd.x86_64.json")


# --------------------------------------------------------------------------------------------
# ensure_dll


def test_ensure_dll_returns_a_cached_one_after_checking_it(
    dml_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _forbid_subprocesses(monkeypatch)
    dll = dml_home / "dll" / "1.15.4" / "DirectML.dll"
    dll.parent.mkdir(parents=True)
    dll.write_bytes(fake_dll("1.15.4+241025-1615.1.dml-1.15.fac7597"))
    assert provision.ensure_dll("1.15.4") == dll
    dll.write_bytes(fake_dll("1.15.2+240000"))
    with pytest.raises(ProvisionError, match=r"is DirectML 1.15.2\+240000, not 1.15.4: delete it"):
        provision.ensure_dll("1.15.4")


def test_ensure_dll_unknown_version(dml_home: Path) -> None:
    with pytest.raises(ProvisionError, match=r"unknown DirectML version '0.1'; known: 1.5.1, "):
        provision.ensure_dll("0.1")


class FakePip:
    """Stands in for `pip download`: writes a wheel holding a synthetic DirectML.dll."""

    def __init__(self, version: str, member: str = "onnxruntime/capi/DirectML.dll") -> None:
        self.version = version
        self.member = member
        self.calls: list[list[str]] = []

    def __call__(self, cmd, *, what, timeout, env=None, cwd=None):
        self.calls.append(list(cmd))
        target = Path(cmd[cmd.index("-d") + 1])
        name = cmd[cmd.index("-d") - 1].replace("==", "-").replace("-", "_", 1)
        with zipfile.ZipFile(target / f"{name}-cp312-cp312-win_amd64.whl", "w") as wheel:
            wheel.writestr(self.member, fake_dll(self.version))
        return subprocess.CompletedProcess(cmd, 0, "", "")


def test_ensure_dll_downloads_the_table_wheel(dml_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pip = FakePip("1.15.4+241025-1615.1.dml-1.15.fac7597")
    monkeypatch.setattr(provision, "_run", pip)
    dll = provision.ensure_dll("1.15.4")
    assert dll == dml_home / "dll" / "1.15.4" / "DirectML.dll"
    assert provision.file_version(dll).startswith("1.15.4+")
    (call,) = pip.calls
    assert call[:4] == [sys.executable, "-m", "pip", "download"]
    for flag in ("--no-deps", "--only-binary=:all:", "onnxruntime-directml==1.24.4"):
        assert flag in call
    assert call[call.index("--platform") + 1] == "win_amd64"
    assert call[call.index("--python-version") + 1] == "3.12"
    assert [p.name for p in dll.parent.iterdir()] == ["DirectML.dll"]  # no wheel, no temp file left
    monkeypatch.setattr(provision, "_run", lambda *a, **k: pytest.fail("pip ran again"))
    assert provision.ensure_dll("1.15.4") == dll


def test_ensure_dll_wrong_wheel_leaves_nothing(dml_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provision, "_run", FakePip("1.13.1+x"))
    with pytest.raises(
        ProvisionError, match=r"onnxruntime-directml==1.18.1 carries DirectML 1.13.1\+x, not 1.14.1"
    ):
        provision.ensure_dll("1.14.1")
    assert list((dml_home / "dll" / "1.14.1").iterdir()) == []
    monkeypatch.setattr(provision, "_run", FakePip("1.9.1", member="onnxruntime/capi/other.dll"))
    with pytest.raises(ProvisionError, match="has no onnxruntime/capi/DirectML.dll"):
        provision.ensure_dll("1.9.1")


# --------------------------------------------------------------------------------------------
# ensure_prefix


def test_ensure_prefix_cached(dml_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _forbid_subprocesses(monkeypatch)
    (dml_home / "prefix").mkdir(parents=True)
    (dml_home / "prefix" / "system.reg").write_text("WINE REGISTRY Version 2\n")
    assert provision.ensure_prefix() == dml_home / "prefix"


def test_ensure_prefix_builds_then_renames(dml_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPLAY", ":5")
    seen: list[tuple[list[str], dict[str, str]]] = []

    def fake(cmd, *, what, timeout, env=None, cwd=None):
        seen.append((list(cmd), env))
        if cmd[0] == "wineboot":
            Path(env["WINEPREFIX"]).mkdir(parents=True)
            (Path(env["WINEPREFIX"]) / "system.reg").write_text("WINE REGISTRY Version 2\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(provision, "_run", fake)
    assert provision.ensure_prefix() == dml_home / "prefix"
    assert [cmd for cmd, _ in seen] == [["wineboot", "-i"], ["wineserver", "-w"]]
    env = seen[0][1]
    assert env["WINEARCH"] == "win64" and "DISPLAY" not in env
    assert env["WINEPREFIX"] != str(dml_home / "prefix")  # built under another name
    assert (dml_home / "prefix" / "system.reg").is_file()
    assert not [p for p in dml_home.iterdir() if p.name.startswith(".prefix-")]


def test_ensure_prefix_failure_leaves_no_prefix(dml_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake(cmd, *, what, timeout, env=None, cwd=None):
        seen.append(list(cmd))
        if cmd[0] == "wineboot":
            Path(env["WINEPREFIX"]).mkdir(parents=True)
            raise ProvisionError("wineboot -i: timed out after 600 s: wineboot -i")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(provision, "_run", fake)
    with pytest.raises(ProvisionError, match="wineboot -i: timed out"):
        provision.ensure_prefix()
    assert seen == [["wineboot", "-i"], ["wineserver", "-k"]]
    assert not (dml_home / "prefix").exists()
    assert not [p for p in dml_home.iterdir() if p.name.startswith(".prefix-")]


# --------------------------------------------------------------------------------------------
# Xvfb (needs the xvfb package)

needs_xvfb = pytest.mark.skipif(not shutil.which("Xvfb"), reason="Xvfb not installed")


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


@needs_xvfb
def test_start_and_stop_xvfb() -> None:
    proc, display = provision.start_xvfb()
    try:
        assert display.startswith(":") and display[1:].isdigit()
        assert proc.poll() is None
        assert Path(f"/tmp/.X11-unix/X{display[1:]}").exists()  # the unix socket Wine connects to
    finally:
        provision.stop_xvfb(proc)
    assert proc.poll() is not None
    provision.stop_xvfb(proc)  # idempotent


@needs_xvfb
def test_xvfb_dies_with_its_parent() -> None:
    script = (
        "import os, sys\n"
        "from dmlconform.backends.directml import provision\n"
        "proc, display = provision.start_xvfb()\n"
        "print(proc.pid, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


# --------------------------------------------------------------------------------------------
# The real stack (needs Wine; downloads and caches under home() the first time, ~30 s)

PROBE_C = r"""
#define COBJMACROS
#include <windows.h>
#include <stdio.h>
#include <initguid.h>
#include <d3d12.h>

static const GUID IID_IDMLDevice_ = {0x6dbd6437, 0x96fd, 0x423f, {0xa9, 0x8c, 0xae, 0x5e, 0x7c, 0x2a, 0x57, 0x3f}};
typedef HRESULT(WINAPI *create_fn)(ID3D12Device *, UINT, REFIID, void **);
typedef HRESULT(STDMETHODCALLTYPE *check_fn)(void *, UINT, UINT, const void *, UINT, void *);
typedef struct { UINT count; const UINT *levels; } levels_query;

int main(int argc, char **argv) {
    static const UINT levels[] = {0x1000, 0x2000, 0x2100, 0x3000, 0x3100, 0x4000, 0x4100, 0x5000,
                                  0x5100, 0x5200, 0x6000, 0x6100, 0x6200, 0x6300, 0x6400};
    ID3D12Device *device = NULL;
    void *dml = NULL;
    UINT max_level = 0;
    HMODULE module = LoadLibraryA(argv[1]);
    if (!module) { printf("LoadLibrary %lu\n", GetLastError()); return 2; }
    create_fn create = (create_fn)GetProcAddress(module, "DMLCreateDevice");
    HRESULT hr = D3D12CreateDevice(NULL, D3D_FEATURE_LEVEL_11_0, &IID_ID3D12Device, (void **)&device);
    if (FAILED(hr)) { printf("D3D12CreateDevice 0x%08lx\n", hr); return 3; }
    hr = create(device, 0, &IID_IDMLDevice_, &dml);
    if (FAILED(hr)) { printf("DMLCreateDevice 0x%08lx\n", hr); return 4; }
    levels_query query = {sizeof(levels) / sizeof(levels[0]), levels};
    check_fn check = (check_fn)(*(void ***)dml)[7]; /* IDMLDevice::CheckFeatureSupport */
    hr = check(dml, 1 /* DML_FEATURE_FEATURE_LEVELS */, sizeof(query), &query, sizeof(max_level), &max_level);
    if (FAILED(hr)) { printf("CheckFeatureSupport 0x%08lx\n", hr); return 5; }
    printf("max_feature_level %x_%x\n", max_level >> 12, (max_level >> 8) & 0xf);
    return 0;
}
"""


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("wine"), reason="Wine not installed")
def test_real_stack_creates_a_directml_device(tmp_path: Path) -> None:
    icd = provision.ensure_lavapipe()
    dll = provision.ensure_dll(DEFAULT_DML_VERSION)
    prefix = provision.ensure_prefix()
    assert provision.lavapipe_version(icd).startswith("25.")
    assert Path(json.loads(icd.read_text())["ICD"]["library_path"]).name == "libvulkan_lvp.so"
    assert provision.file_version(dll).startswith("1.15.4+")
    assert (prefix / "system.reg").is_file()
    assert provision.wine_version().startswith("wine-")
    if not shutil.which("x86_64-w64-mingw32-gcc"):
        pytest.skip("mingw-w64 not installed: provisioned, but cannot build the device probe")
    (tmp_path / "probe.c").write_text(PROBE_C)
    subprocess.run(
        ["x86_64-w64-mingw32-gcc", "-O1", "-o", "probe.exe", "probe.c", "-ld3d12"],
        cwd=tmp_path,
        check=True,
        timeout=120,
    )
    xvfb, display = provision.start_xvfb()
    try:
        done = subprocess.run(
            ["wine", str(tmp_path / "probe.exe"), str(dll)],
            env=provision.environment(prefix, icd, display),
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        provision.stop_xvfb(xvfb)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.split() == ["max_feature_level", release(DEFAULT_DML_VERSION).max_feature_level]
