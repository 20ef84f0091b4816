"""Reading an operator's ``semantics:`` section: the one interpretation every consumer shares.

The reference executor, the tolerance model, the backends and the data generators all need to
know which member is the input, the scale, the statistics outputs, which axes are reduced,
whether the variance is divided out, the epsilon and the fused activation with its parameter
defaults. They read it here, once, into a :class:`Plan`, so nothing downstream names an
operator and a new normalization operator is a YAML edit. Kept free of numba so that
generators and backends do not pay for the JIT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmlconform.desc import OperatorDesc, TensorDesc
from dmlconform.spec import Spec, load_spec


class SemanticsError(ValueError):
    """The desc lacks what its operator's semantics need (a member is missing or malformed):
    an illegal desc the validator would also reject."""


def reduction_axes(desc: OperatorDesc, spec: Spec | None = None) -> tuple[int, ...]:
    """The input axes the operator reduces over, sorted, from ``semantics.reduce_axes``:
    ``{member}`` (an axes attribute), ``{flag_member, when_true, when_false}``, or
    ``{where_size_one}`` (the dims where that tensor's size is 1)."""
    spec = spec or load_spec()
    sem = spec.operator(desc.operator).semantics
    rule = sem.get("reduce_axes")
    inp = desc.get(sem["input"], spec)
    if not isinstance(inp, TensorDesc):
        raise SemanticsError(f"{sem['input']}: missing")
    rank = len(inp.sizes)
    if not isinstance(rule, dict):
        raise SemanticsError(f"semantics.reduce_axes {rule!r} is not understood")
    if "member" in rule:
        value = desc.get(rule["member"], spec)
        if value is None:
            raise SemanticsError(f"{rule['member']}: missing")
        axes = tuple(int(a) for a in value)
    elif "flag_member" in rule:
        flag = desc.get(rule["flag_member"], spec)
        if flag is None:
            raise SemanticsError(f"{rule['flag_member']}: missing")
        axes = tuple(rule["when_true"] if flag else rule["when_false"])
    elif "where_size_one" in rule:
        partner = desc.get(rule["where_size_one"], spec)
        if not isinstance(partner, TensorDesc):
            raise SemanticsError(f"{rule['where_size_one']}: needed to know the reduced axes, but null")
        if len(partner.sizes) != rank:
            raise SemanticsError(f"{rule['where_size_one']}: dimension count differs from the input's")
        axes = tuple(i for i, s in enumerate(partner.sizes) if s == 1)
    else:
        raise SemanticsError(f"semantics.reduce_axes {rule!r} is not understood")
    for a in axes:
        if not 0 <= a < rank:
            raise SemanticsError(f"axis {a} out of range for a {rank}-D input")
    if len(set(axes)) != len(axes):
        raise SemanticsError(f"duplicate axes {list(axes)}")
    return tuple(sorted(axes))


@dataclass(frozen=True)
class Plan:
    """Everything the normalization kernel needs, resolved from the desc and the spec.

    ``axes`` are the reduced dimensions of the input (sorted, unique); ``epsilon`` and the
    activation parameters are rounded to float32 because the desc structs hold C ``FLOAT``s:
    an implementation receives exactly those values, so the reference must use them too.
    """

    input: str
    output: str
    scale: str | None
    bias: str | None
    fused_add: str | None
    mean_output: str | None
    variance_output: str | None
    axes: tuple[int, ...]
    normalize_variance: bool
    epsilon: float
    activation: str | None
    activation_params: dict[str, float] = field(default_factory=dict)
    shape: tuple[int, ...] = ()

    @property
    def kept_axes(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.shape)) if i not in self.axes)

    @property
    def reduction_length(self) -> int:
        """n: how many elements each mean and variance is taken over."""
        return math.prod(self.shape[i] for i in self.axes)

    @property
    def stat_shape(self) -> tuple[int, ...]:
        """The statistics' shape: the input's with every reduced dimension set to 1."""
        return tuple(1 if i in self.axes else s for i, s in enumerate(self.shape))

    def input_members(self) -> tuple[str, ...]:
        return tuple(m for m in (self.input, self.scale, self.bias, self.fused_add) if m)

    def output_members(self) -> tuple[str, ...]:
        return tuple(m for m in (self.output, self.mean_output, self.variance_output) if m)


def f32(value: float) -> float:
    """The float64 value of the C FLOAT that holds ``value``."""
    return float(np.float32(value))


def _tensor(desc: OperatorDesc, name: str | None, spec: Spec) -> TensorDesc | None:
    if not name:
        return None
    value = desc.get(name, spec)
    return value if isinstance(value, TensorDesc) else None


def _member_value(desc: OperatorDesc, ref: Any, spec: Spec, what: str) -> Any:
    if isinstance(ref, dict) and "member" in ref:
        value = desc.get(ref["member"], spec)
        if value is None:
            raise SemanticsError(f"{ref['member']}: missing ({what} has no default)")
        return value
    return ref


def activation_params(act_type: str, given: dict[str, float], spec: Spec) -> dict[str, float]:
    """Every parameter of the activation: as written, else the spec's default, as a C FLOAT."""
    act = spec.activations.get(act_type)
    if act is None:
        raise SemanticsError(f"FusedActivation: unknown activation {act_type!r}")
    out = {}
    for p in act.parameters:
        value = given.get(p.name, p.default)
        if value is None:
            raise SemanticsError(f"FusedActivation.{p.name}: missing and has no default")
        out[p.name] = f32(value)
    return out


def make_plan(desc: OperatorDesc, spec: Spec | None = None) -> Plan:
    """Resolve the desc against its operator's semantics (see spec/operators/*.yaml)."""
    spec = spec or load_spec()
    sem = spec.operator(desc.operator).semantics
    if sem.get("kernel") != "normalization":
        raise SemanticsError(f"{desc.operator}: no reference kernel {sem.get('kernel')!r}")
    inp = _tensor(desc, sem["input"], spec)
    if inp is None:
        raise SemanticsError(f"{sem['input']}: missing")
    if _tensor(desc, sem["output"], spec) is None:
        raise SemanticsError(f"{sem['output']}: missing")
    shape = tuple(inp.sizes)
    axes = reduction_axes(desc, spec)
    nv = sem.get("normalize_variance", True)
    normalize = bool(_member_value(desc, nv, spec, "NormalizeVariance"))
    eps_ref = sem.get("epsilon", 0.0)
    epsilon = f32(_member_value(desc, eps_ref, spec, "Epsilon")) if normalize else 0.0
    act_type = None
    params: dict[str, float] = {}
    if "activation" in sem:
        act = desc.get(sem["activation"]["member"], spec)
        if act is not None:
            act_type = act.type
            params = activation_params(act.type, act.param_dict, spec)

    def present(key: str) -> str | None:
        name = sem.get(key)
        return name if name and _tensor(desc, name, spec) is not None else None

    return Plan(
        input=sem["input"],
        output=sem["output"],
        scale=present("scale"),
        bias=present("bias"),
        fused_add=present("fused_add"),
        mean_output=present("mean_output"),
        variance_output=present("variance_output"),
        axes=axes,
        normalize_variance=normalize,
        epsilon=epsilon,
        activation=act_type,
        activation_params=params,
        shape=shape,
    )
