"""J6: the sums jax.vjp makes of float16 cotangents accumulate in float16.

jnp.sum and jnp.mean of float16 accumulate in float32 and round once. The sums that autodiff
makes are not theirs: the transpose of a broadcast (Scale, Bias, the batch statistics, all
broadcast over the reduced axes) is lax.reduce_sum on the float16 cotangent, which XLA's CPU
accumulates in float16, in order for a multi-dimensional operand. Once the partial sum's ULP is
of the order of a term (past 512 for terms of 0.5), every addition rounds the same way: the sum
of 1944 terms near 0.55 comes out 6 % low (the batch-norm gradient case of the default tier it
was found in: 7 % high). The batch-norm gradients divide such sums by n.

Run: python cases/jax/float16-vjp-sums/experiment.py (jax and numpy only).
"""

import jax
import jax.numpy as jnp
import numpy as np

print(f"jax {jax.__version__}, platform {jax.default_backend()}")
rng = np.random.default_rng(5)
shape = (6, 3, 2, 6, 3, 1, 3)  # 1944 elements, reduced over every axis but one of size 1
g = (0.55 + 0.05 * rng.standard_normal(shape)).astype(np.float16)
exact = g.astype(np.float64).sum()


def broadcast_scale(scale):
    """A per-channel Scale broadcast over the tensor, as a batch norm applies it."""
    return jnp.broadcast_to(scale, shape)


_, vjp = jax.vjp(broadcast_scale, jnp.ones((1,) * 7, jnp.float16))
(by_vjp,) = vjp(jnp.asarray(g))
by_jnp = jnp.sum(jnp.asarray(g))
sequential = np.float16(0)
for v in g.ravel():
    sequential = np.float16(sequential + v)
print(f"sum of {g.size} float16 cotangents near 0.55: exact {exact:.3f}")
print(f"  jnp.sum (float32 accumulation):     {float(by_jnp)}")
print(f"  the vjp's reduce_sum (float16):     {float(by_vjp.ravel()[0])}")
print(f"  a sequential float16 loop:          {float(sequential)}")
print(f"  the vjp's jaxpr: {' '.join(str(jax.make_jaxpr(vjp)(jnp.asarray(g))).split())}")
print(
    "J6 reproduced"
    if abs(float(by_vjp.ravel()[0]) - exact) > 20 * abs(float(by_jnp) - exact) + 8
    else "J6 not reproduced"
)
