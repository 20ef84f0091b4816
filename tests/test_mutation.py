"""Mutation self-test: the suite must fail every deliberately broken backend, and must not fail
the correct ones except for findings its report explains.

Broken backends run the numeric and metamorphic items with 2 cases per group (each mutant is
numeric, and each is already caught with 1; the default is 8), stopping at the third failure;
the reference and numpy backends run the default tier's groups, one and two cases each. onnxruntime and
torch run the same, with their known findings (dmlconform/known_findings/*.yaml) whose every entry
gives the reason; a failure not listed there must still be a value finding (worst element,
budget, reproducer), never a crash, a wrong shape or a harness error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import run_suite

from dmlconform.backends import broken

pytest_plugins = ["pytester"]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MUTANTS = sorted(
    name for name, obj in vars(broken).items() if isinstance(obj, type) and obj.__module__ == broken.__name__
)


def results(report: Path) -> dict[str, Any]:
    return json.loads((report / "results.json").read_text())


def test_there_are_mutants() -> None:
    assert len(MUTANTS) >= 5


#: Mutants that are sound at short reductions: only the default tier's long reductions (its
#: 65537- and 2^20-element cases) can catch them, so they run it whole; the others are caught
#: without the size cases above 5000 elements, which keeps their runs short.
ONLY_BIG = {"SequentialSumStatistics", "Float16AccumulationAtLongReductions"}
SHORT = "--dml-max-elements=5000"
_LRN = ["LOCAL_RESPONSE_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION_GRAD"]
#: Mutants of one kernel's lowering run on the operators that use it (the others pass unchanged).
ONE_KERNEL = {
    "LrnWindowBelow": _LRN,
    "LrnAlphaNotDivided": _LRN,
    "LpWithoutAbs": ["LP_NORMALIZATION"],
    "LpEpsilonOutsideRoot": ["LP_NORMALIZATION"],
}


@pytest.mark.parametrize("mutant", MUTANTS)
def test_each_broken_backend_fails(pytester: pytest.Pytester, tmp_path: Path, mutant: str) -> None:
    report = tmp_path / "r"
    result = run_suite(
        pytester,
        f"--dml-backend=dmlconform.backends.broken:{mutant}",
        "--dml-cases=2",
        # caught is caught: the rest of the run would only repeat it (the report stays); the
        # long-reduction mutants go on to their 65536-element cases, which the asserts below name
        f"--maxfail={3 if mutant in ONLY_BIG else 1}",
        "--dml-kinds",
        "numeric",
        *(["--dml-operators=MEAN_VARIANCE_NORMALIZATION1"] if mutant in ONLY_BIG else ["metamorphic", SHORT]),
        *(["--dml-operators", *ONE_KERNEL[mutant]] if mutant in ONE_KERNEL else []),
        f"--dml-report={report}",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, f"mutant {mutant} survived the suite"
    failed = [c for c in results(report)["cases"] if c["outcome"] == "failed"]
    # caught by a comparison (numeric or metamorphic), not by an accident of the harness
    assert any(c["kind"] in ("numeric", "metamorphic") and c["errors"] for c in failed), mutant
    assert not [c for c in results(report)["cases"] if c["outcome"] == "error"]
    if mutant in ONLY_BIG:  # by the long reductions; short ones are sound
        assert any(c["reduction_length"] >= 65536 for c in failed), mutant
        assert all(c["reduction_length"] > 257 for c in failed), mutant


#: the default tier up to 2^16-element tensors: every operator, level, data type and regime, the
#: reductions up to 65535 (torch's LP finding among them); the 2^20- and 2^22-element families
#: (40 cases, 40 % of a run's time) are judged by test_long_reductions and test_calibrated_verdicts
UP_TO_2_16 = ("--dml-max-elements=65536",)
#: two cases a group of the default's eight: every group (operator, level, data type, size
#: family) and so every known finding's predicate, each with its first two draws
QUARTER = ("--dml-cases=2",)


def test_reference_passes_the_default_run(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """The reference judged against itself: every budget admits an exact answer and every case
    that judges nothing says so. One case a group (of the default eight) reaches every
    operator, level, data type and size family; the real backends below take two."""
    report = tmp_path / "r"
    result = run_suite(
        pytester, "--dml-backend=reference", "--dml-cases=1", *UP_TO_2_16, f"--dml-report={report}"
    )
    assert result.ret == pytest.ExitCode.OK
    s = results(report)["summary"]
    # every case passes but those that judge nothing (a NaN reference), which are skipped so
    skipped = [c["message"] for c in results(report)["cases"] if c["outcome"] == "skipped"]
    assert s["passed"] == s["total"] - len(skipped) > 0
    assert all("nothing judged" in m for m in skipped), skipped


@pytest.mark.parametrize("backend", ["SequentialLoop", "Welford"])
def test_sound_summation_orders_pass_the_default_run(
    pytester: pytest.Pytester, tmp_path: Path, backend: str
) -> None:
    """Float32 implementations that sum sequentially (tests/sound_backends.py) pass when they ask
    for the lenient model by name, and the report says which model judged them; the required
    (strict) model caps growth at pairwise summation's, which they exceed at long reductions."""
    report = tmp_path / "r"
    result = run_suite(
        pytester,
        f"--dml-backend=sound_backends:{backend}",
        "--dml-tolerance=model=lenient",
        "--dml-max-elements=140000",  # up to the 65537-element cases, not the 2^20 ones
        "--dml-cases=1",  # the long reductions are their own groups: every size family stays
        # the operators whose statistics they compute (the gradients' sums are another model)
        "--dml-operators",
        "MEAN_VARIANCE_NORMALIZATION",
        "MEAN_VARIANCE_NORMALIZATION1",
        "BATCH_NORMALIZATION_TRAINING",
        f"--dml-report={report}",
    )
    assert results(report)["tolerance"] == {"overrides": {"model": "lenient"}, "model": "lenient"}
    s = results(report)["summary"]
    assert result.ret == pytest.ExitCode.OK, [
        c["message"] for c in results(report)["cases"] if c["outcome"] == "failed"
    ]
    assert s["passed"] + s["skipped"] == s["total"] and s["passed"] > 0


