"""The budgets of the kernels beside the centred normalization (dmlconform/tolerance/ (pointwise.py, rms.py, gradients.py)):
a sound float32 implementation (the numpy backend) passes, and results that follow another
reading of the docs fail: epsilon outside the square root, gradients that ignore the batch
statistics, a centred variance where MVN2 without the mean step takes the second moment."""

from __future__ import annotations

import numpy as np
from helpers import SPEC

import dmlconform as dc
from dmlconform import tolerance
from dmlconform.backends.numpy_backend import NumpyBackend
from dmlconform.generation.data import make_inputs, regimes_for
from dmlconform.generation.legal import legal_descs
from dmlconform.specification.desc import parse_desc
from dmlconform.tolerance.options import NO_OPTIONS


def T(sizes, dt="FLOAT32"):
    return {"DataType": dt, "Sizes": list(sizes)}


def _compare(desc, got, inputs):
    ref = dc.execute(desc, inputs)
    return tolerance.compare(desc, got, ref, inputs, SPEC, NO_OPTIONS)


def test_the_numpy_backend_passes_every_regime_of_the_new_kernels():
    backend = NumpyBackend()
    for op in (
        "BATCH_NORMALIZATION",
        "BATCH_NORMALIZATION_GRAD",
        "BATCH_NORMALIZATION_TRAINING_GRAD",
        "MEAN_VARIANCE_NORMALIZATION2",
    ):
        for i, desc in enumerate(legal_descs(op, "6_4", count=12, seed=21, spec=SPEC)):
            if desc.members.get("UseMean", False):
                continue  # the centred path is the normalization model's (tests/test_tolerance.py)
            for regime in regimes_for(desc, SPEC):
                inputs = make_inputs(desc, regime, i, spec=SPEC)
                res = _compare(desc, backend.execute(desc, inputs), inputs)
                assert res.passed, (op, regime, res.message)


def _bn(eps=1e-5):
    return parse_desc(
        {
            "type": "BATCH_NORMALIZATION",
            "desc": {
                "InputTensor": T((4, 8, 6)),
                "MeanTensor": T((1, 8, 1)),
                "VarianceTensor": T((1, 8, 1)),
                "ScaleTensor": T((1, 8, 1)),
                "BiasTensor": T((1, 8, 1)),
                "OutputTensor": T((4, 8, 6)),
                "Spatial": True,
                "Epsilon": eps,
            },
        }
    )


def test_batch_normalization_epsilon_outside_the_square_root_fails():
    r = np.random.default_rng(1)
    desc = _bn()
    x = (r.standard_normal((4, 8, 6)) * 3e-3).astype(np.float32)
    inputs = {
        "InputTensor": x,
        "MeanTensor": x.mean(axis=(0, 2), keepdims=True),
        "VarianceTensor": x.var(axis=(0, 2), keepdims=True),
        "ScaleTensor": np.ones((1, 8, 1), np.float32),
        "BiasTensor": np.zeros((1, 8, 1), np.float32),
    }
    good = NumpyBackend().execute(desc, inputs)
    assert _compare(desc, good, inputs).passed
    f = {k: v.astype(np.float32) for k, v in inputs.items()}
    bad = (f["InputTensor"] - f["MeanTensor"]) / (np.sqrt(f["VarianceTensor"]) + np.float32(1e-5))
    assert not _compare(desc, {"OutputTensor": bad.astype(np.float32)}, inputs).passed


def test_batch_normalization_budget_is_a_few_ulps_on_centred_data():
    r = np.random.default_rng(2)
    desc = _bn()
    x = r.standard_normal((4, 8, 6)).astype(np.float32)
    inputs = {
        "InputTensor": x,
        "MeanTensor": np.zeros((1, 8, 1), np.float32),
        "VarianceTensor": np.ones((1, 8, 1), np.float32),
        "ScaleTensor": np.ones((1, 8, 1), np.float32),
        "BiasTensor": np.zeros((1, 8, 1), np.float32),
    }
    ref = dc.execute(desc, inputs)["OutputTensor"]
    off = lambda k: {"OutputTensor": (ref.view(np.int32) + np.int32(k)).view(np.float32)}  # noqa: E731
    assert _compare(desc, off(1), inputs).passed
    assert not _compare(desc, off(64), inputs).passed


