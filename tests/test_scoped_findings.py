"""Findings scoped to the slices they explain: a ``fails`` finding named by a per-slice fact
excuses the output elements those slices decide, and a NaN or a wrong value anywhere else fails
the case, naming the finding and the failure outside it. Numpy-level backends that hold a sum
in FLOAT16 the way DirectML's findings say stand in for DirectML (tests/test_directml_scoped_
findings.py runs the real one)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import SPEC, run_suite

from dmlconform.kernels import execute
from dmlconform.kernels import plan as plan_of
from dmlconform.kernels.local_response import region_sum
from dmlconform.runner.cases import Case
from dmlconform.runner.checks import run_case
from dmlconform.runner.error_record import failure_message
from dmlconform.runner.expect import CaseFacts, ExpectError, Settled, parse_findings, settle
from dmlconform.runner.guard import ThreadGuard
from dmlconform.specification.desc import parse_desc
from dmlconform.tolerance.options import NO_OPTIONS

F16_MAX = 65504.0
pytest_plugins = ["pytester"]


def findings(text: str) -> list[Any]:
    return parse_findings(text, "f.yaml", spec=SPEC)


def numeric(operator: str, members: dict[str, Any], data_type: str = "FLOAT16") -> Case:
    desc = parse_desc({"type": f"DML_OPERATOR_{operator}", "desc": members})
    return Case("numeric", operator, SPEC.level("6_4"), data_type, 0, desc)


def judged(text: str, case: Case, inputs: dict[str, np.ndarray], backend: Any) -> Settled:
    """The case run on ``backend`` and settled under the findings ``text``, as the plugin does."""
    result = run_case(case, ThreadGuard(backend, None), SPEC, NO_OPTIONS, inputs=inputs)

    def rejudge(options: Any) -> tuple[bool, str | None] | None:
        j = result.judge_under(options)
        return None if j is None else (j[0], None if j[0] else failure_message(j[1]))

    facts = CaseFacts.of(case, spec=SPEC, inputs=result.inputs)
    nan = result.nan_where_number()
    return settle(findings(text), facts, result.status, result.message, rejudge, nan, result.compared)


class Planted:
    """A backend: ``answer(desc, inputs)`` in FLOAT16, with ``plant`` (index -> value) set after."""

    def __init__(self, answer: Any, plant: dict[tuple[int, ...], float] | None = None, member: str = ""):
        self.answer, self.plant, self.member = answer, plant or {}, member

    def execute(self, desc: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {
            k: np.asarray(v, dtype=np.float64).astype(np.float16)
            for k, v in self.answer(desc, inputs).items()
        }
        for index, value in self.plant.items():
            out[self.member or next(iter(out))][index] = value
        return out


# ------------------------------------------------------------------------------------------
# LP: a slice's squared norm held in FLOAT16 (DirectML's F10)

F10 = """\
findings:
  - id: F10
    reason: the squared norm held in FLOAT16, saturated at 65504
    when: {operator: LP, data_type: FLOAT16, squared_norm: {min: 65520}}
    fails: true
    nan: false
"""
LP_MEMBERS = {
    "InputTensor": {"DataType": "FLOAT16", "Sizes": [1, 1, 2, 4]},
    "OutputTensor": {"DataType": "FLOAT16", "Sizes": [1, 1, 2, 4]},
    "Axis": 3,
    "Epsilon": 1e-5,
    "P": 2,
}
#: row 0's squared norm 4 x 200^2 = 160000 is past 65504; row 1's, 30, is not
LP_INPUT = np.array([[[[200.0] * 4, [1.0, 2.0, 3.0, 4.0]]]], dtype=np.float16)


def saturating_lp(desc: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """x / sqrt(the squared norm, saturated at 65504): F10's mechanism."""
    x = inputs["InputTensor"].astype(np.float64)
    held = np.minimum(np.sum(x * x, axis=3, keepdims=True), F16_MAX)
    return {"OutputTensor": x / np.sqrt(held + 1e-5)}


