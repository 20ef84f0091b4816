"""LRN_GRAD, even LocalSize: the true gradient (transposed region) or the forward region in the
backward sum? (finding F9, docs/family-experiments.md)

Random (2, 5, 4, 6) data, Alpha 1.5, Beta 0.75, Bias 1, LocalSize 2 and 4, both CrossChannel values.
Exit 0 means the finding is reproduced: DirectML uses the forward region (not the gradient).
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

be = fp.backend()
rng = np.random.default_rng(2)
true_grad = forward = 0.0
for cc in (True, False):
    for n in (2, 4):
        x = rng.standard_normal((2, 5, 4, 6)).astype(np.float32)
        g = rng.standard_normal((2, 5, 4, 6)).astype(np.float32)
        m = fp.lrn_members(x.shape, cc, n, 1.5, 0.75, 1.0)
        m["InputGradientTensor"] = m["InputTensor"]
        m["OutputGradientTensor"] = m.pop("OutputTensor")
        y = fp.run(be, fp.LRNG, m, {"InputTensor": x, "InputGradientTensor": g})["OutputGradientTensor"]
        true_grad = max(
            true_grad, float(np.abs(y - fp.lrn_grad(x, g, cc, n, 1.5, 0.75, 1.0, transposed=True)).max())
        )
        forward = max(
            forward, float(np.abs(y - fp.lrn_grad(x, g, cc, n, 1.5, 0.75, 1.0, transposed=False)).max())
        )
fp.report(
    [("true gradient (transposed region)", true_grad), ("forward region in the backward sum", forward)],
    "forward region in the backward sum",
    1e-5,
)
