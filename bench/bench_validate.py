"""Validations per second over a few thousand varied descs (legal and illegal, all operators and
levels), on one core. Goal (issue 2): at least 20,000 per second.

    python bench/bench_validate.py [--descs 4000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from dmlconform.generation.illegal import illegal_descs
from dmlconform.generation.legal import legal_descs
from dmlconform.specification.spec import load_spec
from dmlconform.specification.validate import validate


def corpus(n: int) -> list[tuple[object, str]]:
    spec = load_spec()
    groups = [(op.name, lv.name) for op in spec.operators.values() for lv in spec.levels_from(op)]
    per = max(1, n // (2 * len(groups)))
    out: list[tuple[object, str]] = []
    for op, lv in groups:
        out += [(d, lv) for d in legal_descs(op, lv, seed=1, count=per, spec=spec)]
        out += [(d, lv) for d, _ in illegal_descs(op, lv, seed=1, count=per, spec=spec)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--descs", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    items = corpus(args.descs)
    spec = load_spec()
    for d, lv in items[:50]:  # warm the per-level rule caches
        validate(d, lv, spec)
    rates = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for d, lv in items:
            validate(d, lv, spec)
        rates.append(len(items) / (time.perf_counter() - t0))
    illegal = sum(1 for d, lv in items if validate(d, lv, spec))
    print(f"descs: {len(items)} ({illegal} illegal), runs: {args.repeat}")
    print(
        f"validations/s: median {statistics.median(rates):,.0f}  (min {min(rates):,.0f}, max {max(rates):,.0f})"
    )
    print(f"goal 20,000/s: {'met' if statistics.median(rates) >= 20000 else 'NOT met'}")


if __name__ == "__main__":
    main()
