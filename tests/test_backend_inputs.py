"""A backend gets its own copies of the inputs: one that writes into them (an in-place
implementation, a torch tensor sharing the array's memory) is judged on what it returns, and the
inputs the suite judges with, records for the reproducer and hands a relation's second run stay
as generated. Before, the numeric cases' read-only inputs made such a backend raise, and the
metamorphic cases' writable ones blamed the relation for what the backend had overwritten."""

from __future__ import annotations

import numpy as np
from helpers import SPEC

from dmlconform.backends.numpy_backend import NumpyBackend
from dmlconform.runner.cases import Selection, collect
from dmlconform.runner.checks import run_case
from dmlconform.runner.guard import ProcessGuard, ThreadGuard
from dmlconform.tolerance.options import NO_OPTIONS


class OverwritesItsInputs(NumpyBackend):
    """The right answer, then every input overwritten with a constant."""

    def execute(self, desc, inputs):
        out = super().execute(desc, inputs)
        for array in inputs.values():
            array[...] = 7
        return out


def _cases():
    sel = Selection(level=SPEC.level("6_4"), data_types=("FLOAT32",), cases=2, kinds=("numeric", "metamorphic"),
                    operators=("MEAN_VARIANCE_NORMALIZATION1", "BATCH_NORMALIZATION_TRAINING"))  # fmt: skip
    cases = list(collect(SPEC, sel))
    assert {c.kind for c in cases} == {"numeric", "metamorphic"}
    return cases


def _judged_on_its_outputs(backend) -> None:
    try:
        for case in _cases():
            result = run_case(case, backend, SPEC, NO_OPTIONS)
            assert result.status == "passed", (case.id, result.message)
            if case.kind == "numeric":  # the recorded inputs are the generated ones, not the 7s
                assert not any(np.all(np.asarray(a) == 7) for a in result.inputs.values()), case.id
    finally:
        backend.close()


def test_a_backend_that_overwrites_its_inputs_is_judged_on_its_outputs():
    _judged_on_its_outputs(ThreadGuard(OverwritesItsInputs(), None))


def test_the_same_in_an_isolated_backend_process():
    _judged_on_its_outputs(ProcessGuard("test_backend_inputs:OverwritesItsInputs", {}, 120))
