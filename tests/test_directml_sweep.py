"""Real DirectML releases against the spec: the self-test's verdict per release, CreateOperator on
a slice of the acceptance corpus, and the findings' reproducers on the releases they are about.

Needs the stack ``dmlconform directml setup`` installs (skipped with its one line otherwise); the
tests that name another release skip when it is not installed (``setup --version all``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SPEC

from dmlconform.backends.directml.stack import StackMissing, locate

try:
    locate()
except StackMissing as exc:
    pytest.skip(str(exc), allow_module_level=True)

from dmlconform.backends.directml import status
from dmlconform.backends.directml.backend import DirectMLBackend
from dmlconform.releases import acceptance as acc
from dmlconform.releases import matrix
from dmlconform.releases.findings import registry
from dmlconform.runner.checks import run_case
from dmlconform.runner.guard import ThreadGuard
from dmlconform.runner.results import load_case_dir
from dmlconform.tolerance.options import ToleranceOptions

ROOT = Path(__file__).resolve().parent.parent


def needs(version: str) -> None:
    if not status.installed(version):
        pytest.skip(f"DirectML {version} is not installed: dmlconform directml setup --version {version}")


def test_the_self_test_decides_whether_a_release_runs_here() -> None:
    measured = status.measure("1.15.4", SPEC)
    assert measured.runs and measured.max_feature_level == "6_4", measured
    assert measured.file_version.startswith("1.15.4+")


@pytest.mark.parametrize("version", ["1.5.1", "1.10.1"])
def test_a_release_that_cannot_run_here_is_reported_not_judged(version: str) -> None:
    needs(version)
    measured = status.measure(version, SPEC)
    assert not measured.runs
    assert measured.detail.startswith(("the runner did not start", "self-test failed"))


def test_createoperator_on_a_corpus_slice_disagrees_only_where_a_finding_says() -> None:
    settings = acc.Settings(seed=1, legal=2, illegal=2)
    probes = [
        p
        for p in acc.corpus(SPEC, settings)
        if p.operator in ("MEAN_VARIANCE_NORMALIZATION1", "BATCH_NORMALIZATION") and p.level in ("5_0", "6_4")
    ]
    answers = acc.ask_release("1.15.4", probes, settings, SPEC)
    judged = matrix.judge(matrix.Expectations(SPEC), probes, answers)
    assert any(j.verdict == acc.ACCEPTED for j in judged) and any(j.verdict == acc.REFUSED for j in judged)
    wrong = matrix.disagreements(judged)
    assert wrong, "axes-unique (F3) is in the slice"
    reg = registry()
    for j in wrong:
        assert reg.explain_judged(j, SPEC) == ["F3"], j
    assert not [j for j in judged if j.verdict == acc.ERROR]


def _lp(sizes: list[int], axis: int, p: int):
    from dmlconform.specification.desc import parse_desc

    t = {"DataType": "FLOAT32", "Sizes": sizes}
    return parse_desc(
        {
            "type": "DML_OPERATOR_LP_NORMALIZATION",
            "desc": {"InputTensor": t, "OutputTensor": t, "Axis": axis, "Epsilon": 1e-5, "P": p},
        }
    )


def test_compileoperator_refusals_keep_their_stage_and_f12_claims_exactly_them() -> None:
    """(2, 3, 4, 5) with P = 1: 24, 40 and 60 slices (Axis 3, 1, 0) are refused by
    CompileOperator, 30 (Axis 2) compile (cases/directml/lp-compile-refusals)."""
    settings = acc.Settings()
    probes = [
        acc.Probe(
            f"LP_NORMALIZATION-6_4-legal-FLOAT32-{axis:02d}",
            "LP_NORMALIZATION",
            "6_4",
            "legal",
            None,
            "FLOAT32",
            _lp([2, 3, 4, 5], axis, 1),
        )
        for axis in range(4)
    ]
    answers = acc.ReleaseAnswers("1.15.4", "", "6_4", settings, "")
    backend = DirectMLBackend(version="1.15.4")
    try:
        acc.ask_all(backend.check, probes, answers)
    finally:
        backend.close()
    assert list(answers.verdicts.values()) == [acc.REFUSED, acc.REFUSED, acc.ACCEPTED, acc.REFUSED]
    assert set(answers.stages.values()) == {acc.COMPILE}
    judged = matrix.judge(matrix.Expectations(SPEC), probes, answers)
    reg = registry()
    assert [reg.explain_judged(j, SPEC) for j in matrix.disagreements(judged)] == [["F12"]] * 3


def test_an_hresult_that_is_no_refusal_is_its_own_outcome() -> None:
    """DirectML 1.8.0's CompileOperator overflows on LRN_GRAD over 2^32 - 1 elements."""
    needs("1.8.0")
    from dmlconform.specification.desc import parse_desc

    t = {"DataType": "FLOAT32", "Sizes": [1, 255, 257, 65537]}
    members = {"CrossChannel": True, "LocalSize": 3, "Alpha": 1e-4, "Beta": 0.75, "Bias": 1.0}
    desc = parse_desc(
        {
            "type": "DML_OPERATOR_LOCAL_RESPONSE_NORMALIZATION_GRAD",
            "desc": {"InputTensor": t, "InputGradientTensor": t, "OutputGradientTensor": t, **members},
        }
    )
    backend = DirectMLBackend(version="1.8.0")
    try:
        answer = acc.ask(backend.check, desc)
    finally:
        backend.close()
    assert (answer.verdict, answer.stage, answer.hresult) == (acc.FAILED, acc.COMPILE, 0x8007023E)


