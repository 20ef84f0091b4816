"""The MVN family over one-element slices: DirectML takes a slice's variance to be its value
(finding F5, docs/directml-findings.md).

    python cases/directml/mvn1-one-element-nan/experiment.py [--version 1.15.4]

A one-element slice has mean x and variance 0, so (x - mean) / sqrt(0 + Epsilon) is 0 and the
output is Bias (or the activation of it). DirectML returns NaN for about half of such elements.
Two readings of which, on one row of values from -100 to 100 each its own slice, with Epsilon
from 0.99 |x| to 1.01 |x| around the negative ones:

- "the variance is 0" (the formula): never NaN for Epsilon > 0.
- "the variance is x itself": sqrt(x + Epsilon) is NaN where x + Epsilon < 0, and 0 / 0 where it
  is 0, so NaN exactly where x + Epsilon <= 0.

Each is counted against DirectML's NaN elements for MEAN_VARIANCE_NORMALIZATION (over the
channel axis), MEAN_VARIANCE_NORMALIZATION1 and MEAN_VARIANCE_NORMALIZATION2 (UseMean and
UseVariance; UseMean alone, or UseVariance alone, gives none), FLOAT32 and FLOAT16. Then the
fused activations: HARD_SIGMOID, SHRINK and CELU turn the NaN into 0 (the shipped findings
excuse those slices' values by name), every other one passes it on. The reading the finding
adopts is the second; the experiment exits 0 when it counts no element wrong.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import family_probe as fp  # noqa: E402

MVN = "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION"
MVN1 = "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1"
MVN2 = "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION2"
#: one row of slices; each negative value is appended once more with Epsilon about -x
VALUES = np.array([-100, -7, -3, -1, -0.5, -0.25, -1e-3, 0, 1e-3, 0.25, 1, 3, 100], np.float64)
#: activations (and their parameters) whose value at NaN the experiment prints
ACTIVATIONS = {
    "ACTIVATION_HARD_SIGMOID": {"Alpha": 0.2, "Beta": 2.0},
    "ACTIVATION_SHRINK": {"Bias": 0.0, "Threshold": 0.5},
    "ACTIVATION_CELU": {"Alpha": 1.0},
    "ACTIVATION_RELU": {},
    "ACTIVATION_SIGMOID": {},
    "ACTIVATION_GELU": {},
}
be = fp.backend()


def members(op: str, n: int, dtype: str, epsilon: float) -> dict:
    """One row of n one-element slices: (1, n, 1, 1) over the channel axis for MVN, (n, 1) over
    axis 1 otherwise."""
    shape = (1, n, 1, 1) if op == MVN else (n, 1)
    m = {"InputTensor": fp.tensor(shape, dtype), "OutputTensor": fp.tensor(shape, dtype), "Epsilon": epsilon}
    if op == MVN:
        return m | {"CrossChannel": False, "NormalizeVariance": True}
    if op == MVN1:
        return m | {"Axes": [1], "NormalizeVariance": True}
    return m | {"Axes": [1], "UseMean": True, "UseVariance": True}


def run(op: str, x: np.ndarray, dtype: str, epsilon: float, activation: str | None = None) -> np.ndarray:
    np_type = np.float16 if dtype == "FLOAT16" else np.float32
    m = members(op, x.size, dtype, epsilon)
    if activation:
        m["FusedActivation"] = {"Type": activation, **ACTIVATIONS[activation]}
    shape = m["InputTensor"]["Sizes"]
    out = fp.run(be, op, m, {"InputTensor": x.astype(np_type).reshape(shape)})["OutputTensor"]
    return out.astype(np.float64).ravel()


wrong = {"the variance is 0": 0, "the variance is x itself": 0}
total = 0
for op in (MVN, MVN1, MVN2):
    for dtype in ("FLOAT32", "FLOAT16"):
        nan_count = 0
        for factor in (0.99, 1.0, 1.01):
            for x0 in VALUES[VALUES < 0]:
                epsilon = float(-x0 * factor)
                x = np.concatenate([VALUES, [x0]])
                x_typed = x.astype(np.float16 if dtype == "FLOAT16" else np.float32).astype(np.float64)
                eps_typed = float(np.float32(epsilon))
                nan = np.isnan(run(op, x, dtype, epsilon))
                nan_count += int(nan.sum())
                total += nan.size
                wrong["the variance is 0"] += int(nan.sum())
                wrong["the variance is x itself"] += int(np.sum(nan != (x_typed + eps_typed <= 0)))
        print(f"{op.split('_OPERATOR_')[1]} {dtype}: {nan_count} NaN")
x = VALUES
print(f"values {x.tolist()}, Epsilon 1e-5:")
for activation in ACTIVATIONS:
    got = run(MVN2, x, "FLOAT32", 1e-5, activation)
    print(f"  MVN2 + {activation}: {np.array2string(got, precision=3)}")
for name, count in wrong.items():
    print(f"  {name:<28} NaN where it says a number, or a number where it says NaN: {count} of {total}")
adopted = "the variance is x itself"
print(f"adopted reading: {adopted} ({'reproduced' if wrong[adopted] == 0 else 'NOT reproduced'})")
sys.exit(0 if wrong[adopted] == 0 else 1)
