"""Cases per second of ``dmlconform run`` against the real DirectML (under Wine) next to the reference.

    python bench/bench_directml.py [--smoke] [--cases N] [--repeat N] [--version V]

Runs the same selection (``--tier default``, all operators; ``--smoke`` for ``--tier smoke``;
``--cases N`` cases per group) with ``--backend directml``, then ``--backend reference`` at the
feature level the DirectML run judged at (the DLL's maximum), each as a whole ``dmlconform run``
process, so DirectML's figure includes starting Wine, the runner and its self-test (``--repeat
N``: N runs of each, alternating, the fastest shown). Prints for each: wall time, cases run,
cases/s, and the time spent inside the cases (results.json ``duration_s``, which leaves out
start-up, collection and the report); then the ratios, the time inside a case by kind, and
DirectML's own timings per execute (each case record's ``info.directml_ms``: create, compile,
init, execute, readback; the last execute of a case, so one of a metamorphic case's several).
Also times ``dmlconform directml info`` (runner start-up, stack query and self-test: the fixed
cost of a run) and ``dmlconform directml setup`` on a complete install (the idempotent path,
which changes nothing and ends with the self-test). Figures, not a test: nothing is asserted on
time. Without the DirectML stack it prints one line saying so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
STAGES = ("create", "compile", "init", "execute", "readback")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dmlconform.cli", *args]


def timed(cmd: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - t0
    if proc.returncode not in ok:
        tail = (proc.stderr.strip() or proc.stdout.strip())[-600:]
        sys.exit(f"bench_directml: {' '.join(cmd[2:])} failed ({proc.returncode}): {tail}")
    return wall, proc


def run(backend: str, args: argparse.Namespace, report: Path, level: str | None) -> dict[str, Any]:
    cmd = _cli(
        "run", "--backend", backend, "--tier", "smoke" if args.smoke else "default", "--report", str(report)
    )
    if args.cases is not None:
        cmd += ["--cases", str(args.cases)]
    if level is not None:
        cmd += ["--feature-level", level]
    if backend == "directml" and args.version:
        cmd += ["--backend-option", f"version={args.version}"]
    wall, _ = timed(cmd, ok=(0, 1))  # 1: some cases failed, which is a finding, not a bench error
    data = json.loads((report / "results.json").read_text())
    cases = data["cases"]
    summary = data["summary"]
    return {
        "backend": backend,
        "wall": wall,
        "level": data.get("feature_level"),
        "ids": [c["id"] for c in cases],
        "total": summary["total"],
        "ran": summary["total"] - summary["skipped"],
        "summary": summary,
        "in_cases": sum(c.get("duration_s") or 0.0 for c in cases),
        "cases": cases,
        "versions": data.get("versions") or {},
    }


def show_run(r: dict[str, Any]) -> None:
    s = r["summary"]
    print(
        f"{r['backend']:>9}: {r['total']:5d} cases ({r['ran']} ran: {s['passed']} passed, {s['failed']} failed, "
        f"{s['errors']} errors; {s['skipped']} skipped) in {r['wall']:6.1f} s = {r['total'] / r['wall']:7.1f} "
        f"cases/s; {r['in_cases']:6.1f} s inside the cases = {r['ran'] / max(r['in_cases'], 1e-9):7.1f} ran/s"
    )


def per_kind(dml: dict[str, Any], ref: dict[str, Any]) -> None:
    """Time inside a case by kind, DirectML next to the reference (cases that ran in both)."""
    ref_by_id = {c["id"]: c for c in ref["cases"]}
    kinds: dict[str, list[tuple[float, float]]] = {}
    for c in dml["cases"]:
        r = ref_by_id.get(c["id"])
        if r is None or "skipped" in (c["outcome"], r["outcome"]):
            continue
        kinds.setdefault(c["kind"], []).append((c.get("duration_s") or 0.0, r.get("duration_s") or 0.0))
    print("inside a case, by kind (cases that ran in both), ms per case:")
    print(
        f"  {'kind':<12} {'cases':>6} {'directml median':>16} {'reference median':>17} {'ratio of sums':>14}"
    )
    for kind, pairs in sorted(kinds.items()):
        d = statistics.median(p[0] for p in pairs) * 1000
        r = statistics.median(p[1] for p in pairs) * 1000
        ratio = sum(p[0] for p in pairs) / max(sum(p[1] for p in pairs), 1e-9)
        print(f"  {kind:<12} {len(pairs):6d} {d:16.2f} {r:17.2f} {ratio:13.1f}x")


def directml_timings(r: dict[str, Any]) -> None:
    """DirectML's own per-execute timings, from the case records' info (last execute of a case)."""
    timed_cases = [c for c in r["cases"] if isinstance((c.get("info") or {}).get("directml_ms"), dict)]
    if not timed_cases:
        print("DirectML per-case timings: none in results.json (no case record has info.directml_ms)")
        return
    by_kind: dict[str, int] = {}
    for c in timed_cases:
        by_kind[c["kind"]] = by_kind.get(c["kind"], 0) + 1
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(by_kind.items()))
    print(f"DirectML per execute (info.directml_ms of {len(timed_cases)} cases: {kinds}), ms:")
    print(f"  {'stage':<9} {'median':>8} {'p90':>8} {'max':>8} {'sum':>9}")
    totals = []
    for stage in (*STAGES, "all"):
        if stage == "all":
            values = [sum(float(c["info"]["directml_ms"].get(s) or 0.0) for s in STAGES) for c in timed_cases]
            totals = values
        else:
            values = [float(c["info"]["directml_ms"].get(stage) or 0.0) for c in timed_cases]
        values.sort()
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        print(
            f"  {stage:<9} {statistics.median(values):8.3f} {p90:8.3f} {values[-1]:8.3f} {sum(values):9.1f}"
        )
    in_timed = sum(c.get("duration_s") or 0.0 for c in timed_cases)
    print(
        f"  inside DirectML: {sum(totals) / 1000:.2f} s of the {in_timed:.2f} s those cases took "
        f"({100 * sum(totals) / 1000 / max(in_timed, 1e-9):.0f}%; the rest: inputs, the pipe to the "
        "runner under Wine, the reference and the comparison)"
    )


def steps(stdout: str) -> str:
    """setup's step lines ("  lavapipe      0.0 s  /path") as "lavapipe 0.0 s, ..."."""
    found = re.findall(r"^  (\S.*?)\s+(\d+\.\d) s\b", stdout, re.M)
    return ", ".join(f"{name} {secs} s" for name, secs in found)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="--tier smoke instead of --tier default")
    ap.add_argument("--cases", type=int, default=None, help="cases per group (default: the tier's)")
    ap.add_argument(
        "--repeat", type=int, default=1, help="runs of each backend, alternating; the fastest is shown"
    )
    ap.add_argument("--version", default=None, help="DirectML release (default: the backend's default)")
    args = ap.parse_args()

    sys.path.insert(0, str(REPO))
    from dmlconform.backends.directml.releases import release
    from dmlconform.backends.directml.stack import StackMissing, locate

    if args.version:
        try:
            release(args.version)
        except KeyError as exc:
            sys.exit(f"bench_directml: {str(exc).strip(chr(39) + chr(34))}")
    try:
        found = locate(args.version)
    except StackMissing as exc:
        print(f"bench_directml: skipped, no DirectML stack here ({exc})")
        return 0

    tier = "smoke" if args.smoke else "default"
    print(
        f"DirectML {found.dml_version} ({found.dll}); tier {tier}"
        + (f", --cases {args.cases}" if args.cases else "")
    )
    version = ["--version", args.version] if args.version else []
    wall, proc = timed(_cli("directml", "info", *version))
    print(f"directml info (runner start-up under Wine, stack query, self-test): {wall:5.1f} s")
    wall, proc = timed(_cli("directml", "setup", *version))
    print(
        f"directml setup on a complete install (no-op path + self-test): {wall:5.1f} s ({steps(proc.stdout)})"
    )

    best: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):  # alternating, so a burst of load elsewhere hits both
            for backend in ("directml", "reference"):
                level = best["directml"]["level"] if backend == "reference" else None
                r = run(backend, args, Path(tmp) / f"{backend}-{i}", level)
                if backend not in best or r["wall"] < best[backend]["wall"]:
                    best[backend] = r
    dml, ref = best["directml"], best["reference"]
    print(
        f"same selection, feature level {dml['level']}; each a whole dmlconform run process"
        + (f" (best of {args.repeat})" if args.repeat > 1 else "")
        + ":"
    )
    show_run(dml)
    show_run(ref)
    if dml["ids"] != ref["ids"]:
        only_dml = len(set(dml["ids"]) - set(ref["ids"]))
        only_ref = len(set(ref["ids"]) - set(dml["ids"]))
        print(f"  note: the case lists differ ({only_dml} only in directml, {only_ref} only in reference)")
    print(
        f"directml / reference: wall time {dml['wall'] / ref['wall']:.2f}x, cases/s "
        f"{(dml['total'] / dml['wall']) / (ref['total'] / ref['wall']):.2f}x; time inside the cases "
        f"{dml['in_cases'] / max(ref['in_cases'], 1e-9):.2f}x; outside them (start-up, collection, report) "
        f"{dml['wall'] - dml['in_cases']:.1f} s vs {ref['wall'] - ref['in_cases']:.1f} s"
    )
    per_kind(dml, ref)
    directml_timings(dml)
    return 0


if __name__ == "__main__":
    sys.exit(main())