@pytest.mark.parametrize(
    ("path", "version", "outcome"),
    [
        ("cases/directml/bntg-mean-tensor-offset", "1.15.4", "passed"),  # F4: the spec follows DirectML
        ("cases/directml/mvn1-repeated-axis", "1.15.4", "failed"),  # F3
        ("cases/directml/softplus-steepness-below-one", "1.15.4", "passed"),  # F7: fixed in 1.15
        ("cases/directml/softplus-steepness-below-one", "1.14.1", "failed"),  # F7: Steepness 1 computed
        ("cases/directml/gelu-below-5_1", "1.8.0", "passed"),  # F8: 1.8.0 refuses GELU
        ("cases/directml/gelu-below-5_1", "1.9.1", "failed"),  # F8: 1.9.1 accepts it at 5_0
        ("cases/directml/output-overlap-refused", "1.15.4", "passed"),  # F13: the spec follows DirectML
        ("cases/directml/output-overlap-refused", "1.8.0", "passed"),  # F13
        ("cases/directml/alignment-below-16", "1.15.4", "passed"),  # F14: the spec follows DirectML
        ("cases/directml/alignment-below-16", "1.8.0", "passed"),  # F14
        ("cases/directml/total-size-past-32-bits", "1.8.0", "passed"),  # F15: the spec follows DirectML
        ("cases/directml/total-size-partial-element", "1.15.4", "passed"),  # F16: 1.14.1+ refuse it
        ("cases/directml/total-size-partial-element", "1.13.1", "failed"),  # F16: 1.8.0-1.13.1 accept it
    ],
)
def test_reproducers_show_their_finding_on_their_releases(path: str, version: str, outcome: str) -> None:
    needs(version)
    case, inputs, meta = load_case_dir(ROOT / path, SPEC)
    backend = DirectMLBackend(version=version)
    try:
        result = run_case(
            case,
            ThreadGuard(backend, 120),
            SPEC,
            ToleranceOptions.parse(meta.get("tolerance")),
            inputs=inputs,
        )
    finally:
        backend.close()
    assert result.status == outcome, result.message


def test_an_experiment_prints_each_answer_beside_the_verdict_and_counts_disagreements() -> None:
    """acceptance.experiment, what cases/directml/*/experiment.py run: DirectML 1.15.4 on three
    alignments of one input, one of which (8) the spec allowed before F14."""
    needs("1.15.4")
    from dmlconform.specification.desc import parse_desc

    def mvn1(alignment: int):
        tensor = {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5]}
        return parse_desc(
            {
                "type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1",
                "desc": {
                    "InputTensor": {**tensor, "GuaranteedBaseOffsetAlignment": alignment},
                    "OutputTensor": tensor,
                    "AxisCount": 1,
                    "Axes": [3],
                    "NormalizeVariance": True,
                    "Epsilon": 1e-5,
                },
            }
        )

    lines: list[str] = []
    labelled = [(f"alignment {a}", mvn1(a)) for a in (0, 8, 16)]
    assert acc.experiment(["1.15.4"], labelled, SPEC, out=lines.append) == 0
    assert lines[0] == "DirectML 1.15.4"
    assert [line.split()[-2:] for line in lines[1:]] == [
        ["validator", "legal"],
        ["validator", "illegal"],
        ["validator", "legal"],
    ]
    assert (
        "DirectML refuses" in lines[2] and "DirectML accepts" in lines[1] and "DirectML accepts" in lines[3]
    )
    # and a disagreement counts: 1.13.1 accepts a partial element past the largest buffer (F16)
    needs("1.13.1")
    partial = mvn1(0).replace(
        InputTensor=mvn1(0).members["InputTensor"].replace(total_tensor_size_in_bytes=(2**32 - 1) * 4 + 1)
    )
    lines = []
    assert acc.experiment(["1.13.1"], [("partial element", partial)], SPEC, out=lines.append) == 1
    assert lines[1].endswith("DirectML accepts, validator illegal   <- disagree")
