"""The dmlconform pytest plugin: ``--dml-*`` options, conformance items, results capture.

Loaded through the ``pytest11`` entry point when the package is installed, and by the repository's
``conftest.py`` in a source checkout. It stays inert unless ``--dml-backend`` is given, so the
project's own ``pytest`` run of ``tests/`` is unaffected.

With ``--dml-backend``, the items come from ``dmlconform/suite/test_conformance.py`` (a file
inside the package, so ``dmlconform run`` works from any directory): when the command line names
no test paths, the plugin points pytest at that file; when it names paths, any of them that
contains the file collects it. Items are ``numeric[...]``, ``validation[...]`` and
``metamorphic[...]`` with ids that depend only on the run settings (see
``dmlconform.runner.cases``), which pytest-xdist requires.

Results: each case's record rides on its pytest report (``report.dml_record``), which xdist
serializes back to the controller; the controller (or the single process of a serial run) applies
the final outcome and writes ``results.json`` at session end, then the HTML/markdown reports.
"""

from __future__ import annotations

import datetime as _dt
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dmlconform.errors import Rejected, Unsupported
from dmlconform.report.junit_file import write_junit
from dmlconform.report.record import CaseRecord
from dmlconform.runner.backend_loading import OpenedBackend, guard_for
from dmlconform.runner.cases import collect, in_shard, operator_data_types, selected_operators
from dmlconform.runner.checks import run_case
from dmlconform.runner.completion import judge_completion
from dmlconform.runner.console import (
    header_lines,
    incomplete_line,
    write_accuracy_classes,
    write_incomplete,
    write_known_findings,
    write_reports,
    write_skip_reasons,
)
from dmlconform.runner.expect import Settled, settle_result
from dmlconform.runner.junit_xml import junit_classname, mark_junit_incomplete, rewrite_junit
from dmlconform.runner.lifeline import Lifeline
from dmlconform.runner.node_ids import SUITE_DIR, SUITE_FILE, show_case_ids, suite_argument
from dmlconform.runner.options import SettingsError, add_pytest_options, given
from dmlconform.runner.report_directory import clear_earlier_run, discard_report
from dmlconform.runner.settings import Settings
from dmlconform.runner.settings import resolve_settings as resolve
from dmlconform.runner.stops import COLLECTING, DONE, REPORTING, RUNNING, StopTrap
from dmlconform.runner.tiers import max_elements_for
from dmlconform.specification.spec import load_spec

