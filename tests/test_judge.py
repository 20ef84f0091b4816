"""The compiled judge against the numpy model it implements (:mod:`dmlconform.tolerance.judge`).

The numpy model (:func:`dmlconform.tolerance.budgets`, :func:`aggregate_check`) is the readable
specification; these tests hold the kernels to it: every budget within a relative 1e-12, and
the same verdict, worst element, failing count and aggregate figures, on hypothesis-drawn legal
descs of every operator whose kernel has a compiled judge: the centred normalization, RMS
(MVN2 without its mean step), given-statistics (BATCH_NORMALIZATION) and gradients' (the two
batch-norm gradients) models (every regime, both data types, fused activations, broadcast
operands, strided layouts), and on every shape family of the stress tier.
The kernels are called directly, whatever the size, so small drawn cases exercise them too.
"""

from __future__ import annotations

import contextlib
import importlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlconform as dc
from dmlconform import kernels, tolerance
from dmlconform.errors import PlanError
from dmlconform.generation import data
from dmlconform.generation import strategies as dst
from dmlconform.kernels.base import kernel_named
from dmlconform.specification.structure_builder import model_for, operators_and_levels
from dmlconform.tolerance import judge, work_items
from dmlconform.tolerance.options import NO_OPTIONS, ToleranceOptions

SPEC = dc.load_spec()
compare_module = importlib.import_module("dmlconform.tolerance.compare")  # the package's name is the function
RTOL = 1e-12


def judged_pairs() -> list[tuple[str, str]]:
    """(operator, level) pairs whose kernel has a compiled judge (the centred, RMS,
    given-statistics and gradients' models)."""
    out = []
    for op, level in operators_and_levels(SPEC):
        model = model_for(op, level, SPEC)
        kernel = kernels.KERNELS.get(kernel_named(SPEC.operator(op)))
        if model.available and kernel is not None and kernel.judge is not None:
            out.append((op, level))
    return out


PAIRS = judged_pairs()


@contextlib.contextmanager
def judge_threshold(elements: int):
    """The compiled judge from this input size on."""
    saved = judge.KERNEL_MIN_ELEMENTS
    judge.KERNEL_MIN_ELEMENTS = elements
    try:
        yield
    finally:
        judge.KERNEL_MIN_ELEMENTS = saved


def compiled_everywhere():
    """The compiled judge for cases of any size."""
    return judge_threshold(1)


def numpy_only():
    """The numpy model for cases of any size."""
    return judge_threshold(1 << 62)


def judge_plan(desc, ref, inputs):
    """The registry's judge plan of this desc (None: its kernel has no compiled judge)."""
    part = kernels.kernel_of(desc, SPEC).judge
    if part is None:
        return None
    with compiled_everywhere():
        return kernels.resolve(part)(desc, ref, ref, inputs, SPEC)


def kernel_and_model(desc, inputs, got=None, overrides=None):
    """(kernel budgets, model budgets, the main reference output: see :data:`ACTIVATION_NOISE`)."""
    ref = dc.execute(desc, inputs)
    jp = judge_plan(desc, ref, inputs)
    if jp is None:
        kernels.plan(desc, SPEC)  # raises the PlanError that refused it
    assert jp is not None
    model = kernels.part(desc, SPEC, "budgets")(
        desc, ref, inputs, SPEC, ToleranceOptions.parse(overrides)
    ).by_member[jp.output]
    kernel = np.empty(model.shape)
    judge.judge_normalization(desc, ref[jp.output] if got is None else got, ref[jp.output], inputs, SPEC,
                              ToleranceOptions.parse(overrides), budget_out=kernel, plan=jp)  # fmt: skip
    return kernel, model, ref[jp.output]


ACTIVATION_NOISE = 2.0**-46
"""With a fused activation the model takes e_act = max |f(y +- e_y) - f(y)|: a difference of
nearly equal float64 values, whose rounding (a few 2^-53 |f|) is a large part of it when e_y is
small. The kernel and the model compute the same f (the reference's scalar formulas) at y's that
differ in their last bits (the slice statistics are summed in different orders), so there they
agree to that rounding, not to 1e-12 of the budget: about 1e-7 of a FLOAT32 budget, far below
any verdict. The same holds on exact-statistics data whose divisor rounds: the model counts
Epsilon's rounding as |sqrt(w) - sqrt(var + eps)| / sqrt(var + eps), a difference of nearly
equal float64 values of variances summed in different orders, and without either wherever the
ceiling caps e_y: its floor e_y - |Scale| (d_shift + |z| d_rel) is such a difference too (MVN
FLOAT16, 3 elements a slice: 1.15e-12 of a budget of 3.7e-5, 4e-17 absolute)."""


