"""The inferred rule tensor-output-span: an output spans at least as many slots as it has elements.

DirectML settles the rule (spec/common/tensor_desc.yaml, cases/directml/output-overlap): it refuses
an output exactly where its element count exceeds IndexOfLastElement + 1, and accepts outputs
that overlap within a larger span. The brute force here enumerates every index.
"""

from __future__ import annotations

import itertools
import math

import pytest
from helpers import SPEC
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlconform.specification.desc import parse_desc
from dmlconform.specification.validate import validate


def offsets_collide(sizes: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    seen = set()
    for index in itertools.product(*(range(n) for n in sizes)):
        offset = sum(i * s for i, s in zip(index, strides, strict=True))
        if offset in seen:
            return True
        seen.add(offset)
    return False


def mvn1(sizes, output_strides=None, input_strides=None, total=None):
    output = {"DataType": "FLOAT32", "Sizes": list(sizes), "Strides": output_strides}
    if total is not None:
        output["TotalTensorSizeInBytes"] = total
    return parse_desc(
        {
            "type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": {"DataType": "FLOAT32", "Sizes": list(sizes), "Strides": input_strides},
                "OutputTensor": output,
                "AxisCount": 1,
                "Axes": [len(sizes) - 1],
                "NormalizeVariance": True,
                "Epsilon": 1e-5,
            },
        }
    )


def refused(desc) -> bool:
    return [v.rule for v in validate(desc, "6_4", SPEC)] == ["tensor-output-span"]


layouts = st.integers(1, 4).flatmap(
    lambda rank: st.tuples(st.tuples(*[st.integers(1, 5)] * rank), st.tuples(*[st.integers(0, 12)] * rank))
)


@settings(max_examples=400)
@given(layouts)
def test_a_refused_output_always_overlaps_and_a_distinct_one_never_is(layout) -> None:
    """The rule only refuses outputs whose elements collide (fewer slots than elements), and
    every layout whose offsets are distinct passes, whatever its order, padding or interleaving."""
    sizes, strides = layout
    if refused(mvn1(sizes, output_strides=list(strides))):
        assert offsets_collide(sizes, strides)
    if not offsets_collide(sizes, strides):
        assert validate(mvn1(sizes, output_strides=list(strides)), "6_4", SPEC) == []


# What DirectML 1.8.0 to 1.15.4 answered for these OutputTensor layouts (CreateOperator, FLOAT32
# MEAN_VARIANCE_NORMALIZATION1 and BATCH_NORMALIZATION): cases/directml/output-overlap.
DIRECTML_ANSWERS = [
    ((1, 2, 3, 4), (0, 0, 0, 1), None, "refuses"),
    ((1, 2, 3, 4), (12, 0, 4, 1), None, "refuses"),
    ((1, 2, 3, 4), (12, 6, 2, 0), None, "refuses"),
    ((1, 2, 3, 4), (24, 1, 1, 1), None, "refuses"),
    ((1, 2, 3, 4), (24, 12, 3, 1), None, "refuses"),
    ((1, 2, 3, 4), (24, 12, 3, 1), 4000, "refuses"),
    ((1, 1, 3, 2), (8, 8, 1, 2), None, "refuses"),
    ((2, 3, 4, 5), (59, 20, 5, 1), None, "refuses"),
    ((2, 3, 4, 5), (60, 20, 5, 1), None, "accepts"),
    ((1, 1, 3, 2), (8, 8, 2, 3), None, "accepts"),
    ((1, 2, 3, 4), (0, 12, 4, 1), None, "accepts"),
    ((1, 2, 3, 4), (100, 40, 10, 1), None, "accepts"),
    ((1, 2, 3, 4), (24, 1, 2, 6), None, "accepts"),
    ((2, 3, 4, 5), (200, 40, 4, 1), None, "accepts"),  # overlaps, within 297 slots for 120 elements
    ((1, 2, 5, 2), (0, 20, 1, 4), None, "accepts"),  # overlaps, within 29 slots for 20 elements
]


@pytest.mark.parametrize(("sizes", "strides", "total", "answer"), DIRECTML_ANSWERS)
def test_the_validator_says_what_directml_does(sizes, strides, total, answer) -> None:
    violations = validate(mvn1(sizes, output_strides=list(strides), total=total), "6_4", SPEC)
    assert [v.rule for v in violations] == ([] if answer == "accepts" else ["tensor-output-span"])
    if violations:
        assert violations[0].member == "OutputTensor.Strides"
        count = math.prod(sizes)
        assert f"the output's {count} elements lie within" in violations[0].message


def test_inputs_may_broadcast() -> None:
    assert validate(mvn1((1, 2, 3, 4), input_strides=[0, 0, 0, 1]), "6_4", SPEC) == []
