"""Operator descs <-> DxDispatch ``desc`` objects, and a strict reader of DxDispatch models.

DxDispatch's generated parsers (``JsonParsersGenerated.cpp``) read a desc by C member name and
never complain about what they do not look up, so a model that is "almost right" runs a
different operator desc than the one meant. Both directions here are driven by the spec's member
table (``spec/operators/*.yaml``: member name, type, nullable, default, size member) and its
activation table, so an operator added to the spec exports without a change here.

Writing (:func:`export_desc`, :func:`desc_json`) follows dxdispatch-facts.md's checklist: keys
exactly as the C members; absent nullable members omitted (DxDispatch rejects ``null``); BOOLs as
JSON booleans; every count written and equal to its array's length; every attribute written,
defaults resolved (DxDispatch has no defaults: a missing Epsilon is "Field 'Epsilon' is
required."); every fused-activation parameter written with the spec's default (DirectMLX's
default argument); FLOATs as the exact float32 value the C struct will hold, non-finite ones as
the strings DxDispatch accepts. A desc that no model can express as written (a missing required
member, a count that differs from its array, a DimensionCount that differs from Sizes, ...)
raises :class:`NotExpressible`: DxDispatch would stop in its parser or hand DirectML another desc.

Reading (:func:`read_desc_json`) is stricter than DxDispatch: it applies DxDispatch's own rules
(required fields, JSON booleans, unsigned integers, non-null objects) and also refuses what
DxDispatch ignores silently (unknown keys, counts that differ from their arrays), so a bundle
that reads back here means exactly what it says.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dmlconform.specification.desc import (
    DATA_TYPE_PREFIX,
    FLAG_PREFIX,
    OPERATOR_PREFIX,
    ActivationDesc,
    OperatorDesc,
    TensorDesc,
    strip_prefix,
)
from dmlconform.specification.spec import Member, Operator, Spec

UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
TENSOR_KEYS = (
    "DataType",
    "Sizes",
    "Strides",
    "Flags",
    "DimensionCount",
    "TotalTensorSizeInBytes",
    "GuaranteedBaseOffsetAlignment",
)


class NotExpressible(ValueError):
    """A desc that no DxDispatch model can hand to DirectML as written; the message says why."""


class ModelError(ValueError):
    """A model (or part of one) that DxDispatch would refuse or misread; ``path`` locates it."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


# --------------------------------------------------------------------------------------------
# Values


def f32(value: float) -> float:
    """The float64 value of the C FLOAT that will hold ``value`` (what DirectML receives)."""
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def float_json(value: float) -> float | str:
    """A FLOAT for DxDispatch: the exact float32 value; NaN/Inf as the strings its parser takes
    ("nan", "inf", "-inf"; strict JSON has no literal for them)."""
    x = f32(value)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _size_members(op: Operator) -> dict[str, str]:
    """count member -> array member (``AxisCount`` -> ``Axes``), from the spec's size_member."""
    return {m.size_member: m.name for m in op.members if m.type == "uint_array" and m.size_member}


def _uint(value: int, limit: int, what: str) -> int:
    if not 0 <= value <= limit:
        raise NotExpressible(f"{what} = {value} does not fit the C field (0..{limit})")
    return value


# --------------------------------------------------------------------------------------------
# Writing


def _export_tensor(t: TensorDesc, name: str) -> TensorDesc:
    rank = len(t.sizes)
    if t.dimension_count is not None and t.dimension_count != rank:
        raise NotExpressible(
            f"{name}.DimensionCount {t.dimension_count} differs from len(Sizes) {rank}: DxDispatch passes "
            "the Sizes array as written, so DirectML would read another or past the array"
        )
    if t.strides is not None and len(t.strides) != rank:
        raise NotExpressible(
            f"{name}.Strides has {len(t.strides)} entries for {rank} dimensions: DirectML would read "
            "DimensionCount strides from a shorter or longer array"
        )
    if t.total_tensor_size_in_bytes == 0:
        raise NotExpressible(
            f"{name}.TotalTensorSizeInBytes 0: DxDispatch replaces 0 by the computed size, so DirectML never sees it"
        )
    for i, s in enumerate(t.sizes):
        _uint(s, UINT32_MAX, f"{name}.Sizes[{i}]")
    for i, s in enumerate(t.strides or ()):
        _uint(s, UINT32_MAX, f"{name}.Strides[{i}]")
    if t.dimension_count is not None:
        _uint(t.dimension_count, UINT32_MAX, f"{name}.DimensionCount")
    if t.guaranteed_base_offset_alignment is not None:
        _uint(t.guaranteed_base_offset_alignment, UINT32_MAX, f"{name}.GuaranteedBaseOffsetAlignment")
    if t.total_tensor_size_in_bytes is not None:
        _uint(t.total_tensor_size_in_bytes, UINT64_MAX, f"{name}.TotalTensorSizeInBytes")
    return t


