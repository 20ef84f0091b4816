"""Benchmark the reference executor against the memory-copy floor (and PyTorch CPU if present).

    python bench/bench_reference.py [--small] [--repeat N]

Runs, in one process, MEAN_VARIANCE_NORMALIZATION1 over axes {2, 3} and
BATCH_NORMALIZATION_TRAINING with a per-channel Scale (1, C, 1, 1) on a FLOAT32 (8, 64, 256, 256)
tensor (``--small``: (2, 16, 64, 64)), a parallel copy of the same tensor as the floor, and
torch instance_norm / batch_norm; prints the median time of each and its ratio to the copy.
The reference runs twice: allocating fresh outputs per call (as torch does) and writing into
outputs preallocated once (``execute(..., out=...)``): the page faults of a fresh 128 MiB output
cost about as much as the copy itself. The first call of each is a warm-up (numba loads or
compiles its kernel then).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from dmlconform.desc import parse_desc
from dmlconform.reference import execute
from dmlconform.reference.kernels import parallel_copy


def median_time(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="a (2, 16, 64, 64) tensor for a quick run")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    shape = (2, 16, 64, 64) if args.small else (8, 64, 256, 256)
    c = shape[1]
    t = lambda s: {"DataType": "FLOAT32", "Sizes": list(s)}  # noqa: E731
    mvn1 = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": t(shape),
                "OutputTensor": t(shape),
                "Axes": [2, 3],
                "NormalizeVariance": True,
            },
        }
    )
    stat = (1, c, 1, 1)
    bnt = parse_desc(
        {
            "type": "BATCH_NORMALIZATION_TRAINING",
            "desc": {
                "InputTensor": t(shape),
                "ScaleTensor": t(stat),
                "BiasTensor": t(stat),
                "OutputTensor": t(shape),
                "OutputMeanTensor": t(stat),
                "OutputVarianceTensor": t(stat),
                "Epsilon": 1e-5,
            },
        }
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    scale = rng.standard_normal(stat, dtype=np.float32)
    bias = rng.standard_normal(stat, dtype=np.float32)
    dst = np.empty_like(x)
    results: dict[str, float] = {}
    results["copy (numba prange)"] = median_time(lambda: parallel_copy(x, dst), args.repeat)
    results["np.copyto"] = median_time(lambda: np.copyto(dst, x), args.repeat)
    mvn1_in = {"InputTensor": x}
    bn_in = {"InputTensor": x, "ScaleTensor": scale, "BiasTensor": bias}
    for name, desc, inputs in (("MVN1 axes {2,3}", mvn1, mvn1_in), ("BATCH_NORM_TRAINING", bnt, bn_in)):
        results[f"reference {name}"] = median_time(lambda d=desc, i=inputs: execute(d, i), args.repeat)
        # execute(out=...): outputs preallocated once, as a caller running many cases does
        out = {k: np.empty_like(v) for k, v in execute(desc, inputs).items()}
        results[f"reference {name}, out= reused"] = median_time(
            lambda d=desc, i=inputs, o=out: execute(d, i, out=o), args.repeat
        )
    try:
        import torch

        tx = torch.from_numpy(x)
        tw, tb = torch.from_numpy(scale.reshape(c)), torch.from_numpy(bias.reshape(c))
        f = torch.nn.functional
        with torch.no_grad():
            results["torch instance_norm"] = median_time(lambda: f.instance_norm(tx, eps=1e-5), args.repeat)
            results["torch batch_norm (training)"] = median_time(
                lambda: f.batch_norm(tx, None, None, tw, tb, training=True, eps=1e-5), args.repeat
            )
        results_note = f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    except ImportError:
        results_note = "torch not installed"
    floor = min(results["copy (numba prange)"], results["np.copyto"])
    mib = x.nbytes / 2**20
    print(f"FLOAT32 {shape} ({mib:.0f} MiB in + {mib:.0f} MiB out), median of {args.repeat}; {results_note}")
    for name, sec in results.items():
        print(f"  {name:42s} {sec * 1e3:9.2f} ms   {sec / floor:6.2f}x copy")


if __name__ == "__main__":
    main()
