"""OpenVINO graphs for the ``openvino`` backend, built from plain values (shapes, axes, floats).

Each lowering function takes a :class:`Graph` and the operands as OpenVINO nodes with their
sizes, adds the operators an OpenVINO user would write for that computation, and returns the
output nodes and the path it took. They know nothing of descs or plans, so that the tests can
hold each one to a float64 formula directly and the backend (``openvino_backend``) only has to
read a plan into these arguments.

The rule they follow: OpenVINO's own operator wherever it has one (MVN-6, GroupNormalization-12,
BatchNormInference-5, LRN-1, NormalizeL2-1, ReduceL1 / ReduceL2, the activation operators), and
elementwise composition only for what it lacks. None of them works around a runtime bug; the
one workaround that exists (:func:`local_response` with ``bias_first=True``) is an option the
backend leaves off by default, so that the bug stays a finding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import openvino as ov
import openvino.opset13 as ops

Node = Any  # an openvino Node or Output; the Python API has no common public type for both
PATHS = (
    "group_normalization",
    "mvn6",
    "reduce_mean+sqrt",
    "elementwise",
    "batch_norm_inference",
    "lrn",
    "lrn+divide-first",
    "normalize_l2",
    "reduce_l2+divide",
    "reduce_l1+divide",
)


@dataclass(frozen=True)
class Operand:
    """An input node and its sizes right-aligned to the main input's rank (1-padded)."""

    node: Node
    sizes: tuple[int, ...]

    def varies_only_along(self, axes: Sequence[int]) -> bool:
        return all(s == 1 for i, s in enumerate(self.sizes) if i not in axes)


@dataclass
class Graph:
    """The parameters and results of one model, and the element type it computes in.

    ``compute`` is the type of every node between the parameters and the results: a FLOAT16
    desc built natively has ``compute`` float16 (its constants are FLOAT16 too, as in any
    FLOAT16 graph); with the float32 option each FLOAT16 parameter is converted to float32 on
    entry and each result back to FLOAT16 on exit."""

    compute: np.dtype
    parameters: list[Node] = field(default_factory=list)
    results: list[Node] = field(default_factory=list)

    def input(self, sizes: Sequence[int], dtype: np.dtype) -> Node:
        param = ops.parameter(list(sizes), np.dtype(dtype))
        self.parameters.append(param)
        return param if np.dtype(dtype) == self.compute else ops.convert(param, self.compute)

    def const(self, value: Any) -> Node:
        return ops.constant(np.asarray(value, dtype=self.compute))

    def axes(self, axes: Sequence[int]) -> Node:
        return ops.constant(np.asarray(list(axes), dtype=np.int64))

    def output(self, node: Node, dtype: np.dtype) -> None:
        if np.dtype(dtype) != self.compute:
            node = ops.convert(node, np.dtype(dtype))
        self.results.append(ops.result(node))

    def model(self) -> ov.Model:
        return ov.Model(self.results, self.parameters, "dmlconform")


def _scale_bias(g: Graph, y: Node, scale: Operand | None, bias: Operand | None) -> Node:
    if scale is not None:
        y = ops.multiply(y, scale.node)
    if bias is not None:
        y = ops.add(y, bias.node)
    return y


def channel_vector(op: Operand | None, channels: int, g: Graph, fill: float) -> Node:
    """A per-channel operand as the [C] vector GroupNormalization and BatchNormInference take
    (``fill`` where the desc leaves it null: 1 for a scale, 0 for a bias)."""
    if op is None:
        return g.const(np.full(channels, fill))
    flat = ops.reshape(op.node, g.axes([-1]), special_zero=False)
    if op.sizes[1] == channels:
        return flat
    return ops.broadcast(flat, g.axes([channels]))


def per_channel(op: Operand | None) -> bool:
    """Null, or varying at most along axis 1 (what a [C] weight can hold)."""
    return op is None or (len(op.sizes) >= 2 and op.varies_only_along((1,)))


def group_count(
    shape: Sequence[int], axes: Sequence[int], scale: Operand | None, bias: Operand | None
) -> int | None:
    """GroupNormalization's ``num_groups`` when it computes this normalization: C groups over
    axes {2, ..., r-1} (an instance normalization), one group over {1, ..., r-1}; Scale and Bias
    null or per-channel. None where it does not fit."""
    rank = len(shape)
    if rank < 2 or not (per_channel(scale) and per_channel(bias)):
        return None
    if rank >= 3 and tuple(axes) == tuple(range(2, rank)):
        return int(shape[1])
    if tuple(axes) == tuple(range(1, rank)):
        return 1
    return None


