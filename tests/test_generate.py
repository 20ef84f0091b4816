"""The seeded generators: legal descs are legal and varied, illegal descs break exactly their
labelled rule, every breakable rule is reached, and the sequence is the same in every process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SPEC

from dmlconform.generation.choices import DEFAULT_MAX_ELEMENTS
from dmlconform.generation.illegal import breakable_rules, illegal_descs, unbreakable_rules
from dmlconform.generation.legal import legal_descs
from dmlconform.generation.reductions import (
    long_reduction_desc,
    reduction_axes,
    reduction_descs,
    reduction_size,
)
from dmlconform.specification.desc import TensorDesc, minimum_implied_size_in_bytes, parse_desc
from dmlconform.specification.rules import KINDS, ActivationKind, RuleKind, TensorKind
from dmlconform.specification.structure_builder import model_for, operators_and_levels
from dmlconform.specification.validate import active_rules, validate

ALL = operators_and_levels(SPEC)
AVAILABLE = [(o, lv) for o, lv in ALL if model_for(o, lv, SPEC).available]
REPO = Path(__file__).resolve().parent.parent


#: Where a kind's breaker is written: the three methods of ``RuleKind``, and the per-tensor and
#: per-activation hooks that the tensor and activation families' ``break_desc`` calls.
BREAKER_METHODS = ("why_unbreakable", "break_plan", "break_desc", "break_tensor", "break_activation")


def test_every_rule_kind_defines_its_breaker() -> None:
    """RuleKind's defaults break nothing (any base, unchanged), so a kind that inherits them
    all has no breaker: its class body must define one of the methods (``available`` only says
    when it is unbreakable: a base at a level below the operator's breaks it)."""
    families = {RuleKind, TensorKind, ActivationKind}
    assert all(any(m in vars(f) for f in families) for m in BREAKER_METHODS)
    missing = [k.name for k in KINDS.values() if not set(BREAKER_METHODS) & set(vars(type(k)))]
    assert not missing, f"rule kinds without a breaker: {missing}"


@pytest.mark.parametrize(("operator", "level"), AVAILABLE)
def test_legal_descs_validate_clean_and_round_trip(operator: str, level: str) -> None:
    for desc in legal_descs(operator, level, count=25, spec=SPEC):
        assert validate(desc, level) == [], desc.to_dict()
        assert parse_desc(desc.to_dict()) == desc
        assert parse_desc(json.loads(json.dumps(desc.to_dict()))) == desc


@pytest.mark.parametrize(("operator", "level"), ALL)
def test_illegal_descs_break_exactly_their_rule_and_cover_every_breakable_rule(
    operator: str, level: str
) -> None:
    breakable = breakable_rules(operator, level, SPEC)
    unbreakable = unbreakable_rules(operator, level, SPEC)
    active = {r.id for r, _ in active_rules(SPEC, operator, level)}
    assert set(breakable) | set(unbreakable) == active
    assert not set(breakable) & set(unbreakable)
    assert all(unbreakable.values())
    labels = set()
    for desc, rule in illegal_descs(operator, level, count=2 * len(breakable), spec=SPEC):
        assert {v.rule for v in validate(desc, level)} == {rule}, (rule, desc.to_dict())
        assert parse_desc(desc.to_dict()) == desc
        labels.add(rule)
    assert labels == set(breakable)


def test_legal_descs_yield_nothing_below_introduction() -> None:
    assert list(legal_descs("BATCH_NORMALIZATION_TRAINING", "4_0", count=5, spec=SPEC)) == []


@pytest.mark.parametrize(
    ("operator", "level", "rule", "breakable"),
    [
        ("MEAN_VARIANCE_NORMALIZATION1", "2_0", "available", True),
        ("BATCH_NORMALIZATION_TRAINING", "1_0", "available", True),
        ("BATCH_NORMALIZATION_TRAINING", "1_0", "required-members", False),
        ("MEAN_VARIANCE_NORMALIZATION1", "2_1", "available", False),
        ("MEAN_VARIANCE_NORMALIZATION1", "2_1", "same-dimension-count", False),
        ("MEAN_VARIANCE_NORMALIZATION1", "3_0", "same-dimension-count", False),
        ("MEAN_VARIANCE_NORMALIZATION1", "3_1", "same-dimension-count", True),
        ("MEAN_VARIANCE_NORMALIZATION1", "3_0", "supported-dimension-count", True),
        ("MEAN_VARIANCE_NORMALIZATION1", "3_1", "supported-dimension-count", False),
        ("BATCH_NORMALIZATION_TRAINING", "4_1", "supported-dimension-count", False),
        ("MEAN_VARIANCE_NORMALIZATION", "6_4", "supported-dimension-count", True),
        ("MEAN_VARIANCE_NORMALIZATION", "5_0", "activation-available", True),
        ("MEAN_VARIANCE_NORMALIZATION", "5_1", "activation-available", False),
        ("MEAN_VARIANCE_NORMALIZATION1", "3_0", "scale-broadcast-channel-fixed", True),
        ("MEAN_VARIANCE_NORMALIZATION1", "4_0", "scale-broadcast", True),
        ("BATCH_NORMALIZATION_TRAINING", "4_1", "scale-broadcast", False),
        ("BATCH_NORMALIZATION_TRAINING", "4_1", "statistics-sizes", True),
        ("MEAN_VARIANCE_NORMALIZATION", "5_1", "scale-bias-paired", True),
    ],
)
def test_known_breakability(operator: str, level: str, rule: str, breakable: bool) -> None:
    assert (rule in breakable_rules(operator, level, SPEC)) is breakable
    assert (rule in unbreakable_rules(operator, level, SPEC)) is not breakable


_SNIPPET = """
import json, sys
from dmlconform.generation.illegal import illegal_descs
from dmlconform.generation.legal import legal_descs
from dmlconform.specification.spec import load_spec
spec = load_spec()
out = [d.to_dict() for d in legal_descs("MEAN_VARIANCE_NORMALIZATION1", "6_4", seed=7, count=15, spec=spec)]
out += [[d.to_dict(), r] for d, r in illegal_descs("BATCH_NORMALIZATION_TRAINING", "5_0", seed=3, count=15, spec=spec)]
print(json.dumps(out, sort_keys=True))
"""


def test_seeded_driver_is_deterministic_across_processes() -> None:
    here = [
        d.to_dict() for d in legal_descs("MEAN_VARIANCE_NORMALIZATION1", "6_4", seed=7, count=15, spec=SPEC)
    ]
    here += [
        [d.to_dict(), r]
        for d, r in illegal_descs("BATCH_NORMALIZATION_TRAINING", "5_0", seed=3, count=15, spec=SPEC)
    ]
    env = {"PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", _SNIPPET], capture_output=True, text=True, env=env, cwd=REPO, check=True
    )
    assert json.loads(out.stdout) == json.loads(json.dumps(here, sort_keys=True))


