"""The reference's fused activations where the literal float32 formula cancels.

numpy, ONNX Runtime and PyTorch all return GELU(-5.5324497) = -1.6488e-07 (0.5*x*(1 + erf(x/sqrt2))
in float32: 1 + erf rounds to one float32 spacing, 2^-24); the exact value is -8.7354e-08, which
the reference returns (seed-0 run, BATCH_NORMALIZATION_TRAINING-6_4-FLOAT32-0007). Likewise
SCALED_ELU's Gamma*(Alpha*exp(x) - Alpha) near 0- (BATCH_NORMALIZATION_TRAINING-5_0-FLOAT32-0007).
These tests pin the reference to the correctly rounded value, so that three agreeing backends
are never mistaken for a reference bug."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from dmlconform import reference
from dmlconform.kernels import execute
from dmlconform.specification.desc import parse_desc

mpmath.mp.dps = 50


@pytest.fixture(autouse=True, params=["numba", "mirror"])
def path(request, monkeypatch):
    """Both paths: the numba kernel and its numpy mirror, forced whatever the size."""
    monkeypatch.setattr(reference, "MIRROR_MAX_ELEMENTS", -1 if request.param == "numba" else 1 << 62)
    return request.param


def _activation_of_bias(act: dict, y: np.ndarray) -> np.ndarray:
    """MVN1 over a size-1 axis without variance normalization: x - mean is exactly 0, so the
    output is exactly act(Bias): the reference's activation, isolated."""
    k = y.size
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, k]},
                "ScaleTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, k]},
                "BiasTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, k]},
                "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, k]},
                "Axes": [2],
                "NormalizeVariance": False,
                "FusedActivation": act,
            },
        }
    )
    x = np.linspace(-1, 1, k, dtype=np.float32).reshape(1, 1, 1, k)
    inputs = {
        "InputTensor": x,
        "ScaleTensor": np.ones_like(x),
        "BiasTensor": y.astype(np.float32).reshape(1, 1, 1, k),
    }
    return execute(desc, inputs)["OutputTensor"].ravel()


def _exact32(f, y: np.ndarray) -> np.ndarray:
    return np.array([float(f(mpmath.mpf(float(v)))) for v in y.astype(np.float32)], np.float32)


def test_gelu_negative_tail_is_correctly_rounded():
    y = np.array([-5.5324497, -2.5624857, -4.0, -6.0, -8.0, 0.5], np.float32)
    got = _activation_of_bias({"Type": "ACTIVATION_GELU"}, y)
    want = _exact32(lambda v: v / 2 * mpmath.erfc(-v / mpmath.sqrt(2)), y)
    np.testing.assert_array_equal(got, want)
    assert got[0] == np.float32(-8.735433e-08)
    # the literal float32 formula is off by ~7.7e6 ULP there: a backend finding, not ours
    erf32 = np.float32(mpmath.erf(mpmath.mpf(float(y[0])) / mpmath.sqrt(2)))
    assert np.float32(0.5) * y[0] * (np.float32(1) + erf32) == np.float32(-1.6487985e-07)


@pytest.mark.parametrize("alpha, gamma", [(2.0, 1.0507), (1.5, 2.0)])
def test_scaled_elu_just_below_zero_is_correctly_rounded(alpha, gamma):
    y = np.array([-1.9821874e-4, -1.4286941e-4, -1e-6, -0.5], np.float32)
    a, g = (mpmath.mpf(float(np.float32(v))) for v in (alpha, gamma))
    got = _activation_of_bias({"Type": "ACTIVATION_SCALED_ELU", "Alpha": alpha, "Gamma": gamma}, y)
    np.testing.assert_array_equal(got, _exact32(lambda v: g * a * mpmath.expm1(v), y))