def assert_budgets_agree(kernel: np.ndarray, model: np.ndarray, ref: np.ndarray | None = None) -> None:
    assert np.array_equal(np.isnan(kernel), np.isnan(model))
    assert np.array_equal(np.isposinf(kernel), np.isposinf(model))
    finite = np.isfinite(model)
    diff = np.abs(kernel[finite] - model[finite])
    allowed = RTOL * np.abs(model[finite])
    if ref is not None:
        allowed = allowed + ACTIVATION_NOISE * np.maximum(np.abs(np.asarray(ref, np.float64)[finite]), 1.0)
    over = diff / np.maximum(allowed, 1e-300)
    worst = float(over.max()) if over.size else 0.0
    assert worst <= 1.0, f"budgets differ by {worst:.3g} of the allowance"


@st.composite
def drawn_cases(draw):
    op, level = draw(st.sampled_from(PAIRS))
    desc = draw(dst.legal_descs(op, level, SPEC))
    regime = draw(st.sampled_from(data.regimes_for(desc, SPEC)))
    seed = draw(st.integers(0, 2**16))
    return desc, data.make_inputs(desc, regime, seed=seed, spec=SPEC)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(drawn_cases(), st.sampled_from([None, {"model": "lenient"}, {"ulp_scale": 3.0, "atol": 1e-7}]))
def test_kernel_budgets_equal_the_numpy_model_on_drawn_cases(case, overrides):
    if case is None:
        return
    desc, inputs = case
    if not all(np.isfinite(np.asarray(v, np.float64)).all() for v in inputs.values()):
        return  # nonfinite inputs: reported as information, never judged
    try:
        kernel, model, ref = kernel_and_model(desc, inputs, overrides=overrides)
    except PlanError:
        return
    assert_budgets_agree(kernel, model, ref)


def verdicts(desc, inputs, got_main, overrides=None):
    """(kernel comparison, numpy comparison) of the same outputs."""
    ref = dc.execute(desc, inputs)
    main = kernels.plan(desc, SPEC).output
    got = {**ref, main: got_main(ref[main])}
    with compiled_everywhere():
        assert compare_module._judge_plan(desc, got, ref, inputs, SPEC) is not None
        fast = tolerance.compare(desc, got, ref, inputs, SPEC, ToleranceOptions.parse(overrides))
    with numpy_only():
        slow = tolerance.compare(desc, got, ref, inputs, SPEC, ToleranceOptions.parse(overrides))
    return fast, slow, main


WRONGS = {
    "exact": lambda r: r.copy(),
    "scaled": lambda r: (r.astype(np.float64) * (1 + 2.0**-7)).astype(r.dtype),
    "shifted": lambda r: (r.astype(np.float64) + 1e-3).astype(r.dtype),
    "one_nan": lambda r: np.where(np.arange(r.size).reshape(r.shape) == r.size // 2, np.nan, r).astype(
        r.dtype
    ),
    "all_nan": lambda r: np.full_like(r, np.nan),
    "zeros": lambda r: np.zeros_like(r),
}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(drawn_cases(), st.sampled_from(sorted(WRONGS)), st.sampled_from([None, {"max_ulp": 4.0}]))
def test_kernel_verdicts_equal_the_numpy_models(case, wrong, overrides):
    if case is None:
        return
    desc, inputs = case
    try:
        fast, slow, main = verdicts(desc, inputs, WRONGS[wrong], overrides)
    except PlanError:
        return
    assert fast.passed == slow.passed
    a, b = fast.outputs[main], slow.outputs[main]
    assert (a.passed, a.failing_elements, a.worst_index) == (b.passed, b.failing_elements, b.worst_index)
    assert a.max_ulp == b.max_ulp
    assert a.max_abs == pytest.approx(b.max_abs, rel=1e-12)
    assert a.budget == pytest.approx(b.budget, rel=RTOL, nan_ok=True)
    if a.aggregate or b.aggregate:
        noise = _residual_noise(desc, inputs, WRONGS[wrong], overrides)
        for key, value in b.aggregate.items():
            assert a.aggregate[key] == pytest.approx(value, rel=1e-6, abs=1e-4 + noise), key


