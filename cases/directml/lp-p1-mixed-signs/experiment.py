"""LP, P = 1 with signs that cancel: does the norm take |x|? (docs/family-experiments.md)"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

be = fp.backend()
x = np.array([1, -1, 2, -2], np.float32).reshape(1, 1, 1, 4)
m = {"InputTensor": fp.tensor(x.shape), "OutputTensor": fp.tensor(x.shape), "Axis": 3, "Epsilon": 0.0, "P": 1}
y = fp.run(be, fp.LP, m, {"InputTensor": x})["OutputTensor"]
print(
    "[1, -1, 2, -2], Epsilon 0, P 1: DirectML", y.ravel(), "(with |x|: [1/6, -1/6, 1/3, -1/3]; without: 0/0)"
)
fp.report([("sum |x|", float(np.abs(y.ravel() - np.array([1, -1, 2, -2]) / 6).max()))], "sum |x|", 1e-6)
