"""Which order OpenVINO's CPU plugin sums a long float32 reduction in: one sequential loop where
the reduced axis is not the innermost one, SIMD lanes where it is (16 with AVX-512, 8 with AVX2),
the lanes then added in order. These are ordinary CPU reductions, not bugs; at 65535 elements and
more of offset data their chains are longer than the GPU summation orders the default model
admits.

ReduceSum (what ReduceMean, MVN-6's decomposition and the statistics divide) over 65535 values
of mean 4.867 and spread 0.0137, laid out as DirectML's MVN1 over Axes [0, 1, 2] of [1, 1, 65535, 2]
sees them (the reduced axis strided) and along the innermost axis. Each result is compared bit
for bit with a sequential float32 loop and with L-lane accumulators (lane j adds elements j,
j + L, ...; the lanes then in order; the tail last), and its error with the exact sum. Uses
openvino and numpy only.
"""

from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset13 as ops

#: the DirectML case this reproduces (tests/test_openvino_backend.py holds finding OV7 to it)
CASE = {
    "type": "MEAN_VARIANCE_NORMALIZATION1",
    "desc": {
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 65535, 2]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 65535, 2]},
        "AxisCount": 3,
        "Axes": [0, 1, 2],
        "NormalizeVariance": True,
    },
}


def case_inputs() -> dict[str, np.ndarray]:
    """CASE's input: mean 4.867, spread 0.0137 (|mean| / std = 355, as in the suite's seed-0
    large_offset case): the partial sums pass 2^18, where float32's spacing (1/32) is twice the
    spread."""
    x = 4.867 + 0.0137 * np.random.default_rng(5).standard_normal((1, 1, 65535, 2))
    return {"InputTensor": x.astype(np.float32)}


def sequential(x: np.ndarray) -> np.float32:
    total = np.float32(0)
    for v in x:
        total = np.float32(total + v)
    return total


def lanes(x: np.ndarray, count: int) -> np.float32:
    """``count`` accumulators over the whole blocks, added in order, then the tail in order."""
    whole = x.size // count * count
    acc = x[:whole].reshape(-1, count).astype(np.float32)
    partial = np.zeros(count, np.float32)
    for row in acc:
        partial = (partial + row).astype(np.float32)
    return sequential(np.concatenate([partial, x[whole:]]))


def openvino_sum(x: np.ndarray, axes: list[int]) -> np.ndarray:
    p = ops.parameter(list(x.shape), np.float32)
    y = ops.reduce_sum(p, ops.constant(np.array(axes, np.int64)), keep_dims=False)
    compiled = ov.Core().compile_model(ov.Model([y], [p]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([x])[0].ravel()


def main() -> None:
    print(f"openvino {ov.get_version()}")
    x = case_inputs()["InputTensor"]
    column = np.ascontiguousarray(x[0, 0, :, 0])
    matched = []
    for label, data, axes, values in (
        ("[1, 1, 65535, 2] over axes [0, 1, 2] (strided)", x, [0, 1, 2], column),
        ("[1, 65535] over axis [1] (innermost)", column.reshape(1, -1), [1], column),
    ):
        got = np.float32(openvino_sum(data, axes)[0])
        exact = float(values.astype(np.float64).sum())
        orders = {"sequential": sequential(values)} | {f"{n} lanes": lanes(values, n) for n in (4, 8, 16, 32)}
        same = [name for name, value in orders.items() if value == got] or ["none of these"]
        ulp = abs(float(got) - exact) / float(np.spacing(np.float32(exact)))
        print(f"{label}: sum {got:.9g}, exact {exact:.9g} ({ulp:.0f} ULP); bit for bit: {', '.join(same)}")
        matched.append(same)
    reproduced = "sequential" in matched[0] and any("lanes" in name for name in matched[1])
    print("OV7 reproduced" if reproduced else "OV7 not reproduced")


if __name__ == "__main__":
    main()
