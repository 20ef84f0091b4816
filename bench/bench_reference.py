"""Benchmark the reference executor against the memory-copy floor (and PyTorch CPU if present).

    python bench/bench_reference.py [--small] [--repeat N] [--no-torch]

Runs, in one process and round-robin, MEAN_VARIANCE_NORMALIZATION1 over axes {2, 3} and
BATCH_NORMALIZATION_TRAINING with a per-channel Scale (1, C, 1, 1) on a FLOAT32 (8, 64, 256, 256)
tensor (``--small``: (2, 16, 64, 64)), and the floor: a numba copy of the same tensor, split over
the kernel's thread pool in the same chunks (``kernels.parallel_copy``).
Each operator runs twice and is compared with the matching floor: a fresh output per call
against a copy into a fresh array, and writing into outputs preallocated once (``execute(...,
out=...)``) against a copy into a reused array. A fresh output of the reference comes from its
recycled buffers (``reference/buffers.py``): the previous call's dropped output, so it skips the
page faults of new memory that the fresh copy pays (about a third of the copy's time). For
comparison each operator also runs with recycling off, paying them too. The four ratios (goal,
issue 14: <= 1.3) are printed last; torch instance_norm / batch_norm (fresh outputs) are timed
afterwards for comparison (not in the same rounds: their spinning OpenMP threads would slow the
rest). The first call of
each is a warm-up (numba loads or compiles its kernel then).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from dmlconform.kernels import execute
from dmlconform.reference import buffers
from dmlconform.reference.compiled import parallel_copy
from dmlconform.specification.desc import parse_desc


def median_times(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median time of each function, run round-robin (one call of each per round) so that load
    from other processes on a shared machine hits every measurement alike."""
    for fn in fns.values():
        fn()  # warm-up: numba loads (or compiles) its kernel, pages get touched
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def without_recycling(fn: Callable[..., object], *args: object) -> object:
    """``fn`` with the reference's output recycling off: every output is new memory, whose page
    faults the reference then pays as the fresh copy does (shown for comparison)."""
    kept, buffers.POOL_BYTES = buffers.POOL_BYTES, 0
    try:
        return fn(*args)
    finally:
        buffers.POOL_BYTES = kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="a (2, 16, 64, 64) tensor for a quick run")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch lines")
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
    mvn1_in = {"InputTensor": x}
    bn_in = {"InputTensor": x, "ScaleTensor": scale, "BiasTensor": bias}
    mvn1_out = {k: np.empty_like(v) for k, v in execute(mvn1, mvn1_in).items()}
    bn_out = {k: np.empty_like(v) for k, v in execute(bnt, bn_in).items()}
    fns: dict[str, Callable[[], object]] = {
        "copy into a fresh array": lambda: parallel_copy(x, np.empty_like(x)),
        "copy into a reused array": lambda: parallel_copy(x, dst),
        "MVN1 axes {2,3}, fresh output": lambda: execute(mvn1, mvn1_in),
        "MVN1 axes {2,3}, out= reused": lambda: execute(mvn1, mvn1_in, out=mvn1_out),
        "BATCH_NORM_TRAINING, fresh output": lambda: execute(bnt, bn_in),
        "BATCH_NORM_TRAINING, out= reused": lambda: execute(bnt, bn_in, out=bn_out),
        "MVN1 axes {2,3}, fresh, recycling off": lambda: without_recycling(execute, mvn1, mvn1_in),
        "BATCH_NORM_TRAINING, fresh, recycling off": lambda: without_recycling(execute, bnt, bn_in),
    }
    res = median_times(fns, args.repeat)
    # torch afterwards, not in the same rounds: its OpenMP threads keep spinning after each call
    # and would slow whatever runs next on the 2 cores
    note = "torch skipped"
    if not args.no_torch:
        try:
            import torch

            tx = torch.from_numpy(x)
            tw, tb = torch.from_numpy(scale.reshape(c)), torch.from_numpy(bias.reshape(c))
            f = torch.nn.functional

            def instance_norm() -> object:
                with torch.no_grad():
                    return f.instance_norm(tx, eps=1e-5)

            def batch_norm() -> object:
                with torch.no_grad():
                    return f.batch_norm(tx, None, None, tw, tb, training=True, eps=1e-5)

            res.update(
                median_times(
                    {"torch instance_norm": instance_norm, "torch batch_norm (training)": batch_norm}, 5
                )
            )
            note = f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of 5 after the rest"
        except ImportError:
            note = "torch not installed"
    mib = x.nbytes / 2**20
    fresh, reused = res["copy into a fresh array"], res["copy into a reused array"]
    print(
        f"FLOAT32 {shape} ({mib:.0f} MiB in + {mib:.0f} MiB out), median of {args.repeat}, round-robin; {note}"
    )
    for name, sec in res.items():
        floor = fresh if "fresh" in name or name.startswith("torch") else reused
        which = "fresh" if floor is fresh else "reused"
        print(f"  {name:42s} {sec * 1e3:9.2f} ms   {sec / floor:5.2f}x copy ({which})")
    print("ratios to the copy floor (goal <= 1.30):")
    for op in ("MVN1 axes {2,3}", "BATCH_NORM_TRAINING"):
        a = res[f"{op}, fresh output"] / fresh
        b = res[f"{op}, out= reused"] / reused
        print(f"  {op:20s} fresh {a:5.2f}x   reused {b:5.2f}x")


if __name__ == "__main__":
    main()