def _grad(op):
    stat = (1, 5, 1)
    return parse_desc(
        {
            "type": op,
            "desc": {
                "InputTensor": T((6, 5, 7)),
                "InputGradientTensor": T((6, 5, 7)),
                "MeanTensor": T(stat),
                "VarianceTensor": T(stat),
                "ScaleTensor": T(stat),
                "OutputGradientTensor": T((6, 5, 7)),
                "OutputScaleGradientTensor": T(stat),
                "OutputBiasGradientTensor": T(stat),
                "Epsilon": 1e-5,
            },
        }
    )


def test_training_gradient_without_the_batch_terms_fails():
    desc = _grad("BATCH_NORMALIZATION_TRAINING_GRAD")
    inputs = make_inputs(desc, "standard_normal", 3, spec=SPEC)
    good = NumpyBackend().execute(desc, inputs)
    assert _compare(desc, good, inputs).passed
    as_given = NumpyBackend().execute(dc.OperatorDesc("BATCH_NORMALIZATION_GRAD", desc.members), inputs)
    assert not _compare(desc, as_given, inputs).passed
    # and a scale gradient off by a relative 2^-12 fails too
    wrong = dict(good)
    wrong["OutputScaleGradientTensor"] = (good["OutputScaleGradientTensor"] * np.float32(1 + 2**-12)).astype(
        np.float32
    )
    assert not _compare(desc, wrong, inputs).passed


def test_training_gradient_of_a_constant_slice_centred_on_mean_tensor_is_zero():
    """A constant slice, Variance 0, Epsilon 1e-12 (the constant_slices regime) whose MeanTensor
    is the data's value: centred on MeanTensor (doc_notes bound-mean) the input gradient is 0
    exactly, and the numpy backend computes that. An implementation that recomputes the batch
    mean in float32 instead (one ULP off: x - mean ~ 2e-7, squared over var + eps ~ 2e5) is
    computing the printed reading, which the budget no longer excuses."""
    desc = parse_desc(
        {
            "type": "BATCH_NORMALIZATION_TRAINING_GRAD",
            "desc": {
                **{k: T((7, 7)) for k in ("InputTensor", "InputGradientTensor", "OutputGradientTensor")},
                **{k: T((1, 1)) for k in ("MeanTensor", "VarianceTensor", "ScaleTensor")},
                **{k: T((1, 1)) for k in ("OutputScaleGradientTensor", "OutputBiasGradientTensor")},
                "Epsilon": 1e-12,
            },
        }
    )
    inputs = {
        "InputTensor": np.full((7, 7), -3.5779676, np.float32),
        "InputGradientTensor": np.ones((7, 7), np.float32),
        "MeanTensor": np.full((1, 1), -3.5779676, np.float32),  # the statistics of that data
        "VarianceTensor": np.zeros((1, 1), np.float32),
        "ScaleTensor": np.ones((1, 1), np.float32),
    }
    got = NumpyBackend().execute(desc, inputs)
    assert not got["OutputGradientTensor"].any()
    assert _compare(desc, got, inputs).passed
    # the printed reading in float32: the batch mean one ULP off, its square over Epsilon
    x = inputs["InputTensor"]
    off = x - np.nextafter(np.float32(-3.5779676), np.float32(0))
    printed = (-(off * np.mean(off)) / np.float32(1e-12) / np.sqrt(np.float32(1e-12))).astype(np.float32)
    assert np.abs(printed).max() > 1e4
    assert not _compare(desc, dict(got, OutputGradientTensor=printed), inputs).passed


