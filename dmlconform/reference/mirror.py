"""The numba kernel's computation in plain numpy, operation for operation: the small-case path.

Why: the numba kernel costs 2 to 4 s of compilation per dtype pair on first use (2 cores),
while the cases a conformance run executes are small (a few thousand elements). For those,
:func:`normalize_numpy` does the same float64 operations in the same order as
:func:`dmlconform.reference.compiled._normalize` and so returns bit-identical outputs and
statistics, with no compilation and without importing numba. ``run_plan`` picks the path from
the tensor's size alone (``reference.MIRROR_MAX_ELEMENTS``), so a case always takes the same
path; the bit-identity (checked by a property test over shapes, layouts, activations, pass-2
data and both dtypes) means the choice could never change a value anyway.

How the order is reproduced (see the kernel's module docstring for the order itself):

* deviations ``d = float64(x) - c``, then per row the 64-lane blocks: groups of four blocks
  summed pairwise ``(b0 + b1) + (b2 + b3)`` (squares likewise), the remaining single blocks,
  and the row's tail (fewer than 64 elements, into lanes 0..tail-1, padded with +0.0);
* every lane is then a sequential sum of those addends in row order starting from +0.0:
  ``np.cumsum`` along the addend axis is exactly that sequential recurrence (no pairwise
  reassociation), and ``+ 0.0`` afterwards turns a -0.0 first addend into the kernel's +0.0
  (an accumulator that starts at +0.0 can never be -0.0, so the padding is a no-op too);
* the lanes are combined by the same pairwise tree, and pass 2, the clamp, ``1/sqrt(var + eps)``
  and the output formula (folded per slice, ``(x - mean) * (scale * inv) + (bias + add)``, when
  the operands are constant within a slice, else ``scale * ((x - mean) * inv) + bias + add``)
  are the same IEEE operations (numpy's float64
  add, multiply, divide and sqrt are correctly rounded; the kernel is compiled without
  fast-math, so LLVM neither reassociates nor contracts them into FMAs);
* the activation is :func:`dmlconform.reference.activations.activate` itself, called per element
  (the kernel compiles that same function; both call the C library's exp, expm1, log1p, tanh,
  erfc), or, for the activations made of comparisons and + - * / alone, the same operations on
  whole arrays; the float64 result is rounded once to the output type on assignment.
"""

from __future__ import annotations

import math
import types

import numpy as np

from dmlconform.reference.activations import activate

LANES = 64  # must equal kernels.LANES (a test checks)
SHIFT_LIMIT = 16.0  # must equal kernels.SHIFT_LIMIT


def _view(flat: np.ndarray, sk: int, sm: int, shape: tuple[int, int, int]) -> np.ndarray:
    """The (K, M, L) rows the kernel addresses as ``flat[k * sk + m * sm + j]``."""
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(
        flat, shape=shape, strides=(sk * item, sm * item, item), writeable=flat.flags.writeable
    )


def _sequential(addends: np.ndarray) -> np.ndarray:
    """sum over axis 1 in order, from +0.0: ``((0 + a0) + a1) + ...`` (shape (K, n, w) -> (K, w))."""
    return np.cumsum(addends, axis=1)[:, -1] + 0.0