@pytest.mark.parametrize(
    ("plant", "outcome", "said"),
    [
        # the mechanism alone: its slice (4 of 8 elements) excused, the other slice judged
        ({}, "xfailed", "F10 excuses 4 of 8 elements (OutputTensor 4), the slices it names"),
        # a NaN, or a wrong value, in the other slice: a failure F10 does not explain
        ({(0, 0, 1, 2): np.nan}, "failed", "but outside them: OutputTensor: at [0, 0, 1, 2]: backend nan"),
        ({(0, 0, 1, 0): 0.25}, "failed", "but outside them: OutputTensor: at [0, 0, 1, 0]: backend 0.25"),
        # a NaN inside its slice: its wrong values are finite (nan: false)
        ({(0, 0, 0, 1): np.nan}, "failed", "1 of them is NaN where the reference is a number"),
        # a wrong value inside its slice: excused, as the saturated norm's are
        ({(0, 0, 0, 1): 0.0}, "xfailed", "F10 excuses 4 of 8 elements"),
    ],
)
def test_a_per_slice_finding_excuses_its_slices_and_judges_the_others(
    plant: dict[tuple[int, ...], float], outcome: str, said: str
) -> None:
    case = numeric("LP_NORMALIZATION", LP_MEMBERS)
    settled = judged(F10, case, {"InputTensor": LP_INPUT}, Planted(saturating_lp, plant))
    assert settled.outcome == outcome, settled.message
    assert said in str(settled.message)
    assert settled.excused == {
        "finding": "F10",
        "scope": "slices",
        "elements": 4,
        "of": 8,
        "outputs": {"OutputTensor": 4},
    }
    if outcome == "failed":
        assert "F10 excuses 4 of 8 elements" in str(settled.message) and settled.finding is None
    else:
        assert settled.finding == "F10"


