"""LRN_GRAD: does CrossChannel mean what it means for LRN? (docs/family-experiments.md)

Random (2, 5, 4, 6) data, Alpha 1.5, Beta 0.75, Bias 1, odd LocalSize 1, 3, 5 (where the forward
and transposed regions coincide), both CrossChannel values, against the vector-Jacobian product of
LRN with the same and with the swapped CrossChannel.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

be = fp.backend()
rng = np.random.default_rng(2)
same = swapped = 0.0
for cc in (True, False):
    for n in (1, 3, 5):
        x = rng.standard_normal((2, 5, 4, 6)).astype(np.float32)
        g = rng.standard_normal((2, 5, 4, 6)).astype(np.float32)
        m = fp.lrn_members(x.shape, cc, n, 1.5, 0.75, 1.0)
        m["InputGradientTensor"] = m["InputTensor"]
        m["OutputGradientTensor"] = m.pop("OutputTensor")
        y = fp.run(be, fp.LRNG, m, {"InputTensor": x, "InputGradientTensor": g})["OutputGradientTensor"]
        same = max(same, float(np.abs(y - fp.lrn_grad(x, g, cc, n, 1.5, 0.75, 1.0, transposed=True)).max()))
        if n > 1:
            swapped = max(
                swapped,
                float(np.abs(y - fp.lrn_grad(x, g, not cc, n, 1.5, 0.75, 1.0, transposed=True)).max()),
            )
fp.report(
    [("VJP of LRN, same CrossChannel", same), ("VJP of LRN, CrossChannel swapped", swapped)],
    "VJP of LRN, same CrossChannel",
    1e-5,
)
