"""The DxDispatch model writer and strict reader, and the buffer layouts (no bundle, no CLI).

Expected values are written out from DxDispatch's parser rules and DirectMLX's defaults
(dxdispatch-facts.md, directml-facts.md), not taken from the code under test.
"""

from __future__ import annotations

import copy
import json
import math

import helpers
import numpy as np
import pytest
from helpers import SPEC

from dmlconform.dxdispatch import buffers
from dmlconform.dxdispatch.bundle import Call, build_model
from dmlconform.dxdispatch.desc_json import (
    ModelError,
    NotExpressible,
    desc_json,
    export_desc,
    read_desc_json,
)
from dmlconform.dxdispatch.emulate import Emulator, run_model
from dmlconform.dxdispatch.modelfile import load_json, read_model
from dmlconform.generation.legal import legal_descs
from dmlconform.specification.desc import OperatorDesc, TensorDesc, parse_desc


def _legal_descs() -> list[OperatorDesc]:
    """Legal descs of every operator, at its first and the highest level, every data type."""
    out = []
    for op in SPEC.operators.values():
        for level in (op.introduced, SPEC.levels[-1].name):
            row = op.support_row(SPEC, SPEC.level(level))
            for dtype in row.tensors[op.input_members[0].name].data_types:
                out += list(legal_descs(op.name, level, seed=3, count=6, spec=SPEC, dtype=dtype))
    return out


LEGAL = _legal_descs()


def _walk(value, path=""):
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")


def mvn1(**members) -> OperatorDesc:
    return helpers.mvn1([1, 2, 3, 4], **members)


def test_every_exported_desc_parses_back_to_the_desc_it_came_from():
    assert len({d.operator for d in LEGAL}) == len(SPEC.operators)
    for desc in LEGAL:
        body = desc_json(desc, SPEC)
        text = json.dumps(body, allow_nan=False)  # strict JSON
        back = read_desc_json("DML_OPERATOR_" + desc.operator, load_json(text), SPEC)
        assert back == export_desc(desc, SPEC)
        # and the export changed nothing the desc said: tensors verbatim, values as C FLOATs
        for name, value in desc.members.items():
            if value is None:
                assert name not in body  # absent optional members are omitted, never null
            elif isinstance(value, TensorDesc):
                assert back.members[name] == value
            elif isinstance(value, float):
                assert back.members[name] == float(np.float32(value))
            elif isinstance(value, (bool, int, tuple)):
                assert back.members[name] == value


def test_models_are_strict_json_with_booleans_counts_and_no_nulls():
    op_bools = {m.name for op in SPEC.operators.values() for m in op.members if m.type == "bool"}
    for desc in LEGAL:
        body = desc_json(desc, SPEC)
        for path, value in _walk(body):
            assert value is not None, path
            if path.split(".")[-1] in op_bools:
                assert value is True or value is False, path
        if "Axes" in body:
            assert body["AxisCount"] == len(body["Axes"])
        op = SPEC.operator(desc.operator)
        for m in op.members:  # every attribute is written, defaults resolved
            if m.type not in ("tensor", "activation"):
                assert m.name in body, (desc.operator, m.name)


def test_defaults_are_resolved_to_exact_float32_values():
    body = desc_json(mvn1(), SPEC)
    assert body["AxisCount"] == 2
    assert body["Epsilon"] == 9.999999747378752e-06  # float32(0.00001): what the C FLOAT holds
    assert body["NormalizeVariance"] is True
    assert "ScaleTensor" not in body and "FusedActivation" not in body
    body = desc_json(mvn1(Epsilon=0.1, FusedActivation={"Type": "ACTIVATION_LEAKY_RELU"}), SPEC)
    assert body["Epsilon"] == 0.10000000149011612
    assert body["FusedActivation"] == {"Type": "ACTIVATION_LEAKY_RELU", "Alpha": 0.009999999776482582}


def test_scaled_elu_gets_directmlx_defaults():
    """DirectMLX.h: ScaledElu(alpha = 1.67326319217681884765625f, gamma = 1.05070102214813232421875f)."""
    body = desc_json(mvn1(FusedActivation={"Type": "ACTIVATION_SCALED_ELU"}), SPEC)
    assert body["FusedActivation"] == {
        "Type": "ACTIVATION_SCALED_ELU",
        "Alpha": 1.67326319217681884765625,
        "Gamma": 1.05070102214813232421875,
    }
    body = desc_json(mvn1(FusedActivation={"Type": "ACTIVATION_HARD_SIGMOID", "Beta": 0.25}), SPEC)
    assert body["FusedActivation"] == {
        "Type": "ACTIVATION_HARD_SIGMOID",
        "Alpha": 0.20000000298023224,
        "Beta": 0.25,
    }