def _export_activation(a: ActivationDesc, name: str, spec: Spec) -> ActivationDesc:
    act = spec.activations.get(a.type)
    if act is None:
        raise NotExpressible(
            f"{name}.Type {a.type} is not an activation of the spec: its desc fields are unknown here, so "
            "no model can be written for DxDispatch's parser"
        )
    if a.input_tensor is not None or a.output_tensor is not None:
        raise NotExpressible(
            f"{name}: DxDispatch parses a fused activation with its tensors forced to null, so DirectML "
            "never sees the InputTensor/OutputTensor written here"
        )
    given = a.param_dict
    params = []
    for p in act.parameters:
        value = given.get(p.name, p.default)
        if value is None:
            raise NotExpressible(
                f"{name}.{p.name} is missing and has no default: DxDispatch's parser stops at "
                f"\"Field '{p.name}' is required.\""
            )
        params.append((p.name, f32(value)))
    return ActivationDesc(a.type, tuple(params))


def export_desc(desc: OperatorDesc, spec: Spec) -> OperatorDesc:
    """The desc DirectML receives from the model written for ``desc``: every attribute present
    with defaults resolved, counts equal to their arrays, FLOATs rounded to float32, activation
    parameters resolved; nullable members that are absent stay absent. Raises
    :class:`NotExpressible` when no model can carry ``desc`` as written."""
    op = spec.operator(desc.operator)
    counts = _size_members(op)
    members: dict[str, Any] = {}
    for m in op.members:
        value = desc.members.get(m.name)
        if m.type in ("tensor", "activation"):
            if value is None:
                if not m.nullable:
                    raise NotExpressible(
                        f"{m.name} is required but absent: DxDispatch's parser stops at "
                        f"\"Field '{m.name}' is required.\" before DirectML sees the desc"
                    )
                continue
            if m.type == "tensor":
                members[m.name] = _export_tensor(value, m.name)
            else:
                members[m.name] = _export_activation(value, m.name, spec)
            continue
        if m.name in counts:
            array = desc.get(counts[m.name], spec)
            if array is None:
                continue  # reported below, when the array member itself is resolved
            if value is not None and value != len(array):
                raise NotExpressible(
                    f"{m.name} = {value} but {counts[m.name]} has {len(array)} entries: DxDispatch passes the "
                    "array as written, so DirectML would read past it or see a shorter one"
                )
            members[m.name] = len(array)
            continue
        value = desc.get(m.name, spec)
        if value is None:
            raise NotExpressible(
                f"{m.name} is absent and has no default: DxDispatch's parser stops at "
                f"\"Field '{m.name}' is required.\""
            )
        members[m.name] = _export_value(m, value)
    return OperatorDesc(op.name, members)


def _export_value(m: Member, value: Any) -> Any:
    if m.type == "bool":
        return bool(value)
    if m.type == "uint":
        return _uint(int(value), UINT32_MAX, m.name)
    if m.type == "float":
        return f32(value)
    if m.type == "uint_array":
        return tuple(_uint(int(v), UINT32_MAX, f"{m.name}[{i}]") for i, v in enumerate(value))
    raise NotExpressible(f"{m.name}: member type {m.type!r} has no DxDispatch form known to dmlconform")


def desc_json(desc: OperatorDesc, spec: Spec) -> dict[str, Any]:
    """The ``desc`` object of a DxDispatch dispatchable for ``desc`` (exported first), members in
    struct order. Raises :class:`NotExpressible`."""
    exported = export_desc(desc, spec)
    op = spec.operator(desc.operator)
    out: dict[str, Any] = {}
    for m in op.members:
        if m.name not in exported.members:
            continue
        value = exported.members[m.name]
        if m.type == "tensor":
            # TensorDesc.to_dict writes the DML_BUFFER_TENSOR_DESC fields as given, omitted ones
            # left out: DxDispatch then computes TotalTensorSizeInBytes as DMLCalcBufferTensorSize
            out[m.name] = value.to_dict()
        elif m.type == "activation":
            act: dict[str, Any] = {"Type": value.type}
            act.update({k: float_json(v) for k, v in value.params})
            out[m.name] = act
        elif m.type == "float":
            out[m.name] = float_json(value)
        elif m.type == "uint_array":
            out[m.name] = list(value)
        else:
            out[m.name] = value
    return out


def operator_type(desc: OperatorDesc) -> str:
    """The dispatchable ``type``: the operator with its ``DML_OPERATOR_`` prefix."""
    return OPERATOR_PREFIX + desc.operator


