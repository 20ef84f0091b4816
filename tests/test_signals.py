"""A run ended from outside still leaves the report of the cases that ran: SIGTERM is handled as
SIGINT is (results kept, status not 'running', summary.md and index.html written), and a process
that dies without writing its report (a segfault in an in-process backend, a SIGKILL) gets one
from its watcher, naming the crash, the case and ``--isolate``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import HERE, LONG, REPO, SMALL, run_until, start_run

from dmlconform.runner import watch
from dmlconform.runner.plugin import plugin_args

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
SEGFAULTS = [
    "--operators", "MEAN_VARIANCE_NORMALIZATION1", "--feature-level", "2_1", "--cases", "2", "--tier", "smoke",
    "--kinds", "numeric",
]  # fmt: skip


def finished_report(report: Path, timeout: float = 60) -> dict:
    """results.json once nothing is writing it any more (the watcher works after its run died)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            data = json.loads((report / "results.json").read_text())
        except (OSError, ValueError):
            data = {}
        if data.get("status") not in (None, "running") and not (report / watch.JOURNAL).exists():
            return data
        time.sleep(0.2)
    raise AssertionError(f"no finished report in {report}")


@pytest.mark.parametrize("times", [1, 2])
def test_sigterm_keeps_the_results_and_writes_the_report(tmp_path: Path, times: int) -> None:
    """Twice: ``timeout`` signals the process, then its group; the second must not cut the first
    one's report short."""
    proc = start_run(*LONG, "--report", "r", cwd=tmp_path)
    out = run_until(proc, passed=40)
    for _ in range(times):
        proc.send_signal(signal.SIGTERM)
    code = proc.wait(120)
    text = _all_of(out)
    assert code == 143, text[-2000:]
    # quiet: one line says so, not pytest's Ctrl-C banner nor the signal handler's line
    data = json.loads((tmp_path / "r" / "results.json").read_text())
    assert text.rstrip().splitlines()[-1] == (
        "dmlconform: INCOMPLETE RUN (interrupted): terminated (SIGTERM) while cases ran, "
        f"{data['ran']} of {data['collected']} cases ran; report written to {tmp_path / 'r'}"
    ), text[-2000:]
    assert "KeyboardInterrupt" not in text and "stops.py" not in text and "Traceback" not in text
    assert data["complete"] is False and data["status"] == "interrupted"
    assert data["stop_reason"] == "terminated (SIGTERM) while cases ran"
    assert 40 <= data["ran"] == len(data["cases"]) < data["collected"]
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert summary.splitlines()[0].endswith(": INCOMPLETE RUN") and "terminated (SIGTERM)" in summary
    assert "INCOMPLETE" in (tmp_path / "r" / "index.html").read_text()
    assert (tmp_path / "r" / "junit.xml").is_file() and not (tmp_path / "r" / watch.JOURNAL).exists()


def _all_of(out: list[str], timeout: float = 30) -> str:
    """The run's whole output: run_until's reader thread appends until the pipe closes, which
    may come a moment after the process has exited."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and "report written to" not in "".join(out)[-500:]:
        time.sleep(0.1)
    return "".join(out)


def _python(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` in ``cwd`` with the repository and the test backends importable."""
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600
    )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), HERE, env.get("PYTHONPATH", "")])
    return env


@pytest.mark.parametrize("how", ["run", "pytest"])
def test_a_segfault_without_isolate_leaves_an_incomplete_report_naming_isolate(
    tmp_path: Path, how: str
) -> None:
    backend = "test_plugin_backends:Segfaults"  # the reference, crashing on FLOAT16 descs
    if how == "run":
        argv = ["-m", "dmlconform.cli", "run", "--backend", backend, *SEGFAULTS, "--report", "r"]
        isolate = "--isolate"
    else:
        argv = [
            "-m",
            "pytest",
            *plugin_args(),
            "-p",
            "no:cacheprovider",
            f"--dml-backend={backend}",
            "--dml-report=r",
        ]
        argv += [f"--dml-{SEGFAULTS[i][2:]}={SEGFAULTS[i + 1]}" for i in range(0, len(SEGFAULTS), 2)]
        isolate = "--dml-isolate"
    proc = _python(tmp_path, *argv)
    assert proc.returncode == -signal.SIGSEGV, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = finished_report(tmp_path / "r")
    assert data["complete"] is False and data["status"] == "incomplete"
    reason = data["stop_reason"]
    assert reason.startswith("the run's process crashed (Segmentation fault) during numeric[")
    assert "FLOAT16" in reason and f"re-run with {isolate}" in reason
    assert data["ran"] == len(data["cases"]) == 2 and all(c["outcome"] == "passed" for c in data["cases"])
    assert data["collected"] == 4 and data["backend"]["name"] == "reference"
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert summary.splitlines()[0].endswith(": INCOMPLETE RUN") and isolate in summary
    assert "INCOMPLETE" in (tmp_path / "r" / "index.html").read_text()


