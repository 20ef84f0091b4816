"""The float64 references of LOCAL_RESPONSE_NORMALIZATION, its GRAD and LP_NORMALIZATION
(dmlconform/reference/local.py) against mpmath at 60 digits, element by element with explicit
loops over the region the spec states (ONNX's channel window, a square over Height and Width for
CrossChannel FALSE, Alpha / LocalSize), sharing nothing with the numpy code but the desc; and the
gradient against central differences of an mpmath LRN (so it is the true gradient, F9)."""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest

import dmlconform as dc
from dmlconform.specification.desc import parse_desc
from dmlconform.tolerance import ulp_distance

mpmath.mp.dps = 60


def T(sizes, dt="FLOAT32"):
    return {"DataType": dt, "Sizes": list(sizes)}


def _lrn_desc(shape, cross, n, alpha, beta, bias, grad=False, dt="FLOAT32"):
    members = {"InputTensor": T(shape, dt), "CrossChannel": cross, "LocalSize": n}
    members.update({"Alpha": alpha, "Beta": beta, "Bias": bias})
    if grad:
        members.update({"InputGradientTensor": T(shape, dt), "OutputGradientTensor": T(shape, dt)})
        return parse_desc({"type": "LOCAL_RESPONSE_NORMALIZATION_GRAD", "desc": members})
    members["OutputTensor"] = T(shape, dt)
    return parse_desc({"type": "LOCAL_RESPONSE_NORMALIZATION", "desc": members})


def _mp(v):
    return mpmath.mpf(float(v))


def _region(idx, shape, cross, n):
    """Every index of idx's window: channels (or rows and columns) from i - floor((n-1)/2) to
    i + ceil((n-1)/2), clipped (the spec's semantics.window)."""
    lo, hi = (n - 1) // 2, n - 1 - (n - 1) // 2
    axes = [1] if cross else [2, 3]
    ranges = []
    for a in range(4):
        if a in axes:
            ranges.append(range(max(0, idx[a] - lo), min(shape[a] - 1, idx[a] + hi) + 1))
        else:
            ranges.append([idx[a]])
    return itertools.product(*ranges)


def _mp_lrn(x, cross, n, alpha, beta, bias):
    """An mpmath LRN of a nested dict {index: mpf} (the formula of the spec, LocalSize divisor)."""
    shape = x["shape"]
    a, b, k = _mp(np.float32(alpha)), _mp(np.float32(beta)), _mp(np.float32(bias))
    out = {}
    for idx in itertools.product(*(range(s) for s in shape)):
        s = mpmath.fsum(x[j] ** 2 for j in _region(idx, shape, cross, n))
        out[idx] = x[idx] * (k + a / n * s) ** (-b)
    return out


def _as_mp(arr):
    d = {idx: _mp(arr[idx]) for idx in itertools.product(*(range(s) for s in arr.shape))}
    d["shape"] = arr.shape
    return d


def _frac_ulps(ref64, exact: dict, dtype=np.float32):
    """(ULP distance after rounding both to dtype, float64 error in dtype ULPs at the exact value)."""
    exact64 = np.empty(ref64.shape)
    for idx in itertools.product(*(range(s) for s in ref64.shape)):
        exact64[idx] = float(exact[idx])
    rounded = ulp_distance(ref64.astype(dtype), exact64.astype(dtype))
    spacing = np.spacing(np.abs(exact64).astype(dtype)).astype(np.float64)
    frac = np.abs(ref64 - exact64) / np.where(spacing > 0, spacing, np.finfo(dtype).tiny)
    return float(rounded.max()), float(frac.max())


LRN_CASES = [
    # (shape, CrossChannel, LocalSize, Alpha, Beta, Bias)
    ((2, 5, 3, 3), True, 3, 1.0, 0.75, 1.0),
    ((1, 6, 2, 2), True, 4, 4.0, 1.0, 1.0),  # even: one channel further above
    ((1, 3, 2, 2), True, 7, 0.5, 0.5, 2.0),  # LocalSize past the channels: clipped, divisor 7
    ((1, 2, 5, 4), False, 3, 1.0, 0.75, 1.0),  # a 3 x 3 square over Height and Width
    ((1, 2, 4, 5), False, 2, 2.0, 2.0, 0.5),  # even square
    ((2, 3, 3, 3), True, 1, 1.0e-4, 0.75, 1.0),
]


@pytest.mark.parametrize("case", LRN_CASES, ids=lambda c: f"{c[0]}-cc{int(c[1])}-n{c[2]}")
def test_lrn_matches_mpmath(case):
    shape, cross, n, alpha, beta, bias = case
    x = np.random.default_rng(n).standard_normal(shape).astype(np.float32) * 2
    ref = dc.execute(_lrn_desc(*case), {"InputTensor": x}, float64=True)["OutputTensor"]
    exact = _mp_lrn(_as_mp(x), cross, n, alpha, beta, bias)
    ulps, frac = _frac_ulps(ref, exact)
    assert ulps <= 1 and frac < 1e-3, (ulps, frac)


