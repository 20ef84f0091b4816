"""``dmlconform dxdispatch export | emulate | check``: the round trip a user makes, end to end.

One small bundle (one case per group: every operator, level and data type, every kind) is
exported once per module; each test plays DxDispatch on a copy of it and judges the result.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers import SPEC

from dmlconform.backends.numpy_backend import NumpyBackend
from dmlconform.cli import main
from dmlconform.dxdispatch.check import level_for_version
from dmlconform.dxdispatch.emulate import Emulator, emulate_bundle
from dmlconform.errors import Rejected
from dmlconform.runner.cases import Selection, collect


def cli(*args: str) -> int:
    return main(["dxdispatch", *args])


def _exported(factory: pytest.TempPathFactory, name: str, *selection: str) -> Path:
    root = factory.mktemp(name) / "bundle"
    # size cases to 16384 elements: the 2^20 ones would add 80 MB and seconds to every emulation
    assert cli("export", str(root), "--cases", "1", "--max-elements", "16384", *selection) == 0
    return root


def _played(bundle: Path, factory: pytest.TempPathFactory, name: str) -> Path:
    """A copy of ``bundle`` run by the emulator on the reference backend."""
    root = factory.mktemp(name) / "b"
    shutil.copytree(bundle, root)
    assert cli("emulate", str(root), "--backend", "reference") == 0
    return root


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _exported(tmp_path_factory, "dxd")


@pytest.fixture(scope="module")
def played_once(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle played once (never changed)."""
    return _played(bundle, tmp_path_factory, "played")


#: The operators of the tests that damage a played bundle or judge one against a wrong device:
#: each checks the bundle whole, and the whole export (every operator and level) made each such
#: check ten times longer without reaching anything those tests look at.
FEW_OPERATORS = (
    "MEAN_VARIANCE_NORMALIZATION",
    "MEAN_VARIANCE_NORMALIZATION1",
    "BATCH_NORMALIZATION_TRAINING",
)


@pytest.fixture(scope="module")
def small_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _exported(tmp_path_factory, "dxd-small", "--operators", *FEW_OPERATORS)


