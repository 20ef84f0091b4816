"""The pieces of an honest stop, without starting a run: what the signal trap does in each phase
(with real signals sent to this process), how the completion is judged from what ended the
session, and what the pages and junit.xml say of a run that ran no case or stopped.
tests/test_stops.py runs the whole thing, a signal sent at each moment of a real run."""

from __future__ import annotations

import json
import signal
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))

from synthetic_results import make_results, write_results  # noqa: E402

from dmlconform.report import write_reports  # noqa: E402
from dmlconform.report.junit_file import write_junit  # noqa: E402
from dmlconform.runner.completion import judge_completion  # noqa: E402
from dmlconform.runner.stops import COLLECTING, DONE, REPORTING, RUNNING, STARTING, StopTrap  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
OK, FAILED, INTERRUPTED = 0, 1, 2


def _deliver(trap: StopTrap, sig: int) -> bool:
    """Send ``sig`` to this thread (the main one) with ``trap`` installed; whether it raised
    KeyboardInterrupt. ``raise_signal`` delivers it before it returns, and Python runs the
    handler at its next instruction: ``os.kill`` of the process may hand the signal to another
    thread (an xdist worker has several), and the handler would come a moment later, maybe after
    the trap was restored."""
    trap.install()
    try:
        signal.raise_signal(sig)
        for _ in range(10):
            pass
    except KeyboardInterrupt:
        return True
    finally:
        trap.restore()
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize(
    ("phase", "raises"),
    [(STARTING, True), (COLLECTING, True), (RUNNING, True), (REPORTING, False), (DONE, False)],
)
def test_the_first_signal_stops_the_run_until_its_report_is_written(
    sig: int, phase: str, raises: bool
) -> None:
    trap = StopTrap()
    trap.enter(phase)
    assert _deliver(trap, sig) is raises
    assert trap.signal_name == signal.Signals(sig).name and trap.moment == phase
    assert trap.cut_short() is (phase != DONE)
    # a second signal, whatever the phase: ignored (the report of the first is being written)
    trap.enter(RUNNING)
    assert _deliver(trap, signal.SIGINT) is False
    assert trap.signal_name == signal.Signals(sig).name and trap.moment == phase


def test_the_trap_gives_the_handlers_back() -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    trap = StopTrap()
    trap.install()
    assert signal.getsignal(signal.SIGINT) == trap._on_signal
    trap.restore()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def _judge(code: int = OK, **kw: object) -> dict:
    args: dict = {"stop_early": None, "ran": 3, "collected": 3, "deselected": 0, **kw}
    stop_early = args.pop("stop_early")
    return judge_completion(stop_early, code, **args)


@pytest.mark.parametrize(
    ("code", "kw", "status", "reason"),
    [
        (OK, {}, "complete", None),
        # -x on the last case stopped nothing
        (FAILED, {"stop_early": "stopping after 1 failures"}, "complete", None),
        (FAILED, {"stop_early": "stopping after 1 failures", "ran": 1}, "stopped", "stopped early: stopping after 1 failures"),
        (INTERRUPTED, {"ran": 0, "collected": None, "signal_cause": "interrupted (Ctrl-C / SIGINT) before collection finished", "signal_moment": COLLECTING},
         "interrupted", "interrupted (Ctrl-C / SIGINT) before collection finished"),
        # the session existed, its collection had not begun: the moment is the signal's own
        (INTERRUPTED, {"ran": 0, "collected": None, "signal_cause": "terminated (SIGTERM) before the run started", "signal_moment": STARTING},
         "interrupted", "terminated (SIGTERM) before the run started"),
        (INTERRUPTED, {"ran": 1, "signal_cause": "terminated (SIGTERM) while cases ran", "signal_moment": RUNNING},
         "interrupted", "terminated (SIGTERM) while cases ran"),
        # the signal came as the last case ended: the command exits 130, so the files say interrupted
        (INTERRUPTED, {"signal_cause": "interrupted (Ctrl-C / SIGINT) while cases ran", "signal_moment": RUNNING},
         "interrupted", "interrupted (Ctrl-C / SIGINT) while cases ran"),
        # held while the report was written: a complete run becomes an interrupted one ...
        (OK, {"signal_cause": "terminated (SIGTERM) while the report was written", "signal_moment": REPORTING},
         "interrupted", "terminated (SIGTERM) while the report was written"),
        # ... an incomplete one keeps its first cause
        (FAILED, {"stop_early": "stopping after 1 failures", "ran": 1, "signal_cause": "x", "signal_moment": REPORTING},
         "stopped", "stopped early: stopping after 1 failures"),
        (INTERRUPTED, {"ran": 0, "collected": None, "collection_error": "RuntimeError: boom"},
         "error", "the cases could not be collected: RuntimeError: boom"),
        (OK, {"ran": 2, "deselected": 1}, "narrowed",
         "narrowed: 1 of 3 cases left out (-k, -m, --deselect, --lf or case ids), so the run covers part of its selection"),
        # a KeyboardInterrupt no trap saw, before collection finished
        (INTERRUPTED, {"ran": 0, "collected": None}, "interrupted", "interrupted (Ctrl-C / SIGINT) (before collection finished)"),
    ],
)  # fmt: skip
def test_completion_names_the_cause(code: int, kw: dict, status: str, reason: str | None) -> None:
    done = _judge(code, **kw)
    assert (done["status"], done["stop_reason"], done["complete"]) == (status, reason, status == "complete")
    assert done["exit_status"] == (INTERRUPTED if status == "interrupted" else code)
    assert done["collected"] == kw.get("collected", 3)


