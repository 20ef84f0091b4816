"""The local_response and lp_norm budget models in both directions: the numpy backend (a plain
float32 port) passes at short and long windows and norms, and each deliberately broken lowering
(window placed below, Alpha not divided by LocalSize, P = 1 without abs, Epsilon outside the
root, a FLOAT16 sum of squares that saturates as DirectML's does, F10) fails, small and large."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
from helpers import SPEC

import dmlconform as dc
from dmlconform.backends import broken
from dmlconform.backends.numpy_backend import NumpyBackend
from dmlconform.specification.desc import parse_desc
from dmlconform.tolerance import compare
from dmlconform.tolerance.options import NO_OPTIONS


def T(sizes, dt="FLOAT32"):
    return {"DataType": dt, "Sizes": list(sizes)}


def lrn(shape, cross, n, alpha=1.0, beta=0.75, bias=1.0, grad=False, dt="FLOAT32"):
    members = {"InputTensor": T(shape, dt), "CrossChannel": cross, "LocalSize": n}
    members.update({"Alpha": alpha, "Beta": beta, "Bias": bias})
    if grad:
        members.update({"InputGradientTensor": T(shape, dt), "OutputGradientTensor": T(shape, dt)})
        return parse_desc({"type": "LOCAL_RESPONSE_NORMALIZATION_GRAD", "desc": members})
    members["OutputTensor"] = T(shape, dt)
    return parse_desc({"type": "LOCAL_RESPONSE_NORMALIZATION", "desc": members})


def lp(shape, axis, p, eps=1e-5, dt="FLOAT32"):
    desc = {"InputTensor": T(shape, dt), "OutputTensor": T(shape, dt), "Axis": axis, "Epsilon": eps, "P": p}
    return parse_desc({"type": "LP_NORMALIZATION", "desc": desc})


def verdict(backend, desc, seed=0, scale=1.0):
    r = np.random.default_rng(seed)
    npdt = np.float16 if desc.tensors()["InputTensor"].data_type == "FLOAT16" else np.float32
    inputs = {
        k: (r.standard_normal(t.sizes) * scale).astype(npdt)
        for k, t in desc.tensors().items()
        if k in ("InputTensor", "InputGradientTensor")
    }
    return compare(desc, backend.execute(desc, inputs), dc.execute(desc, inputs), inputs, SPEC, NO_OPTIONS)


SMALL_LRN = [
    lrn((2, 6, 3, 3), True, 4),
    lrn((2, 6, 3, 3), True, 4, grad=True),
    lrn((1, 2, 6, 6), False, 2, alpha=2.0, beta=1.0),
    lrn((1, 2, 6, 6), False, 2, alpha=2.0, beta=1.0, grad=True),
]
LARGE_LRN = [  # windows of 1024 channels, and of 32 x 32 = 1024 elements
    lrn((1, 3000, 1, 2), True, 1024, alpha=4.0),
    lrn((1, 3000, 1, 2), True, 1024, alpha=4.0, grad=True),
    lrn((1, 1, 80, 80), False, 32, alpha=16.0, beta=0.5),
    lrn((1, 1, 80, 80), False, 32, alpha=16.0, beta=0.5, grad=True),
]
SMALL_LP = [
    lp((4, 7), 1, 1, 1e-3),
    lp((4, 7), 1, 2, 1e-3),
    lp((3, 5, 2), 0, 1, 1.0),
    lp((3, 5, 2), 0, 2, 1.0),
]
LARGE_LP = [lp((2, 1 << 19), 1, 1, 1e3), lp((2, 1 << 19), 1, 2, 1e5), lp((1 << 17, 2), 0, 2, 1e5, "FLOAT16")]


def _id(desc):
    t = desc.tensors()["InputTensor"]
    attrs = ",".join(f"{k}={v}" for k, v in desc.members.items() if not hasattr(v, "sizes"))
    return f"{desc.operator}-{'x'.join(map(str, t.sizes))}-{t.data_type}-{attrs}"


@pytest.mark.parametrize("desc", SMALL_LRN + LARGE_LRN + SMALL_LP + LARGE_LP, ids=_id)
def test_the_numpy_backend_passes(desc):
    c = verdict(NumpyBackend(), desc)
    assert c.passed, c.message


@pytest.mark.parametrize("desc", SMALL_LRN + LARGE_LRN, ids=_id)
@pytest.mark.parametrize("mutant", ["LrnWindowBelow", "LrnAlphaNotDivided"])
def test_broken_lrn_fails(desc, mutant):
    c = verdict(broken.BROKEN_BACKENDS[mutant](), desc)
    assert not c.passed, c.message


@pytest.mark.parametrize("desc", SMALL_LP + LARGE_LP, ids=_id)
@pytest.mark.parametrize("mutant", ["LpWithoutAbs", "LpEpsilonOutsideRoot"])
def test_broken_lp_fails(desc, mutant):
    if mutant == "LpWithoutAbs" and dc.plan(desc, SPEC).p != 1:
        pytest.skip("P = 2 squares: no absolute value to forget")
    c = verdict(broken.BROKEN_BACKENDS[mutant](), desc)
    assert not c.passed, c.message


class Float16SumOfSquares(NumpyBackend):
    """The sum of squares held in FLOAT16 and clamped at 65504 (DirectML 1.15.4, finding F10)."""

    name: ClassVar[str] = "test:Float16SumOfSquares"

    def lp_norm(self, x, plan, dt):
        if plan.p == 2 and x.dtype == np.float32:
            sq = np.minimum(
                np.sum((x * x).astype(np.float16), axis=plan.axes, keepdims=True, dtype=np.float16), 65504
            )
            return np.sqrt(sq.astype(dt))
        return super().lp_norm(x, plan, dt)


def test_a_saturating_float16_sum_of_squares_fails():
    """family-facts.md hard case 19: eight FLOAT16 100s, P 2: 100 / sqrt(65504) = 0.3906 where
    the output is 0.35355."""
    desc = lp((1, 8), 1, 2, 1e-5, "FLOAT16")
    x = {"InputTensor": np.full((1, 8), 100, np.float16)}
    ref = dc.execute(desc, x)
    assert compare(desc, NumpyBackend().execute(desc, x), ref, x, SPEC, NO_OPTIONS).passed
    c = compare(desc, Float16SumOfSquares().execute(desc, x), ref, x, SPEC, NO_OPTIONS)
    assert not c.passed and "0.39" in c.message, c.message


@pytest.mark.parametrize("desc", LARGE_LRN + LARGE_LP, ids=_id)
def test_budgets_stay_tight_at_large_n(desc):
    """The long windows and norms widen the budget like log2(n), not n: an output off by 2^-14
    of itself (FLOAT32; 2^-7 FLOAT16) fails."""
    r = np.random.default_rng(1)
    fp16 = desc.tensors()["InputTensor"].data_type == "FLOAT16"
    npdt = np.float16 if fp16 else np.float32
    inputs = {
        k: r.standard_normal(t.sizes).astype(npdt)
        for k, t in desc.tensors().items()
        if k in ("InputTensor", "InputGradientTensor")
    }
    ref = dc.execute(desc, inputs)
    out = {
        k: (v.astype(np.float64) * (1 + 2.0 ** (-7 if fp16 else -14))).astype(npdt) for k, v in ref.items()
    }
    assert not compare(desc, out, ref, inputs, SPEC, NO_OPTIONS).passed
