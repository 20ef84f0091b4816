"""A whole DxDispatch model file, read strictly: resources, dispatchables, commands.

This is the checker behind ``emulate`` and the tests: it accepts what DxDispatch's parser
(``JsonParsers.cpp``) accepts in the forms dmlconform writes, and refuses what DxDispatch refuses
(``null`` objects, 0/1 for BOOLs, missing required fields) as well as what DxDispatch would
silently misread (unknown keys, counts that differ from their arrays, non-strict JSON such as
``NaN`` literals or comments, which Python's json and other tools do not read).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmlconform.dxdispatch.desc_json import (
    ModelError,
    bind_points,
    read_data_type,
    read_desc_json,
    read_uint,
    read_uint_list,
)
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec

ROOT_KEYS = ("resources", "dispatchables", "commands")
EXECUTION_FLAGS = (
    "NONE",
    "ALLOW_HALF_PRECISION_COMPUTATION",
    "DISABLE_META_COMMANDS",
    "DESCRIPTORS_VOLATILE",
)


@dataclass
class Resource:
    """A buffer: its data type and its initializer (``file``, or ``count`` copies of ``value``)."""

    name: str
    data_type: str
    file: str | None = None
    count: int = 0
    value: Any = None


@dataclass
class Dispatchable:
    name: str
    desc: OperatorDesc
    init_bindings: dict[str, str] = field(default_factory=dict)


@dataclass
class Command:
    type: str  # dispatch | writeFile | print
    dispatchable: str | None = None
    bindings: dict[str, str] = field(default_factory=dict)
    resource: str | None = None
    target: str | None = None
    dimensions: tuple[int, ...] | None = None


@dataclass
class Model:
    resources: dict[str, Resource]
    dispatchables: dict[str, Dispatchable]
    commands: list[Command]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not strict JSON (write the string 'nan', 'inf' or '-inf')")


def load_json(text: str) -> Any:
    """Strict JSON: no NaN/Infinity literals (DxDispatch's rapidjson and Python agree on nothing else)."""
    return json.loads(text, parse_constant=_reject_constant)


def _find_nulls(value: Any, path: str) -> None:
    if value is None:
        raise ModelError(
            path, 'null: DxDispatch rejects it ("Expected a non-null JSON object."); omit the key'
        )
    if isinstance(value, dict):
        for k, v in value.items():
            _find_nulls(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _find_nulls(v, f"{path}[{i}]")


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ModelError(path, "Expected a non-null JSON object.")
    return value


def _only(obj: dict[str, Any], keys: tuple[str, ...], path: str) -> None:
    for k in obj:
        if k not in keys:
            raise ModelError(f"{path}.{k}", f"unknown key (expected {', '.join(keys)})")


def _read_resource(name: str, raw: Any, spec: Spec) -> Resource:
    path = f"resources.{name}"
    obj = _obj(raw, path)
    _only(obj, ("initialValuesDataType", "initialValues", "sizeInBytes"), path)
    if "initialValues" not in obj:
        raise ModelError(path, "Field 'initialValues' is required.")
    if "initialValuesDataType" not in obj:
        raise ModelError(path, "Field 'initialValuesDataType' is required (dmlconform always writes it).")
    dt = read_data_type(obj["initialValuesDataType"], f"{path}.initialValuesDataType", spec)
    init = _obj(obj["initialValues"], f"{path}.initialValues")
    if "sourcePath" in init:
        _only(init, ("sourcePath",), f"{path}.initialValues")
        if not isinstance(init["sourcePath"], str) or not init["sourcePath"]:
            raise ModelError(f"{path}.initialValues.sourcePath", "Expected a string.")
        return Resource(name, dt, file=init["sourcePath"])
    _only(init, ("valueCount", "value"), f"{path}.initialValues")
    if "valueCount" not in init or "value" not in init:
        raise ModelError(f"{path}.initialValues", "a constant needs 'valueCount' and 'value'")
    count = read_uint(init["valueCount"], f"{path}.initialValues.valueCount")
    if count == 0:
        raise ModelError(f"{path}.initialValues.valueCount", "'initialValues' must be non-empty.")
    value = init["value"]
    floating = spec.data_types[dt].is_float
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if floating and isinstance(value, str) and value.lower() in ("nan", "inf", "-inf"):
        ok = True
    if not ok:
        raise ModelError(f"{path}.initialValues.value", f"not a {dt} value: {value!r}")
    return Resource(name, dt, count=count, value=value)


def _read_dispatchable(name: str, raw: Any, spec: Spec, resources: dict[str, Resource]) -> Dispatchable:
    path = f"dispatchables.{name}"
    obj = _obj(raw, path)
    _only(obj, ("type", "desc", "executionFlags", "bindings", "dmlCompileType"), path)
    if "type" not in obj:
        raise ModelError(path, "Field 'type' is required.")
    if "desc" not in obj:
        raise ModelError(path, "Field 'desc' is required.")
    desc = read_desc_json(obj["type"], obj["desc"], spec, f"{path}.desc")
    flags = obj.get("executionFlags", "NONE")
    for i, f in enumerate(flags if isinstance(flags, list) else [flags]):
        if not isinstance(f, str) or f.removeprefix("DML_EXECUTION_FLAG_") not in EXECUTION_FLAGS:
            raise ModelError(f"{path}.executionFlags[{i}]", f"unknown execution flag {f!r}")
    if obj.get("dmlCompileType", "DmlCompileOp") not in ("DmlCompileOp", "DmlCompileGraph"):
        raise ModelError(f"{path}.dmlCompileType", "expected DmlCompileOp or DmlCompileGraph")
    init = _bindings(obj.get("bindings", {}), f"{path}.bindings", desc, spec, resources)
    return Dispatchable(name, desc, init)


def _bindings(
    raw: Any, path: str, desc: OperatorDesc, spec: Spec, resources: dict[str, Resource]
) -> dict[str, str]:
    obj = _obj(raw, path)
    ins, outs = bind_points(desc, spec)
    out = {}
    for point, source in obj.items():
        if point not in ins and point not in outs:
            raise ModelError(
                f"{path}.{point}", "not a bind point of the desc (a member that is absent or not a tensor)"
            )
        if not isinstance(source, str):
            raise ModelError(f"{path}.{point}", "dmlconform binds whole resources by name")
        if source not in resources:
            raise ModelError(f"{path}.{point}", f"no resource named {source!r}")
        out[point] = source
    return out


def _read_command(i: int, raw: Any, spec: Spec, model: Model) -> Command:
    path = f"commands[{i}]"
    obj = _obj(raw, path)
    typ = obj.get("type")
    if not isinstance(typ, str):
        raise ModelError(f"{path}.type", "Field 'type' is required.")
    kind = typ.lower()
    if kind == "dispatch":
        _only(obj, ("type", "dispatchable", "bindings"), path)
        name = obj.get("dispatchable")
        if name not in model.dispatchables:
            raise ModelError(f"{path}.dispatchable", f"no dispatchable named {name!r}")
        d = model.dispatchables[name]
        bindings = _bindings(obj.get("bindings", {}), f"{path}.bindings", d.desc, spec, model.resources)
        ins, outs = bind_points(d.desc, spec)
        for point in ins + outs:
            if point not in bindings and point not in d.init_bindings:
                raise ModelError(f"{path}.bindings", f"{point} is in the desc but bound to nothing")
        return Command("dispatch", dispatchable=name, bindings=bindings)
    if kind == "writefile":
        _only(obj, ("type", "resource", "targetPath", "dimensions"), path)
        res = obj.get("resource")
        if res not in model.resources:
            raise ModelError(f"{path}.resource", f"no resource named {res!r}")
        target = obj.get("targetPath")
        if not isinstance(target, str) or not target:
            raise ModelError(f"{path}.targetPath", "Field 'targetPath' is required.")
        dims = read_uint_list(obj["dimensions"], f"{path}.dimensions") if "dimensions" in obj else None
        return Command("writeFile", resource=res, target=target, dimensions=dims)
    if kind == "print":
        _only(obj, ("type", "resource", "verbose"), path)
        res = obj.get("resource")
        if res not in model.resources:
            raise ModelError(f"{path}.resource", f"no resource named {res!r}")
        return Command("print", resource=res)
    raise ModelError(f"{path}.type", f"Unrecognized command {typ!r}")


def read_model(data: Any, spec: Spec) -> Model:
    """The model ``data`` (parsed JSON) stands for; :class:`ModelError` for anything DxDispatch
    would refuse or misread."""
    root = _obj(data, "")
    _find_nulls(root, "")
    for key in ROOT_KEYS:
        if key not in root:
            raise ModelError(key, f"Field '{key}' is required.")
    for key in root:
        if key not in ROOT_KEYS and key != "$schema":
            raise ModelError(key, "unknown top-level key")
    resources = {n: _read_resource(n, r, spec) for n, r in _obj(root["resources"], "resources").items()}
    model = Model(resources, {}, [])
    for n, d in _obj(root["dispatchables"], "dispatchables").items():
        model.dispatchables[n] = _read_dispatchable(n, d, spec, resources)
    if not isinstance(root["commands"], list):
        raise ModelError("commands", "Expected an array.")
    model.commands = [_read_command(i, c, spec, model) for i, c in enumerate(root["commands"])]
    return model


def load_model_file(path: Path, spec: Spec) -> Model:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError("", f"{path.name}: cannot read: {exc}") from None
    try:
        data = load_json(text)
    except ValueError as exc:
        raise ModelError("", f"{path.name}: not strict JSON: {exc}") from None
    return read_model(data, spec)
