"""J8: XLA's CPU reduces a multi-dimensional operand in order, with one float32 accumulator.

jnp.sum (and jnp.mean, jnp.var) of a float32 array over all its axes is bit for bit a sequential
float32 loop over the elements when the array has several dimensions (XLA's CPU emits a loop
nest around one accumulator), while the same values as a 1-D array are summed in vector lanes
and a tree. A sequential sum's error grows with n (like n u where the terms share a sign and
repeat, as batch-norm data with zero strides does), beyond the default model's GPU orders; it
meets the sequential-loop model, lenient.

Run: python cases/jax/xla-in-order-reduction/experiment.py (jax and numpy only).
"""

import jax
import jax.numpy as jnp
import numpy as np

print(f"jax {jax.__version__}, platform {jax.default_backend()}")
rng = np.random.default_rng(8)
shape = (3, 3, 2, 5, 5, 3, 3)  # 4050 elements, as the BATCH_NORMALIZATION_TRAINING case's input
values = -(1.0 + rng.random(3)).astype(np.float32)  # three negative values, each repeated 1350 times
x = np.broadcast_to(values.reshape(1, 3, 1, 1, 1, 1, 1), shape).copy()


def sequential(a: np.ndarray) -> np.float32:
    total = np.float32(0.0)
    for v in a.ravel():
        total = np.float32(total + v)
    return total


exact = x.astype(np.float64).sum()
ulp = abs(float(np.spacing(np.float32(exact))))
seq = sequential(x)
by_nd = float(jnp.sum(jnp.asarray(x)))
by_1d = float(jnp.sum(jnp.asarray(x.ravel())))
print(f"sum of {x.size} float32 values (3 distinct, negative): exact {exact:.6f}")
print(f"  jnp.sum over the {len(shape)}-D array: {by_nd!r} ({(by_nd - exact) / ulp:+.1f} ULP)")
print(f"  a sequential float32 loop:       {float(seq)!r} ({(float(seq) - exact) / ulp:+.1f} ULP)")
print(f"  jnp.sum over the same, 1-D:      {by_1d!r} ({(by_1d - exact) / ulp:+.1f} ULP)")
r = rng.standard_normal(shape).astype(np.float32)
print(
    "  random data, 7-D: jnp.sum == sequential loop:",
    float(jnp.sum(jnp.asarray(r))) == float(sequential(r)),
)
print(
    "J8 reproduced"
    if by_nd == float(seq) and abs(by_nd - exact) > 10 * max(abs(by_1d - exact), ulp)
    else "J8 not reproduced"
)
