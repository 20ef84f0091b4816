"""A case that judges nothing is never a pass: a backend that returns NaN everywhere must pass no
case. NaN against NaN is no error, so before, relations whose reference is NaN (batch norm
training over one-element slices with Epsilon 0) or whose derivative check had no element to
compare passed such a backend; now they are skipped with that reason, and a numeric case whose
reference holds no finite element likewise."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import SPEC

from dmlconform.backends.numpy_backend import NumpyBackend
from dmlconform.runner.cases import Selection, collect
from dmlconform.runner.checks import run_case
from dmlconform.runner.guard import ThreadGuard
from dmlconform.runner.judging import _Skip, require_judged
from dmlconform.tolerance.options import NO_OPTIONS


class AllNaN(NumpyBackend):
    """Every output element NaN, in the right shapes and types."""

    def execute(self, desc, inputs):
        return {k: np.full_like(v, np.nan) for k, v in super().execute(desc, inputs).items()}


@pytest.mark.slow
def test_a_backend_returning_nan_everywhere_passes_no_case():
    sel = Selection(
        level=SPEC.level("6_4"),
        cases=8,
        kinds=("numeric", "metamorphic"),
        data_types=("FLOAT32",),
        max_elements=4096,
    )
    guard = ThreadGuard(AllNaN(), None)
    outcomes: dict[str, list[str]] = {}
    try:
        for case in collect(SPEC, sel):
            result = run_case(case, guard, SPEC, NO_OPTIONS)
            outcomes.setdefault(result.status, []).append(f"{case.id}: {result.message}")
    finally:
        guard.close()
    assert "passed" not in outcomes, outcomes.get("passed")
    assert len(outcomes["failed"]) > 1000
    # the skipped ones say why: nothing judged, or a reason that has nothing to do with the backend
    assert any("nothing judged" in line for line in outcomes.get("skipped", [])), outcomes.get("skipped")


def test_require_judged_needs_one_finite_reference_element():
    nan = np.full(4, np.nan)
    with pytest.raises(_Skip, match="nothing judged"):
        require_judged(
            {"OutputTensor": nan, "OutputMeanTensor": nan}, ["OutputTensor", "OutputMeanTensor"], "x"
        )
    require_judged(
        {"OutputTensor": nan, "OutputMeanTensor": np.array([np.nan, 1.0])}, ["OutputMeanTensor"], "x"
    )
    with pytest.raises(_Skip):  # a member that is not compared does not count
        require_judged({"OutputTensor": nan, "OutputMeanTensor": np.ones(2)}, ["OutputTensor"], "x")
