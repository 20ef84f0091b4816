"""The report's watcher: the report of a run whose process died without writing it.

A segfault in a backend running in the run's own process (no ``--isolate``), an out-of-memory
kill or a SIGKILL ends the process before pytest's session end, where the report is written;
what is left is the ``status: running`` placeholder. So the run (``ConformanceSession``) starts
this script beside itself with a pipe on its stdin and Python's faulthandler writing into that
pipe, and keeps a journal in the report directory: the run's settings, then each finished
case's record and each case as it starts. At its end the run writes ``done`` and closes the pipe.
Seeing the pipe close without ``done``, the watcher writes the report of the cases that ran
(results.json with ``complete: false``, summary.md, index.html), naming the case that was
running, the crash faulthandler saw (``Segmentation fault``) and the option that keeps a crash
from taking the run down (``--isolate``).

Started as a script path (``python .../watch.py``), so that waiting costs no import of the package;
dmlconform is imported only to write a report.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

JOURNAL = ".dmlconform-journal.jsonl"
DONE = b"done\n"


def read_journal(
    path: Path,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], int | None, str | None, str | None]:
    """(run settings, records by node id, collected count, the case that started last and has no
    record, the phase the run was in last): what the journal says. A line cut short by the crash
    is skipped."""
    meta: dict[str, Any] = {}
    records: dict[str, dict[str, Any]] = {}
    collected: int | None = None
    running: str | None = None
    phase: str | None = None
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if "meta" in entry:
                meta = entry["meta"]
            elif "record" in entry:
                records[entry["record"]["nodeid"]] = entry["record"]
                if running == entry["record"]["nodeid"]:
                    running = None
            elif "start" in entry:
                running = entry["start"]
            elif "collected" in entry:
                collected = entry["collected"]
            elif "phase" in entry:
                phase = entry["phase"]
    return meta, records, collected, running, phase


def crash_of(dump: str) -> str | None:
    """The fatal error faulthandler wrote (``Segmentation fault``), if it wrote one."""
    found = re.search(r"Fatal Python error: ([^\n]+)", dump)
    return found.group(1).strip() if found else None


#: Where a run whose journal names no running case was, by its last phase (runner/stops.py's names).
WHERE = {
    "starting": " before collection began",
    "collecting": " before collection finished",
    "reporting": " while the report was written",
}


def stop_reason(crash: str | None, running: str | None, isolate_flag: str, phase: str | None = None) -> str:
    """Why the run stopped: the crash (or a kill), where (the case that was running, or the
    phase), and, for a crash in a case, the option that keeps a backend's crash from taking the
    run down (a crash outside a case is not the backend's: isolating it would change nothing)."""
    where = f" during {running.split('::')[-1]}" if running else WHERE.get(phase or "", "")
    isolate = (
        f"{isolate_flag}: it runs the backend in a worker process whose crash fails that case and not the run"
    )
    if crash:
        advice = f"; re-run with {isolate}" if running or phase in (None, "running") else ""
        return f"the run's process crashed ({crash}){where}{advice}"
    return (
        f"the run's process ended{where} before writing its report (killed, e.g. by SIGKILL or for "
        f"lack of memory, or a crash Python could not report; for a crash, re-run with {isolate})"
    )


def finalize(report_dir: Path, dump: str, isolate_flag: str) -> dict[str, Any] | None:
    """Write the report of the cases the journal holds (results.json, the pages, junit.xml);
    returns its completion fields (None when the run had already written its own results, or
    left no journal)."""
    journal = report_dir / JOURNAL
    if not journal.is_file():
        return None
    try:
        status = json.loads((report_dir / "results.json").read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError):
        status = "running"
    if status != "running":  # the run wrote its results and died later: they stand
        journal.unlink(missing_ok=True)
        return None
    meta, records, collected, running, phase = read_journal(journal)
    if not meta:
        return None
    from dmlconform.report import write_reports
    from dmlconform.report.junit_file import write_junit
    from dmlconform.report.results_file import write_results_file
    from dmlconform.runner.results import RunMeta, build_results
    from dmlconform.specification.spec import load_spec

    reason = stop_reason(crash_of(dump), running, isolate_flag, phase)
    started_epoch = meta.pop("started_epoch", None)
    xml = meta.pop("junit", None)
    meta.update(
        finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        duration_s=max(0.0, time.time() - float(started_epoch)) if started_epoch else 0.0,
        completion={
            "complete": False,
            "status": "incomplete",
            "stop_reason": reason,
            "exit_status": None,
            "collected": collected,
            "ran": len(records),
        },
    )
    results = build_results(RunMeta(**meta), load_spec(), list(records.values()))
    write_results_file(report_dir, results)
    try:
        write_reports(report_dir)
    except Exception as exc:  # results.json is what matters; say why the pages are missing
        print(f"dmlconform: HTML/markdown report not written: {type(exc).__name__}: {exc}", file=sys.stderr)
    if xml:  # pytest writes junit.xml at the session's end, which this run never reached
        write_junit(Path(xml), meta["completion"], results["cases"])
    journal.unlink(missing_ok=True)
    return meta["completion"]


def main(argv: list[str]) -> int:
    """``watch.py REPORT_DIR ISOLATE_FLAG``: wait for the run to close stdin, then act."""
    report_dir, isolate_flag = Path(argv[0]), argv[1]
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]  # the script's own directory: its modules are not top-level ones
    for sig in (signal.SIGINT, getattr(signal, "SIGTERM", None)):
        if sig is not None:  # the run handles both and finishes its report; we wait for its end
            signal.signal(sig, signal.SIG_IGN)
    data = sys.stdin.buffer.read()
    if data.endswith(DONE):
        return 0
    dump = data.decode("utf-8", "replace")
    if dump.strip():
        sys.stderr.write(dump)  # faulthandler's dump, which would have gone to the terminal
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    completion = finalize(report_dir, dump, isolate_flag)
    if completion:
        from dmlconform.runner.console import incomplete_line

        print(f"{incomplete_line(completion)}; report written to {report_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
