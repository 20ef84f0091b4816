"""On-grid slices and narrowing toward zero (tolerance.normalization.rounds_back).

A slice of exact statistics whose outputs lie within 1/16 ULP of FLOAT16 numbers is "on the grid":
the aggregate fit then allows no output rounding to line up with z, since a round-to-nearest
implementation returns those numbers. A stack that narrows toward zero (the DirectML stack's
FLOAT16, F6) drops every such output a whole ULP toward zero when the exact answer is a hair below
the number in magnitude (Epsilon 1: sqrt(var + Epsilon) is not exact): a scale in step with |y|
that the model with ``narrowing: toward_zero`` must admit (DirectML 1.15.4's stress case
MEAN_VARIANCE_NORMALIZATION-6_4-FLOAT16-n1048576x3-0008 failed it 113x), while a 4-ULP scale still
fails the required model and 16 ULPs the narrowing one, in the compiled judge and the numpy model.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from helpers import toward_zero16

import dmlconform as dc
from dmlconform.specification.desc import parse_desc
from dmlconform.tolerance.options import ToleranceOptions

SPEC = dc.load_spec()
compare_module = importlib.import_module("dmlconform.tolerance.compare")
NARROWING = {"model": "fp16-statistics", "narrowing": "toward_zero", "pointwise_precision": "FLOAT16"}


def _case(n: int) -> tuple:
    """MVN over one slice of n FLOAT16 values from {1, 1.25, 1.75, 2} / 64 in equal counts
    (exact mean and variance), Epsilon 1, Scale 2, Bias -1/64: every output within 1/16 ULP of a
    FLOAT16 number and a hair inside it."""
    t = {"DataType": "FLOAT16", "Sizes": [1, 1, 1, n]}
    one = {"DataType": "FLOAT16", "Sizes": [1, 1, 1, 1]}
    desc = parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION", "desc": {
        "InputTensor": t, "ScaleTensor": one, "BiasTensor": one, "OutputTensor": t,
        "CrossChannel": True, "NormalizeVariance": True, "Epsilon": 1.0}})  # fmt: skip
    rng = np.random.default_rng(0)
    x = rng.permutation(np.repeat(np.array([1.0, 1.25, 1.75, 2.0]) / 64, n // 4)).astype(np.float16)
    inputs = {
        "InputTensor": x.reshape(t["Sizes"]),
        "ScaleTensor": np.full((1, 1, 1, 1), 2.0, np.float16),
        "BiasTensor": np.full((1, 1, 1, 1), -1 / 64, np.float16),
    }
    return desc, inputs


def _outputs(inputs: dict, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(float32 kernel truncated to FLOAT16 with its outputs times ``scale``, float64 reference
    rounded to FLOAT16)."""
    x = inputs["InputTensor"].astype(np.float64)
    y = 2.0 * (x - x.mean()) / np.sqrt(x.var() + 1.0) - 1 / 64
    x32 = inputs["InputTensor"].astype(np.float32)
    m32 = np.float32(x32.astype(np.float64).mean())
    sd32 = np.sqrt(np.float32(((x32 - m32) ** 2).astype(np.float64).mean()) + np.float32(1.0))
    y32 = (np.float32(2.0) * (x32 - m32) / sd32 - np.float32(1 / 64)) * np.float32(scale)
    return toward_zero16(y32), y.astype(np.float16)


@pytest.mark.parametrize("numpy_model", [False, True])
@pytest.mark.parametrize("n", [4096, 65536])
def test_narrowing_toward_zero_admits_a_truncated_grid_and_fails_a_4_ulp_scale(
    n: int, numpy_model: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if numpy_model:
        monkeypatch.setattr(compare_module, "_judge_plan", lambda *a, **k: None)
    desc, inputs = _case(n)
    got, ref = _outputs(inputs, 1.0)
    moved = got != ref
    assert moved.mean() >= 0.25  # the truncation moves many outputs a whole ULP toward zero
    judged = compare_module.compare(
        desc, {"OutputTensor": got}, {"OutputTensor": ref}, inputs, SPEC, ToleranceOptions.parse(NARROWING)
    )
    assert judged.passed, judged.outputs["OutputTensor"].aggregate
    # round-to-nearest is still held to the grid: the same truncation fails the default model
    default = compare_module.compare(
        desc,
        {"OutputTensor": got},
        {"OutputTensor": ref},
        inputs,
        SPEC,
        ToleranceOptions.parse({"model": "default"}),
    )
    assert not default.passed
    # a 4-ULP systematic scale still fails the required (round-to-nearest) model; the narrowing
    # model, whose stored statistics are truncated FLOAT16 steps, admits a few ULPs of scale and
    # fails 16
    for ulps, pairs in ((4, {"model": "default"}), (16, NARROWING)):
        broken, _ = _outputs(inputs, 1.0 - ulps * 2.0**-11)
        judged = compare_module.compare(
            desc, {"OutputTensor": broken}, {"OutputTensor": ref}, inputs, SPEC, ToleranceOptions.parse(pairs)
        )
        assert not judged.passed, (ulps, pairs)