def test_the_elements_outside_its_slices_may_meet_a_bound_that_covers_the_case() -> None:
    # the other slice 1% off: outside the default model, within 64 times its budget
    def off(desc: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = saturating_lp(desc, inputs)["OutputTensor"]
        out[0, 0, 1] *= 1.01
        return {"OutputTensor": out}

    case = numeric("LP_NORMALIZATION", LP_MEMBERS)
    settled = judged(F10, case, {"InputTensor": LP_INPUT}, Planted(off))
    assert settled.outcome == "failed" and "but outside them" in str(settled.message)
    bound = F10 + (
        "  - id: B1\n    reason: a few FLOAT16 ULP\n    when: {operator: LP, data_type: FLOAT16}\n"
        "    meets: {model: default, ulp_scale: 64}\n"
    )
    settled = judged(bound, case, {"InputTensor": LP_INPUT}, Planted(off))
    assert settled.outcome == "xfailed" and settled.finding == "F10", settled.message
    assert "the others within B1's bound" in str(settled.message)


def test_a_whole_case_finding_still_takes_a_nan_anywhere_and_says_it_took_the_case() -> None:
    whole = F10.replace("    nan: false\n", "    scope: case\n    scope_reason: not per slice\n")
    case = numeric("LP_NORMALIZATION", LP_MEMBERS)
    settled = judged(whole, case, {"InputTensor": LP_INPUT}, Planted(saturating_lp, {(0, 0, 1, 2): np.nan}))
    assert settled.outcome == "xfailed"
    assert settled.excused == {"finding": "F10", "scope": "case", "why": "not per slice"}


# ------------------------------------------------------------------------------------------
# LRN_GRAD: a window's sum of squares held in FLOAT16 (F18)

F18 = """\
findings:
  - id: F18
    reason: window sums of squares held in FLOAT16
    when: {operator: LRNG, data_type: FLOAT16, window_square_sum: {min: 65520}}
    fails: true
    nan: false
"""


def lrng(local_size: int, channels: int = 7, spatial: tuple[int, int] = (1, 1), alpha: float = 1.0) -> Case:
    tensor = {"DataType": "FLOAT16", "Sizes": [1, channels, *spatial]}
    members = {"InputTensor": tensor, "InputGradientTensor": tensor, "OutputGradientTensor": tensor}
    members |= {"CrossChannel": True, "LocalSize": local_size, "Alpha": alpha, "Beta": 0.5, "Bias": 1.0}
    return numeric("LOCAL_RESPONSE_NORMALIZATION_GRAD", members)


@pytest.mark.parametrize(
    ("local_size", "channels"),
    [
        # windows [j - 1, j + 1]: those of channels 2, 3, 4 hold channel 3's 300^2 = 90000; an
        # element reads its own window and those that hold it, channels 1 to 5
        (3, [1, 2, 3, 4, 5]),
        # windows [j, j + 1]: channels 2 and 3's hold it; the gradient at k reads windows k and
        # k - 1 (transposed), and an implementation that reads the forward window W(k) (F9:
        # k, k + 1) the window k + 1 too: channels 1 to 4
        (2, [1, 2, 3, 4]),
    ],
)
def test_a_window_out_of_range_excuses_every_element_that_reads_it(
    local_size: int, channels: list[int]
) -> None:
    (bound,) = findings(F18)
    x = np.ones((1, 7, 1, 1), np.float16)
    x[0, 3] = 300.0
    facts = CaseFacts.of(lrng(local_size), spec=SPEC, inputs={"InputTensor": x, "InputGradientTensor": x})
    assert bound.covers(facts)
    (mask,) = bound.excused_elements(facts).values()
    assert list(np.flatnonzero(mask[0, :, 0, 0])) == channels


@pytest.mark.parametrize(
    ("value", "by_sum", "by_term"), [(225.0, False, True), (260.0, True, True), (200.0, False, False)]
)
def test_a_window_term_leaves_the_range_before_its_sum_where_alpha_passes_local_size(
    value: float, by_sum: bool, by_term: bool
) -> None:
    # Alpha 4, LocalSize 3: d = 1 + 4/3 S passes 65504 at S = 49128 (225^2 = 50625: d = 67501)
    (bound,) = findings(F18.replace("window_square_sum", "window_term"))
    (by_sums,) = findings(F18)
    case = lrng(3, alpha=4.0)
    x = np.ones((1, 7, 1, 1), np.float16)
    x[0, 3] = value
    facts = CaseFacts.of(case, spec=SPEC, inputs={"InputTensor": x, "InputGradientTensor": x})
    assert (by_sums.covers(facts), bound.covers(facts)) == (by_sum, by_term)


def saturating_lrng(desc: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The gradient with every window's sum of squares saturated at 65504: F18's mechanism."""
    plan = plan_of(desc, SPEC)
    x, g = (inputs[k].astype(np.float64) for k in ("InputTensor", "InputGradientTensor"))
    d = plan.bias + plan.alpha / plan.divisor * np.minimum(region_sum(x * x, plan), F16_MAX)
    inner = region_sum(g * x * d ** (-plan.beta - 1.0), plan, transposed=True)
    return {"OutputGradientTensor": g * d**-plan.beta - 2 * plan.alpha * plan.beta / plan.divisor * x * inner}


@pytest.mark.parametrize(
    ("plant", "outcome"),
    [({}, "xfailed"), ({(0, 6, 1, 1): np.nan}, "failed"), ({(0, 0, 0, 0): 3.0}, "failed")],
)
def test_the_saturated_window_sums_fall_inside_the_elements_excused(
    plant: dict[tuple[int, ...], float], outcome: str
) -> None:
    case = lrng(3, spatial=(2, 2))
    rng = np.random.default_rng(1)
    x = rng.uniform(0.5, 1.5, (1, 7, 2, 2)).astype(np.float16)
    x[0, 3] = 300.0
    inputs = {"InputTensor": x, "InputGradientTensor": rng.standard_normal(x.shape).astype(np.float16)}
    settled = judged(F18, case, inputs, Planted(saturating_lrng, plant))
    assert settled.outcome == outcome, settled.message
    assert settled.excused is not None and (settled.excused["elements"], settled.excused["of"]) == (20, 28)


# ------------------------------------------------------------------------------------------
# The normalizations: a slice's variance, a channel's gradient sum


def test_a_variance_out_of_range_excuses_its_slice_and_its_variance_output() -> None:
    (bound,) = findings(
        "findings:\n  - id: F1\n    reason: variance saturated\n    fails: true\n    nan: false\n"
        "    when: {operator: BNT, data_type: FLOAT16, variance: {min: 65520}}\n"
    )
    x = {"DataType": "FLOAT16", "Sizes": [2, 3, 1, 2]}
    s = {"DataType": "FLOAT16", "Sizes": [1, 3, 1, 1]}
    members = {"InputTensor": x, "ScaleTensor": s, "BiasTensor": s, "OutputTensor": x}
    members |= {"OutputMeanTensor": s, "OutputVarianceTensor": s, "Epsilon": 1e-5}
    case = numeric("BATCH_NORMALIZATION_TRAINING", members)
    data = np.ones((2, 3, 1, 2), np.float16)
    data[:, 1] = [[[-400.0, 400.0]], [[-400.0, 400.0]]]  # channel 1: variance 160000
    ones = np.ones((1, 3, 1, 1), np.float16)
    facts = CaseFacts.of(
        case, spec=SPEC, inputs={"InputTensor": data, "ScaleTensor": ones, "BiasTensor": ones}
    )
    masks = bound.excused_elements(facts)
    assert set(masks) == {"OutputTensor", "OutputVarianceTensor"}  # the mean does not read it
    assert list(np.flatnonzero(masks["OutputVarianceTensor"])) == [1]
    assert np.array_equal(np.flatnonzero(masks["OutputTensor"].any(axis=(0, 2, 3))), [1])
    assert masks["OutputTensor"][:, 1].all()


def bn_grad_members(x_sizes: list[int], stat_sizes: list[int]) -> dict[str, Any]:
    """A FLOAT16 batch-norm gradient desc's members: input-shaped and statistics-shaped tensors."""
    x = {"DataType": "FLOAT16", "Sizes": x_sizes}
    s = {"DataType": "FLOAT16", "Sizes": stat_sizes}
    members = {"InputTensor": x, "InputGradientTensor": x, "MeanTensor": s, "VarianceTensor": s}
    members |= {"ScaleTensor": s, "OutputGradientTensor": x, "OutputScaleGradientTensor": s}
    return members | {"OutputBiasGradientTensor": s, "Epsilon": 1e-5}


@pytest.mark.parametrize(
    ("operator", "outputs"),
    [
        # given statistics: the input gradient is dy Scale / sd, which does not read the sum
        ("BATCH_NORMALIZATION_GRAD", {"OutputScaleGradientTensor": 1}),
        # batch statistics: the input gradient's correction averages the same products
        ("BATCH_NORMALIZATION_TRAINING_GRAD", {"OutputScaleGradientTensor": 1, "OutputGradientTensor": 4}),
    ],
)
def test_a_channel_sum_out_of_range_excuses_what_reads_it(operator: str, outputs: dict[str, int]) -> None:
    (bound,) = findings(
        "findings:\n  - id: F19\n    reason: sum held in FLOAT16\n    fails: true\n"
        f"    when: {{operator: {operator}, data_type: FLOAT16, centred_gradient_sum: {{min: 65520}}}}\n"
    )
    members = bn_grad_members([1, 2, 1, 4], [1, 2, 1, 1])
    xs = np.zeros((1, 2, 1, 4))
    xs[0, 1] = 20000.0  # channel 1: 4 x 20000 = 80000 about a Mean of 0
    inputs = {
        "InputTensor": xs.astype(np.float16),
        "InputGradientTensor": np.ones((1, 2, 1, 4), np.float16),
        "MeanTensor": np.zeros((1, 2, 1, 1), np.float16),
        "VarianceTensor": np.ones((1, 2, 1, 1), np.float16),
        "ScaleTensor": np.ones((1, 2, 1, 1), np.float16),
    }
    masks = bound.excused_elements(CaseFacts.of(numeric(operator, members), spec=SPEC, inputs=inputs))
    assert {k: int(m.sum()) for k, m in masks.items()} == outputs
    assert masks["OutputScaleGradientTensor"].reshape(-1).tolist() == [False, True]


@pytest.mark.parametrize(
    ("fact", "excused"), [("centred_gradient_sum", False), ("centred_gradient_abs_sum", True)]
)
def test_a_partial_sum_out_of_range_is_named_by_the_products_magnitudes(fact: str, excused: bool) -> None:
    """JAX's float16 vjp sums in order: products 40000, 40000, -70000 leave float16's range at
    80000 on the way to a total of 10000. Only the sum of their magnitudes names that channel."""
    (bound,) = findings(
        "findings:\n  - id: J4\n    reason: a partial sum held in FLOAT16\n    fails: true\n"
        f"    when: {{operator: BNG, data_type: FLOAT16, {fact}: {{min: 65520}}}}\n"
    )
    members = bn_grad_members([1, 1, 1, 3], [1, 1, 1, 1])
    one = np.ones((1, 1, 1, 1), np.float16)
    inputs = {
        "InputTensor": np.array([20000.0, 20000.0, -35000.0], np.float16).reshape(1, 1, 1, 3),
        "InputGradientTensor": np.full((1, 1, 1, 3), 2.0, np.float16),
        "MeanTensor": 0 * one,
        "VarianceTensor": one,
        "ScaleTensor": one,
    }
    facts = CaseFacts.of(numeric("BATCH_NORMALIZATION_GRAD", members), spec=SPEC, inputs=inputs)
    masks = bound.excused_elements(facts)
    assert bool(masks and masks["OutputScaleGradientTensor"].all()) == excused


# ------------------------------------------------------------------------------------------
# F5: one-element slices whose elements may be NaN (nan: only)

F5 = """\
findings:
  - id: F5
    reason: a negative variance over one-element slices
    when: {operator: MVN1, kind: numeric, reduction_length: 1, NormalizeVariance: true}
    fails: true
    nan: only
    scope: slices
"""
MVN1_MEMBERS = {
    "InputTensor": {"DataType": "FLOAT16", "Sizes": [1, 3, 1, 2]},
    "OutputTensor": {"DataType": "FLOAT16", "Sizes": [1, 3, 1, 2]},
    "Axes": [0, 2],
    "NormalizeVariance": True,
    "Epsilon": 1e-3,
}


def reference_of(desc: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v for k, v in execute(desc, inputs, SPEC).items()}


@pytest.mark.parametrize(
    ("plant", "outcome", "elements"),
    [
        ({(0, 0, 0, 1): np.nan, (0, 2, 0, 0): np.nan}, "xfailed", 2),  # its NaN: excused
        ({(0, 0, 0, 1): np.nan, (0, 2, 0, 0): 0.5}, "failed", 1),  # a finite wrong value: not its
    ],
)
def test_a_finding_whose_wrong_values_are_nan_excuses_the_nan_elements_only(
    plant: dict[tuple[int, ...], float], outcome: str, elements: int
) -> None:
    case = numeric("MEAN_VARIANCE_NORMALIZATION1", MVN1_MEMBERS)
    x = np.arange(6, dtype=np.float16).reshape(1, 3, 1, 2)
    settled = judged(F5, case, {"InputTensor": x}, Planted(reference_of, plant))
    assert settled.outcome == outcome, settled.message
    assert settled.excused is not None and settled.excused["elements"] == elements


# ------------------------------------------------------------------------------------------
# The file says the scope, and refuses one that cannot hold


@pytest.mark.parametrize(
    ("text", "scope"),
    [
        (F10, "slices"),  # named by a per-slice fact: its slices
        (F10.replace("squared_norm", "largest_squared_norm"), "case"),  # by a case-wide one: whole
        (F10 + "    scope: case\n", "case"),  # written: any slice's data, the case whole
        (F5, "slices"),
    ],
)
def test_a_findings_scope_is_explicit(text: str, scope: str) -> None:
    (bound,) = findings(text)
    assert bound.scope == scope


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (F10 + "    scope: rows\n", "scope is one of slices, case"),
        (F10 + "    message: nan\n", "'message:' narrows a whole case's failure"),
        (F10 + "    scope_reason: why\n", "scope_reason is the text that says why it takes whole cases"),
        (
            F10.replace("squared_norm", "largest_squared_norm") + "    scope: slices\n",
            "'scope: slices' names its slices by a per-slice fact",
        ),
        (
            "findings:\n  - {id: B, reason: r, when: {operator: LP, squared_norm: {min: 1}}, meets: default, "
            "scope: slices}\n",
            "a bound (meets) judges whole cases",
        ),
        (F10.replace("{min: 65520}", "even"), "a per-slice fact takes a range"),
        (F10.replace("operator: LP", "operator: MVN1"), "squared_norm: not a case field"),
        (F10.replace("nan: false", "nan: sometimes"), "'nan: only'"),
    ],
)
def test_a_scope_that_cannot_hold_is_one_line(text: str, message: str) -> None:
    with pytest.raises(ExpectError, match=f"^f.yaml:\\d+: .*{re.escape(message)}"):
        findings(text)


