"""BATCH_NORMALIZATION_GRAD FLOAT16: DirectML holds the sum of InputGradient * (Input - Mean) in
FLOAT16 (docs/verdicts.md).

One channel of k elements c (k = 2 and 4), InputGradient 1, Mean 0, Variance 16, Scale 1,
Epsilon 0: OutputScaleGradient is k c / 4. Where k c is a FLOAT16 number DirectML is within a
FLOAT16 rounding of it; past 65504 the sum saturates (k c = 80000 gives 65504 / 4 = 16376 where the
answer is 20000). The reading "the sum as FLOAT16 holds it, saturated" reproduces all of them; the
shipped findings cover the cases whose inputs put a channel's sum there (largest_centred_gradient_sum).
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

BNG = "DML_OPERATOR_BATCH_NORMALIZATION_GRAD"
F16_MAX = 65504.0
be = fp.backend()


def scale_gradient(k: int, c: float) -> float:
    x = fp.tensor((1, 1, 1, k), "FLOAT16")
    s = fp.tensor((1, 1, 1, 1), "FLOAT16")
    m = {
        "InputTensor": x,
        "InputGradientTensor": dict(x),
        "MeanTensor": s,
        "VarianceTensor": dict(s),
        "ScaleTensor": dict(s),
        "OutputGradientTensor": dict(x),
        "OutputScaleGradientTensor": dict(s),
        "OutputBiasGradientTensor": dict(s),
        "Epsilon": 0.0,
    }
    inputs = {
        "InputTensor": np.full((1, 1, 1, k), c, np.float16),
        "InputGradientTensor": np.ones((1, 1, 1, k), np.float16),
        "MeanTensor": np.zeros((1, 1, 1, 1), np.float16),
        "VarianceTensor": np.full((1, 1, 1, 1), 16.0, np.float16),
        "ScaleTensor": np.ones((1, 1, 1, 1), np.float16),
    }
    return float(fp.run(be, BNG, m, inputs)["OutputScaleGradientTensor"].astype(np.float64).ravel()[0])


worst = {"exact sum": 0.0, "sum held in FLOAT16, saturated": 0.0}
for k in (2, 4):
    for c in (1000.0, 8000.0, 16000.0, 20000.0, 30000.0, 40000.0, 60000.0):
        total = k * float(np.float16(c))
        y = scale_gradient(k, c)
        readings = {"exact sum": total / 4, "sum held in FLOAT16, saturated": min(total, F16_MAX) / 4}
        print(
            f"k {k} c {c:g}: sum {total:g}, DirectML {y:g}, "
            + ", ".join(f"{n} {v:g}" for n, v in readings.items())
        )
        for name, want in readings.items():
            worst[name] = max(worst[name], abs(y - want) / want)
fp.report(list(worst.items()), "sum held in FLOAT16, saturated", 4 * 2.0**-11)
