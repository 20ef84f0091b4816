"""The ``openvino`` backend (extra ``openvino``): OpenVINO's CPU plugin, each operator lowered to
OpenVINO's own operator wherever it has one (the graphs: ``openvino_graphs``).

=====================  ====================================================================
path                   used when
=====================  ====================================================================
group_normalization    normalization, NormalizeVariance, axes {2, ..., r-1} (C groups) or
                       {1, ..., r-1} (one group), Scale and Bias null or per-channel
mvn6                   every other normalization: MVN-6, ``eps_mode="inside_sqrt"``, then
                       Scale and Bias broadcast
reduce_mean+sqrt       MVN2 without the mean: x / sqrt(ReduceMean(x * x) + Epsilon)
elementwise            MVN2 without the variance; BATCH_NORMALIZATION where a statistic has
                       spatial extent (Spatial FALSE)
batch_norm_inference   BATCH_NORMALIZATION with per-channel Mean, Variance, Scale, Bias
lrn                    LOCAL_RESPONSE_NORMALIZATION: LRN-1, axes [1] or [2, 3]
lrn+divide-first       the same with ``lrn_bias=divide-first`` (the integer-Bias workaround)
normalize_l2           LP_NORMALIZATION, P = 2: NormalizeL2-1, ``eps_mode="add"``
reduce_l1+divide       LP_NORMALIZATION, P = 1: x / sqrt(ReduceL1(x)^2 + Epsilon)
=====================  ====================================================================

Statistics outputs (BATCH_NORMALIZATION_TRAINING's mean and variance) come from ReduceMean
(``last_info()["statistics"]``). The gradient operators have no OpenVINO operator (the opset
has no training operators): ``supports()`` says so.

FLOAT16 descs build a FLOAT16 graph by default (``float16=native``): FLOAT16 parameters,
constants (Epsilon where it is one, activation parameters) and results. ``float16=float32``
builds the graph in float32 with FLOAT16 only at its ends. Every graph compiles with
``INFERENCE_PRECISION_HINT`` f32 (option ``inference_precision``): on CPUs with AVX-512 BF16
the plugin's default is bf16, for float32 graphs and for parts of FLOAT16 ones, so without it
the results would depend on the host's instruction set (f32 is the default elsewhere).
Compiled models are cached by structure (shapes, data types, attributes, the options).
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
import openvino as ov

import dmlconform as dc
from dmlconform.backends import FEATURE_LEVEL_OPTION, BackendBase, Option
from dmlconform.backends import openvino_graphs as graphs
from dmlconform.backends.openvino_graphs import Graph, Operand

#: compiled models kept (least recently used dropped), and the input size past which a model
#: is not kept (it holds its buffers; compiling is cheap beside running it)
CACHE_ENTRIES = 128
CACHE_MAX_ELEMENTS = 1 << 20

_FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float16))

#: what OpenVINO's opset lacks, by kernel, for supports()
UNSUPPORTED_KERNELS = {
    "normalization_grad": "OpenVINO has no training or gradient operators (opset13): no batch normalization gradient",
    "local_response_grad": "OpenVINO has no training or gradient operators (opset13): no LRN gradient",
}


class OpenVinoBackend(BackendBase):
    """OpenVINO (CPU plugin); see the module docstring for the paths."""

    name: ClassVar[str] = "openvino"
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        FEATURE_LEVEL_OPTION,
        Option(
            "float16",
            "native",
            "FLOAT16 descs: a FLOAT16 graph (native), or a float32 graph with FLOAT16 at its ends",
            ("native", "float32"),
            travels=True,
        ),
        Option(
            "lrn_bias",
            "as-given",
            "LRN's Bias: passed to LRN-1 as given, or divide-first (LRN with Alpha / Bias and Bias 1, "
            "times Bias^-Beta): a workaround for the CPU plugin's integer Bias, off by default",
            ("as-given", "divide-first"),
            travels=True,
        ),
        Option(
            "inference_precision",
            "f32",
            "INFERENCE_PRECISION_HINT of every compiled model: f32 (the plugin computes in float32 at "
            "least, on every CPU), f16, bf16, or plugin (none: its default, bf16 on CPUs with AVX-512 BF16)",
            graphs.PRECISION_HINTS,
            travels=True,
        ),
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.core = ov.Core()
        self._cache: OrderedDict[tuple[Any, ...], _Compiled] = OrderedDict()

    # -- protocol ---------------------------------------------------------------------------

    def supports(self, desc: dc.OperatorDesc) -> bool | str:
        try:
            plan = dc.plan(desc)
        except dc.PlanError as exc:
            return f"the desc cannot be planned: {exc}"
        if plan.kernel in UNSUPPORTED_KERNELS:
            return f"{plan.operator}: {UNSUPPORTED_KERNELS[plan.kernel]}"
        if plan.kernel not in LOWERINGS:
            return f"{plan.operator}: kernel {plan.kernel!r} has no OpenVINO lowering"
        for member in (*plan.inputs, *plan.outputs):
            if plan.dtype(member) not in _FLOAT_TYPES:
                return f"{member}: data type {plan.dtype(member)} is not lowered to OpenVINO"
        activation = getattr(plan, "activation", None)
        if activation is not None and activation not in graphs.ACTIVATIONS:
            return f"fused activation {activation} has no OpenVINO lowering"
        return True

    def execute(self, desc: dc.OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        reason = self.supports(desc)
        if reason is not True:
            raise dc.Unsupported(str(reason))
        plan = dc.plan(desc)
        io = plan.dtype(plan.input)
        compute = np.dtype(np.float32) if self.options["float16"] == "float32" else io
        key = (str(compute), *structure_key(plan))
        compiled = self._cache.get(key)
        hit = compiled is not None
        if compiled is None:
            compiled = self._compile(plan, compute)
            if largest_member(plan) <= CACHE_MAX_ELEMENTS:
                self._cache[key] = compiled
                while len(self._cache) > CACHE_ENTRIES:
                    self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        arrays = [np.ascontiguousarray(inputs[m]).reshape(plan.aligned_sizes(m)) for m in compiled.inputs]
        results = compiled.model(arrays).to_tuple()
        self._last_info = {
            "path": compiled.path,
            "precision": compute.name,
            "inference_precision": compiled.inference_precision,
            "cache": "hit" if hit else "miss",
        }
        if compiled.statistics:
            self._last_info["statistics"] = compiled.statistics
        return plan.finish(dict(zip(compiled.outputs, results, strict=True)))

    def versions(self) -> dict[str, str]:
        return {**super().versions(), "openvino": ov.get_version()}

    def describe(self) -> str:
        device = self.core.get_property("CPU", "FULL_DEVICE_NAME")
        return f"openvino {ov.get_version()} CPU ({device}) (feature level {self.feature_level})"

    # -- compiling ----------------------------------------------------------------------------

    def _compile(self, plan: Any, compute: np.dtype) -> _Compiled:
        g = Graph(compute)
        members: list[str] = []

        def operand(member: str | None) -> Operand | None:
            if member is None:
                return None
            sizes = tuple(plan.aligned_sizes(member))
            members.append(member)
            return Operand(g.input(sizes, plan.dtype(member)), sizes)

        nodes, path, stats = LOWERINGS[plan.kernel](self, plan, g, operand)
        outputs = list(nodes)
        for member in outputs:
            g.output(nodes[member], plan.dtype(member))
        try:
            model = graphs.compile_model(self.core, g.model(), self.options["inference_precision"])
        except RuntimeError as exc:
            raise RuntimeError(f"{exc} (path {path}, {compute.name})") from None
        precision = model.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        return _Compiled(model, tuple(members), tuple(outputs), path, precision, stats)


@dataclasses.dataclass(frozen=True)
class _Compiled:
    """A compiled model and what reading it needs: the input members in parameter order, the
    output members in result order, the path it took and the precision the plugin settled on."""

    model: Any
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    path: str
    inference_precision: str
    statistics: str | None = None


def largest_member(plan: Any) -> int:
    """The element count of the plan's largest tensor: a model compiled for a bigger one is not
    cached (it holds its buffers, and compiling it costs little beside running it)."""
    return max(math.prod(plan.sizes(m)) for m in (*plan.inputs, *plan.outputs))


def _freeze(value: Any) -> Any:
    """``value`` as something hashable (mappings sorted), for the cache key."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def structure_key(plan: Any) -> tuple[Any, ...]:
    """What a compiled model depends on: the kernel, the plan's attributes (axes, epsilon, the
    activation and its parameters, LRN's window and constants...) and each member's aligned
    sizes and data type. Not the tensor descs' strides: the data arrives packed."""
    fields = {
        f.name: getattr(plan, f.name)
        for f in dataclasses.fields(plan)
        if f.name not in ("tensors",) and not f.name.startswith("_")
    }
    members = tuple(
        (m, tuple(plan.aligned_sizes(m)), str(plan.dtype(m))) for m in (*plan.inputs, *plan.outputs)
    )
    return (plan.kernel, _freeze(fields), members)


