"""jax.vjp of a quotient a / b forms b^-2: past the square root of the type's range the
denominator's term of the derivative is lost.

lax.div's JVP rule for the denominator is -g * a * integer_pow(b, -2). b^-2 is computed as
1 / (b * b): where b * b overflows (b > 2^64 in float32, b > 256 in float16) it is 0, and
the term -a * b'/b^2 drops out of the derivative although a / b^2 * b' is well inside the range.
Local response normalization, Output = x / d^Beta with d = Bias + Alpha / n * (window sum of
x^2), is such a quotient: its gradient is g / d^Beta - (x * 2 Alpha Beta / n) * the window sum
of g x d^(-Beta-1), and at d^Beta > 2^64 (float32) JAX returns the first term alone, of the
wrong sign where the second is the larger.

Run: python cases/jax/quotient-vjp-squares-denominator/experiment.py (jax and numpy only).
"""

import jax
import jax.numpy as jnp
import numpy as np

print(f"jax {jax.__version__}, platform {jax.default_backend()}")


def lrn_1d(x):
    """One window covering every element: x / (1 + sum(x^2))^2 (Alpha / n 1, Beta 2, Bias 1)."""
    return x / jnp.power(1.0 + jnp.sum(x * x), 2.0)


def exact_vjp(x, g):
    """float64: g d^-2 - 4 x sum(g x) d^-3, d = 1 + sum(x^2)."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    d = 1.0 + np.sum(x * x)
    return g * d**-2 - 4.0 * x * np.sum(g * x) * d**-3


g = np.ones(3, np.float32)
print("float32, x = c * (1, 2, 3), g = (1, 1, 1):")
print(f"{'c':>8} {'d^Beta':>10} {'exact dx[0]':>13} {'jax.vjp dx[0]':>14} {'first term alone':>17}")
for c in (1e2, 1e3, 1e4, 3e4, 1e5):
    x = (c * np.array([1.0, 2.0, 3.0])).astype(np.float32)
    _, vjp = jax.vjp(lrn_1d, jnp.asarray(x))
    (got,) = vjp(jnp.asarray(g))
    d = 1.0 + np.sum(x.astype(np.float64) ** 2)
    print(f"{c:8.0e} {d**2:10.2e} {exact_vjp(x, g)[0]:13.4e} {float(got[0]):14.4e} {g[0] * d**-2:17.4e}")

print("\nthe rule's pieces at b = 2^65 (float32):")
b = jnp.float32(2.0**65)
print("  jax.grad(lambda b: 1 / b)(b) =", float(jax.grad(lambda b: 1.0 / b)(b)), " exact:", -(2.0**-130))
print(
    "  jax.grad(lambda b: 2^70 / b)(b) =",
    float(jax.grad(lambda b: jnp.float32(2.0**70) / b)(b)),
    " exact:",
    -(2.0**70) * 2.0**-130,
    "(the rule multiplies 2^70 by 1 / (b * b) = 1 / inf = 0)",
)
print("  the derivative's jaxpr:", " ".join(str(jax.make_jaxpr(jax.grad(lambda b: 3.0 / b))(b)).split()))

print("\nfloat16: the same at b > 256:")
for v in (200.0, 300.0):
    b16 = jnp.float16(v)
    got = float(jax.grad(lambda b: jnp.float16(1000.0) / b)(b16))
    print(f"  d(1000 / b)/db at b = {v}: jax {got}, exact {-1000.0 / v**2:.4g}")

x = (3e4 * np.array([1.0, 2.0, 3.0])).astype(np.float32)
_, vjp = jax.vjp(lrn_1d, jnp.asarray(x))
got = float(vjp(jnp.asarray(g))[0][0])
want = exact_vjp(x, g)[0]
print(
    "J1 reproduced" if np.sign(got) != np.sign(want) and abs(got - want) > abs(want) else "J1 not reproduced"
)
