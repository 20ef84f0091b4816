"""The report directory around a run: its default name, an earlier run's leftovers cleared when
a run starts, and what a run that ended in a usage error wrote there removed again.

A report directory holds one run: anything an earlier run left that the new one will not
rewrite (pages, reproducers) would be read as this run's.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
from pathlib import Path

from dmlconform.runner import watch


def remove_reproducers(failures: Path) -> None:
    """Empty a report directory's ``failures/`` of an earlier run's reproducers: a report
    directory holds one run, and a reproducer next to "all passed" would be a lie. Only
    directories this tool wrote (holding a case.json) go; anything else a user put there stays,
    and so does the directory then."""
    import shutil

    if not failures.is_dir():
        return
    for entry in failures.iterdir():
        if entry.is_dir() and not entry.is_symlink() and (entry / "case.json").is_file():
            shutil.rmtree(entry, ignore_errors=True)
    with contextlib.suppress(OSError):
        failures.rmdir()  # only when empty


def discard_report(report_dir: Path, created: tuple[Path, ...]) -> None:
    """Remove what a run wrote into a report directory it made, when the run ended in a usage
    error: the placeholder results.json, pytest's junit.xml, the pages, the journal, then the
    directories it made (deepest first) where they are empty. An empty report directory, or one
    holding the report of no case, would read as a run."""
    for name in ("results.json", "junit.xml", "index.html", "summary.md", watch.JOURNAL):
        with contextlib.suppress(OSError):
            (report_dir / name).unlink(missing_ok=True)
    for directory in created:
        with contextlib.suppress(OSError):
            directory.rmdir()  # only when empty: what a user put there stays


def default_report_dir(backend: str, cwd: str | os.PathLike[str] | None = None) -> Path:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in backend.split(":")[-1])
    return Path(cwd or os.getcwd()) / "reports" / f"{safe}-{stamp}"


def clear_earlier_run(report_dir: Path, xml: str | None) -> None:
    """Remove what an earlier run left in ``report_dir`` that this one may not rewrite: its
    pages, its junit.xml when pytest writes this run's there (``xml``: pytest's --junitxml),
    and its reproducers (:func:`remove_reproducers`)."""
    stale = [report_dir / "index.html", report_dir / "summary.md"]
    if xml and Path(xml).resolve() == report_dir / "junit.xml":
        stale.append(report_dir / "junit.xml")
    for path in stale:
        path.unlink(missing_ok=True)
    remove_reproducers(report_dir / "failures")
