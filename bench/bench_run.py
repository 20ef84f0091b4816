"""Cases per second of the default ``dmlconform run`` against the reference backend.

    python bench/bench_run.py [--workers N] [--cases N] [--backend NAME]

Runs the default run once to warm numba's on-disk JIT cache (not timed), then times it serially
and with pytest-xdist (``-n N``, default 2) and prints wall time and cases per second for each.
The goal (issue 5): the whole default run (all operators, all levels, both data types, validation,
numeric and metamorphic items) within 2 minutes on 2 cores with a warm cache. Wall time includes
interpreter start-up and case generation, because that is what a user waits for.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_once(backend: str, cases: int | None, report: Path, extra: list[str]) -> tuple[float, dict[str, int]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "dmlconform.cli", "run", "--backend", backend, "--report", str(report)]
    if cases is not None:
        cmd += ["--cases", str(cases)]
    if extra:
        cmd += ["--", *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        sys.exit(f"bench: run failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    summary = json.loads((report / "results.json").read_text())["summary"]
    return wall, summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="reference")
    ap.add_argument("--cases", type=int, default=None, help="cases per group (default: the run's default)")
    ap.add_argument("--workers", type=int, default=2, help="pytest-xdist workers for the parallel figure")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run_once(args.backend, args.cases, root / "warm", [])
        for label, extra in (("serial", []), (f"-n {args.workers}", ["-n", str(args.workers)])):
            wall, s = run_once(args.backend, args.cases, root / label.replace(" ", ""), extra)
            print(
                f"{args.backend:>10} {label:>6}: {s['total']} cases in {wall:6.1f} s = {s['total'] / wall:7.1f} cases/s "
                f"({s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
