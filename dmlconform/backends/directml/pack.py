"""A desc -> the bytes of DirectML's C structs, driven by the spec alone.

The runner (``runner.c``) names no operator: it receives an *arena*, one byte string holding the
DML_OPERATOR_DESC at offset 0 and everything it points to, in which every pointer is written as
an arena offset, plus the list of where those pointers sit. It relocates them and calls
CreateOperator. So what a struct looks like comes from the spec: the operator's DML_OPERATOR_TYPE
(``operator_type``), its members in struct order with their spec types, the data types' and
activations' enum values. Each spec member type has one C type here (``tensor`` a
``const DML_TENSOR_DESC*``, ``bool`` a BOOL, ``uint_array`` a ``const UINT*``, ...): that is the
ABI of the member type, the same for every operator, with natural alignment and 8-byte pointers
as DirectML's x64 build lays them out.

A desc is packed as written, illegal ones too (that is how the runner asks DirectML whether it
accepts them): an omitted tensor is a null pointer. What a C struct cannot say is refused with
:class:`Unrepresentable` instead of being guessed at: an omitted BOOL, UINT or FLOAT (C has no
"absent" number), an array whose length disagrees with its count member (C arrays carry no
length: DirectML reads AxisCount entries, or DimensionCount Sizes and Strides, whatever the desc
file listed), an activation parameter with no value, a value that overflows its field. Those
rules belong to the desc format, and DirectML cannot be asked about them.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from dmlconform.backends.directml.client import MODE_EXECUTE, Runner, RunReply
from dmlconform.errors import Unsupported
from dmlconform.specification import layout
from dmlconform.specification.desc import (
    ActivationDesc,
    OperatorDesc,
    TensorDesc,
    minimum_implied_size_in_bytes,
)
from dmlconform.specification.spec import Member, Operator, Spec

#: DML_TENSOR_TYPE_BUFFER (DirectML.h, enum DML_TENSOR_TYPE).
TENSOR_TYPE_BUFFER = 1
#: A binding the runner leaves as DML_BINDING_TYPE_NONE (a null optional tensor).
NO_BINDING = 2**64 - 1

_FORMATS = {"u32": ("<I", 4), "f32": ("<f", 4), "u64": ("<Q", 8), "ptr": ("<Q", 8)}


class Unrepresentable(Unsupported):
    """A desc that DirectML's C structs cannot express (see the module docstring)."""


class Arena:
    """A growing byte string of C structs whose pointers are offsets into it."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.relocations: list[int] = []

    def reserve(self, size: int, align: int = 8) -> int:
        start = -len(self.data) % align + len(self.data)
        self.data.extend(b"\0" * (start + size - len(self.data)))
        return start

    def struct(self, fields: list[tuple[str, float | int | None]]) -> int:
        """Lay out ``fields`` (C type, value) with natural alignment; a ``ptr`` value is an arena
        offset or None (NULL). Returns the struct's offset."""
        offsets, size, align = [], 0, 4
        for ctype, _ in fields:
            _, width = _FORMATS[ctype]
            size = -size % width + size
            offsets.append(size)
            size += width
            align = max(align, width)
        size = -size % align + size
        base = self.reserve(size, align)
        for (ctype, value), off in zip(fields, offsets, strict=True):
            fmt, _ = _FORMATS[ctype]
            if ctype == "ptr":
                if value is None:
                    continue
                self.relocations.append(base + off)
            struct.pack_into(fmt, self.data, base + off, value)
        return base

    def uints(self, values: tuple[int, ...]) -> int:
        count = max(len(values), 1)
        for v in values:
            _fits(v, 32, "array element")
        base = self.reserve(4 * count, 8)
        struct.pack_into(f"<{len(values)}I", self.data, base, *values)
        return base


@dataclass(frozen=True)
class Packed:
    """What the runner needs for one desc: the arena, its relocations, and the buffer size of
    each input and output binding in DirectML's binding order (``NO_BINDING`` for a null one);
    ``owned`` names the inputs flagged OWNED_BY_DML (bound to the initializer instead)."""

    arena: bytes
    relocations: tuple[int, ...]
    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]
    owned: frozenset[str] = frozenset()


def _fits(value: int, bits: int, what: str, reserved: int | None = None) -> int:
    """A C unsigned integer field holds the value, or the desc cannot be put to DirectML at all
    (``reserved``: a value the protocol keeps for itself, NO_BINDING for buffer sizes)."""
    if not 0 <= value < 1 << bits or value == reserved:
        raise Unrepresentable(f"{what} {value} does not fit a {bits}-bit unsigned C field")
    return value


