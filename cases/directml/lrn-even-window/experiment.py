"""LRN, CrossChannel TRUE, even LocalSize: which way does the window lean? (docs/family-experiments.md)

C = 6, all 1 but channel 2 = 10, LocalSize 4, Alpha 4, Beta 1, Bias 1 (family-facts.md's
discriminator), then random (2, 5, 4, 6) data for LocalSize 1-6 and 9.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

be = fp.backend()
x = np.ones((1, 6, 1, 1), np.float32)
x[0, 2] = 10
y = fp.run(be, fp.LRN, fp.lrn_members((1, 6, 1, 1), True, 4, 4.0, 1.0, 1.0), {"InputTensor": x})[
    "OutputTensor"
]
print("DirectML:", np.round(y.ravel(), 6))
print("ONNX    : [0.00971, 0.00962, 0.09615, 0.00962, 0.25, 0.33333]")
print("PyTorch : [0.33333, 0.00971, 0.09615, 0.00962, 0.00962, 0.25]")
rng = np.random.default_rng(1)
onnx = torch = 0.0
for n in (1, 2, 3, 4, 5, 6, 9):
    x = rng.standard_normal((2, 5, 4, 6)).astype(np.float32)
    y = fp.run(be, fp.LRN, fp.lrn_members(x.shape, True, n, 1.5, 0.75, 1.0), {"InputTensor": x})[
        "OutputTensor"
    ]
    for lo, hi, key in (((n - 1) // 2, n // 2, "onnx"), (n // 2, (n - 1) // 2, "torch")):
        ref = x / fp.lrn_d(x, True, n, 1.5, 1.0, lo, hi, n) ** 0.75
        err = float(np.abs(y - ref).max())
        onnx, torch = (max(onnx, err), torch) if key == "onnx" else (onnx, max(torch, err))
fp.report(
    [("ONNX region (floor below, ceil above)", onnx), ("PyTorch region (ceil below)", torch)],
    "ONNX region (floor below, ceil above)",
    1e-5,
)
