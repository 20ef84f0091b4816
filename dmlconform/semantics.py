"""Reading an operator's ``semantics:`` section that more than one consumer needs.

The reference executor, the backends and the data generators all need the axes an operator
reduces over; they read it here, once, so the three ``reduce_axes`` forms of the spec have one
interpretation. Kept free of numba so that generators and backends do not pay for the JIT.
"""

from __future__ import annotations

from dmlconform.desc import OperatorDesc, TensorDesc
from dmlconform.spec import Spec, load_spec


class SemanticsError(ValueError):
    """The desc lacks what its operator's semantics need (a member is missing or malformed)."""


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