def _f32(value: float, what: str) -> float:
    """A value a C FLOAT can hold (NaN and infinities are FLOATs too), or Unrepresentable."""
    try:
        struct.pack("<f", value)
    except OverflowError:
        raise Unrepresentable(f"{what} {value!r} does not fit a 32-bit C FLOAT") from None
    return value


def _u32(value: object) -> int:
    return _fits(int(value), 32, "value") if isinstance(value, (int, bool)) else 0


def tensor_bytes(tensor: TensorDesc, spec: Spec) -> int:
    """TotalTensorSizeInBytes as written, else what DMLCalcBufferTensorSize gives."""
    if tensor.total_tensor_size_in_bytes is not None:
        return tensor.total_tensor_size_in_bytes
    size = spec.data_types[tensor.data_type].size
    return minimum_implied_size_in_bytes(tuple(tensor.sizes), tensor.effective_strides, size)


def _tensor(arena: Arena, tensor: TensorDesc | None, spec: Spec) -> int | None:
    if tensor is None:
        return None
    data_type = spec.data_types[tensor.data_type]
    flags = {f.name: f.value for f in spec.tensor_flags}
    rank = tensor.rank
    if len(tensor.sizes) != rank or (tensor.strides is not None and len(tensor.strides) != rank):
        raise Unrepresentable(
            f"DimensionCount {rank} with {len(tensor.sizes)} Sizes and "
            f"{'no' if tensor.strides is None else len(tensor.strides)} Strides: C arrays carry no length"
        )
    sizes = arena.uints(tuple(tensor.sizes))
    strides = arena.uints(tuple(tensor.strides)) if tensor.strides is not None else None
    buffer_desc = arena.struct(
        [
            ("u32", data_type.value if data_type.value is not None else 0),
            ("u32", flags.get(tensor.effective_flags, 0)),
            ("u32", _u32(rank)),
            ("ptr", sizes),
            ("ptr", strides),
            ("u64", _fits(tensor_bytes(tensor, spec), 64, "TotalTensorSizeInBytes", NO_BINDING)),
            ("u32", _u32(tensor.guaranteed_base_offset_alignment or 0)),
        ]
    )
    return arena.struct([("u32", TENSOR_TYPE_BUFFER), ("ptr", buffer_desc)])


def _activation(arena: Arena, act: ActivationDesc | None, spec: Spec) -> int | None:
    if act is None:
        return None
    info = spec.activations.get(act.type)
    if info is None or info.value is None:
        raise Unsupported(f"activation {act.type} has no DML_OPERATOR_TYPE in the spec")
    written = act.param_dict
    params: list[tuple[str, float | int | None]] = []
    for p in info.parameters:
        value = written.get(p.name, p.default)
        if value is None:
            raise Unrepresentable(f"{act.type} {p.name} has no value (a C FLOAT cannot be absent)")
        params.append(("f32", _f32(float(value), f"{act.type} {p.name}")))
    fields = [
        ("ptr", _tensor(arena, act.input_tensor, spec)),
        ("ptr", _tensor(arena, act.output_tensor, spec)),
    ]
    body = arena.struct(fields + params)
    return arena.struct([("u32", info.value), ("ptr", body)])


def _member_field(arena: Arena, member: Member, value: object, spec: Spec) -> tuple[str, float | int | None]:
    """The C field of one member, by its spec type (the same for every operator)."""
    kind = member.type
    if value is None and kind in ("bool", "uint", "float", "uint_array") and not member.nullable:
        raise Unrepresentable(f"{member.name} is omitted (a C {kind} member cannot be absent)")
    if kind == "tensor":
        return ("ptr", _tensor(arena, value if isinstance(value, TensorDesc) else None, spec))
    if kind == "activation":
        return ("ptr", _activation(arena, value if isinstance(value, ActivationDesc) else None, spec))
    if kind == "uint_array":
        return ("ptr", arena.uints(tuple(value)) if isinstance(value, tuple) else None)
    if kind == "float":
        return ("f32", _f32(float(value), member.name) if isinstance(value, (int, float)) else 0.0)
    if kind in ("bool", "uint"):
        return ("u32", _u32(value))
    raise Unsupported(f"member type {kind!r} has no C layout in the DirectML packer")