def test_different_seeds_give_different_sequences() -> None:
    a = [d.to_dict() for d in legal_descs("MEAN_VARIANCE_NORMALIZATION", "3_0", seed=0, count=5, spec=SPEC)]
    b = [d.to_dict() for d in legal_descs("MEAN_VARIANCE_NORMALIZATION", "3_0", seed=1, count=5, spec=SPEC)]
    assert a != b


def _inp(desc) -> TensorDesc:
    return desc.members["InputTensor"]


def test_small_counts_cycle_through_classes() -> None:
    descs = list(legal_descs("MEAN_VARIANCE_NORMALIZATION1", "6_4", count=40, spec=SPEC))
    assert {_inp(d).data_type for d in descs} == {"FLOAT32", "FLOAT16"}
    assert {_inp(d).rank for d in descs} == set(range(1, 9))
    presence = {tuple(d.members.get(n) is not None for n in ("ScaleTensor", "BiasTensor")) for d in descs}
    assert len(presence) == 4  # independent from 5_2
    acts = {
        d.members["FusedActivation"].type
        for d in legal_descs("MEAN_VARIANCE_NORMALIZATION1", "6_4", count=60, spec=SPEC)
        if d.members.get("FusedActivation")
    }
    assert acts == set(SPEC.activations)


def test_paired_presence_below_5_2() -> None:
    for d in legal_descs("MEAN_VARIANCE_NORMALIZATION", "5_1", count=40, spec=SPEC):
        assert (d.members.get("ScaleTensor") is None) == (d.members.get("BiasTensor") is None)


def test_activations_respect_levels_and_parameter_ranges() -> None:
    def steepness(level: str) -> list[float]:
        out = []
        for d in legal_descs("BATCH_NORMALIZATION_TRAINING", level, count=300, spec=SPEC):
            a = d.members.get("FusedActivation")
            if a is not None and a.type == "ACTIVATION_SOFTPLUS":
                out.append(a.param_dict.get("Steepness", 1.0))
            if a is not None:
                assert SPEC.level(SPEC.activations[a.type].since).index <= SPEC.level(level).index
                for p in SPEC.activations[a.type].parameters:
                    assert p.default is not None or p.name in a.param_dict
        return out

    assert min(steepness("6_3")) >= 1.0
    assert min(steepness("6_4")) < 1.0


