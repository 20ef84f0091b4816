"""Whether a run is complete, and if not, why: results.json's completion fields
(docs/results-json.md), which junit.xml and the console repeat for an incomplete run.

A report whose counts cover part of a run must say so: a CI page would otherwise show an
interrupted or narrowed run's counts as a whole run's.
"""

from __future__ import annotations

from typing import Any

import pytest


def judge_completion(
    session: pytest.Session,
    exitstatus: int,
    *,
    ran: int,
    collected: int | None,
    deselected: int,
    signal_name: str | None,
) -> dict[str, Any]:
    """Whether every collected case has a result, and if not, why (docs/results-json.md).

    Complete means every collected case has a result, however the session ended (a -x whose
    failure was the last case stopped nothing); otherwise the cause is named. A run narrowed
    by -k, -m, --deselect or --lf covers part of its selection: not complete either. ``ran``: the
    cases with a result; ``collected``: None before collection finished; ``signal_name``: the
    signal that ended the run (``SigtermTrap``), or None."""
    code = int(exitstatus)
    stop = session.shouldfail or session.shouldstop
    status, reason = "complete", None
    finished = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED)
    if collected is not None and ran >= collected:
        pass
    elif code == pytest.ExitCode.INTERRUPTED and signal_name:
        status, reason = "interrupted", f"terminated ({signal_name})"
    elif code == pytest.ExitCode.INTERRUPTED:
        status, reason = "interrupted", "interrupted (Ctrl-C / SIGINT)"
    elif stop:
        status = "stopped"
        reason = f"stopped early: {stop}" if isinstance(stop, str) else "stopped early"
    elif deselected and code in finished:
        status = "narrowed"
        reason = (
            f"narrowed: {deselected} of {collected} cases left out (-k, -m, --deselect, --lf or case ids), "
            "so the run covers part of its selection"
        )
    elif code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        status, reason = "incomplete", f"pytest ended with exit status {code}"
    else:
        status, reason = "incomplete", "some collected cases have no result"
    if status != "complete" and collected is None:
        reason = f"{reason} (before collection finished)"
    return {
        "complete": status == "complete",
        "status": status,
        "stop_reason": reason,
        "exit_status": code,
        "collected": collected,
        "ran": ran,
        "deselected": deselected,
    }
