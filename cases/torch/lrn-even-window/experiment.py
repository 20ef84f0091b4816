"""T1: PyTorch's local_response_norm places an even window one channel lower than DirectML's
(torch only, no dmlconform).

Six channels, all 1 but channel 2 = 10, size 4, alpha 4, beta 1, k 1: each output channel shows
which channels its window summed. DirectML's window (and ONNX's) for channel c spans
c - floor((n-1)/2) .. c + ceil((n-1)/2), here c-1 .. c+2; PyTorch pads floor(n/2) below and
floor((n-1)/2) above, c-2 .. c+1. Odd sizes agree.
"""

import numpy as np
import torch
import torch.nn.functional as F

N, ALPHA, BETA, K = 4, 4.0, 1.0, 1.0
x = np.ones((1, 6, 1, 1), np.float32)
x[0, 2] = 10.0


def window(lo: int, hi: int) -> np.ndarray:
    """The output when channel c's window is c - lo .. c + hi (clipped), divisor N."""
    sq = x[0, :, 0, 0].astype(np.float64) ** 2
    s = np.array([sq[max(0, c - lo) : c + hi + 1].sum() for c in range(6)])
    return x[0, :, 0, 0] / (K + ALPHA / N * s) ** BETA


got = F.local_response_norm(torch.from_numpy(x), N, alpha=ALPHA, beta=BETA, k=K).numpy().ravel()
directml = window((N - 1) // 2, N // 2)
torch_order = window(N // 2, (N - 1) // 2)
print(f"torch {torch.__version__}")
print("torch                :", np.round(got, 5))
print("DirectML's window    :", np.round(directml, 5), f"(max diff {np.abs(got - directml).max():.3g})")
print("one channel lower    :", np.round(torch_order, 5), f"(max diff {np.abs(got - torch_order).max():.3g})")
print(
    "T1 reproduced"
    if np.abs(got - torch_order).max() < 1e-6 < np.abs(got - directml).max()
    else "T1 not reproduced"
)