def _explained(report: Path) -> None:
    data = results(report)
    assert data["summary"]["errors"] == 0
    for c in data["cases"]:
        if c["outcome"] == "failed":
            assert c["errors"] and c["errors"]["worst"], c["message"]
            assert (report / c["reproducer"] / "case.json").is_file()
        if c["outcome"] == "xfailed":
            assert c["expectation"], c["id"]


@pytest.mark.parametrize(
    ("backend", "args"),
    [
        # no finding of its own to reach: one case a group, every group
        ("numpy", ["--dml-expect", str(EXAMPLES / "expect-example.txt"), "--dml-cases=1"]),
        ("onnxruntime", list(QUARTER)),  # its known findings (dmlconform/known_findings/) apply by default
        ("torch", list(QUARTER)),
        # one case a group: a graph compile (OpenVINO) or an XLA jit per structure is the cost
        ("openvino", ["--dml-cases=1"]),
        # where most of its findings are: FLOAT16 gradients (J1, J2, J4-J6; an XLA jit per structure is the cost)
        ("jax", ["--dml-cases=1", "--dml-dtypes=FLOAT16", "--dml-operators", "BNTG", "LRNG"]),
    ],
)
def test_real_backends_fail_only_with_explained_findings(
    pytester: pytest.Pytester, tmp_path: Path, backend: str, args: list[str]
) -> None:
    if backend != "numpy":
        pytest.importorskip(backend)
    report = tmp_path / "r"
    result = run_suite(pytester, f"--dml-backend={backend}", *args, *UP_TO_2_16, f"--dml-report={report}")
    _explained(report)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
