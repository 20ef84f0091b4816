"""Which legal LP_NORMALIZATION descs DirectML's CompileOperator refuses: the experiment behind
finding F12's claim (dmlconform/releases/findings.yaml).

    python cases/directml/lp-compile-refusals/experiment.py [--version 1.15.4 ...] [--max-rank 5]
        [--max-size 6] [--data-type FLOAT32 ...]

Every packed shape of rank 1 to --max-rank with sizes 1 to --max-size, every Axis, P 1 and 2, in
each data type (default FLOAT32 and FLOAT16), then FLOAT32 shapes of rank 2 to 4 with sizes 1 to 4
whose input or output (or both) is padded or permuted, are put to CreateOperator and
CompileOperator. Each answer is held against F12's claim (stage compile, its ``when``): the table
counts, per release, data type, layout and P, the descs, those each stage refused, those the
claim covers, and the two ways they can differ: a refusal the claim does not cover (undecided in
a sweep) and a claimed desc that compiled. The table for (2, 3, 4, 5) and (2, 3, 4, 6) follows.
Exit status 1 when a legal desc is refused outside the claim (or by CreateOperator at all).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import Counter
from collections.abc import Iterator

from dmlconform.backends.directml.backend import DirectMLBackend
from dmlconform.releases import acceptance as acc
from dmlconform.releases.findings import registry
from dmlconform.specification.desc import OperatorDesc, parse_desc
from dmlconform.specification.spec import load_spec
from dmlconform.specification.validate import validate

SPEC = load_spec()
SHAPES = [(2, 3, 4, 5), (2, 3, 4, 6)]


def lp(sizes: tuple[int, ...], axis: int, p: int, data_type: str, strides=(None, None)) -> OperatorDesc:
    tensors = []
    for st in strides:
        t = {"DataType": data_type, "Sizes": list(sizes)}
        if st is not None:
            t["Strides"] = list(st)
        tensors.append(t)
    return parse_desc(
        {
            "type": "DML_OPERATOR_LP_NORMALIZATION",
            "desc": {
                "InputTensor": tensors[0],
                "OutputTensor": tensors[1],
                "Axis": axis,
                "Epsilon": 1e-5,
                "P": p,
            },
        }
    )


def packed(sizes: tuple[int, ...], order: list[int]) -> list[int]:
    """Packed strides with the dimensions laid out in ``order`` (outermost first)."""
    strides, step = [0] * len(sizes), 1
    for d in reversed(order):
        strides[d] = step
        step *= sizes[d]
    return strides


def padded(sizes: tuple[int, ...]) -> list[int]:
    """Strides with one element of padding after every run but the outermost."""
    strides, step = [0] * len(sizes), 1
    for d in reversed(range(len(sizes))):
        strides[d] = step
        step = step * sizes[d] + (1 if d > 0 else 0)
    return strides


def layouts(sizes: tuple[int, ...]) -> dict[str, tuple[list[int] | None, list[int] | None]]:
    reverse = packed(sizes, list(reversed(range(len(sizes)))))
    return {
        "padded input": (padded(sizes), None),
        "padded output": (None, padded(sizes)),
        "permuted input": (reverse, None),
        "permuted output": (None, reverse),
        "both permuted": (reverse, reverse),
    }


def probes(
    max_rank: int, max_size: int, data_types: list[str]
) -> Iterator[tuple[str, str, int, OperatorDesc]]:
    """(data type, layout, P, desc) of every desc the experiment asks about."""
    for dt in data_types:
        for rank in range(1, max_rank + 1):
            for sizes in itertools.product(range(1, max_size + 1), repeat=rank):
                for p in (1, 2):
                    for axis in range(rank):
                        yield dt, "packed", p, lp(sizes, axis, p, dt)
    for rank in (2, 3, 4):
        for sizes in itertools.product(range(1, 5), repeat=rank):
            for name, strides in layouts(sizes).items():
                for p in (1, 2):
                    for axis in range(rank):
                        yield "FLOAT32", name, p, lp(sizes, axis, p, "FLOAT32", strides)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="append", help="DirectML release (repeatable; default 1.15.4)")
    parser.add_argument("--max-rank", type=int, default=5, help="packed shapes up to this rank (default 5)")
    parser.add_argument("--max-size", type=int, default=6, help="sizes 1 to this (default 6)")
    parser.add_argument(
        "--data-type", action="append", help="data types of the packed shapes (default FLOAT32 and FLOAT16)"
    )
    args = parser.parse_args()
    versions = args.version or ["1.15.4"]
    data_types = args.data_type or ["FLOAT32", "FLOAT16"]
    (claim,) = [c for c in registry().get("F12").acceptance if c.verdict == acc.REFUSED]
    assert claim.stage == acc.COMPILE and claim.when is not None
    outside = 0
    for version in versions:
        backend = DirectMLBackend(version=version)
        try:
            level = backend.feature_level
            print(f"DirectML {version} ({level}): F12 claims stage {claim.stage}, {claim.operators[0]}")
            counts: Counter[tuple[str, str, int, str]] = Counter()
            examples: dict[str, str] = {}
            for dt, layout, p, desc in probes(args.max_rank, args.max_size, data_types):
                if validate(desc, level, SPEC):
                    continue  # the claim is about legal descs only
                answer = acc.ask(backend.check, desc)
                claimed = claim.when.holds(desc, dt)
                key = (dt, layout, p)
                counts[(*key, "descs")] += 1
                counts[(*key, "claimed")] += claimed
                if answer.verdict == acc.REFUSED:
                    counts[(*key, answer.stage or "?")] += 1
                    if answer.stage != claim.stage or not claimed:
                        counts[(*key, "outside")] += 1
                        examples.setdefault("outside", _label(desc))
                elif answer.verdict == acc.ACCEPTED:
                    counts[(*key, "claimed, compiled")] += claimed
                else:
                    counts[(*key, answer.verdict)] += 1
                    examples.setdefault(answer.verdict, f"{_label(desc)}: {acc.describe(answer)}")
            print(
                f"  {'data type':<9} {'layout':<16} {'P':>1} {'descs':>7} {'create':>7} {'compile':>7} "
                f"{'claimed':>7} {'refused outside':>15} {'claimed, compiled':>17} {'other':>5}"
            )
            for dt, layout, p in sorted({k[:3] for k in counts}, key=lambda k: (k[0] != "FLOAT32", k)):
                c = {
                    what: counts[(dt, layout, p, what)] for what in ("descs", "create", "compile", "claimed")
                }
                other = counts[(dt, layout, p, acc.FAILED)] + counts[(dt, layout, p, acc.ERROR)]
                print(
                    f"  {dt:<9} {layout:<16} {p:>1} {c['descs']:>7} {c['create']:>7} {c['compile']:>7} "
                    f"{c['claimed']:>7} {counts[(dt, layout, p, 'outside')]:>15} "
                    f"{counts[(dt, layout, p, 'claimed, compiled')]:>17} {other:>5}"
                )
            for what, label in examples.items():
                print(f"  e.g. {what}: {label}")
            outside += sum(n for k, n in counts.items() if k[3] == "outside")
            for sizes in SHAPES:
                for p in (1, 2):
                    said = []
                    for axis in range(len(sizes)):
                        answer = acc.ask(backend.check, lp(sizes, axis, p, "FLOAT32"))
                        said.append(
                            f"Axis {axis} {'compiles' if answer.verdict == acc.ACCEPTED else _short(answer)}"
                        )
                    print(f"  FLOAT32 {sizes} P {p}: " + ", ".join(said))
        finally:
            backend.close()
    return 1 if outside else 0


def _short(answer: acc.Answer) -> str:
    if answer.verdict == acc.REFUSED:
        return f"refused by {acc.STAGE_CALLS.get(answer.stage or '', answer.stage)}"
    return acc.describe(answer)


def _label(desc: OperatorDesc) -> str:
    i, o = desc.members["InputTensor"], desc.members["OutputTensor"]
    return (
        f"{i.data_type} Sizes {list(i.sizes)} Strides {i.strides and list(i.strides)} -> {o.strides and list(o.strides)} "
        f"Axis {desc.members['Axis']} P {desc.members['P']}"
    )


if __name__ == "__main__":
    sys.exit(main())
