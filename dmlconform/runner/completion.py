"""Whether a run is complete, and if not, why: results.json's completion fields
(docs/results-json.md), which junit.xml, the pages and the console repeat for an incomplete run.

A report whose counts cover part of a run must say so: a CI page would otherwise show an
interrupted or narrowed run's counts as a whole run's, and a run stopped before collection
finished (0 cases, none failed) as a pass.
"""

from __future__ import annotations

from typing import Any

import pytest

from dmlconform.runner.stops import REPORTING

#: Exit statuses of a session that ran its whole loop (with -x it may still have stopped early).
FINISHED = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED)


def judge_completion(
    stop_early: str | bool | None,
    exitstatus: int,
    *,
    ran: int,
    collected: int | None,
    deselected: int,
    signal_cause: str | None = None,
    signal_moment: str | None = None,
    collection_error: str | None = None,
) -> dict[str, Any]:
    """Whether every collected case has a result, and if not, why (docs/results-json.md).

    Complete means every collected case has a result and nothing stopped the run: a -x whose
    failure was the last case stopped nothing, but a signal always ends the run as interrupted
    (the command exits 130 or 143 for it, and the files must say what the exit status says),
    except that a signal that came while the report was written leaves an incomplete run's
    first cause standing. A run narrowed by -k, -m, --deselect or --lf covers part of its
    selection: not complete either. ``stop_early``: the session's ``shouldfail or shouldstop``
    (pytest's words for -x / --maxfail); ``ran``: the cases with a result; ``collected``: None when
    collection did not finish; ``signal_cause``: the stop reason of the signal that came
    (``StopTrap.cause``), ``signal_moment`` its phase; ``collection_error``: the error that
    stopped collection."""
    code = int(exitstatus)
    stop = stop_early
    all_ran = collected is not None and ran >= collected
    status, reason = "complete", None
    if collection_error:
        status, reason = "error", f"the cases could not be collected: {collection_error}"
    elif signal_cause and signal_moment != REPORTING:
        status, reason = "interrupted", signal_cause
    elif all_ran and not signal_cause:
        pass
    elif code == pytest.ExitCode.INTERRUPTED and not signal_cause:
        # a KeyboardInterrupt no trap saw (a handler set over it, a thread that could not set one)
        status, reason = "interrupted", "interrupted (Ctrl-C / SIGINT)"
    elif stop and not all_ran:
        status = "stopped"
        reason = f"stopped early: {stop}" if isinstance(stop, str) else "stopped early"
    elif deselected and code in FINISHED:
        status = "narrowed"
        reason = (
            f"narrowed: {deselected} of {collected} cases left out (-k, -m, --deselect, --lf or case ids), "
            "so the run covers part of its selection"
        )
    elif all_ran:  # every case ran, then a signal came while the report was written
        status, reason = "interrupted", signal_cause
    elif code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        status, reason = "incomplete", f"pytest ended with exit status {code}"
    else:
        status, reason = "incomplete", "some collected cases have no result"
    if (
        status != "complete"
        and collected is None
        and reason not in (signal_cause, None)
        and "collect" not in reason
    ):
        reason = f"{reason} (before collection finished)"  # a signal's reason names its moment itself
    if status == "interrupted" and code != pytest.ExitCode.INTERRUPTED:
        code = int(pytest.ExitCode.INTERRUPTED)  # the session's exit status (the plugin sets it)
    return {
        "complete": status == "complete",
        "status": status,
        "stop_reason": reason,
        "exit_status": code,
        "collected": collected,
        "ran": ran,
        "deselected": deselected,
    }