PLUGIN_NAME = "dmlconform-session"
#: The run's StopTrap, and whether this plugin installed it (then it also restores it)
STOPS_KEY = pytest.StashKey[tuple[StopTrap, bool]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("dmlconform", "DirectML operator conformance (dmlconform)")
    add_pytest_options(g)  # every --dml-* run option, from the one table in runner/options.py
    g.addoption("--dml-command", default=None, help=argparse_suppress())


def entry_point_loads_plugin() -> bool:
    """Whether pytest will load this module through the installed ``pytest11`` entry point (then
    naming it again with ``-p`` would register it twice, which pluggy refuses)."""
    from importlib.metadata import entry_points

    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return any(ep.value == __name__ for ep in entry_points(group="pytest11"))


def plugin_args() -> list[str]:
    """``-p dmlconform.runner.plugin`` when needed for a ``pytest.main`` call, else nothing."""
    return [] if entry_point_loads_plugin() else ["-p", __name__]


def argparse_suppress() -> str:
    import argparse

    return argparse.SUPPRESS


def under_cli(config: pytest.Config) -> bool:
    """Whether this pytest run is ``dmlconform run`` (which passes its command line along)."""
    return config.getoption("dml_command", None) is not None


def spelling(config: pytest.Config) -> str:
    """How the user spells run options: ``--isolate`` under ``dmlconform run``, ``--dml-isolate``
    under plain pytest (every run option is the plugin's with ``dml-`` dropped)."""
    return "--" if under_cli(config) else "--dml-"


def restyle(config: pytest.Config, exc: pytest.UsageError) -> pytest.UsageError:
    """A usage error in the style of the command that was run: under ``dmlconform run`` the line
    is ``dmlconform run: error: ...`` (printed here; pytest prints nothing for an empty
    UsageError), under plain pytest pytest's own ``ERROR: ...``."""
    if not under_cli(config):
        return exc
    for message in exc.args:
        print(f"dmlconform run: error: {message}", file=sys.stderr, flush=True)
    return pytest.UsageError()


def resolve_settings(config: pytest.Config) -> tuple[Settings, Any]:
    """Settings from the command line (runner.settings resolves them), or ``pytest.UsageError``
    with one line that spells options as the user typed them."""
    opt = config.option
    values = given(opt, "run", prefix="dml_")
    command = opt.dml_command or shlex.join(["pytest", *map(str, config.invocation_params.args)])
    try:
        return resolve(values, prefix=spelling(config), command=command, check_report=not _is_worker(config))
    except SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None


def stop_trap(config: pytest.Config) -> StopTrap:
    """The run's StopTrap: the one ``dmlconform run`` passed in as a plugin object (installed for
    the whole command), or else one of this process's own, installed here (plain pytest, and
    every xdist worker)."""
    if STOPS_KEY not in config.stash:
        given_trap = next((p for p in config.pluginmanager.get_plugins() if isinstance(p, StopTrap)), None)
        trap = given_trap or StopTrap()
        trap.install()
        config.stash[STOPS_KEY] = (trap, given_trap is None)
    return config.stash[STOPS_KEY][0]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("dml_backend", None):
        return
    stop_trap(config)  # first: the backend may take seconds to load, and a Ctrl-C then is a stop too
    try:
        settings, handle = resolve_settings(config)
    except pytest.UsageError as exc:
        raise restyle(config, exc) from None
    if (
        settings.report_dir is not None
        and not getattr(config.option, "xmlpath", None)
        and not _is_worker(config)
    ):
        settings.report_dir.mkdir(parents=True, exist_ok=True)
        config.option.xmlpath = str(settings.report_dir / "junit.xml")
    targeted = False
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        args = [suite_argument(arg) for arg in config.args]
        targeted = any(arg.startswith(f"{SUITE_FILE}::") for arg in args)
        if targeted:  # the whole suite file (dmlconform run names it) would select every case
            args = [arg for arg in args if arg != str(SUITE_FILE)]
        config.args[:] = args
    else:
        config.args[:] = [str(SUITE_FILE)]
    if (not config.args or all(a.split("::")[0] == str(SUITE_FILE) for a in config.args)) and hasattr(
        config.pluginmanager, "_confcutdir"
    ):
        # The suite lives in the package, possibly far from the rootdir: keep pytest from loading
        # conftest.py files of the directories above it (a source checkout's own conftest).
        config.pluginmanager._confcutdir = SUITE_DIR
    session = ConformanceSession(config, settings, handle)
    session.targeted = targeted
    config.pluginmanager.register(session, PLUGIN_NAME)
    show_case_ids(config)


@pytest.hookimpl(trylast=True)  # after the session's, which may still write a report
def pytest_unconfigure(config: pytest.Config) -> None:
    """A signal before the session existed (pytest starting, the backend loading): the report
    says so, as a later one's would (``dmlconform run`` writes it for signals before this plugin
    ran). Then the handlers this plugin installed are restored."""
    if STOPS_KEY not in config.stash:
        return
    trap, owned = config.stash[STOPS_KEY]
    if owned and trap.cut_short() and trap.completion is None and not _is_worker(config):
        report = config.getoption("dml_report", None)
        if report:
            from dmlconform.runner.unstarted import write_unstarted_report

            backend = config.getoption("dml_backend", None) or "?"
            command = shlex.join(["pytest", *map(str, config.invocation_params.args)])
            trap.completion = write_unstarted_report(Path(report).resolve(), backend, command, trap)
            print(f"{incomplete_line(trap.completion)}; report written to {report}", file=sys.stderr)
    if owned:
        trap.restore()


def quiet_interrupt(config: pytest.Config) -> None:
    """Keep pytest from showing the interrupt it kept (its ``!!! KeyboardInterrupt !!!`` banner and
    the line the run happened to be at). pytest has no public way to: its terminal reporter shows
    the interrupt through this method (at the session's end, or at unconfigure), so this
    reporter's is replaced; a pytest without it shows the interrupt as before, and nothing breaks."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and hasattr(reporter, "_report_keyboardinterrupt"):
        reporter._report_keyboardinterrupt = lambda: None


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _utc() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def failure_text(record: CaseRecord, settings: Settings, case_id: str) -> str:
    """What a failure shows (console, junit.xml): the verdict, then how to see it again: the
    reproducer's replay command when the run wrote one, else the run's command narrowed to
    this case."""
    text = str(record.message or "failed")
    if record.replay:
        return f"{text}\nreplay: {record.replay}"
    try:
        parts = shlex.split(settings.command)
    except ValueError:
        return text
    if parts[:2] == ["dmlconform", "run"]:
        base = parts[: parts.index("--")] if "--" in parts else parts
        parts = [*base, "--", case_id]
    else:
        parts.append("::" + case_id)
    return f"{text}\nre-run alone: {shlex.join(parts)}"


class ConformanceFailure(Exception):
    """A case failed; the message is the whole story (no traceback is shown)."""


class HarnessError(Exception):
    """dmlconform itself failed on a case (reference, generator, comparison): an ``error``."""


class ConformanceItem(pytest.Item):
    def __init__(self, *, case: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.case = case
        # the record only: a case's result holds its inputs, and items live as long as the
        # session (a stress run kept every case's tensors, gigabytes by its end)
        self.record: CaseRecord | None = None
        self.expectation: str | None = None

    def runtest(self) -> None:
        from dmlconform.runner.results import case_record, write_reproducer

        session: ConformanceSession = self.config.pluginmanager.get_plugin(PLUGIN_NAME)
        try:
            result = run_case(self.case, session.guard(), session.spec, session.settings.tolerance)
        except (Rejected, Unsupported) as exc:  # pragma: no cover - run_case maps these
            raise ConformanceFailure(str(exc)) from None
        except Exception as exc:
            self.record = case_record(self.case, self.nodeid, None, spec=session.spec)
            self.record.message = (
                f"internal error in dmlconform (not the backend): {type(exc).__name__}: {exc}"
            )
            raise HarnessError(self.record.message) from exc
        settled = self.settle(session.settings.expectations, result, session.spec)
        self.record = case_record(self.case, self.nodeid, result, spec=session.spec)
        self.record.message = settled.message
        self.record.known_finding = settled.finding
        self.record.excused = settled.excused
        s = session.settings
        if result.status == "failed" and s.report_dir is not None:
            try:
                write_reproducer(
                    s.report_dir, self.case, result, self.record, s.backend, s.options, s.tolerance.pairs()
                )
            except OSError as exc:
                self.record.message = f"{settled.message} (reproducer not written: {exc})"
        if settled.outcome in ("xfailed", "xpassed"):
            # decided here, not at collection: a bound is judged on the outputs, and predicates
            # such as the regime are known once the case ran
            self.add_marker(pytest.mark.xfail(reason=self.expectation or "expected", strict=False))
        if settled.outcome in ("failed", "xfailed"):
            raise ConformanceFailure(failure_text(self.record, session.settings, self.name))
        if settled.outcome == "skipped":
            pytest.skip(result.message or "skipped")

    def settle(self, expectations: list[Any], result: Any, spec: Any) -> Settled:
        """The case's outcome under the run's expectations (``runner.expect.settle_result``);
        sets :attr:`expectation` to the reason of the one that covered it."""
        settled = settle_result(expectations, self.case, self.nodeid, result, spec)
        if settled.expectation is not None:
            self.expectation = settled.expectation.reason
        return settled

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, (ConformanceFailure, HarnessError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


class ConformanceFile(pytest.File):
    def collect(self) -> list[ConformanceItem]:
        session: ConformanceSession = self.config.pluginmanager.get_plugin(PLUGIN_NAME)
        try:
            cases = list(in_shard(collect(session.spec, session.selection()), session.settings.shard))
        except Exception as exc:  # pytest shows it as a collection error; the report names it
            session.collection_error = f"{type(exc).__name__}: {exc}"
            raise
        # The node id spelled out as a string: pytest 9.2 parses the ids of its --lf / --ff cache
        # into (names, params) at the first "[", and a plain string id is parsed the same way,
        # whereas an id derived from the name keeps "numeric[...]" whole and never matches.
        return [
            ConformanceItem.from_parent(self, name=case.id, nodeid=f"{self.nodeid}::{case.id}", case=case)
            for case in cases
        ]


class ConformanceSession:
    """The per-process state of a conformance run, registered as a plugin when it is active."""

    def __init__(self, config: pytest.Config, settings: Settings, handle: Any):
        self.config = config
        self.settings = settings
        self.spec = load_spec()
        self._handle = handle
        self._guard: Any = None
        self.records: dict[str, dict[str, Any]] = {}
        self.started = _utc()
        self.t0 = time.monotonic()
        self.results_path: Path | None = None
        self.report_paths: list[Path] = []
        self.report_error: str | None = None  # why the pages were not written
        self.summary: dict[str, int] = {}
        self.collected: int | None = None  # cases of the run's selection; None until collection ends
        self.deselected = 0  # of those, how many -k / -m / --deselect / --lf / case ids left out
        self.targeted = False  # the command line named cases (node ids): a part of the selection
        self.completion: dict[str, Any] = {}
        self.session_started = False
        self.discard = False  # the run ended in a usage error: no report (see discard_report)
        self.collection_error: str | None = None  # what stopped collection (an exception)
        self.stops = stop_trap(config)  # SIGINT and SIGTERM: the report of the cases that ran, saying so
        self.judged_signal: str | None = None  # the signal the completion was judged with
        self.lifeline = Lifeline()  # the report of a run whose process dies before writing it
        controller_with_workers = getattr(config.option, "numprocesses", None) and not _is_worker(config)
        if controller_with_workers and hasattr(handle, "close"):
            handle.close()  # the controller of an xdist run runs no case

    def enter(self, phase: str) -> None:
        """The run is now in ``phase`` (runner/stops.py): a signal's meaning, and the journal's
        word on where a crash came."""
        self.stops.enter(phase)
        self.lifeline.write({"phase": phase})

    def selection(self) -> Any:
        """The ``runner.cases.Selection`` of this run: what collection covers (before --shard)."""
        return self.settings.selection

    def guard(self) -> Any:
        if self._guard is None:
            s = self.settings
            opened = OpenedBackend(self._handle, s.info, s.backend, s.options)
            self._guard = guard_for(opened, s.isolate, s.timeout, s.isolate_flag)
        return self._guard

    # -- collection -----------------------------------------------------------------------

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        if file_path.resolve() == SUITE_FILE:
            return ConformanceFile.from_parent(parent, path=file_path)
        return None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Mark the report directory as holding a run in progress: a run killed before its end
        (SIGKILL, a CI timeout) must not leave an earlier run's complete-looking report there.
        SIGTERM is trapped, and the lifeline (journal and watcher) started, so that a run ended
        by a signal or a crash still leaves the report of the cases that ran."""
        from dataclasses import asdict

        from dmlconform.report.results_file import write_results_file

        self.session_started = True
        report_dir = self.settings.report_dir
        if _is_worker(self.config) or report_dir is None:
            return
        clear_earlier_run(report_dir, getattr(self.config.option, "xmlpath", None))
        write_results_file(report_dir, self.placeholder())
        xml = getattr(self.config.option, "xmlpath", None)
        meta = {
            **asdict(self.run_meta()),
            "started_epoch": time.time(),
            "junit": xml and str(Path(xml).resolve()),
        }
        self.lifeline.start(report_dir, meta, self.settings.isolate_flag)

    def placeholder(self) -> dict[str, Any]:
        """The results.json of a run that has started and not finished (docs/results-json.md)."""
        from dmlconform.runner.results import SCHEMA_VERSION, summarize

        return {
            "schema_version": SCHEMA_VERSION,
            "command": self.settings.command,
            "started": self.started,
            "complete": False,
            "status": "running",
            "stop_reason": "the run has not finished (or was killed before it could write its results)",
            "exit_status": None,
            "collected": None,
            "ran": 0,
            "summary": summarize([]),
            "cases": [],
        }

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += sum(1 for item in items if isinstance(item, ConformanceItem))

    def whole_selection(self) -> int:
        """How many cases the run's selection (and shard) holds, before any narrowing."""
        return sum(1 for _ in in_shard(collect(self.spec, self.selection()), self.settings.shard))

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session: pytest.Session) -> Any:
        """Collection, and whether it finished: pytest calls pytest_collection_finish in a
        ``finally``, so a collection cut short by a signal (or stopped by an error) would count
        the cases collected so far, or none, as the run's; the count stays unknown (None)."""
        self.enter(COLLECTING)
        try:
            result = yield
        except BaseException:
            self.collected = None
            raise
        if self.collection_error:
            self.collected = None
        elif self.collected is not None:  # counted (serially: xdist's controller counts later)
            self.lifeline.write({"collected": self.collected})
            self.enter(RUNNING)
        return result

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if sys.exc_info()[1] is not None:
            return  # collection was cut short (pytest calls this in a finally): nothing to count
        selected = sum(1 for item in session.items if isinstance(item, ConformanceItem))
        if self.targeted:
            self.collected = max(self.whole_selection(), selected)
            self.deselected = self.collected - selected
        else:
            self.collected = selected + self.deselected

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # The controller of an xdist run collects nothing itself; every worker reports the same
        # ids, after its own deselection, so the run's whole selection is counted here.
        if self.collected is None and self.collection_error is None:
            try:
                whole = self.whole_selection()
            except Exception as exc:  # the workers met it too: their collection error says so
                self.collection_error = f"{type(exc).__name__}: {exc}"
                return
            self.collected = max(whole, len(ids))
            self.deselected = self.collected - len(ids)
            self.lifeline.write({"collected": self.collected})
            self.enter(RUNNING)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A collection error of the suite file: in an xdist run the workers' come here, to the
        controller (a serial run's collector records its own, in plainer words)."""
        if report.failed and self.collection_error is None and not _is_worker(self.config):
            lines = [line.strip() for line in str(report.longrepr).splitlines() if line.strip()]
            errors = [line.removeprefix("E").strip() for line in lines if line.startswith("E ")]
            self.collection_error = (errors or lines or ["a collection error"])[-1]

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.lifeline.write({"start": nodeid})  # the case a crash will be blamed on

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return header_lines(self.settings, self.spec)

    # -- results --------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
        report = yield
        recorded = report.when == "call" or (report.when == "setup" and not report.passed)
        if isinstance(item, ConformanceItem) and recorded:
            from dmlconform.runner.results import case_record

            record = item.record or case_record(item.case, item.nodeid, None, spec=self.spec)
            record.expectation = item.expectation
            report.dml_record = record.to_dict()  # a dict: xdist serializes it with the report
            report.dml_harness_error = call.excinfo is not None and call.excinfo.errisinstance(HarnessError)
        return report

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """A pytest-xdist worker died running a case (killed for lack of memory, a crash in the
        backend): xdist fails it with a report of its own, which carries no record, so the case
        would have no result and the report would not say which. It fails here with its record
        (made again from its id, as collection makes it) and the reason."""
        from dmlconform.runner.results import case_record

        name = crashitem.rpartition("::")[2]
        cases = in_shard(collect(self.spec, self.selection()), self.settings.shard)
        case = next((c for c in cases if c.id == name), None)
        if case is None:
            return
        record = case_record(case, crashitem, None, spec=self.spec)
        record.message = (
            f"the pytest-xdist worker running this case died ({report.longrepr}): killed, e.g. for lack "
            "of memory, or a crash in the backend; --isolate runs the backend in a process of its own, "
            "whose crash fails the case with its exit status"
        )
        report.dml_record = record.to_dict()
        report.longrepr = record.message  # junit.xml and the console say it too
        report.when = "call"  # xdist's "???": the case failed running, as under --isolate (not an error)

    @pytest.hookimpl(tryfirst=True)  # recorded before the terminal shows it: a Ctrl-C loses nothing shown
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if _is_worker(self.config):
            return
        junit_classname(self.config, report)
        record = getattr(report, "dml_record", None)
        if record is None:
            if report.when == "teardown" and report.failed and report.nodeid in self.records:
                self.records[report.nodeid]["outcome"] = "error"
            return
        from dmlconform.runner.results import finish_record

        outcome, message = _outcome(report)
        if outcome == "failed" and record.get("message"):
            message = record["message"]  # the verdict; the failure text adds the replay command
        self.records[report.nodeid] = finish_record(record, outcome, message, report.duration)
        self.lifeline.write({"record": self.records[report.nodeid]})

    # The innermost wrapper: before it yields, the completion is judged and junit.xml's properties
    # set (junitxml writes its file in the yield) and the report written; after, inside the
    # terminal reporter's wrapper, which prints the summary once this one is done.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Any:
        """Write the report. A signal from here on is held (StopTrap): the report is finished,
        and when the signal changes what it must say (a complete run is now an interrupted one),
        every file is written again saying so, junit.xml included."""
        self.enter(REPORTING)
        if self._guard is not None:
            self._guard.close()
        elif hasattr(self._handle, "close"):
            self._handle.close()
        if _is_worker(self.config):
            return (yield)
        try:
            self.finish(session, exitstatus)
            result = yield
            if self.stops.signal_name != self.judged_signal and not self.discard:
                before = self.completion
                self.finish(session, exitstatus)
                if self.completion != before:
                    rewrite_junit(self.config)
            return result
        finally:
            self.stops.enter(DONE)
            self.stops.completion = dict(self.completion) if self.completion and not self.discard else None
            self.lifeline.stop()

    def judge(self, stop_early: Any, exitstatus: int) -> dict[str, Any]:
        """The run's completion fields as of now (runner/completion.py)."""
        stops = self.stops
        self.judged_signal = stops.signal_name
        return judge_completion(
            stop_early,
            exitstatus,
            ran=len(self.records),
            collected=self.collected,
            deselected=self.deselected,
            signal_cause=stops.cause() if stops.cut_short() else None,
            signal_moment=stops.moment,
            collection_error=self.collection_error,
        )

    def finish(self, session: pytest.Session | None, exitstatus: int) -> None:
        """Judge the completion, mark junit.xml and write the report (or, after a usage error,
        mark the report directory for removal)."""
        stop_early = (session.shouldfail or session.shouldstop) if session is not None else None
        self.completion = self.judge(stop_early, exitstatus)
        if session is not None and self.completion["exit_status"] != int(exitstatus):
            session.exitstatus = self.completion["exit_status"]  # interrupted while the report was written
        mark_junit_incomplete(self.config, self.completion)
        if self.settings.report_dir is None:
            return
        if self.settings.created_dirs and self.usage_error(exitstatus):
            self.discard = True  # removed at unconfigure, once junitxml has written its file too
            return
        self.write()

    @pytest.hookimpl(trylast=True)  # after the terminal reporter has kept the interrupt to show it
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """A run ended by a signal it caught (StopTrap) says so in one line: pytest would show the
        KeyboardInterrupt the trap raises, with wherever the run happened to be as the place it
        stopped (noise, to someone who pressed Ctrl-C or sent a signal on purpose). The summary
        says the run was interrupted, and ``dmlconform run`` prints one line; any other interrupt
        (a collection error, ``pytest.exit``) is left to pytest."""
        if self.stops.signal_name is None:
            return
        quiet_interrupt(self.config)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.lifeline.stop()  # a session that never finished (a usage error after it started)
        s = self.settings
        if self.stops.cut_short() and self.results_path is None and not _is_worker(config):
            # a signal before the session reached its end (while pytest configured, or the session
            # started): no hook wrote the report, and an earlier run's may be in the directory
            self.write_unstarted()
        elif s.report_dir is not None and s.created_dirs and (self.discard or not self.session_started):
            discard_report(s.report_dir, s.created_dirs)

    def write_unstarted(self) -> None:
        """The report of a run a signal stopped before its session's end hook: no case, the
        cause, the earlier run's files cleared; junit.xml written here (junitxml writes its own
        only at the session's end)."""
        self.completion = self.judge(None, pytest.ExitCode.INTERRUPTED)
        report_dir = self.settings.report_dir
        self.stops.completion = dict(self.completion)
        if report_dir is None:
            return
        xml = getattr(self.config.option, "xmlpath", None)
        clear_earlier_run(report_dir, xml)
        self.write()
        if xml:
            write_junit(Path(xml), self.completion, list(self.records.values()))

    def usage_error(self, exitstatus: int) -> bool:
        """Whether the session ended in a usage error: pytest's own (a pasted id that names no
        case), or, under ``dmlconform run``, a selection that left no case (exit 2 there)."""
        code = int(exitstatus)
        return code == pytest.ExitCode.USAGE_ERROR or (
            code == pytest.ExitCode.NO_TESTS_COLLECTED and under_cli(self.config)
        )

    def run_meta(self) -> Any:
        """The run's RunMeta as of now: results.json's fields other than the cases."""
        from dmlconform.runner.results import RunMeta, spec_hash, versions

        s = self.settings
        sel = s.selection
        ops = selected_operators(self.spec, sel)
        dtypes = list(sel.data_types) or sorted(
            {t for op in ops for t in operator_data_types(self.spec, op, sel.level)},
            key=lambda t: t != "FLOAT32",
        )
        return RunMeta(
            backend=s.info.name or s.backend,
            backend_options=s.options,
            backend_level=s.info.feature_level,
            backend_description=s.info.description,
            feature_level=sel.level.name,
            seed=sel.seed,
            cases_per_group=sel.cases,
            operators=[op.name for op in ops],
            data_types=dtypes,
            command=s.command,
            started=self.started,
            finished=_utc(),
            duration_s=time.monotonic() - self.t0,
            versions=versions(s.info.versions),
            tolerance=s.tolerance.pairs(),
            completion=dict(self.completion),
            shard={"index": s.shard.index, "count": s.shard.count} if s.shard else None,
            selection=sel.to_dict(),
            spec_hash=spec_hash(self.spec),
            tier=sel.tier,
            max_elements=max_elements_for(sel.tier, sel.max_elements),
        )

    def write(self) -> None:
        from dmlconform.report.results_file import write_results_file
        from dmlconform.runner.results import build_results

        s = self.settings
        self.report_error = None
        results = build_results(self.run_meta(), self.spec, list(self.records.values()))
        assert s.report_dir is not None
        self.results_path = write_results_file(s.report_dir, results)
        self.summary = results["summary"]
        self.report_paths = [self.results_path]
        try:
            from dmlconform.report import write_reports
        except ImportError:
            return
        try:
            written = write_reports(s.report_dir)
            if written:
                self.report_paths += [
                    Path(p) for p in (written.values() if isinstance(written, dict) else written)
                ]
        except Exception as exc:  # the run's verdict must not depend on the renderer
            self.report_error = f"{type(exc).__name__}: {exc}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        done = self.completion
        if done and not done["complete"] and not _is_worker(self.config):
            write_incomplete(tr, done)
        if self.results_path is None:
            if not _is_worker(self.config) and any(
                r.get("outcome") == "skipped" for r in self.records.values()
            ):
                tr.section("dmlconform")
                write_skip_reasons(tr, self.records.values())
            return
        if not done or done["complete"]:
            tr.section("dmlconform")
        xml = getattr(self.config.option, "xmlpath", None)
        write_reports(tr, self.report_paths, xml, self.report_error, self.summary)
        write_known_findings(tr, self.records.values())
        write_accuracy_classes(tr, self.records.values())
        write_skip_reasons(tr, self.records.values())


def _outcome(report: pytest.TestReport) -> tuple[str, str | None]:
    wasxfail = getattr(report, "wasxfail", None)
    message = None
    if report.longrepr is not None and not report.passed:
        lr = report.longrepr
        if isinstance(lr, tuple) and len(lr) == 3:
            message = str(lr[2]).removeprefix("Skipped: ")
        else:
            message = str(lr).strip()
    if report.passed:
        return ("xpassed" if wasxfail is not None else "passed"), None
    if report.skipped:
        if wasxfail is not None:
            rec = getattr(report, "dml_record", {}) or {}
            return "xfailed", rec.get("message") or wasxfail
        return "skipped", message
    if report.when != "call" or getattr(report, "dml_harness_error", False):
        return "error", message
    return "failed", message