def test_lrn_even_window_reaches_further_above():
    """The experiment's data (cases/directml/lrn-even-window): C = 6, all 1 but channel 2 = 10,
    LocalSize 4, Alpha 4, Beta 1, Bias 1 gives DirectML 1.15.4's [0.009709, 0.009615, 0.096154,
    0.009615, 0.25, 0.333333]: channel 0 sums channels 0-2 (10^2 + 2), channel 4 sums 3-5."""
    x = np.ones((1, 6, 1, 1), np.float32)
    x[0, 2] = 10
    ref = dc.execute(_lrn_desc((1, 6, 1, 1), True, 4, 4.0, 1.0, 1.0), {"InputTensor": x}, float64=True)
    want = [1 / 103, 1 / 104, 10 / 104, 1 / 104, 1 / 4, 1 / 3]
    np.testing.assert_allclose(ref["OutputTensor"].ravel(), want, rtol=1e-15)


@pytest.mark.parametrize("case", LRN_CASES, ids=lambda c: f"{c[0]}-cc{int(c[1])}-n{c[2]}")
def test_lrn_grad_is_the_gradient_of_lrn(case):
    """OutputGradient_k = d/dx_k sum_j g_j LRN(x)_j, by central differences of the mpmath LRN
    (step 1e-25 at 60 digits: truncation ~1e-50), within 1 float32 ULP of the result."""
    shape, cross, n, alpha, beta, bias = case
    r = np.random.default_rng(10 + n)
    x = r.standard_normal(shape).astype(np.float32)
    g = r.standard_normal(shape).astype(np.float32)
    desc = _lrn_desc(*case, grad=True)
    ref = dc.execute(desc, {"InputTensor": x, "InputGradientTensor": g}, float64=True)["OutputGradientTensor"]
    xm, h = _as_mp(x), mpmath.mpf("1e-25")
    exact = {}
    for k in itertools.product(*(range(s) for s in shape)):
        # only the outputs whose window holds x_k depend on it
        dep = [
            j for j in itertools.product(*(range(s) for s in shape)) if k in set(_region(j, shape, cross, n))
        ]
        total = mpmath.mpf(0)
        for sign in (1, -1):
            xs = dict(xm)
            xs[k] = xm[k] + sign * h
            a, b, bb = _mp(np.float32(alpha)), _mp(np.float32(beta)), _mp(np.float32(bias))
            for j in dep:
                s = mpmath.fsum(xs[i] ** 2 for i in _region(j, shape, cross, n))
                total += sign * _mp(g[j]) * xs[j] * (bb + a / n * s) ** (-b)
        exact[k] = total / (2 * h)
    ulps, frac = _frac_ulps(ref, exact)
    assert ulps <= 1 and frac < 1e-2, (ulps, frac)


LP_CASES = [
    ((3, 5), 1, 2, 1e-5),
    ((3, 5), 1, 1, 1e-5),
    ((2, 3, 4), 0, 2, 0.0),
    ((2, 3, 4), 2, 1, 1e-3),
    ((4, 1, 3), 1, 2, 1.0),  # a size-1 axis: x / sqrt(x^2 + 1)
    ((2, 40), 1, 1, 30.0),  # Epsilon comparable to the squared norm
]


@pytest.mark.parametrize("case", LP_CASES, ids=str)
def test_lp_matches_mpmath(case):
    shape, axis, p, eps = case
    x = (np.random.default_rng(axis + p).standard_normal(shape) * 3).astype(np.float32)
    desc = parse_desc(
        {
            "type": "LP_NORMALIZATION",
            "desc": {"InputTensor": T(shape), "OutputTensor": T(shape), "Axis": axis, "Epsilon": eps, "P": p},
        }
    )
    ref = dc.execute(desc, {"InputTensor": x}, float64=True)["OutputTensor"]
    e = _mp(np.float32(eps))
    exact = {}
    for idx in itertools.product(*(range(s) for s in shape)):
        line = [idx[:axis] + (i,) + idx[axis + 1 :] for i in range(shape[axis])]
        if p == 1:
            norm_sq = mpmath.fsum(abs(_mp(x[j])) for j in line) ** 2
        else:
            norm_sq = mpmath.fsum(_mp(x[j]) ** 2 for j in line)
        exact[idx] = _mp(x[idx]) / mpmath.sqrt(norm_sq + e)
    ulps, frac = _frac_ulps(ref, exact)
    assert ulps <= 1 and frac < 1e-3, (ulps, frac)


def test_lp_zero_slice():
    """cases/directml/lp-zero-slice: 0 with Epsilon > 0, NaN (0/0) with Epsilon 0."""
    for eps, want in ((1e-5, 0.0), (0.0, np.nan)):
        desc = parse_desc(
            {
                "type": "LP_NORMALIZATION",
                "desc": {
                    "InputTensor": T((2, 3)),
                    "OutputTensor": T((2, 3)),
                    "Axis": 1,
                    "Epsilon": eps,
                    "P": 2,
                },
            }
        )
        out = dc.execute(desc, {"InputTensor": np.zeros((2, 3), np.float32)})["OutputTensor"]
        np.testing.assert_array_equal(out, np.full((2, 3), want, np.float32))
