"""MVN1 FLOAT16: the mean is stored as FLOAT16 by truncation (F1 and F6), so the value before a
fused activation moves by up to a whole FLOAT16 step of the mean (docs/directml-findings.md, F1).

    python cases/directml/float16-truncated-mean/experiment.py [--version 1.15.4]

Sixteen slices of twelve FLOAT16 values of mean ~1040 and std ~60, NormalizeVariance FALSE (the
output is x - mean), where a FLOAT16 step of the mean is 1: without an activation, and with
HARD_SIGMOID (Alpha 0.25, Beta 0.5: clamped past |x - mean| = 2). Two readings, each float32
arithmetic on the mean stored as FLOAT16, the result converted to FLOAT16 by truncation (F6):

- "mean rounded to nearest": the mean off by at most half a step, what ``fp16-statistics``
  (one rounding of the statistics) allows it.
- "mean truncated": off by up to a whole step (0.96 here).

DirectML equals the second bit for bit, with and without the clamp. So the value before the
activation errs twice the half step; doubling the error after the activation (``ulp_scale: 2``)
does not cover that where the activation flattens (a clamp, SHRINK's dead zone, GELU's tail):
the shipped bound counts the truncation where it happens (``narrowing: toward_zero``: each
rounding to FLOAT16, the statistics' storage and the FLOAT16 elementwise steps, a whole step).
Exits 0 when the truncated reading reproduces DirectML bit for bit.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

MVN1 = "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1"
HARD_SIGMOID = {"Type": "ACTIVATION_HARD_SIGMOID", "Alpha": 0.25, "Beta": 0.5}
be = fp.backend()


def rtz16(v: np.ndarray) -> np.ndarray:
    """float32 -> float16 rounding toward zero."""
    v = np.asarray(v, np.float32)
    r = v.astype(np.float16)
    over = np.abs(r.astype(np.float32)) > np.abs(v)
    return np.where(over, np.nextafter(r, np.float16(0)), r).astype(np.float16)


def rne16(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, np.float32).astype(np.float16)


def mvn1(x: np.ndarray, activation: dict | None) -> np.ndarray:
    m = {
        "InputTensor": fp.tensor(x.shape, "FLOAT16"),
        "OutputTensor": fp.tensor(x.shape, "FLOAT16"),
        "Axes": [1],
        "NormalizeVariance": False,
    }
    if activation:
        m["FusedActivation"] = activation
    return fp.run(be, MVN1, m, {"InputTensor": x})["OutputTensor"]


def reading(x32: np.ndarray, store, activation: dict | None) -> np.ndarray:
    mean = store(x32.mean(axis=1, keepdims=True, dtype=np.float32)).astype(np.float32)
    y = x32 - mean
    if activation:
        y = np.clip(np.float32(activation["Alpha"]) * y + np.float32(activation["Beta"]), 0, 1)
    return rtz16(y)


x = (1040 + 60 * np.random.default_rng(7).standard_normal((16, 12))).astype(np.float16)
x32, x64 = x.astype(np.float32), x.astype(np.float64)
truncated = rtz16(x32.mean(axis=1, keepdims=True, dtype=np.float32)).astype(np.float64)
print(
    f"mean's error stored truncated: up to {np.max(np.abs(truncated - x64.mean(axis=1, keepdims=True))):.3f} (a step: 1)"
)
readings = {"mean rounded to nearest": rne16, "mean truncated": rtz16}
unequal = dict.fromkeys(readings, 0)
for activation in (None, HARD_SIGMOID):
    got = mvn1(x, activation)
    exact = x64 - x64.mean(axis=1, keepdims=True)
    if activation:
        exact = np.clip(activation["Alpha"] * exact + activation["Beta"], 0, 1)
    worst = float(np.max(np.abs(got.astype(np.float64) - exact)))
    line = []
    for name, store in readings.items():
        differ = int(np.sum(got.view(np.uint16) != reading(x32, store, activation).view(np.uint16)))
        unequal[name] += differ
        line.append(f"{name}: {differ} of {got.size} elements differ")
    label = activation["Type"] if activation else "no activation"
    print(f"{label}: DirectML off by up to {worst:.3f}; " + "; ".join(line))
adopted = "mean truncated"
print(f"adopted reading: {adopted} ({'reproduced' if unequal[adopted] == 0 else 'NOT reproduced'})")
sys.exit(0 if unequal[adopted] == 0 else 1)
