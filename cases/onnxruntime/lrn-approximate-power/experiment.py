"""O1: ONNX Runtime's CPU LRN kernel evaluates (bias + alpha/size * square_sum)^-beta with an
approximate power (onnxruntime only, no dmlconform).

LRN, size 1, alpha 4, beta 2, bias 1, over standard-normal channels: the kernel's answer against
the formula in float64, and against the same formula in plain float32 numpy. A float32
implementation of the formula errs about 1e-7 relative; the kernel errs up to ~1e-4.
"""

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

SHAPE, SIZE, ALPHA, BETA, BIAS = (4, 16, 64, 64), 1, 4.0, 2.0, 1.0

x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
node = helper.make_node("LRN", ["x"], ["y"], size=SIZE, alpha=ALPHA, beta=BETA, bias=BIAS)
graph = helper.make_graph(
    [node],
    "lrn",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
got = session.run(["y"], {"x": x})[0]

x64 = x.astype(np.float64)  # size 1: each element's window is itself
exact = x64 / (BIAS + ALPHA / SIZE * x64 * x64) ** BETA
plain = x / (np.float32(BIAS) + np.float32(ALPHA / SIZE) * x * x) ** np.float32(BETA)


def rel(a: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(np.float64) - exact) / np.maximum(np.abs(exact), 1e-30)


print(f"onnxruntime {ort.__version__}, CPUExecutionProvider")
print(f"kernel:          max relative error {rel(got).max():.2e}, median {np.median(rel(got)):.2e}")
print(f"float32 formula: max relative error {rel(plain).max():.2e}")
print("O1 reproduced" if rel(got).max() > 10 * rel(plain).max() else "O1 not reproduced")