def _lane_sums(x3: np.ndarray, center: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum of d, sum of d^2) per slice, d = x - center, in the kernel's lane order."""
    n_k, n_m, n_l = x3.shape
    d = x3.astype(np.float64) - center[:, None, None]
    nb = n_l // LANES
    n4 = nb - nb % 4
    tail = n_l - nb * LANES
    acc = np.zeros((n_k, LANES))
    acc2 = np.zeros((n_k, LANES))
    if nb == 0:  # short rows: every element is a tail element, lane j gets column j
        acc[:, :n_l] = _sequential(d)
        acc2[:, :n_l] = _sequential(d * d)
    else:
        blocks = d[:, :, : nb * LANES].reshape(n_k, n_m, nb, LANES)
        parts, parts2 = [], []
        if n4:
            b0, b1, b2, b3 = (blocks[:, :, i:n4:4] for i in range(4))
            parts.append((b0 + b1) + (b2 + b3))
            parts2.append((b0 * b0 + b1 * b1) + (b2 * b2 + b3 * b3))
        if nb > n4:
            rest = blocks[:, :, n4:]
            parts.append(rest)
            parts2.append(rest * rest)
        if tail:
            t = np.zeros((n_k, n_m, 1, LANES))
            t[:, :, 0, :tail] = d[:, :, nb * LANES :]
            parts.append(t)
            parts2.append(t * t)
        acc[:] = _sequential(np.concatenate(parts, axis=2).reshape(n_k, -1, LANES))
        acc2[:] = _sequential(np.concatenate(parts2, axis=2).reshape(n_k, -1, LANES))
    for a in (acc, acc2):  # the kernel's _lane_total
        w = LANES
        while w > 1:
            w //= 2
            a[:, :w] = a[:, :w] + a[:, w : 2 * w]
    return acc[:, 0], acc2[:, 0]


