"""Expectations files: the findings (YAML) format's predicates and bounds, the case-id format,
the outcome a covered case settles to, and the accuracy classes summed from records."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from helpers import SPEC
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlconform.report.classes import accuracy_classes, finding_counts, findings_line, worse_classes
from dmlconform.runner.cases import Case
from dmlconform.runner.expect import (
    CaseFacts,
    ExpectError,
    known_findings_file,
    load_expectations,
    parse_expectations,
    parse_findings,
    settle,
)
from dmlconform.runner.judging import CaseResult
from dmlconform.specification.desc import parse_desc
from dmlconform.tolerance.options import NO_OPTIONS, ToleranceOptions


def facts(**kw: Any) -> CaseFacts:
    base: dict[str, Any] = {
        "id": "numeric[LOCAL_RESPONSE_NORMALIZATION_GRAD-6_4-FLOAT32-0003]",
        "kind": "numeric",
        "operator": "LOCAL_RESPONSE_NORMALIZATION_GRAD",
        "level": SPEC.level("6_4"),
        "data_type": "FLOAT32",
        "regime": "standard_normal",
        "reduction_length": 3,
        "members": {"LocalSize": 4, "CrossChannel": True, "Alpha": 0.5},
    }
    base.update(kw)
    return CaseFacts(**base)


def one(text: str) -> Any:
    (bound,) = parse_findings(text, "f.yaml", spec=SPEC)
    return bound


@given(local_size=st.integers(1, 64), data_type=st.sampled_from(["FLOAT32", "FLOAT16"]))
@settings(max_examples=60, deadline=None)
def test_member_parity_and_short_operator_name(local_size: int, data_type: str) -> None:
    bound = one(
        "findings:\n  - {id: F9, reason: even window, when: {operator: LRNG, LocalSize: even}, fails: true}\n"
    )
    f = facts(members={"LocalSize": local_size}, data_type=data_type)
    assert bound.covers(f) == (local_size % 2 == 0)
    assert not bound.covers(facts(operator="LOCAL_RESPONSE_NORMALIZATION", members={"LocalSize": 2}))


@given(n=st.integers(1, 1 << 22))
@settings(max_examples=80, deadline=None)
def test_reduction_length_range_is_inclusive(n: int) -> None:
    bound = one(
        "findings:\n"
        "  - id: F2\n    reason: long sums\n"
        "    when: {data_type: FLOAT32, reduction_length: {min: 65535, max: 1048576}}\n"
        "    meets: lenient\n"
    )
    assert bound.covers(facts(reduction_length=n)) == (65535 <= n <= 1048576)


def test_every_predicate_must_hold_and_a_list_of_mappings_is_any_of() -> None:
    bound = one(
        "findings:\n"
        "  - id: F12\n    reason: refused\n    fails: true\n"
        "    when:\n"
        "      - {operator: LP, P: 1}\n"
        "      - {operator: LP, P: 2, reduction_length: 1}\n"
    )
    lp = {"operator": "LP_NORMALIZATION", "id": "numeric[LP_NORMALIZATION-6_4-FLOAT32-0000]"}
    assert bound.covers(facts(**lp, members={"P": 1}, reduction_length=7))
    assert bound.covers(facts(**lp, members={"P": 2}, reduction_length=1))
    assert not bound.covers(facts(**lp, members={"P": 2}, reduction_length=7))
    assert not bound.covers(facts(members={"P": 1}))  # another operator


def test_case_fields_levels_relations_and_presence() -> None:
    bound = one(
        "findings:\n"
        "  - id: F5\n    reason: one-element MVN1 NaN\n    fails: true\n"
        "    when: {kind: metamorphic, feature_level: {min: '6_0'}, relation: output-is-mvn1-over-scale-ones,\n"
        "           reduction_length: 1, ScaleTensor: absent}\n"
    )
    f = facts(
        kind="metamorphic",
        operator="BATCH_NORMALIZATION_TRAINING",
        relation="output-is-mvn1-over-scale-ones",
        reduction_length=1,
        members={},
    )
    assert bound.covers(f)
    assert not bound.covers(facts(**{**f.__dict__, "level": SPEC.level("5_1")}))
    assert not bound.covers(facts(**{**f.__dict__, "members": {"ScaleTensor": object()}}))
    assert not bound.covers(facts(**{**f.__dict__, "reduction_length": 2}))


F10_TEXT = """\
findings:
  - id: F10
    reason: squared norm held in FLOAT16
    fails: true
    when:
      - {operator: LP, data_type: FLOAT16, largest_squared_norm: {min: 65520}}
      - {operator: LP, data_type: FLOAT16, smallest_squared_norm: {max: 6.1e-5}, Epsilon: {max: 6.1e-5}}
