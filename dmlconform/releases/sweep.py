"""A release sweep: every installed DirectML release held against the spec, into one directory.

    DIR/releases.json          each known release: wheel, installed, its self-test now (status.py)
    DIR/acceptance-<V>.json    DirectML's answer to every probe, with the stage (acceptance.py)
    DIR/runs/<V>/              a conformance run (``dmlconform run``) on the release, wave_ops=on
    DIR/runs-wave-ops-off/<V>/ the same run with wave_ops=off
    DIR/replays.json           every finding's reproducers replayed on every release, wave_ops=on
    DIR/replays-wave-ops-off.json  the same with wave_ops=off
    DIR/sweep.json             the settings, the commands and how long each step took

DirectML picks some FLOAT32 reductions by whether the device reports D3D12 WaveOps: every GPU
does (wave_ops=on, the backend's default), this stack's vkd3d does not (wave_ops=off). The
numbers differ between the two (MVN1 at |mean|/std ~ 28: about 9x less error with WaveOps; F2
fails only without), so the runs and the replays judge both. Acceptance asks only CreateOperator and CompileOperator,
which judge the desc before any reduction is chosen: measured on 1.15.4, every probe of the
default corpus gets the same verdict under both, so acceptance runs once, at the default.

A release whose self-test fails (1.5.1 crashes, 1.10.1 records nothing) is recorded as unable to
run here and gets no acceptance, run or replay: it is never judged. ``publish.py`` turns the
directory into docs/directml-conformance.md; nothing there is measured, so the table can be
regenerated from a sweep at any time.

Conformance runs go through ``dmlconform run`` in a child process each (a pytest session per
release, as a user would run it); the acceptance probes and the replays run in this process, one
runner per release.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dmlconform.backends.directml import status
from dmlconform.backends.directml.backend import DirectMLBackend
from dmlconform.backends.directml.releases import release
from dmlconform.releases import acceptance as acc
from dmlconform.releases.findings import registry
from dmlconform.runner.checks import run_case
from dmlconform.runner.guard import ThreadGuard
from dmlconform.specification.spec import Spec
from dmlconform.specification.validate import validate
from dmlconform.tolerance.options import ToleranceOptions

Log = Callable[[str], None]

#: The backend's ``wave_ops`` settings a sweep judges, the default first.
WAVE_OPS = ("on", "off")


def runs_dir(out: Path, wave_ops: str = "on") -> Path:
    """Where a sweep keeps its conformance runs for a ``wave_ops`` setting: runs/ for the
    default, so ``report releases DIR/runs/*`` stays one run per release."""
    return out / ("runs" if wave_ops == WAVE_OPS[0] else f"runs-wave-ops-{wave_ops}")


def replays_path(out: Path, wave_ops: str = "on") -> Path:
    """Where a sweep keeps its replays for a ``wave_ops`` setting."""
    return out / ("replays.json" if wave_ops == WAVE_OPS[0] else f"replays-wave-ops-{wave_ops}.json")


@dataclass(frozen=True)
class SweepSettings:
    cases: int = 2
    seed: int = 0
    legal: int = 12
    illegal: int = 6
    edges: int = 1
    tier: str = "default"
    wave_ops: tuple[str, ...] = WAVE_OPS

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "seed": self.seed,
            "legal": self.legal,
            "illegal": self.illegal,
            "edges": self.edges,
            "tier": self.tier,
            "wave_ops": list(self.wave_ops),
        }


def record_releases(versions: list[str], spec: Spec, out: Path, log: Log) -> list[str]:
    """Self-test every installed release of ``versions`` now; write releases.json; return the
    releases that run here, oldest first."""
    rows = []
    runnable = []
    for v in versions:
        row = release(v)
        entry: dict[str, Any] = {
            "release": v,
            "wheel": f"{row.package}=={row.package_version}",
            "table_max_feature_level": row.max_feature_level,
            "table_runs_here": row.runs_here,
            "table_note": row.note,
            "installed": status.installed(v),
        }
        if entry["installed"]:
            measured = status.measure(v, spec)
            status.write(measured)
            entry["status"] = measured.to_json()
            if measured.runs:
                runnable.append(v)
            log(f"  {v:<8} {'runs' if measured.runs else 'cannot run here'}: {measured.detail}")
        else:
            log(f"  {v:<8} not installed (dmlconform directml setup --version {v})")
        rows.append(entry)
    out.mkdir(parents=True, exist_ok=True)
    (out / "releases.json").write_text(json.dumps({"releases": rows}, indent=1) + "\n", encoding="utf-8")
    return runnable


def run_acceptance(versions: list[str], settings: SweepSettings, spec: Spec, out: Path, log: Log) -> None:
    st = acc.Settings(
        seed=settings.seed, legal=settings.legal, illegal=settings.illegal, edges=settings.edges
    )
    start = time.monotonic()
    probes = acc.corpus(spec, st)
    log(f"  corpus: {len(probes)} probes in {time.monotonic() - start:.1f} s")
    for v in versions:
        answers = acc.ask_release(v, probes, st, spec)
        acc.write_answers(answers, out)
        counts = {k: sum(1 for x in answers.verdicts.values() if x == k) for k in acc.VERDICTS}
        compiled = sum(
            1 for i, s in answers.stages.items() if s == acc.COMPILE and answers.verdicts[i] == acc.REFUSED
        )
        log(
            f"  {v:<8} {answers.max_feature_level}: "
            + ", ".join(
                f"{n} {k}" + (f" ({compiled} by CompileOperator)" if k == acc.REFUSED and compiled else "")
                for k, n in counts.items()
            )
            + f" in {answers.seconds:.1f} s"
        )
        for line in acc.failure_lines(answers):
            log(f"  {v:<8} {line}")


def run_command(version: str, settings: SweepSettings, report: Path, wave_ops: str = "on") -> list[str]:
    """The ``dmlconform run`` command line of one release's conformance run."""
    return [
        "dmlconform",
        "run",
        "--backend",
        "directml",
        "--backend-option",
        f"version={version}",
        "--backend-option",
        f"wave_ops={wave_ops}",
        "--tier",
        settings.tier,
        "--cases",
        str(settings.cases),
        "--seed",
        str(settings.seed),
        "--report",
        str(report),
        "--no-known-findings",  # every failure shows: findings.yaml classifies them, release by release
    ]


def run_label(version: str, wave_ops: str) -> str:
    """How sweep.json and the log name a run: the release, and the setting if not the default."""
    return version if wave_ops == WAVE_OPS[0] else f"{version} wave_ops={wave_ops}"


#: Releases whose conformance runs go at once: a run keeps about one core busy (the runner and
#: lavapipe under Wine), so two share this project's two cores and halve the sweep's longest step.
PARALLEL_RUNS = 2


def _one_run(
    version: str, settings: SweepSettings, out: Path, wave_ops: str
) -> tuple[str, dict[str, Any], str]:
    """One release's ``dmlconform run`` in a child process: (label, its sweep.json entry, its log line)."""
    report = runs_dir(out, wave_ops) / version
    argv = run_command(version, settings, report, wave_ops)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from dmlconform.cli import main; sys.exit(main())", *argv[1:]],
        capture_output=True,
        text=True,
        errors="replace",
        stdin=subprocess.DEVNULL,
    )
    seconds = time.monotonic() - start
    tail = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    summary = next((ln.strip("= ") for ln in reversed(tail) if " in " in ln and "=" in ln), "")
    label = run_label(version, wave_ops)
    entry = {"command": " ".join(argv), "exit_status": proc.returncode, "seconds": round(seconds, 1)}
    if not (report / "results.json").is_file():
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return label, entry, f"  {label:<8} run failed (exit {proc.returncode}): {last}"
    return label, entry, f"  {label:<8} {summary or 'done'} ({seconds:.0f} s)"


def run_conformance(
    versions: list[str], settings: SweepSettings, out: Path, log: Log, wave_ops: str = "on"
) -> dict[str, Any]:
    """One ``dmlconform run`` per release, in child processes of this interpreter,
    :data:`PARALLEL_RUNS` at a time; logged and recorded in release order."""
    done: dict[str, Any] = {}
    with ThreadPoolExecutor(max_workers=PARALLEL_RUNS) as pool:
        for label, entry, line in pool.map(lambda v: _one_run(v, settings, out, wave_ops), versions):
            done[label] = entry
            log(line)
    return done


def run_replays(
    versions: list[str], spec: Spec, cases_root: Path, out: Path, log: Log, wave_ops: str = "on"
) -> None:
    """Replay every finding's reproducers on every release with ``wave_ops``:
    replays.json[finding][path][release] (replays_path names the file of each setting)."""
    from dmlconform.runner.results import load_case_dir

    reproducers = [(f.id, r) for f in registry().findings for r in f.reproducers]
    loaded = {}
    for _, r in reproducers:
        try:
            loaded[r.path] = load_case_dir(cases_root / r.path, spec)
        except ValueError as exc:
            log(f"  {r.path}: cannot load: {exc}")
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for v in versions:
        backend = DirectMLBackend(version=v, wave_ops=wave_ops)
        try:
            guard = ThreadGuard(backend, 300)
            for fid, r in reproducers:
                if r.path not in loaded:
                    continue
                case, inputs, meta = loaded[r.path]
                if case.kind == "validation":
                    # a validation reproducer speaks only where the spec's verdict is the same as
                    # at its own level: legal, or breaking its rule and nothing else
                    here = {x.rule for x in validate(case.desc, backend.feature_level, spec)}
                    if here != ({case.rule} if case.expected == "illegal" else set()):
                        table.setdefault(fid, {}).setdefault(r.path, {})[v] = {
                            "outcome": "n/a",
                            "message": f"at {backend.feature_level} the spec says {sorted(here) or 'legal'}",
                        }
                        continue
                result = run_case(
                    case, guard, spec, ToleranceOptions.parse(meta.get("tolerance")), inputs=inputs
                )
                table.setdefault(fid, {}).setdefault(r.path, {})[v] = {
                    "outcome": result.status,
                    "message": (result.message or "")[:300],
                }
        finally:
            backend.close()
        shown = sum(
            1
            for fid, r in reproducers
            if table.get(fid, {}).get(r.path, {}).get(v, {}).get("outcome") == r.shows
        )
        log(f"  {run_label(v, wave_ops):<8} {shown} of {len(reproducers)} reproducers show their finding")
    replays_path(out, wave_ops).write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")


def sweep(
    versions: list[str],
    settings: SweepSettings,
    spec: Spec,
    out: Path,
    cases_root: Path,
    log: Log,
    runs: bool = True,
) -> dict[str, Any]:
    """Every step in order; returns (and writes) sweep.json."""
    steps: dict[str, float] = {}
    start = time.monotonic()
    log("releases (self-test):")
    runnable = record_releases(versions, spec, out, log)
    steps["releases"] = time.monotonic() - start
    t = time.monotonic()
    log("acceptance (CreateOperator and CompileOperator on every probe):")
    run_acceptance(runnable, settings, spec, out, log)
    steps["acceptance"] = time.monotonic() - t
    done: dict[str, Any] = {}
    if runs:
        t = time.monotonic()
        done = _conformance_runs(runnable, settings, out, log)
        steps["runs"] = time.monotonic() - t
    t = time.monotonic()
    for w in settings.wave_ops:
        log(f"reproducers (replayed on every release, wave_ops={w}):")
        run_replays(runnable, spec, cases_root, out, log, w)
    steps["replays"] = time.monotonic() - t
    previous = out / "sweep.json"
    if not runs and previous.is_file():  # the runs already there stay, and so does their record
        done = _recorded_runs(previous, steps)
    meta = {
        "settings": settings.to_json(),
        "releases": versions,
        "runnable": runnable,
        "runs": done,
        "seconds": {k: round(v, 1) for k, v in steps.items()},
    }
    (out / "sweep.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


def _conformance_runs(runnable: list[str], settings: SweepSettings, out: Path, log: Log) -> dict[str, Any]:
    """The conformance runs of every wave_ops setting, one setting after the other: sweep.json's
    ``runs``, by run label."""
    done: dict[str, Any] = {}
    for w in settings.wave_ops:
        log(
            f"conformance runs (--tier {settings.tier} --cases {settings.cases} --seed {settings.seed}, "
            f"wave_ops={w}):"
        )
        done.update(run_conformance(runnable, settings, out, log, w))
    return done


def _recorded_runs(previous: Path, steps: dict[str, float]) -> dict[str, Any]:
    """The runs the previous sweep.json recorded, and their time into ``steps``: a sweep with
    --no-runs keeps the runs already there (none when the file cannot be read)."""
    done: dict[str, Any] = {}
    try:
        old = json.loads(previous.read_text(encoding="utf-8"))
        done = old.get("runs") or {}
        if "runs" in (old.get("seconds") or {}):
            steps["runs"] = float(old["seconds"]["runs"])
    except (OSError, ValueError):
        pass
    return done