def test_the_shipped_fails_findings_say_their_scope_and_why_a_whole_case() -> None:
    import yaml

    from dmlconform.runner.expect import KNOWN_DIR

    for path in sorted(KNOWN_DIR.glob("*.yaml")):
        for raw in yaml.safe_load(path.read_text())["findings"]:
            if raw.get("fails"):
                assert raw.get("scope") in ("slices", "case"), (path.name, raw["id"])
                assert raw["scope"] == "slices" or raw.get("scope_reason"), (path.name, raw["id"])


# ------------------------------------------------------------------------------------------
# A run: the report says what each finding excused


def test_a_run_reports_the_elements_a_finding_excused(pytester: pytest.Pytester, tmp_path: Path) -> None:
    expect = tmp_path / "f.yaml"
    expect.write_text(F10)
    selection = ["--dml-operators=LP", "--dml-dtypes=FLOAT16", "--dml-kinds=numeric", "--dml-cases=2"]
    selection += ["--dml-max-elements=4096", f"--dml-expect={expect}"]
    results = {}
    for backend in ("SaturatingLp", "SaturatingLpNanOutside"):
        report = tmp_path / backend
        ran = run_suite(
            pytester, f"--dml-backend=scoped_backends:{backend}", f"--dml-report={report}", *selection
        )
        data = json.loads((report / "results.json").read_text())
        results[backend] = (ran, report, {c["id"]: c for c in data["cases"]})
    ran, report, cases = results["SaturatingLp"]
    known = [c for c in cases.values() if c["outcome"] == "xfailed"]
    assert ran.ret == 0 and known, [c["message"] for c in cases.values()]
    assert all(c["known_finding"] == "F10" and c["excused"]["scope"] == "slices" for c in known)
    partly = [c for c in known if c["excused"]["elements"] < c["excused"]["of"]]
    assert partly, "no case with slices F10 does not name"
    elements = sum(c["excused"]["elements"] for c in known)
    of = sum(c["excused"]["of"] for c in known)
    cases_word = f"{len(known)} case{'s' if len(known) != 1 else ''}"
    said = f"F10 ({cases_word}; excused: {elements:,} of {of:,} elements in {cases_word})"
    assert said in ran.stdout.str()
    assert said.replace("F10", "**F10**", 1) in (report / "summary.md").read_text()
    assert f"excused: {elements:,} of {of:,} elements in {cases_word}" in (report / "index.html").read_text()
    # the same mechanism with a NaN in a slice F10 does not name: each such case fails, naming both
    ran, _, planted = results["SaturatingLpNanOutside"]
    assert ran.ret == 1
    for c in partly:
        p = planted[c["id"]]
        assert p["outcome"] == "failed" and p["known_finding"] is None, p["message"]
        assert f"F10 excuses {c['excused']['elements']} of {c['excused']['of']} elements" in p["message"]
        assert "but outside them: OutputTensor: at" in p["message"] and "backend nan" in p["message"]
    # the cases whose every slice F10 names stay its (no element to plant in)
    assert all(planted[c["id"]]["outcome"] == "xfailed" for c in known if c not in partly)


