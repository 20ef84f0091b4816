"""A reference at the top of its type's range keeps a finite budget (issue 20's closing read: the
spacing at the largest finite value was inf, so the budget was unbounded and every answer there
passed, NaN and the negated value included). The answer that overflowed to inf of the
reference's sign stays right where the budget reaches the magnitudes that round to inf. Both
the numpy model and the compiled judge, FLOAT16 and FLOAT32."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlconform as dc
from dmlconform import tolerance
from dmlconform.tolerance import judge
from dmlconform.tolerance.options import NO_OPTIONS

SPEC = dc.load_spec()
DTYPES = {"FLOAT16": np.float16, "FLOAT32": np.float32}


@contextlib.contextmanager
def judged_by(path: str):
    """The numpy model or the compiled judge, whatever the size."""
    saved = judge.KERNEL_MIN_ELEMENTS
    judge.KERNEL_MIN_ELEMENTS = 1 if path == "compiled" else 1 << 62
    try:
        yield
    finally:
        judge.KERNEL_MIN_ELEMENTS = saved


def at_the_top(dtype: str, n: int, sign: float):
    """MVN1 whose Bias is the largest finite value of ``dtype`` (times ``sign``): every reference
    output is that value (the normalized part is far below its spacing)."""
    t = {"DataType": dtype, "Sizes": [1, n]}
    s = {"DataType": dtype, "Sizes": [1, 1]}
    desc = dc.parse_desc(
        {"type": "MEAN_VARIANCE_NORMALIZATION1",
         "desc": {"InputTensor": t, "ScaleTensor": s, "BiasTensor": s, "OutputTensor": t, "Axes": [1],
                  "NormalizeVariance": True, "Epsilon": 1e-5}}
    )  # fmt: skip
    npdt = DTYPES[dtype]
    inputs = {
        "InputTensor": np.random.default_rng(3).standard_normal((1, n)).astype(npdt),
        "ScaleTensor": np.ones((1, 1), npdt),
        "BiasTensor": np.full((1, 1), sign * np.finfo(npdt).max, npdt),
    }
    ref = dc.execute(desc, inputs)
    assert np.all(ref["OutputTensor"] == sign * np.finfo(npdt).max)
    return desc, inputs, ref


@pytest.mark.parametrize("path", ["numpy", "compiled"])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_reference_at_the_largest_finite_value_has_a_finite_budget(path, dtype, sign):
    desc, inputs, ref = at_the_top(dtype, 1 << 17, sign)
    r = ref["OutputTensor"]
    npdt = DTYPES[dtype]
    top_spacing = float(np.finfo(npdt).max) - float(np.nextafter(np.finfo(npdt).max, npdt(0)))
    answers = {
        "the reference": (r, True),
        "one top spacing inside": (np.nextafter(r, npdt(0)), True),
        "overflowed to inf of its sign": (np.full_like(r, sign * np.inf), True),
        "inf of the other sign": (np.full_like(r, -sign * np.inf), False),
        "NaN": (np.full_like(r, np.nan), False),
        "zeros": (np.zeros_like(r), False),
        "the negated value": (-r, False),
    }
    with judged_by(path):
        for name, (got, right) in answers.items():
            out = tolerance.compare(desc, {"OutputTensor": got}, ref, inputs, SPEC, NO_OPTIONS).outputs[
                "OutputTensor"
            ]
            assert out.passed == right, name
            assert top_spacing <= out.budget < 8 * top_spacing, name  # finite: a few top ULP
            if not right:
                assert out.failing_elements == r.size, name
                assert "unbounded" not in out.message, name


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_inf_is_right_only_where_the_budget_reaches_the_overflow(dtype):
    """A reference a few spacings below the top: its budget stops short of the magnitudes that
    round to inf, so an inf there is an error (the model and the judge alike)."""
    npdt = DTYPES[dtype]
    desc, inputs, _ = at_the_top(dtype, 1 << 17, 1.0)
    inputs["BiasTensor"][:] = np.nextafter(np.finfo(npdt).max, npdt(0)) - 8 * (
        np.finfo(npdt).max - np.nextafter(np.finfo(npdt).max, npdt(0))
    )
    ref = dc.execute(desc, inputs)
    assert np.all(np.isfinite(ref["OutputTensor"]))
    for path in ("numpy", "compiled"):
        with judged_by(path):
            got = {"OutputTensor": np.full_like(ref["OutputTensor"], np.inf)}
            out = tolerance.compare(desc, got, ref, inputs, SPEC, NO_OPTIONS).outputs["OutputTensor"]
            assert not out.passed and out.failing_elements == ref["OutputTensor"].size, path


def test_ulp_of_and_the_overflow_edge_at_the_top():
    for npdt, spacing in ((np.float16, 32.0), (np.float32, 2.0**104)):
        top = float(np.finfo(npdt).max)
        got = tolerance.ulp_of(np.array([top, -top, np.inf, 2 * top, top - spacing, np.nan]), npdt)
        assert list(got[:5]) == [spacing] * 5
        assert np.isnan(got[5])
        assert tolerance.overflow_edge(npdt) == top + spacing / 2
        with np.errstate(over="ignore"):
            assert np.isinf(npdt(tolerance.overflow_edge(npdt)))  # rounds to inf
        assert np.isfinite(npdt(np.nextafter(tolerance.overflow_edge(npdt), 0)))  # just below: finite


def _edges(npdt) -> list[float]:
    top = float(np.finfo(npdt).max)
    below = float(np.nextafter(np.finfo(npdt).max, npdt(0)))
    tiny = float(np.finfo(npdt).tiny)
    sub = float(np.finfo(npdt).smallest_subnormal)
    return [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, top, -top, below, -below, tiny, -sub, 3.0 * sub]


@st.composite
def answers_at_the_edges(draw):
    """An MVN1 desc whose outputs lie anywhere from 0 to the top of the range (Bias drawn among the
    edges), and a backend answer that is the reference with some elements replaced by edge values."""
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    npdt = DTYPES[dtype]
    n = draw(st.integers(2, 300))
    desc, inputs, _ = at_the_top(dtype, n, 1.0)
    bias = draw(st.sampled_from([v for v in _edges(npdt) if np.isfinite(v)] + [1000.0]))
    inputs["BiasTensor"][:] = bias
    inputs["ScaleTensor"][:] = draw(st.sampled_from([1.0, -1.0, 1000.0]))
    ref = dc.execute(desc, inputs)["OutputTensor"]
    got = ref.copy()
    for _ in range(draw(st.integers(0, 6))):
        got[0, draw(st.integers(0, n - 1))] = draw(st.sampled_from(_edges(npdt)))
    return desc, inputs, got


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers_at_the_edges())
def test_the_judge_and_the_model_agree_on_answers_at_the_edges(case):
    """The compiled judge against the numpy model where the values are inf, NaN, signed zeros,
    subnormals and the largest finite values, in the reference and in the answer: the figures
    that decide and report a verdict are the same."""
    desc, inputs, got = case
    with np.errstate(over="ignore", invalid="ignore"):
        ref = dc.execute(desc, inputs)
    outs = []
    for path in ("compiled", "numpy"):
        with judged_by(path):
            outs.append(
                tolerance.compare(desc, {"OutputTensor": got}, ref, inputs, SPEC, NO_OPTIONS).outputs[
                    "OutputTensor"
                ]
            )
    fast, slow = outs
    assert (fast.passed, fast.failing_elements, fast.worst_index) == (
        slow.passed,
        slow.failing_elements,
        slow.worst_index,
    )
    assert fast.max_ulp == slow.max_ulp
    assert fast.max_abs == slow.max_abs
    assert fast.budget == pytest.approx(slow.budget, rel=1e-12, nan_ok=True)
    assert fast.ratio == pytest.approx(slow.ratio, rel=1e-12, nan_ok=True)


def _numpys_spacing(values: np.ndarray, npdt) -> np.ndarray:
    """The spacing ulp_of means, through numpy's own rounding and np.spacing (below the top)."""
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.abs(values).astype(npdt)
        v = np.minimum(v, np.nextafter(np.finfo(npdt).max, npdt(0)))
        return np.spacing(v).astype(np.float64)


