"""An OpenVINO FLOAT16 graph holds its constants in FLOAT16: Epsilon and activation parameters
are rounded to FLOAT16 (1e-5 becomes 1.00136e-5, 0.1 becomes 0.099976), while the CPU plugin
computes in float32 (INFERENCE_PRECISION_HINT f32, as the backend compiles every graph; the
plugin's default on CPUs without AVX-512 BF16).

A batch normalization with given statistics, y = (x - Mean) / sqrt(Variance + Epsilon) * Scale
+ Bias, then LINEAR(Alpha 0.25, Beta 0.1), built as a FLOAT16 graph (every constant FLOAT16, as
the operators require), on Variance near Epsilon (the suite's spread_near_sqrt_eps regime). Its
output is bit for bit float32 arithmetic on the FLOAT16 inputs with Epsilon and Beta rounded to
FLOAT16, not with the C FLOATs DirectML is given; the same graph in float32 with FLOAT16 only at
its ends (the backend's float16=float32) is float32 arithmetic with the float32 constants.
Uses openvino and numpy only.
"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops

EPS, ALPHA, BETA = 1e-5, 0.25, 0.1

#: the DirectML case this reproduces (tests/test_openvino_backend.py holds finding OV5 to it)
CASE = {
    "type": "BATCH_NORMALIZATION",
    "desc": {
        "InputTensor": {"DataType": "FLOAT16", "Sizes": [4, 5, 7, 1]},
        "MeanTensor": {"DataType": "FLOAT16", "Sizes": [1, 1, 1, 1]},
        "VarianceTensor": {"DataType": "FLOAT16", "Sizes": [1, 1, 1, 1]},
        "ScaleTensor": {"DataType": "FLOAT16", "Sizes": [4, 5, 7, 1]},
        "BiasTensor": {"DataType": "FLOAT16", "Sizes": [4, 5, 1, 1]},
        "OutputTensor": {"DataType": "FLOAT16", "Sizes": [4, 5, 7, 1]},
        "Spatial": True,
        "Epsilon": EPS,
        "FusedActivation": {"Type": "ACTIVATION_LINEAR", "Alpha": ALPHA, "Beta": BETA},
    },
}


def case_inputs() -> dict[str, np.ndarray]:
    """CASE's inputs: deviations of 1e-3 over a Variance of 1e-6 (Epsilon is 10 of it), Bias
    -0.75, so that LINEAR's Beta cancels most of the value."""
    rng = np.random.default_rng(3)
    return {
        "InputTensor": (rng.standard_normal((4, 5, 7, 1)) * 1e-3).astype(np.float16),
        "MeanTensor": np.zeros((1, 1, 1, 1), np.float16),
        "VarianceTensor": np.full((1, 1, 1, 1), 1e-6, np.float16),
        "ScaleTensor": (1 + 0.01 * rng.standard_normal((4, 5, 7, 1))).astype(np.float16),
        "BiasTensor": np.full((4, 5, 1, 1), -0.75, np.float16),
    }


def graph(compute: type) -> ov.CompiledModel:
    """The formula as an OpenVINO user writes it, in ``compute`` with FLOAT16 parameters."""
    params = [
        ops.parameter(s, np.float16)
        for s in ([4, 5, 7, 1], [1, 1, 1, 1], [1, 1, 1, 1], [4, 5, 7, 1], [4, 5, 1, 1])
    ]
    x, m, v, s, b = (p if compute is np.float16 else ops.convert(p, compute) for p in params)

    def c(value: float) -> ov.Node:
        return ops.constant(np.asarray(value, compute))

    y = ops.add(ops.multiply(ops.divide(ops.subtract(x, m), ops.sqrt(ops.add(v, c(EPS)))), s), b)
    y = ops.add(ops.multiply(y, c(ALPHA)), c(BETA))
    if compute is not np.float16:
        y = ops.convert(y, np.float16)
    return ov.Core().compile_model(ov.Model([y], params), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})


def float32_arithmetic(arrays: list[np.ndarray], eps: float, beta: float) -> np.ndarray:
    x, m, v, s, b = (a.astype(np.float32) for a in arrays)
    f = np.float32
    y = (x - m) / np.sqrt(v + f(eps)) * s + b
    return (y * f(ALPHA) + f(beta)).astype(np.float16)


def main() -> None:
    print(f"openvino {ov.get_version()}")
    inputs = case_inputs()
    arrays = [inputs[k] for k in ("InputTensor", "MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor")]
    x, m, v, s, b = arrays
    want = (x.astype(np.float64) - m) / np.sqrt(v.astype(np.float64) + np.float32(EPS)) * s + b
    want = want * np.float32(ALPHA) + np.float32(BETA)
    eps16, beta16 = float(np.float16(EPS)), float(np.float16(BETA))
    print(
        f"Epsilon {np.float32(EPS):.6g} as FLOAT16: {eps16:.6g}; Beta {np.float32(BETA):.6g} as FLOAT16: {beta16:.6g}"
    )
    agreement = {}
    for label, compute in (("FLOAT16 graph", np.float16), ("float32 graph, FLOAT16 ends", np.float32)):
        got = graph(compute)(arrays)[0]
        rounded = float32_arithmetic(arrays, eps16, beta16)
        exact = float32_arithmetic(arrays, EPS, BETA)
        print(
            f"{label}: equal to float32 arithmetic with FLOAT16 constants in {np.mean(got == rounded):.0%} of"
            f" elements, with float32 constants in {np.mean(got == exact):.0%};"
            f" max |error| {np.abs(got.astype(np.float64) - want).max():.3g}"
        )
        agreement[compute] = (np.mean(got == rounded), np.mean(got == exact))
    native, ends = agreement[np.float16], agreement[np.float32]
    reproduced = native[0] == 1 > native[1] and ends[1] == 1
    print("OV5 reproduced" if reproduced else "OV5 not reproduced")


if __name__ == "__main__":
    main()