def _residual_noise(desc, inputs, got_main, overrides) -> float:
    """How far the residual figures of two summation orders may differ: the residual's RMS comes
    from expanded sums (``tolerance.aggregate_from_sums``), whose rounding is ~1e-16 of sum d^2,
    so its figure (over the RMS of the budgets) carries ~1e-8 of |d| / budget. That is noise only
    for answers far outside their budgets (an all-zeros answer: 1e-2 of the figure on a slice
    of four), which fail on the shift and scale figures anyway."""
    ref = dc.execute(desc, inputs)
    main = kernels.plan(desc, SPEC).output
    budget = kernels.part(desc, SPEC, "budgets")(
        desc, ref, inputs, SPEC, ToleranceOptions.parse(overrides)
    ).by_member[main]
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(got_main(ref[main]).astype(np.float64) - ref[main].astype(np.float64))
    usable = np.isfinite(d) & np.isfinite(budget) & (budget > 0)
    if not usable.any():
        return 0.0
    return 1e-7 * float(d[usable].max() / budget[usable].min())


def test_kernel_budgets_equal_the_numpy_model_on_every_stress_shape():
    from dmlconform.runner.cases import collect

    sel = dc.runner.cases.Selection(
        level=SPEC.level("6_4"), cases=1, kinds=("numeric",), tier="stress", max_elements=1 << 16
    )
    checked = 0
    for case in collect(SPEC, sel):
        if case.size is None or kernels.kernel_of(case.desc, SPEC).judge is None:
            continue
        inputs = data.make_inputs(case.desc, case.regime, seed=case.input_seed, spec=SPEC)
        kernel, model, ref = kernel_and_model(case.desc, inputs)
        assert_budgets_agree(kernel, model, ref)
        checked += 1
    assert checked >= 20, checked


@pytest.mark.parametrize(
    ("regime", "overrides"),
    [("large_offset", {"model": "tight"}), ("exact_statistics", None)],
    ids=["large-offset-tight", "exact-default"],
)
def test_a_long_reduction_split_over_threads_gives_the_same_figures(regime, overrides):
    """2^20 + 1 elements in one slice: the element pass is cut into work items; the merged
    figures equal the model's, and a systematic 2^-8 error still fails: under the tight model on
    offset data, and under the default model (which admits a GPU thread's chain of 2^15 terms, at
    |mean| / std = 1e3 an error of that size) where the data makes the statistics exact."""
    t = {"DataType": "FLOAT32", "Sizes": [1, 2**20 + 1]}
    desc = dc.parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {"InputTensor": t, "OutputTensor": t, "Axes": [1], "NormalizeVariance": True},
        }
    )
    inputs = data.make_inputs(desc, regime, seed=3, spec=SPEC)
    kernel, model, ref = kernel_and_model(desc, inputs, overrides=overrides)
    assert_budgets_agree(kernel, model, ref)
    fast, slow, main = verdicts(desc, inputs, WRONGS["scaled"], overrides)
    assert not fast.passed and not slow.passed
    assert fast.outputs[main].worst_index == slow.outputs[main].worst_index
    fast, slow, main = verdicts(desc, inputs, WRONGS["exact"], overrides)
    assert fast.passed and slow.passed


def _per_channel(op, dtype, **members):
    t = {"DataType": dtype, "Sizes": [2, 3, 96, 96]}
    c = {"DataType": dtype, "Sizes": [1, 3, 1, 1]}
    tensors = {k: c for k in members.pop("channels", ())}
    return dc.parse_desc({"type": op, "desc": {"InputTensor": t, "OutputTensor": t, **tensors, **members}})


def _gradient(op, dtype):
    t = {"DataType": dtype, "Sizes": [2, 3, 96, 96]}
    c = {"DataType": dtype, "Sizes": [1, 3, 1, 1]}
    members = {"InputTensor": t, "InputGradientTensor": t, "OutputGradientTensor": t, "Epsilon": 1e-3}
    for name in (
        "MeanTensor",
        "VarianceTensor",
        "ScaleTensor",
        "OutputScaleGradientTensor",
        "OutputBiasGradientTensor",
    ):
        members[name] = c
    return dc.parse_desc({"type": op, "desc": members})


