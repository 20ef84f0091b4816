"""LP: where does Epsilon enter? (docs/family-experiments.md)

x = [3e-6, 4e-6] with Epsilon 1e-5 and x = [3, 4] with Epsilon 1, 10, 30, P 1 and 2, against
x / max(norm, eps), x / (norm + eps), x / (sum |x|^P + eps)^(1/P) and x / sqrt(norm^2 + eps).
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

be = fp.backend()


def lp(x, p, eps):
    m = {
        "InputTensor": fp.tensor(x.shape),
        "OutputTensor": fp.tensor(x.shape),
        "Axis": 3,
        "Epsilon": eps,
        "P": p,
    }
    return fp.run(be, fp.LP, m, {"InputTensor": x})["OutputTensor"].astype(np.float64)


readings = {
    "max(norm, eps)": lambda x, n, s, p, e: x / np.maximum(n, e),
    "norm + eps": lambda x, n, s, p, e: x / (n + e),
    "(sum |x|^P + eps)^(1/P)": lambda x, n, s, p, e: x / (s + e) ** (1 / p),
    "sqrt(norm^2 + eps)": lambda x, n, s, p, e: x / np.sqrt(n * n + e),
}
errs = dict.fromkeys(readings, 0.0)
for vals, eps in (((3e-6, 4e-6), 1e-5), ((3.0, 4.0), 1.0), ((3.0, 4.0), 10.0), ((3.0, 4.0), 30.0)):
    x = np.array(vals, np.float32).reshape(1, 1, 1, 2)
    x64 = x.astype(np.float64)
    for p in (1, 2):
        y = lp(x, p, eps)
        s = np.sum(np.abs(x64) ** p)
        n = s ** (1 / p)
        e = float(np.float32(eps))
        print(f"x {vals} eps {eps} P {p}: DirectML {y.ravel()}")
        for k, f in readings.items():
            errs[k] = max(errs[k], float(np.abs(y - f(x64, n, s, p, e)).max() / np.abs(y).max()))
fp.report(list(errs.items()), "sqrt(norm^2 + eps)", 1e-5)
