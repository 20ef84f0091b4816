"""The DirectML packer (``dmlconform.backends.directml.pack``), checked byte by byte without Wine.

Everything expected here is written from Microsoft's ``DirectML.h`` (microsoft/DirectX-Headers,
``include/directx/DirectML.h``), not from the spec or the packer: the enum values, and the x64
layout of every struct the seven normalization operators use (natural alignment, 8-byte
pointers). A small decoder written for these tests follows the arena's relocations by hand:
a relocated 8-byte field is an offset into the arena, an unrelocated pointer field must be 0.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import helpers
import numpy as np
import pytest
from helpers import SPEC
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmlconform.backends.directml import pack
from dmlconform.backends.directml.pack import NO_BINDING, Unrepresentable
from dmlconform.errors import Unsupported
from dmlconform.generation.legal import legal_descs
from dmlconform.specification.desc import ActivationDesc, OperatorDesc, TensorDesc, parse_desc

# --------------------------------------------------------------------------------------------
# DirectML.h, written out by hand

#: enum DML_OPERATOR_TYPE (the seven operators of the suite).
OPERATOR_TYPE = {
    "BATCH_NORMALIZATION": 72,
    "MEAN_VARIANCE_NORMALIZATION": 73,
    "MEAN_VARIANCE_NORMALIZATION1": 115,
    "BATCH_NORMALIZATION_GRAD": 146,
    "BATCH_NORMALIZATION_TRAINING": 151,
    "BATCH_NORMALIZATION_TRAINING_GRAD": 152,
    "MEAN_VARIANCE_NORMALIZATION2": 171,
}
#: enum DML_OPERATOR_TYPE (fusable activations) and each DML_ACTIVATION_*_OPERATOR_DESC's FLOAT
#: members after its two tensor pointers, in struct order.
ACTIVATION = {
    "ACTIVATION_ELU": (35, ("Alpha",)),
    "ACTIVATION_HARD_SIGMOID": (37, ("Alpha", "Beta")),
    "ACTIVATION_IDENTITY": (38, ()),
    "ACTIVATION_LEAKY_RELU": (39, ("Alpha",)),
    "ACTIVATION_LINEAR": (40, ("Alpha", "Beta")),
    "ACTIVATION_PARAMETRIC_SOFTPLUS": (43, ("Alpha", "Beta")),
    "ACTIVATION_RELU": (44, ()),
    "ACTIVATION_SCALED_ELU": (45, ("Alpha", "Gamma")),
    "ACTIVATION_SCALED_TANH": (46, ("Alpha", "Beta")),
    "ACTIVATION_SIGMOID": (47, ()),
    "ACTIVATION_SOFTPLUS": (49, ("Steepness",)),
    "ACTIVATION_SOFTSIGN": (50, ()),
    "ACTIVATION_TANH": (51, ()),
    "ACTIVATION_THRESHOLDED_RELU": (52, ("Alpha",)),
    "ACTIVATION_SHRINK": (90, ("Bias", "Threshold")),
    "ACTIVATION_CELU": (128, ("Alpha",)),
    "ACTIVATION_GELU": (157, ()),
}
#: enum DML_TENSOR_DATA_TYPE, and the element size in bytes.
DATA_TYPE = {
    "UNKNOWN": (0, 0),
    "FLOAT32": (1, 4),
    "FLOAT16": (2, 2),
    "UINT32": (3, 4),
    "UINT16": (4, 2),
    "UINT8": (5, 1),
    "INT32": (6, 4),
    "INT16": (7, 2),
    "INT8": (8, 1),
    "FLOAT64": (9, 8),
    "UINT64": (10, 8),
    "INT64": (11, 8),
    "UINT4": (12, 0.5),
    "INT4": (13, 0.5),
}
#: enum DML_TENSOR_FLAGS.
TENSOR_FLAGS = {"NONE": 0, "OWNED_BY_DML": 1}
DML_TENSOR_TYPE_BUFFER = 1

T, U, B, F, P, A = "tensor", "uint", "bool", "float", "uint_array", "activation"
#: Each operator desc struct: sizeof and (member, offset, C type) in struct order.
STRUCTS: dict[str, tuple[int, tuple[tuple[str, int, str], ...]]] = {
    "BATCH_NORMALIZATION": (
        64,
        (
            ("InputTensor", 0, T),
            ("MeanTensor", 8, T),
            ("VarianceTensor", 16, T),
            ("ScaleTensor", 24, T),
            ("BiasTensor", 32, T),
            ("OutputTensor", 40, T),
            ("Spatial", 48, B),
            ("Epsilon", 52, F),
            ("FusedActivation", 56, A),
        ),
    ),
    "MEAN_VARIANCE_NORMALIZATION": (
        56,
        (
            ("InputTensor", 0, T),
            ("ScaleTensor", 8, T),
            ("BiasTensor", 16, T),
            ("OutputTensor", 24, T),
            ("CrossChannel", 32, B),
            ("NormalizeVariance", 36, B),
            ("Epsilon", 40, F),
            ("FusedActivation", 48, A),
        ),
    ),
    "MEAN_VARIANCE_NORMALIZATION1": (
        64,
        (
            ("InputTensor", 0, T),
            ("ScaleTensor", 8, T),
            ("BiasTensor", 16, T),
            ("OutputTensor", 24, T),
            ("AxisCount", 32, U),
            ("Axes", 40, P),
            ("NormalizeVariance", 48, B),
            ("Epsilon", 52, F),
            ("FusedActivation", 56, A),
        ),
    ),
    "MEAN_VARIANCE_NORMALIZATION2": (
        72,
        (
            ("InputTensor", 0, T),
            ("ScaleTensor", 8, T),
            ("BiasTensor", 16, T),
            ("OutputTensor", 24, T),
            ("AxisCount", 32, U),
            ("Axes", 40, P),
            ("UseMean", 48, B),
            ("UseVariance", 52, B),
            ("Epsilon", 56, F),
            ("FusedActivation", 64, A),
        ),
    ),
    "BATCH_NORMALIZATION_TRAINING": (
        72,
        (
            ("InputTensor", 0, T),
            ("ScaleTensor", 8, T),
            ("BiasTensor", 16, T),
            ("FusedAddTensor", 24, T),
            ("OutputTensor", 32, T),
            ("OutputMeanTensor", 40, T),
            ("OutputVarianceTensor", 48, T),
            ("Epsilon", 56, F),
            ("FusedActivation", 64, A),
        ),
    ),
}
_GRAD = (
    72,
    (
        ("InputTensor", 0, T),
        ("InputGradientTensor", 8, T),
        ("MeanTensor", 16, T),
        ("VarianceTensor", 24, T),
        ("ScaleTensor", 32, T),
        ("OutputGradientTensor", 40, T),
        ("OutputScaleGradientTensor", 48, T),
        ("OutputBiasGradientTensor", 56, T),
        ("Epsilon", 64, F),
    ),
)
STRUCTS["BATCH_NORMALIZATION_GRAD"] = _GRAD
STRUCTS["BATCH_NORMALIZATION_TRAINING_GRAD"] = _GRAD
#: The count member of each UINT array (_Field_size_(AxisCount)).
COUNT_OF = {"Axes": "AxisCount"}

OPERATORS = sorted(OPERATOR_TYPE)
OPERATOR_BY_VALUE = {v: k for k, v in OPERATOR_TYPE.items()}
ACTIVATION_BY_VALUE = {v: k for k, (v, _) in ACTIVATION.items()}


def _round_up(value: int, to: int) -> int:
    return -(-value // to) * to


def activation_struct_size(params: int) -> int:
    """sizeof(DML_ACTIVATION_X_OPERATOR_DESC): two pointers and ``params`` FLOATs, 8-aligned."""
    return _round_up(16 + 4 * params, 8)


def row_major(sizes: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], 1
    for s in reversed(sizes):
        out.append(step)
        step *= s
    return tuple(reversed(out))


def min_bytes(sizes: tuple[int, ...], strides: tuple[int, ...] | None, data_type: str) -> int:
    """DMLCalcBufferTensorSize (DirectML docs): bytes up to the last element, rounded up to 4."""
    if any(s == 0 for s in sizes):
        return 0
    strides = row_major(sizes) if strides is None else strides
    last = sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))
    return _round_up(math.ceil((last + 1) * DATA_TYPE[data_type][1]), 4)


# --------------------------------------------------------------------------------------------
# An independent decoder


@dataclass
class Reader:
    """Reads C structs out of a packed arena, following relocations by hand."""

    arena: bytes
    relocations: frozenset[int]
    followed: set[int] = field(default_factory=set)
    regions: list[tuple[int, int, str]] = field(default_factory=list)

    def u32(self, at: int) -> int:
        return struct.unpack_from("<I", self.arena, at)[0]

    def f32(self, at: int) -> float:
        return struct.unpack_from("<f", self.arena, at)[0]

    def u64(self, at: int) -> int:
        return struct.unpack_from("<Q", self.arena, at)[0]

    def ptr(self, at: int) -> int | None:
        """A pointer field: an arena offset when relocated, else it must hold NULL."""
        value = self.u64(at)
        if at not in self.relocations:
            assert value == 0, f"pointer field at {at} holds {value} but is not relocated"
            return None
        assert at not in self.followed, f"pointer field at {at} read twice"
        assert 0 <= value < len(self.arena), f"relocated pointer at {at} -> {value} is outside the arena"
        self.followed.add(at)
        return value

    def region(self, start: int, size: int, align: int, what: str) -> None:
        assert start % align == 0, f"{what} at {start} is not {align}-aligned"
        assert start + size <= len(self.arena), f"{what} [{start}, {start + size}) overruns the arena"
        if size:
            self.regions.append((start, size, what))

    def check_complete(self) -> None:
        """Every relocation was a pointer field the decoder reached, and no two structs overlap."""
        assert self.followed == set(self.relocations), (
            f"relocations never reached as pointer fields: {sorted(set(self.relocations) - self.followed)}"
        )
        spans = sorted(self.regions)
        for (a, size, what), (b, _, other) in itertools.pairwise(spans):
            assert a + size <= b, f"{what} at [{a}, {a + size}) overlaps {other} at {b}"


def decode_tensor(r: Reader, at: int) -> dict[str, Any] | None:
    desc = r.ptr(at)
    if desc is None:
        return None
    r.region(desc, 16, 8, "DML_TENSOR_DESC")
    assert r.u32(desc) == DML_TENSOR_TYPE_BUFFER
    buf = r.ptr(desc + 8)
    assert buf is not None, "DML_TENSOR_DESC.Desc is null"
    r.region(buf, 48, 8, "DML_BUFFER_TENSOR_DESC")
    rank = r.u32(buf + 8)
    sizes_at = r.ptr(buf + 16)
    assert sizes_at is not None, "Sizes is null"
    r.region(sizes_at, 4 * rank, 4, "Sizes")
    strides_at = r.ptr(buf + 24)
    strides = None
    if strides_at is not None:
        r.region(strides_at, 4 * rank, 4, "Strides")
        strides = struct.unpack_from(f"<{rank}I", r.arena, strides_at)
    return {
        "DataType": r.u32(buf),
        "Flags": r.u32(buf + 4),
        "DimensionCount": rank,
        "Sizes": struct.unpack_from(f"<{rank}I", r.arena, sizes_at),
        "Strides": strides,
        "TotalTensorSizeInBytes": r.u64(buf + 32),
        "GuaranteedBaseOffsetAlignment": r.u32(buf + 40),
    }


def decode_activation(r: Reader, at: int) -> dict[str, Any] | None:
    op = r.ptr(at)
    if op is None:
        return None
    r.region(op, 16, 8, "DML_OPERATOR_DESC (activation)")
    value = r.u32(op)
    assert value in ACTIVATION_BY_VALUE, f"fused activation Type {value} is not an activation"
    name = ACTIVATION_BY_VALUE[value]
    params = ACTIVATION[name][1]
    body = r.ptr(op + 8)
    assert body is not None
    r.region(body, activation_struct_size(len(params)), 8, name)
    return {
        "Type": value,
        "InputTensor": decode_tensor(r, body),
        "OutputTensor": decode_tensor(r, body + 8),
        **{p: r.f32(body + 16 + 4 * i) for i, p in enumerate(params)},
    }


def decode(packed: pack.Packed) -> tuple[str, dict[str, Any]]:
    """The operator and its members as DirectML would read them from ``packed``."""
    r = Reader(packed.arena, frozenset(packed.relocations))
    assert len(set(packed.relocations)) == len(packed.relocations), "a relocation is listed twice"
    r.region(0, 16, 8, "DML_OPERATOR_DESC")
    op_type = r.u32(0)
    assert op_type in OPERATOR_BY_VALUE, f"Type {op_type} is none of the seven operators"
    name = OPERATOR_BY_VALUE[op_type]
    size, fields = STRUCTS[name]
    body = r.ptr(8)
    assert body is not None, "DML_OPERATOR_DESC.Desc is null"
    r.region(body, size, 8, f"DML_{name}_OPERATOR_DESC")
    out: dict[str, Any] = {"Type": op_type}
    for member, offset, ctype in fields:
        at = body + offset
        if ctype == T:
            out[member] = decode_tensor(r, at)
        elif ctype == A:
            out[member] = decode_activation(r, at)
        elif ctype in (U, B):
            out[member] = r.u32(at)
        elif ctype == F:
            out[member] = r.f32(at)
        elif ctype == P:
            count = out[COUNT_OF[member]]
            array = r.ptr(at)
            if array is None:
                out[member] = None
            else:
                r.region(array, 4 * count, 4, member)
                out[member] = struct.unpack_from(f"<{count}I", r.arena, array)
    r.check_complete()
    return name, out


# --------------------------------------------------------------------------------------------
# What the decoder must read back, from the desc and the header tables


def expected_tensor(t: TensorDesc | None) -> dict[str, Any] | None:
    if t is None:
        return None
    total = t.total_tensor_size_in_bytes
    if total is None:
        total = min_bytes(t.sizes, t.strides, t.data_type)
    return {
        "DataType": DATA_TYPE[t.data_type][0],
        "Flags": TENSOR_FLAGS[t.flags or "NONE"],
        "DimensionCount": len(t.sizes) if t.dimension_count is None else t.dimension_count,
        "Sizes": tuple(t.sizes),
        "Strides": None if t.strides is None else tuple(t.strides),
        "TotalTensorSizeInBytes": total,
        "GuaranteedBaseOffsetAlignment": t.guaranteed_base_offset_alignment or 0,
    }


def f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def spec_default(op: str, member: str) -> Any:
    m = SPEC.operator(op).member(member)
    return None if m is None else m.default


def expected(desc: OperatorDesc) -> dict[str, Any]:
    op = desc.operator
    out: dict[str, Any] = {"Type": OPERATOR_TYPE[op]}
    for member, _, ctype in STRUCTS[op][1]:
        value = desc.members.get(member)
        if ctype == T:
            out[member] = expected_tensor(value)
        elif ctype == U:
            if value is None and member == "AxisCount":
                value = len(desc.members["Axes"])
            out[member] = value
        elif ctype == B:
            out[member] = int(value)
        elif ctype == F:
            out[member] = f32(spec_default(op, member) if value is None else value)
        elif ctype == P:
            out[member] = tuple(value)
        elif ctype == A:
            if value is None:
                out[member] = None
                continue
            type_value, params = ACTIVATION[value.type]
            written = dict(value.params)
            defaults = {p.name: p.default for p in SPEC.activations[value.type].parameters}
            out[member] = {
                "Type": type_value,
                "InputTensor": expected_tensor(value.input_tensor),
                "OutputTensor": expected_tensor(value.output_tensor),
                **{p: f32(written.get(p, defaults[p])) for p in params},
            }
    return out


def expected_bindings(desc: OperatorDesc) -> tuple[tuple, tuple]:
    """Tensor members in struct order; DirectML's outputs are the ``Output*`` tensors."""
    tensors = [m for m, _, ctype in STRUCTS[desc.operator][1] if ctype == T]

    def size(name: str) -> int:
        t = desc.members.get(name)
        return NO_BINDING if t is None else expected_tensor(t)["TotalTensorSizeInBytes"]

    inputs = tuple((n, size(n)) for n in tensors if not n.startswith("Output"))
    outputs = tuple((n, size(n)) for n in tensors if n.startswith("Output"))
    return inputs, outputs


