"""In float16, the derivative of lax.rsqrt leaves the range below 6.1e-4, and 0 times it is NaN.

lax.rsqrt's JVP is g * (-0.5 * (rsqrt(v) / v)): it forms v^-1.5 before halving it, and v^-1.5
passes float16's largest (65504) for v < 65504^(-2/3) = 6.1e-4, where the derivative itself
(-0.5 v^-1.5) is still in range down to 3.8e-4 (v = 6.0e-4 below: -34021, float16 gives -inf). The batch-norm training gradient (BNTG) differentiates
rsqrt(Variance + Epsilon) through the batch variance: for a channel whose Variance + Epsilon is
under 6.1e-4 the variance's cotangent is infinite, and where the cotangent flowing into it is 0
(a one-element channel: x - mean = 0) the product is NaN. The exact gradient is finite (0 for a
one-element channel); float32 has the same limit only below 2e-26.

Run: python cases/jax/float16-rsqrt-derivative/experiment.py (jax and numpy only).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

print(f"jax {jax.__version__}, platform {jax.default_backend()}")
for v in (1e-2, 1e-3, 6.2e-4, 6.0e-4, 1e-5):
    g16 = float(jax.grad(lambda v: lax.rsqrt(v))(jnp.float16(v)))
    g32 = float(jax.grad(lambda v: lax.rsqrt(v))(jnp.float32(v)))
    print(f"d rsqrt(v)/dv at v = {v:g}: float16 {g16:.6g}, float32 {g32:.6g}")

eps = 1e-5


def batch_norm(x):
    """One channel of batch norm in training: (x - mean) * rsqrt(var + eps), eps a Python float
    (computed in x's type)."""
    mean = jnp.mean(x)
    var = jnp.mean(jnp.square(x - mean))
    return (x - mean) * lax.rsqrt(var + eps)


for dtype in (jnp.float16, jnp.float32):
    x = jnp.asarray([0.75], dtype)  # a one-element channel: the output is 0 for every x
    _, vjp = jax.vjp(batch_norm, x)
    (dx,) = vjp(jnp.asarray([1.0], dtype))
    print(f"one-element channel, {jnp.dtype(dtype).name}: dx = {dx}, exact 0")
print("mechanism: var + eps = 1e-5, its rsqrt derivative -0.5 * 1e-5^-1.5 = -1.6e7 is inf in float16;")
print("the cotangent into the variance is sum(g * (x - mean)) = 0, and inf * 0 = nan")
x = jnp.asarray([0.75], jnp.float16)
_, vjp = jax.vjp(batch_norm, x)
print(
    "J5 reproduced"
    if np.isnan(np.asarray(vjp(jnp.asarray([1.0], jnp.float16))[0])).all()
    else "J5 not reproduced"
)