def statistics(g: Graph, x: Node, axes: Sequence[int]) -> tuple[Node, Node]:
    """The mean and population variance over ``axes`` (kept as size-1 dims): ReduceMean of the
    input and of its squared deviations, what an OpenVINO user writes for a batch's statistics
    (MVN-6 does not return them)."""
    mean = ops.reduce_mean(x, g.axes(axes), keep_dims=True)
    variance = ops.reduce_mean(ops.squared_difference(x, mean), g.axes(axes), keep_dims=True)
    return mean, variance


def normalization(
    g: Graph,
    x: Node,
    shape: Sequence[int],
    axes: Sequence[int],
    *,
    normalize_variance: bool,
    epsilon: float,
    scale: Operand | None = None,
    bias: Operand | None = None,
    fused_add: Operand | None = None,
    want_statistics: bool = False,
    group_normalization: bool = True,
) -> tuple[dict[str, Node], str]:
    """(x - mean) / sqrt(variance + epsilon) * scale + bias + fused_add over ``axes``.

    GroupNormalization-12 where it fits (:func:`group_count`; ``group_normalization=False``
    declines it), else MVN-6 with ``eps_mode="inside_sqrt"`` (DirectML's Epsilon is inside the
    square root) and the scale and bias as broadcast multiply / add. ``want_statistics`` adds
    ``mean`` and ``variance`` (:func:`statistics`)."""
    groups = group_count(shape, axes, scale, bias) if normalize_variance and group_normalization else None
    if groups is not None:
        channels = int(shape[1])
        y = ops.group_normalization(
            x,
            channel_vector(scale, channels, g, 1.0),
            channel_vector(bias, channels, g, 0.0),
            groups,
            epsilon,
        )
        path = "group_normalization"
    else:
        y = ops.mvn(x, g.axes(axes), normalize_variance, epsilon, "inside_sqrt")
        y = _scale_bias(g, y, scale, bias)
        path = "mvn6"
    if fused_add is not None:
        y = ops.add(y, fused_add.node)
    out = {"output": y}
    if want_statistics:
        out["mean"], out["variance"] = statistics(g, x, axes)
    return out, path


def rms_normalization(
    g: Graph,
    x: Node,
    axes: Sequence[int],
    *,
    normalize_variance: bool,
    epsilon: float,
    scale: Operand | None = None,
    bias: Operand | None = None,
    fused_add: Operand | None = None,
) -> tuple[dict[str, Node], str]:
    """x / sqrt(mean(x^2) + epsilon) * scale + bias + fused_add: OpenVINO's opset has no RMS
    normalization (its RMS node is internal), so this is the pattern users write (and that the
    CPU plugin fuses): Multiply, ReduceMean, Add, Sqrt, Divide. Without NormalizeVariance the
    input itself is scaled and biased."""
    y = x
    path = "elementwise"
    if normalize_variance:
        square_mean = ops.reduce_mean(ops.multiply(x, x), g.axes(axes), keep_dims=True)
        y = ops.divide(x, ops.sqrt(ops.add(square_mean, g.const(epsilon))))
        path = "reduce_mean+sqrt"
    y = _scale_bias(g, y, scale, bias)
    if fused_add is not None:
        y = ops.add(y, fused_add.node)
    return {"output": y}, path


def given_statistics(
    g: Graph,
    x: Node,
    shape: Sequence[int],
    *,
    mean: Operand,
    variance: Operand,
    epsilon: float,
    scale: Operand | None = None,
    bias: Operand | None = None,
) -> tuple[dict[str, Node], str]:
    """(x - Mean) / sqrt(Variance + epsilon) * Scale + Bias with the statistics given.
    BatchNormInference-5 where all four are per-channel; the formula elementwise otherwise
    (Mean and Variance with spatial extent, DirectML's Spatial FALSE)."""
    if len(shape) >= 2 and all(per_channel(op) for op in (mean, variance, scale, bias)):
        c = int(shape[1])
        y = ops.batch_norm_inference(
            x,
            channel_vector(scale, c, g, 1.0),
            channel_vector(bias, c, g, 0.0),
            channel_vector(mean, c, g, 0.0),
            channel_vector(variance, c, g, 1.0),
            epsilon,
        )
        return {"output": y}, "batch_norm_inference"
    y = ops.divide(ops.subtract(x, mean.node), ops.sqrt(ops.add(variance.node, g.const(epsilon))))
    return {"output": _scale_bias(g, y, scale, bias)}, "elementwise"