def pack(desc: OperatorDesc, spec: Spec) -> Packed:
    """The desc as DirectML's structs (see the module docstring)."""
    op: Operator = spec.operator(desc.operator)
    if op.operator_type is None:
        raise Unsupported(f"{op.name} has no operator_type (DML_OPERATOR_TYPE) in the spec")
    arena = Arena()
    root = arena.reserve(16, 8)  # DML_OPERATOR_DESC {Type, Desc} must sit at offset 0
    values = {m.name: desc.get(m.name, spec) for m in op.members}
    for m in op.members:
        counted = values[m.name]
        if m.size_member and isinstance(counted, tuple) and values.get(m.size_member) != len(counted):
            raise Unrepresentable(
                f"{m.size_member} is {values.get(m.size_member)} but {m.name} lists {len(counted)}: "
                "DirectML reads the count, a C array carries no length"
            )
    fields = [_member_field(arena, m, values[m.name], spec) for m in op.members]
    body = arena.struct(fields)
    struct.pack_into("<IIQ", arena.data, root, op.operator_type, 0, body)
    arena.relocations.append(root + 8)

    def bindings(members: tuple) -> tuple[tuple[str, int], ...]:
        out = []
        for m in members:
            tensor = desc.members.get(m.name)
            out.append((m.name, tensor_bytes(tensor, spec) if isinstance(tensor, TensorDesc) else NO_BINDING))
        return tuple(out)

    owned = frozenset(
        m.name
        for m in op.input_members
        if isinstance(t := desc.members.get(m.name), TensorDesc) and t.effective_flags == "OWNED_BY_DML"
    )
    return Packed(
        bytes(arena.data),
        tuple(arena.relocations),
        bindings(op.input_members),
        bindings(op.output_members),
        owned,
    )


def input_buffer(array: np.ndarray, tensor: TensorDesc, nbytes: int) -> bytes:
    """The bytes of an input binding: elements at their strided positions, padding NaN (so a
    read of padding shows), exactly ``nbytes`` long (TotalTensorSizeInBytes)."""
    dtype = layout.numpy_dtype(tensor.data_type)
    elements = math.ceil(nbytes / dtype.itemsize)
    fill = float("nan") if np.issubdtype(dtype, np.floating) else 0
    buf = np.full(max(elements, 1), fill, dtype=dtype.newbyteorder("<"))
    view = layout.as_strided_view(buf, tensor)
    view[...] = np.asarray(array).astype(dtype, copy=False)
    return buf.tobytes()[:nbytes]


def output_array(data: bytes, tensor: TensorDesc) -> np.ndarray:
    """The logical output (shape Sizes) stored in a returned output binding."""
    dtype = layout.numpy_dtype(tensor.data_type).newbyteorder("<")
    usable = len(data) // dtype.itemsize * dtype.itemsize
    flat = np.frombuffer(data[:usable], dtype=dtype)
    return layout.from_buffer(flat.astype(dtype.newbyteorder("="), copy=False), tensor)


def execute(
    runner: Runner,
    desc: OperatorDesc,
    inputs: Mapping[str, np.ndarray],
    timeout: float,
    flags: int = 0,
    *,
    spec: Spec,
) -> tuple[Packed, RunReply]:
    """Send one desc with its inputs to the runner for execution: the request every execute
    makes (the backend's and the self-test's)."""
    packed = pack(desc, spec)
    reply = runner.run(
        MODE_EXECUTE,
        packed.arena,
        packed.relocations,
        input_buffers(packed, desc, inputs),
        [size for _, size in packed.outputs],
        timeout,
        flags,
        [name in packed.owned for name, _ in packed.inputs],
    )
    return packed, reply


def outputs(packed: Packed, desc: OperatorDesc, reply: RunReply) -> dict[str, np.ndarray]:
    """The logical outputs of a successful execution, by member name."""
    out: dict[str, np.ndarray] = {}
    for (name, _), data in zip(packed.outputs, reply.outputs, strict=True):
        tensor = desc.members.get(name)
        if isinstance(tensor, TensorDesc) and data is not None:
            out[name] = output_array(data, tensor)
    return out


def input_buffers(packed: Packed, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> list[bytes | None]:
    """Every input binding's bytes, in binding order (None for a null tensor)."""
    out: list[bytes | None] = []
    for name, nbytes in packed.inputs:
        tensor = desc.members.get(name)
        if nbytes == NO_BINDING or not isinstance(tensor, TensorDesc):
            out.append(None)
        elif name not in inputs:
            raise ValueError(f"no data for input {name}")
        else:
            out.append(input_buffer(inputs[name], tensor, nbytes))
    return out