PER_CHANNEL = {
    "centred": lambda dt: _per_channel(
        "BATCH_NORMALIZATION_TRAINING", dt, channels=("ScaleTensor", "BiasTensor"), Epsilon=1e-3
    ),
    "rms": lambda dt: _per_channel(
        "MEAN_VARIANCE_NORMALIZATION2", dt, channels=("ScaleTensor", "BiasTensor"), Axes=[0, 2, 3],
        UseMean=False, UseVariance=True, Epsilon=1e-3,
    ),
    "given": lambda dt: _per_channel(
        "BATCH_NORMALIZATION", dt, channels=("MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor"),
        Spatial=True, Epsilon=1e-3,
    ),
    "gradient-given": lambda dt: _gradient("BATCH_NORMALIZATION_GRAD", dt),
    "gradient-batch": lambda dt: _gradient("BATCH_NORMALIZATION_TRAINING_GRAD", dt),
}  # fmt: skip


@pytest.mark.parametrize("model", sorted(PER_CHANNEL))
@pytest.mark.parametrize("dtype", ["FLOAT16", "FLOAT32"])
@pytest.mark.parametrize("overrides", [None, {"max_ulp": 2.0}])
def test_each_output_type_and_a_fixed_ulp_budget_give_the_models_figures(model, dtype, overrides):
    """The element loop has one copy per output type (FLOAT16's spacing and ordinals differ) and
    a fixed max_ulp path: both against each model on a case with per-channel operands."""
    desc = PER_CHANNEL[model](dtype)
    inputs = data.make_inputs(desc, "large_offset", seed=5, spec=SPEC)
    kernel, model_budgets, ref = kernel_and_model(desc, inputs, overrides=overrides)
    assert_budgets_agree(kernel, model_budgets, ref)
    for wrong in ("exact", "scaled", "one_nan"):
        fast, slow, main = verdicts(desc, inputs, WRONGS[wrong], overrides)
        a, b = fast.outputs[main], slow.outputs[main]
        assert (a.passed, a.failing_elements, a.worst_index, a.max_ulp) == (
            b.passed, b.failing_elements, b.worst_index, b.max_ulp
        ), wrong  # fmt: skip
        assert a.budget == pytest.approx(b.budget, rel=RTOL), wrong
        assert a.passed == (wrong == "exact"), wrong


@pytest.mark.parametrize("dtype", ["FLOAT16", "FLOAT32"])
def test_given_statistics_that_vary_along_different_axes_give_the_models_figures(dtype):
    """Mean per channel, Variance per row and Scale per element (the stress tier's BATCH_NORMALIZATION
    shapes broadcast them so): each is an operand of the element pass, gathered per element."""
    t = {"DataType": dtype, "Sizes": [4, 3, 128, 65]}
    desc = dc.parse_desc({"type": "BATCH_NORMALIZATION", "desc": {
        "InputTensor": t, "MeanTensor": {"DataType": dtype, "Sizes": [1, 3, 1, 1]},
        "VarianceTensor": {"DataType": dtype, "Sizes": [4, 1, 128, 1]}, "ScaleTensor": t,
        "OutputTensor": t, "Spatial": True, "Epsilon": 1e-3,
        "FusedActivation": {"Type": "ACTIVATION_ELU", "Alpha": 0.5}}})  # fmt: skip
    inputs = data.make_inputs(desc, "large_offset", seed=2, spec=SPEC)
    ref = dc.execute(desc, inputs)
    assert compare_module._judge_plan(desc, ref, ref, inputs, SPEC) is not None  # large enough as it is
    kernel, model_budgets, fused = kernel_and_model(desc, inputs)
    assert_budgets_agree(kernel, model_budgets, fused)
    for wrong in ("exact", "scaled", "one_nan", "shifted"):
        fast, slow, main = verdicts(desc, inputs, WRONGS[wrong])
        a, b = fast.outputs[main], slow.outputs[main]
        assert (a.passed, a.failing_elements, a.worst_index) == (
            b.passed,
            b.failing_elements,
            b.worst_index,
        ), wrong
        assert a.passed == (wrong == "exact"), wrong