def lrn_alpha(alpha: float, local_size: int, window_axes: int, divisor: float) -> float:
    """The Alpha to give LRN-1 so that its formula is DirectML's: OpenVINO divides Alpha by
    size^len(axes) (the window's element count), DirectML by ``divisor`` (LocalSize, or the
    window's area where the spec says so)."""
    return alpha * float(local_size) ** window_axes / divisor


def local_response(
    g: Graph,
    x: Node,
    axes: Sequence[int],
    *,
    local_size: int,
    alpha: float,
    beta: float,
    bias: float,
    divisor: float,
    bias_first: bool = False,
) -> tuple[dict[str, Node], str]:
    """x / (bias + alpha / divisor * sum of squares over the window)^beta by LRN-1 over
    ``axes`` ([1] across channels, [2, 3] within one), Alpha passed as :func:`lrn_alpha`.

    LRN-1's window for an even size is symmetric, size - 1 elements (DirectML's reaches one
    further above): the suite's finding, not corrected here. ``bias_first`` is the workaround
    for the CPU plugin's integer Bias (``lrn_bias=divide-first``): LRN with Alpha / Bias and
    Bias 1, times Bias^-Beta, the same formula where Bias > 0."""
    a = lrn_alpha(alpha, local_size, len(axes), divisor)
    if bias_first and bias > 0:
        y = ops.lrn(x, g.axes(axes), a / bias, beta, 1.0, local_size)
        y = ops.multiply(y, g.const(bias ** (-beta)))
        return {"output": y}, "lrn+divide-first"
    return {"output": ops.lrn(x, g.axes(axes), a, beta, bias, local_size)}, "lrn"


def lp_normalization(
    g: Graph, x: Node, axes: Sequence[int], *, p: int, epsilon: float, placement: str = "squared_norm"
) -> tuple[dict[str, Node], str]:
    """x / the P-norm of its slice, Epsilon placed as ``placement`` says (the spec's
    ``epsilon_placement``). P = 2 with Epsilon added to the squared norm is NormalizeL2-1
    (``eps_mode="add"``); everything else is ReduceL1 / ReduceL2 and a Divide: norm + eps,
    max(norm, eps), sqrt(norm^2 + eps) (P = 1), (sum |x| + eps) (P = 1, inside_root)."""
    if p == 2 and placement in ("squared_norm", "inside_root"):
        return {"output": ops.normalize_l2(x, g.axes(axes), epsilon, "add")}, "normalize_l2"
    reduce = ops.reduce_l2 if p == 2 else ops.reduce_l1
    norm = reduce(x, g.axes(axes), keep_dims=True)
    path = f"reduce_l{p}+divide"
    if epsilon == 0:
        return {"output": ops.divide(x, norm)}, path
    eps = g.const(epsilon)
    if placement == "max":
        denominator = ops.maximum(norm, eps)
    elif placement in ("add", "inside_root"):  # P = 1: (sum |x| + eps)^(1/1)
        denominator = ops.add(norm, eps)
    else:  # squared_norm, P = 1
        denominator = ops.sqrt(ops.add(ops.multiply(norm, norm), eps))
    return {"output": ops.divide(x, denominator)}, path


# ------------------------------------------------------------------------------------------
# Fused activations: OpenVINO's operator where its parameterization is DirectML's, else composed


def _select(cond: Node, a: Node, b: Node) -> Node:
    return ops.select(cond, a, b)


def _shrink(g: Graph, x: Node, p: Mapping[str, float]) -> Node:
    t, b = g.const(p["Threshold"]), g.const(p["Bias"])
    zero = g.const(0.0)
    below = _select(ops.less(x, ops.negative(t)), ops.add(x, b), zero)
    return _select(ops.greater(x, t), ops.subtract(x, b), below)


