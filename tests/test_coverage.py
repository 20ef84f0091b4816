"""Spec-clause coverage: a rule counts as exercised only by cases that ran and that depend on it
(a legal desc at the rule's edge, an illegal desc breaking it), never by every case alike."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import SMALL, SPEC, dmlconform, mvn1_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmlconform.generation.legal import legal_descs
from dmlconform.runner.checks import exercised_rules
from dmlconform.runner.results import coverage
from dmlconform.specification.desc import parse_desc
from dmlconform.specification.rules import KINDS
from dmlconform.specification.validate import validate

MVN1 = "MEAN_VARIANCE_NORMALIZATION1"


def mvn1(**changes: object) -> dict:
    """A legal MVN1 desc (packed FLOAT32 {2, 3, 4, 5}, axes {1, 2}) with ``changes`` merged in."""
    return mvn1_json(axes=[1, 2], Epsilon=1e-5, **changes)


def rules_of(raw: dict, level: str = "6_4") -> set[str]:
    desc = parse_desc(raw)
    assert validate(desc, level) == [], "the test desc must be legal"
    return set(exercised_rules(SPEC, desc, SPEC.level(level)))


def test_a_plain_desc_exercises_no_presence_or_equality_rule() -> None:
    got = rules_of(mvn1())
    assert not {"required-members", "same-data-type", "output-sizes", "axes-unique", "tensor-alignment"} & got
    assert not {"scale-broadcast", "tensor-total-size", "axes-in-range", "available"} & got


def test_broadcast_is_exercised_only_when_used() -> None:
    full = {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5]}
    bcast = {"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1]}
    assert "scale-broadcast" not in rules_of(mvn1(ScaleTensor=full, BiasTensor=full))
    assert "scale-broadcast" in rules_of(mvn1(ScaleTensor=bcast, BiasTensor=full))
    assert "bias-broadcast" not in rules_of(mvn1(ScaleTensor=bcast, BiasTensor=full))


def test_edges_of_ordered_limits() -> None:
    # the last axis of the input
    assert "axes-in-range" in rules_of(mvn1(Axes=[2, 3]))
    # an explicit TotalTensorSizeInBytes exactly at the minimum, not above it, not omitted
    exact = {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5], "TotalTensorSizeInBytes": 480}
    slack = {**exact, "TotalTensorSizeInBytes": 484}
    assert "tensor-total-size" in rules_of(mvn1(InputTensor=exact))
    assert "tensor-total-size" not in rules_of(mvn1(InputTensor=slack))
    # an alignment at its least legal value (16, DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT), not above it
    low = {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5], "GuaranteedBaseOffsetAlignment": 16}
    high = {**low, "GuaranteedBaseOffsetAlignment": 32}
    assert "tensor-alignment" in rules_of(mvn1(InputTensor=low))
    assert "tensor-alignment" not in rules_of(mvn1(InputTensor=high))
    # a 1-D tensor is at the low end of the dimension-count range
    one = {"DataType": "FLOAT32", "Sizes": [120]}
    assert "tensor-dimension-count-range" in rules_of(mvn1(InputTensor=one, OutputTensor=one, Axes=[0]))
    assert "tensor-dimension-count-range" not in rules_of(mvn1())
    # the level the operator arrives at
    intro = SPEC.operator(MVN1).introduced
    assert "available" in rules_of(mvn1(), intro)
    # SOFTPLUS Steepness at its minimum (1.0) while the rule is in force, not above it
    at_min = {"Type": "ACTIVATION_SOFTPLUS", "Steepness": 1.0}
    assert "activation-softplus-steepness" in rules_of(mvn1(FusedActivation=at_min), "5_1")
    above = {"Type": "ACTIVATION_SOFTPLUS", "Steepness": 2.0}
    assert "activation-softplus-steepness" not in rules_of(mvn1(FusedActivation=above), "5_1")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), op=st.sampled_from(sorted(SPEC.operators)))
def test_only_kinds_with_an_edge_are_exercised_by_legal_descs(seed: int, op: str) -> None:
    (desc,) = legal_descs(op, "6_4", seed=seed, count=1, spec=SPEC)
    for rid in exercised_rules(SPEC, desc, SPEC.level("6_4")):
        rule = next(r for r in SPEC.rules_for(SPEC.operator(op)) if r.id == rid)
        assert KINDS[rule.kind].has_edge, rid


def _record(outcome: str, rules: list[str], expected: str | None = None) -> dict:
    return {"operator": MVN1, "outcome": outcome, "rules": rules, "expected": expected}


def test_coverage_counts_only_cases_that_ran() -> None:
    records = [
        _record("skipped", ["scale-broadcast"]),
        _record("skipped", ["axes-unique"], expected="illegal"),
        _record("passed", ["axes-in-range"]),
        _record("failed", ["axes-in-range"]),
        _record("passed", ["axes-unique"], expected="illegal"),
    ]
    cov = coverage(SPEC, [MVN1], records)[MVN1]
    assert cov["scale-broadcast"] == {"legal": 0, "illegal": 0, "failed": 0}
    assert cov["axes-in-range"] == {"legal": 2, "illegal": 0, "failed": 1}
    # a rule no legal desc can sit at the edge of has no legal count at all
    assert cov["axes-unique"] == {"legal": None, "illegal": 1, "failed": 0}
    assert cov["required-members"]["legal"] is None


def test_mvn1_only_backend_exercises_nothing_of_the_other_operators(tmp_path: Path) -> None:
    args = [*SMALL, "--feature-level", "6_4", "--operators", MVN1, "BATCH_NORMALIZATION"]
    proc = dmlconform("run", "--backend", "partial_backends:Mvn1Only", *args, "--report", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    bn = results["coverage"]["BATCH_NORMALIZATION"]
    assert all(not e["legal"] and not e["illegal"] for e in bn.values()), bn
    mvn = results["coverage"][MVN1]
    assert mvn["axes-in-range"]["legal"] > 0 and mvn["axes-unique"]["illegal"] > 0
    # not every rule is exercised by every case that ran
    ran = sum(1 for c in results["cases"] if c["operator"] == MVN1 and c["outcome"] == "passed")
    assert all((e["legal"] or 0) < ran for e in mvn.values())
    md = (tmp_path / "out" / "summary.md").read_text()
    assert f"BATCH_NORMALIZATION 0/{len(bn)} rules" in md
    html = (tmp_path / "out" / "index.html").read_text()
    assert '<code>required-members</code></td><td class="n">-</td>' in html
