"""J2: JAX computes float16 in float16.

Every elementwise step on float16 arrays (the centring, rsqrt, the products by Scale, the
activation's own steps and constants) returns float16, rounded; jnp.mean and jnp.var accumulate
in float32 and round their result to float16. A float16 implementation that computes in float32
and rounds once at the end (the backend's option float16=float32) errs half a float16 ULP; JAX's
own float16 errs several, and far more where the statistics' rounding is amplified: a mean 60
deviations off 0 is held to 0.03 (a float16 ULP at 60), which moves every output by up to 0.03 /
sd, and GELU's tail, whose constant sqrt(1/2) jax.nn.gelu rounds to float16 (0.70703125).

Run: python cases/jax/float16-native/experiment.py (jax and numpy only).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

print(f"jax {jax.__version__}, platform {jax.default_backend()}")
rng = np.random.default_rng(2)


def mvn(x, eps=1e-5):
    return (x - jnp.mean(x)) * lax.rsqrt(jnp.var(x) + eps)


def ulps16(got, exact):
    """|got - exact| in float16 ULPs of the exact value (2^-24 at least)."""
    e = np.abs(np.asarray(got, np.float64) - exact)
    spacing = np.maximum(2.0 ** (np.floor(np.log2(np.maximum(np.abs(exact), 2.0**-14))) - 10), 2.0**-24)
    return e / spacing


x16 = (60.0 + rng.standard_normal(64)).astype(np.float16)
xs = x16.astype(np.float64)
exact = (xs - xs.mean()) / np.sqrt(xs.var() + 1e-5)
native = mvn(jnp.asarray(x16))
upcast = np.asarray(mvn(jnp.asarray(x16, jnp.float32))).astype(np.float16)
print(
    f"MVN of 64 values 60 +- 1: mean as computed {float(jnp.mean(jnp.asarray(x16)))} (exact {xs.mean():.5f})"
)
for label, got in (("float16 native", native), ("float32 within, float16 at the ends", upcast)):
    err = np.abs(np.asarray(got, np.float64) - exact).max()
    print(f"  {label}: worst {ulps16(got, exact).max():.1f} float16 ULP, {err:.2g} absolute")

z = np.array([-5.0, -4.5, -4.0, -3.5], np.float16)
g16 = jax.nn.gelu(jnp.asarray(z), approximate=False)
g64 = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in z.astype(np.float64)])
print(f"GELU at {z}: float16 {np.asarray(g16)}, exact {g64}")
print(
    f"  relative error {np.abs(np.asarray(g16, np.float64) - g64) / np.abs(g64)} (float16's half ULP: 4.9e-4)"
)
print(
    "J2 reproduced"
    if ulps16(native, exact).max() > 8 * max(ulps16(upcast, exact).max(), 0.5)
    else "J2 not reproduced"
)