"""


def lp_case(p: int, epsilon: float) -> Case:
    tensor = {"DataType": "FLOAT16", "Sizes": [1, 1, 2, 4]}
    members = {"InputTensor": tensor, "OutputTensor": tensor, "Axis": 3, "Epsilon": epsilon, "P": p}
    desc = parse_desc({"type": "DML_OPERATOR_LP_NORMALIZATION", "desc": members})
    return Case("numeric", "LP_NORMALIZATION", SPEC.level("6_4"), "FLOAT16", 0, desc)


@pytest.mark.parametrize(
    ("p", "rows", "epsilon", "covered"),
    [
        # P 1: the squared norm is (sum |x|)^2: 4 x 64 = 256 squares to 65536, 4 x 63 to 63504
        (1, [[64.0] * 4, [1.0] * 4], 1e-5, True),
        (1, [[63.0] * 4, [1.0] * 4], 1e-5, False),
        # P 2: sum x^2: 4 x 128^2 = 65536; 4 x 127^2 = 64516
        (2, [[1.0] * 4, [128.0] * 4], 1e-5, True),
        (2, [[1.0] * 4, [127.0] * 4], 1e-5, False),
        # the smallest: 4 x (2^-9)^2 = 2^-16, under FLOAT16's smallest normal 2^-14, as Epsilon is
        (2, [[2.0**-9] * 4, [1.0] * 4], 1e-5, True),
        (2, [[2.0**-9] * 4, [1.0] * 4], 1e-3, False),
        (2, [[2.0**-7] * 4, [1.0] * 4], 1e-5, False),  # 4 x 2^-14 = 2^-12: a normal FLOAT16
    ],
)
def test_a_data_fact_is_read_from_the_inputs_judged(
    p: int, rows: list, epsilon: float, covered: bool
) -> None:
    bound = one(F10_TEXT)
    case = lp_case(p, epsilon)
    inputs = {"InputTensor": np.array([[rows]], dtype=np.float16)}
    assert bound.covers(CaseFacts.of(case, spec=SPEC, inputs=inputs)) == covered
    # before it ran (no inputs) no data predicate holds
    assert not bound.covers(CaseFacts.of(case, spec=SPEC))


F18_TEXT = """\
findings:
  - id: F18
    reason: window sums of squares held in FLOAT16
    fails: true
    when: {operator: LRNG, data_type: FLOAT16, largest_window_square_sum: {min: 65520}}
