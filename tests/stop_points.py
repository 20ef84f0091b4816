"""Holds a conformance run at a chosen moment, so that a test can signal it there (tests/test_stops.py).

A test starts ``dmlconform run ... -- -p stop_points`` with ``DMLCONFORM_HOLD`` naming the moment
and ``DMLCONFORM_HOLD_FILE`` a path. At that moment the run writes the file and waits until
``<file>.go`` appears (60 s at most); the test signals the process once the file is there, then
writes ``.go``. A signal that raises KeyboardInterrupt ends the wait there, in the middle of that
moment's work, as it would end the real work; a signal the run holds lets the wait end on ``.go``
and the run go on. The moments:

- ``start``: the session has started (its report directory prepared), collection has not;
- ``collect``: collection has made its first case and not the others;
- ``collect-error``: the same place, where case generation raises instead (a collection error);
- ``collect-segfault``: the same place, where the process crashes (SIGSEGV);
- ``run``: the third case is running;
- ``pages``: results.json is written, the pages are not;
- ``junit``: the pages are written, pytest's junit.xml is being written.

The backend ``stop_points:HoldsWhileLoading`` (the reference backend) holds in its constructor:
the run is loading its backend, before its session starts.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path
from typing import Any

import pytest

from dmlconform.backends.reference import ReferenceBackend

MOMENT = os.environ.get("DMLCONFORM_HOLD", "")


def hold(where: str) -> None:
    """Say where the run is (the file), then wait for the test's go-ahead."""
    path = Path(os.environ["DMLCONFORM_HOLD_FILE"])
    go = path.with_name(path.name + ".go")
    path.write_text(where)
    end = time.monotonic() + 60
    while not go.exists() and time.monotonic() < end:
        time.sleep(0.01)


class HoldsWhileLoading(ReferenceBackend):
    def __init__(self, **options: Any) -> None:
        hold("load")
        super().__init__(**options)


def _first_then(collect: Any, then: str) -> Any:
    def held(*args: Any, **kwargs: Any) -> Any:
        cases = collect(*args, **kwargs)
        yield next(iter(cases))
        if then == "collect-error":
            raise RuntimeError("case generation broke")
        hold(then)
        if then == "collect-segfault":
            ctypes.string_at(0)
        yield from cases

    return held


def pytest_configure(config: pytest.Config) -> None:
    if MOMENT.startswith("collect"):
        from dmlconform.runner import plugin

        plugin.collect = _first_then(plugin.collect, MOMENT)
    elif MOMENT == "pages":
        import dmlconform.report as report

        write_reports = report.write_reports

        def held(report_dir: Any) -> Any:
            hold("pages")
            return write_reports(report_dir)

        report.write_reports = held


@pytest.hookimpl(trylast=True)  # after the dmlconform plugin's
def pytest_sessionstart(session: pytest.Session) -> None:
    if MOMENT == "start":
        hold("start")


_calls = 0


def pytest_runtest_call(item: pytest.Item) -> None:
    global _calls
    _calls += 1
    if MOMENT == "run" and _calls == 3:
        hold("run")


if MOMENT == "junit":  # patched before junitxml makes its object, whose method pluggy then keeps
    from _pytest.junitxml import LogXML

    _write = LogXML.pytest_sessionfinish

    def _held(self: Any) -> None:
        hold("junit")
        _write(self)

    LogXML.pytest_sessionfinish = _held  # type: ignore[method-assign]
