"""The self-test: one operator on known data, compared with the reference.

DirectML returns S_OK on stacks that compute garbage (a lavapipe without descriptor indexing
makes it write NaN, 0 and 3e-31; DirectML 1.10.1 under vkd3d records nothing and leaves the
outputs as they were), so neither an HRESULT nor an exit status proves anything. This runs a
MEAN_VARIANCE_NORMALIZATION1 over a (2, 3, 17, 33) FLOAT32 tensor and requires every element
within 1e-4 of the float64 reference: a sound stack errs by about 1e-6 there (measured: 9.5e-7
on DirectML 1.15.4), garbage by orders of magnitude or NaN. The threshold only separates "computes"
from "does not"; the conformance run judges accuracy with the spec's budgets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dmlconform import execute
from dmlconform.backends.directml import pack
from dmlconform.backends.directml.client import Runner, RunnerError
from dmlconform.specification.desc import OperatorDesc, parse_desc
from dmlconform.specification.spec import Spec

SELF_TEST_DESC = {
    "type": "MEAN_VARIANCE_NORMALIZATION1",
    "desc": {
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 17, 33]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 17, 33]},
        "Axes": [2, 3],
        "NormalizeVariance": True,
        "Epsilon": 1e-5,
    },
}
MAX_ERROR = 1e-4


@dataclass(frozen=True)
class SelfTest:
    passed: bool
    detail: str


def self_test_case(spec: Spec) -> tuple[OperatorDesc, dict[str, np.ndarray]]:
    desc = parse_desc(SELF_TEST_DESC, spec)
    x = np.random.default_rng(20261123).standard_normal((2, 3, 17, 33)).astype(np.float32) * 3 + 1
    return desc, {"InputTensor": x}


def run_self_test(runner: Runner, spec: Spec, timeout: float = 180.0) -> SelfTest:
    desc, inputs = self_test_case(spec)
    try:
        packed, reply = pack.execute(runner, desc, inputs, timeout, spec=spec)
    except RunnerError as exc:
        return SelfTest(False, str(exc))
    if not reply.ok:
        return SelfTest(False, f"DirectML {reply.describe()} on the self-test desc")
    got = pack.outputs(packed, desc, reply).get("OutputTensor")
    if got is None:
        return SelfTest(False, "the runner returned no output")
    got = got.astype(np.float64)
    want = execute(desc, inputs, spec=spec)["OutputTensor"].astype(np.float64)
    finite = np.isfinite(got)
    if not finite.all():
        return SelfTest(
            False,
            f"{int((~finite).sum())} of {got.size} outputs are not finite (S_OK with garbage: "
            "is lavapipe missing VK_EXT_descriptor_indexing, or did DirectML record nothing?)",
        )
    err = float(np.max(np.abs(got - want)))
    if err > MAX_ERROR:
        return SelfTest(False, f"max error {err:.3g} > {MAX_ERROR:g} against the reference (garbage output)")
    return SelfTest(True, f"MVN1 (2,3,17,33) FLOAT32 within {err:.2g} of the reference")
