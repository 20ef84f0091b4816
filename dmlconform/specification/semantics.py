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

from dmlconform.errors import Unsupported
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.spec import Spec


class SemanticsError(ValueError):
    """The desc lacks what its operator's semantics need (a member is missing or malformed):
    an illegal desc the validator would also reject."""


class NotPlainNormalization(SemanticsError, Unsupported):
    """The desc is a normalization the single centred kernel does not compute (``center`` false:
    the variance is the second moment about zero). Reading it with :func:`make_plan` is refused
    unless the caller says it handles ``Plan.center``; a backend that reads plans without knowing
    about it reports the case unsupported instead of computing something else."""


def reduction_axes(desc: OperatorDesc, spec: Spec) -> tuple[int, ...]:
    """The input axes the operator reduces over, sorted, from ``semantics.reduce_axes``:
    ``{member}`` (an axes attribute), ``{flag_member, when_true, when_false}``, or
    ``{where_size_one}`` (the dims where that tensor's size is 1)."""
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
        axes = (int(value),) if isinstance(value, int) else tuple(int(a) for a in value)  # UINT Axis or Axes
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
    center: bool = True  # False: no mean step; the "variance" is mean(x^2) (semantics.center)

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


def kernel(desc: OperatorDesc, spec: Spec) -> str:
    """The operator's ``semantics.kernel`` (normalization, given_statistics, normalization_grad)."""
    return str(spec.operator(desc.operator).semantics.get("kernel"))


def centers(desc: OperatorDesc, spec: Spec) -> bool:
    """Whether the input is centred by its mean (``semantics.center``, default true)."""
    ref = spec.operator(desc.operator).semantics.get("center", True)
    return bool(_member_value(desc, ref, spec, "the mean flag"))


def make_uncentred_plan(desc: OperatorDesc, spec: Spec) -> Plan:
    """The plan of a normalization whose ``center`` flag may be off (the registry's
    ``rms_normalization`` kernel reads ``Plan.center``)."""
    return make_plan(desc, spec, uncentred_ok=True)


def make_plan(desc: OperatorDesc, spec: Spec, *, uncentred_ok: bool = False) -> Plan:
    """Resolve the desc against its operator's semantics (see spec/operators/*.yaml).

    A desc whose semantics say ``center: false`` raises :class:`NotPlainNormalization` unless
    ``uncentred_ok`` (the caller reads ``Plan.center``)."""
    sem = spec.operator(desc.operator).semantics
    if sem.get("kernel") != "normalization":
        raise SemanticsError(f"{desc.operator}: no reference kernel {sem.get('kernel')!r}")
    center = centers(desc, spec)
    if not center and not uncentred_ok:
        raise NotPlainNormalization(
            f"{desc.operator}: the mean step is off (semantics.center false): not the centred normalization"
        )
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
        center=center,
    )


# --------------------------------------------------------------------------------------------
# given_statistics and normalization_grad kernels


@dataclass(frozen=True)
class GivenPlan:
    """``kernel: given_statistics``: Output = act(Scale (Input - Mean) / sqrt(Variance + Eps) +
    Bias), elementwise, Mean and Variance inputs broadcast to the input's shape. ``axes`` are the
    dims the statistics were taken over (``reduce_axes``), for data regimes and budgets."""

    input: str
    mean: str
    variance: str
    scale: str | None
    bias: str | None
    output: str
    epsilon: float
    activation: str | None
    activation_params: dict[str, float]
    axes: tuple[int, ...]
    shape: tuple[int, ...]

    def input_members(self) -> tuple[str, ...]:
        return tuple(m for m in (self.input, self.mean, self.variance, self.scale, self.bias) if m)

    def output_members(self) -> tuple[str, ...]:
        return (self.output,)


@dataclass(frozen=True)
class GradPlan:
    """``kernel: normalization_grad``: the gradients of a batch normalization with respect to its
    input (``output``), Scale (``scale_gradient_output``) and Bias (``bias_gradient_output``),
    summed over ``axes`` (where the statistics' sizes are 1). ``statistics``: ``given`` (Mean and
    Variance are constants) or ``batch`` (the gradient flows through the batch mean and
    variance). ``centre_with`` (``batch`` only): the mean the input gradient centres Input on,
    ``input`` (the batch mean of Input) or ``mean`` (the Mean member, spec ``semantics.centre_with``)."""

    input: str
    input_gradient: str
    mean: str
    variance: str
    scale: str
    output: str
    scale_gradient_output: str
    bias_gradient_output: str
    epsilon: float
    statistics: str
    axes: tuple[int, ...]
    shape: tuple[int, ...]
    centre_with: str = "input"

    @property
    def reduction_length(self) -> int:
        return math.prod(self.shape[i] for i in self.axes)

    @property
    def centres_on_mean(self) -> bool:
        """The input gradient centres Input on the Mean member rather than on its batch mean."""
        return self.statistics == "batch" and self.centre_with == "mean"

    @property
    def activation(self) -> None:
        """The gradients fuse no activation (a plan's activation, for the code that reads any)."""
        return None

    @property
    def activation_params(self) -> dict[str, float]:
        return {}

    def input_members(self) -> tuple[str, ...]:
        return (self.input, self.input_gradient, self.mean, self.variance, self.scale)

    def output_members(self) -> tuple[str, ...]:
        return (self.output, self.scale_gradient_output, self.bias_gradient_output)


