"""validate(desc, level): the contract (fields, paths, one report per mistake, every violation,
level spellings), with expected verdicts taken from the seed docs and directml-facts.md."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import SPEC

import dmlconform as dc
from dmlconform.specification.spec import UnknownLevel
from dmlconform.specification.validate import is_legal

N = [2, 3, 4, 5]


def T(sizes: list[int], dt: str = "FLOAT32", **kw: Any) -> dict[str, Any]:
    return {"DataType": dt, "Sizes": sizes, **kw}


def mvn1(**over: Any) -> dc.OperatorDesc:
    body: dict[str, Any] = {
        "InputTensor": T(N),
        "OutputTensor": T(N),
        "Axes": [2, 3],
        "NormalizeVariance": True,
    }
    for k, v in over.items():
        if v is ...:
            body.pop(k)
        else:
            body[k] = v
    return dc.parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": body})


def bnt(**over: Any) -> dc.OperatorDesc:
    s = [1, 3, 1, 1]
    body: dict[str, Any] = {
        "InputTensor": T(N),
        "ScaleTensor": T(s),
        "BiasTensor": T(s),
        "OutputTensor": T(N),
        "OutputMeanTensor": T(s),
        "OutputVarianceTensor": T(s),
        "Epsilon": 1e-5,
    }
    body.update(over)
    return dc.parse_desc({"type": "BATCH_NORMALIZATION_TRAINING", "desc": body})


def rules_of(desc: dc.OperatorDesc, level: str) -> list[tuple[str, str]]:
    return [(v.rule, v.member) for v in dc.validate(desc, level)]


def test_legal_desc_has_no_violations() -> None:
    assert dc.validate(mvn1(), "2_1") == []
    assert is_legal(mvn1(), "6_4", SPEC)
    assert dc.validate(bnt(), "4_1") == []


@pytest.mark.parametrize(
    "desc",
    [
        mvn1(ScaleTensor=T([1, 1, 1, 1])),
        mvn1(Axes=[2, 2, 9], InputTensor=T(N, "UINT32"), OutputTensor=T([2, 3, 4, 6])),
        mvn1(InputTensor=T([2, 0, 4, 5]), FusedActivation={"Type": "ACTIVATION_LINEAR", "InputTensor": T(N)}),
        bnt(OutputMeanTensor=T([1, 1, 1, 1], "FLOAT16", Flags="OWNED_BY_DML")),
    ],
)
def test_every_violation_is_complete(desc: dc.OperatorDesc) -> None:
    violations = dc.validate(desc, "3_1" if desc.operator.endswith("1") else "4_1")
    assert violations
    for v in violations:
        assert isinstance(v, dc.Violation)
        assert v.rule and v.member and v.message and v.source
        assert v.to_dict() == {"rule": v.rule, "member": v.member, "message": v.message, "source": v.source}
        assert str(v).startswith(f"[{v.rule}] {v.member}: ")


def test_member_paths() -> None:
    # MVN1 before 4_0: the channel of ScaleTensor must equal the input's (seed 001, ScaleTensor).
    v = dc.validate(mvn1(ScaleTensor=T([1, 1, 1, 1]), BiasTensor=T([1, 3, 1, 1])), "3_1")
    assert [(x.rule, x.member) for x in v] == [("scale-broadcast-channel-fixed", "ScaleTensor.Sizes[1]")]
    assert "3" in v[0].message and "1" in v[0].message
    v = dc.validate(mvn1(Axes=[1, 2, 2], AxisCount=3), "5_2")
    assert [(x.rule, x.member) for x in v] == [("axes-unique", "Axes[2]")]
    v = dc.validate(mvn1(Axes=[2, 4]), "5_2")
    assert [(x.rule, x.member) for x in v] == [("axes-in-range", "Axes[1]")]
    v = dc.validate(mvn1(InputTensor=T([2, 3, 0, 5]), OutputTensor=T([2, 3, 0, 5])), "5_2")
    assert [(x.rule, x.member) for x in v] == [
        ("tensor-sizes-positive", "InputTensor.Sizes[2]"),
        ("tensor-sizes-positive", "OutputTensor.Sizes[2]"),
    ]


def test_one_mistake_is_reported_once() -> None:
    # A size of 0 in InputTensor only: the input is not a valid tensor desc, so rules that compare
    # it with other tensors (output-sizes, axes-in-range, ...) do not report it again.
    v = dc.validate(mvn1(InputTensor=T([2, 0, 4, 5])), "5_2")
    assert [(x.rule, x.member) for x in v] == [("tensor-sizes-positive", "InputTensor.Sizes[1]")]
    v = dc.validate(bnt(InputTensor=T([2, 0, 4, 5])), "4_1")
    assert [x.rule for x in v] == ["tensor-sizes-positive"]
    # A 9-dimensional tensor breaks the DimensionCount range; the support table is not repeated.
    nine = [1, 1, 1, 1, 1, 2, 3, 4, 5]
    v = dc.validate(mvn1(InputTensor=T(nine), OutputTensor=T(nine)), "6_4")
    assert {x.rule for x in v} == {"tensor-dimension-count-range"}


def test_every_violation_is_returned() -> None:
    desc = mvn1(
        ScaleTensor=T([1, 3, 1, 1], "FLOAT16"),  # same-data-type; scale-bias-paired below 5_2
        OutputTensor=T([2, 3, 4, 6]),  # output-sizes
        Axes=[2, 2, 7],  # axes-in-range, axes-unique
        AxisCount=2,  # axis-count
        FusedActivation={"Type": "ACTIVATION_GELU"},  # activation-available below 5_1
    )
    got = {v.rule for v in dc.validate(desc, "5_0")}
    assert got == {
        "same-data-type",
        "scale-bias-paired",
        "output-sizes",
        "axes-in-range",
        "axes-unique",
        "axis-count",
        "activation-available",
    }
    assert {v.rule for v in dc.validate(desc, "5_2")} == got - {"scale-bias-paired", "activation-available"}


def test_same_rule_reported_per_member() -> None:
    v = dc.validate(mvn1(InputTensor=T(N, "UINT32"), OutputTensor=T(N, "UINT32")), "3_1")
    assert [(x.rule, x.member) for x in v] == [
        ("supported-data-type", "InputTensor.DataType"),
        ("supported-data-type", "OutputTensor.DataType"),
    ]


def test_order_availability_first_activation_last() -> None:
    desc = mvn1(Axes=..., FusedActivation={"Type": "ACTIVATION_GELU"}, InputTensor=T(N, Strides=[1]))
    order = [v.rule for v in dc.validate(desc, "2_0")]
    assert order[0] == "available"
    assert order[-1] == "activation-available"
    assert order.index("required-members") < order.index("tensor-strides-count")


@pytest.mark.parametrize("level", ["5_2", "5.2", "DML_FEATURE_LEVEL_5_2", " 5_2 "])
def test_level_spellings_are_equivalent(level: str) -> None:
    one_sided = mvn1(ScaleTensor=T([1, 3, 1, 1]))
    assert dc.validate(one_sided, level) == []
    assert dc.validate(one_sided, level.replace("2", "1")) != []  # 5_1: scale-bias-paired


def test_level_objects_accepted() -> None:
    spec = dc.load_spec()
    assert dc.validate(mvn1(ScaleTensor=T([1, 3, 1, 1])), spec.level("5_1"))[0].rule == "scale-bias-paired"


@pytest.mark.parametrize("level", ["7_0", "5_3", "", "DML_FEATURE_LEVEL_9_9", "latest"])
def test_unknown_level_raises(level: str) -> None:
    with pytest.raises(UnknownLevel, match="unknown feature level"):
        dc.validate(mvn1(), level)


def test_unknown_level_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        dc.validate(mvn1(), "0_9")


def test_unknown_operator_raises() -> None:
    desc = dc.OperatorDesc("MEAN_VARIANCE_NORMALIZATION9", {})
    with pytest.raises(KeyError):
        dc.validate(desc, "5_2")


def test_source_names_the_doc() -> None:
    (v,) = dc.validate(mvn1(ScaleTensor=T([1, 3, 1, 1])), "5_1")
    assert "DML_MEAN_VARIANCE_NORMALIZATION1_OPERATOR_DESC" in v.source
    assert "002_8c49f7449c810d75.txt" in v.source
    (v,) = dc.validate(mvn1(OutputTensor=T(N, Flags="OWNED_BY_DML")), "5_1")
    assert "directml-facts.md" in v.source


def test_validate_does_not_mutate_desc() -> None:
    desc = mvn1(Axes=[3, 3])
    before = desc.to_dict()
    dc.validate(desc, "5_2")
    dc.validate(desc, "2_1")
    assert desc.to_dict() == before