def test_work_items_cover_every_element_once():
    for k_len, n in ((1, 2**20 + 1), (3, 2**16), (64, 1000), (2, 5)):
        item_k, p0, p1 = work_items.work_items(k_len, n)
        some = work_items.items_of(np.arange(1, k_len, 2), n)  # the on-grid pass's: some slices
        assert all(
            np.array_equal(a[np.isin(item_k, some[0])], b)
            for a, b in zip((item_k, p0, p1), some, strict=True)
        )
        for k in range(k_len):
            mine = np.flatnonzero(item_k == k)
            assert p0[mine[0]] == 0 and p1[mine[-1]] == n
            assert np.array_equal(p0[mine[1:]], p1[mine[:-1]])


@pytest.mark.parametrize("operator", ["MEAN_VARIANCE_NORMALIZATION1", "BATCH_NORMALIZATION_TRAINING_GRAD"])
def test_the_figures_are_the_same_bits_whatever_the_thread_count(monkeypatch, operator):
    """Every figure of a comparison (the aggregate fit's and the gradients' sums included) is
    the same to the last bit on a machine of 1, 3 or 16 threads: the work items' cut depends on
    the sizes only. The backend's output is noisy, so the fit's sums are not trivially exact."""
    from dmlconform.reference import compiled as rk

    n = 2**20
    if operator == "MEAN_VARIANCE_NORMALIZATION1":
        t = {"DataType": "FLOAT32", "Sizes": [1, n]}
        body = {"InputTensor": t, "OutputTensor": t, "Axes": [1], "NormalizeVariance": True}
    else:
        t, c = {"DataType": "FLOAT32", "Sizes": [2, 2, n // 4]}, {"DataType": "FLOAT32", "Sizes": [1, 2, 1]}
        body = {"InputTensor": t, "InputGradientTensor": t, "OutputGradientTensor": t, "Epsilon": 1e-3}
        stats = (
            "MeanTensor",
            "VarianceTensor",
            "ScaleTensor",
            "OutputScaleGradientTensor",
            "OutputBiasGradientTensor",
        )
        body |= {k: c for k in stats}
    desc = dc.parse_desc({"type": operator, "desc": body})
    inputs = data.make_inputs(desc, "standard_normal", seed=5, spec=SPEC)
    ref = dc.execute(desc, inputs)
    main = kernels.plan(desc, SPEC).output
    noise = np.random.default_rng(1).integers(-3, 4, size=n).astype(np.int32).reshape(ref[main].shape)
    got = {**ref, main: (ref[main].view(np.int32) + noise).view(np.float32)}
    seen = []
    for threads in (1, 3, 16):
        monkeypatch.setattr(rk, "THREADS", threads)
        with compiled_everywhere():
            seen.append(tolerance.compare(desc, got, ref, inputs, SPEC, NO_OPTIONS).to_dict())
    assert seen[0]["outputs"][main]["ratio"] > 0  # the noise is seen
    assert seen[1] == seen[0] and seen[2] == seen[0]


def test_small_cases_do_not_import_numba(tmp_path):
    """Below the reference's compile threshold the judge stays in numpy (cold start)."""
    import subprocess
    import sys

    code = (
        "import sys, dmlconform as dc\n"
        "from dmlconform.generation import data\nfrom dmlconform import tolerance\n"
        "from dmlconform.tolerance.options import NO_OPTIONS\n"
        "t = {'DataType': 'FLOAT32', 'Sizes': [4, 1000]}\n"
        "d = dc.parse_desc({'type': 'MEAN_VARIANCE_NORMALIZATION1', 'desc': {'InputTensor': t, 'OutputTensor': t, 'Axes': [1], 'NormalizeVariance': True}})\n"
        "i = data.make_inputs(d, 'standard_normal', seed=1, spec=dc.load_spec())\n"
        "r = dc.execute(d, i)\n"
        "assert tolerance.compare(d, r, r, i, dc.load_spec(), NO_OPTIONS).passed\n"
        "print('numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_given_statistics_slice_per_channel_where_the_slices_are_long():
    """Per-channel statistics: one slice per channel (Mean and 1/sd constant within it, no
    per-element index); statistics that vary along nearly every axis: the tensor is one slice."""
    plan = PER_CHANNEL["given"]("FLOAT32")
    inputs = data.make_inputs(plan, "standard_normal", seed=1, spec=SPEC)
    given = kernels.plan(plan, SPEC)
    assert judge.given_slicing(given, inputs).axes == (0, 2, 3)
    inputs["VarianceTensor"] = np.ones((2, 1, 96, 1), np.float32)
    assert judge.given_slicing(given, inputs).axes == (0, 1, 2, 3)


@pytest.mark.parametrize("model", ["centred", "gradient-given", "gradient-batch"])
@pytest.mark.parametrize("regime", ["standard_normal", "large_offset", "constant_slices"])
def test_the_reduced_outputs_budgets_and_verdicts_equal_the_models(model, regime):
    """The outputs beside the main one (BNT's mean and variance, the gradients' scale and bias
    gradients) are judged by the numpy model's functions on the kernels' per-slice terms: the
    same budgets to 1e-12 and the same verdicts, and a wrong bias gradient fails."""
    if model == "centred":
        desc = _per_channel("BATCH_NORMALIZATION_TRAINING", "FLOAT32", Epsilon=1e-3,
                            channels=("ScaleTensor", "BiasTensor", "OutputMeanTensor", "OutputVarianceTensor"))  # fmt: skip
    else:
        desc = PER_CHANNEL[model]("FLOAT32")
    inputs = data.make_inputs(desc, regime, seed=4, spec=SPEC)
    ref = dc.execute(desc, inputs)
    with compiled_everywhere():
        fast, none = compare_module.case_budgets(desc, ref, inputs, SPEC, NO_OPTIONS)
    assert none is None  # the compiled judge's budgets
    with numpy_only():
        slow, _ = compare_module.case_budgets(desc, ref, inputs, SPEC, NO_OPTIONS)
    assert set(fast) == set(slow) == set(ref)
    for name in ref:
        assert_budgets_agree(fast[name], slow[name])
    plan = kernels.plan(desc, SPEC)
    others = [name for name in ref if name != plan.output]
    assert others
    for name in others:
        got = {**ref, name: (ref[name].astype(np.float64) * 1.01 + 1e-2).astype(ref[name].dtype)}
        with compiled_everywhere():
            a = tolerance.compare(desc, got, ref, inputs, SPEC, NO_OPTIONS)
        with numpy_only():
            b = tolerance.compare(desc, got, ref, inputs, SPEC, NO_OPTIONS)
        assert not a.passed and not b.passed, name
        assert (a.outputs[name].failing_elements, a.outputs[name].worst_index) == (
            b.outputs[name].failing_elements, b.outputs[name].worst_index
        )  # fmt: skip


def test_the_batch_gradient_centred_on_the_batch_mean_gives_the_models_budgets(monkeypatch):
    """``semantics.centre_with: input`` (no shipped spec centres so, a spec may): the kernel's
    batch mean and the centring term e_xc = max(c_mean u g mean|x|, |Mean - mean(x)|)."""
    import dataclasses

    from dmlconform.kernels import normalization_grad
    from dmlconform.tolerance import gradients

    desc = PER_CHANNEL["gradient-batch"]("FLOAT32")
    inputs = data.make_inputs(desc, "standard_normal", seed=6, spec=SPEC)
    inputs["MeanTensor"] = (inputs["MeanTensor"] + np.float32(0.25)).astype(np.float32)
    plan = dataclasses.replace(kernels.plan(desc, SPEC), centre_with="input")
    assert not plan.centres_on_mean
    for module in (normalization_grad, gradients):  # the reference's and the numpy model's plan
        monkeypatch.setattr(module, "build_plan", lambda d, s=None: plan)
    ref = dc.execute(desc, inputs)
    jp = judge.CompiledCase(plan, judge._gradient_terms)
    out = ref["OutputGradientTensor"]
    kernel = np.empty(out.shape)
    judge.judge_normalization(desc, out, out, inputs, SPEC, NO_OPTIONS, budget_out=kernel, plan=jp)
    model = kernels.part(desc, SPEC, "budgets")(desc, ref, inputs, SPEC, NO_OPTIONS).by_member[
        "OutputGradientTensor"
    ]
    assert_budgets_agree(kernel, model)
    # the Mean member 0.25 off the batch mean: e_xc is that difference, not the mean's rounding
    with_mean = judge.CompiledCase(dataclasses.replace(plan, centre_with="mean"), judge._gradient_terms)
    tighter = np.empty(out.shape)
    judge.judge_normalization(desc, out, out, inputs, SPEC, NO_OPTIONS, budget_out=tighter, plan=with_mean)
    assert np.all(kernel > 10 * tighter)
