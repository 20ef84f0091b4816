"""LRN, CrossChannel FALSE: which region, which divisor? (docs/family-experiments.md)

1x1x7x7 of ones, Alpha 1, Beta 1, Bias 0: 1/Output = (window count) / divisor shows the window's
shape and divisor; then random (2, 5, 4, 6) data, LocalSize 1-6 and 9.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

be = fp.backend()
np.set_printoptions(precision=4, linewidth=120)
for n in (2, 3):
    y = fp.run(
        be,
        fp.LRN,
        fp.lrn_members((1, 1, 7, 7), False, n, 1.0, 1.0, 0.0),
        {"InputTensor": np.ones((1, 1, 7, 7), np.float32)},
    )
    print(f"LocalSize {n}, 1/Output:\n", 1.0 / y["OutputTensor"][0, 0])
rng = np.random.default_rng(1)
errs = {"square, divisor LocalSize": 0.0, "square, divisor LocalSize^2": 0.0}
for n in (1, 2, 3, 4, 5, 6, 9):
    x = rng.standard_normal((2, 5, 4, 6)).astype(np.float32)
    y = fp.run(be, fp.LRN, fp.lrn_members(x.shape, False, n, 1.5, 0.75, 1.0), {"InputTensor": x})[
        "OutputTensor"
    ]
    for key, div in (("square, divisor LocalSize", n), ("square, divisor LocalSize^2", n * n)):
        ref = x / fp.lrn_d(x, False, n, 1.5, 1.0, (n - 1) // 2, n // 2, div) ** 0.75
        errs[key] = max(errs[key], float(np.abs(y - ref).max()))
fp.report(list(errs.items()), "square, divisor LocalSize", 1e-5)