# --------------------------------------------------------------------------------------------
# Descs

F32_4D = {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5]}


def mvn1(**members: Any) -> OperatorDesc:
    return helpers.mvn1(**members)


def without(desc: OperatorDesc, *names: str) -> OperatorDesc:
    return desc.replace(**dict.fromkeys(names, ...))


# --------------------------------------------------------------------------------------------
# Byte-level layout


def test_constants_match_directml_h() -> None:
    assert NO_BINDING == 0xFFFF_FFFF_FFFF_FFFF
    assert pack.TENSOR_TYPE_BUFFER == DML_TENSOR_TYPE_BUFFER
    assert issubclass(Unrepresentable, Unsupported)


def test_mvn1_struct_layout_by_hand() -> None:
    """DML_OPERATOR_DESC at 0 -> DML_MEAN_VARIANCE_NORMALIZATION1_OPERATOR_DESC, read at the
    header's offsets, every pointer followed through the relocation list by hand."""
    desc = mvn1(
        InputTensor={"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5]},
        ScaleTensor={"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1], "Flags": "OWNED_BY_DML"},
        BiasTensor={"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1], "TotalTensorSizeInBytes": 64},
        OutputTensor={
            "DataType": "FLOAT32",
            "Sizes": [2, 3, 4, 5],
            "Strides": [64, 20, 5, 1],
            "GuaranteedBaseOffsetAlignment": 16,
        },
        Axes=[1, 3],
        NormalizeVariance=False,
        Epsilon=0.25,
        FusedActivation={"Type": "ACTIVATION_LINEAR", "Alpha": 1.5, "Beta": -2.0},
    )
    packed = pack.pack(desc, SPEC)
    a, relocs = packed.arena, set(packed.relocations)
    u32 = lambda at: struct.unpack_from("<I", a, at)[0]  # noqa: E731
    u64 = lambda at: struct.unpack_from("<Q", a, at)[0]  # noqa: E731

    # DML_OPERATOR_DESC {Type; pad; Desc}
    assert u32(0) == 115
    assert u32(4) == 0
    assert 8 in relocs
    body = u64(8)
    assert body % 8 == 0 and body >= 16 and body + 64 <= len(a)

    # DML_MEAN_VARIANCE_NORMALIZATION1_OPERATOR_DESC
    for off in (0, 8, 16, 24, 40, 56):
        assert body + off in relocs, f"pointer member at offset {off} is not relocated"
    for off in (32, 48, 52):
        assert body + off not in relocs, f"non-pointer member at offset {off} is relocated"
    assert u32(body + 32) == 2  # AxisCount
    axes = u64(body + 40)
    assert struct.unpack_from("<2I", a, axes) == (1, 3)
    assert u32(body + 48) == 0  # NormalizeVariance FALSE
    assert struct.unpack_from("<f", a, body + 52)[0] == 0.25
    assert struct.unpack_from("<I", a, body + 52)[0] == 0x3E800000  # 0.25 as an IEEE float32

    def buffer_desc(member_offset: int) -> int:
        tensor = u64(body + member_offset)
        assert u32(tensor) == DML_TENSOR_TYPE_BUFFER
        assert tensor + 8 in relocs
        return u64(tensor + 8)

    out = buffer_desc(24)
    assert u32(out + 0) == 1  # FLOAT32
    assert u32(out + 4) == 0  # no flags
    assert u32(out + 8) == 4
    assert out + 16 in relocs and out + 24 in relocs
    assert struct.unpack_from("<4I", a, u64(out + 16)) == (2, 3, 4, 5)
    assert struct.unpack_from("<4I", a, u64(out + 24)) == (64, 20, 5, 1)
    assert u64(out + 32) == 4 * (64 + 2 * 20 + 3 * 5 + 4 + 1)  # 496, already a multiple of 4
    assert u32(out + 40) == 16

    inp = buffer_desc(0)
    assert u64(inp + 24) == 0 and inp + 24 not in relocs  # Strides omitted: NULL
    assert u64(inp + 32) == 2 * 3 * 4 * 5 * 4

    scale = buffer_desc(8)
    assert u32(scale + 4) == 1  # DML_TENSOR_FLAG_OWNED_BY_DML
    assert u64(scale + 32) == 12
    assert u64(buffer_desc(16) + 32) == 64  # TotalTensorSizeInBytes as written

    # FusedActivation: DML_OPERATOR_DESC {ACTIVATION_LINEAR, -> {NULL, NULL, Alpha, Beta}}
    act = u64(body + 56)
    assert u32(act) == 40
    assert act + 8 in relocs
    linear = u64(act + 8)
    assert u64(linear) == 0 and u64(linear + 8) == 0
    assert linear not in relocs and linear + 8 not in relocs
    assert struct.unpack_from("<2f", a, linear + 16) == (1.5, -2.0)

    assert decode(packed) == ("MEAN_VARIANCE_NORMALIZATION1", expected(desc))


def test_null_optional_members_are_zero_and_never_relocated() -> None:
    desc = mvn1()
    packed = pack.pack(desc, SPEC)
    body = struct.unpack_from("<Q", packed.arena, 8)[0]
    for off in (8, 16, 56):  # ScaleTensor, BiasTensor, FusedActivation
        assert struct.unpack_from("<Q", packed.arena, body + off)[0] == 0
        assert body + off not in packed.relocations
    # root, InputTensor, OutputTensor, Axes; per tensor: Desc and Sizes (no Strides)
    assert len(packed.relocations) == 4 + 2 * 2
    assert decode(packed) == ("MEAN_VARIANCE_NORMALIZATION1", expected(desc))


def test_batch_normalization_training_layout() -> None:
    """Epsilon at 56 and FusedActivation at 64 in a 72-byte struct (the doc's layout), seven
    tensor pointers before them, a fused ReLU with two null tensors and no parameters."""
    x = {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 4]}
    c = {"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1]}
    desc = parse_desc(
        {
            "type": "BATCH_NORMALIZATION_TRAINING",
            "desc": {
                "InputTensor": x,
                "ScaleTensor": c,
                "BiasTensor": c,
                "FusedAddTensor": x,
                "OutputTensor": x,
                "OutputMeanTensor": c,
                "OutputVarianceTensor": c,
                "Epsilon": 0.125,
                "FusedActivation": {"Type": "ACTIVATION_RELU"},
            },
        }
    )
    packed = pack.pack(desc, SPEC)
    a = packed.arena
    assert struct.unpack_from("<I", a, 0)[0] == 151
    body = struct.unpack_from("<Q", a, 8)[0]
    for i in range(7):
        assert body + 8 * i in packed.relocations
    assert struct.unpack_from("<f", a, body + 56)[0] == 0.125
    assert body + 56 not in packed.relocations
    assert body + 64 in packed.relocations
    act = struct.unpack_from("<Q", a, body + 64)[0]
    assert struct.unpack_from("<I", a, act)[0] == 44
    relu = struct.unpack_from("<Q", a, act + 8)[0]
    assert struct.unpack_from("<2Q", a, relu) == (0, 0)
    assert decode(packed) == ("BATCH_NORMALIZATION_TRAINING", expected(desc))

    without_add = without(desc, "FusedAddTensor", "FusedActivation")
    packed = pack.pack(without_add, SPEC)
    body = struct.unpack_from("<Q", packed.arena, 8)[0]
    assert struct.unpack_from("<Q", packed.arena, body + 24)[0] == 0
    assert struct.unpack_from("<Q", packed.arena, body + 64)[0] == 0
    assert decode(packed) == ("BATCH_NORMALIZATION_TRAINING", expected(without_add))


@pytest.mark.parametrize("activation", sorted(ACTIVATION))
def test_every_fused_activation(activation: str) -> None:
    """Each activation's Type and its parameters (as written, else the doc's defaults) from 16."""
    type_value, params = ACTIVATION[activation]
    written = {p: 0.75 + i for i, p in enumerate(params)}
    defaults = {p.name: p.default for p in SPEC.activations[activation].parameters}
    cases = [({"Type": activation, **written}, written)]
    if all(defaults[p] is not None for p in params):  # no default: see test_unrepresentable
        cases.append(({"Type": activation}, {p: defaults[p] for p in params}))
    for act, values in cases:
        desc = mvn1(FusedActivation=act)
        _, got = decode(pack.pack(desc, SPEC))
        assert got["FusedActivation"]["Type"] == type_value
        assert {p: got["FusedActivation"][p] for p in params} == {p: f32(v) for p, v in values.items()}
        assert got["FusedActivation"] == expected(desc)["FusedActivation"]


def test_struct_sizes_leave_no_overlap() -> None:
    """Each struct is followed by what comes next only after its full sizeof: a packer that
    laid MVN2 out as 64 bytes would put the FusedActivation pointer on top of the next struct."""
    x = {"DataType": "FLOAT16", "Sizes": [1, 2, 3]}
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION2",
            "desc": {
                "InputTensor": x,
                "ScaleTensor": x,
                "BiasTensor": x,
                "OutputTensor": x,
                "Axes": [2],
                "UseMean": True,
                "UseVariance": False,
                "Epsilon": 0.5,
                "FusedActivation": {"Type": "ACTIVATION_SCALED_ELU", "Alpha": 2.0},
            },
        }
    )
    name, got = decode(pack.pack(desc, SPEC))  # decode() asserts no overlap and full coverage
    assert name == "MEAN_VARIANCE_NORMALIZATION2"
    assert got == expected(desc)
    assert got["UseMean"] == 1 and got["UseVariance"] == 0 and got["Epsilon"] == 0.5
    assert got["FusedActivation"]["Gamma"] == f32(1.0507010221481323)  # the doc's default


def test_every_relocation_points_inside_the_arena() -> None:
    for op in OPERATORS:
        for desc in legal_descs(op, "6_4", seed=3, count=6, spec=SPEC):
            packed = pack.pack(desc, SPEC)
            for at in packed.relocations:
                assert at >= 0 and at + 8 <= len(packed.arena)
                target = struct.unpack_from("<Q", packed.arena, at)[0]
                assert 0 < target < len(packed.arena), f"{op}: relocation at {at} -> {target}"


def test_uint_boundaries_fit() -> None:
    """2^32 - 1 is still a UINT, and TotalTensorSizeInBytes is a UINT64."""
    desc = mvn1(
        OutputTensor={
            "DataType": "FLOAT32",
            "Sizes": [2, 3, 4, 5],
            "TotalTensorSizeInBytes": 2**40,
            "GuaranteedBaseOffsetAlignment": 2**32 - 1,
        },
        Axes=[2**32 - 1],
    )
    _, got = decode(pack.pack(desc, SPEC))
    assert got["OutputTensor"]["TotalTensorSizeInBytes"] == 2**40
    assert got["OutputTensor"]["GuaranteedBaseOffsetAlignment"] == 2**32 - 1
    assert got["Axes"] == (2**32 - 1,)


# --------------------------------------------------------------------------------------------
# Bindings


def test_bindings_in_struct_order_with_no_binding_for_null() -> None:
    desc = mvn1(
        InputTensor={"DataType": "FLOAT16", "Sizes": [1, 1, 1, 3]},
        BiasTensor={"DataType": "FLOAT16", "Sizes": [1, 1, 1, 3], "Strides": [0, 0, 0, 5]},
        OutputTensor={"DataType": "FLOAT16", "Sizes": [1, 1, 1, 3], "TotalTensorSizeInBytes": 100},
    )
    packed = pack.pack(desc, SPEC)
    assert packed.inputs == (("InputTensor", 8), ("ScaleTensor", NO_BINDING), ("BiasTensor", 24))
    # 3 FLOAT16 = 6 bytes -> 8; strides 5: last element 10 -> 11 * 2 = 22 -> 24
    assert packed.outputs == (("OutputTensor", 100),)
    assert packed.owned == frozenset()


def test_bindings_of_the_gradient_operators() -> None:
    x = {"DataType": "FLOAT32", "Sizes": [2, 3, 2, 2]}
    c = {"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1]}
    co = {**c, "Flags": "OWNED_BY_DML"}
    for op in ("BATCH_NORMALIZATION_GRAD", "BATCH_NORMALIZATION_TRAINING_GRAD"):
        desc = parse_desc(
            {
                "type": op,
                "desc": {
                    "InputTensor": x,
                    "InputGradientTensor": x,
                    "MeanTensor": co,
                    "VarianceTensor": c,
                    "ScaleTensor": co,
                    "OutputGradientTensor": x,
                    "OutputScaleGradientTensor": c,
                    "OutputBiasGradientTensor": c,
                    "Epsilon": 1e-3,
                },
            }
        )
        packed = pack.pack(desc, SPEC)
        assert packed.inputs == (
            ("InputTensor", 96),
            ("InputGradientTensor", 96),
            ("MeanTensor", 12),
            ("VarianceTensor", 12),
            ("ScaleTensor", 12),
        )
        assert packed.outputs == (
            ("OutputGradientTensor", 96),
            ("OutputScaleGradientTensor", 12),
            ("OutputBiasGradientTensor", 12),
        )
        assert packed.owned == frozenset({"MeanTensor", "ScaleTensor"})
        assert (packed.inputs, packed.outputs) == expected_bindings(desc)


def test_owned_flag_is_packed_and_listed() -> None:
    desc = mvn1(
        ScaleTensor={"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1], "Flags": "OWNED_BY_DML"},
        BiasTensor={"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1], "Flags": "NONE"},
    )
    packed = pack.pack(desc, SPEC)
    assert packed.owned == frozenset({"ScaleTensor"})
    _, got = decode(packed)
    assert got["ScaleTensor"]["Flags"] == 1
    assert got["BiasTensor"]["Flags"] == 0


# --------------------------------------------------------------------------------------------
# What C cannot say


def _tensor(**extra: Any) -> dict[str, Any]:
    return {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5], **extra}


UNREPRESENTABLE = {
    "DimensionCount below len(Sizes)": lambda: mvn1(InputTensor=_tensor(DimensionCount=3)),
    "DimensionCount above len(Sizes)": lambda: mvn1(OutputTensor=_tensor(DimensionCount=5)),
    "len(Strides) != DimensionCount": lambda: mvn1(InputTensor=_tensor(Strides=[20, 5, 1])),
    "Strides vs explicit DimensionCount": lambda: mvn1(
        InputTensor=_tensor(DimensionCount=4, Strides=[60, 20, 5, 1, 1])
    ),
    "AxisCount above len(Axes)": lambda: mvn1(AxisCount=3),
    "AxisCount below len(Axes)": lambda: mvn1(AxisCount=1, Axes=[2, 3]),
    "NormalizeVariance omitted": lambda: without(mvn1(), "NormalizeVariance"),
    "Axes omitted": lambda: without(mvn1(), "Axes"),
    "MVN UseMean omitted": lambda: parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION2",
            "desc": {"InputTensor": _tensor(), "OutputTensor": _tensor(), "Axes": [3], "UseVariance": True},
        }
    ),
    "BN Epsilon omitted (no default)": lambda: parse_desc(
        {
            "type": "BATCH_NORMALIZATION_GRAD",
            "desc": {
                name: _tensor()
                for name in (
                    "InputTensor",
                    "InputGradientTensor",
                    "MeanTensor",
                    "VarianceTensor",
                    "ScaleTensor",
                    "OutputGradientTensor",
                    "OutputScaleGradientTensor",
                    "OutputBiasGradientTensor",
                )
            },
        }
    ),
    "LINEAR without Alpha": lambda: mvn1(FusedActivation={"Type": "ACTIVATION_LINEAR", "Beta": 1.0}),
    "PARAMETRIC_SOFTPLUS without Beta": lambda: mvn1(
        FusedActivation={"Type": "ACTIVATION_PARAMETRIC_SOFTPLUS", "Alpha": 1.0}
    ),
    # values the parser refuses (desc.py: their C fields cannot hold them), made past it: the
    # packer stays the last guard for descs built in Python
    "a Sizes entry of 2^32": lambda: _past_parser("InputTensor", sizes=(2, 3, 4, 2**32)),
    "a Strides entry of 2^32": lambda: _past_parser("InputTensor", strides=(2**32, 20, 5, 1)),
    "an axis of 2^32": lambda: mvn1().replace(Axes=(2, 2**32)),
    "GuaranteedBaseOffsetAlignment of 2^32": lambda: _past_parser(
        "OutputTensor", guaranteed_base_offset_alignment=2**32
    ),
    "DimensionCount of 2^32": lambda: _past_parser("InputTensor", dimension_count=2**32),
}


def _past_parser(member: str, **fields: Any) -> OperatorDesc:
    desc = mvn1()
    return desc.replace(**{member: dataclasses.replace(desc.members[member], **fields)})


@pytest.mark.parametrize("case", sorted(UNREPRESENTABLE))
def test_unrepresentable(case: str) -> None:
    desc = UNREPRESENTABLE[case]()
    with pytest.raises(Unrepresentable):
        pack.pack(desc, SPEC)


@pytest.mark.parametrize(
    "members",
    [
        {"Epsilon": 1e39},
        {"FusedActivation": ActivationDesc("ACTIVATION_LINEAR", (("Alpha", -1e39), ("Beta", 0.0)))},
    ],
    ids=["Epsilon", "activation-Alpha"],
)
def test_float_overflowing_float32_is_unrepresentable(members: dict[str, Any]) -> None:
    with pytest.raises(Unrepresentable):  # made past the parser, which refuses them
        pack.pack(mvn1().replace(**members), SPEC)


def test_infinite_float_is_representable() -> None:
    _, got = decode(pack.pack(mvn1(Epsilon=float("inf")), SPEC))
    assert got["Epsilon"] == float("inf")


# --------------------------------------------------------------------------------------------
# Every legal desc of every operator


LEVELS_OF = {op: [lv.name for lv in SPEC.levels_from(SPEC.operator(op))] for op in OPERATORS}


def _check_round_trip(desc: OperatorDesc) -> None:
    packed = pack.pack(desc, SPEC)
    name, got = decode(packed)
    assert name == desc.operator
    assert got["Type"] == SPEC.operator(desc.operator).operator_type == OPERATOR_TYPE[desc.operator]
    for member, t in desc.tensors().items():
        assert got[member]["DataType"] == DATA_TYPE[t.data_type][0]
        assert got[member]["DataType"] == SPEC.data_types[t.data_type].value
    assert got == expected(desc)
    assert (packed.inputs, packed.outputs) == expected_bindings(desc)
    assert packed.owned == {n for n, t in desc.tensors().items() if t.flags == "OWNED_BY_DML"}


@pytest.mark.parametrize("op", OPERATORS)
def test_legal_descs_pack_and_decode(op: str) -> None:
    levels = LEVELS_OF[op]
    assert levels, f"{op} has no feature level"
    for level in {levels[0], levels[-1]}:
        descs = list(legal_descs(op, level, seed=0, count=12, spec=SPEC))
        assert descs
        for desc in descs:
            _check_round_trip(desc)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), op=st.sampled_from(OPERATORS), seed=st.integers(0, 2**20))
