"""MVN1 over a strided input with many slices: each slice summed in one sequential float32 loop
(F20, docs/directml-findings.md).

    python cases/directml/mvn-strided-sequential-sum/experiment.py [--version 1.15.4]

MVN1, NormalizeVariance FALSE (the output is x - mean), Axes {0, 1, 2}, the slices along the
last axis (innermost), the input with padding between its rows (Strides: one element after each
row of 64 and three after each block of 32 rows):

1. FLOAT32, 2048 elements a slice of signed values 2^-8 to 2^8 (an order's rounding shows), 16,
   24 and 64 slices, packed and strided. Two readings, float32 arithmetic throughout: "one
   sequential loop" (the slice summed in the input's order, one term after another, divided by
   n) and "512 threads" (thread t adds elements t, t + 512, ...; a tree adds the 512 partials).
   DirectML equals the loop bit for bit with 24 and 64 slices strided, and 512 threads with 16;
   packed, neither: another GPU order.
2. FLOAT16, 64 constant slices of 65536 (any order of float32 sums below 8192 terms is exact
   on them; a loop of 65536 is not). DirectML's mean (the value less the output) is the loop's
   sum divided by n, truncated to FLOAT16 (F6), bit for bit; packed it is exact.
3. Where the loop starts: with S slices of n elements the loop takes over once S > min(32, n / 128)
   (FLOAT32 slices of 1024, 2048, 4096 and 65536: at 8, 16, 32 and 32 slices not the loop, at 9,
   17, 33 and 33 the loop bit for bit; FLOAT16, constant slices of 65536: exact means at 32
   slices, the loop's at 33).

Exits 0 when the sequential loop reproduces every strided case past that switch and none
before it.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

MVN1 = "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1"
be = fp.backend()


def loop_differs(lead: int, rows: int, slices: int) -> int:
    """FLOAT32 elements of a strided (lead, rows, 64, slices) MVN1 that differ from x less the
    one-loop mean."""
    shape = (lead, rows, 64, slices)
    x = (np.sign(rng.standard_normal(shape)) * 2.0 ** rng.uniform(-8, 8, shape)).astype(np.float32)
    got = mvn1(x, "FLOAT32", True)
    mean = loop_sum(x) / np.float32(lead * rows * 64)
    return int(np.sum(got != (x - mean.astype(np.float32)).astype(np.float32)))


def constant_means_off(slices: int) -> tuple[int, int]:
    """FLOAT16, strided (32, 32, 64, slices), constant slices: how many means are off, and how
    many differ from the one loop's truncated to FLOAT16."""
    values = rng.uniform(-4, 4, slices).astype(np.float16)
    x = np.broadcast_to(values, (32, 32, 64, slices)).copy()
    loop_mean = rtz16(loop_sum(x.astype(np.float32)) / np.float32(65536)).astype(np.float64)
    mean = values.astype(np.float64) - mvn1(x, "FLOAT16", True).astype(np.float64)[0, 0, 0]
    return int(np.sum(mean != values)), int(np.sum(mean != loop_mean))


def padded_strides(sizes: list[int]) -> list[int]:
    row = sizes[3] + 1
    block = sizes[2] * row + 3
    return [sizes[1] * block + 5, block, row, 1]


def mvn1(x: np.ndarray, dtype: str, strided: bool) -> np.ndarray:
    inp = fp.tensor(x.shape, dtype)
    if strided:
        inp["Strides"] = padded_strides(list(x.shape))
    m = {
        "InputTensor": inp,
        "OutputTensor": fp.tensor(x.shape, dtype),
        "Axes": [0, 1, 2],
        "NormalizeVariance": False,
    }
    return fp.run(be, MVN1, m, {"InputTensor": x})["OutputTensor"]


def loop_sum(x32: np.ndarray) -> np.ndarray:
    """Each slice (last axis) summed in one float32 loop in the input's order."""
    return np.add.accumulate(x32.reshape(-1, x32.shape[-1]), axis=0, dtype=np.float32)[-1]


