"""The inferred rule tensor-output-elements-distinct: an output's elements each at their own offset.

DirectML settles the rule (spec/common/tensor_desc.yaml, cases/directml/output-overlap): it refuses
every overlapping output and accepts interleaved ones whose offsets are distinct, so the check
must be exact, not a test of sorted strides. The brute force here enumerates every index.
"""

from __future__ import annotations

import itertools
import math

import pytest
from helpers import SPEC
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlconform.specification.desc import OVERLAP_SEARCH_LIMIT, overlapping_elements, parse_desc
from dmlconform.specification.validate import validate


def offsets_collide(sizes: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    seen = set()
    for index in itertools.product(*(range(n) for n in sizes)):
        offset = sum(i * s for i, s in zip(index, strides, strict=True))
        if offset in seen:
            return True
        seen.add(offset)
    return False


layouts = st.integers(1, 4).flatmap(
    lambda rank: st.tuples(st.tuples(*[st.integers(1, 6)] * rank), st.tuples(*[st.integers(0, 14)] * rank))
)


@settings(max_examples=600)
@given(layouts)
def test_overlap_is_found_exactly_where_two_indices_share_an_offset(layout) -> None:
    sizes, strides = layout
    overlap = overlapping_elements(sizes, strides)
    assert (overlap is not None) == offsets_collide(sizes, strides)
    if overlap is not None:  # small enough to enumerate: always with the two indices
        a, b = overlap.first, overlap.second
        assert a is not None and b is not None and a != b
        assert all(0 <= i < n for i, n in zip(a + b, sizes + sizes, strict=True))
        at = [sum(i * s for i, s in zip(x, strides, strict=True)) for x in (a, b)]
        assert at == [overlap.offset, overlap.offset]


@pytest.mark.parametrize(
    ("sizes", "strides", "witness"),
    [
        ((65536, 65536), (1, 1), True),  # two dimensions on one stride
        ((4096, 8192), (2, 4), True),  # one step along the second is two along the first
        ((1, 1 << 20, 1 << 11), (0, 3, 5), False),  # 2^31 elements within 3.2 million offsets
    ],
)
def test_large_overlaps_are_proved_without_enumerating(
    sizes: tuple[int, ...], strides: tuple[int, ...], witness: bool
) -> None:
    assert math.prod(sizes) > OVERLAP_SEARCH_LIMIT
    overlap = overlapping_elements(sizes, strides)
    assert overlap is not None
    assert (overlap.first is not None) == witness
    if not witness:
        assert overlap.describe() == f"its {math.prod(sizes)} elements lie within {overlap.span} offsets"


def test_large_distinct_layouts_pass() -> None:
    assert overlapping_elements((1 << 16, 1 << 16), (1 << 16, 1)) is None  # packed
    assert overlapping_elements((4096, 4096), (4095, 4097)) is None  # interleaved, coprime steps
    assert overlapping_elements((1 << 16, 3, 1 << 12), (3 << 12, 1 << 12, 1)) is None


# What DirectML 1.8.0 to 1.15.4 answered for these OutputTensor layouts (CreateOperator, FLOAT32
# MEAN_VARIANCE_NORMALIZATION1 and BATCH_NORMALIZATION): cases/directml/output-overlap.
DIRECTML_ANSWERS = [
    ((1, 2, 3, 4), (0, 0, 0, 1), "refuses"),
    ((1, 2, 3, 4), (12, 0, 4, 1), "refuses"),
    ((1, 2, 3, 4), (12, 6, 2, 0), "refuses"),
    ((1, 2, 3, 4), (24, 1, 1, 1), "refuses"),
    ((1, 2, 3, 4), (24, 12, 3, 1), "refuses"),
    ((1, 1, 3, 2), (8, 8, 1, 2), "refuses"),
    ((1, 1, 3, 2), (8, 8, 2, 3), "accepts"),
    ((1, 2, 3, 4), (0, 12, 4, 1), "accepts"),
    ((1, 2, 3, 4), (100, 40, 10, 1), "accepts"),
    ((1, 2, 3, 4), (24, 1, 2, 6), "accepts"),
]


def mvn1(sizes: tuple[int, ...], output_strides=None, input_strides=None):
    return parse_desc(
        {
            "type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": {"DataType": "FLOAT32", "Sizes": list(sizes), "Strides": input_strides},
                "OutputTensor": {"DataType": "FLOAT32", "Sizes": list(sizes), "Strides": output_strides},
                "AxisCount": 1,
                "Axes": [3],
                "NormalizeVariance": True,
                "Epsilon": 1e-5,
            },
        }
    )


@pytest.mark.parametrize(("sizes", "strides", "answer"), DIRECTML_ANSWERS)
def test_the_validator_says_what_directml_does(sizes, strides, answer) -> None:
    violations = validate(mvn1(sizes, output_strides=list(strides)), "6_4", SPEC)
    assert [v.rule for v in violations] == (
        [] if answer == "accepts" else ["tensor-output-elements-distinct"]
    )
    if violations:
        assert violations[0].member == "OutputTensor.Strides"
        assert "overlap" in violations[0].message


def test_inputs_may_broadcast() -> None:
    assert validate(mvn1((1, 2, 3, 4), input_strides=[0, 0, 0, 1]), "6_4", SPEC) == []