# --------------------------------------------------------------------------------------------
# The lowering of each kernel: (backend, plan, graph, operand) -> ({member: node}, path, statistics)

OperandFn = Callable[[str | None], Operand | None]


def _input(plan: Any, operand: OperandFn) -> Operand:
    x = operand(plan.input)
    assert x is not None
    return x


def _activated(g: Graph, plan: Any, node: Any) -> Any:
    return graphs.activate(g, node, plan.activation, plan.activation_params)


def lower_normalization(backend: OpenVinoBackend, plan: Any, g: Graph, operand: OperandFn) -> Any:
    x = _input(plan, operand)
    want = plan.mean_output is not None or plan.variance_output is not None
    nodes, path = graphs.normalization(
        g,
        x.node,
        plan.shape,
        plan.axes,
        normalize_variance=plan.normalize_variance,
        epsilon=plan.epsilon,
        scale=operand(plan.scale),
        bias=operand(plan.bias),
        fused_add=operand(plan.fused_add),
        want_statistics=want,
    )
    out = {plan.output: _activated(g, plan, nodes["output"])}
    for member, name in ((plan.mean_output, "mean"), (plan.variance_output, "variance")):
        if member is not None:
            out[member] = nodes[name]
    return out, path, "reduce_mean" if want else None


def lower_rms(backend: OpenVinoBackend, plan: Any, g: Graph, operand: OperandFn) -> Any:
    x = _input(plan, operand)
    nodes, path = graphs.rms_normalization(
        g,
        x.node,
        plan.axes,
        normalize_variance=plan.normalize_variance,
        epsilon=plan.epsilon,
        scale=operand(plan.scale),
        bias=operand(plan.bias),
        fused_add=operand(plan.fused_add),
    )
    return {plan.output: _activated(g, plan, nodes["output"])}, path, None


