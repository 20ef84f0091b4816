"""Desc parsing, loading and to_dict(): round-trips, prefixes, defaults, and DescError paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import mvn1_json
from hypothesis import given, settings
from hypothesis import strategies as st

import dmlconform as dc
from dmlconform.specification.desc import DescError, TensorDesc, load_desc, parse_desc

MVN1 = "MEAN_VARIANCE_NORMALIZATION1"


def mvn1(**desc: Any) -> dict[str, Any]:
    return mvn1_json(**desc)


def error_of(data: Any) -> DescError:
    with pytest.raises(DescError) as info:
        parse_desc(data)
    return info.value


# --------------------------------------------------------------------------------------------
# Round trips and prefixes


def test_prefixes_are_optional() -> None:
    plain = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": {"DataType": "FLOAT16", "Sizes": [1, 2], "Flags": "OWNED_BY_DML"},
                "OutputTensor": {"DataType": "FLOAT16", "Sizes": [1, 2]},
                "Axes": [1],
                "NormalizeVariance": False,
            },
        }
    )
    prefixed = parse_desc(
        {
            "type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": {
                    "DataType": "DML_TENSOR_DATA_TYPE_FLOAT16",
                    "Sizes": [1, 2],
                    "Flags": "DML_TENSOR_FLAG_OWNED_BY_DML",
                },
                "OutputTensor": {"DataType": "DML_TENSOR_DATA_TYPE_FLOAT16", "Sizes": [1, 2]},
                "Axes": [1],
                "NormalizeVariance": False,
            },
        }
    )
    assert plain == prefixed
    assert plain.operator == MVN1
    assert plain.members["InputTensor"].data_type == "FLOAT16"
    assert plain.members["InputTensor"].flags == "OWNED_BY_DML"


def test_flags_as_number() -> None:
    d = parse_desc(mvn1(InputTensor={"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5], "Flags": 1}))
    assert d.members["InputTensor"].flags == "OWNED_BY_DML"


def test_activation_prefix_optional() -> None:
    a = parse_desc(mvn1(FusedActivation={"Type": "DML_OPERATOR_ACTIVATION_ELU", "Alpha": 2}))
    b = parse_desc(mvn1(FusedActivation={"Type": "ACTIVATION_ELU", "Alpha": 2.0}))
    assert a == b
    assert a.members["FusedActivation"].type == "ACTIVATION_ELU"
    assert a.members["FusedActivation"].param_dict == {"Alpha": 2.0}


def test_to_dict_round_trip_keeps_omitted_fields_omitted() -> None:
    data = mvn1()
    d = parse_desc(data)
    out = d.to_dict()
    assert out["type"] == "DML_OPERATOR_" + MVN1
    assert set(out["desc"]) == {"InputTensor", "OutputTensor", "Axes", "NormalizeVariance"}
    assert out["desc"]["InputTensor"] == {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5]}
    assert parse_desc(out) == d


def test_to_dict_round_trip_every_field() -> None:
    tensor = {
        "DataType": "FLOAT16",
        "Sizes": [2, 3, 4, 5],
        "Strides": [96, 32, 8, 1],
        "Flags": "OWNED_BY_DML",
        "DimensionCount": 4,
        "TotalTensorSizeInBytes": 380,
        "GuaranteedBaseOffsetAlignment": 16,
    }
    data = mvn1(
        InputTensor=tensor,
        ScaleTensor={"DataType": "FLOAT16", "Sizes": [1, 3, 1, 1]},
        BiasTensor=None,
        AxisCount=2,
        Epsilon=1e-3,
        FusedActivation={"Type": "ACTIVATION_LINEAR", "Alpha": 2.0, "Beta": -1.0},
    )
    d = parse_desc(data)
    out = d.to_dict()
    assert out["desc"]["InputTensor"] == tensor
    assert out["desc"]["BiasTensor"] is None
    assert out["desc"]["FusedActivation"] == {"Type": "ACTIVATION_LINEAR", "Alpha": 2.0, "Beta": -1.0}
    assert parse_desc(out) == d
    assert parse_desc(yaml.safe_load(d.to_yaml())) == d


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_load_desc_yaml_and_json(tmp_path: Path, fmt: str) -> None:
    data = mvn1(Epsilon=1e-5, AxisCount=2)
    path = tmp_path / f"case.{fmt}"
    path.write_text(json.dumps(data) if fmt == "json" else yaml.safe_dump(data), encoding="utf-8")
    assert load_desc(path) == parse_desc(data)
    assert dc.load_desc(str(path)) == parse_desc(data)


def test_yaml_exponent_without_dot_is_a_float(tmp_path: Path) -> None:
    # PyYAML reads 1e-5 (no dot) as a string; a desc author writes it anyway.
    path = tmp_path / "eps.yaml"
    path.write_text(yaml.safe_dump(mvn1()).replace("desc:\n", "desc:\n  Epsilon: 1e-5\n"), encoding="utf-8")
    assert load_desc(path).members["Epsilon"] == pytest.approx(1e-5)


def test_case_file_keys_are_ignored() -> None:
    data = mvn1()
    data.update({"name": "x", "comment": "why", "expect": [{"level": "5_2", "rules": []}], "xfail": "r"})
    assert parse_desc(data) == parse_desc(mvn1())


def test_defaults_via_get() -> None:
    d = parse_desc(mvn1())
    assert "Epsilon" not in d.members and "AxisCount" not in d.members
    assert d.get("Epsilon") == pytest.approx(1e-5)  # "A value of 0.00001 is recommended as default."
    assert d.get("AxisCount") == 2  # AxisCount determines the size of Axes
    assert d.get("ScaleTensor") is None
    assert d.get("FusedActivation") is None
    v0 = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION",
            "desc": {
                "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 1]},
                "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 1]},
                "CrossChannel": True,
                "NormalizeVariance": True,
            },
        }
    )
    assert v0.get("Epsilon") == pytest.approx(1e-5)
    assert parse_desc(mvn1(Axes=[0, 1, 3])).get("AxisCount") == 3
    assert parse_desc(mvn1(Epsilon=0.5)).get("Epsilon") == 0.5


def test_tensor_effective_values() -> None:
    t = TensorDesc("FLOAT32", (2, 3, 4, 5))
    assert t.rank == 4
    assert t.effective_strides == (60, 20, 5, 1)
    assert t.element_count == 120
    assert t.effective_flags == "NONE"
    assert TensorDesc("FLOAT32", (2, 3), dimension_count=5).rank == 5


def test_bool_spellings() -> None:
    for value, want in ((True, True), (0, False), (1, True), ("TRUE", True), ("false", False)):
        assert parse_desc(mvn1(NormalizeVariance=value)).members["NormalizeVariance"] is want


def test_missing_required_member_parses_and_is_a_violation() -> None:
    d = parse_desc(mvn1(Axes=..., OutputTensor=...))
    assert "Axes" not in d.members
    violations = dc.validate(d, "5_2")
    assert {v.rule for v in violations} == {"required-members"}
    assert {v.member for v in violations} == {"Axes", "OutputTensor"}


def test_unknown_activation_type_parses_and_is_not_fusable() -> None:
    d = parse_desc(mvn1(FusedActivation={"Type": "ACTIVATION_FOO", "Alpha": 1.0}))
    assert d.members["FusedActivation"].type == "ACTIVATION_FOO"
    violations = dc.validate(d, "6_4")
    assert [(v.rule, v.member) for v in violations] == [("activation-fusable", "FusedActivation.Type")]


def test_activation_as_bare_string() -> None:
    d = parse_desc(mvn1(FusedActivation="ACTIVATION_RELU"))
    assert d.members["FusedActivation"].type == "ACTIVATION_RELU"


# --------------------------------------------------------------------------------------------
# DescError: unreadable descs name the path


@pytest.mark.parametrize(
    ("data", "path", "words"),
    [
        (["type", "desc"], "", "mapping"),
        ("MEAN_VARIANCE_NORMALIZATION1", "", "mapping"),
        ({"desc": {}}, "type", "missing"),
        ({"type": "MEAN_VARIANCE_NORMALIZATION7", "desc": {}}, "type", "unknown operator"),
        ({"type": 5, "desc": {}}, "type", "operator name"),
        ({"type": MVN1, "desc": [1]}, "desc", "mapping"),
        ({"type": MVN1, "desc": {}, "extra": 1}, "extra", "unknown key"),
        (mvn1(CrossChannel=True), "desc.CrossChannel", "unknown member"),
        (
            mvn1(InputTensor={"DataType": "FLOAT8", "Sizes": [1]}),
            "desc.InputTensor.DataType",
            "unknown data type",
        ),
        (mvn1(InputTensor={"DataType": 32, "Sizes": [1]}), "desc.InputTensor.DataType", "data type name"),
        (mvn1(InputTensor={"Sizes": [1]}), "desc.InputTensor.DataType", "missing"),
        (mvn1(InputTensor={"DataType": "FLOAT32"}), "desc.InputTensor.Sizes", "missing"),
        (
            mvn1(InputTensor={"DataType": "FLOAT32", "Sizes": "2,3"}),
            "desc.InputTensor.Sizes",
            "list of UINTs",
        ),
        (mvn1(InputTensor={"DataType": "FLOAT32", "Sizes": [2, -3]}), "desc.InputTensor.Sizes[1]", "UINT"),
        (mvn1(InputTensor={"DataType": "FLOAT32", "Sizes": [2, 3.5]}), "desc.InputTensor.Sizes[1]", "UINT"),
        (
            mvn1(InputTensor={"DataType": "FLOAT32", "Sizes": [2], "Pitch": 4}),
            "desc.InputTensor.Pitch",
            "unknown",
        ),
        (
            mvn1(InputTensor={"DataType": "FLOAT32", "Sizes": [2], "Flags": "FAST"}),
            "desc.InputTensor.Flags",
            "flag",
        ),
        (mvn1(InputTensor=[2, 3]), "desc.InputTensor", "mapping"),
        (mvn1(Axes=[2, 3.0]), "desc.Axes[1]", "UINT"),
        (mvn1(Axes=[2, True]), "desc.Axes[1]", "UINT"),
        (mvn1(Axes=2), "desc.Axes", "list"),
        (mvn1(AxisCount=-1), "desc.AxisCount", "UINT"),
        (mvn1(NormalizeVariance="yes please"), "desc.NormalizeVariance", "BOOL"),
        (mvn1(NormalizeVariance=2), "desc.NormalizeVariance", "BOOL"),
        # DirectML.h's fields: a UINT is 32 bits (TotalTensorSizeInBytes alone 64), a FLOAT float32
        (mvn1(AxisCount=2**32), "desc.AxisCount", "does not fit in a UINT (32 bits"),
        (mvn1(Axes=[2, 2**32 + 1]), "desc.Axes[1]", "does not fit in a UINT (32 bits"),
        (
            mvn1(InputTensor={"DataType": "FLOAT32", "Sizes": [2, 2**32]}),
            "desc.InputTensor.Sizes[1]",
            "does not fit in a UINT (32 bits",
        ),
        (
            mvn1(InputTensor={"DataType": "FLOAT32", "Sizes": [2], "TotalTensorSizeInBytes": 2**64}),
            "desc.InputTensor.TotalTensorSizeInBytes",
            "does not fit in a UINT64",
        ),
        (mvn1(Epsilon=1e39), "desc.Epsilon", "does not fit in a FLOAT (32 bits"),
        (mvn1(Epsilon="-3.5e38"), "desc.Epsilon", "does not fit in a FLOAT (32 bits"),
        (mvn1(Epsilon=10**400), "desc.Epsilon", "does not fit in a FLOAT (32 bits"),
        (
            mvn1(FusedActivation={"Type": "ACTIVATION_ELU", "Alpha": 1e39}),
            "desc.FusedActivation.Alpha",
            "does not fit in a FLOAT",
        ),
        (mvn1(Epsilon="tiny"), "desc.Epsilon", "FLOAT"),
        (mvn1(Epsilon=True), "desc.Epsilon", "FLOAT"),
        (
            mvn1(FusedActivation={"Type": "ACTIVATION_ELU", "Beta": 1.0}),
            "desc.FusedActivation.Beta",
            "parameter",
        ),
        (mvn1(FusedActivation={"Alpha": 1.0}), "desc.FusedActivation.Type", "missing"),
        (mvn1(FusedActivation=[1]), "desc.FusedActivation", "mapping"),
    ],
)
def test_desc_errors_name_the_path(data: Any, path: str, words: str) -> None:
    err = error_of(data)
    assert err.path == path
    assert words.lower() in err.message.lower()
    if path:
        assert str(err).startswith(f"{path}: ")


def test_load_desc_malformed_yaml(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("type: MEAN_VARIANCE_NORMALIZATION1\ndesc: {InputTensor: [1, 2\n", encoding="utf-8")
    with pytest.raises(DescError) as info:
        load_desc(path)
    assert info.value.file == str(path)
    assert "malformed YAML" in str(info.value)
    assert "line" in str(info.value)


def test_load_desc_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(DescError) as info:
        load_desc(path)
    assert str(path) in str(info.value) and "mapping" in str(info.value)


def test_load_desc_error_names_file_and_path(tmp_path: Path) -> None:
    path = tmp_path / "neg.json"
    path.write_text(json.dumps(mvn1(Axes=[2, -1])), encoding="utf-8")
    with pytest.raises(DescError) as info:
        load_desc(path)
    assert info.value.file == str(path)
    assert info.value.path == "desc.Axes[1]"
    assert str(info.value).startswith(f"{path}: desc.Axes[1]: ")


def test_load_desc_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DescError, match="cannot read"):
        load_desc(tmp_path / "nope.yaml")


# --------------------------------------------------------------------------------------------
# Property: random descs round-trip through to_dict, YAML and JSON

DATA_TYPES = st.sampled_from(["FLOAT32", "FLOAT16", "UINT32", "INT8", "DML_TENSOR_DATA_TYPE_FLOAT16"])
SIZES = st.lists(st.integers(0, 70000), min_size=0, max_size=9)
UINT = st.integers(0, 2**32 - 1)  # a C UINT; TotalTensorSizeInBytes (a UINT64) draws wider
UINT64 = st.integers(0, 2**64 - 1)
FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=32)


@st.composite
def tensors(draw: st.DrawFn) -> dict[str, Any]:
    sizes = draw(SIZES)
    t: dict[str, Any] = {"DataType": draw(DATA_TYPES), "Sizes": sizes}
    if draw(st.booleans()):
        t["Strides"] = draw(st.lists(st.integers(0, 1000), min_size=len(sizes), max_size=len(sizes)))
    if draw(st.booleans()):
        t["Flags"] = draw(st.sampled_from(["NONE", "OWNED_BY_DML", "DML_TENSOR_FLAG_NONE"]))
    for key in ("DimensionCount", "TotalTensorSizeInBytes", "GuaranteedBaseOffsetAlignment"):
        if draw(st.booleans()):
            t[key] = draw(UINT64 if key == "TotalTensorSizeInBytes" else UINT)
    return t


@st.composite
def activations(draw: st.DrawFn) -> dict[str, Any] | None:
    spec = dc.load_spec()
    if draw(st.booleans()):
        return None
    act = draw(st.sampled_from(sorted(spec.activations.values(), key=lambda a: a.name)))
    out: dict[str, Any] = {"Type": act.name}
    for p in act.parameter_names:
        if draw(st.booleans()):
            out[p] = draw(FLOATS)
    return out


@st.composite
def descs(draw: st.DrawFn) -> dict[str, Any]:
    spec = dc.load_spec()
    op = draw(st.sampled_from(sorted(spec.operators)))
    body: dict[str, Any] = {}
    for m in spec.operator(op).members:
        if not draw(st.booleans()) and m.nullable:
            continue
        if m.type == "tensor":
            body[m.name] = None if m.nullable and draw(st.booleans()) else draw(tensors())
        elif m.type == "bool":
            body[m.name] = draw(st.booleans())
        elif m.type == "uint":
            body[m.name] = draw(UINT)
        elif m.type == "float":
            body[m.name] = draw(FLOATS)
        elif m.type == "uint_array":
            body[m.name] = draw(st.lists(st.integers(0, 9), max_size=9))
        elif m.type == "activation":
            body[m.name] = draw(activations())
    return {"type": draw(st.sampled_from([op, "DML_OPERATOR_" + op])), "desc": body}


def _canonical(data: dict[str, Any]) -> dict[str, Any]:
    """What to_dict() writes: prefixes dropped from data types and flags, the operator prefixed."""
    out = {"type": "DML_OPERATOR_" + data["type"].removeprefix("DML_OPERATOR_"), "desc": {}}
    for name, value in data["desc"].items():
        if isinstance(value, dict) and "DataType" in value:
            value = dict(value, DataType=value["DataType"].removeprefix("DML_TENSOR_DATA_TYPE_"))
            if "Flags" in value:
                value["Flags"] = value["Flags"].removeprefix("DML_TENSOR_FLAG_")
        out["desc"][name] = value
    return out


@settings(max_examples=150, deadline=None)
@given(descs())
def test_round_trip_property(data: dict[str, Any]) -> None:
    d = parse_desc(data)
    out = d.to_dict()
    assert out == _canonical(data)
    assert parse_desc(out) == d
    assert parse_desc(json.loads(json.dumps(out))) == d
    assert parse_desc(yaml.safe_load(d.to_yaml())) == d
    assert hash(parse_desc(out)) == hash(d)


def test_desc_files_are_written_as_the_pure_python_emitter_writes_them() -> None:
    """dump_yaml uses libyaml's emitter where PyYAML has it; the text must be what the
    pure-Python emitter writes (reproducers, exports and generated files do not change with
    the installation), on legal descs at their edges and on one-rule-broken ones."""
    from dmlconform.generation.illegal import illegal_descs
    from dmlconform.generation.legal import legal_descs
    from dmlconform.specification.desc import _flow_short_lists, dump_yaml

    class Pure(yaml.SafeDumper):
        pass

    Pure.add_representer(list, _flow_short_lists)
    spec = dc.load_spec()
    descs = []
    for op in spec.operators:
        level = spec.levels_from(spec.operator(op))[-1]
        descs += list(legal_descs(op, level, 3, 8, spec=spec, edge_rate=0.5))
        descs += [d for d, _ in illegal_descs(op, level, 3, 8, spec=spec)]
    for d in descs:
        data = d.to_dict()
        assert dump_yaml(data) == yaml.dump(data, Dumper=Pure, sort_keys=False, default_flow_style=False)


def test_the_largest_values_their_c_fields_hold_parse() -> None:
    """2^32 - 1 in a UINT, 2^64 - 1 in TotalTensorSizeInBytes, float32's largest finite and an
    infinity in a FLOAT are DirectML descs: the rules judge them, not the parser."""
    d = parse_desc(
        mvn1(
            AxisCount=2**32 - 1,
            Epsilon=3.4028235e38,
            InputTensor={"DataType": "FLOAT32", "Sizes": [2, 2**32 - 1], "TotalTensorSizeInBytes": 2**64 - 1},
        )
    )
    assert d.members["AxisCount"] == 2**32 - 1 and d.members["Epsilon"] == 3.4028235e38
    assert d.members["InputTensor"].total_tensor_size_in_bytes == 2**64 - 1
    assert parse_desc(mvn1(Epsilon=float("inf"))).members["Epsilon"] == float("inf")
