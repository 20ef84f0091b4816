"""``dmlconform replay``: a saved failing case re-runs alone and prints the comparison."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import HERE, SMALL, dmlconform


@pytest.fixture(scope="module")
def failed_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("replay")
    proc = dmlconform(
        "run", "--backend", "test_plugin_backends:WrongValues", *SMALL, "--kinds", "numeric", "--report", "out",
        cwd=work,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    results = json.loads((work / "out" / "results.json").read_text())
    case = next(c for c in results["cases"] if c["outcome"] == "failed")
    assert case["replay"] == (
        f"dmlconform replay {work / 'out' / case['reproducer']} --backend test_plugin_backends:WrongValues"
        " --backend-option feature_level=2_1"  # the run's level, passed to a backend that takes it
    )
    return work / "out" / case["reproducer"]


def test_replay_still_failing_prints_comparison(failed_case: Path, tmp_path: Path) -> None:
    proc = dmlconform(
        "replay", str(failed_case), "--backend", "test_plugin_backends:WrongValues", cwd=tmp_path
    )
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    saved = json.loads((failed_case / "case.json").read_text())
    worst = saved["errors"]["worst"]
    assert f"case:    {saved['id']}" in out
    assert f"worst:   OutputTensor at index {worst['index']}" in out
    assert f"backend    {worst['backend']!r}" in out and f"reference  {worst['reference']!r}" in out
    assert "ULP," in out and "absolute" in out and "budget" in out
    assert "result:  FAILED: OutputTensor:" in out


def test_replay_passes_once_fixed(failed_case: Path, tmp_path: Path) -> None:
    proc = dmlconform("replay", str(failed_case), "--backend", "reference", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "result:  PASSED" in proc.stdout


def test_replay_defaults_to_the_saved_backend(failed_case: Path, tmp_path: Path) -> None:
    proc = dmlconform("replay", str(failed_case), cwd=tmp_path)
    assert proc.returncode == 1 and "test_plugin_backends:WrongValues" not in proc.stderr


def test_replay_bad_directory_is_a_usage_error(failed_case: Path, tmp_path: Path) -> None:
    broken = tmp_path / "case"
    shutil.copytree(failed_case, broken)
    (broken / "case.json").write_text("{not json")
    for target in (tmp_path / "missing", broken):
        proc = dmlconform("replay", str(target), "--backend", "reference", cwd=tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert proc.stderr.startswith("dmlconform replay: error:")


def _raising_line() -> int:
    """Where test_plugin_backends.Raises raises, read from its file (not from any traceback)."""
    lines = (Path(HERE) / "test_plugin_backends.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if 'raise RuntimeError("kaboom' in line)


def test_a_raising_backend_says_where_in_the_console_the_reproducer_and_replay(tmp_path: Path) -> None:
    """The console and results.json name the raising frame; case.json holds the whole traceback,
    and replay (in-process and isolated) prints it."""
    where = f"(at test_plugin_backends.py:{_raising_line()} in misbehave)"
    message = f"backend execute() raised RuntimeError: kaboom in the fp16 kernel {where}"
    run = dmlconform(
        "run", "--backend", "test_plugin_backends:Raises", *SMALL, "--kinds", "numeric", "--report", "out",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr[-2000:]
    assert message in run.stdout
    case = next(
        c for c in json.loads((tmp_path / "out" / "results.json").read_text())["cases"] if c["reproducer"]
    )
    assert case["message"] == message
    saved = json.loads((tmp_path / "out" / case["reproducer"] / "case.json").read_text())
    tb = saved["traceback"]
    assert tb.startswith("Traceback (most recent call last):")
    assert f'test_plugin_backends.py", line {_raising_line()}, in misbehave' in tb
    assert tb.splitlines()[-1] == "RuntimeError: kaboom in the fp16 kernel"
    for isolate in ([], ["--isolate"]):
        replay = dmlconform("replay", str(tmp_path / "out" / case["reproducer"]), *isolate, cwd=tmp_path)
        assert replay.returncode == 1, replay.stderr
        assert f"result:  FAILED: {message}" in replay.stdout
        assert tb in replay.stdout, replay.stdout  # the same frames, from a thread or a worker


FIELD_CASES = sorted((Path(__file__).parent / "fixtures" / "cases").iterdir())


@pytest.mark.parametrize("case_dir", FIELD_CASES, ids=[p.name for p in FIELD_CASES])
def test_field_failures_of_sound_backends_now_pass(case_dir: Path, tmp_path: Path) -> None:
    """Reproducers of cases a real backend failed while its result was sound, each traced to a
    gap in the tolerance model (named by the directory); they replay against that backend."""
    backend = json.loads((case_dir / "case.json").read_text())["backend"]["name"]
    if backend in ("onnxruntime", "torch"):  # the extras; the others ship with the tests
        pytest.importorskip(backend)
    proc = dmlconform("replay", str(case_dir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "result:  PASSED" in proc.stdout


def test_sequential_sums_replay_under_the_model_their_reproducer_names(tmp_path: Path) -> None:
    """The sequential-loop reproducer names the lenient model (case.json ``tolerance``), the model
    its backend asks for; without it the required (blocked) model judges it, and fails it."""
    case_dir = tmp_path / "case"
    shutil.copytree(
        Path(__file__).parent / "fixtures" / "cases" / "sequential-loop-seed4-variance-sum-n3888", case_dir
    )
    meta = json.loads((case_dir / "case.json").read_text())
    assert meta["tolerance"] == {"model": "lenient"}
    meta["tolerance"] = {}
    (case_dir / "case.json").write_text(json.dumps(meta))
    proc = dmlconform("replay", str(case_dir), cwd=tmp_path)
    assert proc.returncode == 1 and "result:  FAILED" in proc.stdout, proc.stdout + proc.stderr
    # the same case, the model asked for on the command line, as a run takes it
    again = dmlconform("replay", str(case_dir), "--tolerance", "model=lenient", cwd=tmp_path)
    assert again.returncode == 0 and "result:  PASSED" in again.stdout, again.stdout + again.stderr
    assert "tolerance: model=lenient" in again.stdout
    shrunk = dmlconform("shrink", str(case_dir), "--tolerance", "model=lenient", "-q", cwd=tmp_path)
    assert shrunk.returncode == 1 and "does not fail" in shrunk.stderr, shrunk.stdout + shrunk.stderr
    bad = dmlconform("replay", str(case_dir), "--tolerance", "ulp_scale=-1", cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
