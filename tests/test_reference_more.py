"""The reference for the kernels beside the centred normalization (dmlconform/reference/more.py)
against independent evaluations: mpmath at 60 digits, element by element with explicit loops
(sharing nothing with the numpy code but the desc), and the semantics the spec states in words:
MEAN_VARIANCE_NORMALIZATION2 with UseMean TRUE is MVN1; BATCH_NORMALIZATION fed a slice's own
statistics is BATCH_NORMALIZATION_TRAINING; the training gradient is the derivative of
BATCH_NORMALIZATION_TRAINING's output (finite differences in mpmath)."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from helpers import SPEC

import dmlconform as dc
from dmlconform.generation.legal import legal_descs
from dmlconform.specification.desc import parse_desc
from dmlconform.tolerance import ulp_distance

mpmath.mp.dps = 60


def T(sizes, dt="FLOAT32"):
    return {"DataType": dt, "Sizes": list(sizes)}


def rng(seed):
    return np.random.default_rng(seed)


def _index_sets(shape, axes):
    """For each kept index, the list of full indices of its slice (the reduced axes varying)."""
    kept = [i for i in range(len(shape)) if i not in axes]
    groups = {}
    for idx in itertools.product(*(range(s) for s in shape)):
        groups.setdefault(tuple(idx[i] for i in kept), []).append(idx)
    return list(groups.values())


def _b(arr, idx):
    """Element of a broadcast operand at a full index (size-1 dims repeat)."""
    return mpmath.mpf(float(arr[tuple(0 if s == 1 else i for s, i in zip(arr.shape, idx, strict=True))]))


def _ulps_vs_exact(ref64, exact, dtype):
    """(max ULP distance of the rounded reference from the rounded exact value, max float64 error
    in units of the output type's ULP)."""
    exact64 = np.array([float(v) for v in exact.ravel()]).reshape(exact.shape)
    rounded = ulp_distance(ref64.astype(dtype), exact64.astype(dtype))
    spacing = np.spacing(np.abs(exact64).astype(dtype)).astype(np.float64)
    frac = np.abs(ref64 - exact64) / np.where(spacing > 0, spacing, np.finfo(dtype).tiny)
    return float(rounded.max()), float(frac.max())


# ---------------------------------------------------------------------------------------------
# MVN2 without the mean step: x / sqrt(mean(x^2) + eps)


@pytest.mark.parametrize("seed", range(4))
def test_mvn2_second_moment_matches_mpmath(seed):
    r = rng(seed)
    shape, axes = (2, 3, 5), [1, 2]
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION2",
            "desc": {
                "InputTensor": T(shape),
                "ScaleTensor": T((1, 3, 1)),
                "BiasTensor": T((2, 1, 5)),
                "OutputTensor": T(shape),
                "Axes": axes,
                "UseMean": False,
                "UseVariance": True,
                "Epsilon": 1e-3,
            },
        }
    )
    x = (r.standard_normal(shape) * 10 ** r.uniform(-2, 2) + r.uniform(-5, 5)).astype(np.float32)
    s, b = r.uniform(0.5, 2, (1, 3, 1)).astype(np.float32), r.uniform(-1, 1, (2, 1, 5)).astype(np.float32)
    ref = dc.execute(desc, {"InputTensor": x, "ScaleTensor": s, "BiasTensor": b}, float64=True)[
        "OutputTensor"
    ]
    eps = mpmath.mpf(float(np.float32(1e-3)))
    exact = np.empty(shape, dtype=object)
    for group in _index_sets(shape, axes):
        ms = mpmath.fsum(mpmath.mpf(float(x[i])) ** 2 for i in group) / len(group)
        for i in group:
            exact[i] = _b(s, i) * mpmath.mpf(float(x[i])) / mpmath.sqrt(ms + eps) + _b(b, i)
    ulps, frac = _ulps_vs_exact(ref, exact, np.float32)
    assert ulps <= 1 and frac < 1e-3, (ulps, frac)


