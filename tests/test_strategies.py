"""The hypothesis driver: same generators, choices drawn by hypothesis, so failures shrink."""

from __future__ import annotations

from helpers import SPEC
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from dmlconform.generation import strategies as s
from dmlconform.specification.desc import parse_desc
from dmlconform.specification.validate import validate

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(s.any_legal_desc(SPEC))
def test_legal_descs_validate_clean_and_round_trip(item) -> None:
    desc, level = item
    assert validate(desc, level) == []
    assert parse_desc(desc.to_dict()) == desc


@FAST
@given(s.any_illegal_desc(SPEC))
def test_illegal_descs_break_exactly_their_rule(item) -> None:
    desc, level, rule = item
    assert {v.rule for v in validate(desc, level)} == {rule}


@FAST
@given(st.data())
def test_named_rule_is_broken(data) -> None:
    desc, rule = data.draw(s.illegal_descs("MEAN_VARIANCE_NORMALIZATION1", "3_0", SPEC, rule="axes-unique"))
    assert rule == "axes-unique"
    assert {v.rule for v in validate(desc, "3_0")} == {"axes-unique"}


def test_failures_shrink_to_a_minimal_desc() -> None:
    found = find(
        s.legal_descs("MEAN_VARIANCE_NORMALIZATION1", "6_4", SPEC),
        lambda d: d.members["InputTensor"].rank >= 3,
        settings=settings(max_examples=300, deadline=None, database=None),
    )
    t = found.members["InputTensor"]
    assert t.rank == 3 and t.sizes == (1, 1, 1) and t.strides is None
    assert found.members.get("FusedActivation") is None
