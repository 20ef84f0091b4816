"""Descs built for witnesses from rule kinds and the support table only: a legal base, and its
single-member mutations.

This is the witness search's own small desc generator, so that a witness can be found without
the generators (``dmlconform.generation.legal`` and ``.illegal``) and for specs they were not written for.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from dmlconform.specification.desc import ActivationDesc, OperatorDesc, TensorDesc
from dmlconform.specification.rules import (
    ArrayLength,
    AxesInRange,
    Broadcastable,
    SameSizes,
    fixed_dims,
    of_kind,
)
from dmlconform.specification.spec import FeatureLevel, Operator, Spec
from dmlconform.specification.validate import active_rules


def build_desc(
    spec: Spec,
    op: Operator,
    level: FeatureLevel,
    rank: int,
    dtype: str,
    present: set[str],
    activation: str | None,
) -> OperatorDesc:
    """A desc meant to be legal: every tensor of ``rank`` and ``dtype``; tensors that broadcast
    to another are 1 except where a rule fixes the dimension; same-size groups share a shape;
    Axes-like arrays take the trailing two dimensions. Built from rule kinds only."""
    rules = [r for r, _ in active_rules(spec, op.name, level)]
    full = tuple(range(2, 2 + rank))
    groups: dict[str, set[str]] = {m.name: {m.name} for m in op.tensor_members}
    for r in of_kind(rules, SameSizes):
        merged = set().union(*(groups.get(n, {n}) for n in r.params["members"]))
        for n in merged:
            groups[n] = merged
    shapes: dict[str, tuple[int, ...]] = {}
    for r in of_kind(rules, Broadcastable):
        fixed = fixed_dims(r.params, rank)
        shape = tuple(s if i in fixed else 1 for i, s in enumerate(full))
        for n in groups.get(r.params["member"], {r.params["member"]}):
            shapes[n] = shape
    axes_members = {r.params["member"] for r in of_kind(rules, AxesInRange)}
    length_of = {r.params["length_member"]: r.params["member"] for r in of_kind(rules, ArrayLength)}
    members: dict[str, Any] = {}
    axes = tuple(range(max(rank - 2, 0), rank))
    for m in op.members:
        if m.type == "tensor":
            if m.nullable and m.name not in present:
                members[m.name] = None
            else:
                members[m.name] = TensorDesc(dtype, shapes.get(m.name, full))
        elif m.type == "uint_array":
            members[m.name] = axes if m.name in axes_members else (0,)
        elif m.type == "bool":
            members[m.name] = True
        elif m.type == "float":
            members[m.name] = float(m.default) if isinstance(m.default, (int, float)) else 1.0e-5
        elif m.type == "activation":
            members[m.name] = _activation(spec, activation) if activation else None
    for m in op.members:
        if m.type == "uint":
            arr = members.get(length_of.get(m.name, ""))
            members[m.name] = len(arr) if isinstance(arr, tuple) else 0
    return OperatorDesc(op.name, {m.name: members[m.name] for m in op.members if m.name in members})


def _activation(spec: Spec, name: str) -> ActivationDesc:
    act = spec.activations[name]
    return ActivationDesc(
        name, tuple((p.name, p.default if p.default is not None else 1.0) for p in act.parameters)
    )


def mutations(spec: Spec, op: Operator, desc: OperatorDesc) -> Iterator[OperatorDesc]:
    """Single-member changes of ``desc``: drop an optional tensor, set one dimension of a tensor
    to 1 or to the full size, change a tensor's rank or data type, lower an activation
    parameter. Not aimed at any rule: the validator decides which rule each one breaks."""
    tensors = desc.tensors()
    full = max((t.sizes for t in tensors.values()), key=lambda s: (len(s), s), default=())
    for m in op.tensor_members:
        t = tensors.get(m.name)
        if t is None:
            continue
        if m.nullable:
            yield desc.replace(**{m.name: None})
        for i in range(len(t.sizes)):
            if t.sizes[i] != 1:
                yield desc.replace(**{m.name: t.replace(sizes=t.sizes[:i] + (1,) + t.sizes[i + 1 :])})
            if len(full) == len(t.sizes) and t.sizes[i] != full[i]:
                yield desc.replace(**{m.name: t.replace(sizes=t.sizes[:i] + (full[i],) + t.sizes[i + 1 :])})
        yield desc.replace(**{m.name: t.replace(sizes=tuple(1 for _ in t.sizes))})
        if len(t.sizes) > 1:
            yield desc.replace(**{m.name: t.replace(sizes=t.sizes[1:])})
        yield desc.replace(**{m.name: t.replace(sizes=(1,) + t.sizes)})
        for d in spec.data_types:
            if d != t.data_type and spec.data_types[d].is_float:
                yield desc.replace(**{m.name: t.replace(data_type=d)})
    for m in op.members:
        a = desc.members.get(m.name)
        if isinstance(a, ActivationDesc):
            for p, _ in a.params:
                for value in (0.5, 0.0, -1.0):
                    params = tuple((k, value if k == p else v) for k, v in a.params)
                    yield desc.replace(**{m.name: replace(a, params=params)})