def test_attribute_classes() -> None:
    descs = list(legal_descs("MEAN_VARIANCE_NORMALIZATION1", "6_4", count=300, spec=SPEC))
    eps = {d.members["Epsilon"] for d in descs if "Epsilon" in d.members}
    assert {0.0, 1e-12, 1e-5, 1e-3, 1.0, 100.0} <= eps
    assert any("Epsilon" not in d.members for d in descs)
    assert {d.members["NormalizeVariance"] for d in descs} == {False, True}
    axes = [(d.members["Axes"], _inp(d).rank) for d in descs]
    assert any(list(a) != sorted(a) for a, _ in axes)
    assert any(sorted(a) != list(range(min(a), max(a) + 1)) for a, _ in axes)
    assert any(len(a) == r for a, r in axes) and any(len(a) == 1 for a, _ in axes)
    assert any("AxisCount" in d.members for d in descs) and any("AxisCount" not in d.members for d in descs)


def test_broadcast_patterns() -> None:
    # before 4_0 MVN1's channel is fixed: dim 0 of {C,H,W}, dim 1 of NCHW and NCDHW; from 4_0 it
    # may broadcast. 6-D to 8-D tensors have no channel.
    channel = {3: 0, 4: 1, 5: 1}
    seen_wide = False
    for d in legal_descs("MEAN_VARIANCE_NORMALIZATION1", "3_1", count=200, spec=SPEC):
        s = d.members.get("ScaleTensor")
        if s is not None and s.rank in channel:
            c = channel[s.rank]
            assert s.sizes[c] == _inp(d).sizes[c]
        if s is not None and s.rank >= 6 and s.sizes[1] == 1 and _inp(d).sizes[1] > 1:
            seen_wide = True
    assert seen_wide, "a 6-D to 8-D Scale broadcasts its second dimension somewhere"
    assert any(
        d.members.get("ScaleTensor") is not None and d.members["ScaleTensor"].sizes[-3] != _inp(d).sizes[-3]
        for d in legal_descs("MEAN_VARIANCE_NORMALIZATION1", "4_0", count=100, spec=SPEC)
        if _inp(d).rank >= 3
    )
    # batch norm: the Scale shape decides the reduction; many patterns appear
    patterns = {
        reduction_axes(d, SPEC)
        for d in legal_descs("BATCH_NORMALIZATION_TRAINING", "6_4", count=200, spec=SPEC)
    }
    assert len(patterns) > 20
    assert () in patterns  # Scale as large as Input: nothing reduced


def test_layouts() -> None:
    kinds = set()
    for d in legal_descs("BATCH_NORMALIZATION_TRAINING", "5_0", count=80, spec=SPEC):
        for name, t in d.tensors().items():
            if t.strides is None:
                kinds.add("implicit")
            elif 0 in t.strides:
                kinds.add("zero-stride")
                assert name in {m.name for m in SPEC.operator(d.operator).input_members}
            elif list(t.strides) == sorted(t.strides, reverse=True):
                kinds.add("row-major")
            else:
                kinds.add("permuted")
            if t.total_tensor_size_in_bytes is not None:
                need = minimum_implied_size_in_bytes(
                    t.sizes, t.effective_strides, SPEC.data_types[t.data_type].size
                )
                assert t.total_tensor_size_in_bytes >= need
                kinds.add("total")
            if t.dimension_count is not None:
                kinds.add("dimcount")
            kinds.add(f"align{t.guaranteed_base_offset_alignment}")
    assert {
        "implicit",
        "zero-stride",
        "row-major",
        "permuted",
        "total",
        "dimcount",
        "align0",
        "align16",
    } <= kinds


def test_element_counts_small_unless_asked() -> None:
    for d in legal_descs("BATCH_NORMALIZATION_TRAINING", "6_4", count=100, spec=SPEC):
        assert all(t.element_count <= DEFAULT_MAX_ELEMENTS for t in d.tensors().values())
    big = list(
        legal_descs(
            "BATCH_NORMALIZATION_TRAINING", "6_4", count=30, max_size=64, max_elements=10**6, spec=SPEC
        )
    )
    assert max(_inp(d).element_count for d in big) > DEFAULT_MAX_ELEMENTS


def test_dtype_knob() -> None:
    for d in legal_descs("MEAN_VARIANCE_NORMALIZATION", "6_4", count=20, dtype="FLOAT16", spec=SPEC):
        assert {t.data_type for t in d.tensors().values()} == {"FLOAT16"}


@pytest.mark.parametrize("operator", sorted(SPEC.operators))
@pytest.mark.parametrize("n", [1, 2])
def test_short_reduction_descs(operator: str, n: int) -> None:
    for d in reduction_descs(operator, "6_4", n, count=5, spec=SPEC):
        assert validate(d, "6_4") == []
        assert reduction_size(d, SPEC) == n


@pytest.mark.parametrize("operator", sorted(SPEC.operators))
def test_long_reduction_desc(operator: str) -> None:
    d = long_reduction_desc(operator, "6_4", "FLOAT32", n=100_000, spec=SPEC)
    assert validate(d, "6_4") == []
    assert reduction_size(d, SPEC) == 100_000
    assert _inp(d).element_count <= 8 * 100_000