def test_mvn2_with_the_mean_step_is_mvn1():
    r = rng(7)
    for desc in legal_descs("MEAN_VARIANCE_NORMALIZATION2", "6_4", count=40, seed=3, spec=SPEC):
        if not desc.members.get("UseMean"):
            continue
        inputs = {
            k: r.standard_normal(t.sizes).astype(np.float32)
            for k, t in desc.tensors().items()
            if k != "OutputTensor"
        }
        members = {k: v for k, v in desc.members.items() if k not in ("UseMean", "UseVariance")}
        members["NormalizeVariance"] = bool(desc.members["UseVariance"])
        mvn1 = dc.OperatorDesc("MEAN_VARIANCE_NORMALIZATION1", members)
        a = dc.execute(desc, inputs, float64=True)["OutputTensor"]
        b = dc.execute(mvn1, inputs, float64=True)["OutputTensor"]
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# BATCH_NORMALIZATION: the documented formula with given statistics


@pytest.mark.parametrize("dt", ["FLOAT32", "FLOAT16"])
def test_batch_normalization_matches_mpmath(dt):
    r = rng(11)
    npdt = np.float32 if dt == "FLOAT32" else np.float16
    shape = (2, 3, 4, 2)
    sizes = {
        "MeanTensor": (1, 3, 1, 1),
        "VarianceTensor": (1, 3, 4, 1),
        "ScaleTensor": (2, 1, 1, 2),
        "BiasTensor": (1, 1, 1, 1),
    }
    desc = parse_desc(
        {
            "type": "BATCH_NORMALIZATION",
            "desc": {
                "InputTensor": T(shape, dt),
                **{k: T(v, dt) for k, v in sizes.items()},
                "OutputTensor": T(shape, dt),
                "Spatial": True,
                "Epsilon": 1e-5,
                "FusedActivation": {"Type": "ACTIVATION_ELU", "Alpha": 0.5},
            },
        }
    )
    inputs = {"InputTensor": (r.standard_normal(shape) * 3 + 50).astype(npdt)}
    inputs["MeanTensor"] = (50 + r.standard_normal(sizes["MeanTensor"])).astype(npdt)
    inputs["VarianceTensor"] = r.uniform(0.1, 9, sizes["VarianceTensor"]).astype(npdt)
    inputs["ScaleTensor"] = r.uniform(-2, 2, sizes["ScaleTensor"]).astype(npdt)
    inputs["BiasTensor"] = r.uniform(-1, 1, sizes["BiasTensor"]).astype(npdt)
    ref = dc.execute(desc, inputs, float64=True)["OutputTensor"]
    eps = mpmath.mpf(float(np.float32(1e-5)))
    exact = np.empty(shape, dtype=object)
    for i in itertools.product(*(range(s) for s in shape)):
        x = mpmath.mpf(float(inputs["InputTensor"][i]))
        y = (
            _b(inputs["ScaleTensor"], i)
            * (x - _b(inputs["MeanTensor"], i))
            / mpmath.sqrt(_b(inputs["VarianceTensor"], i) + eps)
        )
        y += _b(inputs["BiasTensor"], i)
        exact[i] = y if y >= 0 else mpmath.mpf(float(np.float32(0.5))) * mpmath.expm1(y)
    ulps, frac = _ulps_vs_exact(ref, exact, npdt)
    assert ulps <= 1 and frac < 1e-3, (ulps, frac)


