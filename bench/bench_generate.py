"""Descs per second of the seeded generators (legal and illegal), one core.

python bench/bench_generate.py [--count N]
"""

from __future__ import annotations

import argparse
import time

from dmlconform.generation.illegal import illegal_descs
from dmlconform.generation.legal import legal_descs
from dmlconform.specification.spec import load_spec


def rate(fn, count: int) -> float:
    start = time.perf_counter()
    n = sum(1 for _ in fn(count))
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000)
    args = parser.parse_args()
    spec = load_spec()
    for op in sorted(spec.operators):
        level = spec.levels[-1].name
        below = spec.levels[spec.level(spec.operators[op].introduced).index].name
        legal = rate(lambda n, op=op, level=level: legal_descs(op, level, count=n, spec=spec), args.count)
        illegal = rate(lambda n, op=op, level=below: illegal_descs(op, level, count=n, spec=spec), args.count)
        print(f"{op:32s} legal@{level} {legal:8.0f}/s   illegal@{below} {illegal:8.0f}/s")


if __name__ == "__main__":
    main()
