"""The 17 fusable activations as one scalar function, evaluated in float64.

The kernel applies the activation to each element before the single rounding to the output
type, so it is a scalar function: one integer code selects the formula and two float64 slots
carry its parameters. This module is plain Python (no numba import): the numba kernel compiles
``activate`` (``compiled.py`` wraps it in ``njit``), and the small-case numpy path
(``mirror.py``) calls the very same function per element, so both paths evaluate one formula
with the same libm calls and agree bit for bit. Formulas follow spec/common/activations.yaml exactly; where
the literal formula loses accuracy in float64 the mathematically identical stable form is used
(``expm1`` for ``exp(x) - 1``, ``erfc`` for ``1 + erf(x)`` at negative x, ``log1p`` for
softplus), because the reference must be correct to well below one float32 ULP.
"""

from __future__ import annotations

import math

from dmlconform.errors import PlanError

# name -> (code, parameter names in the order of the kernel's two slots a, b)
ACTIVATION_CODES: dict[str | None, tuple[int, tuple[str, ...]]] = {
    None: (0, ()),
    "ACTIVATION_IDENTITY": (0, ()),
    "ACTIVATION_LINEAR": (1, ("Alpha", "Beta")),
    "ACTIVATION_SIGMOID": (2, ()),
    "ACTIVATION_HARD_SIGMOID": (3, ("Alpha", "Beta")),
    "ACTIVATION_TANH": (4, ()),
    "ACTIVATION_SCALED_TANH": (5, ("Alpha", "Beta")),
    "ACTIVATION_RELU": (6, ()),
    "ACTIVATION_LEAKY_RELU": (7, ("Alpha",)),
    "ACTIVATION_THRESHOLDED_RELU": (8, ("Alpha",)),
    "ACTIVATION_ELU": (9, ("Alpha",)),
    "ACTIVATION_SCALED_ELU": (10, ("Alpha", "Gamma")),
    "ACTIVATION_SOFTPLUS": (11, ("Steepness",)),
    "ACTIVATION_PARAMETRIC_SOFTPLUS": (12, ("Alpha", "Beta")),
    "ACTIVATION_SOFTSIGN": (13, ()),
    "ACTIVATION_SHRINK": (14, ("Bias", "Threshold")),
    "ACTIVATION_CELU": (15, ("Alpha",)),
    "ACTIVATION_GELU": (16, ()),
}


def activation_args(act_type: str | None, params: dict[str, float]) -> tuple[int, float, float]:
    """(code, a, b) for the kernel; unknown activations are a PlanError, not a silent identity."""
    if act_type not in ACTIVATION_CODES:
        raise PlanError(f"FusedActivation: the reference has no formula for {act_type!r}")
    code, names = ACTIVATION_CODES[act_type]
    slots = [float(params[n]) for n in names] + [0.0, 0.0]
    return code, slots[0], slots[1]


# One function on purpose (a table with a branch per activation code): numba compiles it as it is
# (a helper would need its own jit wrapper in the kernel), and mirror.py reruns this very code
# with IEEE math bound into its globals, which a helper's own globals would escape.
def activate(code: int, x: float, a: float, b: float) -> float:  # noqa: C901 - one branch per activation
    """The activation ``code`` at ``x`` in float64 (NaN propagates through every branch)."""
    if code == 0:
        return x
    if code == 1:
        return a * x + b
    if code == 2:
        if x >= 0.0:
            return 1.0 / (1.0 + math.exp(-x))
        e = math.exp(x)
        return e / (1.0 + e)
    if code == 3:
        v = a * x + b
        if v != v:
            return v
        return max(0.0, min(v, 1.0))
    if code == 4:
        return math.tanh(x)
    if code == 5:
        return a * math.tanh(b * x)
    if code == 6:
        return x if (x > 0.0 or x != x) else 0.0
    if code == 7:
        return x if (x >= 0.0 or x != x) else a * x
    if code == 8:
        return x if (x > a or x != x) else 0.0
    if code == 9:
        return x if (x >= 0.0 or x != x) else a * math.expm1(x)
    if code == 10:
        # Gamma*(Alpha*exp(x) - Alpha) == Gamma*Alpha*expm1(x), without the cancellation
        return b * x if (x > 0.0 or x != x) else b * (a * math.expm1(x))
    if code == 11 or code == 12:
        # softplus ln(1 + e^t) without overflow for large t and without losing e^t for t << 0
        # (written inline: a helper would need its own jit wrapper in the kernel)
        t = a * x if code == 11 else b * x
        sp = t + math.log1p(math.exp(-t)) if t > 0.0 else math.log1p(math.exp(t))
        return sp / a if code == 11 else a * sp
    if code == 13:
        return x / (1.0 + abs(x))
    if code == 14:
        if x > b:
            return x - a
        if x < -b:
            return x + a
        return x if x != x else 0.0
    if code == 15:
        if x != x:
            return x
        return max(0.0, x) + min(0.0, a * math.expm1(x / a))
    if code == 16:
        # 0.5*x*(1 + erf(x/sqrt2)) == 0.5*x*erfc(-x/sqrt2): no cancellation for x << 0
        return 0.5 * x * math.erfc(-x * 0.7071067811865476)
    return math.nan