@pytest.fixture(scope="module")
def small_played_once(small_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _played(small_bundle, tmp_path_factory, "played-small")


@pytest.fixture
def played(small_played_once: Path, tmp_path: Path) -> Path:
    """A fresh copy of the played bundle of :data:`FEW_OPERATORS`, for a test to change."""
    root = tmp_path / "b"
    shutil.copytree(small_played_once, root)
    return root


def results(root: Path, report: str = "report") -> dict:
    return json.loads((root / report / "results.json").read_text())


def by_id(res: dict) -> dict[str, dict]:
    return {c["id"]: c for c in res["cases"]}


def manifest(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())


def first(root: Path, prefix: str) -> dict:
    return next(
        e for e in manifest(root)["cases"] if e["id"].startswith(prefix) and e["status"] == "exported"
    )


# --------------------------------------------------------------------------------------------


def test_export_covers_every_operator_level_and_data_type(bundle: Path):
    m = manifest(bundle)
    want = {
        (c.operator, c.level.name, c.data_type)
        for c in collect(SPEC, Selection(level=SPEC.levels[-1], cases=1))
        if c.kind == "numeric"
    }
    got = {(e["operator"], e["feature_level"], e["data_type"]) for e in m["cases"] if e["kind"] == "numeric"}
    assert got == want and len(want) > 30
    assert {e["kind"] for e in m["cases"]} == {"numeric", "validation", "metamorphic"}
    assert m["dmlconform"] and len(m["spec_hash"]) == 64 and m["seed"] == 0
    for e in m["cases"]:
        assert e["status"] in ("exported", "not_expressible"), (e["id"], e["reason"])
        if e["status"] == "not_expressible":
            assert e["kind"] == "validation" and e["expect"] == "refuse"
    lines = (bundle / "cases.txt").read_text().splitlines()
    assert len(lines) == sum(e["status"] == "exported" for e in m["cases"])
    # the writeFile commands name plain file names, beside the model
    model = json.loads((bundle / first(bundle, "numeric")["dir"] / "model.json").read_text())
    targets = [c["targetPath"] for c in model["commands"] if c["type"] == "writeFile"]
    assert targets and all("/" not in t and "\\" not in t for t in targets)


def test_every_exported_model_reads_back_as_its_case_desc(bundle: Path):
    from dmlconform.dxdispatch.desc_json import canonical, export_desc
    from dmlconform.dxdispatch.modelfile import load_model_file
    from dmlconform.runner.cases import Case

    seen = 0
    for e in manifest(bundle)["cases"]:
        if e["status"] != "exported":
            continue
        model = load_model_file(bundle / e["dir"] / "model.json", SPEC)  # the strict reader
        if e["kind"] in ("numeric", "validation"):
            case = Case.from_dict(e["case"], SPEC)
            held = model.dispatchables["op0"].desc
            assert canonical(held, SPEC) == canonical(export_desc(case.desc, SPEC), SPEC), e["id"]  # NaN-safe
            assert set(held.members) >= {k for k, v in case.desc.members.items() if v is not None}
            seen += 1
    assert seen > 50


@pytest.mark.parametrize("backend", ["reference", "numpy"])
def test_round_trip_passes_on_correct_backends(
    bundle: Path, played_once: Path, small_bundle: Path, tmp_path: Path, backend: str
):
    root = tmp_path / "b"
    if backend == "reference":  # played_once is that emulation, of every operator
        shutil.copytree(played_once, root)
    else:  # a second backend on the statistics operators: emulating the whole bundle again took 20 s
        shutil.copytree(small_bundle, root)
        assert cli("emulate", str(root), "--backend", backend) == 0
    assert "1.15.0" in (root / "dxdispatch-dependencies.txt").read_text()
    assert cli("check", str(root)) == 0
    res = results(root)
    s = res["summary"]
    assert s["failed"] == 0 and s["errors"] == 0
    exported = sum(e["status"] == "exported" for e in manifest(root)["cases"])
    assert s["passed"] == exported
    assert res["backend"]["name"] == "directml" and res["backend"]["feature_level"] == "6_4"
    assert backend in res["backend"]["description"] and res["versions"]["directml"] == "1.15.0"
    for name in ("junit.xml", "summary.md", "index.html"):
        assert (root / "report" / name).is_file()


def test_a_perturbed_output_fails_that_case_only(played: Path):
    e = first(played, "numeric[MEAN_VARIANCE_NORMALIZATION1-6_4-FLOAT32")
    path = played / e["dir"] / e["dispatches"][0]["outputs"]["OutputTensor"]
    buf = np.load(path)
    i = int(np.nanargmax(np.abs(buf)))
    buf[i] = buf[i] * np.float32(1.001)  # ~8000 float32 ULPs
    np.save(path, buf)
    assert cli("check", str(played)) == 1
    res = results(played)
    assert res["summary"]["failed"] == 1 and res["summary"]["errors"] == 0
    rec = by_id(res)[e["id"]]
    assert rec["outcome"] == "failed" and "> budget" in rec["message"]
    assert rec["errors"]["worst"]["member"] == "OutputTensor"


def test_a_deleted_output_is_an_error_quoting_the_log(played: Path):
    e = first(played, "numeric[BATCH_NORMALIZATION_TRAINING")
    (played / e["dir"] / e["dispatches"][0]["outputs"]["OutputMeanTensor"]).unlink()
    (played / e["dir"] / "dxdispatch.log").write_text(
        "Running on 'GPU X'\nFailed to write resource to file: disk full\n"
    )
    assert cli("check", str(played)) == 1
    rec = by_id(results(played))[e["id"]]
    assert rec["outcome"] == "error"
    assert "OutputMeanTensor.npy was not written" in rec["message"] and "disk full" in rec["message"]
    assert "exit status 0" in rec["message"]


def test_corrupt_and_wrongly_sized_outputs_are_errors_not_tracebacks(
    played: Path, capsys: pytest.CaptureFixture
):
    a = first(played, "numeric[MEAN_VARIANCE_NORMALIZATION-6_4-FLOAT16")
    b = first(played, "numeric[MEAN_VARIANCE_NORMALIZATION-6_4-FLOAT32")
    pa = played / a["dir"] / a["dispatches"][0]["outputs"]["OutputTensor"]
    pa.write_bytes(pa.read_bytes()[:70])
    pb = played / b["dir"] / b["dispatches"][0]["outputs"]["OutputTensor"]
    np.save(pb, np.load(pb)[:2])
    assert cli("check", str(played)) == 1
    recs = by_id(results(played))
    assert recs[a["id"]]["outcome"] == "error" and "not a readable .npy" in recs[a["id"]]["message"]
    assert recs[b["id"]]["outcome"] == "error" and "2 elements" in recs[b["id"]]["message"]
    assert "Traceback" not in capsys.readouterr().err


def test_an_unrun_bundle_is_refused_in_one_line(bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    root = tmp_path / "b"
    shutil.copytree(bundle, root)
    assert cli("check", str(root), "--report", str(tmp_path / "r")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dmlconform dxdispatch check: error: ") and "\n" not in err
    assert "has not been run" in err and "run_dxdispatch" in err
    assert not (tmp_path / "r").exists() and not (root / "report").exists()


def test_a_partly_run_bundle_is_checked_with_the_rest_as_errors(small_bundle: Path, tmp_path: Path):
    root = tmp_path / "b"
    shutil.copytree(small_bundle, root)
    exported = [e for e in manifest(root)["cases"] if e["status"] == "exported"]
    ran = root / exported[0]["dir"]  # ran, and wrote nothing
    (ran / "exit_status.txt").write_text("0\n")
    (ran / "dxdispatch.log").write_text("Running on 'Some GPU'\n")
    assert cli("check", str(root), "--report", str(tmp_path / "r")) == 1
    res = json.loads((tmp_path / "r" / "results.json").read_text())
    errors = [c for c in res["cases"] if c["outcome"] == "error"]
    assert len(errors) == len(exported)
    assert sum("not run" in c["message"] for c in errors) == len(exported) - 1


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("banana", "is not a DirectML version (X.Y.Z, e.g. 1.15.4)"),
        ("10.0.22621", "no feature level is known for it"),
    ],
)
def test_a_directml_version_that_is_none_is_refused(
    played: Path, capsys: pytest.CaptureFixture, version: str, message: str
):
    assert cli("check", str(played), "--directml-version", version) == 2
    err = capsys.readouterr().err
    assert err.startswith("dmlconform dxdispatch check: error: --directml-version") and message in err
    assert not (played / "report").exists()
    # a Windows build number is a label only once the level is given
    assert cli("check", str(played), "--directml-version", "10.0.22621", "--feature-level", "6_2") in (0, 1)
    assert results(played)["backend"]["feature_level"] == "6_2"


class AcceptAll(NumpyBackend):
    """A DirectML that creates every desc (no validation)."""

    def check(self, desc):
        return None


class RefuseAll(NumpyBackend):
    def check(self, desc):
        raise Rejected("E_INVALIDARG")


def test_acceptance_is_judged_both_ways(small_bundle: Path, tmp_path: Path):
    root = tmp_path / "b"
    shutil.copytree(small_bundle, root)
    emulate_bundle(root, Emulator(AcceptAll(), SPEC.level("6_4"), SPEC))
    assert cli("check", str(root)) == 1
    recs = results(root)["cases"]
    accepted = [c for c in recs if c["expected"] == "illegal" and c["outcome"] == "failed"]
    assert accepted and all("accepted an illegal desc" in c["message"] for c in accepted)
    assert all(c["outcome"] == "passed" for c in recs if c["kind"] == "numeric")
    emulate_bundle(root, Emulator(RefuseAll(), SPEC.level("6_4"), SPEC))
    assert cli("check", str(root)) == 1
    recs = results(root)["cases"]
    numeric = [c for c in recs if c["kind"] == "numeric"]
    assert numeric and all(
        c["outcome"] == "failed" and "rejected a legal desc" in c["message"] for c in numeric
    )
    illegal = [c for c in recs if c["expected"] == "illegal"]
    assert any(c["outcome"] == "passed" for c in illegal)
    for c in illegal:  # refused as they must be, or never exported (no model can carry them)
        assert c["outcome"] == "passed" or "no DxDispatch model can carry" in c["message"]


def test_validation_is_judged_at_the_level_of_the_recorded_directml(tmp_path: Path):
    """Cases generated illegal at 4_1 that are legal at 6_4 must be accepted by DirectML 1.15,
    and the re-judged expectation is what the record shows."""
    root = tmp_path / "b"
    assert cli("export", str(root), "--feature-level", "4_1", "--kinds", "validation", "--cases", "2") == 0
    assert cli("emulate", str(root), "--backend", "reference") == 0  # the reference at its 6_4
    assert cli("check", str(root)) == 0
    recs = results(root)["cases"]
    moved = [c for c in recs if (c["info"] or {}).get("note", "").startswith("generated illegal at 4_1")]
    assert moved and all(c["expected"] == "legal" and c["outcome"] == "passed" for c in moved)
    # the same outputs judged as if DirectML 1.7 (FL 4_1) had run them: those acceptances now fail
    assert cli("check", str(root), "--directml-version", "1.7.0", "--report", str(tmp_path / "r")) == 1
    again = {c["id"]: c for c in json.loads((tmp_path / "r" / "results.json").read_text())["cases"]}
    assert all(again[c["id"]]["outcome"] == "failed" for c in moved)


def test_a_newer_operator_refused_by_an_older_directml_is_skipped(played: Path):
    assert cli("emulate", str(played), "--backend", "reference", "--feature-level", "4_0") == 0
    assert cli("check", str(played)) == 0
    recs = results(played)["cases"]
    bnt = [c for c in recs if c["operator"] == "BATCH_NORMALIZATION_TRAINING" and c["kind"] != "validation"]
    assert bnt and all(c["outcome"] == "skipped" for c in bnt)
    assert all("not legal at the device's level" in c["message"] for c in bnt)


def test_directml_versions_map_to_their_highest_level():
    assert level_for_version("1.15.0", SPEC) == SPEC.level("6_4")
    assert level_for_version("1.13.1", SPEC) == SPEC.level("6_2")
    assert level_for_version("1.7.0", SPEC) == SPEC.level("4_1")
    assert level_for_version("10.0.22621.1", SPEC) is None  # the inbox DLL's Windows build number


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture):
    assert cli("check", str(tmp_path)) == 2
    assert "no manifest" in capsys.readouterr().err
    (tmp_path / "x").write_text("x")
    assert cli("export", str(tmp_path), "--cases", "1") == 2
    assert "not empty" in capsys.readouterr().err
    assert cli("export", str(tmp_path / "n"), "--operators", "NOPE") == 2
    assert "unknown operator" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse: one line, exit 2
        cli("export", str(tmp_path / "t"), "--tier", "small")
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
    assert cli("export", str(tmp_path / "m"), "--max-elements", "0") == 2
    assert "--max-elements must be at least 1" in capsys.readouterr().err
    assert cli("emulate", str(tmp_path), "--backend", "reference") == 2


