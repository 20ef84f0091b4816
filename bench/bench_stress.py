"""Time and peak memory of the stress tier's size cases, per reduction-length band and backend.

    python bench/bench_stress.py                       # modest: MVN1 FLOAT32, cases up to 2^22 elements
    python bench/bench_stress.py --max-elements 67108864 --operators all --dtypes all   # the full tier
    python bench/bench_stress.py --calibrate           # bytes per element, overstated below 2^24:
                                                       # bench/bench_case_memory.py measures the estimate

For each backend (default: reference and numpy) and each band of reduction length n (below 1e3,
1e3 to 1e5, 1e5 to 1e6, 1e6 and up, as in the report), one fresh process runs the band's size
cases (``dmlconform.runner.tiers``: the cases ``--tier stress`` adds to the seeded ones) through
``run_case``, the code path of a real run, and reports the wall time and its peak resident memory
(``getrusage`` max RSS) above its own baseline (measured after a small warm-up case, so the
interpreter, numpy and the numba kernels are not counted). A fresh process per band, because max
RSS only grows. The table also prints the peak per input element of the band's largest case,
which is what each kernel's ``bytes_per_element`` estimates, and each band's worst error/budget and
failures (the figures a reader of a stress run wants first).

Cases that the memory check skips are counted as skipped; set DMLCONFORM_MEMORY_LIMIT to
simulate a smaller machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from dmlconform.tolerance.options import NO_OPTIONS

REPO = Path(__file__).resolve().parent.parent
BANDS = (
    ("below 1e3", 0, 1e3),
    ("1e3 to 1e5", 1e3, 1e5),
    ("1e5 to 1e6", 1e5, 1e6),
    ("1e6 and up", 1e6, 1e300),
)


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def worker(args: argparse.Namespace) -> int:
    """Run one band's size cases against one backend; print one JSON line."""
    from dmlconform.generation.reductions import reduction_size
    from dmlconform.runner import tiers
    from dmlconform.runner.backend_loading import guard_for, open_backend
    from dmlconform.runner.cases import Case, Selection, collect
    from dmlconform.runner.checks import run_case
    from dmlconform.specification.spec import load_spec

    spec = load_spec()
    level = spec.level(args.level)
    _, lo, hi = BANDS[args.band]
    sel = Selection(
        level=level,
        operators=tuple(args.operators),
        data_types=tuple(args.dtypes),
        cases=1,
        kinds=("numeric",),
        tier="stress",
        max_elements=args.max_elements,
    )
    cases = [c for c in collect(spec, sel) if c.size and lo <= reduction_size(c.desc, spec) < hi]
    guard = guard_for(open_backend(args.backend), isolate=False, timeout=0)
    if cases:  # warm-up: JIT caches, imports, the backend's first call
        small = tiers.sized_desc(cases[0].operator, level, 64, dtype=cases[0].data_type, spec=spec)
        run_case(
            Case("numeric", small.operator, level, cases[0].data_type, 0, small, 0, "standard_normal"),
            guard,
            spec,
            NO_OPTIONS,
        )
    base = _rss()
    t0 = time.perf_counter()
    out = {"cases": len(cases), "passed": 0, "failed": 0, "skipped": 0, "worst": None, "failures": []}
    largest = max((c.desc.members[_input(spec, c)].element_count for c in cases), default=0)
    for case in cases:
        r = run_case(case, guard, spec, NO_OPTIONS)
        out[r.status if r.status in ("passed", "failed", "skipped") else "failed"] += 1
        ratio = _ratio(r.errors or {})
        if ratio is not None and (out["worst"] is None or ratio > out["worst"][0]):
            out["worst"] = [ratio, case.id]
        if r.status == "failed":
            out["failures"].append(f"{case.id} [{case.regime}]: {(r.message or '')[:160]}")
        if r.status == "skipped" and "memory" in (r.message or ""):
            out["failures"].append(f"{case.id}: skipped, {r.message}")
    out["seconds"] = time.perf_counter() - t0
    out["peak_over_base"] = max(_rss() - base, 0)
    out["largest_elements"] = largest
    print(json.dumps(out))
    return 0