def threads_sum(x32: np.ndarray, threads: int) -> np.ndarray:
    """Thread t adds elements t, t + threads, ... in order; then a pairwise tree of partials."""
    rows = x32.reshape(-1, threads, x32.shape[-1])
    parts = np.add.accumulate(rows, axis=0, dtype=np.float32)[-1]
    while parts.shape[0] > 1:
        half = parts.shape[0] // 2
        parts = (parts[:half] + parts[half:]).astype(np.float32)
    return parts[0]


def rtz16(v: np.ndarray) -> np.ndarray:
    """float32 -> float16 rounding toward zero (this stack's conversion, F6)."""
    v = np.asarray(v, np.float32)
    r = v.astype(np.float16)
    over = np.abs(r.astype(np.float32)) > np.abs(v)
    return np.where(over, np.nextafter(r, np.float16(0)), r).astype(np.float16)


rng = np.random.default_rng(20)
reproduced = True
print("1. FLOAT32, 2048 elements a slice: elements that differ from each reading")
for slices in (16, 24, 64):
    shape = (1, 32, 64, slices)
    x = (np.sign(rng.standard_normal(shape)) * 2.0 ** rng.uniform(-8, 8, shape)).astype(np.float32)
    n = np.float32(2048)
    readings = {"one sequential loop": loop_sum(x) / n, "512 threads": threads_sum(x, 512) / n}
    for strided in (False, True):
        got = mvn1(x, "FLOAT32", strided)
        line = []
        for name, mean in readings.items():
            differ = int(np.sum(got != (x - mean.astype(np.float32)).astype(np.float32)))
            line.append(f"{name}: {differ}")
            if strided and slices >= 24 and name == "one sequential loop":
                reproduced &= differ == 0
        print(
            f"  {slices:2d} slices, {'strided' if strided else 'packed '}: "
            + ", ".join(line)
            + f" of {x.size}"
        )

print("2. FLOAT16, 64 constant slices of 65536: DirectML's mean less the value, in FLOAT16 steps")
shape = (32, 32, 64, 64)
values = rng.uniform(-4, 4, 64).astype(np.float16)
x = np.broadcast_to(values, shape).copy()
step = np.spacing(np.abs(values)).astype(np.float64)
loop_mean = rtz16(loop_sum(x.astype(np.float32)) / np.float32(65536)).astype(np.float64)
for strided in (False, True):
    got = mvn1(x, "FLOAT16", strided).astype(np.float64)
    uniform = bool(np.all(got == got[:1, :1, :1, :]))
    mean = values.astype(np.float64) - got[0, 0, 0]
    off = (mean - values.astype(np.float64)) / step
    differ = int(np.sum(mean != loop_mean))
    print(
        f"  {'strided' if strided else 'packed '}: off {off.min():+.0f} to {off.max():+.0f} steps, "
        f"{int(np.sum(off != 0))} of 64 slices; the loop's mean truncated: {differ} of 64 differ"
    )
    if strided:
        reproduced &= uniform and differ == 0
print("3. Where the loop starts: S slices of n, the loop once S > min(32, n / 128)")
for lead, rows in ((1, 16), (1, 32), (1, 64), (32, 32)):
    n = lead * rows * 64
    switch = min(32, n // 128)
    before, after = loop_differs(lead, rows, switch), loop_differs(lead, rows, switch + 1)
    print(
        f"  FLOAT32, n = {n:5d}: {switch} slices {before} elements differ from the loop, {switch + 1} slices {after}"
    )
    reproduced &= before > 0 and after == 0
(off_32, loop_32), (off_33, loop_33) = constant_means_off(32), constant_means_off(33)
print(
    f"  FLOAT16, n = 65536, constant slices: 32 slices {off_32} means off, 33 slices {off_33} off, {loop_33} not the loop's"
)
reproduced &= off_32 == 0 and off_33 > 0 and loop_33 == 0
print(f"adopted reading: one sequential loop ({'reproduced' if reproduced else 'NOT reproduced'})")
sys.exit(0 if reproduced else 1)