def test_legal_descs_property(data: st.DataObject, op: str, seed: int) -> None:
    level = data.draw(st.sampled_from(LEVELS_OF[op]), label="level")
    for desc in legal_descs(op, level, seed=seed, count=3, spec=SPEC):
        _check_round_trip(desc)


# --------------------------------------------------------------------------------------------
# Input and output buffers

ITEM = {"FLOAT16": np.dtype("<f2"), "FLOAT32": np.dtype("<f4")}


@st.composite
def layouts(draw: st.DrawFn) -> tuple[TensorDesc, np.ndarray, int]:
    """A tensor (packed, padded, permuted or broadcast strides), logical data that a strided
    buffer can hold (equal along zero-stride dims), and the binding's byte size."""
    data_type = draw(st.sampled_from(["FLOAT16", "FLOAT32"]))
    rank = draw(st.integers(1, 5))
    sizes = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    kind = draw(st.sampled_from(["packed", "padded", "permuted", "zero"]))
    strides: tuple[int, ...] | None
    if kind == "packed":
        strides = draw(st.sampled_from([None, row_major(sizes)]))
    elif kind == "padded":
        pads = draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
        out, step = [], 1
        for s, pad in zip(reversed(sizes), pads, strict=True):
            out.append(step)
            step *= s + pad
        strides = tuple(reversed(out))
    elif kind == "permuted":
        order = draw(st.permutations(list(range(rank))))  # order[-1] innermost
        out_map, step = {}, 1
        for dim in reversed(order):
            out_map[dim] = step
            step *= sizes[dim]
        strides = tuple(out_map[d] for d in range(rank))
    else:
        zero = draw(st.lists(st.booleans(), min_size=rank, max_size=rank).filter(any))
        strides = tuple(0 if z else st_ for z, st_ in zip(zero, row_major(sizes), strict=True))
    extra = draw(st.sampled_from([None, 0, 4, 12]))
    minimum = min_bytes(sizes, strides, data_type)
    total = None if extra is None else minimum + extra
    tensor = TensorDesc(data_type, sizes, strides, total_tensor_size_in_bytes=total)
    # values exact in FLOAT16, constant along zero-stride dims
    seed = draw(st.integers(0, 2**32 - 1))
    eff = strides or row_major(sizes)
    small = tuple(1 if st_ == 0 else s for s, st_ in zip(sizes, eff, strict=True))
    rng = np.random.default_rng(seed)
    values = rng.integers(-512, 512, size=small).astype(np.float64) / 8
    array = np.broadcast_to(values, sizes).astype(ITEM[data_type].newbyteorder("="))
    return tensor, array, minimum if total is None else total


