"""LP FLOAT16: DirectML holds the squared norm in FLOAT16 (finding F10; docs/family-experiments.md).

Four equal elements c per slice, Epsilon 0 and 1e-12, P 1 and 2, c from 2^-24 to 1000. Where the
squared norm ((4c)^2 for P 1, 4c^2 for P 2) is a FLOAT16 number DirectML is within a few ULP of
x / sqrt(norm^2 + Epsilon). Past 65504, P 2 saturates at 65504 (output c / sqrt(65504)); P 1
saturates too on 1.8.0 to 1.12.1 and overflows to infinity (output 0) from 1.13.1 on; below 2^-24
both flush it to 0 (output c / sqrt(Epsilon), or infinity with Epsilon 0). The reading "the squared
norm as FLOAT16 holds it" reproduces all of them; the last line says which P 1 did.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

F16_MAX, F16_TINY = 65504.0, 2.0**-24
be = fp.backend()


def lp(x: np.ndarray, p: int, eps: float) -> np.ndarray:
    m = {
        "InputTensor": fp.tensor(x.shape, "FLOAT16"),
        "OutputTensor": fp.tensor(x.shape, "FLOAT16"),
        "Axis": 3,
        "Epsilon": eps,
        "P": p,
    }
    return fp.run(be, fp.LP, m, {"InputTensor": x})["OutputTensor"].astype(np.float64)


def held_in_float16(squared: float, past_max: float) -> float:
    """The squared norm as DirectML holds it: ``past_max`` (65504 saturated, or infinity) past
    FLOAT16's largest, 0 below its smallest."""
    if squared > F16_MAX:
        return past_max
    return 0.0 if squared < F16_TINY else squared


worst = {"exact squared norm": 0.0, "squared norm held in FLOAT16": 0.0}
p1_past_max: set[str] = set()
for p in (1, 2):
    for eps in (0.0, 1e-12):
        for c in [2.0**e for e in range(-24, 0, 2)] + [1.0, 16.0, 64.0, 100.0, 256.0, 1000.0]:
            c16 = float(np.float16(c))
            x = np.full((1, 1, 1, 4), c16, np.float16)
            y = lp(x, p, eps)[0, 0, 0, 0]
            squared = (4 * c16) ** 2 if p == 1 else 4 * c16 * c16
            e = float(np.float32(eps))
            print(f"P {p} Epsilon {eps:g} c {c16:.4g}: squared norm {squared:.4g}, DirectML {y:.6g}")
            errs = {}
            for past_max, name in ((F16_MAX, "saturates"), (np.inf, "overflows")):
                with np.errstate(divide="ignore"):
                    want = c16 / np.sqrt(held_in_float16(squared, past_max) + e)
                # relative error, a FLOAT16 rounding or two (this stack truncates: F6); inf == inf
                errs[name] = 0.0 if y == want else abs(y - want) / max(abs(want), 1e-30)
            seen = "saturates" if p == 2 else min(errs, key=errs.__getitem__)
            if p == 1 and squared > F16_MAX:
                p1_past_max.add(seen)
            worst["squared norm held in FLOAT16"] = max(
                worst["squared norm held in FLOAT16"], float(errs[seen])
            )
            exact = c16 / np.sqrt(squared + e)
            worst["exact squared norm"] = max(
                worst["exact squared norm"],
                0.0 if y == exact else float(abs(y - exact) / max(abs(exact), 1e-30)),
            )
print(f"P 1 past 65504: the squared norm {' and '.join(sorted(p1_past_max))}")
fp.report(list(worst.items()), "squared norm held in FLOAT16", 4 * 2.0**-11)
