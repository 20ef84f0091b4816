"""Peak memory of one numeric case per operator: what each kernel's ``bytes_per_element`` estimates.

    python bench/bench_case_memory.py [--backend numpy] [--max-elements 16777216]
        [--dtypes FLOAT32 FLOAT16] [--regime large_offset] [--operators ...]

For each operator and data type, one fresh process runs (through ``run_case``, the path of a
real run) the largest stress-tier size case up to ``--max-elements``: among those, the one with
the longest reduction, or with ``--regime`` the one with the most members and a fused activation,
on that regime. It prints the peak resident memory (``getrusage`` max RSS) above the process's
resident memory just before the case, per input element, and the kernel that served it
(each ``dmlconform/kernels/`` module holds its kernel's worst figure plus 25%). Measure at 2^24 elements or
more: below that, glibc keeps freed tensors in its heap and the figure measures the allocator.
"""

from __future__ import annotations

import argparse
import gc
import resource
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from dmlconform.tolerance.options import NO_OPTIONS

REPO = Path(__file__).resolve().parent.parent


def _has_activation(case) -> bool:  # type: ignore[no-untyped-def]
    act = case.desc.to_dict()["desc"].get("FusedActivation")
    return bool(act)


def worker(backend: str, max_elements: int, dtype: str, operator: str, regime: str | None) -> None:
    from dmlconform import kernels
    from dmlconform.generation.reductions import reduction_size
    from dmlconform.runner import tiers
    from dmlconform.runner.backend_loading import guard_for, open_backend
    from dmlconform.runner.cases import Case, Selection, collect
    from dmlconform.runner.checks import run_case
    from dmlconform.specification.spec import load_spec

    spec = load_spec()
    level = spec.level("6_4")
    sel = Selection(
        level=level, operators=(operator,), data_types=(dtype,), cases=1, kinds=("numeric",),
        tier="stress", max_elements=max_elements,
    )  # fmt: skip
    main = spec.operator(operator).semantics["input"]
    sized = [c for c in collect(spec, sel) if c.size]
    n = max(c.desc.members[main].element_count for c in sized)
    largest = [c for c in sized if c.desc.members[main].element_count == n]
    if regime:
        case = max(
            largest, key=lambda c: (_has_activation(c), sum(v is not None for v in c.desc.members.values()))
        )
        case = replace(case, regime=regime)
    else:
        case = max(largest, key=lambda c: reduction_size(c.desc, spec))
    guard = guard_for(open_backend(backend), isolate=False, timeout=0)
    warm = tiers.sized_desc(operator, level, 1 << 17, dtype=dtype, spec=spec)
    run_case(Case("numeric", operator, level, dtype, 0, warm, 0, "standard_normal"), guard, spec, NO_OPTIONS)
    gc.collect()
    before = int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize()
    result = run_case(case, guard, spec, NO_OPTIONS)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        f"{operator:36s} {dtype:8s} {case.regime:16s} n={n:>10,} {(peak - before) / n:6.1f} B/el  "
        f"{kernels.kernel_name(case.desc, spec):20s} {result.status}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--max-elements", type=int, default=1 << 24)
    ap.add_argument("--dtypes", nargs="+", default=["FLOAT32", "FLOAT16"])
    ap.add_argument("--regime", default=None)
    ap.add_argument("--operators", nargs="+", default=None)
    ap.add_argument("--worker", nargs=2, metavar=("DTYPE", "OPERATOR"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.backend, a.max_elements, a.worker[0], a.worker[1], a.regime)
        return
    from dmlconform.specification.spec import load_spec

    ops = a.operators or list(load_spec().operators)
    print(f"backend {a.backend}, largest stress case up to {a.max_elements:,} input elements")
    for op in ops:
        for dt in a.dtypes:
            cmd = [sys.executable, __file__, "--backend", a.backend, "--max-elements", str(a.max_elements)]
            cmd += ["--worker", dt, op] + (["--regime", a.regime] if a.regime else [])
            done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            print(
                done.stdout.strip() or f"{op} {dt}: failed: {done.stderr.strip().splitlines()[-1:]}",
                flush=True,
            )


if __name__ == "__main__":
    main()