def test_non_finite_floats_are_written_as_the_strings_dxdispatch_reads():
    body = desc_json(mvn1(Epsilon=float("nan")), SPEC)
    assert body["Epsilon"] == "nan"
    assert read_desc_json("MEAN_VARIANCE_NORMALIZATION1", body, SPEC).members["Epsilon"] != 0.0
    # overflows the C FLOAT: the parser refuses it, a desc built in Python writes it as DirectML reads it
    assert desc_json(mvn1().replace(Epsilon=1e40), SPEC)["Epsilon"] == "inf"


@pytest.mark.parametrize(
    "members, why",
    [
        ({"AxisCount": 3}, "AxisCount = 3 but Axes has 2"),
        ({"FusedActivation": {"Type": "ACTIVATION_LINEAR", "Alpha": 1.0}}, "Beta is missing"),
        ({"OutputTensor": None}, "OutputTensor is required"),
        (
            {"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 3, 4], "DimensionCount": 3}},
            "DimensionCount 3",
        ),
        ({"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 3, 4], "Strides": [1, 1]}}, "Strides has 2"),
        ({"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 3, 4], "TotalTensorSizeInBytes": 0}}, "0"),
    ],
)
def test_descs_no_model_can_carry_are_refused(members, why):
    with pytest.raises(NotExpressible, match=why):
        desc_json(mvn1(**members), SPEC)


# --------------------------------------------------------------------------------------------
# The strict reader (the model checker)


def _model() -> dict:
    desc = mvn1(
        ScaleTensor={"DataType": "FLOAT32", "Sizes": [1, 2, 1, 1]},
        BiasTensor={"DataType": "FLOAT32", "Sizes": [1, 2, 1, 1]},
        FusedActivation={"Type": "ACTIVATION_LEAKY_RELU", "Alpha": 0.5},
    )
    inputs = {k: np.zeros(t.sizes, np.float32) for k, t in desc.tensors().items() if k != "OutputTensor"}
    model, _, _ = build_model([Call("execute", desc, inputs)], SPEC)
    return model


def _desc_of(model: dict) -> dict:
    return model["dispatchables"]["op0"]["desc"]


def test_the_checker_accepts_what_the_writer_writes():
    model = _model()
    read = read_model(load_json(json.dumps(model, allow_nan=False)), SPEC)
    assert read.dispatchables["op0"].desc.members["FusedActivation"].params == (("Alpha", 0.5),)
    assert [c.type for c in read.commands] == ["dispatch", "writeFile"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(ScaleTensor=None), "null"),
        (lambda d: d.update(FusedActivation=None), "null"),
        (lambda d: d.update(NormalizeVariance=1), "Expected a bool"),
        (lambda d: d.update(NormalizeVariance=0), "Expected a bool"),
        (lambda d: d.pop("AxisCount"), "Field 'AxisCount' is required"),
        (lambda d: d.update(AxisCount=3), "AxisCount: 3 but Axes has 2"),
        (lambda d: d["FusedActivation"].pop("Alpha"), "Field 'Alpha' is required"),
        (lambda d: d.update(Epsilonn=1e-5), "unknown member"),
        (lambda d: d["FusedActivation"].update(Beta=1.0), "unknown key"),
        (lambda d: d["InputTensor"].update(Stride=[1, 1, 1, 1]), "unknown tensor desc field"),
        (lambda d: d["InputTensor"].update(DataType="float32"), "unknown DML_TENSOR_DATA_TYPE"),
        (lambda d: d.update(Axes=[2, -1]), "Expected an unsigned integer"),
        (lambda d: d.pop("Epsilon"), "Field 'Epsilon' is required"),
    ],
)
def test_the_checker_rejects_what_dxdispatch_refuses_or_misreads(mutate, message):
    model = copy.deepcopy(_model())
    mutate(_desc_of(model))
    with pytest.raises(ModelError, match=message):
        read_model(model, SPEC)


def test_the_checker_rejects_non_strict_json_and_outer_mistakes():
    with pytest.raises(ValueError, match="strict JSON"):
        load_json('{"Epsilon": NaN}')
    model = copy.deepcopy(_model())
    del model["commands"]
    with pytest.raises(ModelError, match="Field 'commands' is required"):
        read_model(model, SPEC)
    model = copy.deepcopy(_model())
    model["commands"][0]["bindings"].pop("ScaleTensor")
    with pytest.raises(ModelError, match="ScaleTensor is in the desc but bound to nothing"):
        read_model(model, SPEC)
    model = copy.deepcopy(_model())
    model["commands"].append({"type": "copy", "resource": "OutputTensor"})
    with pytest.raises(ModelError, match="Unrecognized command"):
        read_model(model, SPEC)


# --------------------------------------------------------------------------------------------
# Buffers and layouts


LAYOUTS = {
    "padded": ((2, 3, 4), (20, 6, 1)),
    "permuted": ((2, 3, 4), (1, 2, 6)),
    "zero-stride": ((2, 3, 4), (0, 4, 1)),
    "packed": ((2, 3, 4), None),
}


@pytest.mark.parametrize("dtype", ["FLOAT32", "FLOAT16"])
@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_layouts_round_trip_exactly_through_files(tmp_path, kind, dtype):
    sizes, strides = LAYOUTS[kind]
    t = TensorDesc(dtype, sizes, strides)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(sizes).astype(buffers.npy_dtype(t))
    if kind == "zero-stride":
        x = np.broadcast_to(x[:1], sizes).copy()
    buf = buffers.input_buffer(x, t)
    last = sum((s - 1) * st for s, st in zip(sizes, t.effective_strides, strict=True))
    item = np.dtype(buffers.npy_dtype(t)).itemsize
    assert buf.size == math.ceil((((last + 1) * item + 3) // 4 * 4) / item)  # DMLCalcBufferTensorSize
    if kind == "zero-stride":
        assert buf.size < x.size  # the smaller buffer: one copy of the broadcast dimension
    used = np.zeros(buf.size, bool)
    used[[sum(i * s for i, s in zip(idx, t.effective_strides, strict=True)) for idx in np.ndindex(sizes)]] = (
        True
    )
    assert np.isnan(buf[~used].astype(np.float64)).all()  # the padding sentinel
    buffers.save_buffer(tmp_path / "b.npy", buf)
    raw = np.load(tmp_path / "b.npy")
    assert raw.dtype.str == ("<f4" if dtype == "FLOAT32" else "<f2") and raw.ndim == 1
    back = buffers.output_array(tmp_path / "b.npy", t)
    assert back.dtype == x.dtype and np.array_equal(back, x)


def test_strided_outputs_round_trip_through_an_emulated_dispatch(tmp_path):
    """Padded input, permuted and padded outputs: the files DxDispatch would write hold the
    reference's outputs at the strided positions and the NaN sentinel elsewhere."""
    desc = parse_desc(
        {
            "type": "BATCH_NORMALIZATION_TRAINING",
            "desc": {
                "InputTensor": {"DataType": "FLOAT16", "Sizes": [2, 3, 2, 2], "Strides": [20, 6, 3, 1]},
                "ScaleTensor": {"DataType": "FLOAT16", "Sizes": [1, 3, 1, 1], "Strides": [0, 1, 0, 0]},
                "BiasTensor": {"DataType": "FLOAT16", "Sizes": [1, 3, 1, 1]},
                "OutputTensor": {"DataType": "FLOAT16", "Sizes": [2, 3, 2, 2], "Strides": [1, 2, 7, 14]},
                "OutputMeanTensor": {"DataType": "FLOAT16", "Sizes": [1, 3, 1, 1], "Strides": [3, 2, 1, 1]},
                "OutputVarianceTensor": {"DataType": "FLOAT16", "Sizes": [1, 3, 1, 1]},
                "Epsilon": 0.001,
            },
        }
    )
    from dmlconform import execute
    from dmlconform.backends import load_backend

    rng = np.random.default_rng(0)
    inputs = {
        k: rng.standard_normal(t.sizes).astype(np.float16)
        for k, t in desc.tensors().items()
        if "Output" not in k
    }
    model, files, entries = build_model([Call("execute", desc, inputs)], SPEC)
    (tmp_path / "model.json").write_text(json.dumps(model, allow_nan=False))
    for name, buf in files.items():
        buffers.save_buffer(tmp_path / name, buf)
    em = Emulator(load_backend("reference", {"feature_level": "6_4"}), SPEC.level("6_4"), SPEC)
    code, log = run_model(tmp_path / "model.json", tmp_path, em)
    assert code == 0, log
    ref = execute(desc, inputs)
    for member, file in entries[0]["outputs"].items():
        t = desc.members[member]
        got = buffers.output_array(tmp_path / file, t)
        assert got.dtype == np.float16 and np.array_equal(got, ref[member])
        raw = np.load(tmp_path / file)
        assert raw.size == buffers.buffer_elements(t)
    out = np.load(tmp_path / "OutputTensor.npy")
    assert out.size == 28  # (1 + 2*2 + 7 + 14 + 1) elements, 54 bytes rounded up to 56
    assert np.isnan(out.astype(np.float32)).sum() == 28 - 24  # the padding kept its sentinel


@pytest.mark.parametrize(
    "write, message",
    [
        (lambda p: p.write_bytes(b"\x93NUMPY garbage"), "not a readable .npy"),
        (lambda p: np.save(p, np.zeros(30, np.float64)), "data type <f8"),
        (lambda p: np.save(p, np.zeros(3, np.float32)), "3 elements"),
    ],
)
def test_unusable_output_files_are_one_line_errors(tmp_path, write, message):
    t = TensorDesc("FLOAT32", (2, 3, 4), (20, 6, 1))
    path = tmp_path / "OutputTensor.npy"
    write(path)
    with pytest.raises(buffers.BufferError, match=message):
        buffers.output_array(path, t)
    with pytest.raises(buffers.BufferError, match="missing"):
        buffers.output_array(tmp_path / "absent.npy", t)