@pytest.mark.skipif(sys.platform == "win32" or shutil.which("bash") is None, reason="needs bash")
def test_the_bash_run_script_drives_a_dxdispatch_lookalike(tmp_path: Path):
    """run_dxdispatch.sh against a fake dxdispatch (the emulator behind DxDispatch's command
    line, one process per case as the real one): it records -S and the adapters, runs every case
    with --output_path, keeps logs and exit statuses, and the result checks clean."""
    root = tmp_path / "b"
    sel = ["--operators", "MEAN_VARIANCE_NORMALIZATION1", "--feature-level", "2_1", "--tier", "smoke"]
    assert cli("export", str(root), *sel, "--kinds", "numeric", "metamorphic") == 0
    fake = tmp_path / "dxdispatch"
    fake.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import sys
            from pathlib import Path
            from dmlconform.backends import load_backend
            from dmlconform.dxdispatch.emulate import Emulator, adapters_text, dependencies_text, run_model
            from dmlconform.specification.spec import load_spec
            spec = load_spec()
            em = Emulator(load_backend("numpy", {{"feature_level": "6_4"}}), spec.level("6_4"), spec)
            args = sys.argv[1:]
            if args == ["-S"]:
                print(dependencies_text(em)); sys.exit(0)
            if args == ["--show_adapters"]:
                print(adapters_text(em)); sys.exit(0)
            out = Path(args[args.index("--output_path") + 1])
            model = Path([a for a in args if a.endswith("model.json")][0])
            code, log = run_model(model, out, em)
            print("\\n".join(log))
            sys.exit(1 if code else 0)
            """
        )
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    script = root / "run_dxdispatch.sh"
    assert os.access(script, os.X_OK)
    env = {**os.environ, "DXDISPATCH": str(fake), "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert (root / "dxdispatch-adapters.txt").read_text().startswith("dmlconform emulator")
    for e in manifest(root)["cases"]:
        assert (root / e["dir"] / "exit_status.txt").read_text().strip() == "0"
        assert "Running on 'dmlconform emulator" in (root / e["dir"] / "dxdispatch.log").read_text()
    assert cli("check", str(root)) == 0


def test_the_powershell_script_names_what_check_reads(bundle: Path):
    ps1 = (bundle / "run_dxdispatch.ps1").read_text()
    for needle in (
        "-S",
        "--show_adapters",
        "--output_path",
        "dxdispatch.log",
        "exit_status.txt",
        "cases.txt",
    ):
        assert needle in ps1
    assert "\r\n" in (bundle / "run_dxdispatch.ps1").read_bytes().decode()


def test_onnxruntime_without_the_directml_provider_says_what_to_install():
    ort = pytest.importorskip("onnxruntime")
    if "DmlExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the DirectML provider")
    from dmlconform.backends import BackendError, load_backend

    with pytest.raises(BackendError, match="onnxruntime-directml") as info:
        load_backend("onnxruntime", {"provider": "DmlExecutionProvider"})
    assert "\n" not in str(info.value)


def _dependencies(root: Path, text: str, encoding: str = "utf-8") -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "dxdispatch-dependencies.txt").write_bytes(text.encode(encoding))


def test_the_directml_version_is_read_from_dxdispatch_dash_s(tmp_path: Path):
    from dmlconform.dxdispatch.check import read_run_info

    windows = (
        "DirectML:\n- Configured Version : NuGet (Microsoft.AI.DirectML.1.15.0)\n"
        "- Loaded Path        : C:\\dxd\\DirectML.dll\n- Loaded Version     : 1.13.1\n\n"
        "D3D12:\n- Configured Version : NuGet (Microsoft.Direct3D.D3D12.1.614.0)\n- Loaded Version     : 1.614.0\n\n"
    )
    _dependencies(tmp_path / "w", "\ufeff" + windows, "utf-16-le")  # PowerShell's Out-File default
    info = read_run_info(tmp_path / "w", SPEC)
    assert (info.version, info.level) == (
        "1.13.1",
        SPEC.level("6_2"),
    )  # the loaded DLL, not the configured one
    _dependencies(
        tmp_path / "l", "DirectML:\n- Configured Version : NuGet (Microsoft.AI.DirectML.1.15.0)\n\n"
    )
    assert read_run_info(tmp_path / "l", SPEC).level == SPEC.level("6_4")  # WSL: no loaded version
    _dependencies(
        tmp_path / "s", "DirectML:\n- Configured Version : Windows SDK\n- Loaded Version : 10.0.22621.1\n"
    )
    info = read_run_info(tmp_path / "s", SPEC)
    assert info.level is None and "--directml-version" in info.note
    assert read_run_info(tmp_path / "s", SPEC, version="1.9.0").level == SPEC.level("5_1")