def _need(desc: OperatorDesc, sem: dict[str, Any], key: str, spec: Spec) -> str:
    name = sem.get(key)
    if not name or _tensor(desc, name, spec) is None:
        raise SemanticsError(f"{name or key}: missing")
    return str(name)


def _activation(desc: OperatorDesc, sem: dict[str, Any], spec: Spec) -> tuple[str | None, dict[str, float]]:
    if "activation" not in sem:
        return None, {}
    act = desc.get(sem["activation"]["member"], spec)
    if act is None:
        return None, {}
    return act.type, activation_params(act.type, act.param_dict, spec)


def make_given_plan(desc: OperatorDesc, spec: Spec) -> GivenPlan:
    sem = spec.operator(desc.operator).semantics
    if sem.get("kernel") != "given_statistics":
        raise SemanticsError(f"{desc.operator}: kernel {sem.get('kernel')!r} is not given_statistics")
    inp = _need(desc, sem, "input", spec)
    act_type, params = _activation(desc, sem, spec)

    def present(key: str) -> str | None:
        name = sem.get(key)
        return name if name and _tensor(desc, name, spec) is not None else None

    return GivenPlan(
        input=inp,
        mean=_need(desc, sem, "mean", spec),
        variance=_need(desc, sem, "variance_input", spec),
        scale=present("scale"),
        bias=present("bias"),
        output=_need(desc, sem, "output", spec),
        epsilon=f32(_member_value(desc, sem.get("epsilon", 0.0), spec, "Epsilon")),
        activation=act_type,
        activation_params=params,
        axes=reduction_axes(desc, spec),
        shape=tuple(desc.get(inp, spec).sizes),
    )


def make_grad_plan(desc: OperatorDesc, spec: Spec) -> GradPlan:
    sem = spec.operator(desc.operator).semantics
    if sem.get("kernel") != "normalization_grad":
        raise SemanticsError(f"{desc.operator}: kernel {sem.get('kernel')!r} is not normalization_grad")
    inp = _need(desc, sem, "input", spec)
    statistics = str(sem.get("statistics", "given"))
    if statistics not in ("given", "batch"):
        raise SemanticsError(f"semantics.statistics {statistics!r} is not understood (given, batch)")
    centre_with = str(sem.get("centre_with", "input"))
    if centre_with not in ("input", "mean"):
        raise SemanticsError(f"semantics.centre_with {centre_with!r} is not understood (input, mean)")
    return GradPlan(
        input=inp,
        input_gradient=_need(desc, sem, "input_gradient", spec),
        mean=_need(desc, sem, "mean", spec),
        variance=_need(desc, sem, "variance_input", spec),
        scale=_need(desc, sem, "scale", spec),
        output=_need(desc, sem, "output", spec),
        scale_gradient_output=_need(desc, sem, "scale_gradient_output", spec),
        bias_gradient_output=_need(desc, sem, "bias_gradient_output", spec),
        epsilon=f32(_member_value(desc, sem.get("epsilon", 0.0), spec, "Epsilon")),
        statistics=statistics,
        axes=reduction_axes(desc, spec),
        shape=tuple(desc.get(inp, spec).sizes),
        centre_with=centre_with,
    )


# --------------------------------------------------------------------------------------------
# local_response(_grad) and lp_normalization kernels


def _reach(kind: str, n: int) -> int:
    """How many neighbours a window of ``n`` reaches on one side (``semantics.window``)."""
    if kind == "floor_half":
        return (n - 1) // 2
    if kind == "ceil_half":
        return n // 2
    raise SemanticsError(f"semantics.window: {kind!r} is not understood (floor_half, ceil_half)")


