"""What every kernel plan shares, and the one reading of an operator's ``semantics:`` section.

A plan is a desc read, once and checked, in DirectML's terms: which member plays which part,
the reduced axes, Epsilon and the other scalars as the C FLOATs the desc struct passes, the
window, the activation with its defaults. The reference, the tolerance model, the generators and
every backend read a desc through it, so that none of them interprets the spec's ``semantics``
mapping on its own (``tests/test_kernel_registry.py`` lists any code outside the plan builders
that does). Each kernel's plan type and builder live in that kernel's module; this module holds
the base class and the readers the builders share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from dmlconform.errors import PlanError, Unsupported
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.spec import Operator, Spec


@dataclass(frozen=True, kw_only=True)
class KernelPlan:
    """The part every plan has. Members are named by DirectML's member names; a member the desc
    leaves null is None in its field and absent from :attr:`tensors`."""

    #: the registry name of the kernel this plan is for (each plan type sets it)
    kernel: ClassVar[str] = ""
    #: the plan's fields that name input / output members, in the spec's order
    INPUT_FIELDS: ClassVar[tuple[str, ...]] = ()
    OUTPUT_FIELDS: ClassVar[tuple[str, ...]] = ()

    operator: str
    #: the input's Sizes
    shape: tuple[int, ...]
    #: the input axes reduced (or windowed) over: sorted, unique
    axes: tuple[int, ...]
    #: every present tensor member's desc
    tensors: Mapping[str, TensorDesc] = field(default_factory=dict, repr=False, compare=False)
    #: every present tensor member's numpy dtype (float32, float16)
    dtypes: Mapping[str, np.dtype] = field(default_factory=dict, repr=False, compare=False)
    #: the fused activation's type (``ACTIVATION_ELU``) and every parameter with defaults filled,
    #: as the C FLOATs the desc passes; None / empty for kernels that fuse none
    activation: str | None = None
    activation_params: Mapping[str, float] = field(default_factory=dict)

    @property
    def centre(self) -> str | None:
        """What the input is centred on: ``"mean"`` (its own mean over :attr:`axes`), an input
        member's name (given statistics), or None (not centred)."""
        return None

    @property
    def inputs(self) -> tuple[str, ...]:
        """The input members present, in the spec's order."""
        return tuple(m for m in (getattr(self, f) for f in self.INPUT_FIELDS) if m)

    @property
    def outputs(self) -> tuple[str, ...]:
        """The output members the desc asks for."""
        return tuple(m for m in (getattr(self, f) for f in self.OUTPUT_FIELDS) if m)

    def input_members(self) -> tuple[str, ...]:
        return self.inputs

    def output_members(self) -> tuple[str, ...]:
        return self.outputs

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def reduction_length(self) -> int:
        """How many input elements each reduction covers (the product of the reduced sizes)."""
        return math.prod(self.shape[a] for a in self.axes)

    @property
    def kept_axes(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.shape)) if i not in self.axes)

    @property
    def stat_shape(self) -> tuple[int, ...]:
        """The statistics' shape: the input's with every reduced dimension set to 1."""
        return tuple(1 if i in self.axes else s for i, s in enumerate(self.shape))

    def dtype(self, member: str) -> np.dtype:
        """``member``'s numpy dtype; Unsupported where its DataType has none."""
        dt = self.dtypes.get(member)
        if dt is None:
            raise Unsupported(f"{member}: data type {self.tensors[member].data_type} has no numpy equivalent")
        return dt

    def sizes(self, member: str) -> tuple[int, ...]:
        return tuple(self.tensors[member].sizes)

    def aligned_sizes(self, member: str) -> tuple[int, ...]:
        """``member``'s Sizes right-aligned to the input's rank with leading 1s (numpy's
        broadcasting rule)."""
        sizes = self.sizes(member)
        return (1,) * (self.rank - len(sizes)) + sizes

    def finish(self, values: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """What ``execute`` returns: every output the desc asks for, reshaped (a same-count array,
        such as a 1-D per-channel statistic) or broadcast to its member's Sizes, in its DataType,
        contiguous."""
        out = {}
        for member in self.outputs:
            value = np.asarray(values[member])
            sizes = self.sizes(member)
            if value.shape != sizes:
                same_count = value.size == math.prod(sizes)
                value = value.reshape(sizes) if same_count else np.broadcast_to(value, sizes)
            with np.errstate(over="ignore"):  # beyond FLOAT16's range a value rounds to inf, as IEEE says
                out[member] = np.ascontiguousarray(value, dtype=self.dtype(member))
        return out

    def structure_key(self) -> tuple[Any, ...]:
        """Everything a compiled graph depends on but the sizes: the kernel, rank, dtypes, axes,
        which dims of each member broadcast, and every scalar field. Two descs with equal keys
        differ only in their sizes, so one compiled graph (with dynamic dims) serves both."""
        pattern = tuple(
            (m, str(self.dtypes.get(m)), tuple(s == 1 for s in self.aligned_sizes(m)))
            for m in sorted(self.tensors)
        )
        scalars = tuple(
            (f.name, _hashable(getattr(self, f.name)))
            for f in fields(self)
            if f.name not in ("operator", "shape", "tensors", "dtypes")
        )
        return (self.kernel, self.rank, pattern, scalars)


def _hashable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted(value.items()))
    return value


