"""What keeps a run's report truthful when its process dies: :class:`Lifeline`, the journal and
the watcher process (``runner/watch.py``) that write the report of the cases that ran when the
process dies before it can (a segfault in an in-process backend, a SIGKILL). Signals the process
can handle (SIGINT, SIGTERM) are runner/stops.py's.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from dmlconform.runner import watch


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