def _ratio(errors: dict) -> float | None:
    """The worst element's error / budget: ``errors.ratio`` where the tolerance model reports
    it, else from the worst element (JSON spells infinities as strings)."""
    if isinstance(errors.get("ratio"), int | float):
        return float(errors["ratio"])
    w = errors.get("worst") or {}
    try:
        err, allowed = float(w["abs"]), float(w["budget_abs"])
    except (KeyError, TypeError, ValueError):
        return None
    if err == 0 or allowed == float("inf"):
        return 0.0
    return err / allowed if allowed > 0 else float("inf")


def _input(spec, case) -> str:
    return spec.operator(case.operator).semantics["input"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", nargs="+", default=["reference", "numpy"])
    ap.add_argument("--operators", nargs="+", default=["MEAN_VARIANCE_NORMALIZATION1"], help="or: all")
    ap.add_argument("--dtypes", nargs="+", default=["FLOAT32"], help="or: all")
    ap.add_argument(
        "--max-elements", type=int, default=2**22, help="largest size case (the tier's own: 2^26)"
    )
    ap.add_argument("--level", default="6_4")
    ap.add_argument("--bands", nargs="+", type=int, default=[0, 1, 2, 3], help="band indexes 0..3")
    ap.add_argument(
        "--calibrate",
        action="store_true",
        help="print peak bytes per element of each band's largest case (below 2^24 elements glibc keeps "
        "freed tensors, so this overstates; bench/bench_case_memory.py measures the kernels' bytes_per_element)",
    )
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--band", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--backend", default="numpy", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    from dmlconform.specification.spec import load_spec

    spec = load_spec()
    ops = sorted(spec.operators) if args.operators == ["all"] else args.operators
    dtypes = ["FLOAT32", "FLOAT16"] if args.dtypes == ["all"] else args.dtypes
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    print(
        f"stress-tier size cases: {', '.join(ops)}; {', '.join(dtypes)}; up to {args.max_elements:,} elements"
    )
    print(
        f"{'backend':>10} {'band (n)':>12} {'cases':>5} {'time s':>8} {'peak MiB':>9} {'B/elem':>7} {'worst err/budget':>17} failed skipped"
    )
    total = {}
    for backend in args.backends:
        for b in args.bands:
            cmd = [sys.executable, __file__, "--worker", "--band", str(b), "--backend", backend]
            cmd += ["--operators", *ops, "--dtypes", *dtypes, "--max-elements", str(args.max_elements)]
            cmd += ["--level", args.level]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{backend:>10} {BANDS[b][0]:>12}: worker failed: {proc.stderr.strip()[-400:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            if not r["cases"]:
                continue
            per = r["peak_over_base"] / r["largest_elements"] if r["largest_elements"] else 0.0
            worst = f"{r['worst'][0]:.4g}" if r["worst"] else "-"
            print(
                f"{backend:>10} {BANDS[b][0]:>12} {r['cases']:>5} {r['seconds']:>8.1f} "
                f"{r['peak_over_base'] / 2**20:>9.0f} {per:>7.0f} {worst:>17} {r['failed']:>6} {r['skipped']:>7}"
            )
            total[backend] = total.get(backend, 0.0) + r["seconds"]
            if r["worst"]:
                print(f"{'':>12}worst: {r['worst'][1]}")
            for line in r["failures"][:12]:
                print(f"{'':>12}{line}")
            if args.calibrate and r["worst"]:
                print(
                    f"{'':>12}largest case {r['largest_elements']:,} elements: {per:.0f} bytes/element above baseline"
                )
    for backend, seconds in total.items():
        print(f"{backend:>10} total {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