def _celu(g: Graph, x: Node, p: Mapping[str, float]) -> Node:
    """max(0, x) + min(0, Alpha * (exp(x / Alpha) - 1)): OpenVINO has no Celu (its ONNX
    frontend composes this same expression)."""
    a = g.const(p["Alpha"])
    neg = ops.multiply(a, ops.subtract(ops.exp(ops.divide(x, a)), g.const(1.0)))
    return ops.add(ops.relu(x), ops.minimum(neg, g.const(0.0)))


def _softplus(g: Graph, x: Node, steepness: float) -> Node:
    """ln(1 + exp(k x)) / k: SoftPlus-4 has no steepness, so x is scaled around it (k = 1
    is SoftPlus alone)."""
    if steepness == 1.0:
        return ops.softplus(x)
    k = g.const(steepness)
    return ops.divide(ops.softplus(ops.multiply(x, k)), k)


ACTIVATIONS: dict[str, Callable[[Graph, Node, Mapping[str, float]], Node]] = {
    "ACTIVATION_IDENTITY": lambda g, x, p: x,
    "ACTIVATION_LINEAR": lambda g, x, p: ops.add(ops.multiply(x, g.const(p["Alpha"])), g.const(p["Beta"])),
    "ACTIVATION_SIGMOID": lambda g, x, p: ops.sigmoid(x),
    "ACTIVATION_HARD_SIGMOID": lambda g, x, p: ops.hard_sigmoid(x, g.const(p["Alpha"]), g.const(p["Beta"])),
    "ACTIVATION_TANH": lambda g, x, p: ops.tanh(x),
    "ACTIVATION_SCALED_TANH": lambda g, x, p: ops.multiply(
        ops.tanh(ops.multiply(x, g.const(p["Beta"]))), g.const(p["Alpha"])
    ),
    "ACTIVATION_RELU": lambda g, x, p: ops.relu(x),
    "ACTIVATION_LEAKY_RELU": lambda g, x, p: ops.prelu(x, g.const([p["Alpha"]])),
    "ACTIVATION_THRESHOLDED_RELU": lambda g, x, p: _select(
        ops.greater(x, g.const(p["Alpha"])), x, g.const(0.0)
    ),
    "ACTIVATION_ELU": lambda g, x, p: ops.elu(x, p["Alpha"]),
    "ACTIVATION_SCALED_ELU": lambda g, x, p: ops.selu(x, g.const([p["Alpha"]]), g.const([p["Gamma"]])),
    "ACTIVATION_SOFTPLUS": lambda g, x, p: _softplus(g, x, p["Steepness"]),
    "ACTIVATION_PARAMETRIC_SOFTPLUS": lambda g, x, p: ops.multiply(
        ops.softplus(ops.multiply(x, g.const(p["Beta"]))), g.const(p["Alpha"])
    ),
    "ACTIVATION_SOFTSIGN": lambda g, x, p: ops.softsign(x),
    "ACTIVATION_SHRINK": _shrink,
    "ACTIVATION_CELU": _celu,
    "ACTIVATION_GELU": lambda g, x, p: ops.gelu(x, "erf"),
}


def activate(g: Graph, y: Node, activation: str | None, params: Mapping[str, float]) -> Node:
    """``activation`` (DirectML's name) applied to ``y``; KeyError for one not mapped."""
    if activation is None:
        return y
    return ACTIVATIONS[activation](g, y, params)


#: INFERENCE_PRECISION_HINT values the backend may set ("plugin": none, the plugin's default)
PRECISION_HINTS = ("f32", "f16", "bf16", "plugin")


def compile_model(core: ov.Core, model: ov.Model, hint: str = "f32") -> Any:
    """The model compiled for the CPU with ``INFERENCE_PRECISION_HINT`` ``hint`` (``plugin``:
    none). f32 holds every graph to at least float32 arithmetic: on a CPU with AVX-512 BF16 the
    plugin's default is bf16, which it applies to float32 graphs and to parts of FLOAT16 ones."""
    config = {} if hint == "plugin" else {"INFERENCE_PRECISION_HINT": hint}
    try:
        return core.compile_model(model, "CPU", config)
    except RuntimeError as exc:  # the plugin's message is a stack of "Exception from" lines
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        reason = next(
            (ln for ln in reversed(lines) if not ln.startswith("Exception from")), lines[-1] if lines else ""
        )
        raise RuntimeError(f"OpenVINO's CPU plugin could not compile the graph: {reason}") from None