def positions(sizes: tuple[int, ...], strides: tuple[int, ...]) -> dict[tuple[int, ...], int]:
    return {idx: sum(i * s for i, s in zip(idx, strides, strict=True)) for idx in np.ndindex(*sizes)}


@settings(max_examples=150, deadline=None)
@given(case=layouts())
def test_input_buffer_places_elements_and_pads_with_nan(case: tuple[TensorDesc, np.ndarray, int]) -> None:
    tensor, array, nbytes = case
    buf = pack.input_buffer(array, tensor, nbytes)
    assert isinstance(buf, bytes)
    assert len(buf) == nbytes
    flat = np.frombuffer(buf, dtype=ITEM[tensor.data_type])
    strides = tensor.strides or row_major(tensor.sizes)
    where = positions(tensor.sizes, strides)
    for idx, k in where.items():
        assert flat[k] == array[idx], f"element {idx} at {k}"
    padding = np.ones(flat.size, dtype=bool)
    padding[list(where.values())] = False
    assert np.isnan(flat[padding]).all(), "padding is not NaN"


@settings(max_examples=150, deadline=None)
@given(case=layouts())
def test_output_array_reads_strided_elements(case: tuple[TensorDesc, np.ndarray, int]) -> None:
    tensor, array, nbytes = case
    dtype = ITEM[tensor.data_type]
    # a returned binding written by hand: 0xFF everywhere (the runner's prefill), then elements
    raw = bytearray(b"\xff" * nbytes)
    strides = tensor.strides or row_major(tensor.sizes)
    for idx, k in positions(tensor.sizes, strides).items():
        raw[k * dtype.itemsize : (k + 1) * dtype.itemsize] = np.array(array[idx], dtype=dtype).tobytes()
    got = pack.output_array(bytes(raw), tensor)
    assert got.shape == tensor.sizes
    assert got.dtype == dtype.newbyteorder("=")
    np.testing.assert_array_equal(got, array)
    # and the round trip through input_buffer
    np.testing.assert_array_equal(pack.output_array(pack.input_buffer(array, tensor, nbytes), tensor), array)


