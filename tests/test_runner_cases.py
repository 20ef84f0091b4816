"""Collection of a run's cases (dmlconform/runner/cases.py)."""

from __future__ import annotations

import pytest

from dmlconform.generation import data
from dmlconform.runner.cases import Selection, apply_when, collect
from dmlconform.specification.spec import load_spec


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_metamorphic_regimes_apply_to_the_desc_the_relation_starts_from(seed: int) -> None:
    """A relation's ``when`` changes the desc (CrossChannel TRUE reduces over more dims), so the
    data regime must be drawn for that desc. One picked for the generated desc (``short_reduction``)
    made 1-3 metamorphic cases of most ``--cases 24`` runs skip as "does not apply"."""
    spec = load_spec()
    cases = list(
        collect(spec, Selection(level=spec.level("6_4"), cases=24, seed=seed, kinds=("metamorphic",)))
    )
    assert cases
    forced = [c for c in cases if c.relation.when]
    assert forced, "no relation with a precondition was collected"
    for case in cases:
        base = apply_when(case.desc, case.relation)
        assert case.regime in data.regimes_for(base, spec), case.id
        data.make_inputs(
            base, case.regime, case.input_seed, spec=spec
        )  # raises RegimeNotApplicable otherwise


def _validation_data_types(spec, case) -> set[str]:
    from dmlconform.specification.desc import TensorDesc

    return {t.data_type for t in case.desc.members.values() if isinstance(t, TensorDesc)}


def test_dtypes_select_every_kind_and_illegal_cases_belong_to_the_type_they_test() -> None:
    from dmlconform.runner.cases import tested_data_type

    spec = load_spec()
    full = list(collect(spec, Selection(level=spec.level("6_4"), cases=2, tier="smoke")))
    narrow = list(
        collect(spec, Selection(level=spec.level("6_4"), cases=2, tier="smoke", data_types=("FLOAT16",)))
    )
    assert {c.kind for c in narrow} == {"numeric", "validation", "metamorphic"}
    assert {c.data_type for c in narrow} == {"FLOAT16"}
    # exactly the full run's FLOAT16 cases, with the same ids
    assert [c.id for c in narrow] == [c.id for c in full if c.data_type == "FLOAT16"]
    illegal_types = [c for c in full if c.expected == "illegal" and c.rule == "supported-data-type"]
    assert illegal_types
    for case in illegal_types:
        op = spec.operator(case.operator)
        supported = set(
            spec.operator(case.operator)
            .support_row(spec, spec.level("6_4"))
            .tensors["InputTensor"]
            .data_types
        )
        assert case.data_type not in supported and case.data_type in _validation_data_types(spec, case)
        assert tested_data_type(spec, op, case.level, case.desc) == case.data_type
        # selected by the type it tests, alone
        only = list(
            collect(
                spec, Selection(level=spec.level("6_4"), cases=2, tier="smoke", data_types=(case.data_type,))
            )
        )
        assert case.id in {c.id for c in only}
        assert all(c.kind == "validation" and c.expected == "illegal" for c in only)


def test_tested_data_type_names_an_unsupported_type_on_any_tensor() -> None:
    from dmlconform.runner.cases import tested_data_type
    from dmlconform.specification.desc import parse_desc

    spec = load_spec()
    op = spec.operator("MEAN_VARIANCE_NORMALIZATION1")
    raw = {
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 3, 4]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 3, 4]},
        "Axes": [2, 3],
        "NormalizeVariance": True,
    }
    assert (
        tested_data_type(spec, op, spec.level("6_4"), parse_desc({"type": op.name, "desc": raw})) == "FLOAT32"
    )
    raw["ScaleTensor"] = {"DataType": "UINT16", "Sizes": [1, 2, 1, 1]}
    assert (
        tested_data_type(spec, op, spec.level("6_4"), parse_desc({"type": op.name, "desc": raw})) == "UINT16"
    )


def test_an_operator_or_data_type_named_twice_is_collected_once() -> None:
    """``--operators lrn LOCAL_RESPONSE_NORMALIZATION`` (one operator, two names) collected each
    case twice under one id, and the run ended "INCOMPLETE ... 4 of 8 cases ran"."""
    from dmlconform.runner.selection import resolve_selection

    spec = load_spec()
    level = spec.level("6_4")
    twice = {
        "operators": ["lrn", "LOCAL_RESPONSE_NORMALIZATION"],
        "dtypes": ["float16", "FLOAT16"],
        "cases": 2,
    }
    sel = resolve_selection(spec, twice, level)
    assert sel.operators == ("LOCAL_RESPONSE_NORMALIZATION",) and sel.data_types == ("FLOAT16",)
    ids = [c.id for c in collect(spec, sel)]
    assert ids and len(ids) == len(set(ids))
    once = resolve_selection(spec, {"operators": ["lrn"], "dtypes": ["FLOAT16"], "cases": 2}, level)
    assert ids == [c.id for c in collect(spec, once)]
