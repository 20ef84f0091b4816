"""Where a run may write: the check every verb makes of its output directory before it works."""

from __future__ import annotations

import tempfile
from pathlib import Path


def directory_problem(path: str | Path, what: str = "directory") -> str | None:
    """Why ``path`` cannot serve as an output directory (None: it exists now and takes files).

    Creates it (and its parents) when absent, and writes and removes a probe file, because
    permission bits do not tell (root ignores them; a read-only mount does not show in them). A
    verb asks before its work starts, so an unusable ``--report`` or ``--out`` costs one line
    and exit 2, not a run's worth of work and a traceback at the end."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        return f"{what} {target}: exists and is not a directory"
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target, prefix=".dmlconform-probe-"):
            pass
    except OSError as exc:
        return f"{what} {target}: cannot write there: {exc.strerror or exc}"
    return None
