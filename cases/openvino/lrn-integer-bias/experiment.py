"""OpenVINO's CPU LRN uses an integer Bias: Bias 0.25 to 0.999 acts as 0, 1.5 as 1.

LRN-1 across channels (axes [1]), LocalSize 3, Alpha 1e-4, Beta 0.75, on standard-normal
channels. For each Bias, the plugin's output is compared with DirectML's formula
x / (Bias + Alpha / LocalSize * sum of squares)^Beta (float64) at that Bias and at floor(Bias).
The plugin's LRN node keeps k as an int (src/plugins/intel_cpu/src/nodes/lrn.h): the output
matches floor(Bias) to float32 rounding. Uses openvino and numpy only.
"""

from __future__ import annotations

import math

import numpy as np
import openvino as ov
import openvino.opset13 as ops

#: the DirectML case this reproduces (tests/test_openvino_backend.py holds finding OV1 to it)
CASE = {
    "type": "LOCAL_RESPONSE_NORMALIZATION",
    "desc": {
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 6, 3, 3]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 6, 3, 3]},
        "CrossChannel": True,
        "LocalSize": 3,
        "Alpha": 1e-4,
        "Beta": 0.75,
        "Bias": 0.5,
    },
}


def case_inputs() -> dict[str, np.ndarray]:
    """CASE's input: standard-normal channels."""
    return {"InputTensor": np.random.default_rng(0).standard_normal((1, 6, 3, 3)).astype(np.float32)}


def lrn(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    """DirectML's formula in float64, odd window across channels (size // 2 each side)."""
    x = x.astype(np.float64)
    half, c = size // 2, x.shape[1]
    out = np.empty_like(x)
    for i in range(c):
        window = x[:, max(0, i - half) : min(c, i + half + 1)]
        out[:, i] = x[:, i] / (bias + alpha / size * (window**2).sum(axis=1)) ** beta
    return out


def openvino_lrn(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    p = ops.parameter(list(x.shape), np.float32)
    y = ops.lrn(p, ops.constant(np.array([1], np.int64)), alpha, beta, bias, size)
    compiled = ov.Core().compile_model(ov.Model([y], [p]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([x])[0]


def main() -> None:
    print(f"openvino {ov.get_version()}")
    x = np.random.default_rng(0).standard_normal((1, 6, 3, 3)).astype(np.float32)
    size, alpha, beta = 3, 1e-4, 0.75
    print("Bias    max rel. error vs Bias    vs floor(Bias)")
    floor_errors, fractional_errors = [], []
    for bias in (0.25, 0.5, 0.999, 1.0, 1.5, 2.0, 10.0):
        got = openvino_lrn(x, size, alpha, beta, bias)
        err = np.abs(got / lrn(x, size, alpha, beta, bias) - 1).max()
        floor = math.floor(bias)
        err_floor = np.abs(got / lrn(x, size, alpha, beta, floor) - 1).max()
        print(f"{bias:<7} {err:<24.3g} {err_floor:.3g}")
        floor_errors.append(err_floor)
        if bias != floor:
            fractional_errors.append(err)
    i = np.unravel_index(np.argmax(np.abs(x)), x.shape)
    got = openvino_lrn(x, size, alpha, beta, 0.5)[i]
    want = lrn(x, size, alpha, beta, 0.5)[i]
    print(f"Bias 0.5 at {tuple(int(v) for v in i)}: OpenVINO {got:.6g}, DirectML's formula {want:.6g}")
    print("Bias < 1 acts as 0 (x / (alpha/size * sum)^beta: huge where the sum is small); 1.5 acts as 1.")
    reproduced = max(floor_errors) < 1e-5 and min(fractional_errors) > 0.1
    print("OV1 reproduced" if reproduced else "OV1 not reproduced")


if __name__ == "__main__":
    main()
