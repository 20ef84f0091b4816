"""Cases per second of the default ``dmlconform run`` against the reference backend.

    python bench/bench_run.py [--workers N] [--cases N] [--backend NAME]

Times the default run (all operators, all levels, both data types, validation, numeric and
metamorphic items) three ways and prints wall time and cases per second for each: cold (serial,
``NUMBA_CACHE_DIR`` pointed at a new, empty directory, so any JIT compilation is paid as on a
fresh install), then warm on that filled cache, serially and with pytest-xdist (``-n N``,
default 2). Goals: the cold run within 60 s on 2 cores (issue 14: the README's main command
from a fresh install), the warm run within 2 minutes (issue 5). Wall time includes interpreter
start-up and case generation, because that is what a user waits for.
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


def run_once(
    backend: str, cases: int | None, report: Path, extra: list[str], cache: Path
) -> tuple[float, dict[str, int]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["NUMBA_CACHE_DIR"] = str(cache)
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
        cache = root / "numba-cache"
        cache.mkdir()
        runs = (
            ("cold, serial", []),
            ("warm, serial", []),
            (f"warm, -n {args.workers}", ["-n", str(args.workers)]),
        )
        for i, (label, extra) in enumerate(runs):
            wall, s = run_once(args.backend, args.cases, root / f"report{i}", extra, cache)
            print(
                f"{args.backend:>11} {label:>13}: {s['total']} cases in {wall:6.1f} s = "
                f"{s['total'] / wall:6.1f} cases/s ({s['passed']} passed, {s['failed']} failed, "
                f"{s['skipped']} skipped)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