def test_batch_normalization_fed_its_own_statistics_is_batch_normalization_training():
    r = rng(5)
    for desc in legal_descs("BATCH_NORMALIZATION_TRAINING", "6_4", count=30, seed=9, spec=SPEC):
        if desc.members.get("FusedAddTensor") is not None:
            continue
        inputs = {
            k: r.standard_normal(t.sizes).astype(np.float32)
            for k, t in desc.tensors().items()
            if k in ("InputTensor", "ScaleTensor", "BiasTensor")
        }
        out = dc.execute(desc, inputs, float64=True)
        m = desc.members
        bn = dc.OperatorDesc(
            "BATCH_NORMALIZATION",
            {
                "InputTensor": m["InputTensor"],
                "MeanTensor": m["OutputMeanTensor"],
                "VarianceTensor": m["OutputVarianceTensor"],
                "ScaleTensor": m["ScaleTensor"],
                "BiasTensor": m["BiasTensor"],
                "OutputTensor": m["OutputTensor"],
                "Spatial": True,
                "Epsilon": m.get("Epsilon", 0.0),
                "FusedActivation": m.get("FusedActivation"),
            },
        )
        feed = {
            **inputs,
            "MeanTensor": out["OutputMeanTensor"],
            "VarianceTensor": out["OutputVarianceTensor"],
        }
        got = dc.execute(bn, feed, float64=True)["OutputTensor"]
        np.testing.assert_allclose(got, out["OutputTensor"], rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------------------------
# The gradients


def _grad_desc(op, shape, stat, dt="FLOAT32", eps=1e-3):
    return parse_desc(
        {
            "type": op,
            "desc": {
                "InputTensor": T(shape, dt),
                "InputGradientTensor": T(shape, dt),
                "MeanTensor": T(stat, dt),
                "VarianceTensor": T(stat, dt),
                "ScaleTensor": T(stat, dt),
                "OutputGradientTensor": T(shape, dt),
                "OutputScaleGradientTensor": T(stat, dt),
                "OutputBiasGradientTensor": T(stat, dt),
                "Epsilon": eps,
            },
        }
    )


def _grad_inputs(r, shape, stat, npdt=np.float32):
    x = (r.standard_normal(shape) * 2 + 3).astype(npdt)
    axes = tuple(i for i, s in enumerate(stat) if s == 1)
    return {
        "InputTensor": x,
        "InputGradientTensor": r.standard_normal(shape).astype(npdt),
        "MeanTensor": x.astype(np.float64).mean(axis=axes, keepdims=True).astype(npdt),
        "VarianceTensor": x.astype(np.float64).var(axis=axes, keepdims=True).astype(npdt),
        "ScaleTensor": r.uniform(0.5, 2, stat).astype(npdt),
    }


def _mp_grad(inputs, shape, stat, eps, batch):
    """Independent mpmath evaluation: the documented sums, and for ``batch`` the derivative of
    Scale * (x - Mean) / sqrt(Variance + eps) through the batch statistics (whose values are
    the bound Mean and Variance), written out per slice."""
    axes = [i for i, s in enumerate(stat) if s == 1]
    e = mpmath.mpf(float(np.float32(eps)))
    og = np.empty(shape, dtype=object)
    sg = np.empty(stat, dtype=object)
    bg = np.empty(stat, dtype=object)
    g = {k: v for k, v in inputs.items()}
    for group in _index_sets(shape, axes):
        i0 = group[0]
        si = tuple(0 if s == 1 else i for s, i in zip(stat, i0, strict=True))
        n = len(group)
        x = [mpmath.mpf(float(g["InputTensor"][i])) for i in group]
        dy = [mpmath.mpf(float(g["InputGradientTensor"][i])) for i in group]
        m, v, s = (mpmath.mpf(float(g[k][si])) for k in ("MeanTensor", "VarianceTensor", "ScaleTensor"))
        sd = mpmath.sqrt(v + e)
        bg[si] = mpmath.fsum(dy)
        sg[si] = mpmath.fsum(a * (b - m) for a, b in zip(dy, x, strict=True)) / sd
        if not batch:
            for i, a in zip(group, dy, strict=True):
                og[i] = a * s / sd
            continue
        # centred on MeanTensor (spec semantics.centre_with: mean, doc_notes bound-mean: what
        # every DirectML release computes): d/dx_j of sum_k dy_k * s * (x_k - M) / sqrt(V + e)
        # with M's derivative the batch mean's and V's that of mean((x - M)^2)
        xc = [b - m for b in x]
        mdy = mpmath.fsum(dy) / n
        c1 = mpmath.fsum(a * b for a, b in zip(dy, xc, strict=True)) / n
        for i, a, c in zip(group, dy, xc, strict=True):
            og[i] = s / sd * (a - mdy - c * c1 / (v + e))
    return og, sg, bg


@pytest.mark.parametrize(
    "op, batch", [("BATCH_NORMALIZATION_GRAD", False), ("BATCH_NORMALIZATION_TRAINING_GRAD", True)]
)
@pytest.mark.parametrize("dt", ["FLOAT32", "FLOAT16"])
def test_gradients_match_mpmath(op, batch, dt):
    npdt = np.float32 if dt == "FLOAT32" else np.float16
    r = rng(13)
    for shape, stat in (((3, 4, 5), (1, 4, 1)), ((2, 3, 2, 2), (1, 1, 1, 1)), ((6,), (1,))):
        desc = _grad_desc(op, shape, stat, dt)
        inputs = _grad_inputs(r, shape, stat, npdt)
        ref = dc.execute(desc, inputs, float64=True)
        og, sg, bg = _mp_grad(inputs, shape, stat, 1e-3, batch)
        for name, exact in (
            ("OutputGradientTensor", og),
            ("OutputScaleGradientTensor", sg),
            ("OutputBiasGradientTensor", bg),
        ):
            ulps, frac = _ulps_vs_exact(ref[name], exact, npdt)
            assert ulps <= 1 and frac < 1e-2, (op, shape, name, ulps, frac)


def test_training_gradient_is_the_derivative_of_batch_normalization_training():
    """Central finite differences (mpmath, 60 digits) of sum(dy * BNT(x)) reproduce
    OutputGradient: the typo-resolved formula (InputCentered = Input - mean(Input)) is the
    gradient through the batch statistics."""
    r = rng(17)
    shape, stat = (4, 3), (1, 3)
    inputs = _grad_inputs(r, shape, stat, np.float32)
    x = inputs["InputTensor"]
    inputs["MeanTensor"] = x.astype(np.float64).mean(axis=0, keepdims=True)  # exact batch stats (float64)
    inputs["VarianceTensor"] = x.astype(np.float64).var(axis=0, keepdims=True)
    desc = _grad_desc("BATCH_NORMALIZATION_TRAINING_GRAD", shape, stat, "FLOAT32", eps=1e-3)
    got = dc.execute(desc, inputs, float64=True)["OutputGradientTensor"]
    e = mpmath.mpf(float(np.float32(1e-3)))

    def loss(xs):
        total = mpmath.mpf(0)
        for c in range(shape[1]):
            col = [xs[k][c] for k in range(shape[0])]
            m = mpmath.fsum(col) / len(col)
            v = mpmath.fsum((a - m) ** 2 for a in col) / len(col)
            s = mpmath.mpf(float(inputs["ScaleTensor"][0, c]))
            for k in range(shape[0]):
                total += (
                    mpmath.mpf(float(inputs["InputGradientTensor"][k, c]))
                    * s
                    * (col[k] - m)
                    / mpmath.sqrt(v + e)
                )
        return total

    base = [[mpmath.mpf(float(x[k, c])) for c in range(shape[1])] for k in range(shape[0])]
    h = mpmath.mpf("1e-20")
    for k in range(shape[0]):
        for c in range(shape[1]):
            up = [row[:] for row in base]
            dn = [row[:] for row in base]
            up[k][c] += h
            dn[k][c] -= h
            fd = (loss(up) - loss(dn)) / (2 * h)
            assert math.isclose(float(fd), got[k, c], rel_tol=1e-9, abs_tol=1e-12), (
                k,
                c,
                float(fd),
                got[k, c],
            )


@pytest.mark.parametrize(
    "case",
    [
        "batch_normalization/required-members/complete.yaml",
        "batch_normalization_grad/required-members/complete.yaml",
        "batch_normalization_training_grad/required-members/complete.yaml",
        "mean_variance_normalization2/supported-dimension-count/one-dim.yaml",
    ],
)
def test_execute_command_runs_the_new_kernels(case, capsys):
    from pathlib import Path

    from dmlconform.cli import main

    path = Path(__file__).resolve().parent.parent / "cases" / case
    assert main(["execute", str(path)]) == 0
    out = capsys.readouterr().out
    assert "shape" in out and "no finite values" not in out
