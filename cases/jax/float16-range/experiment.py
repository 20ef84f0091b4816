"""J4: in float16, values JAX forms on the way leave float16's range (65504), though the
outputs do not.

- jnp.var accumulates in float32 but returns float16: a variance past 65504 is inf, rsqrt(inf)
  is 0, and every output of the slice is 0 (MVN family, BNT).
- x * x for |x| > 256 is inf in float16 (the squares of RMS normalization, Lp's P = 2, LRN's
  window), and a sum returned as float16 past 65504 is inf (Lp's norm): the output is 0.
- LRN divides by d^Beta: past 65504 it is inf and the output 0.
- jax.vjp of the batch-norm forward sums InputGradient * (Input - Mean) over a channel before it
  divides by the deviation: past 65504 that sum is inf, and the scale gradient with it.
- jax.nn.sigmoid is 1 / (1 + exp(-x)) in float16: exp(-x) is inf under x = -11.09, and the
  output 0 where the answer is a float16 subnormal.

Run: python cases/jax/float16-range/experiment.py (jax and numpy only).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

print(f"jax {jax.__version__}, platform {jax.default_backend()}")
reproduced = []

x = np.array([-400.0, 400.0, -200.0, 200.0], np.float16)  # variance 100000
y = (jnp.asarray(x) - jnp.mean(jnp.asarray(x))) * lax.rsqrt(jnp.var(jnp.asarray(x)) + 1e-5)
exact = x.astype(np.float64) / np.sqrt(x.astype(np.float64).var() + 1e-5)
print(f"MVN over {x}: jnp.var {jnp.var(jnp.asarray(x))}, output {np.asarray(y)}, exact {exact.round(4)}")
reproduced.append(bool(np.all(np.asarray(y) == 0)))

x = np.array([300.0, 10.0, 1.0], np.float16)
norm = jnp.linalg.norm(jnp.asarray(x))
exact = x.astype(np.float64) / np.linalg.norm(x.astype(np.float64))
print(
    f"Lp P=2 over {x}: x*x {np.asarray(jnp.asarray(x) * jnp.asarray(x))}, norm {norm}, "
    f"output {np.asarray(jnp.asarray(x) / norm)}, exact {exact.round(4)}"
)
reproduced.append(bool(np.all(np.asarray(jnp.asarray(x) / norm) == 0)))

x = np.array([200.0, 150.0, 100.0], np.float16)  # window sum of squares 72500
d = 1.0 + (1.0 / 3) * lax.reduce_window(jnp.square(jnp.asarray(x)), 0.0, lax.add, (3,), (1,), [(1, 1)])
out = jnp.asarray(x) / jnp.power(d, 0.75)
x64 = x.astype(np.float64)
d64 = 1.0 + (1.0 / 3) * np.array([x64[:2] @ x64[:2], x64 @ x64, x64[1:] @ x64[1:]])
print(
    f"LRN (size 3, Alpha 1, Beta 0.75) over {x}: d {np.asarray(d)}, output {np.asarray(out)}, "
    f"exact {(x64 / d64**0.75).round(4)}"
)
reproduced.append(bool(np.asarray(out)[1] == 0))

x = np.full(8, 120.0, np.float16)  # one channel, Mean 0, Variance 16000: sum(dy * x) = 960 * 100
dy = np.full(8, 100.0, np.float16)


def forward(x, scale):
    """(x - Mean) * (rsqrt(Variance + Epsilon) * Scale), flax's _normalize order, Mean 0."""
    return x * (lax.rsqrt(jnp.asarray(16000.0, jnp.float16)) * scale)


_, vjp = jax.vjp(forward, jnp.asarray(x), jnp.asarray(1.0, jnp.float16))
dscale = vjp(jnp.asarray(dy))[1]
exact = float(np.sum(x.astype(np.float64) * dy) / np.sqrt(16000.0))
print(
    f"BN gradient: sum(dy * (x - Mean)) = {np.sum(x.astype(np.float64) * dy):.0f}, scale gradient {dscale}, exact {exact:.1f}"
)
reproduced.append(bool(not np.isfinite(float(dscale))))
z = np.array([-11.0, -11.2, -12.0], np.float16)
sig = np.asarray(jax.nn.sigmoid(jnp.asarray(z)))
exact = 1.0 / (1.0 + np.exp(-z.astype(np.float64)))
print(f"jax.nn.sigmoid at {z}: {sig} (1 / (1 + exp(-x)), exp(11.2) inf), exact {exact}")
reproduced.append(bool(sig[1] == 0 and exact[1] > 2.0**-24))
print("J4 reproduced" if all(reproduced) else f"J4 not reproduced ({reproduced})")
