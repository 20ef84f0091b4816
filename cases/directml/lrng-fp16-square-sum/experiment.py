"""LRN_GRAD FLOAT16: DirectML holds each window's sum of squares in FLOAT16 (finding F18;
docs/family-experiments.md).

Random (1, 5, 5, 5) data of magnitude c (|x| in [c/2, 3c/2], random signs), gradient of N(0, 1),
LocalSize 3, Alpha 1, Beta 0.5, Bias 1, both CrossChannel values, c from 20 to 400. Where every
window's sum of squares S is a FLOAT16 number DirectML is the gradient within a few FLOAT16
roundings of its terms (2^-7 of their magnitudes: they cancel). Where S passes 65504 it computes
d = Bias + Alpha / LocalSize * 65504 (S saturated), and where a window holds a square past 65504
(|x| >= 256) its d is infinite and its terms 0 (c = 400: every output 0). The reading "S as
FLOAT16 holds it, squares infinite past 65504" reproduces all of them (within 0.0073 of the
terms on 1.15.4; the exact sums miss by up to 9.9 where S passes 65504).
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

F16_MAX = 65504.0
be = fp.backend()
rng = np.random.default_rng(3)


def grad_with(x, g, cc, s_of) -> np.ndarray:
    """The gradient with the window sums ``s_of(S, squares)`` in place of the exact ones."""
    axes = [1] if cc else [2, 3]
    squares = x * x
    held = s_of(fp.window_sum(squares, axes, 1, 1), fp.window_sum(squares > F16_MAX, axes, 1, 1) > 0)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        d = 1.0 + held / 3
        t = g * x * d**-1.5
        first, second = g * d**-0.5, (1.0 / 3) * x * fp.window_sum(t, axes, 1, 1)
    return first - second, np.abs(first) + np.abs(second)


worst = {"exact window sums": 0.0, "window sums held in FLOAT16": 0.0}
for cc in (False, True):
    for c in (20.0, 60.0, 100.0, 150.0, 200.0, 300.0, 400.0):
        shape = (1, 5, 5, 5)
        x = (c * rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)).astype(np.float16)
        g = rng.standard_normal(shape).astype(np.float16)
        m = fp.lrn_members(shape, cc, 3, 1.0, 0.5, 1.0)
        for k in ("InputTensor", "OutputTensor"):
            m[k]["DataType"] = "FLOAT16"
        m["InputGradientTensor"] = dict(m["InputTensor"])
        m["OutputGradientTensor"] = m.pop("OutputTensor")
        y = fp.run(be, fp.LRNG, m, {"InputTensor": x, "InputGradientTensor": g})["OutputGradientTensor"]
        y = y.astype(np.float64)
        x64, g64 = x.astype(np.float64), g.astype(np.float64)
        readings = {
            "exact window sums": lambda s, inf: s,
            "window sums held in FLOAT16": lambda s, inf: np.where(inf, np.inf, np.minimum(s, F16_MAX)),
        }
        line = []
        for name, s_of in readings.items():
            want, scale = grad_with(x64, g64, cc, s_of)
            # error relative to the terms' magnitudes: they cancel, and a FLOAT16 rounding of
            # either errs by ~2^-11 of it (this stack truncates: F6); both 0 where d is infinite
            err = float(np.max(np.abs(y - want) / np.maximum(scale, 2.0**-24)))
            worst[name] = max(worst[name], err)
            line.append(f"{name} {err:.3g}")
        print(
            f"CrossChannel {cc} c {c:5g}: largest S {float(fp.window_sum(x64 * x64, [1] if cc else [2, 3], 1, 1).max()):9.4g}: "
            + ", ".join(line)
        )
fp.report(list(worst.items()), "window sums held in FLOAT16", 2.0**-7)
