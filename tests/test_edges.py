"""The edges of every rule: what each kind makes, that the generators draw them, and that the
illegal generator breaks each rule just past them."""

from __future__ import annotations

import math

import pytest

from dmlconform.generation.chooser import seeded_chooser
from dmlconform.generation.edges import EDGE_RATE, FLOAT_EDGES, EdgeDrawer, edge_corpus, edge_variants
from dmlconform.generation.illegal import illegal_descs
from dmlconform.generation.legal import legal_descs
from dmlconform.specification.desc import parse_desc
from dmlconform.specification.rules import KINDS, Context
from dmlconform.specification.spec import load_spec
from dmlconform.specification.structure_builder import model_for, operators_and_levels
from dmlconform.specification.validate import validate

SPEC = load_spec()


def _undrawn(operator: str, level: str) -> list[str]:
    model = model_for(operator, level, SPEC)
    if not model.available:
        return []
    descs = [e.desc for e in edge_corpus(operator, level, SPEC)]
    descs += legal_descs(operator, level, seed=0, count=24, spec=SPEC, edge_rate=EDGE_RATE)
    missing = []
    for rule in model.active:
        kind = KINDS[rule.kind]
        if not kind.edge_reachable(rule, SPEC, model.op, model.level, model.row):
            continue
        if not any(kind.at_edge(rule, Context(SPEC, model.op, model.level, d, model.row)) for d in descs):
            missing.append(f"{operator} at {level}: {rule.id}")
    return missing


def test_every_rule_with_an_edge_has_it_drawn_at_every_level() -> None:
    """The edge corpus and 24 legal descs at the default edge rate put a desc at the edge of
    every rule that has one reachable at that level (the kind's own ``at_edge`` decides, not the
    code that made the desc)."""
    missing = [m for op, lv in operators_and_levels(SPEC) for m in _undrawn(op, lv)]
    assert not missing, "rules whose edges are never drawn:\n" + "\n".join(missing)


def test_the_edge_corpus_is_legal_and_each_desc_differs_from_its_base() -> None:
    edges = list(edge_corpus("MEAN_VARIANCE_NORMALIZATION1", "6_4", SPEC))
    assert len(edges) > 50
    assert all(validate(e.desc, "6_4", SPEC) == [] for e in edges)
    assert len({repr(e.desc) for e in edges}) == len(edges)
    labels = {e.label for e in edges}
    for expected in (
        "InputTensor: GuaranteedBaseOffsetAlignment 2147483648",
        "InputTensor: flag OWNED_BY_DML",
        "Epsilon NaN",
        "Epsilon the largest float",
    ):
        assert expected in labels


def test_an_edge_that_would_break_another_rule_is_dropped() -> None:
    """OWNED_BY_DML is an input's edge; on an output it breaks tensor-flags, so no edge of the
    corpus puts it there, and neither does the edge of tensor-flags on a desc without inputs'
    flags to give."""
    for e in edge_corpus("BATCH_NORMALIZATION", "6_4", SPEC):
        t = e.desc.members["OutputTensor"]
        assert t.effective_flags != "OWNED_BY_DML"


def _desc(output_strides: list[int], sizes: list[int]) -> object:
    return parse_desc(
        {
            "type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": {"DataType": "FLOAT32", "Sizes": sizes},
                "OutputTensor": {"DataType": "FLOAT32", "Sizes": sizes, "Strides": output_strides},
                "AxisCount": 1,
                "Axes": [len(sizes) - 1],
                "NormalizeVariance": True,
                "Epsilon": 1e-5,
            },
        },
        SPEC,
    )


@pytest.mark.parametrize(
    ("sizes", "strides", "rules"),
    [
        ([2, 3, 4, 5], [60, 20, 20, 1], ["tensor-output-distinct-strides"]),  # repeated, span 178 >= 120
        ([7, 3], [37, 0], ["tensor-output-distinct-strides"]),  # zero on a dimension of size 3
        ([2, 3, 4, 5], [200, 40, 4, 1], []),  # overlap through distinct strides: DirectML accepts
        ([1, 2, 5, 2], [0, 20, 1, 4], []),  # zero stride on a dimension of size 1
        ([1, 1, 3, 2], [8, 8, 2, 3], []),  # repeated stride on dimensions of size 1
        ([1, 2, 3, 4], [24, 12, 3, 1], ["tensor-output-span"]),  # 24 elements in 22 slots
    ],
)
def test_output_strides_follow_what_directml_answers(sizes, strides, rules) -> None:
    """DirectML 1.8.0 to 1.15.4's answers (cases/directml/output-strides/experiment.py)."""
    assert [v.rule for v in validate(_desc(strides, sizes), "6_4", SPEC)] == rules


