"""TF1: TensorFlow's CPU LRN kernel sums each window as one running sum along the channels when
there are more than 384 of them and Beta is 0.5 or 1 (tensorflow and numpy only, no dmlconform).

Below that cut-off the kernel multiplies the squares by a band matrix (each window summed
afresh); above it, for those two Betas, it keeps one float32 running sum per row: Alpha x^2 of
the channels entering the window added, of the channel leaving it subtracted, Bias added to a
copy. Rounding errors carry along the channels and a large square leaving the window leaves its
error behind. This script shows that at 1025 channels, Beta 1, the output is bit for bit that
running sum to within 3 float32 ULP (the last step, x times the scale's reciprocal, is Eigen's
fast reciprocal), where its error against float64 is hundreds of ULP, and the error at 384 and
1025 channels for both Betas, next to float32 windows summed afresh.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

RADIUS, ALPHA, BIAS = 2, 0.2, 0.5


def kernel(x: np.ndarray, beta: float) -> np.ndarray:
    """tf.nn.local_response_normalization over the last axis of a [rows, 1, 1, channels] input."""
    y = tf.nn.local_response_normalization(x[:, None, None, :], RADIUS, BIAS, ALPHA, beta)
    return y.numpy()[:, 0, 0, :]


def running_scale(x: np.ndarray) -> np.ndarray:
    """Bias + the running window sum of Alpha x^2 along the channels, in float32."""
    rows, channels = x.shape
    padded = np.zeros((rows, channels + 2 * RADIUS), np.float32)
    padded[:, RADIUS : RADIUS + channels] = x * x * np.float32(ALPHA)
    acc = np.zeros(rows, np.float32)
    for i in range(2 * RADIUS):
        acc = acc + padded[:, i]
    scale = np.empty_like(x)
    for i in range(channels):
        acc = acc + padded[:, i + 2 * RADIUS]
        scale[:, i] = np.float32(BIAS) + acc
        acc = acc - padded[:, i]
    return scale


def exact(x: np.ndarray, beta: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    sq = np.pad(x64 * x64, ((0, 0), (RADIUS, RADIUS)))
    window = sum(sq[:, k : k + x.shape[1]] for k in range(2 * RADIUS + 1))
    return x64 / (BIAS + np.float64(np.float32(ALPHA)) * window) ** beta


def fresh(x: np.ndarray, beta: float) -> np.ndarray:
    """float32 with each window summed afresh, then the same power."""
    sq = np.pad(x * x, ((0, 0), (RADIUS, RADIUS)))
    window = sum(sq[:, k : k + x.shape[1]] for k in range(2 * RADIUS + 1))
    return x * (np.float32(BIAS) + np.float32(ALPHA) * window) ** np.float32(-beta)


def max_rel(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(a - ref) / np.abs(ref)))


def main() -> int:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((64, 1025)) * 4).astype(np.float32)
    got, running = kernel(x, 1.0), x / running_scale(x)
    ulps = np.abs(got.view(np.int32).astype(np.int64) - running.view(np.int32).astype(np.int64))
    off = np.abs(got - exact(x, 1.0)) / np.spacing(np.abs(got))
    same = int(ulps.max()) <= 3 and float(off.max()) > 100
    print(
        f"1025 channels, Beta 1: the kernel's output is within {int(ulps.max())} ULP of the running sum's, "
        f"{float(off.max()):.0f} ULP of float64's"
    )
    for channels in (384, 1025):
        for beta in (0.5, 1.0):
            xs = x[:, :channels].copy()
            ref = exact(xs, beta)
            print(
                f"{channels:5d} channels, Beta {beta}: kernel {max_rel(kernel(xs, beta), ref):.2e} relative, "
                f"float32 windows afresh {max_rel(fresh(xs, beta), ref):.2e}"
            )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