def test_the_same_backend_with_isolate_completes(tmp_path: Path) -> None:
    """The advice holds: with --isolate the crash fails its cases and the run completes."""
    proc = _python(
        tmp_path, "-m", "dmlconform.cli", "run", "--backend", "test_plugin_backends:Segfaults", *SEGFAULTS,
        "--isolate", "--report", "r",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads((tmp_path / "r" / "results.json").read_text())
    assert data["complete"] is True and data["summary"]["failed"] == 2


def test_a_crashed_xdist_worker_fails_its_case_naming_the_crash(tmp_path: Path) -> None:
    """Under -n the run outlives a worker's death (pytest-xdist starts another): the case the
    worker was running fails with its record and the reason, and the run is complete, instead
    of that case having no result and the report not saying which."""
    proc = _python(
        tmp_path, "-m", "dmlconform.cli", "run", "--backend", "test_plugin_backends:Exits", *SEGFAULTS,
        "--report", "r", "--", "-n", "2",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads((tmp_path / "r" / "results.json").read_text())
    assert data["complete"] is True and data["ran"] == data["collected"] == 4, data["stop_reason"]
    by_type = {c["data_type"]: [] for c in data["cases"]}
    for c in data["cases"]:
        by_type[c["data_type"]].append(c)
    assert [c["outcome"] for c in by_type["FLOAT32"]] == ["passed", "passed"]
    for c in by_type["FLOAT16"]:  # the backend exits on FLOAT16 descs
        assert c["outcome"] == "failed" and c["desc"]["type"].endswith("MEAN_VARIANCE_NORMALIZATION1")
        assert c["message"].startswith("the pytest-xdist worker running this case died (worker 'gw")
        assert "--isolate" in c["message"]
    assert "2 failed" in proc.stdout


def test_a_normal_run_leaves_no_journal_and_no_watcher(tmp_path: Path) -> None:
    proc = _python(tmp_path, "-m", "dmlconform.cli", "run", "--backend", "reference", *SMALL, "--report", "r")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not (tmp_path / "r" / watch.JOURNAL).exists()
    assert json.loads((tmp_path / "r" / "results.json").read_text())["status"] == "complete"
    assert "INCOMPLETE" not in proc.stderr


def test_the_journal_survives_a_line_cut_short(tmp_path: Path) -> None:
    journal = tmp_path / watch.JOURNAL
    journal.write_text(
        json.dumps({"meta": {"backend": "x"}}) + "\n"
        + json.dumps({"collected": 3}) + "\n"
        + json.dumps({"start": "f::a"}) + "\n"
        + json.dumps({"record": {"nodeid": "f::a", "outcome": "passed"}}) + "\n"
        + json.dumps({"start": "f::b"}) + "\n"
        + '{"record": {"nodeid": "f::b", "outc'
    )  # fmt: skip
    meta, records, collected, running, phase = watch.read_journal(journal)
    assert meta == {"backend": "x"} and list(records) == ["f::a"] and collected == 3 and running == "f::b"
    assert phase is None  # no phase line: a journal of before phases were written
    assert watch.crash_of("Fatal Python error: Aborted\n\nThread ...") == "Aborted"
    assert watch.crash_of("") is None
    assert "killed" in watch.stop_reason(None, "f::b", "--isolate")
    assert "during b;" in watch.stop_reason("Segmentation fault", "f::b", "--isolate")
