"""Every stop says what it is, in every file: a run signalled at each moment of its life (its
backend loading, the session starting, collection, a case, the pages being written, junit.xml
being written), in one
shard of a sharded run, and a run whose collection fails or crashes, leaves results.json,
summary.md, index.html, junit.xml and a console that agree the run is incomplete and say why.

Each run is held at its moment by ``tests/stop_points.py`` (a pytest plugin given after ``--``),
and the test sends the real signal to the process there. A signal before the report is written
ends the run at once; one while it is written is held until it is written, and the report says
it. SIGINT prints one line, as SIGTERM does: no pytest banner, no source line. A run of two cases
per group of one operator keeps each test to a few seconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import SMALL, dmlconform, says_incomplete, start_run

from dmlconform.cli import main
from dmlconform.runner import watch

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
NUMPY = ["--backend", "numpy", *SMALL]
EXIT = {"SIGINT": 130, "SIGTERM": 143}


def held_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str, *args: str, signal_name: str | None = None
) -> tuple[int, str]:
    """``dmlconform run ARGS --report r -- -p stop_points`` held at ``moment``, sent
    ``signal_name`` there (none: let go as it is, or a moment that does not hold); (exit
    status, console)."""
    hold = tmp_path / "hold"
    monkeypatch.setenv("DMLCONFORM_HOLD", moment)
    monkeypatch.setenv("DMLCONFORM_HOLD_FILE", str(hold))
    extra = list(args[args.index("--") + 1 :]) if "--" in args else []
    args = args[: args.index("--")] if "--" in args else args
    proc = start_run(*args, "--report", "r", "--", "-p", "stop_points", *extra, cwd=tmp_path)
    end = time.monotonic() + 120
    while not hold.exists() and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.02)
    if signal_name:
        assert hold.exists(), proc.communicate()[0][-3000:]
        os.kill(proc.pid, getattr(signal, signal_name))
    (tmp_path / "hold.go").touch()
    out, _ = proc.communicate(timeout=180)
    return proc.returncode, out


def quiet(console: str) -> None:
    """The signal is one line: not pytest's banner, not the line the run was at, no traceback."""
    for noise in ("KeyboardInterrupt", "Traceback", "stop_points.py", "stops.py", "--full-trace"):
        assert noise not in console, console[-3000:]


@pytest.mark.parametrize(
    ("moment", "signal_name", "reason"),
    [
        ("load", "SIGINT", "interrupted (Ctrl-C / SIGINT) before the run started"),
        ("load", "SIGTERM", "terminated (SIGTERM) before the run started"),
        ("start", "SIGTERM", "terminated (SIGTERM) before the run started"),
        ("collect", "SIGINT", "interrupted (Ctrl-C / SIGINT) before collection finished"),
        ("collect", "SIGTERM", "terminated (SIGTERM) before collection finished"),
        ("run", "SIGINT", "interrupted (Ctrl-C / SIGINT) while cases ran"),
        ("pages", "SIGINT", "interrupted (Ctrl-C / SIGINT) while the report was written"),
        ("pages", "SIGTERM", "terminated (SIGTERM) while the report was written"),
        ("junit", "SIGINT", "interrupted (Ctrl-C / SIGINT) while the report was written"),
    ],
)
def test_a_signal_at_each_moment_says_so_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str, signal_name: str, reason: str
) -> None:
    backend = ["--backend", "stop_points:HoldsWhileLoading", *SMALL] if moment == "load" else NUMPY
    code, console = held_run(tmp_path, monkeypatch, moment, *backend, signal_name=signal_name)
    assert code == EXIT[signal_name], console[-3000:]
    quiet(console)
    data = says_incomplete(tmp_path / "r", console, "interrupted", reason)
    assert data["exit_status"] == 2
    assert console.rstrip().splitlines()[-1].startswith("dmlconform: INCOMPLETE RUN (interrupted): ")
    if moment in ("load", "start", "collect"):  # no case ran, and how many there were is unknown
        assert data["collected"] is None and data["ran"] == 0
    elif moment == "run":
        assert data["ran"] == 2 < data["collected"]
    else:  # every case had run: held until the report was written, which says so
        assert data["ran"] == data["collected"] > 0
    assert not (tmp_path / "r" / watch.JOURNAL).exists()


def test_a_signal_before_the_run_started_replaces_an_earlier_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The directory held a complete report: left there, it would read as this run's."""
    first = dmlconform("run", *NUMPY, "--kinds", "numeric", "--report", "r", cwd=tmp_path)
    assert first.returncode == 0 and json.loads((tmp_path / "r" / "results.json").read_text())["complete"]
    code, console = held_run(
        tmp_path,
        monkeypatch,
        "load",
        "--backend",
        "stop_points:HoldsWhileLoading",
        *SMALL,
        signal_name="SIGINT",
    )
    assert code == 130
    data = says_incomplete(
        tmp_path / "r", console, "interrupted", "interrupted (Ctrl-C / SIGINT) before the run started"
    )
    assert data["cases"] == [] and not list((tmp_path / "r").glob("failures/*"))
    assert not list(ET.parse(tmp_path / "r" / "junit.xml").getroot().iter("testcase"))


