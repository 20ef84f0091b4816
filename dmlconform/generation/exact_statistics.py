"""Slices whose reductions are exact in float32 in any order: the ``exact_statistics`` regime's
data (its construction is described in ``dmlconform.generation.data``).

Kept apart from the other regimes because the construction is arithmetic of its own (lattices,
powers of two, step budgets) that the calibration tests also call directly.
"""

from __future__ import annotations

import math

import numpy as np

EXACT_STEPS = 2**23
"""``exact_statistics``: the most lattice steps any partial sum may reach (half of float32's 2^24
exact integers: a margin for sums that a backend starts from a partial of another slice)."""


def exact_rows(
    rng: np.random.Generator, rows: int, m: int, n: int, data_type: str, epsilon: float = 0.0
) -> np.ndarray:
    """``rows`` slices of ``m`` values whose sums in float32 are exact in any order (the
    ``exact_statistics`` regime); ``n`` >= m is the length each slice has once broadcast.

    Where the length allows, a slice also has an exact divisor: deviations +-A (and
    one (2A, -A/2 x 4) block for an odd length), A a power of two, so the variance is A^2, a
    power of 4 large enough that adding Epsilon rounds back to it in float32, and
    sqrt(var + eps) a power of two: every step of a sound implementation is then exact but for
    the last rounding, and a scale error of a few ULP stands out of the slices' fit. Short FLOAT16
    slices are centred half a FLOAT16 ULP off instead (the regime's docstring)."""
    repeat = n // max(m, 1)
    fp16 = data_type == "FLOAT16"
    out = np.empty((rows, m))
    for i in range(rows):
        half = fp16 and n * (4096 + 64) <= EXACT_STEPS and m >= 2
        if not half:
            row = _exact_divisor_row(rng, m, n, fp16, epsilon)
            if row is not None:
                out[i] = row
                continue
        a = _exact_deviations(rng, m, repeat, odd=half)
        if half:  # c odd in [2049, 3071]: not a FLOAT16 number; c + a even: FLOAT16 numbers
            c = 2049 if m % 2 else 2049 + 2 * int(rng.integers(0, 512))
        else:
            room = (EXACT_STEPS - repeat * np.abs(a).sum()) // n
            top = int(min(4 * max(np.abs(a).max(), 1), room, 2048 - np.abs(a).max() if fp16 else room))
            c = int(rng.integers(-top, top + 1)) if top > 0 else 0
        s = int(rng.integers(-8, 4)) if fp16 else int(rng.integers(-12, 7))
        if fp16:  # a FLOAT16 variance stays far below 65504: storing it as FLOAT16 must not overflow
            s = min(s, math.floor(math.log2(128.0 / max(float(np.abs(a).max()), 1.0))))
        out[i] = (c + a) * 2.0**s
    return out


def _exact_divisor_row(
    rng: np.random.Generator, m: int, n: int, fp16: bool, epsilon: float
) -> np.ndarray | None:
    """One slice of :func:`exact_rows` with variance A^2 exactly (a power of 4), or None where
    the length (3, or too long for n A^2 within EXACT_STEPS / 2), Epsilon or FLOAT16's range
    forbids it. |mean| <= A / 4 (c integer, A >= 4), so a running mean's rounding (Welford)
    stays a fraction of an ULP of the variance."""
    odd = m % 2 == 1
    if m == 3 or (odd and m < 5):
        return None
    j = int(rng.integers(1 if odd else 0, 4))
    while j > (1 if odd else 0) and n * 4**j > EXACT_STEPS // 2:
        j -= 1
    if n * 4**j > EXACT_STEPS // 2:
        return None
    big = 2**j
    # sd = 2^t with eps below half a float32 ULP of var = 4^t: fl(var + eps) == var
    low = -6 if epsilon <= 0 else math.floor((math.log2(epsilon) + 26) / 2) + 1
    t = int(rng.integers(low, low + 4))
    top_value = (big // 4 + 2 * big) * 2.0 ** (t - j)
    if fp16 and (top_value > 32768 or 2.0 ** (t - j) < 2.0**-14):
        return None
    dev = np.empty(m)
    pairs = (m - 5) // 2 if odd else m // 2
    dev[:pairs], dev[pairs : 2 * pairs] = big, -big
    if odd:
        dev[2 * pairs :] = (2 * big, -big / 2, -big / 2, -big / 2, -big / 2)
    c = int(rng.integers(-(big // 4), big // 4 + 1))
    return (c + rng.permutation(dev)) * 2.0 ** (t - j)


def exact_operand(rng: np.random.Generator, shape: tuple[int, ...], scale: bool) -> np.ndarray:
    """Scale as +-2^k, Bias and FusedAdd on a grid of 2^-6 within +-1: with an exact divisor the
    output Scale z + Bias + FusedAdd is then a float32 (and mostly a FLOAT16) number, so a
    sound implementation's outputs carry no rounding the slice's fit could mistake for a scale."""
    if scale:
        return 2.0 ** rng.integers(-1, 2, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return rng.integers(-64, 65, size=shape) / 64.0


def _exact_deviations(rng: np.random.Generator, m: int, repeat: int, odd: bool) -> np.ndarray:
    """Integer deviations of one slice that sum to 0: +-pairs (odd magnitudes when ``odd``), a 0
    or a (-2, 1, 1) triple for an odd length; their squares add up to at most EXACT_STEPS / 2 once
    each is repeated ``repeat`` times, the slice made sparse (zeros) where even 1s would not."""
    pairs_room = EXACT_STEPS // (4 * repeat)  # sum of squares of the pairs' magnitudes, twice
    pairs = m // 2
    if m % 2 and odd:
        pairs -= 1  # three elements go to the triple
    live = min(pairs, pairs_room)
    top = max(1, math.isqrt(max(pairs_room // max(live, 1), 1)))
    top = min(top, 1023 if odd else 2047)
    if odd and top % 2 == 0:
        top -= 1
    mag = rng.integers(1, top + 1, size=live)
    if odd:
        mag |= 1
    mag[: min(live, 1)] = top  # one pair at the largest magnitude
    dev = np.zeros(m)
    dev[:live] = mag
    dev[pairs : pairs + live] = -mag
    if m % 2 and odd:
        dev[-3:] = (-2, 1, 1)
    return rng.permutation(dev)