# --------------------------------------------------------------------------------------------
# Reading the semantics section (for the plan builders only)


def semantics_of(desc: OperatorDesc, spec: Spec) -> dict[str, Any]:
    """The operator's raw ``semantics`` mapping (plan builders only)."""
    return spec.operator(desc.operator).semantics


def kernel_named(op: Operator) -> str:
    """The kernel an operator's semantics names (``semantics.kernel``)."""
    return str(op.semantics.get("kernel"))


def input_member(op: Operator) -> str | None:
    """The member an operator normalizes (``semantics.input``): the tensor whose shape the
    others follow, known without a desc (the size tiers and the shrinker ask before one exists)."""
    name = op.semantics.get("input")
    return str(name) if name else None


def output_member(op: Operator) -> str | None:
    """The member an operator's main output is (``semantics.output``), known without a desc: the
    tensor an input's layout is told against (runner.finding_match's ``input_layout``)."""
    name = op.semantics.get("output")
    return str(name) if name else None


def f32(value: float) -> float:
    """The float64 value of the C FLOAT that holds ``value``."""
    return float(np.float32(value))


def tensor(desc: OperatorDesc, name: Any, spec: Spec) -> TensorDesc | None:
    """The tensor a semantics key names, None where it names none or the desc leaves it null."""
    if not isinstance(name, str) or not name:
        return None
    value = desc.get(name, spec)
    return value if isinstance(value, TensorDesc) else None


def member_value(desc: OperatorDesc, ref: Any, spec: Spec, what: str) -> Any:
    """A semantics value: ``{member: X}`` reads the desc's X (its default where omitted), any
    other value is the constant itself."""
    if isinstance(ref, dict) and "member" in ref:
        value = desc.get(ref["member"], spec)
        if value is None:
            raise PlanError(f"{ref['member']}: missing ({what} has no default)")
        return value
    return ref


def need(desc: OperatorDesc, sem: Mapping[str, Any], key: str, spec: Spec) -> str:
    """The member a required semantics key names; PlanError where the desc lacks it."""
    name = sem.get(key)
    if tensor(desc, name, spec) is None:
        raise PlanError(f"{name or key}: missing")
    return str(name)


def present(desc: OperatorDesc, sem: Mapping[str, Any], key: str, spec: Spec) -> str | None:
    """The member an optional semantics key names where the desc sets it, else None."""
    name = sem.get(key)
    return str(name) if tensor(desc, name, spec) is not None else None


def activation_params(act_type: str, given: Mapping[str, float], spec: Spec) -> dict[str, float]:
    """Every parameter of the activation: as written, else the spec's default, as a C FLOAT."""
    act = spec.activations.get(act_type)
    if act is None:
        raise PlanError(f"FusedActivation: unknown activation {act_type!r}")
    out = {}
    for p in act.parameters:
        value = given.get(p.name, p.default)
        if value is None:
            raise PlanError(f"FusedActivation.{p.name}: missing and has no default")
        out[p.name] = f32(value)
    return out


def fused_activation(
    desc: OperatorDesc, sem: Mapping[str, Any], spec: Spec
) -> tuple[str | None, dict[str, float]]:
    """The activation the semantics' ``activation`` member holds, with its parameters."""
    if "activation" not in sem:
        return None, {}
    act = desc.get(sem["activation"]["member"], spec)
    if act is None:
        return None, {}
    return act.type, activation_params(act.type, act.param_dict, spec)


def reduction_axes(desc: OperatorDesc, spec: Spec) -> tuple[int, ...]:
    """The input axes the operator reduces over, sorted, from ``semantics.reduce_axes``:
    ``{member}`` (an axes attribute), ``{flag_member, when_true, when_false}``, or
    ``{where_size_one}`` (the dims where that tensor's size is 1)."""
    sem = semantics_of(desc, spec)
    rule = sem.get("reduce_axes")
    inp = tensor(desc, sem.get("input"), spec)
    if inp is None:
        raise PlanError(f"{sem.get('input')}: missing")
    rank = len(inp.sizes)
    if not isinstance(rule, dict):
        raise PlanError(f"semantics.reduce_axes {rule!r} is not understood")
    if "member" in rule:
        value = desc.get(rule["member"], spec)
        if value is None:
            raise PlanError(f"{rule['member']}: missing")
        axes = (int(value),) if isinstance(value, int) else tuple(int(a) for a in value)  # UINT Axis or Axes
    elif "flag_member" in rule:
        flag = desc.get(rule["flag_member"], spec)
        if flag is None:
            raise PlanError(f"{rule['flag_member']}: missing")
        axes = tuple(rule["when_true"] if flag else rule["when_false"])
    elif "where_size_one" in rule:
        partner = tensor(desc, rule["where_size_one"], spec)
        if partner is None:
            raise PlanError(f"{rule['where_size_one']}: needed to know the reduced axes, but null")
        if len(partner.sizes) != rank:
            raise PlanError(f"{rule['where_size_one']}: dimension count differs from the input's")
        axes = tuple(i for i, s in enumerate(partner.sizes) if s == 1)
    else:
        raise PlanError(f"semantics.reduce_axes {rule!r} is not understood")
    for a in axes:
        if not 0 <= a < rank:
            raise PlanError(f"axis {a} out of range for a {rank}-D input")
    if len(set(axes)) != len(axes):
        raise PlanError(f"duplicate axes {list(axes)}")
    return tuple(sorted(axes))


