"""J3: in float16, JAX rounds a Python-scalar Epsilon to float16, and under 2^-25 it is 0.

jnp's weak typing computes `var + eps` in the array's type: eps = 1e-12 becomes float16 0
(float16's least subnormal is 2^-24 = 6e-8). DirectML passes Epsilon as a C FLOAT, so where the
variance is 0 too in float16 (under 2^-25: a spread of 1e-6, or a constant or one-element slice),
the spec's answer is finite, (x - mean) / sqrt(var + 1e-12), and JAX's is (x - mean) * rsqrt(0):
infinite, or NaN where x - mean is 0. Lp normalization's squared norm does the same.

Run: python cases/jax/float16-epsilon-underflow/experiment.py (jax and numpy only).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

print(f"jax {jax.__version__}, platform {jax.default_backend()}")
eps = 1e-12
x16 = (1e-6 * np.array([1.0, -1.0, 1.0, -1.0, 0.0])).astype(np.float16)  # float16 subnormals
xs = x16.astype(np.float64)
exact = (xs - xs.mean()) / np.sqrt(xs.var() + eps)
print(f"one slice {xs} (variance {xs.var():.3g}), Epsilon {eps}")
print(f"exact:   {exact}")
results = {}
for dtype in (jnp.float16, jnp.float32):
    x = jnp.asarray(x16, dtype)
    var = jnp.var(x)
    y = (x - jnp.mean(x)) * lax.rsqrt(var + eps)
    results[jnp.dtype(dtype).name] = np.asarray(y, dtype=np.float64)
    print(
        f"{jnp.dtype(dtype).name}: variance {float(var):.3g}, var + eps {float(var + eps):.3g}, "
        f"output {np.asarray(y)}"
    )
print(
    "J3 reproduced"
    if not np.isfinite(results["float16"]).any() and np.allclose(results["float32"], exact, rtol=1e-3)
    else "J3 not reproduced"
)