def _and_the_midpoints(representable: np.ndarray) -> np.ndarray:
    """Every value, every midpoint between neighbours (the ties of rounding) and the float64
    values on either side of each midpoint."""
    f = np.unique(np.abs(representable[np.isfinite(representable)]))
    mid = (f[:-1] + f[1:]) / 2
    extremes = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, 1e-300, 5e-324]
    return np.concatenate([representable, mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf), extremes])


def test_ulp_of_is_numpys_spacing_of_the_rounded_value_for_every_float16():
    """ulp_of computes from the float64 bits (numpy's float16 conversions take ~80 ns per
    subnormal); exhaustively against numpy for every float16 and every rounding tie."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
    values = _and_the_midpoints(every)
    assert np.array_equal(
        tolerance.ulp_of(values, np.float16), _numpys_spacing(values, np.float16), equal_nan=True
    )


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_ulp_of_is_numpys_spacing_of_the_rounded_value_for_float32(seed):
    rng = np.random.default_rng(seed)
    drawn = rng.standard_normal(20000) * 10.0 ** rng.integers(-46, 40, 20000)
    with np.errstate(over="ignore"):
        representable = drawn.astype(np.float32).astype(np.float64)
    values = _and_the_midpoints(np.concatenate([drawn, representable]))
    assert np.array_equal(
        tolerance.ulp_of(values, np.float32), _numpys_spacing(values, np.float32), equal_nan=True
    )
    assert tolerance.ulp_of(values[:7].reshape(7, 1), np.float32).shape == (7, 1)
    assert np.shape(tolerance.ulp_of(3.0, np.float32)) == ()


def test_a_relation_run_that_overflowed_within_its_budget_is_not_called_nonfinite():
    """A relation's check that the backend's runs are finite where the reference is: an inf of
    the reference's sign where the budget reaches the overflow is right there too."""
    from dmlconform.runner.judging import _Fail, require_finite

    desc, inputs, ref = at_the_top("FLOAT16", 64, 1.0)
    r = ref["OutputTensor"]
    require_finite(SPEC, {"OutputTensor": np.full_like(r, np.inf)}, desc, inputs, ["OutputTensor"], "test")
    for wrong in (-np.inf, np.nan):
        with pytest.raises(_Fail, match=r"OutputTensor: the backend gave"):
            require_finite(
                SPEC, {"OutputTensor": np.full_like(r, wrong)}, desc, inputs, ["OutputTensor"], "test"
            )
    inputs["BiasTensor"][:] = 65504 - 9 * 32  # the budget stops short of the overflow
    with pytest.raises(_Fail, match=r"OutputTensor: the backend gave inf"):
        require_finite(
            SPEC, {"OutputTensor": np.full_like(r, np.inf)}, desc, inputs, ["OutputTensor"], "test"
        )