def test_the_counts_say_what_each_finding_excused() -> None:
    from dmlconform.report.classes import finding_counts, finding_excused, findings_line

    def rec(outcome: str, finding: str | None, excused: dict[str, Any] | None) -> dict[str, Any]:
        return {"outcome": outcome, "known_finding": finding, "excused": excused}

    sliced = {"finding": "F10", "scope": "slices", "elements": 64, "of": 256, "outputs": {"OutputTensor": 64}}
    records = [
        rec("xfailed", "F10", sliced),
        rec("xfailed", "F10", {**sliced, "elements": 1000, "of": 1000}),
        rec("failed", None, sliced),  # excused 64 but failed outside: not the finding's case
        rec("xfailed", "F9", {"finding": "F9", "scope": "case", "why": "every window wrong"}),
        rec("xfailed", "F1", None),  # a bound: it excuses nothing
    ]
    excused = finding_excused(records)
    assert excused == {
        "F10": {"elements": 1064, "of": 1256, "cases": 2, "whole": 0},
        "F9": {"elements": 0, "of": 0, "cases": 0, "whole": 1},
    }
    assert findings_line(finding_counts(records), excused) == (
        "F10 (2 cases; excused: 1,064 of 1,256 elements in 2 cases), "
        "F1 (1 case), F9 (1 case; excused: 1 case whole)"
    )
