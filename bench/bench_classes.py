"""The accuracy classes in both directions: which class each summation order meets, at which n.

    python bench/bench_classes.py [--sizes 2,17,4097,65537,1048576,4194304] [--seeds 2]
                                  [--operators MVN1,BNT] [--regimes large_offset,...]

Not a speed benchmark: for MEAN_VARIANCE_NORMALIZATION1 (one to eight slices of n) and
BATCH_NORMALIZATION_TRAINING (three channels of n), FLOAT32, on each regime that applies, every
kernel of :data:`KERNELS` (the gpu-style backend's orders: GPU threads, SIMD lanes combined in
order or pairwise, one sequential loop, Welford) is judged under the class it claims and the
next tighter one, and two broken answers under every class: the numpy backend's outputs times
1 + 2^-22 (4 ULP) on exact-statistics data, and times 1 + 2^-8 on large-offset data. It prints
one line per operator x n x regime x seed and a summary per kernel: the cases it meets its
class on (it must meet all), the tightest class it met on each, and, per class, the 4-ULP
answers failed. Memory: one case of n = 2^22 holds about 200 MB. ``--scales``: only the numpy
answer scaled by 1 + 2^-8, 1 - 2^-8 and 1 + 2^-6 on large-offset data under the default model,
MVN1 at n = 2 to 2^22 and BNT over [4, 3, 1023, 1025] (docs/verdicts.md's sharpness table).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from typing import Any

import numpy as np

import dmlconform as dc
from dmlconform.backends.broken import OutputScaled, OutputScaledFourUlps
from dmlconform.backends.gpu_style import GpuStyleBackend
from dmlconform.backends.numpy_backend import NumpyBackend
from dmlconform.generation.data import RegimeNotApplicable, make_inputs, regimes_for
from dmlconform.report.classes import LADDER
from dmlconform.specification.spec import load_spec
from dmlconform.tolerance import compare
from dmlconform.tolerance.options import ToleranceOptions

SPEC = load_spec()

#: name -> (the backend, the class its summation order is claimed to meet)
KERNELS: dict[str, tuple[Any, str]] = {
    "numpy (pairwise)": (NumpyBackend(), "tight"),
    "32 threads, strided, tree": (GpuStyleBackend(threads="32"), "default"),
    "1024 threads, contiguous, 4 groups": (
        GpuStyleBackend(threads="1024", chains="contiguous", groups="4"),
        "default",
    ),
    "4 lanes, in order": (GpuStyleBackend(threads="4", combine="sequential"), "lanes"),
    "8 lanes, in order": (GpuStyleBackend(threads="8", combine="sequential"), "lanes"),
    "16 lanes, tree": (GpuStyleBackend(threads="16"), "lanes"),
    "16 lanes, contiguous, in order": (
        GpuStyleBackend(threads="16", chains="contiguous", combine="sequential"),
        "lanes",
    ),
    "one loop": (GpuStyleBackend(threads="1"), "sequential"),
    "32 threads, Welford": (GpuStyleBackend(threads="32", variance="welford"), "lenient"),
}
BROKEN = {"4 ULP": OutputScaledFourUlps(), "2^-8": OutputScaled()}
REGIMES = (
    "standard_normal",
    "large_offset",
    "constant_slices",
    "long_reduction",
    "exact_statistics",
    "all_negative",
)


def mvn1(n: int) -> dc.OperatorDesc:
    slices = max(1, min(8, (1 << 20) // n))
    t = {"DataType": "FLOAT32", "Sizes": [1, slices, 1, n]}
    c = {"DataType": "FLOAT32", "Sizes": [1, slices, 1, 1]}
    desc = {"InputTensor": t, "OutputTensor": t, "ScaleTensor": c, "BiasTensor": c, "Axes": [2, 3]}
    return dc.parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": desc | {"NormalizeVariance": True}})


def bnt(n: int) -> dc.OperatorDesc:
    return bnt_shape([n, 3, 1, 1])


OPERATORS = {"MVN1": mvn1, "BNT": bnt}


def judge(desc: dc.OperatorDesc, got: dict, ref: dict, inputs: dict, model: str) -> tuple[bool, float]:
    c = compare(desc, got, ref, inputs, SPEC, ToleranceOptions(model=model))
    worst = max(
        [o.ratio for o in c.outputs.values()]
        + [max((o.aggregate or {0: 0.0}).values()) for o in c.outputs.values()]
    )
    return c.passed, worst


SCALES = {"1 + 2^-8": 1.0 + 2.0**-8, "1 - 2^-8": 1.0 - 2.0**-8, "1 + 2^-6": 1.0 + 2.0**-6}


def scales(seeds: int) -> None:
    """The numpy answer scaled by each of :data:`SCALES` on large-offset data, default model:
    per n the verdicts and worst figures (element ratio or aggregate) of the seeds."""
    cases = [(f"MVN1 n={n}", mvn1_plain(n)) for n in (2, 17, 256, 4097, 65537, 2**20 + 1, 2**22)]
    cases.append(("BNT [4, 3, 1023, 1025]", bnt_shape([4, 3, 1023, 1025])))
    for name, desc in cases:
        row = []
        for label, factor in SCALES.items():
            verdicts = []
            for seed in range(seeds):
                inputs = make_inputs(desc, "large_offset", seed, spec=SPEC)
                ref = dc.execute(desc, inputs)
                got = NumpyBackend().execute(desc, inputs)
                main = "OutputTensor"
                got[main] = (got[main].astype(np.float64) * factor).astype(np.float32)
                ok, worst = judge(desc, got, ref, inputs, "default")
                verdicts.append(f"{'passes' if ok else 'fails'} {worst:.3g}")
            row.append(f"{label}: " + ", ".join(verdicts))
        print(f"{name}: " + " | ".join(row), flush=True)


def mvn1_plain(n: int) -> dc.OperatorDesc:
    """MVN1 without Scale and Bias over up to 4 slices of n (at most 2^16 elements beside n)."""
    t = {"DataType": "FLOAT32", "Sizes": [1, max(1, min(4, (1 << 16) // n)), 1, n]}
    desc = {"InputTensor": t, "OutputTensor": t, "Axes": [2, 3], "NormalizeVariance": True}
    return dc.parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": desc})


def bnt_shape(sizes: list[int]) -> dc.OperatorDesc:
    x = {"DataType": "FLOAT32", "Sizes": sizes}
    c = {"DataType": "FLOAT32", "Sizes": [1, sizes[1], 1, 1]}
    members = {"InputTensor": x, "ScaleTensor": c, "BiasTensor": c, "OutputTensor": x}
    members |= {"OutputMeanTensor": c, "OutputVarianceTensor": c, "Epsilon": 1e-5}
    return dc.parse_desc({"type": "BATCH_NORMALIZATION_TRAINING", "desc": members})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2,3,17,256,4097,65537,1048576,4194304")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--operators", default="MVN1,BNT")
    ap.add_argument("--regimes", default=",".join(REGIMES))
    ap.add_argument("--kernels", default="", help="names of KERNELS, comma-separated (default all)")
    ap.add_argument("--scales", action="store_true", help="only the scaled answers on offset data (SCALES)")
    args = ap.parse_args()
    if args.scales:
        scales(args.seeds)
        return 0
    kernels = {k: v for k, v in KERNELS.items() if not args.kernels or k in args.kernels.split(",")}
    met: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    tightest: dict[tuple[str, int], str] = {}
    broken: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    bad: list[str] = []
    for op in args.operators.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            desc = OPERATORS[op](n)
            for regime in args.regimes.split(","):
                if regime not in regimes_for(desc, SPEC):
                    continue
                for seed in range(args.seeds):
                    try:
                        inputs = make_inputs(desc, regime, seed, spec=SPEC)
                    except RegimeNotApplicable:
                        continue
                    t0 = time.perf_counter()
                    ref = dc.execute(desc, inputs)
                    line = [f"{op} n={n} {regime} seed {seed}:"]
                    for name, (backend, cls) in kernels.items():
                        got = backend.execute(desc, inputs)
                        at = LADDER.index(cls)
                        ok, ratio = judge(desc, got, ref, inputs, cls)
                        met[name][0] += ok
                        met[name][1] += 1
                        tight = cls if ok else "none"
                        for model in reversed(LADDER[:at]):
                            if model == "fp16-statistics":
                                continue  # FLOAT16 only: the same as default here
                            if not judge(desc, got, ref, inputs, model)[0]:
                                break
                            tight = model
                        key = (name, n)
                        if rank(tight) > rank(tightest.get(key, "tight")):
                            tightest[key] = tight
                        tightest.setdefault(key, tight)
                        line.append(f"{name} {cls} {'ok' if ok else 'FAIL'} {ratio:.2g} (tightest {tight})")
                        if not ok:
                            bad.append(f"{line[0]} {name} fails {cls} ({ratio:.3g})")
                    for label, backend in BROKEN.items():
                        if (label == "4 ULP") != (regime == "exact_statistics") or (
                            label == "2^-8" and regime != "large_offset"
                        ):
                            continue
                        got = backend.execute(desc, inputs)
                        for model in ("tight", "default", "lanes", "sequential", "lenient"):
                            ok, ratio = judge(desc, got, ref, inputs, model)
                            broken[(label, model)][0] += not ok
                            broken[(label, model)][1] += 1
                            line.append(f"{label} {model} {'passes' if ok else 'fails'} {ratio:.3g}")
                    print(" | ".join(line) + f" [{time.perf_counter() - t0:.1f} s]", flush=True)
    print("\nkernel: cases meeting its class; the weakest of the tightest classes met per n")
    for name, (_, cls) in kernels.items():
        sizes = ", ".join(f"{n}: {tightest[(k, n)]}" for (k, n) in sorted(tightest) if k == name)
        print(f"  {name} ({cls}): {met[name][0]} / {met[name][1]}; {sizes}")
    print("broken answers failed, per class:")
    for (label, model), (failed, total) in sorted(broken.items()):
        print(f"  {label} under {model}: {failed} / {total} failed")
    for line in bad:
        print("NOT MET:", line)
    return 1 if bad else 0


def rank(cls: str) -> int:
    return LADDER.index(cls) if cls in LADDER else len(LADDER)


if __name__ == "__main__":
    sys.exit(main())
