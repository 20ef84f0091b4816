"""TF2: TensorFlow's CPU reduction over an outer axis is one float32 loop in order (tensorflow and
numpy only, no dmlconform).

`tf.reduce_sum(x, axis=0)` of an [n, c] array with c > 1 columns (the reduced axis not the
innermost: BATCH_NORMALIZATION_GRAD's sums over a batch with channels inside it, an MVN over
axes {0, 1, 2} with a kept innermost axis) is bit for bit a sequential float32 sum down each
column; the same values with c = 1 (the reduced axis innermost) are summed in vector lanes and a
tree. On values near 1000 the in-order sum's error grows with n as a loop's does (at 2^20 values
it saturates: 1e7 off a sum of 1e9), the lane sum's as a tree's.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def main() -> int:
    rng = np.random.default_rng(0)
    reproduced = True
    for n in (4095, 65535, 1 << 20):
        x = (rng.standard_normal((n, 2)) + 1000).astype(np.float32)
        exact = x.astype(np.float64).sum(axis=0)
        outer = tf.reduce_sum(x, axis=0).numpy()
        loop = np.cumsum(x, axis=0, dtype=np.float32)[-1]  # one float32 accumulator, in order
        inner = np.array([tf.reduce_sum(np.ascontiguousarray(x[:, c])).numpy() for c in range(2)])
        same = np.array_equal(outer, loop)
        reproduced &= bool(same)
        print(
            f"n = {n:8d}: axis 0 of [n, 2] is the in-order loop bit for bit: {same}; error "
            f"{np.abs(outer - exact).max():.3g}; the same column reduced alone (innermost): "
            f"{np.abs(inner - exact).max():.3g}"
        )
    return 0 if reproduced else 1


if __name__ == "__main__":
    raise SystemExit(main())
