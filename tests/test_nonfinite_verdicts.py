"""A backend that returns NaN (or inf) must fail every case it takes part in (issue: NaN against
NaN counted as 0 ULP, so an all-NaN backend passed every metamorphic relation and every numeric
case whose reference had overflowed). The sound backend still passes the same cases."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import SPEC

from dmlconform.backends.numpy_backend import NumpyBackend
from dmlconform.runner.cases import Selection, collect
from dmlconform.runner.checks import run_case
from dmlconform.runner.guard import ThreadGuard
from dmlconform.runner.judging import require_finite
from dmlconform.tolerance.options import NO_OPTIONS


class Filled(NumpyBackend):
    """The right members, shapes and dtypes, every element ``value``."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def execute(self, desc, inputs):
        return {k: np.full_like(v, self.value) for k, v in super().execute(desc, inputs).items()}


def _metamorphic_cases():
    sel = Selection(level=SPEC.level("6_4"), data_types=("FLOAT32",), cases=2, kinds=("metamorphic",))
    return list(collect(SPEC, sel))


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_a_backend_returning_nonfinite_values_fails_every_relation(value):
    cases = _metamorphic_cases()
    assert len({c.relation.kind for c in cases}) >= 3  # same_output_as, shift_invariant, chained, derivative
    bad = ThreadGuard(Filled(value), None)
    results = [(c.id, run_case(c, bad, SPEC, NO_OPTIONS)) for c in cases]
    ran = [(cid, r) for cid, r in results if r.status != "skipped"]
    assert ran
    assert [cid for cid, r in ran if r.status != "failed"] == []
    sound = ThreadGuard(NumpyBackend(), None)
    assert all(run_case(c, sound, SPEC, NO_OPTIONS).status in ("passed", "skipped") for c in cases)


def test_require_finite_names_the_element():
    import dmlconform as dc
    from dmlconform.runner.judging import _Fail

    t = {"DataType": "FLOAT32", "Sizes": [1, 4]}
    desc = dc.parse_desc(
        {"type": "MEAN_VARIANCE_NORMALIZATION1",
         "desc": {"InputTensor": t, "OutputTensor": t, "Axes": [1], "NormalizeVariance": True}}
    )  # fmt: skip
    x = {"InputTensor": np.array([[1, 2, 3, 5]], np.float32)}
    got = {"OutputTensor": np.array([[0, 0, np.nan, 0]], np.float32)}
    with pytest.raises(_Fail, match=r"OutputTensor: the backend gave nan at \[0, 2\]"):
        require_finite(SPEC, got, desc, x, ["OutputTensor"], "test")
    require_finite(SPEC, dc.execute(desc, x), desc, x, ["OutputTensor"], "test")


def test_an_output_that_overflowed_in_the_reference_must_overflow():
    import dmlconform as dc
    from dmlconform import tolerance

    t = {"DataType": "FLOAT16", "Sizes": [1, 2]}
    s = {"DataType": "FLOAT16", "Sizes": [1, 1]}
    desc = dc.parse_desc(
        {"type": "MEAN_VARIANCE_NORMALIZATION1",
         "desc": {"InputTensor": t, "ScaleTensor": s, "BiasTensor": s, "OutputTensor": t, "Axes": [1],
                  "NormalizeVariance": True}}
    )  # fmt: skip
    inputs = {
        "InputTensor": np.array([[0, 1]], np.float16),
        "ScaleTensor": np.array([[60000]], np.float16),
        "BiasTensor": np.array([[60000]], np.float16),
    }
    ref = dc.execute(desc, inputs)
    assert np.isposinf(ref["OutputTensor"][0, 1]) and np.isfinite(ref["OutputTensor"][0, 0])
    assert tolerance.compare(desc, ref, ref, inputs, SPEC, NO_OPTIONS).passed
    saturated = ref["OutputTensor"].copy()
    saturated[0, 1] = 65504
    assert tolerance.compare(desc, {"OutputTensor": saturated}, ref, inputs, SPEC, NO_OPTIONS).passed
    for wrong in (np.nan, 0.0, 1e4, -np.inf):
        got = ref["OutputTensor"].copy()
        got[0, 1] = wrong
        verdict = tolerance.compare(desc, {"OutputTensor": got}, ref, inputs, SPEC, NO_OPTIONS)
        assert not verdict.passed, wrong
        assert "worst at [0, 1]" in verdict.outputs["OutputTensor"].message
