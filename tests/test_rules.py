"""Each rule kind in dmlconform.specification.rules: what it accepts, what it rejects, the member path and message.

Verdicts come from the seed docs and directml-facts.md; each test names the sentence it relies on.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dmlconform as dc
from dmlconform.specification.lint import lint
from dmlconform.specification.rules import KINDS, ActivationKind, AxesInRange, Context, TensorKind
from dmlconform.specification.spec import SpecError

SPEC_DIR = Path(__file__).resolve().parent.parent / "spec"
N = [2, 3, 4, 5]
S = [1, 3, 1, 1]


def T(sizes: list[int], dt: str = "FLOAT32", **kw: Any) -> dict[str, Any]:
    return {"DataType": dt, "Sizes": sizes, **kw}


def desc(op: str, **over: Any) -> dc.OperatorDesc:
    bases: dict[str, dict[str, Any]] = {
        "MEAN_VARIANCE_NORMALIZATION": {
            "InputTensor": T(N),
            "OutputTensor": T(N),
            "CrossChannel": False,
            "NormalizeVariance": True,
        },
        "MEAN_VARIANCE_NORMALIZATION1": {
            "InputTensor": T(N),
            "OutputTensor": T(N),
            "Axes": [2, 3],
            "NormalizeVariance": True,
        },
        "BATCH_NORMALIZATION_TRAINING": {
            "InputTensor": T(N),
            "ScaleTensor": T(S),
            "BiasTensor": T(S),
            "OutputTensor": T(N),
            "OutputMeanTensor": T(S),
            "OutputVarianceTensor": T(S),
            "Epsilon": 1e-5,
        },
    }
    body = dict(bases[op])
    for k, v in over.items():
        if v is ...:
            body.pop(k)
        else:
            body[k] = v
    return dc.parse_desc({"type": op, "desc": body})


MVN, MVN1, BNT = "MEAN_VARIANCE_NORMALIZATION", "MEAN_VARIANCE_NORMALIZATION1", "BATCH_NORMALIZATION_TRAINING"


def found(d: dc.OperatorDesc, level: str) -> list[tuple[str, str]]:
    return [(v.rule, v.member) for v in dc.validate(d, level)]


def only(d: dc.OperatorDesc, level: str) -> dc.Violation:
    violations = dc.validate(d, level)
    assert len(violations) == 1, violations
    return violations[0]


# --------------------------------------------------------------------------------------------
# The vocabulary


@pytest.mark.parametrize("rel", ["operators/batch_normalization.yaml", "common/tensor_desc.yaml"])
def test_a_spec_naming_an_unknown_kind_is_refused_by_its_schema(tmp_path: Path, rel: str) -> None:
    """The schemas leave the list of kinds to the loader, which fills it from ``KINDS``: a kind
    no class registers is refused where the spec loads and where it is linted, in one line that
    names it, the file, the line and every known kind."""
    text = (SPEC_DIR / rel).read_text(encoding="utf-8")
    kind = re.search(r"^    kind: (\w+)$", text, re.MULTILINE)
    assert kind is not None
    line = text[: kind.start()].count("\n") + 1
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_text(
        text[: kind.start(1)] + "no_such_kind" + text[kind.end(1) :], encoding="utf-8"
    )
    (tmp_path / "spec-overlay.yaml").write_text(f"base: {SPEC_DIR}\nreplace: [{rel}]\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        dc.load_spec(tmp_path)
    message = err.value.one_line()
    assert "\n" not in message and f"{rel}:{line}:" in message
    assert f"kind: 'no_such_kind' is not one of {sorted(KINDS)}" in message
    [finding] = lint(tmp_path)
    assert (finding.line, finding.message) == (line, message.split(": ", 1)[1])


def test_every_kind_is_used_by_the_spec() -> None:
    spec = dc.load_spec()
    used = {r.kind for op in spec.operators.values() for r in spec.rules_for(op)}
    assert used == set(KINDS)


def test_kind_scopes_match_where_the_rules_live() -> None:
    spec = dc.load_spec()
    for r in spec.tensor_rules:
        assert isinstance(KINDS[r.kind], TensorKind), r.id
    for r in spec.activation_rules:
        assert isinstance(KINDS[r.kind], ActivationKind), r.id
    for op in spec.operators.values():
        for r in op.rules:
            assert not isinstance(KINDS[r.kind], (TensorKind, ActivationKind)), r.id


def test_members_lists_bound_members() -> None:
    spec = dc.load_spec()
    op = spec.operator(MVN1)
    by_id = {r.id: r for r in op.rules}
    assert KINDS["broadcastable"].members(by_id["scale-broadcast"]) == ["ScaleTensor", "InputTensor"]
    assert KINDS["array_length"].members(by_id["axis-count"]) == ["Axes", "AxisCount"]
    for r in op.rules:
        for m in KINDS[r.kind].members(r):
            assert op.member(m) is not None, (r.id, m)


def test_no_family_module_imports_the_package_face() -> None:
    """The face imports every family so that KINDS is complete; a family that imported the face
    back would close a circle, and read a half-filled registry while the face is still loading."""
    face = "dmlconform.specification.rules"
    for path in (Path(dc.__file__).parent / "specification" / "rules").glob("*.py"):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0 and node.module != face, f"{path.name}: {ast.unparse(node)}"
            elif isinstance(node, ast.Import):
                assert all(a.name != face for a in node.names), f"{path.name}: {ast.unparse(node)}"


# --------------------------------------------------------------------------------------------
# Operator-level kinds


def test_available() -> None:
    # MVN1 "was introduced in DML_FEATURE_LEVEL_2_1" (seed 002); BNT in 4_1 (seed 004).
    v = only(desc(MVN1), "2_0")
    assert (v.rule, v.member) == ("available", "type")
    assert "2_1" in v.message
    assert found(desc(MVN1), "2_1") == []
    assert found(desc(BNT), "4_0") == [("available", "type")]
    assert found(desc(BNT), "4_1") == []


def test_required() -> None:
    v = only(desc(MVN1, Axes=...), "5_2")
    assert (v.rule, v.member) == ("required-members", "Axes")
    assert "missing" in v.message
    v = only(desc(MVN1, OutputTensor=None), "5_2")
    assert (v.rule, v.member) == ("required-members", "OutputTensor")
    assert "null" in v.message
    # BNT: "The epsilon value to use" - no default given (seed 004).
    assert found(desc(BNT, Epsilon=...), "4_1") == [("required-members", "Epsilon")]
    # MVN: 0.00001 recommended as default, so Epsilon may be omitted (seed 000).
    assert found(desc(MVN), "1_0") == []


def test_support_dimension_count() -> None:
    # MVN1 "DML_FEATURE_LEVEL_2_1 and above": 4; "3_1 and above": 1 to 8 (seed 002).
    d = desc(MVN1, InputTensor=T([3, 4, 5]), OutputTensor=T([3, 4, 5]), Axes=[1, 2])
    assert found(d, "3_0") == [
        ("supported-dimension-count", "InputTensor.DimensionCount"),
        ("supported-dimension-count", "OutputTensor.DimensionCount"),
    ]
    assert "3_0" in dc.validate(d, "3_0")[0].message
    assert found(d, "3_1") == []
    # DimensionCount, when given, is what counts.
    d = desc(MVN, InputTensor=T(N, DimensionCount=4), OutputTensor=T(N))
    assert found(d, "1_0") == []


def test_support_data_type() -> None:
    v = dc.validate(desc(BNT, OutputVarianceTensor=T(S, "FLOAT64")), "4_1")
    assert ("supported-data-type", "OutputVarianceTensor.DataType") in [(x.rule, x.member) for x in v]
    assert "FLOAT32, FLOAT16" in next(x.message for x in v if x.rule == "supported-data-type")


def test_same_sizes() -> None:
    v = only(desc(MVN, OutputTensor=T([2, 3, 4, 6])), "1_0")
    assert (v.rule, v.member) == ("output-sizes", "OutputTensor.Sizes")
    assert "{2, 3, 4, 6}" in v.message and "{2, 3, 4, 5}" in v.message
    # BNT statistics: "BiasTensor, OutputMeanTensor, OutputVarianceTensor, and ScaleTensor must have the same Sizes."
    v = only(desc(BNT, OutputVarianceTensor=T([1, 1, 1, 1])), "4_1")
    assert (v.rule, v.member) == ("statistics-sizes", "OutputVarianceTensor.Sizes")
    # An absent optional member is not compared (FusedAddTensor is _Maybenull_).
    assert found(desc(BNT, FusedAddTensor=None), "4_1") == []


def test_same_data_type() -> None:
    v = only(desc(MVN1, ScaleTensor=T(S), BiasTensor=T(S, "FLOAT16")), "4_0")
    assert (v.rule, v.member) == ("same-data-type", "BiasTensor.DataType")
    assert "FLOAT16" in v.message and "FLOAT32" in v.message


def test_same_dimension_count() -> None:
    v = only(desc(MVN1, ScaleTensor=T([3, 1, 1])), "5_2")
    assert (v.rule, v.member) == ("same-dimension-count", "ScaleTensor.DimensionCount")


def test_broadcastable() -> None:
    # BNT: "Any dimension in ScaleTensor and BiasTensor can be set to 1 ... but otherwise must equal
    # the corresponding dimension's size from InputTensor." (seed 004)
    stats = {
        m: T([1, 3, 4, 1]) for m in ("ScaleTensor", "BiasTensor", "OutputMeanTensor", "OutputVarianceTensor")
    }
    assert found(desc(BNT, **stats), "4_1") == []
    stats = {m: T([1, 3, 2, 1]) for m in stats}
    assert found(desc(BNT, **stats), "4_1") == [
        ("scale-broadcast", "ScaleTensor.Sizes[2]"),
        ("bias-broadcast", "BiasTensor.Sizes[2]"),
    ]


def test_broadcastable_fixed_channel_before_4_0() -> None:
    # MVN1 below 4_0: { ScaleBatchCount, ChannelCount, ScaleHeight, ScaleWidth } (seed 001).
    d = desc(MVN1, ScaleTensor=T([1, 1, 1, 1]), BiasTensor=T(S))
    v = only(d, "3_1")
    assert (v.rule, v.member) == ("scale-broadcast-channel-fixed", "ScaleTensor.Sizes[1]")
    assert found(d, "4_0") == []
    d = desc(MVN1, ScaleTensor=T([2, 3, 1, 1]), BiasTensor=T([2, 3, 4, 5]))
    assert found(d, "3_1") == [] and found(d, "4_0") == []


def test_paired_presence() -> None:
    # "If DML_FEATURE_LEVEL is less than DML_FEATURE_LEVEL_5_2, then this tensor is required if
    # BiasTensor is present." (seed 000)
    v = only(desc(MVN, BiasTensor=T(S)), "5_1")
    assert (v.rule, v.member) == ("scale-bias-paired", "ScaleTensor")
    assert "BiasTensor" in v.message and "5_2" in v.message
    assert found(desc(MVN, BiasTensor=T(S)), "5_2") == []
    assert found(desc(MVN, BiasTensor=T(S), ScaleTensor=None), "1_0") == [
        ("scale-bias-paired", "ScaleTensor")
    ]


def test_array_length() -> None:
    v = only(desc(MVN1, AxisCount=3), "5_2")
    assert (v.rule, v.member) == ("axis-count", "AxisCount")
    assert "3" in v.message and "2" in v.message
    assert found(desc(MVN1, AxisCount=2), "5_2") == []


def test_axes_in_range_edges_set_the_length_member_found_by_its_kind() -> None:
    """An array holding one axis at the edge comes with its length member at 1: the member is the
    one an ``array_length`` rule (found by kind class, not by its string) names for the array."""
    spec = dc.load_spec()
    op, level = spec.operator(MVN1), spec.level("5_2")
    d = desc(MVN1)
    ctx = Context(spec, op, level, d, op.support_row(spec, level))
    rule = next(r for r in op.rules if isinstance(KINDS[r.kind], AxesInRange))
    edges = dict(KINDS[rule.kind].edges(rule, ctx))
    assert set(edges) == {"Axes [0]", "Axes [3]"}
    for label, edge in edges.items():
        assert edge.get("AxisCount", spec) == 1, label
        assert found(edge, "5_2") == [], label


def test_axes_in_range_and_unique() -> None:
    assert found(desc(MVN1, Axes=[0, 4]), "5_2") == [("axes-in-range", "Axes[1]")]
    assert found(desc(MVN1, Axes=[3, 1, 3]), "5_2") == [("axes-unique", "Axes[2]")]
    # Non-contiguous and unordered sets are legal (directml-facts.md, Known real-world failures).
    assert found(desc(MVN1, Axes=[1, 3]), "5_2") == []
    assert found(desc(MVN1, Axes=[3, 0]), "5_2") == []
    # The range follows the input's DimensionCount.
    d = desc(MVN1, InputTensor=T([6]), OutputTensor=T([6]), Axes=[0])
    assert found(d, "3_1") == []
    assert found(desc(MVN1, InputTensor=T([6]), OutputTensor=T([6]), Axes=[1]), "3_1") == [
        ("axes-in-range", "Axes[0]")
    ]


# --------------------------------------------------------------------------------------------
# Tensor-desc kinds (directml-facts.md, "Tensor descs")


@pytest.mark.parametrize(
    ("tensor", "level", "rule", "member"),
    [
        (T([1, 1, 1, 1, 1, 1]), "2_1", "tensor-dimension-count-range", "OutputTensor.DimensionCount"),
        (T([1] * 9), "3_1", "tensor-dimension-count-range", "OutputTensor.DimensionCount"),
        (T([]), "3_1", "tensor-dimension-count-range", "OutputTensor.DimensionCount"),
        (T([2, 3, 4], DimensionCount=4), "3_1", "tensor-sizes-count", "OutputTensor.Sizes"),
        (T([2, 3, 4, 0]), "3_1", "tensor-sizes-positive", "OutputTensor.Sizes[3]"),
        (T(N, Strides=[5, 1]), "3_1", "tensor-strides-count", "OutputTensor.Strides"),
        (T([1, 1, 65536, 65536]), "3_1", "tensor-element-count-max", "OutputTensor.Sizes"),
        (T(N, TotalTensorSizeInBytes=476), "3_1", "tensor-total-size", "OutputTensor.TotalTensorSizeInBytes"),
        (
            T(N, GuaranteedBaseOffsetAlignment=8 + 4),
            "3_1",
            "tensor-alignment",
            "OutputTensor.GuaranteedBaseOffsetAlignment",
        ),
        (T(N, Flags="OWNED_BY_DML"), "3_1", "tensor-flags", "OutputTensor.Flags"),
    ],
)
def test_tensor_kinds_reject(tensor: dict[str, Any], level: str, rule: str, member: str) -> None:
    violations = dc.validate(desc(MVN1, OutputTensor=tensor), level)
    assert [(v.rule, v.member) for v in violations] == [(rule, member)]
    assert violations[0].message


def test_total_size_boundaries() -> None:
    # round_up((IndexOfLastElement + 1) * ElementSizeInBytes, 4)
    def verdict(tensor: dict[str, Any], dt: str = "FLOAT32") -> list[tuple[str, str]]:
        return found(desc(MVN1, InputTensor=tensor, OutputTensor=T(tensor["Sizes"], dt)), "3_1")

    assert verdict(T(N, TotalTensorSizeInBytes=480)) == []
    assert verdict(T(N, TotalTensorSizeInBytes=479)) != []
    # padded: last index 1*96 + 2*32 + 3*8 + 4 = 188 -> 189 * 4 = 756
    assert verdict(T(N, Strides=[96, 32, 8, 1], TotalTensorSizeInBytes=756)) == []
    assert verdict(T(N, Strides=[96, 32, 8, 1], TotalTensorSizeInBytes=755)) != []

    # FLOAT16, 3 elements: 6 bytes rounded up to 8
    def fp16(total: int) -> dc.OperatorDesc:
        t = T([3], "FLOAT16", TotalTensorSizeInBytes=total)
        return desc(MVN1, InputTensor=t, OutputTensor=T([3], "FLOAT16"), Axes=[0])

    assert found(fp16(8), "3_1") == []
    d = fp16(6)
    assert found(d, "3_1") == [("tensor-total-size", "InputTensor.TotalTensorSizeInBytes")]
    assert "8" in dc.validate(d, "3_1")[0].message
    # larger than needed is fine
    assert verdict(T(N, TotalTensorSizeInBytes=4096)) == []


@pytest.mark.parametrize(
    ("alignment", "legal"),
    # 4 and 8 are powers of two at least the element size, yet below 16 (DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT):
    # every DirectML release refuses them (cases/directml/tensor-alignment)
    [(0, True), (16, True), (32, True), (256, True), (1 << 31, True), (2, False), (3, False), (4, False),
     (6, False), (8, False), (24, False)],
)  # fmt: skip
def test_alignment_float32(alignment: int, legal: bool) -> None:
    d = desc(MVN, InputTensor=T(N, GuaranteedBaseOffsetAlignment=alignment))
    assert (found(d, "1_0") == []) is legal


def test_alignment_float16_minimum() -> None:
    def f16(alignment: int):
        return desc(
            MVN,
            InputTensor=T(N, "FLOAT16", GuaranteedBaseOffsetAlignment=alignment),
            OutputTensor=T(N, "FLOAT16"),
        )

    assert found(f16(16), "1_0") == []
    for alignment in (1, 2, 4, 8):  # the element size (2) is not enough: DirectML refuses 2 to 8
        assert found(f16(alignment), "1_0") == [
            ("tensor-alignment", "InputTensor.GuaranteedBaseOffsetAlignment")
        ]


def test_flags_inputs_only() -> None:
    assert found(desc(BNT, ScaleTensor=T(S, Flags="OWNED_BY_DML")), "4_1") == []
    assert found(desc(BNT, FusedAddTensor=T(N, Flags="OWNED_BY_DML")), "4_1") == []
    assert found(desc(BNT, OutputMeanTensor=T(S, Flags="OWNED_BY_DML")), "4_1") == [
        ("tensor-flags", "OutputMeanTensor.Flags")
    ]


def test_dimension_count_max_follows_the_level() -> None:
    # 5 before 3_0, 8 from 3_0 (facts). MVN1 6D at 3_0: the range accepts, MVN1's table (4) does not.
    six = T([1, 1, 2, 3, 4, 5])
    d = desc(MVN1, InputTensor=six, OutputTensor=six)
    assert {r for r, _ in found(d, "2_1")} == {"tensor-dimension-count-range"}
    assert {r for r, _ in found(d, "3_0")} == {"supported-dimension-count"}
    assert found(d, "3_1") == []


@pytest.mark.parametrize(("dt", "size"), [("FLOAT32", 4), ("FLOAT16", 2)])
def test_total_size_max_is_32_bit_elements_a_partial_one_counted(dt: str, size: int) -> None:
    """DirectML 1.14.1 to 1.15.4 accept (2^32 - 1) element sizes and refuse one byte more
    (cases/directml/tensor-total-size-max); the layout itself is small."""

    def rules(total: int, member: str = "InputTensor") -> list[tuple[str, str]]:
        tensors = {"InputTensor": T(N, dt), "OutputTensor": T(N, dt)}
        tensors[member] = T(N, dt, TotalTensorSizeInBytes=total)
        return found(desc(MVN1, **tensors), "6_4")

    top = (2**32 - 1) * size
    assert rules(top) == [] and rules(top - 4) == [] and rules(2**32) == []
    for member in ("InputTensor", "OutputTensor"):
        for total in (top + 1, top + size, 2**40):
            assert rules(total, member) == [("tensor-total-size-max", f"{member}.TotalTensorSizeInBytes")]


def test_total_size_max_reads_the_implied_size_where_none_is_stated() -> None:
    """DirectML 1.13.1 and 1.15.4 (cases/directml/tensor-total-size-max): a FLOAT16 tensor of
    2^32 - 1 packed elements implies 2^33 bytes once rounded up to 4, one element too many."""

    def rules(sizes: list[int], dt: str, strides: list[int] | None = None) -> list[tuple[str, str]]:
        tensor = T(sizes, dt, **({"Strides": strides} if strides else {}))
        return found(desc(MVN1, InputTensor=tensor, OutputTensor=T(sizes, dt)), "6_4")

    assert rules([1, 1, 65535, 65537], "FLOAT32") == []
    assert rules([1, 1, 2, 2**31 - 1], "FLOAT16") == []
    assert rules([1, 1, 65535, 65537], "FLOAT16") == [
        ("tensor-total-size-max", "InputTensor.Sizes"),
        ("tensor-total-size-max", "OutputTensor.Sizes"),  # packed too: the same size
    ]
    assert rules([2, 1, 1, 4], "FLOAT32", [2**32 - 5, 4, 4, 1]) == []
    assert rules([2, 1, 1, 4], "FLOAT32", [2**32 - 4, 4, 4, 1]) == [
        ("tensor-total-size-max", "InputTensor.Strides")
    ]
    assert rules([2, 1, 1, 4], "FLOAT16", [2**32 - 5, 4, 4, 1]) == [
        ("tensor-total-size-max", "InputTensor.Strides")
    ]


def test_element_count_boundary() -> None:
    ok = [1, 1, 65535, 65537]  # 2^32 - 1
    assert found(desc(MVN1, InputTensor=T(ok), OutputTensor=T(ok)), "5_0") == []


# --------------------------------------------------------------------------------------------
# Activation kinds (directml-facts.md, "Fused activations")


def act(op: str, activation: Any) -> dc.OperatorDesc:
    return desc(op, FusedActivation=activation)


def test_activation_fusable() -> None:
    v = only(act(MVN, {"Type": "ELEMENT_WISE_CLIP", "Min": 0.0, "Max": 1.0}), "6_4")
    assert (v.rule, v.member) == ("activation-fusable", "FusedActivation.Type")
    assert "ELEMENT_WISE_CLIP" in v.message
    for a in dc.load_spec().activations:
        assert "activation-fusable" not in {r for r, _ in found(act(MVN, {"Type": a}), "6_4")}


@pytest.mark.parametrize(
    ("activation", "before", "since"),
    [
        ("ACTIVATION_SHRINK", "1_0", "2_0"),
        ("ACTIVATION_CELU", "2_1", "3_0"),
        ("ACTIVATION_GELU", "5_0", "5_1"),
    ],
)
def test_activation_available(activation: str, before: str, since: str) -> None:
    d = act(MVN, {"Type": activation})
    v = only(d, before)
    assert (v.rule, v.member) == ("activation-available", "FusedActivation.Type")
    assert since in v.message
    assert found(d, since) == []


def test_activation_tensors_null() -> None:
    d = act(BNT, {"Type": "ACTIVATION_TANH", "InputTensor": T(N), "OutputTensor": T(N)})
    assert found(d, "4_1") == [
        ("activation-tensors-null", "FusedActivation.InputTensor"),
        ("activation-tensors-null", "FusedActivation.OutputTensor"),
    ]
    assert found(act(BNT, {"Type": "ACTIVATION_TANH", "InputTensor": None}), "4_1") == []


def test_activation_parameter_required() -> None:
    assert found(act(MVN1, {"Type": "ACTIVATION_LINEAR", "Alpha": 1.0}), "5_2") == [
        ("activation-parameter-required", "FusedActivation.Beta")
    ]
    assert found(act(MVN1, {"Type": "ACTIVATION_PARAMETRIC_SOFTPLUS"}), "5_2") == [
        ("activation-parameter-required", "FusedActivation.Alpha"),
        ("activation-parameter-required", "FusedActivation.Beta"),
    ]
    # Parameters with a typical value default to it.
    for a in (
        "ACTIVATION_HARD_SIGMOID",
        "ACTIVATION_SCALED_TANH",
        "ACTIVATION_SCALED_ELU",
        "ACTIVATION_SHRINK",
    ):
        assert found(act(MVN1, {"Type": a}), "5_2") == []


def test_activation_softplus_steepness() -> None:
    d = act(MVN1, {"Type": "ACTIVATION_SOFTPLUS", "Steepness": 0.5})
    v = only(d, "6_3")
    assert (v.rule, v.member) == ("activation-softplus-steepness", "FusedActivation.Steepness")
    assert "0.5" in v.message
    assert found(d, "6_4") == []
    assert found(act(MVN1, {"Type": "ACTIVATION_SOFTPLUS", "Steepness": 1.0}), "6_3") == []
    assert found(act(MVN1, {"Type": "ACTIVATION_SOFTPLUS"}), "2_1") == []
    # The rule binds SOFTPLUS only.
    assert found(act(MVN1, {"Type": "ACTIVATION_ELU", "Alpha": 0.5}), "6_3") == []


def test_a_float_minimum_is_judged_on_the_float32_directml_reads() -> None:
    """Steepness is a C FLOAT: 1 - 2^-26 is 1.0f, at the minimum and legal, as DirectML sees
    it; 1 - 2^-24 is the FLOAT next below 1 and breaks the rule."""
    below_in_float64 = act(MVN1, {"Type": "ACTIVATION_SOFTPLUS", "Steepness": 1 - 2**-26})
    assert found(below_in_float64, "6_3") == []
    v = only(act(MVN1, {"Type": "ACTIVATION_SOFTPLUS", "Steepness": 1 - 2**-24}), "6_3")
    assert v.rule == "activation-softplus-steepness" and "0.99999994" in v.message


def test_a_float_range_is_judged_between_floats() -> None:
    """An attribute_range over a FLOAT member (no bundled rule has one yet; a spec may) compares
    the float32 value with the float32 bound, as DirectML's C++ does: Epsilon 1e-5 sits exactly
    at a minimum of 1e-5 (both read as 9.99999975e-06f) and the FLOAT next below breaks it."""
    from dmlconform.specification.spec import Rule

    spec = dc.load_spec()
    op, level = spec.operator(MVN1), spec.level("6_4")
    rule = Rule("epsilon-min", "attribute_range", {"member": "Epsilon", "min": 1e-5}, {})
    kind = KINDS["attribute_range"]

    def judged(epsilon: float) -> tuple[list[tuple[str, str]], bool]:
        ctx = Context(spec, op, level, desc(MVN1, Epsilon=epsilon), op.support_row(spec, level))
        return list(kind.check(rule, ctx)), kind.at_edge(rule, ctx)

    assert judged(1e-5) == ([], True)
    below = float(np.nextafter(np.float32(1e-5), np.float32(0)))
    assert judged(below)[0] and not judged(below)[1]
