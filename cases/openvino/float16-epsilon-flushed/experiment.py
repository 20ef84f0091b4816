"""In an OpenVINO FLOAT16 graph an Epsilon under 2^-25 (half FLOAT16's least subnormal) becomes 0
wherever it is a FLOAT16 constant: in the CPU plugin's decomposition of MVN-6 and NormalizeL2
for the layouts its own kernels do not take, and in any graph a user composes in FLOAT16.

MVN-6 (``eps_mode="inside_sqrt"``) and NormalizeL2 (``eps_mode="add"``) with Epsilon 1e-12 on
FLOAT16 data of order 1e-6 (a variance, or a squared norm, of order 1e-12), per layout: the
output against the formula with Epsilon 1e-12 and with Epsilon 0 (float64). Where the plugin
runs its own MVN kernel (axes {2, 3} or {1, 2, 3} of a 4-D input) or NormalizeL2 kernel (axes
[1], [1, 2, 3]) Epsilon stays a float attribute and is kept; elsewhere the output is the
Epsilon-0 one (a two-element slice +-d normalizes to +-1 where the answer is +-0.707 at d = 1e-6).
In float32 (or the FLOAT16 ends of a float32 graph) every layout keeps it. Uses openvino and
numpy only.
"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops

EPS = 1e-12

#: the DirectML case this reproduces (tests/test_openvino_backend.py holds finding OV6 to it)
CASE = {
    "type": "MEAN_VARIANCE_NORMALIZATION1",
    "desc": {
        "InputTensor": {"DataType": "FLOAT16", "Sizes": [1, 1, 1, 2]},
        "OutputTensor": {"DataType": "FLOAT16", "Sizes": [1, 1, 1, 2]},
        "AxisCount": 1,
        "Axes": [3],
        "NormalizeVariance": True,
        "Epsilon": EPS,
    },
}


def case_inputs() -> dict[str, np.ndarray]:
    """CASE's input: one slice [+d, -d], d = 1e-6 (its variance 1e-12, Epsilon's size)."""
    return {"InputTensor": np.array([[[[1e-6, -1e-6]]]], np.float16)}


def reference(kind: str, x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    x = x.astype(np.float64)
    if kind == "MVN-6":
        d = x - x.mean(axis=axes, keepdims=True)
        return d / np.sqrt((d * d).mean(axis=axes, keepdims=True) + eps)
    return x / np.sqrt((x * x).sum(axis=axes, keepdims=True) + eps)


def openvino(kind: str, x: np.ndarray, axes: tuple[int, ...], dtype: type) -> np.ndarray:
    p = ops.parameter(list(x.shape), dtype)
    a = ops.constant(np.array(axes, np.int64))
    y = ops.mvn(p, a, True, EPS, "inside_sqrt") if kind == "MVN-6" else ops.normalize_l2(p, a, EPS, "add")
    compiled = ov.Core().compile_model(ov.Model([y], [p]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([x.astype(dtype)])[0].astype(np.float64)


def main() -> None:
    print(f"openvino {ov.get_version()}; Epsilon {EPS} as FLOAT16: {float(np.float16(EPS))}")
    rng = np.random.default_rng(1)
    dropped = kept = 0
    print("operator    shape         axes        FLOAT16: |err| vs eps   vs eps 0    float32: |err| vs eps")
    for kind in ("MVN-6", "NormalizeL2"):
        for shape, axes in (
            ((1, 1, 1, 2), (3,)),
            ((1, 2, 1, 1), (1,)),
            ((1, 1, 2, 2), (2, 3)),
            ((1, 3, 2, 2), (1, 2, 3)),
            ((1, 2, 2, 2), (0, 2, 3)),
        ):
            x = (rng.standard_normal(shape) * 1e-6).astype(np.float16)
            got = openvino(kind, x, axes, np.float16)
            got32 = openvino(kind, x, axes, np.float32)
            e, e0 = (np.abs(got - reference(kind, x, axes, eps)).max() for eps in (EPS, 0.0))
            e32 = np.abs(got32 - reference(kind, x, axes, EPS)).max()
            print(f"{kind:<11} {str(shape):<13} {str(axes):<11} {e:<22.3g} {e0:<11.3g} {e32:.3g}")
            dropped += bool(e0 < 1e-3 < 0.05 < e)
            kept += bool(e32 < 1e-6)
    x = np.array([[[[1e-6, -1e-6]]]], np.float16)
    got = openvino("MVN-6", x, (3,), np.float16).ravel()
    print(
        f"MVN-6 over [+d, -d], d = {float(x.ravel()[0]):.3g}: FLOAT16 graph {got}, answer {reference('MVN-6', x, (3,), EPS).ravel()}"
    )
    reproduced = dropped >= 4 and kept == 10 and np.allclose(np.abs(got), 1)
    print("OV6 reproduced" if reproduced else "OV6 not reproduced")


if __name__ == "__main__":
    main()