def test_the_illegal_generator_breaks_each_output_layout_rule_alone() -> None:
    for op in sorted(SPEC.operators):
        for rule in ("tensor-output-span", "tensor-output-distinct-strides"):
            pairs = list(illegal_descs(op, "6_4", seed=0, count=4, spec=SPEC, rules=[rule]))
            assert pairs, (op, rule)
            for desc, broken in pairs:
                assert {v.rule for v in validate(desc, "6_4", SPEC)} == {broken}, (op, desc)


def test_element_count_edges_reach_the_maximum_and_float16_stops_one_short() -> None:
    counts = {}
    for e in edge_corpus("MEAN_VARIANCE_NORMALIZATION1", "6_4", SPEC):
        if e.rule == "tensor-element-count-max":
            t = e.desc.members["InputTensor"]
            counts.setdefault(t.data_type, set()).add(math.prod(t.sizes))
    assert 2**32 - 1 in counts["FLOAT32"]
    assert counts["FLOAT16"] == {2**32 - 2}  # 2^32 - 1 FLOAT16 elements exceed the largest buffer


def test_float_edges_are_every_class_of_value() -> None:
    values = [v for _, v in FLOAT_EDGES]
    assert any(math.isnan(v) for v in values) and math.inf in values and -math.inf in values
    assert 0 < min(v for v in values if v > 0) < 1.2e-38  # a denormal
    assert max(v for v in values if math.isfinite(v)) == float.fromhex("0x1.fffffep+127")


def test_edge_draws_replace_about_the_rate_and_leave_the_stream_alone_at_zero() -> None:
    plain = list(legal_descs("LP_NORMALIZATION", "6_4", seed=3, count=40, spec=SPEC))
    again = list(legal_descs("LP_NORMALIZATION", "6_4", seed=3, count=40, spec=SPEC, edge_rate=0.0))
    assert plain == again
    model = model_for("LP_NORMALIZATION", "6_4", SPEC)
    draw, ch = EdgeDrawer(model, EDGE_RATE), seeded_chooser("test edges")
    drawn = [(d, draw(d, ch)) for d in plain]
    replaced = [new for old, new in drawn if new != old]
    assert 4 <= len(replaced) <= 18  # 10 expected
    assert all(validate(d, "6_4", SPEC) == [] for d in replaced)
    rules = {e.rule for old, new in drawn if new != old for e in edge_variants(model, old) if e.desc == new}
    assert len(rules) >= 4  # taken in turn, not the first rule every time


def test_edge_variants_of_a_desc_come_from_its_rules() -> None:
    model = model_for("LOCAL_RESPONSE_NORMALIZATION", "6_4", SPEC)
    base = next(legal_descs("LOCAL_RESPONSE_NORMALIZATION", "6_4", seed=0, count=1, spec=SPEC))
    rules = {e.rule for e in edge_variants(model, base)}
    assert {"local-size-min", "tensor-alignment", "tensor-total-size-max", "member:Alpha"} <= rules


def test_the_release_corpus_asks_directml_about_every_edge() -> None:
    """The sweep's corpus holds the edge corpus of every operator and level (``--edges``), each
    probe legal at its level and named by the rule whose edge it sits at."""
    from dmlconform.releases import acceptance as acc

    settings = acc.Settings(seed=0, legal=0, illegal=0, edges=1)
    edges = [p for p in acc.corpus(SPEC, settings) if p.kind == "edge"]
    assert {p.operator for p in edges} == set(SPEC.operators)
    assert len({p.id for p in edges}) == len(edges)
    for p in edges[:: max(1, len(edges) // 400)]:  # a spread sample: validating all costs seconds
        assert validate(p.desc, p.level, SPEC) == [], p.id
        assert f"-{p.level}-edge-{p.rule}-" in p.id