def lower_given(backend: OpenVinoBackend, plan: Any, g: Graph, operand: OperandFn) -> Any:
    x = _input(plan, operand)
    mean, variance = operand(plan.mean), operand(plan.variance)
    assert mean is not None and variance is not None
    nodes, path = graphs.given_statistics(
        g,
        x.node,
        plan.shape,
        mean=mean,
        variance=variance,
        epsilon=plan.epsilon,
        scale=operand(plan.scale),
        bias=operand(plan.bias),
    )
    return {plan.output: _activated(g, plan, nodes["output"])}, path, None


def lower_local_response(backend: OpenVinoBackend, plan: Any, g: Graph, operand: OperandFn) -> Any:
    x = _input(plan, operand)
    nodes, path = graphs.local_response(
        g,
        x.node,
        plan.axes,
        local_size=plan.local_size,
        alpha=plan.alpha,
        beta=plan.beta,
        bias=plan.bias,
        divisor=plan.divisor,
        bias_first=backend.options["lrn_bias"] == "divide-first",
    )
    return {plan.output: nodes["output"]}, path, None


def lower_lp(backend: OpenVinoBackend, plan: Any, g: Graph, operand: OperandFn) -> Any:
    x = _input(plan, operand)
    nodes, path = graphs.lp_normalization(
        g, x.node, plan.axes, p=plan.p, epsilon=plan.epsilon, placement=plan.epsilon_placement
    )
    return {plan.output: nodes["output"]}, path, None


#: This backend's lowering of each kernel it maps (the plan's ``kernel``).
LOWERINGS: dict[str, Callable[..., Any]] = {
    "normalization": lower_normalization,
    "rms_normalization": lower_rms,
    "given_statistics": lower_given,
    "local_response": lower_local_response,
    "lp_normalization": lower_lp,
}
