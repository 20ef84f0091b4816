"""T2: torch.linalg.vector_norm(ord=1) sums float32 sequentially on the CPU (torch only, no
dmlconform).

2^20 float32 values at |mean|/std = 300: the 1-norm by vector_norm, by x.abs().sum() (pairwise),
and by float64, and the relative error of each.
"""

import numpy as np
import torch

n = 1 << 20
rng = np.random.default_rng(0)
x = (300.0 + rng.standard_normal(n)).astype(np.float32)
exact = np.abs(x.astype(np.float64)).sum()
t = torch.from_numpy(x)
by_norm = float(torch.linalg.vector_norm(t, ord=1))
by_sum = float(t.abs().sum())
print(f"torch {torch.__version__}, {n} elements, |mean|/std = 300")
print(f"vector_norm(ord=1): relative error {abs(by_norm - exact) / exact:.2e}")
print(f"abs().sum():        relative error {abs(by_sum - exact) / exact:.2e}")
seq = np.float32(0.0)
for v in np.abs(x[: 1 << 16]):  # a sequential float32 loop over the first 2^16, for the shape of it
    seq = np.float32(seq + v)
print(
    f"(a sequential float32 loop over 2^16 of them: {abs(float(seq) - np.abs(x[: 1 << 16].astype(np.float64)).sum()) / np.abs(x[: 1 << 16].astype(np.float64)).sum():.2e})"
)
print(
    "T2 reproduced"
    if abs(by_norm - exact) / exact > 100 * abs(by_sum - exact) / exact
    else "T2 not reproduced"
)