def test_mvn2_without_the_mean_step_is_not_the_centred_variance():
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION2",
            "desc": {
                "InputTensor": T((3, 16)),
                "OutputTensor": T((3, 16)),
                "Axes": [1],
                "UseMean": False,
                "UseVariance": True,
                "Epsilon": 1e-5,
            },
        }
    )
    x = (np.random.default_rng(4).standard_normal((3, 16)) + 0.2).astype(np.float32)
    inputs = {"InputTensor": x}
    assert _compare(desc, NumpyBackend().execute(desc, inputs), inputs).passed
    centred = x / np.sqrt(x.var(axis=1, keepdims=True) + np.float32(1e-5))
    assert not _compare(desc, {"OutputTensor": centred.astype(np.float32)}, inputs).passed


def test_training_gradient_centred_on_neither_mean_fails_where_mean_tensor_is_not_the_batch_mean():
    """doc_notes bound-mean: the spec centres OutputGradient on MeanTensor, as every DirectML
    release does (cases/directml/bntg-mean-tensor-offset). With MeanTensor 0.5 / -0.25 / 0 off
    the batch mean per channel, that reading passes, and outputs centred on the batch mean (the
    printed reading) or halfway between fail: before, the budget allowed the two readings'
    difference and let all three pass."""
    desc = parse_desc(
        {
            "type": "BATCH_NORMALIZATION_TRAINING_GRAD",
            "desc": {
                **{k: T((4, 3, 5)) for k in ("InputTensor", "InputGradientTensor", "OutputGradientTensor")},
                **{
                    k: T((1, 3, 1))
                    for k in (
                        "MeanTensor",
                        "VarianceTensor",
                        "ScaleTensor",
                        "OutputScaleGradientTensor",
                        "OutputBiasGradientTensor",
                    )
                },
                "Epsilon": 1e-5,
            },
        }
    )
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    dy = rng.standard_normal((4, 3, 5)).astype(np.float32)
    batch_mean = x.astype(np.float64).mean(axis=(0, 2), keepdims=True)
    inputs = {
        "InputTensor": x,
        "InputGradientTensor": dy,
        "MeanTensor": (batch_mean + np.array([0.5, -0.25, 0.0]).reshape(1, 3, 1)).astype(np.float32),
        "VarianceTensor": x.astype(np.float64).var(axis=(0, 2), keepdims=True).astype(np.float32),
        "ScaleTensor": np.array([1.0, 2.0, 0.5], np.float32).reshape(1, 3, 1),
    }
    X, DY, M, V, S = (inputs[k].astype(np.float64) for k in inputs)
    e = float(np.float32(1e-5))

    def centred_on(c):  # written out here, independently of the reference
        mean_dy = DY.mean(axis=(0, 2), keepdims=True)
        c1 = (DY * (X - c)).mean(axis=(0, 2), keepdims=True)
        return (S / np.sqrt(V + e) * (DY - mean_dy - (X - c) * c1 / (V + e))).astype(np.float32)

    good = NumpyBackend().execute(desc, inputs)
    assert np.allclose(good["OutputGradientTensor"], centred_on(M), atol=1e-5)
    assert _compare(desc, good, inputs).passed
    for wrong in (batch_mean, (M + batch_mean) / 2):
        assert not _compare(desc, dict(good, OutputGradientTensor=centred_on(wrong)), inputs).passed


def test_every_operator_knows_every_class_a_run_may_name() -> None:
    """``--tolerance model=M`` is checked against every operator's tolerance section before a
    run starts (runner.settings.tolerance_options), so one operator without a class refused it
    for every run: BATCH_NORMALIZATION, which sums nothing, had no ``lanes`` or ``sequential``."""
    from dmlconform.report.classes import LADDER, NONE
    from dmlconform.runner.settings import tolerance_options

    for model in (m for m in LADDER if m != NONE):
        assert tolerance_options(SPEC, {"model": model}).model == model
