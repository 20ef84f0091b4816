"""Shrink one failure of every broken backend and show what it became.

    python bench/bench_shrink.py [--max-time S] [--only NAME ...]

For each backend in ``dmlconform.backends.broken``: run its cases in a run's order (numeric and
metamorphic, 2 per group, the default tier; inputs up to 5000 elements, or, for the mutants that
only long reductions catch, MEAN_VARIANCE_NORMALIZATION1 with its long-reduction cases) until
the first failure (``--min-elements N``: the first of at least N input elements), shrink it (``dmlconform.shrink``) within ``--max-time`` seconds, and check the
result: it must fail the same way on the broken backend and pass on the reference. Prints the
original and shrunk sizes (input elements, dimensions), the steps and the time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dmlconform.backends import broken  # noqa: E402
from dmlconform.backends.reference import ReferenceBackend  # noqa: E402
from dmlconform.runner.cases import Selection, collect  # noqa: E402
from dmlconform.runner.checks import run_case  # noqa: E402
from dmlconform.runner.guard import ThreadGuard, backend_info  # noqa: E402
from dmlconform.runner.tiers import elements_and_length  # noqa: E402
from dmlconform.shrink.search import shrink  # noqa: E402
from dmlconform.shrink.signature import same_failure  # noqa: E402
from dmlconform.specification.spec import load_spec  # noqa: E402
from dmlconform.tolerance.options import NO_OPTIONS

ONLY_BIG = {"SequentialSumStatistics", "Float16AccumulationAtLongReductions"}


def mutants() -> list[str]:
    return sorted(
        n for n, o in vars(broken).items() if isinstance(o, type) and o.__module__ == broken.__name__
    )


def first_failure(name: str, spec, min_elements: int = 0):  # type: ignore[no-untyped-def]
    backend = getattr(broken, name)()
    guard = ThreadGuard(backend, 120)
    claimed = backend_info(backend).feature_level
    level = spec.level(claimed) if claimed else spec.levels[-1]
    big = name in ONLY_BIG
    sel = Selection(
        level=level,
        operators=("MEAN_VARIANCE_NORMALIZATION1",) if big else (),
        kinds=("numeric",) if big else ("numeric", "metamorphic"),
        cases=2,
        max_elements=None if big or min_elements else 5000,
    )
    t0 = time.perf_counter()
    for n, case in enumerate(collect(spec, sel), 1):
        if min_elements and (elements_and_length(case.desc, spec)[0] or 0) < min_elements:
            continue
        result = run_case(case, guard, spec, NO_OPTIONS)
        if result.status == "failed":
            return guard, case, result, n, time.perf_counter() - t0
    return guard, None, None, 0, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-time", type=float, default=60.0, help="shrink time per failure (default 60)")
    ap.add_argument(
        "--min-elements",
        type=int,
        default=0,
        metavar="N",
        help="shrink the first failure of at least N input elements",
    )
    ap.add_argument("--only", nargs="+", metavar="NAME", help="these broken backends only")
    args = ap.parse_args()
    spec = load_spec()
    reference = ThreadGuard(ReferenceBackend(), 120)
    print(
        f"{'broken backend':38s} {'original':>18s} {'shrunk':>14s} {'steps':>5s} {'run':>5s} {'time':>7s}  replay"
    )
    for name in args.only or mutants():
        guard, case, result, n, _ = first_failure(name, spec, args.min_elements)
        if case is None:
            print(f"{name:38s} no failure found")
            continue

        def run(c, i, guard=guard):  # type: ignore[no-untyped-def]
            return run_case(c, guard, spec, NO_OPTIONS, inputs=i)

        found = shrink(case, result.inputs if case.kind != "validation" else None, run, spec, args.max_time)
        data = found.inputs if case.kind != "validation" else None
        again = run_case(found.case, guard, spec, NO_OPTIONS, inputs=data)
        ref = run_case(found.case, reference, spec, NO_OPTIONS, inputs=data)
        verdict = ("fails" if same_failure(found.signature, found.case, again) else "DOES NOT FAIL") + (
            ", reference passes" if ref.status == "passed" else f", reference {ref.status.upper()}"
        )
        (e0, d0), (e1, d1) = found.original_size, found.size
        print(
            f"{name:38s} {e0:>9d} el {d0:>2d} dims {e1:>6d} el {d1:>2d} d {len(found.steps):>5d} "
            f"{found.tried:>5d} {found.seconds:>6.1f}s  {verdict} ({found.stopped}; {case.kind}, "
            f"{found.signature})"
        )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
