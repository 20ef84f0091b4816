"""LRN with LocalSize larger than the channel count (docs/family-experiments.md).

C = 1, LocalSize 5, Alpha 5, Beta 1, Bias 1, x = 1: 0.5 if Alpha is divided by LocalSize, 0.1667
if by the clipped count; C = 3 with LocalSize 1001 and 2^32 - 1 (Alpha = LocalSize): 0.25.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

be = fp.backend()
y = fp.run(
    be,
    fp.LRN,
    fp.lrn_members((1, 1, 1, 1), True, 5, 5.0, 1.0, 1.0),
    {"InputTensor": np.ones((1, 1, 1, 1), np.float32)},
)["OutputTensor"]
print("C = 1, LocalSize 5:", y.ravel(), "(divisor LocalSize: 0.5; clipped count: 0.1667)")
rows = [
    ("divisor LocalSize, C=1 n=5", abs(float(y.ravel()[0]) - 0.5)),
    ("divisor clipped count, C=1 n=5", abs(float(y.ravel()[0]) - 1 / 6)),
]
for n in (1001, 2**32 - 1):
    y = fp.run(
        be,
        fp.LRN,
        fp.lrn_members((1, 3, 1, 1), True, n, float(n), 1.0, 1.0),
        {"InputTensor": np.ones((1, 3, 1, 1), np.float32)},
    )["OutputTensor"]
    print(f"C = 3, LocalSize {n}:", y.ravel(), "(clipped window, divisor LocalSize: 0.25)")
    rows[0] = (rows[0][0], max(rows[0][1], float(np.abs(y - 0.25).max())))
fp.report(rows, "divisor LocalSize, C=1 n=5", 1e-6)