def canonical(desc: OperatorDesc, spec: Spec) -> dict[str, Any]:
    """A comparable form of a desc as DirectML receives it (NaN-safe, order-free)."""
    return {"type": operator_type(desc), "desc": desc_json(desc, spec)}


# --------------------------------------------------------------------------------------------
# Reading


def _is_uint(value: Any, limit: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limit


def read_uint(value: Any, path: str, limit: int = UINT32_MAX) -> int:
    if not _is_uint(value, limit):
        raise ModelError(path, f"Expected an unsigned integer (0..{limit}), got {_show(value)}.")
    return int(value)


def read_uint_list(value: Any, path: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ModelError(path, f"Expected an array, got {_show(value)}.")
    return tuple(read_uint(v, f"{path}[{i}]") for i, v in enumerate(value))


def read_float(value: Any, path: str) -> float:
    """A FLOAT as DxDispatch reads it: a JSON number, or "nan" / "inf" / "-inf" (any case)."""
    if isinstance(value, bool):
        raise ModelError(path, f"Expected a number or 'NaN', 'Inf', or '-Inf', got {_show(value)}.")
    if isinstance(value, (int, float)):
        return f32(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("nan", "inf", "-inf"):
            return float(text)
        raise ModelError(path, "Expected 'NaN', 'Inf', or '-Inf'.")
    raise ModelError(path, f"Expected a number or 'NaN', 'Inf', or '-Inf', got {_show(value)}.")


def read_data_type(value: Any, path: str, spec: Spec) -> str:
    if not isinstance(value, str):
        raise ModelError(path, "DML_TENSOR_DATA_TYPE must be a string.")
    name = strip_prefix(value, DATA_TYPE_PREFIX)
    if name not in spec.data_types or name == "UNKNOWN":
        raise ModelError(path, f"unknown DML_TENSOR_DATA_TYPE {value!r}")
    return name


def _read_flags(value: Any, path: str, spec: Spec) -> str:
    known = {f.name: f.value for f in spec.tensor_flags}
    items = value if isinstance(value, list) else [value]
    if not isinstance(value, (str, list)):
        raise ModelError(path, "Expected a string or an array of strings.")
    mask = 0
    for i, item in enumerate(items):
        name = strip_prefix(item, FLAG_PREFIX) if isinstance(item, str) else None
        if name not in known:
            raise ModelError(
                f"{path}[{i}]" if isinstance(value, list) else path, f"unknown tensor flag {item!r}"
            )
        mask |= known[name]
    names = [n for n, v in known.items() if v == mask]
    if not names:
        raise ModelError(path, f"tensor flags {value!r} combine to {mask}, which the spec does not name")
    return names[0]


def read_tensor_json(value: Any, path: str, spec: Spec) -> TensorDesc:
    """A tensor desc as written in a model (inline fields only, which is what dmlconform writes)."""
    if not isinstance(value, dict):
        raise ModelError(path, "Expected a non-null JSON object.")
    for key in value:
        if key not in TENSOR_KEYS:
            raise ModelError(f"{path}.{key}", f"unknown tensor desc field (fields: {', '.join(TENSOR_KEYS)})")
    for key, v in value.items():
        if v is None:
            raise ModelError(f"{path}.{key}", "null is not allowed (omit the field instead)")
    if "DataType" not in value:
        raise ModelError(path, "Field 'DataType' is required.")
    if "Sizes" not in value:
        raise ModelError(path, "Field 'Sizes' is required.")
    dtype = read_data_type(value["DataType"], f"{path}.DataType", spec)
    sizes = read_uint_list(value["Sizes"], f"{path}.Sizes")
    strides = read_uint_list(value["Strides"], f"{path}.Strides") if "Strides" in value else None
    flags = _read_flags(value["Flags"], f"{path}.Flags", spec) if "Flags" in value else None
    dim = read_uint(value["DimensionCount"], f"{path}.DimensionCount") if "DimensionCount" in value else None
    total = None
    if "TotalTensorSizeInBytes" in value:
        total = read_uint(value["TotalTensorSizeInBytes"], f"{path}.TotalTensorSizeInBytes", UINT64_MAX)
    align = None
    if "GuaranteedBaseOffsetAlignment" in value:
        align = read_uint(value["GuaranteedBaseOffsetAlignment"], f"{path}.GuaranteedBaseOffsetAlignment")
    if dim is not None and dim != len(sizes):
        raise ModelError(f"{path}.DimensionCount", f"{dim} but Sizes has {len(sizes)} entries")
    if strides is not None and len(strides) != len(sizes):
        raise ModelError(f"{path}.Strides", f"{len(strides)} entries for {len(sizes)} dimensions")
    if total == 0:
        raise ModelError(f"{path}.TotalTensorSizeInBytes", "0 means 'computed' to DxDispatch; omit it")
    return TensorDesc(dtype, sizes, strides, flags, dim, total, align)


def read_activation_json(value: Any, path: str, spec: Spec) -> ActivationDesc:
    if not isinstance(value, dict):
        raise ModelError(path, "Expected a non-null JSON object.")
    type_key = "Type" if "Type" in value else "type" if "type" in value else None
    if type_key is None:
        raise ModelError(path, "Expected a member 'Type' with the operator type.")
    typ = value[type_key]
    if not isinstance(typ, str):
        raise ModelError(f"{path}.Type", "The member 'Type' must be a string.")
    name = strip_prefix(typ, OPERATOR_PREFIX)
    act = spec.activations.get(name)
    if act is None:
        raise ModelError(f"{path}.Type", f"{typ} is not a fusable activation of the spec")
    body_key = "Desc" if "Desc" in value else "desc" if "desc" in value else None
    body = value[body_key] if body_key else {k: v for k, v in value.items() if k != type_key}
    if body_key and set(value) - {type_key, body_key}:
        extra = sorted(set(value) - {type_key, body_key})[0]
        raise ModelError(f"{path}.{extra}", "unknown key beside 'Type' and 'Desc'")
    if not isinstance(body, dict):
        raise ModelError(f"{path}.Desc", "Expected a non-null JSON object.")
    for key in body:
        if key not in act.parameter_names:
            allowed = ", ".join(act.parameter_names) or "none"
            raise ModelError(
                f"{path}.{key}",
                f"unknown key for {name} (parameters: {allowed}; DxDispatch would ignore it silently)",
            )
    params = []
    for p in act.parameters:
        if p.name not in body:
            raise ModelError(f"{path}.{p.name}", f"Field '{p.name}' is required.")
        params.append((p.name, read_float(body[p.name], f"{path}.{p.name}")))
    return ActivationDesc(name, tuple(params))


def read_desc_json(op_type: Any, body: Any, spec: Spec, path: str = "desc") -> OperatorDesc:
    """The OperatorDesc a dispatchable's ``type`` and ``desc`` stand for, read by DxDispatch's
    rules plus the checks DxDispatch leaves out. Raises :class:`ModelError`."""
    if not isinstance(op_type, str):
        raise ModelError("type", "Expected a string.")
    name = strip_prefix(op_type, OPERATOR_PREFIX)
    op = spec.operators.get(name)
    if op is None:
        raise ModelError("type", f"operator {op_type!r} is not in the spec")
    if not isinstance(body, dict):
        raise ModelError(path, "Expected a valid JSON object.")
    known = {m.name for m in op.members}
    for key in body:
        if key not in known:
            raise ModelError(
                f"{path}.{key}", f"unknown member of {name} (DxDispatch would ignore it silently)"
            )
    counts = _size_members(op)
    members: dict[str, Any] = {}
    for m in op.members:
        where = f"{path}.{m.name}"
        if m.name not in body:
            if m.type in ("tensor", "activation") and m.nullable:
                continue
            raise ModelError(where, f"Field '{m.name}' is required.")
        members[m.name] = _read_member(m, body[m.name], where, spec)
    for count, array in counts.items():
        if count in members and array in members and members[count] != len(members[array]):
            raise ModelError(
                f"{path}.{count}",
                f"{members[count]} but {array} has {len(members[array])} entries (DxDispatch does not check)",
            )
    return OperatorDesc(name, members)


def _read_member(m: Member, value: Any, where: str, spec: Spec) -> Any:
    """A present member's value by its type in the spec; null is never a value DxDispatch reads."""
    if value is None:
        raise ModelError(
            where,
            "Expected a non-null JSON object."
            if m.type in ("tensor", "activation")
            else "null is not allowed",
        )
    if m.type == "tensor":
        return read_tensor_json(value, where, spec)
    if m.type == "activation":
        return read_activation_json(value, where, spec)
    if m.type == "bool":
        if not isinstance(value, bool):
            raise ModelError(where, f"Expected a bool, got {_show(value)}.")
        return value
    if m.type == "uint":
        return read_uint(value, where)
    if m.type == "float":
        return read_float(value, where)
    if m.type == "uint_array":
        return read_uint_list(value, where)
    raise ModelError(where, f"member type {m.type!r} has no DxDispatch form known to dmlconform")


def bind_points(desc: OperatorDesc, spec: Spec) -> tuple[list[str], list[str]]:
    """(input members, output members) of ``desc`` that are present: its bind points."""
    op = spec.operator(desc.operator)
    ins = [m.name for m in op.input_members if isinstance(desc.members.get(m.name), TensorDesc)]
    outs = [m.name for m in op.output_members if isinstance(desc.members.get(m.name), TensorDesc)]
    return ins, outs


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