@pytest.mark.parametrize("data_type", ["FLOAT16", "FLOAT32"])
def test_unwritten_output_reads_nan(data_type: str) -> None:
    tensor = TensorDesc(data_type, (2, 3), (8, 2))
    nbytes = min_bytes(tensor.sizes, tensor.strides, data_type)
    got = pack.output_array(b"\xff" * nbytes, tensor)
    assert got.shape == (2, 3) and np.isnan(got).all()


def test_output_array_refuses_a_short_binding() -> None:
    tensor = TensorDesc("FLOAT32", (2, 3))
    with pytest.raises(ValueError):
        pack.output_array(b"\0" * 20, tensor)


def test_input_buffers_in_binding_order() -> None:
    desc = mvn1(
        InputTensor={"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]},
        BiasTensor={"DataType": "FLOAT32", "Sizes": [1, 1, 1, 2], "Strides": [0, 0, 0, 2]},
        OutputTensor={"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]},
    )
    packed = pack.pack(desc, SPEC)
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    bias = np.array([[[[5.0, 6.0]]]], dtype=np.float32)
    buffers = pack.input_buffers(packed, desc, {"InputTensor": x, "BiasTensor": bias})
    assert len(buffers) == 3
    assert buffers[0] == struct.pack("<4f", 0, 1, 2, 3)
    assert buffers[1] is None  # ScaleTensor: no binding
    got = struct.unpack("<3f", buffers[2])  # stride 2: elements 0 and 2, NaN between
    assert got[0] == 5.0 and got[2] == 6.0 and math.isnan(got[1])
    with pytest.raises(ValueError, match="BiasTensor"):
        pack.input_buffers(packed, desc, {"InputTensor": x})
