"""What keeps a run's report truthful when the run does not end normally.

- :class:`SigtermTrap`: SIGTERM (what CI cancellation and ``timeout`` send) handled as SIGINT is:
  KeyboardInterrupt in the main thread, so pytest ends the session as interrupted and the
  report of the cases that ran is written, saying it was terminated.
- :class:`Lifeline`: the journal and the watcher process (``runner/watch.py``) that write that
  report when the process dies before it can (a segfault in an in-process backend, a SIGKILL).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from dmlconform.runner import watch


class SigtermTrap:
    """SIGTERM raises KeyboardInterrupt in the main thread, once: ``timeout`` signals the process
    and then its whole group, so the same termination can arrive twice, and a second interrupt
    would cut short the report the first one started."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._previous: Any = None
        self._installed = False

    def install(self) -> None:
        sigterm = getattr(signal, "SIGTERM", None)
        if sigterm is None or threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread (an embedding caller)
        self._previous = signal.signal(sigterm, self._on_signal)
        self._installed = True

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.signal_name is not None:
            return
        self.signal_name = signal.Signals(signum).name
        raise KeyboardInterrupt

    def restore(self) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous if self._previous is not None else signal.SIG_DFL)
            self._installed = False


class Lifeline:
    """The journal in the report directory and the watcher beside the run (see watch.py)."""

    def __init__(self) -> None:
        self._journal: Any = None
        self._journal_path: Path | None = None
        self._watcher: subprocess.Popen[bytes] | None = None
        self._fault_was_enabled = False

    def start(self, report_dir: Path, meta: dict[str, Any], isolate_flag: str) -> None:
        """Write the journal's first line (the run's settings) and start the watcher, with
        faulthandler's dump going to it. Best effort: a run whose watcher cannot start is the
        same run, only without this safety net."""
        import faulthandler

        from dmlconform.report.results_file import jsonable

        try:
            self._journal_path = report_dir / watch.JOURNAL
            self._journal_path.write_text(json.dumps({"meta": jsonable(meta)}) + "\n", encoding="utf-8")
            self._journal = self._journal_path.open("a", encoding="utf-8")
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                [p for p in sys.path if p] + [env.get("PYTHONPATH", "")]
            ).strip(os.pathsep)
            self._watcher = subprocess.Popen(
                [sys.executable, watch.__file__, str(report_dir), isolate_flag],
                stdin=subprocess.PIPE,
                env=env,
            )
        except OSError:
            self.stop()
            return
        self._fault_was_enabled = faulthandler.is_enabled()
        assert self._watcher.stdin is not None
        faulthandler.enable(file=self._watcher.stdin, all_threads=True)

    def write(self, entry: dict[str, Any]) -> None:
        """One journal line, flushed: what the watcher reads after a crash."""
        if self._journal is None:
            return
        from dmlconform.report.results_file import jsonable

        try:
            self._journal.write(json.dumps(jsonable(entry)) + "\n")
            self._journal.flush()
        except (OSError, ValueError, TypeError):
            pass

    def stop(self) -> None:
        """The run wrote its own report: tell the watcher so, and remove the journal."""
        import faulthandler

        if self._watcher is not None:
            if self._fault_was_enabled and sys.__stderr__ is not None:
                faulthandler.enable(file=sys.__stderr__, all_threads=True)
            else:
                faulthandler.disable()
            with contextlib.suppress(OSError, ValueError):
                assert self._watcher.stdin is not None
                self._watcher.stdin.write(watch.DONE)
                self._watcher.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watcher.wait(10)
            self._watcher = None
        if self._journal is not None:
            with contextlib.suppress(OSError):
                self._journal.close()
            self._journal = None
        if self._journal_path is not None:
            with contextlib.suppress(OSError):
                self._journal_path.unlink(missing_ok=True)
            self._journal_path = None
