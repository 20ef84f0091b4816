"""spec-diff: every adjacent pair of feature levels against what the docs say changed, mirrors,
the JSON shape, witnesses confirmed by the validator, and the 2021-vs-current MVN1 spec diff."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import jsonschema
import pytest

from dmlconform.cli import main
from dmlconform.specdiff.changes import Change
from dmlconform.specdiff.compare import level_diff, spec_diff
from dmlconform.specdiff.json_schema import JSON_SCHEMA
from dmlconform.specdiff.witness import add_witnesses
from dmlconform.specification.spec import load_spec
from dmlconform.specification.validate import validate

ROOT = Path(__file__).resolve().parent.parent
SPEC_2021 = ROOT / "examples" / "spec-2021"

MVN = "MEAN_VARIANCE_NORMALIZATION"
MVN1 = "MEAN_VARIANCE_NORMALIZATION1"
BNT = "BATCH_NORMALIZATION_TRAINING"
MVN1_TENSORS = ("InputTensor", "ScaleTensor", "BiasTensor", "OutputTensor")
BN = "BATCH_NORMALIZATION"
BNG = "BATCH_NORMALIZATION_GRAD"
BNTG = "BATCH_NORMALIZATION_TRAINING_GRAD"
MVN2 = "MEAN_VARIANCE_NORMALIZATION2"
ALL = (BNT, MVN, MVN1)
LRN, LRNG, LP = "LOCAL_RESPONSE_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION_GRAD", "LP_NORMALIZATION"
BN_TENSORS = ("InputTensor", "MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor", "OutputTensor")

# What changed at each level, per operator, as (kind, subject), written from directml-facts.md
# ("Feature levels" and "Fused activations" tables) and the seeds' "DML_FEATURE_LEVEL_X and
# above" rows and level-bound sentences. Levels not listed changed nothing for these operators
# (5_0, 6_0, 6_1, 6_2). BATCH_NORMALIZATION (1_0), its GRAD (3_1), TRAINING_GRAD (4_1) and
# MEAN_VARIANCE_NORMALIZATION2 (6_3) from more-operators.md.
EXPECTED: dict[str, dict[str, set[tuple[str, str]]]] = {
    # 2_0: SHRINK activation (facts); MVN1 and BN training do not exist yet.
    "2_0": {op: {("activation-added", "ACTIVATION_SHRINK")} for op in (MVN, BN)},
    # 2_1: MVN1 introduced (seed 002/003 Availability).
    "2_1": {MVN1: {("operator-added", MVN1)}},
    # 3_0: max dimension count 5 -> 8; CELU activation (facts).
    "3_0": {
        **{
            op: {("tensor-limit", "max DimensionCount"), ("activation-added", "ACTIVATION_CELU")}
            for op in (MVN, MVN1, BN)
        },
        # LRN and LP (1_0, no fused activation, family-facts.md): only the tensor limit.
        **{op: {("tensor-limit", "max DimensionCount")} for op in (LRN, LP)},
    },
    # 3_1: MVN1 and BN accept 1 to 8 dims (seed 002, BN-doc "DML_FEATURE_LEVEL_3_1 and above");
    # BATCH_NORMALIZATION_GRAD introduced (BNG-doc Availability).
    "3_1": {
        MVN1: {("support-dimension-counts", t) for t in MVN1_TENSORS},
        BN: {("support-dimension-counts", t) for t in BN_TENSORS},
        BNG: {("operator-added", BNG)},
        # family-facts.md: LP 4 -> 1 to 8 dims (LP-doc, FLH-doc 3_1); LRN_GRAD introduced.
        LP: {("support-dimension-counts", t) for t in ("InputTensor", "OutputTensor")},
        LRNG: {("operator-added", LRNG)},
    },
    # 4_0: MVN1 Scale/Bias may broadcast any dimension (seed 001/002 ScaleTensor/BiasTensor).
    "4_0": {
        MVN1: {
            ("rule-off", "scale-broadcast-channel-fixed"),
            ("rule-off", "bias-broadcast-channel-fixed"),
            ("rule-on", "scale-broadcast"),
            ("rule-on", "bias-broadcast"),
        },
        # BN-doc Spatial: deprecated in 4_0, no effect.
        BN: {
            ("rule-off", "mean-broadcast-spatial"),
            ("rule-off", "variance-broadcast-spatial"),
            ("rule-on", "mean-broadcast"),
            ("rule-on", "variance-broadcast"),
        },
    },
    # 4_1: BATCH_NORMALIZATION_TRAINING (seed 004) and its GRAD (BNTG-doc) introduced.
    "4_1": {BNT: {("operator-added", BNT)}, BNTG: {("operator-added", BNTG)}},
    # 5_1: GELU activation (facts).
    "5_1": {op: {("activation-added", "ACTIVATION_GELU")} for op in (*ALL, BN)},
    # 6_3: MEAN_VARIANCE_NORMALIZATION2 introduced (MVN2-doc Availability).
    "6_3": {MVN2: {("operator-added", MVN2)}},
    # 5_2: MVN/MVN1 Scale and Bias independently optional (seed 000, seed 002).
    "5_2": {op: {("rule-off", "scale-bias-paired")} for op in (MVN, MVN1)},
    # 6_4: SOFTPLUS allows Steepness < 1 (facts).
    "6_4": {op: {("rule-off", "activation-softplus-steepness")} for op in (*ALL, BN, MVN2)},
}


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "spec")


def _adjacent(spec):
    names = [lv.name for lv in spec.levels]
    return list(itertools.pairwise(names))


def _got(result) -> dict[str, set[tuple[str, str]]]:
    return {op: {(c.kind, c.subject) for c in cs} for op, cs in result.operators.items() if cs}


def _row(c: Change) -> tuple:
    return (
        c.level,
        c.kind,
        c.subject,
        json.dumps(c.before, sort_keys=True),
        json.dumps(c.after, sort_keys=True),
        c.rule,
        c.source,
    )


def test_every_adjacent_pair_matches_the_docs(spec):
    for lo, hi in _adjacent(spec):
        result = level_diff(spec, lo, hi)
        assert _got(result) == EXPECTED.get(hi, {}), f"{lo} -> {hi}"
        assert all(c.level == hi for cs in result.operators.values() for c in cs)
        assert all(c.source for cs in result.operators.values() for c in cs), "every change cites a source"


def test_changes_carry_the_documented_values(spec):
    by = {
        (op, c.kind, c.subject): c for op, cs in level_diff(spec, "1_0", "6_4").operators.items() for c in cs
    }
    for t in MVN1_TENSORS:
        c = by[(MVN1, "support-dimension-counts", t)]
        assert (c.level, c.before, c.after, c.rule) == (
            "3_1",
            [4],
            list(range(1, 9)),
            "supported-dimension-count",
        )
    limit = by[(MVN1, "tensor-limit", "max DimensionCount")]
    assert (limit.level, limit.before, limit.after) == ("3_0", 5, 8)
    paired = by[(MVN1, "rule-off", "scale-bias-paired")]
    assert paired.level == "5_2" and paired.after is None
    assert paired.before == {"kind": "paired_presence", "members": ["ScaleTensor", "BiasTensor"]}
    assert "002_8c49f7449c810d75.txt" in paired.source
    fixed = by[(MVN1, "rule-off", "scale-broadcast-channel-fixed")]
    assert fixed.level == "4_0" and {"rank": 5, "dims": [1]} in fixed.before["fixed_dims_by_rank"]
    assert by[(BNT, "operator-added", BNT)].level == "4_1"
    assert by[(MVN1, "operator-added", MVN1)].level == "2_1"
    assert by[(MVN, "activation-added", "ACTIVATION_SHRINK")].level == "2_0"
    assert by[(MVN1, "activation-added", "ACTIVATION_GELU")].level == "5_1"


def test_a_range_is_the_sum_of_its_steps(spec):
    whole = level_diff(spec, "1_0", "6_4")
    for op in ALL:
        steps = [c for lo, hi in _adjacent(spec) for c in level_diff(spec, lo, hi).operators[op]]
        assert [_row(c) for c in whole.operators[op]] == [_row(c) for c in steps]


@pytest.mark.parametrize("a,b", [("1_0", "6_4"), ("4_0", "5_2"), ("2_1", "3_1"), ("6_0", "6_1")])
def test_a_reversed_range_is_the_exact_mirror(spec, a, b):
    up, down = level_diff(spec, a, b), level_diff(spec, b, a)
    assert (down.from_, down.to) == (spec.level(b).name, spec.level(a).name)
    assert set(up.operators) == set(down.operators)
    for op in up.operators:
        assert sorted(_row(c.mirrored()) for c in up.operators[op]) == sorted(
            _row(c) for c in down.operators[op]
        )
    kinds = {c.kind for cs in down.operators.values() for c in cs}
    assert not kinds & {"operator-added", "activation-added"}, "going down nothing becomes available"


def test_reversed_kinds_read_as_removals(spec):
    down = level_diff(spec, "5_2", "2_1")
    got = {(op, c.level, c.kind, c.subject) for op, cs in down.operators.items() for c in cs}
    assert (MVN1, "5_2", "rule-on", "scale-bias-paired") in got
    assert (BNT, "4_1", "operator-removed", BNT) in got
    assert (MVN1, "5_1", "activation-removed", "ACTIVATION_GELU") in got
    dims = next(c for c in down.operators[MVN1] if c.kind == "support-dimension-counts")
    assert (dims.level, dims.before, dims.after) == ("3_1", list(range(1, 9)), [4])
    # downwards, the listing walks from the higher level to the lower one
    levels = [spec.level(c.level).index for c in down.operators[MVN1]]
    assert levels == sorted(levels, reverse=True)


def _confirm(spec_of, change: Change) -> None:
    """The witness is legal on its legal side and rejected on the other by the change's rule."""
    w = change.witness
    assert w is not None and w.desc is not None, change
    legal, illegal = change.sides if w.legal_at == change.sides[0].label else change.sides[::-1]
    assert (legal.label, illegal.label) == (w.legal_at, w.illegal_at)
    assert validate(w.desc, legal.level, legal.spec) == []
    rules = {v.rule for v in validate(w.desc, illegal.level, illegal.spec)}
    assert rules, change
    if change.rule:
        assert change.rule in rules, (change, rules)