def numpy_dtype(data_type: str, spec: Spec) -> np.dtype | None:
    """The numpy dtype of a DirectML data type, None where numpy has none."""
    dt = spec.data_types.get(data_type)
    return None if dt is None or dt.numpy is None else np.dtype(dt.numpy)


def common(desc: OperatorDesc, spec: Spec, input_key: str = "input") -> dict[str, Any]:
    """The base fields of a plan: operator, the input's shape, the reduced axes, the present
    tensors and their dtypes."""
    sem = semantics_of(desc, spec)
    inp = tensor(desc, sem.get(input_key), spec)
    if inp is None:
        raise PlanError(f"{sem.get(input_key) or input_key}: missing")
    tensors = desc.tensors()
    return {
        "operator": spec.operator(desc.operator).name,
        "shape": tuple(inp.sizes),
        "axes": reduction_axes(desc, spec),
        "tensors": tensors,
        "dtypes": {
            name: dt for name, t in tensors.items() if (dt := numpy_dtype(t.data_type, spec)) is not None
        },
    }


# --------------------------------------------------------------------------------------------
# The parts an operator's members play, for the code that needs them without a plan


@dataclass(frozen=True)
class MemberRoles:
    """Which member plays which part in an operator, as its semantics name them, known without a
    desc: what the input-data generators, the size tiers and the shrinker read (a plan needs a
    legal desc; these ask before one exists, or of any desc). None where the kernel has no such
    part."""

    kernel: str
    input: str | None
    scale: str | None
    bias: str | None
    fused_add: str | None
    mean: str | None
    variance: str | None
    activation: str | None
    #: the Mean and Variance inputs are the input's own statistics (``statistics_from_input``)
    statistics_from_input: bool
    #: the formula reads the input's batch statistics (``statistics: batch``)
    batch_statistics: bool

    @property
    def operands(self) -> tuple[str, ...]:
        """Scale, Bias and FusedAdd: the members that act on the normalized value."""
        return tuple(m for m in (self.scale, self.bias, self.fused_add) if m)


def member_roles(op: Operator) -> MemberRoles:
    sem = op.semantics

    def name(key: str) -> str | None:
        value = sem.get(key)
        return value if isinstance(value, str) and value else None

    act = sem.get("activation")
    return MemberRoles(
        kernel=kernel_named(op),
        input=name("input"),
        scale=name("scale"),
        bias=name("bias"),
        fused_add=name("fused_add"),
        mean=name("mean"),
        variance=name("variance_input"),
        activation=act["member"] if isinstance(act, dict) and "member" in act else None,
        statistics_from_input=bool(sem.get("statistics_from_input")),
        batch_statistics=bool(sem.get("statistics_from_input")) and sem.get("statistics") == "batch",
    )


def written_epsilon(desc: OperatorDesc, spec: Spec) -> float | None:
    """Epsilon as the desc writes it (its default where omitted), before it becomes a C FLOAT;
    None where the operator has none. The data regimes draw from it (a plan's ``epsilon`` is
    the FLOAT the implementation receives)."""
    e = semantics_of(desc, spec).get("epsilon")
    if isinstance(e, dict) and "member" in e:
        v = desc.get(e["member"], spec)
        return None if v is None else float(v)
    return None if e is None else float(e)


def normalizes_variance(desc: OperatorDesc, spec: Spec) -> bool:
    """Whether the variance is divided out (``semantics.normalize_variance``, default true)."""
    nv = semantics_of(desc, spec).get("normalize_variance", True)
    if isinstance(nv, dict) and "member" in nv:
        return bool(desc.get(nv["member"], spec))
    return bool(nv)


def centres(desc: OperatorDesc, spec: Spec) -> bool:
    """Whether the input is centred by a mean (``semantics.center``, default true)."""
    ref = semantics_of(desc, spec).get("center", True)
    return bool(member_value(desc, ref, spec, "the mean flag"))