"""


@pytest.mark.parametrize(
    ("cross_channel", "value", "covered"),
    [
        # within a channel, LocalSize 3: an inner element's window is 3 x 3, so 9 c^2
        (False, 86.0, True),  # 9 x 86^2 = 66564
        (False, 85.0, False),  # 9 x 85^2 = 65025
        # across channels: 3 channels, 3 c^2
        (True, 148.0, True),  # 65712
        (True, 147.0, False),  # 64827
    ],
)
def test_a_window_fact_sums_each_window_as_the_operator_does(
    cross_channel: bool, value: float, covered: bool
) -> None:
    bound = one(F18_TEXT)
    tensor = {"DataType": "FLOAT16", "Sizes": [1, 3, 3, 3]}
    members = {
        "InputTensor": tensor,
        "InputGradientTensor": tensor,
        "OutputGradientTensor": tensor,
        "CrossChannel": cross_channel,
        "LocalSize": 3,
        "Alpha": 1.0,
        "Beta": 0.5,
        "Bias": 1.0,
    }
    desc = parse_desc({"type": "DML_OPERATOR_LOCAL_RESPONSE_NORMALIZATION_GRAD", "desc": members})
    case = Case("numeric", "LOCAL_RESPONSE_NORMALIZATION_GRAD", SPEC.level("6_4"), "FLOAT16", 0, desc)
    x = np.full((1, 3, 3, 3), value, dtype=np.float16)
    inputs = {"InputTensor": x, "InputGradientTensor": np.ones_like(x)}
    assert bound.covers(CaseFacts.of(case, spec=SPEC, inputs=inputs)) == covered


@pytest.mark.parametrize(("d", "covered"), [(256.0, True), (255.0, False)])
def test_the_variance_fact_is_about_the_mean(d: float, covered: bool) -> None:
    bound = one(
        "findings:\n  - id: F1\n    reason: variance held in FLOAT16\n    fails: true\n"
        "    when: {operator: MVN1, data_type: FLOAT16, largest_variance: {min: 65520}}\n"
    )
    tensor = {"DataType": "FLOAT16", "Sizes": [1, 1, 1, 4]}
    members = {"InputTensor": tensor, "OutputTensor": tensor, "Axes": [3], "NormalizeVariance": True}
    desc = parse_desc({"type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1", "desc": members})
    case = Case("numeric", "MEAN_VARIANCE_NORMALIZATION1", SPEC.level("6_4"), "FLOAT16", 0, desc)
    # a mean of 1000 puts the mean square far past 65504 either way: only the variance counts
    x = np.array([1000 - d, 1000 + d, 1000 - d, 1000 + d], dtype=np.float16).reshape(1, 1, 1, 4)
    assert bound.covers(CaseFacts.of(case, spec=SPEC, inputs={"InputTensor": x})) == covered


@pytest.mark.parametrize(("c", "covered"), [(17000.0, True), (15000.0, False)])
def test_the_gradient_sum_fact_sums_each_channel_about_its_mean(c: float, covered: bool) -> None:
    bound = one(
        "findings:\n  - id: F19\n    reason: sum held in FLOAT16\n    fails: true\n"
        "    when: {operator: BNG, data_type: FLOAT16, largest_centred_gradient_sum: {min: 65520}}\n"
    )
    x = {"DataType": "FLOAT16", "Sizes": [1, 2, 1, 4]}
    s = {"DataType": "FLOAT16", "Sizes": [1, 2, 1, 1]}
    members = {"InputTensor": x, "InputGradientTensor": x, "MeanTensor": s, "VarianceTensor": s}
    members |= {"ScaleTensor": s, "OutputGradientTensor": x, "OutputScaleGradientTensor": s}
    members |= {"OutputBiasGradientTensor": s, "Epsilon": 1e-5}
    desc = parse_desc({"type": "DML_OPERATOR_BATCH_NORMALIZATION_GRAD", "desc": members})
    case = Case("numeric", "BATCH_NORMALIZATION_GRAD", SPEC.level("6_4"), "FLOAT16", 0, desc)
    # channel 1: four elements c + 10000 about a mean of 10000, gradient 1: a sum of 4 c (about
    # 0 it would pass 65504 either way)
    xs = np.full((1, 2, 1, 4), c + 10000.0)
    xs[0, 0] = 1.0  # channel 0: small
    inputs = {
        "InputTensor": xs.astype(np.float16),
        "InputGradientTensor": np.ones((1, 2, 1, 4), np.float16),
        "MeanTensor": np.full((1, 2, 1, 1), 10000.0, np.float16),
        "VarianceTensor": np.ones((1, 2, 1, 1), np.float16),
        "ScaleTensor": np.ones((1, 2, 1, 1), np.float16),
    }
    assert bound.covers(CaseFacts.of(case, spec=SPEC, inputs=inputs)) == covered


def test_data_facts_are_computed_only_when_a_predicate_asks() -> None:
    # inputs without the input tensor: computing a fact fails, so each step shows whether it ran
    facts = CaseFacts.of(lp_case(2, 1e-5), spec=SPEC, inputs={"Unrelated": np.zeros(4, np.float16)})
    assert "largest_squared_norm" in facts.data and len(facts.data) == 2
    assert not one(F10_TEXT.replace("data_type: FLOAT16,", "data_type: FLOAT32,")).covers(facts)
    with pytest.raises(KeyError, match="InputTensor"):
        one(F10_TEXT).covers(facts)


def test_a_data_fact_of_another_kernel_is_refused() -> None:
    with pytest.raises(ExpectError, match="largest_squared_norm: not a case field.*a data fact of the named"):
        parse_findings(F10_TEXT.replace("operator: LP,", "operator: MVN1,", 1), "f.yaml", spec=SPEC)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("findings:\n  - id: F1\n    when: {data_type: FLOAT16}\n    meets: default\n", 2, "has no reason"),
        (
            "findings:\n  - id: F1\n    reason: r\n    when: {data_type: FLOAT16}\n    fails: true\n",
            4,
            "would hide any regression",
        ),
        (
            "findings:\n  - id: F1\n    reason: r\n    when: {operator: LRNG}\n    fails: true\n",
            4,
            "whole operators",
        ),
        (
            "findings:\n  - id: F1\n    reason: r\n    when:\n      data_type: FLOAT16\n      Nope: 1\n    meets: default\n",
            6,
            "Nope: not a case field",
        ),
        (
            "findings:\n  - id: F1\n    reason: r\n    when: {operator: NOT_AN_OP, P: 1}\n    fails: true\n",
            4,
            "operator",
        ),
        (
            "findings:\n  - id: F1\n    reason: r\n    when: {data_type: FLOAT16}\n    meets: no-such-model\n",
            5,
            "unknown tolerance model 'no-such-model'",
        ),
        (
            "findings:\n  - id: F1\n    reason: r\n    when: {data_type: FLOAT16}\n    meets: default\n    fails: true\n",
            2,
            "either 'fails: true'",
        ),
        (
            "findings:\n  - id: F1\n    reason: r\n    when: {feature_level: 6_4, P: 1}\n    fails: true\n",
            4,
            "quoted string",
        ),
        ("findings:\n  - id: F1\n    reason: r\n  when: x\n", 4, "not valid YAML"),
    ],
)
def test_a_bad_findings_file_is_one_line_with_file_and_line(text: str, line: int, message: str) -> None:
    with pytest.raises(ExpectError) as info:
        parse_findings(text, "bad.yaml", spec=SPEC)
    text_of = str(info.value)
    assert text_of.startswith(f"bad.yaml:{line}: "), text_of
    assert message in text_of and "\n" not in text_of


def test_meets_rejudges_both_ways() -> None:
    bound = one(
        "findings:\n  - {id: F1, reason: stats, when: {data_type: FLOAT16}, meets: fp16-statistics}\n"
    )
    f16 = facts(data_type="FLOAT16")
    asked: list[ToleranceOptions] = []

    def within(options: ToleranceOptions) -> tuple[bool, str | None]:
        asked.append(options)
        return True, None

    s = settle([bound], f16, "failed", "abs error 0.01 > budget 0.001", within)
    assert (s.outcome, s.finding) == ("xfailed", "F1") and asked == [
        ToleranceOptions(model="fp16-statistics")
    ]
    assert "within F1's bound" in str(s.message)

    s = settle([bound], f16, "failed", "abs error 9 > budget 0.001", lambda o: (False, "abs error 9 > 0.002"))
    assert s.outcome == "failed" and s.finding is None
    assert "outside F1's bound" in str(s.message) and "fp16-statistics" in str(s.message)

    s = settle([bound], f16, "failed", "backend rejected a legal desc", lambda o: None)
    assert s.outcome == "failed" and "judges no outputs" in str(s.message)
    # a pass under a bound is a pass, not a stale expectation; an uncovered case is untouched
    assert settle([bound], f16, "passed", None, within).outcome == "passed"
    assert settle([bound], facts(), "failed", "m", within).outcome == "failed"


def test_fails_with_a_message_bound_and_first_explaining_wins() -> None:
    found = parse_findings(
        "findings:\n"
        "  - {id: F12, reason: refused, when: {operator: LP, P: 1}, fails: true, message: rejected a legal desc}\n"
        "  - {id: F1, reason: stats, when: {data_type: FLOAT16}, meets: fp16-statistics}\n",
        "f.yaml",
        spec=SPEC,
    )
    lp = facts(operator="LP_NORMALIZATION", data_type="FLOAT16", members={"P": 1})
    refused = settle(
        found, lp, "failed", "backend rejected a legal desc: E_INVALIDARG", lambda o: (False, "x")
    )
    assert (refused.outcome, refused.finding) == ("xfailed", "F12")
    wrong = settle(found, lp, "failed", "abs error 3 > budget 1", lambda o: (True, None))
    assert (wrong.outcome, wrong.finding) == ("xfailed", "F1")  # F12 does not explain it, F1 does
    worse = settle(found, lp, "failed", "abs error 3 > budget 1", lambda o: (False, "still 3"))
    assert (
        worse.outcome == "failed"
        and "not F12's" in str(worse.message)
        and "outside F1's" in str(worse.message)
    )
    # a pass under an entry bounded by its message is a pass (how its cases fail when they do);
    # under a plain ``fails`` entry it is xpassed: the entry may be stale
    assert settle(found, lp, "passed", None).outcome == "passed"
    plain = parse_findings(
        "findings:\n  - {id: F9, reason: even window, when: {operator: LRNG, LocalSize: even}, fails: true}\n",
        spec=SPEC,
    )
    assert settle(plain, facts(), "passed", None).outcome == "xpassed"


def test_a_bug_that_makes_no_nan_does_not_take_a_nan() -> None:
    found = parse_findings(
        "findings:\n"
        "  - {id: F9, reason: even window, when: {operator: LRNG, LocalSize: even}, fails: true, nan: false}\n"
        "  - {id: F1, reason: stats, when: {data_type: FLOAT16}, meets: fp16-statistics}\n",
        "f.yaml",
        spec=SPEC,
    )
    even = facts(data_type="FLOAT16")
    wrong = settle(found, even, "failed", "backend 0.5, reference 0.25", lambda o: (False, "x"))
    assert (wrong.outcome, wrong.finding) == ("xfailed", "F9")
    nan = settle(found, even, "failed", "backend nan, reference 0.25", lambda o: (False, "x"), nan=True)
    assert nan.outcome == "failed" and "not F9's (a NaN where the reference is a number)" in str(nan.message)
    assert settle(found, even, "failed", "backend nan", lambda o: (True, None), nan=True).finding == "F1"
    # and only a fails entry says it
    with pytest.raises(ExpectError, match="'nan: false'.*goes with 'fails: true'"):
        parse_findings(
            "findings:\n  - {id: F1, reason: r, when: {data_type: FLOAT16}, meets: default, nan: false}\n",
            "f.yaml",
            spec=SPEC,
        )


def test_the_worst_element_tells_a_nan_where_the_reference_is_a_number() -> None:
    def result(backend: float, reference: float) -> CaseResult:
        return CaseResult("failed", errors={"worst": {"backend": backend, "reference": reference}})

    assert result(float("nan"), 0.25).nan_where_number()
    assert not result(float("nan"), float("nan")).nan_where_number()
    assert not result(float("inf"), 0.25).nan_where_number()
    assert not result(0.5, 0.25).nan_where_number()
    assert not CaseResult("failed").nan_where_number()


def test_case_id_format_still_works_and_names_its_finding(tmp_path: Path) -> None:
    path = tmp_path / "expect.txt"
    path.write_text("numeric[LOCAL_RESPONSE_NORMALIZATION_GRAD-*]  # F9: even window\n")
    (e,) = load_expectations(path, SPEC)
    assert e.finding == "F9" and e.where == f"{path}:1"
    s = settle([e], facts(), "failed", "anything at all")
    assert (s.outcome, s.finding) == ("xfailed", "F9")
    with pytest.raises(ExpectError, match=r"expect\.txt:1: this is the findings \(YAML\) format"):
        parse_expectations("findings:\n", f"{tmp_path}/expect.txt")


def test_shipped_findings_files_load_against_the_spec() -> None:
    for backend in ("directml", "torch", "onnxruntime", "openvino", "jax"):
        path = known_findings_file(backend)
        assert path is not None and path.parent.name == "known_findings"
        found = load_expectations(path, SPEC)
        assert found and all(b.reason and b.finding for b in found)
    assert known_findings_file("numpy") is None
    assert known_findings_file("../etc/passwd") is None


def test_every_shipped_finding_names_its_explanation_and_reproducer() -> None:
    """The issue's rule: a finding comes with its mechanism explained (a page and an anchor that
    exist) and a reproducer directory under cases/ that runs without the suite (experiment.py) or
    replays (case.json)."""
    repo = Path(__file__).resolve().parents[1]
    for path in sorted((repo / "dmlconform" / "known_findings").glob("*.yaml")):
        for finding in yaml.safe_load(path.read_text())["findings"]:
            where = f"{path.name} {finding['id']}"
            page, _, anchor = finding.get("explained", "").partition("#")
            assert page and (repo / page).is_file(), where
            assert anchor and re.search(rf'id="{re.escape(anchor)}"', (repo / page).read_text()), where
            case = repo / finding.get("reproducer", "-")
            assert case.parent.parent == repo / "cases", where
            assert (case / "experiment.py").is_file() or (case / "case.json").is_file(), where


def test_accuracy_class_is_the_weakest_of_an_operator_x_data_type() -> None:
    def rec(op: str, dt: str, outcome: str, cls: str | None, kind: str = "numeric") -> dict[str, Any]:
        return {"operator": op, "data_type": dt, "outcome": outcome, "accuracy_class": cls, "kind": kind}

    records = [
        rec("MVN", "FLOAT32", "passed", "tight"),
        rec("MVN", "FLOAT32", "passed", "default"),
        rec("MVN", "FLOAT16", "passed", "tight"),
        rec("MVN", "FLOAT16", "xfailed", "fp16-statistics"),
        rec("LP", "FLOAT32", "passed", "tight"),
        rec("LP", "FLOAT32", "failed", None),  # a rejected desc meets no model
        rec("LRN", "FLOAT32", "skipped", None),
        rec("LRN", "FLOAT32", "passed", None, kind="validation"),
    ]
    table = accuracy_classes(records)
    assert table == {"LP": {"FLOAT32": "none"}, "MVN": {"FLOAT16": "fp16-statistics", "FLOAT32": "default"}}
    old = {"MVN": {"FLOAT32": "tight", "FLOAT16": "fp16-statistics"}, "LP": {"FLOAT32": "none"}}
    assert worse_classes(old, table) == [("MVN", "FLOAT32", "tight", "default")]
    assert worse_classes(table, old) == []


def test_known_findings_counts_only_xfailed_cases() -> None:
    records = [
        {"outcome": "xfailed", "known_finding": "F1"},
        {"outcome": "xfailed", "known_finding": "F1"},
        {"outcome": "xfailed", "known_finding": "F9"},
        {"outcome": "failed", "known_finding": None},
        {"outcome": "xpassed", "known_finding": None},
    ]
    counts = finding_counts(records)
    assert counts == {"F1": 2, "F9": 1}
    assert findings_line(counts) == "F1 (2 cases), F9 (1 case)"


@pytest.mark.parametrize(("n", "same"), [(2 * 3 * 17, True), (8192, True), (8192 * 4 + 5, False)])
def test_tight_reuses_the_default_verdict_only_where_their_budgets_are_equal(n: int, same: bool) -> None:
    """The classes judge ``tight`` again only where its budgets can differ from ``default``'s:
    checked against the budgets the tolerance model computes under each."""
    import numpy as np

    from dmlconform import execute, kernels
    from dmlconform.generation.data import make_inputs
    from dmlconform.runner.judging import same_budgets
    from dmlconform.specification.desc import parse_desc
    from dmlconform.specification.spec import load_spec

    spec = load_spec()
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, n]},
                "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, n]},
                "AxisCount": 1, "Axes": [3], "NormalizeVariance": True, "Epsilon": 1e-5,
            },
        }
    )  # fmt: skip
    tol = spec.operator(desc.operator).tolerance
    assert same_budgets(tol, desc, "FLOAT32", "default", "tight", NO_OPTIONS) == same
    inputs = dict(make_inputs(desc, "large_offset", 7, spec=SPEC))
    ref = execute(desc, inputs)
    model = kernels.resolve(kernels.kernel_of(desc, spec).budgets)
    budgets = [
        model(desc, ref, inputs, spec, ToleranceOptions(model=m)).by_member["OutputTensor"]
        for m in ("default", "tight")
    ]
    assert np.array_equal(*budgets) == same


# ------------------------------------------------------------------------------------------
# fractional values, activations by type, the reduced axes and the dimension count


def _bound(when: str) -> Any:
    return one(f"findings:\n  - id: X1\n    reason: r\n    fails: true\n    when: {when}\n")


@given(st.floats(-1e6, 1e6, allow_nan=False))
def test_fractional_holds_for_exactly_the_numbers_that_are_not_whole(value: float) -> None:
    bound = _bound("{operator: LRN, Bias: fractional}")
    f = facts(operator="LOCAL_RESPONSE_NORMALIZATION", members={"Bias": value})
    assert bound.covers(f) == (value != int(value))


def test_fractional_takes_no_bool_string_or_absent_value() -> None:
    bound = _bound("{operator: LRN, Bias: fractional}")
    for members in ({"Bias": True}, {"Bias": "0.5"}, {}, {"Bias": 2}):
        assert not bound.covers(facts(operator="LOCAL_RESPONSE_NORMALIZATION", members=members))
    assert bound.covers(facts(operator="LOCAL_RESPONSE_NORMALIZATION", members={"Bias": 0.5}))


def mvn1_case(sizes: list[int], axes: list[int], activation: dict[str, Any] | None = None) -> Case:
    tensor = {"DataType": "FLOAT32", "Sizes": sizes}
    members: dict[str, Any] = {
        "InputTensor": tensor,
        "OutputTensor": tensor,
        "AxisCount": len(axes),
        "Axes": axes,
    }
    members |= {"NormalizeVariance": True, "Epsilon": 1e-5}
    if activation is not None:
        members["FusedActivation"] = activation
    desc = parse_desc({"type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1", "desc": members})
    return Case("numeric", "MEAN_VARIANCE_NORMALIZATION1", SPEC.level("6_4"), "FLOAT32", 0, desc)


def test_a_fused_activation_is_matched_by_its_type() -> None:
    bound = _bound("{FusedActivation: [ACTIVATION_SOFTPLUS, ACTIVATION_PARAMETRIC_SOFTPLUS]}")
    softplus = mvn1_case([2, 3], [1], {"Type": "ACTIVATION_SOFTPLUS", "Steepness": 2.0})
    assert bound.covers(CaseFacts.of(softplus, spec=SPEC))
    for other in (mvn1_case([2, 3], [1], {"Type": "ACTIVATION_ELU"}), mvn1_case([2, 3], [1])):
        assert not bound.covers(CaseFacts.of(other, spec=SPEC))


def test_reduction_axes_and_dimension_count_are_the_desc_that_ran() -> None:
    bound = _bound("{operator: MVN1, reduction_axes: [[]], dimension_count: [2, 6]}")
    none_2d = CaseFacts.of(mvn1_case([2, 3], []), spec=SPEC)
    assert (none_2d.reduction_axes, none_2d.dimension_count) == ((), 2)
    assert bound.covers(none_2d)
    assert not bound.covers(CaseFacts.of(mvn1_case([2, 3, 4], []), spec=SPEC))  # 3-D
    one_axis = CaseFacts.of(mvn1_case([2, 1], [1]), spec=SPEC)  # one element per slice, but an axis
    assert one_axis.reduction_length == 1 and one_axis.reduction_axes == (1,)
    assert not bound.covers(one_axis)
    assert _bound("{operator: MVN1, reduction_axes: [[0, 2]]}").covers(
        CaseFacts.of(mvn1_case([2, 3, 4], [2, 0]), spec=SPEC)
    )
