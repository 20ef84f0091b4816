"""A report never looks complete when it is not: a run interrupted with SIGINT, stopped by -x, or
killed outright says so in results.json, summary.md (first), index.html, junit.xml and on the
console, and `report diff` refuses it unless given --allow-incomplete (tests/test_stops.py
signals a run at each moment of its life)."""

from __future__ import annotations

import json
import os
import re
import signal
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from helpers import LONG, SMALL, dmlconform, run_until, says_incomplete, start_run

from dmlconform.cli import main


def test_sigint_leaves_a_report_that_says_it_is_incomplete(tmp_path: Path) -> None:
    proc = start_run(*LONG, "--report", "r", cwd=tmp_path)
    out = run_until(proc, passed=60)
    proc.send_signal(signal.SIGINT)
    code = proc.wait(120)
    time.sleep(0.2)
    text = "".join(out)
    assert code == 130, text[:1500] + "\n[...]\n" + text[-1500:]  # the head shows where counting began
    collected = int(re.search(r"collected (\d+) items", text).group(1))  # pytest's own count
    data = json.loads((tmp_path / "r" / "results.json").read_text())
    assert data["complete"] is False and data["status"] == "interrupted"
    assert data["collected"] == collected and 60 <= data["ran"] == len(data["cases"]) < collected
    assert data["exit_status"] == 2 and "SIGINT" in data["stop_reason"]
    assert data["summary"]["total"] == data["ran"]
    summary = (tmp_path / "r" / "summary.md").read_text().splitlines()
    assert summary[0].endswith(": INCOMPLETE RUN")
    banner = next(line for line in summary[1:] if line.strip())
    assert f"{data['ran']} of {collected} collected cases ran" in banner and "interrupted" in banner
    html = (tmp_path / "r" / "index.html").read_text()
    body = html[html.index("<body>") :]
    assert body.index('id="incomplete"') < body.index("<h1>") and "<title>INCOMPLETE " in html
    assert "INCOMPLETE RUN" in text
    props = ET.parse(tmp_path / "r" / "junit.xml").getroot().iter("property")
    assert {p.get("name"): p.get("value") for p in props}["dmlconform_complete"] == "false"
    # report diff refuses it (one line, exit 2) unless told to accept it.
    assert main(["report", "diff", str(tmp_path / "r"), str(tmp_path / "r")]) == 2
    assert main(["report", "diff", str(tmp_path / "r"), str(tmp_path / "r"), "--allow-incomplete"]) == 0


def test_diff_refusal_is_one_line(tmp_path: Path) -> None:
    report = tmp_path / "r"
    report.mkdir()
    (report / "results.json").write_text(
        json.dumps({"complete": False, "status": "stopped", "stop_reason": "stopped early", "cases": []})
    )
    proc = dmlconform("report", "diff", str(report), str(report), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "incomplete run, stopped early" in proc.stderr and "--allow-incomplete" in proc.stderr


def test_stopped_by_x_is_incomplete(tmp_path: Path) -> None:
    proc = dmlconform(
        "run", "--backend", "test_plugin_backends:WrongValues", *SMALL, "--report", "r", "--", "-x",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = says_incomplete(tmp_path / "r", proc.stdout, "stopped", "stopped early: stopping after 1 failures")
    assert data["summary"]["failed"] == 1 and data["ran"] < data["collected"]
    assert proc.stdout.rstrip().splitlines()[-1].startswith("dmlconform: INCOMPLETE RUN (stopped): ")


def test_complete_run_says_so(tmp_path: Path) -> None:
    proc = dmlconform(
        "run", "--backend", "reference", *SMALL, "--kinds", "numeric", "--report", "r", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((tmp_path / "r" / "results.json").read_text())
    assert data["complete"] is True and data["status"] == "complete" and data["stop_reason"] is None
    assert data["collected"] == data["ran"] == data["summary"]["total"] > 0 and data["exit_status"] == 0
    assert "INCOMPLETE" not in (tmp_path / "r" / "summary.md").read_text()
    assert 'id="incomplete"' not in (tmp_path / "r" / "index.html").read_text()
    assert "dmlconform_" not in (tmp_path / "r" / "junit.xml").read_text()


def test_killed_run_does_not_leave_the_previous_report_looking_current(tmp_path: Path) -> None:
    first = dmlconform(
        "run", "--backend", "reference", *SMALL, "--kinds", "numeric", "--report", "r", cwd=tmp_path
    )
    assert first.returncode == 0 and (tmp_path / "r" / "index.html").is_file()
    proc = start_run(*LONG, "--report", "r", cwd=tmp_path)
    run_until(proc, passed=20)
    proc.kill()  # SIGKILL: no chance to write anything at the end; its watcher writes the report
    proc.wait(60)
    from test_signals import finished_report

    data = finished_report(tmp_path / "r")
    assert data["complete"] is False and data["status"] == "incomplete"
    assert data["stop_reason"].startswith("the run's process ended")
    assert "killed" in data["stop_reason"] and 20 <= data["ran"] == len(data["cases"]) < data["collected"]
    assert "INCOMPLETE RUN" in (tmp_path / "r" / "summary.md").read_text().splitlines()[0]
    assert main(["report", str(tmp_path / "r")]) == 0
    assert "INCOMPLETE RUN" in (tmp_path / "r" / "summary.md").read_text().splitlines()[0]


def test_a_run_killed_with_its_watcher_leaves_running(tmp_path: Path) -> None:
    """The whole process group killed (the watcher too): the placeholder is what is left."""
    proc = start_run(*LONG, "--report", "r", cwd=tmp_path, new_group=True)
    run_until(proc, passed=20)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)
    data = json.loads((tmp_path / "r" / "results.json").read_text())
    assert data["complete"] is False and data["status"] == "running" and data["cases"] == []
    assert not (tmp_path / "r" / "index.html").exists() and not (tmp_path / "r" / "summary.md").exists()