def test_witnesses_are_legal_at_one_level_and_illegal_at_the_other(spec):
    result = level_diff(spec, "1_0", "6_4")
    add_witnesses(result)
    missing = set()
    for op, changes in result.operators.items():
        for c in changes:
            if c.witness.desc is None:
                assert c.witness.reason
                missing.add((op, c.level, c.kind, c.subject))
            else:
                _confirm(spec, c)
    # No single desc shows these: the support tables stop below either limit, and the any-dim
    # broadcast rule is implied by the channel-fixed one it replaces.
    assert missing == {
        (MVN, "3_0", "tensor-limit", "max DimensionCount"),
        (MVN1, "3_0", "tensor-limit", "max DimensionCount"),
        (LRN, "3_0", "tensor-limit", "max DimensionCount"),
        (LP, "3_0", "tensor-limit", "max DimensionCount"),
        (MVN1, "4_0", "rule-on", "scale-broadcast"),
        (MVN1, "4_0", "rule-on", "bias-broadcast"),
        (BN, "3_0", "tensor-limit", "max DimensionCount"),
        (BN, "4_0", "rule-on", "mean-broadcast"),
        (BN, "4_0", "rule-on", "variance-broadcast"),
    }


def test_reversed_witnesses_are_confirmed_too(spec):
    result = level_diff(spec, "5_2", "4_0")
    add_witnesses(result)
    paired = next(c for c in result.operators[MVN1] if c.subject == "scale-bias-paired")
    assert paired.kind == "rule-on"
    _confirm(spec, paired)
    members = paired.witness.desc.members  # a generated desc may omit a null member
    assert members.get("ScaleTensor") is None or members.get("BiasTensor") is None


