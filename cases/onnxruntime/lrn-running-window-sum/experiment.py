"""O1: ONNX Runtime's CPU LRN kernel sums each window as one running sum along the channels
(onnxruntime, onnx and numpy only, no dmlconform).

The kernel starts a scale at Bias, adds Alpha / size * x^2 of the channels of the first window,
and for each next channel adds the square that enters the window and subtracts the one that
leaves it, in float32. Its rounding errors carry into every later channel, and a large square
that leaves the window leaves its error behind (cancellation): the error grows with the channel
count. This script shows that the kernel's output is bit for bit that running sum (then
x * scale^-beta in float32), and its error against float64 at 16 and at 4096 channels, next to
a float32 evaluation of the formula with each window summed afresh.
"""

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

SIZE, ALPHA, BETA, BIAS = 5, 4.0, 1.0, 0.125


def kernel(x: np.ndarray) -> np.ndarray:
    node = helper.make_node("LRN", ["x"], ["y"], size=SIZE, alpha=ALPHA, beta=BETA, bias=BIAS)
    graph = helper.make_graph(
        [node],
        "lrn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": x})[0]


def running_sum(x: np.ndarray) -> np.ndarray:
    """The running window sum along axis 1 in float32, as described above."""
    channels, before = x.shape[1], (SIZE - 1) // 2
    a = np.float32(ALPHA / SIZE)
    padded = np.zeros((x.shape[0], channels + SIZE - 1) + x.shape[2:], np.float32)
    padded[:, before : before + channels] = x * x
    scale = np.full((x.shape[0],) + x.shape[2:], np.float32(BIAS), np.float32)
    for c in range(SIZE):
        scale = scale + a * padded[:, c]
    out = np.empty_like(x)
    out[:, 0] = x[:, 0] * scale ** np.float32(-BETA)
    for c in range(1, channels):
        scale = scale + a * padded[:, c + SIZE - 1]
        scale = scale - a * padded[:, c - 1]
        out[:, c] = x[:, c] * scale ** np.float32(-BETA)
    return out


def exact(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    sq, before = x64 * x64, (SIZE - 1) // 2
    window = np.stack(
        [sq[:, max(0, c - before) : c - before + SIZE].sum(axis=1) for c in range(x.shape[1])], axis=1
    )
    return x64 / (BIAS + ALPHA / SIZE * window) ** BETA


def fresh_float32(x: np.ndarray) -> np.ndarray:
    sq, before = x * x, (SIZE - 1) // 2
    window = np.stack(
        [sq[:, max(0, c - before) : c - before + SIZE].sum(axis=1) for c in range(x.shape[1])], axis=1
    )
    return x / (np.float32(BIAS) + np.float32(ALPHA / SIZE) * window) ** np.float32(BETA)


def rel(a: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - want) / np.abs(want)))


print(
    f"onnxruntime {ort.__version__}, CPUExecutionProvider; LRN size {SIZE}, alpha {ALPHA}, beta {BETA}, bias {BIAS}"
)
reproduced = []
for channels in (16, 4096):
    x = np.random.default_rng(channels).standard_normal((1, channels, 1, 8)).astype(np.float32)
    got, want = kernel(x), exact(x)

    same = bool(np.array_equal(got, running_sum(x)))
    print(
        f"{channels:5d} channels: kernel == running sum bit for bit: {same}; max relative error: kernel"
        f" {rel(got, want):.1e}, float32 with fresh window sums {rel(fresh_float32(x), want):.1e}"
    )
    reproduced.append(same)
    if channels == 4096:
        reproduced.append(rel(got, want) > 30 * rel(fresh_float32(x), want))
print("O1 reproduced" if all(reproduced) else f"O1 not reproduced ({reproduced})")
