"""Numeric cases judge something: batch statistics are the slices' own, and no case is run whose
reference an answer with nothing to do with the operator (zeros, the answer negated, an input
unchanged) passes, or whose reference is undefined (issue 21, item 8)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from helpers import SPEC

from dmlconform import execute
from dmlconform.backends.base import load_backend
from dmlconform.generation import data as dd
from dmlconform.generation.legal import legal_descs
from dmlconform.generation.reductions import reduction_axes, reduction_size
from dmlconform.runner.cases import Selection, collect, legal_for
from dmlconform.runner.checks import run_case
from dmlconform.runner.guard import ThreadGuard
from dmlconform.specification.desc import parse_desc
from dmlconform.tolerance import degenerate
from dmlconform.tolerance.options import NO_OPTIONS

BNTG = "BATCH_NORMALIZATION_TRAINING_GRAD"
TYPES = {"FLOAT32": np.float32, "FLOAT16": np.float16}


def _tensor(sizes, dtype="FLOAT32", strides=None):
    t = {"DataType": dtype, "Sizes": list(sizes)}
    if strides is not None:
        t["Strides"] = list(strides)
    return t


def _bntg(x_sizes, stat_sizes, mean_strides=None, eps=1e-5, dtype="FLOAT32"):
    stats = {k: _tensor(stat_sizes, dtype) for k in ("VarianceTensor", "ScaleTensor")}
    outs = {k: _tensor(stat_sizes, dtype) for k in ("OutputScaleGradientTensor", "OutputBiasGradientTensor")}
    return parse_desc(
        {
            "type": BNTG,
            "desc": {
                "InputTensor": _tensor(x_sizes, dtype),
                "InputGradientTensor": _tensor(x_sizes, dtype),
                "MeanTensor": _tensor(stat_sizes, dtype, mean_strides),
                **stats,
                "OutputGradientTensor": _tensor(x_sizes, dtype),
                **outs,
                "Epsilon": eps,
            },
        }
    )


def _own_statistics(desc, inputs):
    """Each slice's mean and population variance, independently of dmlconform.generation.data: float64
    numpy over the reduced axes of the input as drawn; and the scale of each (mean |x|, mean
    x^2), against which two float64 summation orders differ by ~1e-16."""
    x = inputs["InputTensor"].astype(np.float64)
    axes = reduction_axes(desc, SPEC)
    mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    return mean, var, np.abs(x).mean(axis=axes, keepdims=True), (x * x).mean(axis=axes, keepdims=True)


def _assert_own_statistics(desc, inputs) -> None:
    mean, var, abs_x, sq_x = _own_statistics(desc, inputs)
    dtype = TYPES[desc.members["MeanTensor"].data_type]
    tiny = float(np.finfo(dtype).smallest_subnormal)
    for name, want, scale in (("MeanTensor", mean, abs_x), ("VarianceTensor", var, sq_x)):
        got = inputs[name].astype(np.float64)
        # rounded once to the tensor's type: within half a spacing of the float64 statistic
        half = 0.5 * np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
        assert np.all(np.abs(got - want) <= half * (1 + 1e-6) + 1e-12 * scale + tiny), (name, got, want)


# ------------------------------------------------------------------------------------------
# Batch statistics: what the formula reads


@pytest.mark.parametrize("dtype", ["FLOAT32", "FLOAT16"])
def test_batch_statistics_are_each_slices_own_in_every_regime(dtype: str) -> None:
    seen_one = seen_shared = 0
    for desc in legal_descs(BNTG, "6_4", count=40, seed=3, dtype=dtype, spec=SPEC):
        for regime in dd.regimes_for(desc, SPEC):
            inputs = dd.make_inputs(desc, regime, seed=5, spec=SPEC)
            _assert_own_statistics(desc, inputs)
        seen_one += reduction_size(desc, SPEC) == 1
        seen_shared += bool(dd.shared_statistics_axes(desc, SPEC))
    assert seen_one and seen_shared  # both situations of issue 21 item 8 were drawn


def test_one_element_reduction_gets_the_input_itself_and_variance_zero() -> None:
    desc = _bntg((1, 1), (1, 1))  # the numeric[...-6_4-FLOAT32-0007]: 1x1 tensors
    assert reduction_size(desc, SPEC) == 1
    for regime in dd.regimes_for(desc, SPEC):
        inputs = dd.make_inputs(desc, regime, seed=0, spec=SPEC)
        assert np.array_equal(inputs["MeanTensor"], inputs["InputTensor"]), regime
        assert not np.any(inputs["VarianceTensor"]), regime


@pytest.mark.parametrize("dtype", ["FLOAT32", "FLOAT16"])
def test_statistics_broadcast_over_a_kept_dimension_are_every_slices_own(dtype: str) -> None:
    # the numeric[...-6_4-FLOAT32-n65537-0001]: MeanTensor (1, 2) with a zero stride on
    # the kept dimension, so one mean for both channels; their data used to have means 65517.5
    # and -4.1, both given as 32756.7
    desc = _bntg((257, 2), (1, 2), mean_strides=(1, 0), dtype=dtype)
    assert dd.shared_statistics_axes(desc, SPEC) == (1,)
    for regime in dd.regimes_for(desc, SPEC):
        inputs = dd.make_inputs(desc, regime, seed=1, spec=SPEC)
        mean, var, _, _ = _own_statistics(desc, inputs)
        assert np.allclose(mean[0, 0], mean[0, 1], rtol=1e-12) and np.allclose(
            var[0, 0], var[0, 1], rtol=1e-12
        )
        x = inputs["InputTensor"]
        assert np.array_equal(np.sort(x[:, 0]), np.sort(x[:, 1])), regime  # same values, own order
        assert not np.array_equal(x[:, 0], x[:, 1]) or np.all(x[:, 0] == x[0, 0]), regime
        _assert_own_statistics(desc, inputs)


def test_given_statistics_stay_realistic_draws_where_they_cannot_be_taken() -> None:
    """BATCH_NORMALIZATION reads its Mean and Variance as given: at one element per slice they
    stay drawn values (the input itself would make the output independent of it)."""
    body = {
        k: _tensor((2, 3))
        for k in ("InputTensor", "MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor", "OutputTensor")
    }
    desc = parse_desc({"type": "BATCH_NORMALIZATION", "desc": {**body, "Epsilon": 0.0}})
    inputs = dd.make_inputs(desc, "standard_normal", seed=0, spec=SPEC)
    assert not np.array_equal(inputs["MeanTensor"], inputs["InputTensor"])
    assert np.all(inputs["VarianceTensor"] >= 0.25)


def test_no_constant_slices_where_epsilon_zero_divides_zero_by_zero() -> None:
    assert "constant_slices" not in dd.regimes_for(_bntg((6, 2), (1, 2), eps=0.0), SPEC)
    assert "constant_slices" in dd.regimes_for(_bntg((6, 2), (1, 2), eps=1e-5), SPEC)


# ------------------------------------------------------------------------------------------
# What judges nothing


def _mvn1(sizes, axes, *, act=None, eps=1e-5, bias=False, normalize=True):
    body = {"InputTensor": _tensor(sizes), "OutputTensor": _tensor(sizes), "Axes": list(axes)}
    body |= {"NormalizeVariance": normalize, "Epsilon": eps}
    if bias:
        body |= {"ScaleTensor": _tensor(sizes), "BiasTensor": _tensor(sizes)}
    if act:
        body["FusedActivation"] = act
    return parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": body})


def _why(desc, inputs):
    return degenerate.why_degenerate(desc, inputs, execute(desc, inputs), SPEC)


def test_a_case_that_judges_something_is_not_degenerate() -> None:
    desc = _mvn1((2, 8), (1,))
    assert _why(desc, dd.make_inputs(desc, "standard_normal", 0, spec=SPEC)) is None


def test_a_zero_reference_is_degenerate() -> None:
    desc = _mvn1((3, 1), (1,))  # one element per slice, no Bias: every output 0
    x = {"InputTensor": np.array([[1.0], [2.0], [-3.0]], np.float32)}
    assert "all zeros would pass" in _why(desc, x)
    relu = _mvn1((1, 4), (1,), act={"Type": "ACTIVATION_THRESHOLDED_RELU", "Alpha": 2.0})
    x = {"InputTensor": np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)}  # z = +-1.34 at most
    assert "all zeros would pass" in _why(relu, x)


def test_an_undefined_reference_is_degenerate() -> None:
    desc = _mvn1((2, 3), (1,), eps=0.0)
    x = {"InputTensor": np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]], np.float32)}  # 0 / 0 in row 0
    assert "NaN at 3 elements" in _why(desc, x)
    given = _bntg((3, 2), (1, 2), eps=0.0)
    inputs = {k: v.copy() for k, v in dd.make_inputs(given, "standard_normal", 0, spec=SPEC).items()}
    inputs["VarianceTensor"][0, 1] = 0.0
    assert "VarianceTensor + Epsilon = 0 at 1 elements" in _why(given, inputs)


def test_an_output_judged_nowhere_is_degenerate(monkeypatch: pytest.MonkeyPatch) -> None:
    # a constant FLOAT16 slice, Variance 0, Epsilon 1e-12: the gradient is 1e6 (dy - mean(dy)),
    # +-inf but where dy is its mean; there the budget is infinite too (as the FLOAT16 budget of
    # a value that close to the type's largest may be)
    desc = _bntg((9, 1), (1, 1), eps=1e-12, dtype="FLOAT16")
    h = np.float16
    inputs = {
        "InputTensor": np.full((9, 1), 0.5, h),
        "InputGradientTensor": np.linspace(-1, 1, 9, dtype=h).reshape(9, 1) + h(0.5),
        "MeanTensor": np.full((1, 1), 0.5, h),
        "VarianceTensor": np.zeros((1, 1), h),
        "ScaleTensor": np.ones((1, 1), h),
    }
    reference = execute(desc, inputs)
    assert np.isfinite(reference["OutputGradientTensor"]).any()
    real = degenerate.budgets(desc, reference, inputs, SPEC)
    assert degenerate.why_degenerate(desc, inputs, reference, SPEC) is None
    infinite = {**real, "OutputGradientTensor": np.full((9, 1), np.inf)}
    monkeypatch.setattr(degenerate, "case_budgets", lambda *a, **k: (infinite, None))
    assert "OutputGradientTensor judges no element" in degenerate.why_degenerate(
        desc, inputs, reference, SPEC
    )


def test_an_output_equal_to_its_input_is_degenerate() -> None:
    desc = _mvn1((1, 4), (1,), normalize=False)
    x = {"InputTensor": np.array([[-2.0, -1.0, 1.0, 2.0]], np.float32)}  # mean 0: nothing to centre
    assert "an input unchanged would pass" in _why(desc, x)


def test_inputs_are_drawn_again_until_they_judge_something() -> None:
    # Epsilon 100 keeps standard-normal z under THRESHOLDED_RELU's Alpha: every output 0
    desc = _mvn1((1, 16), (1,), act={"Type": "ACTIVATION_THRESHOLDED_RELU", "Alpha": 1.0}, eps=100.0)
    first = dd.make_inputs(desc, "standard_normal", 7, spec=SPEC)
    assert _why(desc, first) is not None
    judged = degenerate.judged_inputs(desc, "standard_normal", 7, SPEC)
    assert degenerate.why_degenerate(desc, judged.inputs, judged.reference, SPEC) is None
    assert (judged.regime, judged.draw) != ("standard_normal", 0)
    again = degenerate.judged_inputs(desc, "standard_normal", 7, SPEC)  # deterministic
    assert (again.regime, again.draw) == (judged.regime, judged.draw)
    assert np.array_equal(again.inputs["InputTensor"], judged.inputs["InputTensor"])


def test_inputs_that_judge_something_are_the_first_draw() -> None:
    desc = _mvn1((3, 5), (1,))
    judged = degenerate.judged_inputs(desc, "large_offset", 2, SPEC)
    assert (judged.regime, judged.draw) == ("large_offset", 0)
    assert np.array_equal(
        judged.inputs["InputTensor"], dd.make_inputs(desc, "large_offset", 2, spec=SPEC)["InputTensor"]
    )


def test_a_desc_no_input_can_rescue_is_refused() -> None:
    desc = _bntg((4, 3), (4, 3), eps=0.0)  # one element per slice: Variance 0, Epsilon 0
    assert degenerate.may_judge_nothing(desc, SPEC)
    with pytest.raises(degenerate.JudgesNothing, match="Epsilon = 0"):
        degenerate.judged_inputs(desc, "standard_normal", 0, SPEC)


def test_collection_replaces_only_the_descs_no_input_can_rescue() -> None:
    sel = Selection(level=SPEC.level("6_4"), cases=8, seed=0, kinds=("numeric",), max_elements=1)
    replaced = kept = 0
    for case in collect(SPEC, sel):
        if case.size:
            continue
        op = SPEC.operator(case.operator)
        drawn = legal_for(SPEC, op, case.level, case.data_type, sel.cases, sel.seed)[case.index]
        regs = dd.regimes_for(drawn, SPEC)
        if case.desc == dd.regime_desc(drawn, regs[case.index % len(regs)], SPEC):
            kept += 1  # as drawn (an exact-statistics case without its activation)
            continue
        replaced += 1
        assert degenerate.may_judge_nothing(drawn, SPEC)
        with pytest.raises(degenerate.JudgesNothing):
            degenerate.judged_inputs(drawn, regs[case.index % len(regs)], case.input_seed, SPEC, probe=True)
        assert degenerate.judged_inputs(case.desc, case.regime, case.input_seed, SPEC)
    assert replaced and kept > 10 * replaced


def test_what_no_input_can_rescue_is_known_from_the_desc() -> None:
    assert degenerate.may_judge_nothing(_mvn1((3, 1), (1,)), SPEC)  # one element per slice
    relu = {"Type": "ACTIVATION_THRESHOLDED_RELU", "Alpha": 1.0}
    assert degenerate.may_judge_nothing(_mvn1((4, 2), (1,), act=relu), SPEC)  # z = +-1 < Alpha... at most
    assert not degenerate.may_judge_nothing(_mvn1((4, 64), (1,), act=relu), SPEC)
    assert not degenerate.may_judge_nothing(_mvn1((4, 8), (1,)), SPEC)
    body = {"InputTensor": _tensor((4, 8)), "OutputTensor": _tensor((4, 8)), "Axes": [1], "Epsilon": 1e-5}
    plain = parse_desc(
        {"type": "MEAN_VARIANCE_NORMALIZATION2", "desc": {**body, "UseMean": False, "UseVariance": False}}
    )
    assert degenerate.may_judge_nothing(plain, SPEC)  # nothing centred or divided: the input itself
    centred = parse_desc(
        {"type": "MEAN_VARIANCE_NORMALIZATION2", "desc": {**body, "UseMean": True, "UseVariance": False}}
    )
    assert not degenerate.may_judge_nothing(centred, SPEC)


# ------------------------------------------------------------------------------------------
# Backends that compute nothing fail every numeric case; sound ones pass


IMPOSTORS = ("Zeros", "Negated", "InputUnchanged")


@pytest.mark.parametrize("operator", sorted(SPEC.operators))
def test_every_numeric_case_fails_backends_that_compute_nothing(operator: str) -> None:
    """Every operator (one test each, so that parallel workers share them), --cases 4, seed 0
    (the default tier's size cases up to 5000 elements): zeros, the right answer negated and an
    input unchanged fail every numeric case they take part in (none is skipped). That sound
    backends pass the same cases is test_mutation's (the reference and numpy runs)."""
    guards = {
        name: ThreadGuard(load_backend(f"dmlconform.backends.broken:{name}", {}), None) for name in IMPOSTORS
    }
    wrong: dict[str, list[str]] = defaultdict(list)
    sel = Selection(
        level=SPEC.level("6_4"), operators=(operator,), cases=4, seed=0, kinds=("numeric",), max_elements=5000
    )
    cases = list(collect(SPEC, sel))
    assert cases and {c.operator for c in cases} == {operator}
    for case in cases:
        for name, guard in guards.items():
            status = run_case(case, guard, SPEC, NO_OPTIONS).status
            if status != "failed":
                wrong[name].append(f"{case.id}: {status}")
    assert not wrong, {k: (len(v), v[:5]) for k, v in wrong.items()}


def test_a_large_case_is_checked_with_the_compiled_judges_budgets():
    """Above the judge's threshold the check takes the judge's budgets (no numpy model, which
    cost as much as the comparison itself), equal to the model's to the judge's tolerance."""
    from dmlconform.tolerance import budgets as model_budgets

    desc = _mvn1([2, 1 << 16], [1])
    inputs = dd.make_inputs(desc, "large_offset", 3, spec=SPEC)
    ref = execute(desc, inputs)
    got, given = degenerate._budgets(desc, ref, inputs, SPEC)
    want = model_budgets(desc, ref, inputs, SPEC, NO_OPTIONS).by_member["OutputTensor"]
    assert given is None  # the judge computed them: nothing for compare to take back
    finite = np.isfinite(want)
    assert np.array_equal(finite, np.isfinite(got["OutputTensor"]))
    assert np.allclose(got["OutputTensor"][finite], want[finite], rtol=1e-12, atol=0)


def test_the_models_budgets_from_the_check_give_the_same_verdict():
    """A numpy-model case (batch norm with given statistics): compare given the check's budgets
    gives the verdict and figures compare computes alone, for a sound and a wrong answer."""
    from dmlconform.tolerance import compare

    desc = next(iter(legal_descs("BATCH_NORMALIZATION", "6_4", count=1, seed=4, dtype="FLOAT32", spec=SPEC)))
    judged = degenerate.judged_inputs(desc, "standard_normal", 0, SPEC)
    assert judged.budgets is not None
    ref = {k: np.asarray(v) for k, v in judged.reference.items()}
    wrong = {k: v + np.asarray(1e-3, v.dtype) for k, v in ref.items()}
    for got in (ref, wrong):
        alone = compare(desc, got, ref, judged.inputs, SPEC, NO_OPTIONS)
        given = compare(desc, got, ref, judged.inputs, SPEC, NO_OPTIONS, budgets=judged.budgets)
        assert given.to_dict() == alone.to_dict()
    assert not compare(desc, wrong, ref, judged.inputs, SPEC, NO_OPTIONS, budgets=judged.budgets).passed


@pytest.mark.parametrize("at", [0, degenerate.CHUNK - 1, degenerate.CHUNK, 3 * degenerate.CHUNK + 4])
def test_the_chunked_check_sees_every_element(at: int):
    """An impostor off by more than its budget at one element, wherever it is, fails; within
    the budget everywhere, it passes (the check stops early, never short)."""
    ref = {"Y": np.linspace(-1, 1, 3 * degenerate.CHUNK + 5, dtype=np.float32).reshape(1, -1)}
    budget = {"Y": np.full(ref["Y"].shape, 1e-3)}
    near = {"Y": ref["Y"] + np.float32(5e-4)}
    assert degenerate._passes(near, ref, budget)
    assert degenerate._passes(near, ref, {"Y": 1e-3})  # a scalar budget
    off = near["Y"].copy()
    off.reshape(-1)[at] += np.float32(1e-2)
    assert not degenerate._passes({"Y": off}, ref, budget)
    assert not degenerate._passes({"Y": off}, ref, {"Y": 1e-3})


@pytest.fixture
def compiled_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled judge for cases of any size (small ones are cheap to check whole)."""
    from dmlconform.tolerance import judge

    monkeypatch.setattr(judge, "KERNEL_MIN_ELEMENTS", 1)


SAMPLED = [
    (_mvn1((2, 300), (1,), bias=True), 64),  # a sample inside the first slice
    (_mvn1((40, 7), (1,)), 64),  # whole slices: 9 of them
    (_mvn1((5, 3, 4), (0, 2)), 30),  # reduced axes around a kept one (strided rows)
    (_mvn1((6, 50), (0,), act={"Type": "ACTIVATION_ELU", "Alpha": 0.5}), 13),
]


@pytest.mark.parametrize(("desc", "count"), SAMPLED, ids=range(len(SAMPLED)))
def test_sampled_budgets_are_the_whole_passes_at_those_elements(compiled_everywhere, desc, count) -> None:
    from dmlconform.tolerance.compare import case_budgets, sampled_budgets

    inputs = dd.make_inputs(desc, "large_offset", 2, spec=SPEC)
    ref = execute(desc, inputs)
    whole, _ = case_budgets(desc, ref, inputs, SPEC, NO_OPTIONS)
    sampled, _ = sampled_budgets(desc, ref, inputs, SPEC, count)
    at, b = sampled["OutputTensor"]
    n_slice = int(np.prod([desc.members["InputTensor"].sizes[a] for a in desc.members["Axes"]]))
    assert at.size == (count if n_slice >= count else count // n_slice * n_slice)
    assert len(set(at.tolist())) == at.size and at.max() < ref["OutputTensor"].size
    assert np.array_equal(b, whole["OutputTensor"].reshape(-1)[at])


def _drawn(desc, regime="standard_normal"):
    return dd.make_inputs(desc, regime, 0, spec=SPEC)


DEGENERATE_OR_NOT = [
    (_mvn1((3, 1), (1,)), {"InputTensor": np.array([[1.0], [2.0], [-3.0]], np.float32)}),
    (
        _mvn1((1, 4), (1,), act={"Type": "ACTIVATION_THRESHOLDED_RELU", "Alpha": 2.0}),
        {"InputTensor": np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)},
    ),
    (_mvn1((1, 4), (1,), normalize=False), {"InputTensor": np.array([[-2.0, -1.0, 1.0, 2.0]], np.float32)}),
    (_mvn1((2, 300), (1,), bias=True), None),
    (_mvn1((4, 300), (1,), act={"Type": "ACTIVATION_RELU"}), None),
    (_mvn1((3, 200), (1,), act={"Type": "ACTIVATION_THRESHOLDED_RELU", "Alpha": 1.5}), None),
]


@pytest.mark.parametrize(("desc", "given"), DEGENERATE_OR_NOT, ids=range(len(DEGENERATE_OR_NOT)))
def test_the_sample_never_changes_the_answer(compiled_everywhere, monkeypatch, desc, given) -> None:
    """The check on a sample answers as the whole check: it stops early only where a sampled
    element already shows the case judges something, for degenerate cases and sound ones."""
    inputs = given if given is not None else _drawn(desc)
    reference = execute(desc, inputs)
    with_sample = degenerate.why_degenerate(desc, inputs, reference, SPEC)
    monkeypatch.setattr(degenerate, "sampled_budgets", lambda *a, **k: None)
    assert degenerate.why_degenerate(desc, inputs, reference, SPEC) == with_sample


def test_a_case_the_sample_settles_skips_the_pass_over_every_element(
    compiled_everywhere, monkeypatch
) -> None:
    desc = _mvn1((2, 4096), (1,), bias=True)
    inputs = _drawn(desc, "large_offset")
    reference = execute(desc, inputs)

    def whole(*args, **kwargs):
        raise AssertionError("the whole check ran")

    monkeypatch.setattr(degenerate, "_budgets", whole)
    assert degenerate.why_degenerate(desc, inputs, reference, SPEC) is None
    # a sample that shows nothing (every sampled budget infinite) falls back to the whole check
    real = degenerate.sampled_budgets

    def blind(*args, **kwargs):
        got, terms = real(*args, **kwargs)
        return {k: (at, np.full_like(b, np.inf)) for k, (at, b) in got.items()}, terms

    monkeypatch.setattr(degenerate, "sampled_budgets", blind)
    with pytest.raises(AssertionError, match="the whole check ran"):
        degenerate.why_degenerate(desc, inputs, reference, SPEC)


def test_the_comparison_takes_back_the_judges_terms_from_the_check(compiled_everywhere, monkeypatch) -> None:
    """Where a sample settles the check, the compiled judge's per-slice terms (the statistics
    pass over every element) travel with the inputs, and the comparison uses them instead of
    making them again, with the same verdict and figures."""
    from dmlconform import tolerance
    from dmlconform.tolerance import judge

    desc = _mvn1((2, 4096), (1,), bias=True)
    judged = degenerate.judged_inputs(desc, "large_offset", 0, SPEC)
    assert isinstance(judged.budgets, judge.SliceTerms)
    ref = judged.reference
    got = {"OutputTensor": (ref["OutputTensor"].astype(np.float64) * (1 + 2.0**-7)).astype(np.float32)}
    fresh = tolerance.compare(desc, got, ref, judged.inputs, SPEC, NO_OPTIONS)

    def again(*args, **kwargs):
        raise AssertionError("the terms were made again")

    monkeypatch.setattr(judge, "_centred_terms", again)
    taken = tolerance.compare(desc, got, ref, judged.inputs, SPEC, NO_OPTIONS, budgets=judged.budgets)
    assert not fresh.passed and taken.passed == fresh.passed
    a, b = taken.outputs["OutputTensor"], fresh.outputs["OutputTensor"]
    assert (a.failing_elements, a.worst_index, a.max_ulp, a.budget) == (
        b.failing_elements, b.worst_index, b.max_ulp, b.budget
    )  # fmt: skip
    with pytest.raises(AssertionError, match="made again"):
        tolerance.compare(desc, got, ref, judged.inputs, SPEC, NO_OPTIONS)
