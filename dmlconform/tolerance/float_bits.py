"""Float bits in compiled code: the ULP ordinals, spacings, binades and NaN-aware extrema the
compiled judge reads element by element, and the evaluator of the spec's compiled expressions.

Kept apart from the judge's passes (:mod:`dmlconform.tolerance.judge_compiled`) so that those read
as the judge's steps; every function here inlines into them (``inline="always"``), so the split
changes no compiled code. The constants are the numpy model's own (numba freezes them).
"""

from __future__ import annotations

import numpy as np

from dmlconform.native import njit
from dmlconform.tolerance.terms import overflow_edge, ulp_of

# the output types' largest finite values, the spacing of their top binade and the magnitude
# from which a value rounds to inf: the numpy model's own (numba freezes them as constants)
F32_MAX = float(np.finfo(np.float32).max)
F16_MAX = float(np.finfo(np.float16).max)
TOP_SPACING32 = float(ulp_of(F32_MAX, np.float32))  # 2^104
TOP_SPACING16 = float(ulp_of(F16_MAX, np.float16))  # 32
F32_EDGE = overflow_edge(np.float32)
F16_EDGE = overflow_edge(np.float16)


@njit(cache=True, inline="always")
def fmax(a, b):  # type: ignore[no-untyped-def]
    """np.maximum: NaN if either is NaN."""
    if a != a or b != b:
        return a + b
    return a if a >= b else b


@njit(cache=True, inline="always")
def fmin(a, b):  # type: ignore[no-untyped-def]
    if a != a or b != b:
        return a + b
    return a if a <= b else b


@njit(cache=True, inline="always")
def run_program(ops, consts, x, stack):  # type: ignore[no-untyped-def]
    """Evaluate a spec expression compiled to postfix (:mod:`dmlconform.tolerance.judge`): 0 push
    const, 1 push x, 2 +, 3 -, 4 *, 5 /, 6 negate, 7 abs, 8 max (NaN-propagating). ``stack``: the
    caller's (an allocation per element cost more than the program)."""
    top = 0
    for i in range(ops.size):
        op = ops[i]
        if op == 0:
            stack[top] = consts[i]
            top += 1
        elif op == 1:
            stack[top] = x
            top += 1
        elif op == 6:
            stack[top - 1] = -stack[top - 1]
        elif op == 7:
            stack[top - 1] = abs(stack[top - 1])
        else:
            b = stack[top - 1]
            a = stack[top - 2]
            top -= 1
            if op == 2:
                stack[top - 1] = a + b
            elif op == 3:
                stack[top - 1] = a - b
            elif op == 4:
                stack[top - 1] = a * b
            elif op == 5:
                stack[top - 1] = a / b
            else:
                stack[top - 1] = fmax(a, b)
    return stack[0]


@njit(cache=True, inline="always")
def vmax(a, b):  # type: ignore[no-untyped-def]
    """np.maximum as selects (no branch, so a loop holding it vectorizes): NaN if either is."""
    m = a if a >= b else b
    return m if (a == a) & (b == b) else a + b


@njit(cache=True, inline="always")
def vmin(a, b):  # type: ignore[no-untyped-def]
    m = a if a <= b else b
    return m if (a == a) & (b == b) else a + b


@njit(cache=True, inline="always")
def ordinal32(bits):  # type: ignore[no-untyped-def]
    """:func:`dmlconform.tolerance.terms.ordinal` of one float32 from its bits (int32), as
    selects: adjacent floats differ by 1, -0 == +0."""
    v = np.int64(bits)
    return np.int64(-2147483648) - v if v < 0 else v


@njit(cache=True, inline="always")
def ordinal16(bits):  # type: ignore[no-untyped-def]
    """The ordinal of a float16 value from the bits of the same value as a float32 (exactly
    representable): adjacent float16 values differ by 1, -0 == +0. Selects: every case is
    computed and one kept (a subnormal's quantum is 2^-24: value m 2^(e - 23) = h 2^-24)."""
    v = np.int64(bits)
    mag = v & 0x7FFFFFFF
    e = (mag >> 23) - 127
    frac = mag & 0x7FFFFF
    normal = ((e + 15) << 10) | (frac >> 13)
    sub = (frac | 0x800000) >> min(max(-1 - e, 0), 63)
    sub = 0 if mag == 0 else sub
    h = normal if e >= -14 else sub
    h = 0x7C00 if mag >= 0x7F800000 else h
    return -h if v < 0 else h


@njit(cache=True, inline="always")
def pow2(e):  # type: ignore[no-untyped-def]
    """2^e for a normal float64 exponent, by its bits (a register bit cast)."""
    return np.int64(np.int64(e + 1023) << 52).view(np.float64)


@njit(cache=True, inline="always")
def binade64(a):  # type: ignore[no-untyped-def]
    """2^floor(log2 a) for a normal positive float64."""
    return np.int64(np.float64(a).view(np.int64) & np.int64(0x7FF0000000000000)).view(np.float64)


@njit(cache=True, inline="always")
def inverse_binade64(a):  # type: ignore[no-untyped-def]
    """1 / 2^floor(log2 a) for a positive float64 whose binade's inverse is normal."""
    e = (np.float64(a).view(np.int64) >> 52) & 0x7FF
    return np.int64(np.int64(2046 - e) << 52).view(np.float64)


@njit(cache=True, inline="always")
def spacing32_exact(mag):  # type: ignore[no-untyped-def]
    """:func:`spacing` of a float32 value from the bits of its magnitude (no rounding to do)."""
    e = mag >> 23
    s = pow2(e - 150)
    s = 1.401298464324817e-45 if e == 0 else s
    return TOP_SPACING32 if mag >= 0x7F7FFFFF else s


@njit(cache=True, inline="always")
def spacing16_exact(mag):  # type: ignore[no-untyped-def]
    """:func:`spacing` of a float16 value from the float32 bits of its magnitude."""
    e = (mag >> 23) - 127
    s = pow2(max(e, -14) - 10)
    return TOP_SPACING16 if mag >= 0x477FE000 else s  # 65504 and above


@njit(cache=True, inline="always")
def spacing(a, half):  # type: ignore[no-untyped-def]
    """:func:`dmlconform.tolerance.ulp_of` of ``a`` >= 0 (or NaN) as selects: the spacing of the
    output type at ``a`` rounded to it; the top binade's at its largest finite value, NaN for NaN."""
    if half:
        # float16: 11 significant bits, subnormal quantum 2^-24, largest 65504
        # the quantum q at a and its inverse (powers of two: a * (1 / q) is exact, a / q is slow)
        q = 5.960464477539063e-08 if a < 6.103515625e-05 else binade64(a) * 9.765625e-04
        q_inv = 16777216.0 if a < 6.103515625e-05 else inverse_binade64(a) * 1024.0
        r = np.round(a * q_inv) * q
        s = binade64(r) * 9.765625e-04
        s = 5.960464477539063e-08 if r < 6.103515625e-05 else s
        s = TOP_SPACING16 if r >= 65504.0 else s
    else:
        b = np.int64(np.float32(a).view(np.int32)) & 0x7FFFFFFF
        e = b >> 23
        s = pow2(e - 150)
        s = 1.401298464324817e-45 if e == 0 else s
        s = TOP_SPACING32 if b >= 0x7F7FFFFF else s
    return a if a != a else s
