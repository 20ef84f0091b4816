"""The run's tolerance options: parsed once, checked where they enter, merged and labelled the
way the report and the known findings' ``meets`` read them."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlconform.runner.settings import tolerance_options
from dmlconform.specification.spec import load_spec
from dmlconform.tolerance.options import NO_OPTIONS, ToleranceOptions


def test_parse_types_the_known_fields_and_keeps_other_coefficients_by_name() -> None:
    o = ToleranceOptions.parse({"model": "strict", "ulp_scale": "2", "pointwise": "8", "mean_growth": "log2"})
    assert o.model == "tight"  # the old name of the 256-block model
    assert o.ulp_scale == 2.0 and o.atol is None and o.max_ulp is None
    assert o.coefficients == (("mean_growth", "log2"), ("pointwise", 8.0))
    assert o.pairs() == {"mean_growth": "log2", "model": "tight", "pointwise": "8", "ulp_scale": "2"}


def test_a_bad_number_or_an_unknown_name_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"ulp_scale='two': not a number"):
        ToleranceOptions.parse({"ulp_scale": "two"})
    with pytest.raises(ValueError, match="unknown tolerance override 'bogus'"):
        tolerance_options(load_spec(), {"bogus": "1"})
    # a worded coefficient takes one of its words (it was a KeyError in every case's budget)
    with pytest.raises(ValueError, match=r"working_precision='FLOAT8': not one of FLOAT32, FLOAT16"):
        tolerance_options(load_spec(), {"working_precision": "FLOAT8"})
    with pytest.raises(ValueError, match=r"growth_cap='linear': not one of blocked"):
        tolerance_options(load_spec(), {"growth_cap": "linear"})
    assert tolerance_options(load_spec(), {"working_precision": "FLOAT16"}).changes() == {
        "working_precision": "FLOAT16"
    }
    # an empty model name read as the operator's own model and the run went ahead
    for empty in ("", " ", None):
        with pytest.raises(ValueError, match="model=: names no model"):
            ToleranceOptions.parse({"model": empty})


@pytest.mark.parametrize("key", ["ulp_scale", "atol", "max_ulp", "pointwise"])
@pytest.mark.parametrize("raw", ["-1", "nan", "inf", "-inf", -0.5])
def test_a_negative_or_non_finite_budget_number_is_refused(key: str, raw: object) -> None:
    """``ulp_scale=-1`` ran a whole default run in which 2629 of 2927 cases failed; ``inf`` would
    pass them all. Zero stays: a zero budget asks for exact answers."""
    with pytest.raises(ValueError, match=rf"{key}={raw!r}: must be a finite number >= 0"):
        ToleranceOptions.parse({key: raw})
    assert ToleranceOptions.parse({key: "0"}).changes() == {key: 0.0}


def test_merged_puts_the_other_options_on_top() -> None:
    run = ToleranceOptions.parse({"model": "default", "ulp_scale": 2, "pointwise": 8})
    bound = ToleranceOptions.parse({"model": "fp16-statistics", "mean": 3})
    both = run.merged(bound)
    assert both.model == "fp16-statistics" and both.ulp_scale == 2.0
    assert dict(both.coefficients) == {"pointwise": 8.0, "mean": 3.0}
    assert run.merged(NO_OPTIONS) == run and NO_OPTIONS.merged(run) == run


def test_scaled_multiplies_the_scale_already_asked_for() -> None:
    assert NO_OPTIONS.scaled(2.0).ulp_scale == 2.0
    assert ToleranceOptions(ulp_scale=3.0).scaled(2.0).ulp_scale == 6.0


def test_label_names_a_model_alone_and_pairs_otherwise() -> None:
    assert ToleranceOptions(model="fp16-statistics").label() == "fp16-statistics"
    assert (
        ToleranceOptions(model="fp16-statistics", ulp_scale=2.0).label()
        == "model=fp16-statistics, ulp_scale=2"
    )
    assert not NO_OPTIONS and ToleranceOptions(atol=0.0)


@given(
    st.dictionaries(
        st.sampled_from(["ulp_scale", "atol", "max_ulp", "pointwise", "mean"]),
        st.floats(min_value=0.0, allow_nan=False, allow_infinity=False, width=64),
    ),
    st.sampled_from([None, "default", "tight", "lenient"]),
)
def test_the_pairs_parse_back_to_the_same_options_and_survive_pickling(values, model) -> None:
    pairs = {**values, **({"model": model} if model else {})}
    o = ToleranceOptions.parse(pairs)
    assert ToleranceOptions.parse(o.pairs()) == o  # what results.json records reads back alike
    assert pickle.loads(pickle.dumps(o)) == o and hash(o) == hash(ToleranceOptions.parse(pairs))