def test_spec_2021_against_current(spec):
    old = load_spec(SPEC_2021)
    result = spec_diff(old, spec, label_a="2021", label_b="current")
    got = {(c.level, c.kind, c.subject) for c in result.operators[MVN1]}
    want = {
        # 4D only (2021) vs 1..8 from 3_1
        *{("3_1..6_4", "support-dimension-counts", t) for t in MVN1_TENSORS},
        # Scale/Bias paired at every level (2021) vs until 5_2
        ("5_2..6_4", "rule-off", "scale-bias-paired"),
        # any dimension may broadcast (2021) vs channel fixed below 4_0
        ("2_1..3_1", "rule-off", "scale-broadcast"),
        ("2_1..3_1", "rule-off", "bias-broadcast"),
        ("2_1..3_1", "rule-on", "scale-broadcast-channel-fixed"),
        ("2_1..3_1", "rule-on", "bias-broadcast-channel-fixed"),
        # the 2021 constraint list has no DimensionCount sentence
        ("2_1..6_4", "rule-on", "same-dimension-count"),
        # Axes remark {0,2,3} vs {2,3}, and the other doc notes
        ("*", "doc-note-changed", "axes-cross-channel-equivalent"),
        ("*", "doc-note-changed", "scale-bias-required-together"),
        ("*", "doc-note-changed", "support-2021"),
        ("*", "doc-note-changed", "output-sizes"),
        ("*", "doc-note-added", "channel-fixed-non-4d"),
    }
    assert got == want
    assert not result.operators[MVN] and not result.operators[BNT], "the other operators are copies"
    axes = next(c for c in result.operators[MVN1] if c.subject == "axes-cross-channel-equivalent")
    assert (axes.before["choice"], axes.after["choice"]) == ("{ 0, 2, 3 }", "{ 2, 3 }")
    paired = next(c for c in result.operators[MVN1] if c.subject == "scale-bias-paired")
    assert "003_fb088391e7819377.txt" in paired.source