def _stats(x3: np.ndarray, center: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    total, total2 = _lane_sums(x3, center)
    n = x3.shape[1] * x3.shape[2]
    corr = total / n
    return center + corr, total2 / n - corr * corr, corr


class _IEEEMath:
    """``math`` as compiled code sees it: a result out of range is inf or nan, not an exception."""

    inf, nan = math.inf, math.nan
    tanh, erfc = staticmethod(math.tanh), staticmethod(math.erfc)

    @staticmethod
    def exp(t: float) -> float:
        try:
            return math.exp(t)
        except OverflowError:
            return math.inf

    @staticmethod
    def expm1(t: float) -> float:
        try:
            return math.expm1(t)
        except OverflowError:
            return math.inf

    @staticmethod
    def log1p(t: float) -> float:
        try:
            return math.log1p(t)
        except ValueError:
            return -math.inf if t == -1.0 else math.nan


# activate() with IEEE semantics: its math calls never raise, and with np.float64 arguments its
# divisions give inf/nan instead of ZeroDivisionError (np.float64's reflected operators win)
_activate_ieee = types.FunctionType(activate.__code__, {**activate.__globals__, "math": _IEEEMath})


def _piecewise(act: int, x: np.ndarray, a: float, b: float) -> np.ndarray | None:
    """:func:`activate` of the codes whose every branch is comparisons and correctly rounded
    IEEE operations (+, -, *, /), as numpy array operations, which round the same way: the
    same bits (NaN kept where ``activate`` keeps it, +0.0 where it returns 0.0) without a
    Python call per element. None for the codes that call the C library (exp, tanh, erfc...),
    whose numpy counterparts may differ from it in the last bit."""
    nan = x != x
    if act == 1:  # LINEAR
        return a * x + b
    if act == 3:  # HARD_SIGMOID: min(v, 1.0) then max(0.0, .), as Python's min and max choose
        v = a * x + b
        w = np.where(v > 1.0, 1.0, v)
        return np.where(v != v, v, np.where(w > 0.0, w, 0.0))
    if act == 6:  # RELU
        return np.where((x > 0.0) | nan, x, 0.0)
    if act == 7:  # LEAKY_RELU
        return np.where((x >= 0.0) | nan, x, a * x)
    if act == 8:  # THRESHOLDED_RELU
        return np.where((x > a) | nan, x, 0.0)
    if act == 13:  # SOFTSIGN
        return x / (1.0 + np.abs(x))
    if act == 14:  # SHRINK
        return np.where(x > b, x - a, np.where(x < -b, x + a, np.where(nan, x, 0.0)))
    return None


def activate_array(act: int, values: np.ndarray, pa: float, pb: float) -> np.ndarray:
    """:func:`activate` of every element of float64 ``values``: array operations for the
    piecewise codes (:func:`_piecewise`), else per element (:func:`_activate_all`)."""
    flat = np.ascontiguousarray(values, dtype=np.float64).ravel()
    with np.errstate(all="ignore"):
        out = _piecewise(act, flat, pa, pb)
    if out is None:
        out = np.array(_activate_all(act, flat.tolist(), pa, pb), dtype=np.float64)
    return out.reshape(np.shape(values))


def _activate_all(act: int, values: list[float], pa: float, pb: float) -> list[float]:
    """``activate`` per element; Python's float errors (overflow, division by zero), which the
    compiled kernel does not have, are redone in IEEE semantics for the elements that raise."""
    try:
        return [activate(act, t, pa, pb) for t in values]
    except (ArithmeticError, ValueError):
        pass
    out = []
    f64 = np.float64
    for t in values:
        try:
            out.append(activate(act, t, pa, pb))
        except (ArithmeticError, ValueError):
            out.append(float(_activate_ieee(act, f64(t), f64(pa), f64(pb))))
    return out


def _operand(table: np.ndarray, tk: np.ndarray, tr: np.ndarray, const: bool, n: int) -> np.ndarray:
    """The factorized operand as (K, 1) or (K, n) float64 values ``T[tk[k], tr[r]]``."""
    if const:
        return table[tk, 0][:, None]
    return table[tk[:, None], tr[None, :n]]


def _slice_stats(x3: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) per slice by the kernel's passes: the variance clamped at 0, as the
    kernel clamps it before anything reads it."""
    # pass 1: deviations from each slice's first element
    center = x3[:, 0, 0].astype(np.float64)
    mean, var, corr = _stats(x3, center)
    far = corr * corr > SHIFT_LIMIT * var
    if far.any():  # pass 2 for the slices whose first element is far from the mean
        mean[far], var[far], _ = _stats(x3[far], mean[far])
    return mean, np.where(var < 0.0, 0.0, var)


def _scaled(
    xf: np.ndarray,
    mean: np.ndarray,
    inv: np.ndarray,
    s: np.ndarray,
    b: np.ndarray,
    a: np.ndarray,
    folded: bool,
) -> np.ndarray:
    """The output formula before the activation, in the kernel's association: ``folded`` where
    the operands are constant within a slice (the kernel folds them per slice)."""
    if folded:  # the kernel's per-slice folding
        return (xf - mean[:, None]) * (s * inv[:, None]) + (b + a)
    return s * ((xf - mean[:, None]) * inv[:, None]) + b + a


def normalize_numpy(
    x,
    x_sk,
    x_sm,
    out,
    o_sk,
    o_sm,
    n_slices,
    m_len,
    l_len,
    sc,
    sc_k,
    sc_r,
    sc_const,
    bi,
    bi_k,
    bi_r,
    bi_const,
    ad,
    ad_k,
    ad_r,
    ad_const,
    normalize,
    eps,
    act,
    pa,
    pb,
    mean_out,
    var_out,
) -> None:  # type: ignore[no-untyped-def]
    """Same arguments and effect as the numba kernel (``compiled._normalize``), bit for bit."""
    shape = (n_slices, m_len, l_len)
    n = m_len * l_len
    with np.errstate(all="ignore"):  # the kernel's IEEE results (inf, nan), without warnings
        x3 = _view(x, x_sk, x_sm, shape)
        mean, var = _slice_stats(x3)
        mean_out[:] = mean
        var_out[:] = var
        inv = 1.0 / np.sqrt(var + eps) if normalize else np.ones(n_slices)
        s = _operand(sc, sc_k, sc_r, sc_const, n)
        b = _operand(bi, bi_k, bi_r, bi_const, n)
        a = _operand(ad, ad_k, ad_r, ad_const, n)
        xf = x3.reshape(n_slices, n).astype(np.float64)
        v = _scaled(xf, mean, inv, s, b, a, folded=sc_const and bi_const and ad_const)
        if act != 0:
            v = activate_array(act, v, pa, pb)
        _view(out, o_sk, o_sm, shape)[...] = v.reshape(shape)
