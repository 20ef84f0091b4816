"""Accuracy of the reference against an arbitrary-precision (mpmath, 50 digits) computation:
every FLOAT32 and FLOAT16 output within 1 ULP of the correctly rounded result, on the hard data
regimes (large offset, spread near sqrt(Epsilon), constant slices) and through every activation."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from helpers import SPEC

from dmlconform import reference
from dmlconform.kernels import execute
from dmlconform.kernels import plan as make_plan
from dmlconform.specification.desc import parse_desc

mp = mpmath.mp


@pytest.fixture(autouse=True, params=["numba", "mirror"])
def path(request, monkeypatch):
    """Every accuracy test runs on both paths: the numba kernel and its numpy mirror (the path
    small cases take), forced whatever the tensor size."""
    monkeypatch.setattr(reference, "MIRROR_MAX_ELEMENTS", -1 if request.param == "numba" else 1 << 62)
    return request.param


def _mp_act(name, x, p):  # the spec formulas, evaluated in mpmath
    if name is None or name == "ACTIVATION_IDENTITY":
        return x
    f = {
        "ACTIVATION_LINEAR": lambda: p["Alpha"] * x + p["Beta"],
        "ACTIVATION_SIGMOID": lambda: 1 / (1 + mpmath.exp(-x)),
        "ACTIVATION_HARD_SIGMOID": lambda: max(mpmath.mpf(0), min(p["Alpha"] * x + p["Beta"], mpmath.mpf(1))),
        "ACTIVATION_TANH": lambda: mpmath.tanh(x),
        "ACTIVATION_SCALED_TANH": lambda: p["Alpha"] * mpmath.tanh(p["Beta"] * x),
        "ACTIVATION_RELU": lambda: max(mpmath.mpf(0), x),
        "ACTIVATION_LEAKY_RELU": lambda: x if x >= 0 else p["Alpha"] * x,
        "ACTIVATION_THRESHOLDED_RELU": lambda: x if x > p["Alpha"] else mpmath.mpf(0),
        "ACTIVATION_ELU": lambda: x if x >= 0 else p["Alpha"] * (mpmath.exp(x) - 1),
        "ACTIVATION_SCALED_ELU": lambda: (
            p["Gamma"] * x if x > 0 else p["Gamma"] * (p["Alpha"] * mpmath.exp(x) - p["Alpha"])
        ),
        "ACTIVATION_SOFTPLUS": lambda: mpmath.log(1 + mpmath.exp(p["Steepness"] * x)) / p["Steepness"],
        "ACTIVATION_PARAMETRIC_SOFTPLUS": lambda: p["Alpha"] * mpmath.log(1 + mpmath.exp(p["Beta"] * x)),
        "ACTIVATION_SOFTSIGN": lambda: x / (1 + abs(x)),
        "ACTIVATION_SHRINK": lambda: (
            x - p["Bias"] if x > p["Threshold"] else (x + p["Bias"] if x < -p["Threshold"] else mpmath.mpf(0))
        ),
        "ACTIVATION_CELU": lambda: (
            max(mpmath.mpf(0), x) + min(mpmath.mpf(0), p["Alpha"] * (mpmath.exp(x / p["Alpha"]) - 1))
        ),
        "ACTIVATION_GELU": lambda: x / 2 * (1 + mpmath.erf(x / mpmath.sqrt(2))),
    }[name]
    return f()


def mp_reference(desc, inputs):
    """Correctly rounded outputs (via 50-digit mpmath; float() of an mpf rounds to nearest)."""
    plan = make_plan(desc, SPEC)
    x = np.asarray(inputs[plan.input], dtype=np.float64)
    shape = x.shape
    scale = (
        np.broadcast_to(np.asarray(inputs[plan.scale], np.float64), shape) if plan.scale else np.ones(shape)
    )
    bias = np.broadcast_to(np.asarray(inputs[plan.bias], np.float64), shape) if plan.bias else np.zeros(shape)
    params = {k: mpmath.mpf(v) for k, v in plan.activation_params.items()}
    out = np.empty(shape)
    with mp.workdps(50):
        eps = mpmath.mpf(plan.epsilon)
        kept = plan.kept_axes
        for kidx in np.ndindex(*[shape[i] for i in kept]):
            sl = [slice(None)] * len(shape)
            for a, i in zip(kept, kidx, strict=False):
                sl[a] = i
            sl = tuple(sl)
            vals = [mpmath.mpf(float(v)) for v in x[sl].ravel()]
            n = len(vals)
            mean = mpmath.fsum(vals) / n
            var = mpmath.fsum((v - mean) ** 2 for v in vals) / n
            denom = mpmath.sqrt(var + eps) if plan.normalize_variance else mpmath.mpf(1)
            sv, bv = scale[sl].ravel(), bias[sl].ravel()
            res = [
                float(
                    _mp_act(
                        plan.activation,
                        mpmath.mpf(float(sv[i])) * ((vals[i] - mean) / denom) + mpmath.mpf(float(bv[i])),
                        params,
                    )
                )
                for i in range(n)
            ]
            out[sl] = np.array(res).reshape(x[sl].shape)
    return out


def within_one_ulp(got: np.ndarray, exact: np.ndarray, dtype) -> np.ndarray:
    correct = exact.astype(dtype)
    ulp = np.spacing(np.abs(correct)).astype(np.float64)
    return np.abs(got.astype(np.float64) - correct.astype(np.float64)) <= ulp


def desc_for(shape, axes, dtype, scale=False, bias=False, act=None):
    t = lambda s: {"DataType": dtype, "Sizes": list(s)}  # noqa: E731
    stat = [1 if i in axes else s for i, s in enumerate(shape)]
    return parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": t(shape),
                "ScaleTensor": t(stat) if scale else None,
                "BiasTensor": t(stat) if bias else None,
                "OutputTensor": t(shape),
                "Axes": list(axes),
                "NormalizeVariance": True,
                "FusedActivation": act,
            },
        }
    )


def regime(name, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(shape)
    if name == "normal":
        x = z
    elif name == "offset":  # |mean|/std = 1e3 (fp32) / 1e2 (fp16)
        x = (1e3 if dtype == np.float32 else 1e2) + z
    elif name == "tiny_spread":  # std near sqrt(eps)
        x = 5.0 + 3e-3 * z
    elif name == "constant":
        x = np.full(shape, 1.7)
    elif name == "far_first":  # each slice starts 40 std away: the kernel's second pass runs
        x = 3.0 + z
        x[..., 0] = 43.0 if dtype == np.float32 else 30.0
    return x.astype(dtype)


@pytest.mark.parametrize("dtype_name, dtype", [("FLOAT32", np.float32), ("FLOAT16", np.float16)])
@pytest.mark.parametrize("kind", ["normal", "offset", "tiny_spread", "constant", "far_first"])
@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 1, 300)], ids=["short_rows", "lane_blocks"])
def test_within_one_ulp_of_correctly_rounded(dtype_name, dtype, kind, shape):
    axes = (1, 2)
    x = regime(kind, shape, dtype, seed=len(kind))
    rng = np.random.default_rng(1)
    inputs = {
        "InputTensor": x,
        "ScaleTensor": rng.standard_normal((2, 1, 1)).astype(dtype),
        "BiasTensor": rng.standard_normal((2, 1, 1)).astype(dtype),
    }
    desc = desc_for(shape, axes, dtype_name, scale=True, bias=True)
    got = execute(desc, inputs)["OutputTensor"]
    exact = mp_reference(desc, inputs)
    ok = within_one_ulp(got, exact, dtype)
    assert ok.all(), (got[~ok], exact[~ok])


ACT_PARAMS = {
    "ACTIVATION_LINEAR": {"Alpha": 1.5, "Beta": -0.25},
    "ACTIVATION_PARAMETRIC_SOFTPLUS": {"Alpha": 0.5, "Beta": 2.0},
}


@pytest.mark.parametrize("act_name", sorted(SPEC.activations))
@pytest.mark.parametrize("dtype_name, dtype", [("FLOAT32", np.float32), ("FLOAT16", np.float16)])
def test_activations_within_one_ulp(act_name, dtype_name, dtype):
    shape, axes = (3, 16), (1,)
    x = regime("normal", shape, dtype, seed=3)
    x[0, :4] = [-12.0, 8.0, 0.0, 0.5]  # tails and branch points after normalization
    desc = desc_for(shape, axes, dtype_name, act={"Type": act_name, **ACT_PARAMS.get(act_name, {})})
    got = execute(desc, {"InputTensor": x})["OutputTensor"]
    exact = mp_reference(desc, {"InputTensor": x})
    ok = within_one_ulp(got, exact, dtype)
    assert ok.all(), (act_name, got[~ok], exact[~ok])


def test_batch_norm_statistics_within_one_ulp():
    shape = (3, 2, 5)
    x = regime("offset", shape, np.float32, seed=9)
    t = lambda s: {"DataType": "FLOAT32", "Sizes": list(s)}  # noqa: E731
    desc = parse_desc(
        {
            "type": "BATCH_NORMALIZATION_TRAINING",
            "desc": {
                "InputTensor": t(shape),
                "ScaleTensor": t((1, 2, 1)),
                "BiasTensor": t((1, 2, 1)),
                "OutputTensor": t(shape),
                "OutputMeanTensor": t((1, 2, 1)),
                "OutputVarianceTensor": t((1, 2, 1)),
                "Epsilon": 1e-5,
            },
        }
    )
    ones, zeros = np.ones((1, 2, 1), np.float32), np.zeros((1, 2, 1), np.float32)
    out = execute(desc, {"InputTensor": x, "ScaleTensor": ones, "BiasTensor": zeros})
    with mp.workdps(50):
        for c in range(2):
            vals = [mpmath.mpf(float(v)) for v in x[:, c, :].ravel()]
            mean = mpmath.fsum(vals) / len(vals)
            var = mpmath.fsum((v - mean) ** 2 for v in vals) / len(vals)
            for got, exact in (
                (out["OutputMeanTensor"][0, c, 0], mean),
                (out["OutputVarianceTensor"][0, c, 0], var),
            ):
                assert within_one_ulp(np.array([got]), np.array([float(exact)]), np.float32).all()
    assert within_one_ulp(
        out["OutputTensor"],
        mp_reference(desc, {"InputTensor": x, "ScaleTensor": ones, "BiasTensor": zeros}),
        np.float32,
    ).all()


@pytest.mark.parametrize("first", [0.0, 3.9, 4.1, 1e3, 1e6], ids=lambda f: f"first_at_{f}_std")
def test_statistics_float64_accurate_wherever_the_first_element_lies(first):
    """The kernel's first pass sums deviations from the slice's first element; when that element
    is more than 4 standard deviations from the mean it sums again from the mean. Both sides of
    that threshold, and far beyond it, must give float64-accurate statistics."""
    rng = np.random.default_rng(11)
    n = 1 << 16  # a far first element can make (mean - first)^2 / var as large as n - 1
    z = rng.standard_normal(n)
    z = (z - z.mean()) / z.std()
    x = (1e4 + z).astype(np.float32)
    x[0] = np.float32(1e4 + first)
    desc = desc_for((1, n), (1,), "FLOAT32")
    plan = make_plan(desc, SPEC)
    from dmlconform.reference import run_plan

    _, mean, var = run_plan(plan, {"InputTensor": x.reshape(1, n)}, np.dtype(np.float64))
    with mp.workdps(50):
        vals = [mpmath.mpf(float(v)) for v in x]
        m = mpmath.fsum(vals) / len(vals)
        v = mpmath.fsum((t - m) ** 2 for t in vals) / len(vals)
    assert abs(mean.item() - float(m)) <= 1e-14 * abs(float(m))
    assert abs(var.item() - float(v)) <= 1e-13 * float(v)