@pytest.mark.parametrize("workers", [[], ["--", "-n", "2"]], ids=["serial", "xdist"])
def test_a_collection_error_says_so_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    """Under xdist the workers meet the error and the controller hears of it."""
    code, console = held_run(tmp_path, monkeypatch, "collect-error", *NUMPY, *workers)
    assert code == 2, console[-3000:]  # dmlconform's own failure, not the backend's: not 1
    reason = "the cases could not be collected: RuntimeError: case generation broke"
    data = says_incomplete(tmp_path / "r", console, "error", reason)
    assert data["collected"] is None and data["ran"] == 0
    assert "interrupted" not in console.rstrip().splitlines()[-1]  # pytest's word for it, not ours


def test_a_crash_during_collection_says_so_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process dies in collection: its watcher writes the report, junit.xml too, and says
    where it died; --isolate (which keeps a backend's crash in a case) would not help here."""
    code, console = held_run(tmp_path, monkeypatch, "collect-segfault", *NUMPY)
    assert code == -signal.SIGSEGV, console[-3000:]
    reason = "the run's process crashed (Segmentation fault) before collection finished"
    data = says_incomplete(tmp_path / "r", console, "incomplete", reason)
    assert data["collected"] is None and data["ran"] == 0 and "--isolate" not in console.splitlines()[-1]


def test_a_stopped_shard_says_so_and_so_does_the_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = dmlconform("run", *NUMPY, "--shard", "1/2", "--report", "s1", cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-2000:]
    code, console = held_run(tmp_path, monkeypatch, "run", *NUMPY, "--shard", "2/2", signal_name="SIGTERM")
    assert code == 143
    quiet(console)
    data = says_incomplete(tmp_path / "r", console, "interrupted", "terminated (SIGTERM) while cases ran")
    assert data["shard"] == {"index": 2, "count": 2} and data["ran"] == 2 < data["collected"]
    assert "of shard 2/2 ran" in (tmp_path / "r" / "summary.md").read_text()
    shards = [str(tmp_path / "s1"), str(tmp_path / "r")]
    assert main(["report", "merge", *shards, "--out", str(tmp_path / "m")]) == 2
    assert main(["report", "merge", *shards, "--out", str(tmp_path / "m"), "--allow-incomplete"]) == 0
    merged = json.loads((tmp_path / "m" / "results.json").read_text())
    assert merged["complete"] is False and "terminated (SIGTERM) while cases ran" in merged["stop_reason"]
    assert (tmp_path / "m" / "summary.md").read_text().splitlines()[0].endswith(": INCOMPLETE RUN")
    props = {
        p.get("name"): p.get("value")
        for p in ET.parse(tmp_path / "m" / "junit.xml").getroot().iter("property")
    }
    assert (
        props["dmlconform_complete"] == "false" and props["dmlconform_stop_reason"] == merged["stop_reason"]
    )


@pytest.mark.parametrize(
    ("moment", "reason"),
    [
        ("load", "terminated (SIGTERM) before the run started"),
        ("collect", "terminated (SIGTERM) before collection finished"),
    ],
)
def test_plain_pytest_says_so_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str, reason: str
) -> None:
    """``pytest --dml-backend``: the same files; its console has the INCOMPLETE line and no banner."""
    from dmlconform.runner.plugin import plugin_args

    hold = tmp_path / "hold"
    monkeypatch.setenv("DMLCONFORM_HOLD", moment)
    monkeypatch.setenv("DMLCONFORM_HOLD_FILE", str(hold))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(Path(__file__).parent.parent), str(Path(__file__).parent)]),
    )
    backend = "stop_points:HoldsWhileLoading" if moment == "load" else "numpy"
    argv = [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider", "-p", "stop_points"]
    argv += [
        f"--dml-backend={backend}",
        f"--dml-operators={SMALL[1]}",
        "--dml-feature-level=2_1",
        "--dml-cases=2",
    ]
    proc = subprocess.Popen(
        [*argv, "--dml-report=r"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    end = time.monotonic() + 120
    while not hold.exists() and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGTERM)
    (tmp_path / "hold.go").touch()
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 2, out[-3000:]  # pytest's own status for an interrupted session
    quiet(out)
    line = f"dmlconform: INCOMPLETE RUN (interrupted): {reason}, 0 cases ran"
    assert any(printed.startswith(line) for printed in out.splitlines()), out[-3000:]
    says_incomplete(tmp_path / "r", None, "interrupted", reason)
