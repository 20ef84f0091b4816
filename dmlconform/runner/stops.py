"""What a signal does to a conformance run, by the moment it comes (the run's phase).

SIGINT (Ctrl-C) and SIGTERM (what CI cancellation and ``timeout`` send) are handled alike: before
the report is written, the first one raises KeyboardInterrupt in the main thread, so pytest ends
the session as interrupted and the report of the cases that ran is written, naming the signal and
the moment. Once the report is being written, the first signal no longer cuts anything short: it
is held, the report is finished, and says it was interrupted then (a report cut in the middle
would be the one file that lies). Any later signal is ignored: ``timeout`` signals the process and
then its group, and a second Ctrl-C would cut short the report the first one started.

``dmlconform run`` installs one trap for the whole command (so a signal while pytest starts or the
backend loads is caught too) and hands it to pytest as a plugin object; under plain pytest the
plugin installs its own. :attr:`StopTrap.completion` carries the run's completion fields back to
the command, which prints its last line and picks its exit status from them.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

#: The run's phases, in order. A signal in the first three raises KeyboardInterrupt.
STARTING = "starting"  # pytest and the backend load; no case collected yet
COLLECTING = "collecting"
RUNNING = "running"
REPORTING = "reporting"  # results.json, the pages, junit.xml
DONE = "done"  # the report is written: the console's last lines, the process's end

#: How each phase reads in a stop reason ("interrupted (Ctrl-C / SIGINT) before collection finished").
MOMENTS = {
    STARTING: "before the run started",
    COLLECTING: "before collection finished",
    RUNNING: "while cases ran",
    REPORTING: "while the report was written",
    DONE: "after the report was written",
}

#: What each signal is called in a stop reason.
CAUSES = {"SIGINT": "interrupted (Ctrl-C / SIGINT)", "SIGTERM": "terminated (SIGTERM)"}

#: ``dmlconform run``'s exit status for a run a signal ended (128 + the signal, as a shell reports).
EXIT_STATUS = {"SIGINT": 130, "SIGTERM": 143}


class StopTrap:
    """SIGINT and SIGTERM handlers that know the run's phase (see the module docstring)."""

    def __init__(self) -> None:
        self.phase = STARTING
        self.signal_name: str | None = None  # the first signal that came
        self.moment: str | None = None  # the phase it came in
        #: the run's completion fields (runner/completion.py) once its report is written
        self.completion: dict[str, Any] | None = None
        self._previous: dict[int, Any] = {}

    @property
    def installed(self) -> bool:
        return bool(self._previous)

    def install(self) -> None:
        """Take over SIGINT and SIGTERM; from the main thread only (an embedding caller's other
        threads cannot set handlers, and then the run keeps Python's own)."""
        if self.installed or threading.current_thread() is not threading.main_thread():
            return
        for sig in _signals():
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}

    def enter(self, phase: str) -> None:
        self.phase = phase

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.signal_name is not None:
            return
        self.signal_name = signal.Signals(signum).name
        self.moment = self.phase
        if self.phase in (STARTING, COLLECTING, RUNNING):
            raise KeyboardInterrupt

    def cause(self) -> str | None:
        """The stop reason of the signal that came, with its moment; None when none came."""
        if self.signal_name is None:
            return None
        how = CAUSES.get(self.signal_name, f"stopped by {self.signal_name}")
        return f"{how} {MOMENTS.get(self.moment or STARTING, 'at an unknown moment')}"

    def cut_short(self) -> bool:
        """Whether the signal stopped the run before its report was finished (not after)."""
        return self.signal_name is not None and self.moment != DONE


def _signals() -> list[int]:
    return [s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None)) if s is not None]