def test_spec_diff_at_one_level_and_its_witnesses(spec):
    old = load_spec(SPEC_2021)
    result = spec_diff(old, spec, level="5_2", operators=["DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1"])
    assert list(result.operators) == [MVN1]
    got = {(c.level, c.kind, c.subject) for c in result.operators[MVN1] if c.level != "*"}
    assert got == {
        *{("5_2", "support-dimension-counts", t) for t in MVN1_TENSORS},
        ("5_2", "rule-off", "scale-bias-paired"),
        ("5_2", "rule-on", "same-dimension-count"),
    }
    add_witnesses(result)
    for c in result.operators[MVN1]:
        if c.kind == "rule-on":  # all 4D in 2021: nothing can break same-dimension-count there
            assert c.witness.desc is None
        elif c.level != "*":
            _confirm(spec, c)
    paired = next(c for c in result.operators[MVN1] if c.subject == "scale-bias-paired")
    assert paired.witness.legal_at.endswith("at 5_2") and "spec" in paired.witness.legal_at


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["spec-diff", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_json_validates_against_the_documented_shape(capsys, spec):
    rc, out, _ = _cli(capsys, "--from", "4_0", "--to", "5_2", "--format", "json", "--witness")
    assert rc == 0
    data = json.loads(out)
    jsonschema.validate(data, JSON_SCHEMA)
    assert (data["from"], data["to"], data["mode"]) == ("4_0", "5_2", "levels")
    changes = data["operators"][MVN1]["changes"]
    assert {(c["level"], c["kind"], c["subject"]) for c in changes} == {
        ("5_1", "activation-added", "ACTIVATION_GELU"),
        ("5_2", "rule-off", "scale-bias-paired"),
    }
    for c in changes:
        assert set(c) == {"level", "kind", "subject", "before", "after", "rule", "source", "witness"}
        assert c["witness"]["found"] is True
        assert c["witness"]["legal_at"] == c["level"]
        assert c["witness"]["across_range"] is True  # legal at 5_2 and illegal at 4_0 too
    rc, out, _ = _cli(
        capsys, "--from-spec", str(SPEC_2021), "--to-spec", str(ROOT / "spec"), "--format", "json"
    )
    data = json.loads(out)
    jsonschema.validate(data, JSON_SCHEMA)
    assert data["mode"] == "specs" and data["level"] is None


def test_cli_text_and_markdown(capsys):
    rc, out, _ = _cli(
        capsys, "MEAN_VARIANCE_NORMALIZATION1", "--from", "5.1", "--to", "DML_FEATURE_LEVEL_5_2"
    )
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "spec-diff DML_FEATURE_LEVEL_5_1 -> DML_FEATURE_LEVEL_5_2"
    assert MVN1 in lines and "  at 5_2:" in lines
    line = next(x for x in lines if "scale-bias-paired" in x)
    assert (
        line.split()[0] == "rule-off"
        and "[scale-bias-paired]" in line
        and "seed 002_8c49f7449c810d75.txt" in line
    )
    rc, out, _ = _cli(capsys, "--from", "3_0", "--to", "3_1", "--format", "markdown", "--witness")
    assert rc == 0 and f"## {MVN1}" in out and "| level | kind | change | rule | source |" in out
    assert "```yaml" in out and "Sizes: [" in out


def test_cli_exit_codes_and_errors(capsys):
    assert _cli(capsys, "--from", "6_0", "--to", "6_1", "--exit-code")[0] == 0
    assert _cli(capsys, "--from", "4_0", "--to", "5_2", "--exit-code")[0] == 1
    rc, out, err = _cli(capsys, "--from", "4_0", "--to", "9_9")
    assert rc == 2 and not out and len(err.strip().splitlines()) == 1 and "9_9" in err
    rc, out, err = _cli(capsys, "NOT_AN_OPERATOR", "--from", "4_0", "--to", "5_2")
    assert rc == 2 and not out and len(err.strip().splitlines()) == 1 and "NOT_AN_OPERATOR" in err
    rc, _, err = _cli(capsys, "--from", "4_0")
    assert rc == 2 and len(err.strip().splitlines()) == 1
    rc, _, err = _cli(capsys, "--from-spec", str(SPEC_2021), "--from", "4_0", "--to", "5_2")
    assert rc == 2 and len(err.strip().splitlines()) == 1


def test_no_change_step_lists_every_operator_without_changes(capsys):
    rc, out, _ = _cli(capsys, "--from", "6_0", "--to", "6_1")
    assert rc == 0
    for op in ALL:
        assert f"{op}\n  no changes" in out
    assert out.rstrip().endswith("0 change(s) in 0 operator(s)")


def test_operators_missing_at_one_end_are_listed(spec):
    result = level_diff(spec, "2_0", "4_1")
    assert set(result.operators) == set(spec.operators)  # every operator, MVN2 (6_3) without changes
    assert [(c.kind, c.level) for c in result.operators[BNT]] == [("operator-added", "4_1")]
    assert ("operator-added", "2_1") in [(c.kind, c.level) for c in result.operators[MVN1]]


def test_specdiff_code_names_no_operator_member_or_activation():
    code = "\n".join(
        p.read_text(encoding="utf-8") for p in sorted((ROOT / "dmlconform" / "specdiff").glob("*.py"))
    )
    for name in (
        "MEAN_VARIANCE",
        "BATCH_NORMALIZATION",
        "ScaleTensor",
        "BiasTensor",
        "GELU",
        "SOFTPLUS",
        '"Axes"',
    ):
        assert name not in code, name
