"""LP over an all-zero slice, Epsilon 1e-5 and 0, FLOAT32 and FLOAT16 (docs/family-experiments.md).

The formula x / sqrt(norm^2 + Epsilon) gives 0 with Epsilon > 0 and 0/0 = NaN with Epsilon 0.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

be = fp.backend()
ok = True
for dtype, npdt in (("FLOAT32", np.float32), ("FLOAT16", np.float16)):
    for eps in (1e-5, 0.0):
        for p in (1, 2):
            x = np.zeros((1, 1, 1, 3), npdt)
            m = {
                "InputTensor": fp.tensor(x.shape, dtype),
                "OutputTensor": fp.tensor(x.shape, dtype),
                "Axis": 3,
                "Epsilon": eps,
                "P": p,
            }
            y = fp.run(be, fp.LP, m, {"InputTensor": x})["OutputTensor"]
            want_nan = eps == 0.0
            ok &= bool(np.isnan(y).all() if want_nan else (y == 0).all())
            print(
                f"{dtype} Epsilon {eps} P {p}: DirectML {y.ravel()} (formula: {'NaN' if want_nan else '0'})"
            )
fp.report([("formula (0, or NaN at Epsilon 0)", 0.0 if ok else 1.0)], "formula (0, or NaN at Epsilon 0)", 0.5)
