"""OpenVINO's LRN-1 window for an even size is symmetric, size - 1 elements; DirectML's (ONNX's)
has size elements and reaches one further above.

C = 6 channels, all 1 but channel 2 = 10 (the discriminator of docs/family-experiments.md),
LocalSize 4, Alpha 4, Beta 1, Bias 1 (integer: clear of the integer-Bias finding). Then random
(2, 5, 4, 6) data for sizes 1 to 6 against three windows: DirectML's (floor((n-1)/2) below,
ceil((n-1)/2) above), PyTorch's (the other way) and a symmetric one of (n-1)//2 each side.
Within a channel (axes [2, 3]) the same holds on each axis. Uses openvino and numpy only.
"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops

#: the DirectML case this reproduces (tests/test_openvino_backend.py holds finding OV2 to it)
CASE = {
    "type": "LOCAL_RESPONSE_NORMALIZATION",
    "desc": {
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 6, 1, 1]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 6, 1, 1]},
        "CrossChannel": True,
        "LocalSize": 4,
        "Alpha": 4.0,
        "Beta": 1.0,
        "Bias": 1.0,
    },
}


def case_inputs() -> dict[str, np.ndarray]:
    """CASE's input: all 1 but channel 2 = 10."""
    x = np.ones((1, 6, 1, 1), np.float32)
    x[0, 2] = 10
    return {"InputTensor": x}


def lrn(
    x: np.ndarray, size: int, alpha: float, beta: float, bias: float, below: int, above: int
) -> np.ndarray:
    """x / (bias + alpha / size * the sum of squares over channels c - below .. c + above)^beta."""
    x = x.astype(np.float64)
    c = x.shape[1]
    out = np.empty_like(x)
    for i in range(c):
        window = x[:, max(0, i - below) : min(c, i + above + 1)]
        out[:, i] = x[:, i] / (bias + alpha / size * (window**2).sum(axis=1)) ** beta
    return out


def openvino_lrn(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    p = ops.parameter(list(x.shape), np.float32)
    y = ops.lrn(p, ops.constant(np.array([1], np.int64)), alpha, beta, bias, size)
    compiled = ov.Core().compile_model(ov.Model([y], [p]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([x])[0]


def main() -> None:
    print(f"openvino {ov.get_version()}")
    x = np.ones((1, 6, 1, 1), np.float32)
    x[0, 2] = 10
    print("LocalSize 4, channel 2 = 10:")
    print("  OpenVINO          ", np.round(openvino_lrn(x, 4, 4.0, 1.0, 1.0).ravel(), 5))
    print("  DirectML (1 below, 2 above)", np.round(lrn(x, 4, 4.0, 1.0, 1.0, 1, 2).ravel(), 5))
    print("  symmetric (1 each side)    ", np.round(lrn(x, 4, 4.0, 1.0, 1.0, 1, 1).ravel(), 5))
    rng = np.random.default_rng(1)
    symmetric_worst = even_best = 0.0
    even_best = np.inf
    print("size  max |error| against: DirectML's window   PyTorch's   symmetric (n-1)//2")
    for n in (1, 2, 3, 4, 5, 6):
        x = rng.standard_normal((2, 5, 4, 6)).astype(np.float32)
        got = openvino_lrn(x, n, 1.5, 0.75, 1.0)
        errs = [
            np.abs(got - lrn(x, n, 1.5, 0.75, 1.0, lo, hi)).max()
            for lo, hi in (((n - 1) // 2, n // 2), (n // 2, (n - 1) // 2), ((n - 1) // 2, (n - 1) // 2))
        ]
        print(f"{n:<5} {errs[0]:<30.3g} {errs[1]:<11.3g} {errs[2]:.3g}")
        symmetric_worst = max(symmetric_worst, errs[2])
        if n % 2 == 0:
            even_best = min(even_best, errs[0])
    reproduced = symmetric_worst < 1e-5 < 0.1 < even_best
    print("OV2 reproduced" if reproduced else "OV2 not reproduced")


if __name__ == "__main__":
    main()