def _pages(tmp_path: Path, doc: dict) -> tuple[str, str]:
    write_results(tmp_path, doc)
    write_reports(tmp_path)
    return (tmp_path / "summary.md").read_text(), (tmp_path / "index.html").read_text()


@pytest.mark.parametrize("complete", [True, False])
def test_a_report_of_no_case_never_says_passed(tmp_path: Path, complete: bool) -> None:
    doc = make_results(0)
    doc.update(complete=complete, status="complete" if complete else "interrupted", collected=None, ran=0)
    doc["stop_reason"] = None if complete else "interrupted (Ctrl-C / SIGINT) before collection finished"
    md, html = _pages(tmp_path, doc)
    assert "passed" not in md and "No case ran" in md
    assert (
        'id="none-ran"' in html
        and "o-passed" not in html[html.index('id="summary"') : html.index('id="matrix"')]
    )
    assert ("INCOMPLETE RUN" in md.splitlines()[0]) is not complete


def test_a_report_of_skipped_cases_only_says_none_ran_to_a_verdict(tmp_path: Path) -> None:
    doc = make_results(6)
    for case in doc["cases"]:
        case["outcome"], case["message"] = "skipped", "nothing judged"
    md, _ = _pages(tmp_path, doc)
    assert "No case ran to a verdict: all 6 were skipped" in md and "cases that ran passed" not in md


def test_an_incomplete_shard_says_which(tmp_path: Path) -> None:
    doc = make_results(4)
    doc.update(complete=False, status="interrupted", stop_reason="terminated (SIGTERM) while cases ran")
    doc.update(collected=9, shard={"index": 2, "count": 3})
    md, html = _pages(tmp_path, doc)
    assert "4 of 9 collected cases of shard 2/3 ran; 5 have no result" in md
    assert "4 of 9 collected cases of shard 2/3 ran" in html


def test_junit_of_a_run_pytest_wrote_none_for(tmp_path: Path) -> None:
    records = [
        {"id": "numeric[A-0]", "operator": "A", "outcome": "passed", "duration_s": 0.5},
        {"id": "numeric[A-1]", "operator": "A", "outcome": "failed", "message": "max ulp 9 > 2"},
        {"id": "numeric[B-0]", "operator": "B", "outcome": "xfailed", "message": "F10"},
        {"id": "numeric[B-1]", "operator": "B", "outcome": "error", "message": "internal"},
    ]
    done = {
        "complete": False,
        "status": "incomplete",
        "stop_reason": "the run's process crashed",
        "collected": None,
        "ran": 4,
    }
    suite = ET.parse(write_junit(tmp_path / "junit.xml", done, records)).getroot().find("testsuite")
    assert suite is not None
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "4", "failures": "1", "errors": "1", "skipped": "1"
    }  # fmt: skip
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props == {
        "dmlconform_complete": "false",
        "dmlconform_status": "incomplete",
        "dmlconform_stop_reason": "the run's process crashed",
        "dmlconform_collected": "unknown",
        "dmlconform_ran": "4",
    }
    cases = suite.findall("testcase")
    assert [c.get("classname") for c in cases] == [
        "dmlconform.A",
        "dmlconform.A",
        "dmlconform.B",
        "dmlconform.B",
    ]
    assert cases[1].find("failure").get("message") == "max ulp 9 > 2"  # type: ignore[union-attr]
    complete = {"complete": True, "status": "complete"}
    assert not list(ET.parse(write_junit(tmp_path / "j2.xml", complete, records)).getroot().iter("property"))


def test_the_results_of_a_run_stopped_before_it_started(tmp_path: Path) -> None:
    from dmlconform.runner.unstarted import write_unstarted_report

    (tmp_path / "index.html").write_text("an earlier run's page")
    trap = StopTrap()
    trap.signal_name, trap.moment = "SIGINT", STARTING
    done = write_unstarted_report(tmp_path, "torch", "dmlconform run --backend torch", trap)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["complete"] is False and data["status"] == done["status"] == "interrupted"
    assert (
        data["stop_reason"] == "interrupted (Ctrl-C / SIGINT) before the run started" and data["cases"] == []
    )
    assert data["collected"] is None and data["ran"] == 0 and data["backend"]["name"] == "torch"
    md = (tmp_path / "summary.md").read_text()
    assert md.splitlines()[0] == "## dmlconform: torch @ FL ?: INCOMPLETE RUN" and "passed" not in md
    assert "earlier" not in (tmp_path / "index.html").read_text()
    props = {
        p.get("name"): p.get("value") for p in ET.parse(tmp_path / "junit.xml").getroot().iter("property")
    }
    assert props["dmlconform_status"] == "interrupted"