@dataclass(frozen=True)
class LocalResponsePlan:
    """``kernel: local_response`` and ``local_response_grad``: d = Bias + Alpha / divisor * the sum
    of Input^2 over a window, Output = Input d^-Beta (or, for the gradient, the vector-Jacobian
    product of that with ``input_gradient``). The window runs over each of ``axes`` (channels,
    or Height and Width: ``within_channel: square``) from ``below`` elements under an element to
    ``above`` over it, clipped to the tensor. Alpha, Beta, Bias as the C FLOATs they are passed as."""

    input: str
    output: str
    input_gradient: str | None
    axes: tuple[int, ...]
    local_size: int
    below: int
    above: int
    divisor: float
    alpha: float
    beta: float
    bias: float
    shape: tuple[int, ...]

    @property
    def may_be_identity(self) -> bool:
        """Alpha or Beta 0: Output = Input * Bias^-Beta, the input itself where that is 1 (a
        case no data can make judge anything: ``tolerance.degenerate``)."""
        return self.alpha == 0 or self.beta == 0

    @property
    def reduction_length(self) -> int:
        """The unclipped window's element count (LocalSize per windowed axis)."""
        return self.local_size ** len(self.axes)

    def window_length(self, axis: int) -> int:
        """How many elements a window along ``axis`` can hold at most (clipped to the axis)."""
        return min(self.shape[axis], self.local_size)

    def input_members(self) -> tuple[str, ...]:
        return tuple(m for m in (self.input, self.input_gradient) if m)

    def output_members(self) -> tuple[str, ...]:
        return (self.output,)


def make_local_response_plan(desc: OperatorDesc, spec: Spec) -> LocalResponsePlan:
    """Read ``semantics`` of a local_response(_grad) operator: the members it names for the
    flag, LocalSize, Alpha, Beta and Bias, and how the window is placed (``window``,
    ``within_channel``, ``within_channel_divisor``)."""
    sem = spec.operator(desc.operator).semantics
    if sem.get("kernel") not in ("local_response", "local_response_grad"):
        raise SemanticsError(f"{desc.operator}: kernel {sem.get('kernel')!r} is not local_response")
    inp = _need(desc, sem, "input", spec)
    output = _need(desc, sem, "output", spec)
    gradient = _need(desc, sem, "input_gradient", spec) if "input_gradient" in sem else None
    n = int(_member_value(desc, sem["local_size"], spec, "LocalSize"))
    if n < 1:
        raise SemanticsError(f"{sem['local_size']['member']}: {n} is below 1")
    cross = bool(_member_value(desc, sem["cross_channel"], spec, "the cross-channel flag"))
    window = sem.get("window") or {"below": "floor_half", "above": "ceil_half"}
    divisor = float(n)
    if not cross:
        if sem.get("within_channel", "square") != "square":
            raise SemanticsError(f"{desc.operator}: semantics.within_channel says no window within a channel")
        if sem.get("within_channel_divisor", "local_size") == "window_area":
            divisor = float(n) * n
    return LocalResponsePlan(
        input=inp,
        output=output,
        input_gradient=gradient,
        axes=reduction_axes(desc, spec),
        local_size=n,
        below=_reach(window["below"], n),
        above=_reach(window["above"], n),
        divisor=divisor,
        alpha=f32(_member_value(desc, sem["alpha"], spec, "Alpha")),
        beta=f32(_member_value(desc, sem["beta"], spec, "Beta")),
        bias=f32(_member_value(desc, sem["bias_term"], spec, "Bias")),
        shape=tuple(desc.get(inp, spec).sizes),
    )


EPSILON_PLACEMENTS = ("squared_norm", "max", "add", "inside_root")


@dataclass(frozen=True)
class LpPlan:
    """``kernel: lp_normalization``: Output = Input / the P-norm of its slice along ``axes``, with
    Epsilon placed as ``epsilon_placement`` says (squared_norm: sqrt(norm^2 + eps); max:
    max(norm, eps); add: norm + eps; inside_root: (sum |x|^P + eps)^(1/P))."""

    input: str
    output: str
    axes: tuple[int, ...]
    p: int
    epsilon: float
    epsilon_placement: str
    shape: tuple[int, ...]

    @property
    def reduction_length(self) -> int:
        return math.prod(self.shape[i] for i in self.axes)

    def input_members(self) -> tuple[str, ...]:
        return (self.input,)

    def output_members(self) -> tuple[str, ...]:
        return (self.output,)


def make_lp_plan(desc: OperatorDesc, spec: Spec) -> LpPlan:
    sem = spec.operator(desc.operator).semantics
    if sem.get("kernel") != "lp_normalization":
        raise SemanticsError(f"{desc.operator}: kernel {sem.get('kernel')!r} is not lp_normalization")
    inp = _need(desc, sem, "input", spec)
    p = int(_member_value(desc, sem["p"], spec, "P"))
    if p not in (1, 2):
        raise SemanticsError(f"{sem['p']['member']}: {p} is not 1 or 2")
    placement = str(sem.get("epsilon_placement", "squared_norm"))
    if placement not in EPSILON_PLACEMENTS:
        raise SemanticsError(f"semantics.epsilon_placement {placement!r} is not understood")
    return LpPlan(
        input=inp,
        output=_need(desc, sem, "output", spec),
        axes=reduction_axes(desc, spec),
        p=p,
        epsilon=f32(_member_value(desc, sem.get("epsilon", 0.0), spec, "Epsilon")),
        epsilon_placement=placement,
        shape=tuple(desc.get(inp, spec).sizes),
    )
