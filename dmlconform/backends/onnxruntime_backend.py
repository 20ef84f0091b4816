"""The ``onnxruntime`` backend (extra ``ort``): each desc becomes a small ONNX model run by ONNX
Runtime, on the CPU by default or on any execution provider (``provider=DmlExecutionProvider``
on Windows runs the same models on DirectML).

Why dedicated operators: a conformance run should measure what users of ONNX Runtime actually
get, so a desc is mapped onto the ONNX operator that a model exporter would emit for it when one
fits, and onto a graph of primitive operators otherwise:

==========================  ===============================================================
path                        used when (see :class:`dc.NormalizationPlan`)
==========================  ===============================================================
InstanceNormalization       NormalizeVariance, rank >= 3, axes = {2, ..., rank-1}, Scale and
                            Bias null or per-channel ({1, C, 1, ...})
BatchNormalization          opset >= 14, NormalizeVariance, rank >= 2, axes = {0, 2, ...,
                            rank-1}, Scale and Bias null or per-channel; training_mode=1 with
                            momentum 0, so its running_mean / running_var outputs *are* the
                            batch statistics (population variance, per the ONNX spec)
LayerNormalization          opset >= 17, NormalizeVariance, axes = a trailing run k..rank-1,
                            Scale and Bias vary only along the normalized axes
MeanVarianceNormalization   NormalizeVariance and Epsilon == 0: ONNX's function adds 1e-9 to
                            the std, but ONNX Runtime's CPU kernel adds nothing, so it computes
                            (x - mean) / sqrt(var), DirectML's formula exactly when Epsilon is
                            0 (and NaN on a zero-variance slice, which DirectML leaves undefined
                            there too); Scale and Bias are applied after it with Mul / Add
primitive                   everything else: ReduceMean, Sub, Mul, Sqrt, Add, Div
blocked                     reductions of LONG_ROW (16384) elements or more, chosen first: the
                            primitive graph with each mean a blocked sum (Transpose, Reshape to
                            rows of ~sqrt(n), ReduceSum twice), what a careful lowering of a
                            long reduction does; ONNX Runtime's own long-row reductions are
                            sequential in a few lanes (see LONG_ROW)
==========================  ===============================================================

Statistics outputs (OutputMeanTensor / OutputVarianceTensor) come from BatchNormalization on
that path and from a ReduceMean graph otherwise. Fused activations map to the ONNX activation
operators (Selu is exactly SCALED_ELU, Shrink is SHRINK, ...) or are composed from primitives
(LINEAR, SCALED_TANH, SOFTPLUS with Steepness, PARAMETRIC_SOFTPLUS, GELU before opset 20).

FLOAT16 descs run as float16 graphs (the option ``float16=float32`` computes them in float32
between casts instead). A float-only operator (Celu) is wrapped in casts locally; a graph that
the provider rejects (no float16 kernel) is rebuilt in float32 with Cast at the graph boundary;
``last_info()`` says which happened. Sessions are cached by the desc's structure (rank, dtypes,
axes, broadcast pattern, attributes) with symbolic dimensions, so one session serves every
shape of that structure.

ONNX Runtime's CPU MeanVarianceNormalization kernel is a two-pass float32 computation,
Y = (X - E[X]) / sqrt(E[(X - E[X])^2]), *without* the 1e-9 that the ONNX function body adds to
the std: a constant slice (or a reduction of one element) gives 0/0 = NaN where ONNX's own
definition gives 0. With any Epsilon > 0 DirectML's result is finite there, so the path is
chosen only for Epsilon == 0 (forcing ``path=MeanVarianceNormalization`` still reports what ONNX
Runtime does).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import dmlconform as dc
from dmlconform.backends import FEATURE_LEVEL_OPTION, BackendBase, BackendError, Option

PATHS = (
    "blocked",
    "InstanceNormalization",
    "BatchNormalization",
    "LayerNormalization",
    "MeanVarianceNormalization",
    "primitive",
)
#: Largest desc Epsilon for which ONNX Runtime's MeanVarianceNormalization kernel, which divides by
#: sqrt(var) with no epsilon at all, computes DirectML's sqrt(var + Epsilon): only 0. (Any
#: Epsilon > 0 makes DirectML finite on a zero-variance slice, where the kernel gives NaN.)
MVN_EPSILON_LIMIT = 0.0
MIN_OPSET = 13
#: Reductions at least this long take the ``blocked`` path: ONNX Runtime's CPU ReduceMean and
#: LayerNormalization accumulate a long row in a few float32 lanes, sequentially: ReduceMean errs
#: up to 3x the required (blocked summation) accuracy at n = 65535, both err 4 to 230 times it at
#: n = 2^20 to 2^24 (measured with ONNX Runtime 1.32):
#: ``path=LayerNormalization`` or ``path=primitive`` still shows that.
LONG_ROW = 16384

_ONNX_TYPE = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16}
Feed = Callable[[dc.NormalizationPlan, Mapping[str, np.ndarray]], np.ndarray]


def _parse_opset(text: str) -> int:
    value = int(text)
    latest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= value <= latest:
        raise ValueError(f"must be between {MIN_OPSET} and {latest} (onnx {onnx.__version__})")
    return value


def _parse_provider(text: str) -> str:
    available = ort.get_available_providers()
    if text not in available:
        hint = ""
        if text == "DmlExecutionProvider":  # ONNX Runtime's own provider name, not a DML operator
            hint = (
                "; it ships in the onnxruntime-directml package (Windows): pip install onnxruntime-directml"
            )
        raise ValueError(f"not available in this onnxruntime build (available: {', '.join(available)}){hint}")
    return text


def _positive(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must be >= 0")
    return value


# --------------------------------------------------------------------------------------------
# Graph building


@dataclass
class _Graph:
    """A tiny ONNX graph builder: unique names, typed scalar constants, inputs with symbolic
    dimensions. ``compute`` is the element type the arithmetic runs in; ``io`` the type of the
    graph's inputs and outputs (they differ when a float16 desc is computed in float32)."""

    io: np.dtype
    compute: np.dtype
    opset: int
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    initializers: list[onnx.TensorProto] = field(default_factory=list)
    inputs: list[onnx.ValueInfoProto] = field(default_factory=list)
    outputs: list[onnx.ValueInfoProto] = field(default_factory=list)
    feeds: list[tuple[str, Feed]] = field(default_factory=list)
    counter: int = 0
    notes: list[str] = field(default_factory=list)

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"{hint}_{self.counter}"

    def node(self, op: str, inputs: list[str], outputs: int = 1, **attrs: Any) -> Any:
        names = [self.fresh(op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, **attrs))
        return names[0] if outputs == 1 else names

    def const(self, value: float | list[int], dtype: np.dtype | None = None) -> str:
        name = self.fresh("const")
        arr = np.asarray(value, dtype=dtype if dtype is not None else self.compute)
        self.initializers.append(numpy_helper.from_array(arr, name))
        return name

    def cast(self, name: str, to: np.dtype) -> str:
        return self.node("Cast", [name], to=_ONNX_TYPE[np.dtype(to)])

    def add_input(self, name: str, shape: list[int | str], feed: Feed) -> str:
        """A graph input in the io type, returned converted to the compute type."""
        self.inputs.append(helper.make_tensor_value_info(name, _ONNX_TYPE[self.io], shape))
        self.feeds.append((name, feed))
        return name if self.io == self.compute else self.cast(name, self.compute)

    def add_output(self, name: str, value: str) -> None:
        if self.io != self.compute:
            value = self.cast(value, self.io)
        self.nodes.append(helper.make_node("Identity", [value], [name]))
        self.outputs.append(helper.make_tensor_value_info(name, _ONNX_TYPE[self.io], None))

    def blocked_mean(self, x: str, shape: tuple[int, ...], axes: tuple[int, ...]) -> str:
        """The mean over ``axes`` (kept as 1s) as a two-level sum: each slice is padded with
        zeros into rows of ~sqrt(n) elements, the rows are summed, then the row sums. Static
        shapes: the session is compiled for this one shape."""
        kept = tuple(i for i in range(len(shape)) if i not in axes)
        perm = kept + axes
        k = math.prod(shape[i] for i in kept)
        n = math.prod(shape[i] for i in axes)
        b = 2 ** math.ceil(math.log2(max(math.sqrt(n), 1.0)))
        nb = -(-n // b)
        i64 = np.dtype(np.int64)
        t = self.node("Transpose", [x], perm=list(perm))
        rows = self.node("Reshape", [t, self.const([k, n], i64)])
        if nb * b != n:
            rows = self.node("Pad", [rows, self.const([0, 0, 0, nb * b - n], i64)], mode="constant")
        blocks = self.node("Reshape", [rows, self.const([k, nb, b], i64)])
        part = self.node("ReduceSum", [blocks, self.const([2], i64)], keepdims=0)
        total = self.node("ReduceSum", [part, self.const([1], i64)], keepdims=0)
        mean = self.node("Div", [total, self.const(float(n))])
        kept_shape = [shape[i] for i in kept] + [1] * len(axes)
        back = self.node("Reshape", [mean, self.const(kept_shape, i64)])
        return self.node("Transpose", [back], perm=[int(j) for j in np.argsort(perm)])

    def reduce_mean(self, x: str, axes: tuple[int, ...]) -> str:
        if not axes:  # ONNX reduces over every axis when axes is empty; DML reduces over none
            return self.node("Identity", [x])
        if self.opset >= 18:
            return self.node("ReduceMean", [x, self.const(list(axes), np.dtype(np.int64))], keepdims=1)
        return self.node("ReduceMean", [x], axes=list(axes), keepdims=1)

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "dmlconform", self.inputs, self.outputs, self.initializers)
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="dmlconform")
        model.ir_version = helper.find_min_ir_version_for(opsets)
        return model


def _dims(rank: int) -> list[int | str]:
    return [f"d{i}" for i in range(rank)]


def _aligned_feed(member: str) -> Feed:
    """The tensor right-aligned to the input's rank (the graph broadcasts it)."""

    def feed(plan: dc.NormalizationPlan, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.asarray(inputs[member]).reshape(plan.aligned_sizes(member))

    return feed


def _channel_feed(member: str | None, fill: float) -> Feed:
    """A per-channel tensor as the 1-D [C] vector instance/batch norm take (``fill`` if null)."""

    def feed(plan: dc.NormalizationPlan, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        channels = plan.shape[1]
        if member is None:
            return np.full(channels, fill, dtype=plan.dtypes[plan.input])
        arr = np.asarray(inputs[member]).reshape(plan.aligned_sizes(member))
        return np.broadcast_to(arr.reshape(-1), (channels,))

    return feed


def _trailing_feed(member: str | None, first_axis: int, fill: float) -> Feed:
    """The tensor broadcast to the normalized shape input.shape[k:] (layer norm's weight)."""

    def feed(plan: dc.NormalizationPlan, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        shape = plan.shape[first_axis:]
        if member is None:
            return np.full(shape, fill, dtype=plan.dtypes[plan.input])
        arr = np.asarray(inputs[member]).reshape(plan.aligned_sizes(member))
        return np.broadcast_to(arr.reshape(arr.shape[first_axis:]), shape)

    return feed


def _aligned_shape(plan: dc.NormalizationPlan, member: str) -> list[int | str]:
    return [1 if s == 1 else f"d{i}" for i, s in enumerate(plan.aligned_sizes(member))]


# --------------------------------------------------------------------------------------------
# Activations


def _p(g: _Graph, params: Mapping[str, float], name: str) -> str:
    return g.const(params[name])


def _softplus(g: _Graph, x: str, p: Mapping[str, float]) -> str:
    s = p["Steepness"]
    if s == 1.0:
        return g.node("Softplus", [x])
    return g.node("Div", [g.node("Softplus", [g.node("Mul", [x, g.const(s)])]), g.const(s)])


def _gelu(g: _Graph, x: str, p: Mapping[str, float]) -> str:
    if g.opset >= 20:
        return g.node("Gelu", [x])
    erf = g.node("Erf", [g.node("Mul", [x, g.const(1.0 / math.sqrt(2.0))])])
    return g.node("Mul", [g.node("Mul", [x, g.const(0.5)]), g.node("Add", [erf, g.const(1.0)])])


def _celu(g: _Graph, x: str, p: Mapping[str, float]) -> str:
    if g.compute == np.dtype(np.float32):
        return g.node("Celu", [x], alpha=p["Alpha"])
    g.notes.append("Celu is float32-only in ONNX: computed in float32 between casts")
    return g.cast(g.node("Celu", [g.cast(x, np.dtype(np.float32))], alpha=p["Alpha"]), g.compute)


_ACTIVATIONS: dict[str, Callable[[_Graph, str, Mapping[str, float]], str]] = {
    "ACTIVATION_IDENTITY": lambda g, x, p: g.node("Identity", [x]),
    "ACTIVATION_LINEAR": lambda g, x, p: g.node(
        "Add", [g.node("Mul", [x, _p(g, p, "Alpha")]), _p(g, p, "Beta")]
    ),
    "ACTIVATION_SIGMOID": lambda g, x, p: g.node("Sigmoid", [x]),
    "ACTIVATION_HARD_SIGMOID": lambda g, x, p: g.node("HardSigmoid", [x], alpha=p["Alpha"], beta=p["Beta"]),
    "ACTIVATION_TANH": lambda g, x, p: g.node("Tanh", [x]),
    "ACTIVATION_SCALED_TANH": lambda g, x, p: g.node(
        "Mul", [g.node("Tanh", [g.node("Mul", [x, _p(g, p, "Beta")])]), _p(g, p, "Alpha")]
    ),
    "ACTIVATION_RELU": lambda g, x, p: g.node("Relu", [x]),
    "ACTIVATION_LEAKY_RELU": lambda g, x, p: g.node("LeakyRelu", [x], alpha=p["Alpha"]),
    "ACTIVATION_THRESHOLDED_RELU": lambda g, x, p: g.node("ThresholdedRelu", [x], alpha=p["Alpha"]),
    "ACTIVATION_ELU": lambda g, x, p: g.node("Elu", [x], alpha=p["Alpha"]),
    "ACTIVATION_SCALED_ELU": lambda g, x, p: g.node("Selu", [x], alpha=p["Alpha"], gamma=p["Gamma"]),
    "ACTIVATION_SOFTPLUS": _softplus,
    "ACTIVATION_PARAMETRIC_SOFTPLUS": lambda g, x, p: g.node(
        "Mul", [g.node("Softplus", [g.node("Mul", [x, _p(g, p, "Beta")])]), _p(g, p, "Alpha")]
    ),
    "ACTIVATION_SOFTSIGN": lambda g, x, p: g.node("Softsign", [x]),
    "ACTIVATION_SHRINK": lambda g, x, p: g.node("Shrink", [x], bias=p["Bias"], lambd=p["Threshold"]),
    "ACTIVATION_CELU": _celu,
    "ACTIVATION_GELU": _gelu,
}


# --------------------------------------------------------------------------------------------
# Model for one plan


def choose_path(plan: dc.NormalizationPlan, opset: int) -> str:
    """The dedicated ONNX operator that fits the desc, else ``primitive`` (table above): the
    first path of :data:`PATHS`, which lists them in order of preference."""
    return next(p for p in PATHS if path_fits(plan, p, opset))


def fits_mvn(plan: dc.NormalizationPlan) -> bool:
    return plan.normalize_variance and bool(plan.axes) and plan.epsilon <= MVN_EPSILON_LIMIT


def path_fits(plan: dc.NormalizationPlan, path: str, opset: int) -> bool:
    return {
        "InstanceNormalization": plan.fits_instance_norm,
        "BatchNormalization": lambda: opset >= 14 and plan.fits_batch_norm(),
        "LayerNormalization": lambda: opset >= 17 and plan.fits_layer_norm(),
        "MeanVarianceNormalization": lambda: fits_mvn(plan),
        "primitive": lambda: True,
        "blocked": lambda: bool(plan.axes) and plan.reduction_length >= LONG_ROW,
    }[path]()


def build_graph(plan: dc.NormalizationPlan, path: str, io: np.dtype, compute: np.dtype, opset: int) -> _Graph:
    """The ONNX graph computing ``plan`` by ``path``; graph inputs carry their own feeders."""
    g = _Graph(io=io, compute=compute, opset=opset)
    x = g.add_input(plan.input, _dims(plan.rank), _aligned_feed(plan.input))
    stats: dict[str, str] = {}
    if path in ("InstanceNormalization", "BatchNormalization"):
        y, stats = _channel_normalization(g, plan, path, x)
    elif path == "LayerNormalization":
        y = _layer_normalization(g, plan, x)
    elif path == "MeanVarianceNormalization":
        y = _scale_bias(g, plan, g.node("MeanVarianceNormalization", [x], axes=list(plan.axes)))
    else:
        y, stats = _primitive_normalization(g, plan, path, x)

    asked = [(k, m) for k, m in (("mean", plan.mean_output), ("variance", plan.variance_output)) if m]
    if asked and not stats:  # dedicated op without statistics outputs
        mean = g.reduce_mean(x, plan.axes)
        d = g.node("Sub", [x, mean])
        stats = {"mean": mean, "variance": g.reduce_mean(g.node("Mul", [d, d]), plan.axes)}
        g.notes.append("statistics from ReduceMean")
    if plan.fused_add is not None:
        y = g.node("Add", [y, _aligned_input(g, plan, plan.fused_add)])
    if plan.activation is not None:
        build = _ACTIVATIONS.get(plan.activation)
        if build is None:
            raise dc.Unsupported(f"fused activation {plan.activation} has no ONNX mapping")
        y = build(g, y, plan.activation_params)
    g.add_output(plan.output, y)
    for key, member in asked:
        g.add_output(member, stats[key])
    return g


def _aligned_input(g: _Graph, plan: dc.NormalizationPlan, member: str | None) -> str | None:
    if member is None:
        return None
    return g.add_input(member, _aligned_shape(plan, member), _aligned_feed(member))


def _scale_bias(g: _Graph, plan: dc.NormalizationPlan, y: str) -> str:
    """Scale and Bias applied after an operator that has none of its own (Mul, then Add)."""
    scale, bias = _aligned_input(g, plan, plan.scale), _aligned_input(g, plan, plan.bias)
    if scale is not None:
        y = g.node("Mul", [y, scale])
    if bias is not None:
        y = g.node("Add", [y, bias])
    return y


def _channel_normalization(
    g: _Graph, plan: dc.NormalizationPlan, path: str, x: str
) -> tuple[str, dict[str, str]]:
    """InstanceNormalization or BatchNormalization with per-channel scale and bias; only
    BatchNormalization gives statistics (its running mean and variance, with momentum 0)."""
    eps = plan.epsilon
    scale = g.add_input("__scale", ["d1"], _channel_feed(plan.scale, 1.0))
    bias = g.add_input("__bias", ["d1"], _channel_feed(plan.bias, 0.0))
    if path == "InstanceNormalization":
        return g.node("InstanceNormalization", [x, scale, bias], epsilon=eps), {}
    zeros = g.add_input("__running_mean", ["d1"], _channel_feed(None, 0.0))
    ones = g.add_input("__running_var", ["d1"], _channel_feed(None, 1.0))
    stats: dict[str, str] = {}
    y, stats["mean"], stats["variance"] = g.node(
        "BatchNormalization",
        [x, scale, bias, zeros, ones],
        outputs=3,
        epsilon=eps,
        momentum=0.0,
        training_mode=1,
    )
    return y, stats


def _layer_normalization(g: _Graph, plan: dc.NormalizationPlan, x: str) -> str:
    k = plan.trailing_axis()
    assert k is not None
    r = plan.rank
    scale = g.add_input("__scale", _dims(r)[k:], _trailing_feed(plan.scale, k, 1.0))
    ln_inputs = [x, scale]
    if plan.bias is not None:
        ln_inputs.append(g.add_input("__bias", _dims(r)[k:], _trailing_feed(plan.bias, k, 0.0)))
    return g.node("LayerNormalization", ln_inputs, axis=k, epsilon=plan.epsilon)


def _primitive_normalization(
    g: _Graph, plan: dc.NormalizationPlan, path: str, x: str
) -> tuple[str, dict[str, str]]:
    """The ``primitive`` and ``blocked`` paths: the formula from ReduceMean (or blocked sums), Sub,
    Mul, Sqrt, Add and Div; its mean and variance are the statistics."""
    if path == "blocked":
        shape = tuple(plan.shape)

        def mean_of(v: str) -> str:
            return g.blocked_mean(v, shape, plan.axes)
    else:

        def mean_of(v: str) -> str:
            return g.reduce_mean(v, plan.axes)

    mean = mean_of(x)
    d = g.node("Sub", [x, mean])
    var = mean_of(g.node("Mul", [d, d]))
    stats = {"mean": mean, "variance": var}
    if plan.normalize_variance:
        d = g.node("Div", [d, g.node("Sqrt", [g.node("Add", [var, g.const(plan.epsilon)])])])
    return _scale_bias(g, plan, d), stats


@dataclass
class _Compiled:
    session: ort.InferenceSession
    path: str
    compute: np.dtype
    feeds: list[tuple[str, Feed]]
    output_names: list[str]
    notes: list[str]


class OnnxRuntimeBackend(BackendBase):
    """ONNX Runtime through onnx.helper-built models; see the module docstring for the paths."""

    name: ClassVar[str] = "onnxruntime"
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        FEATURE_LEVEL_OPTION,
        Option("provider", "CPUExecutionProvider", "ONNX Runtime execution provider", parse=_parse_provider),
        Option("opset", "21", "ONNX opset of the generated models", parse=_parse_opset),
        Option(
            "path", "auto", "force one ONNX mapping (auto picks the dedicated op that fits)", ("auto", *PATHS)
        ),
        Option(
            "float16",
            "float32",
            "FLOAT16 descs: native float16 graphs, or float32 graphs between casts (default float32, as a sound FLOAT16 implementation accumulates in float32)",
            ("native", "float32"),
        ),
        Option("threads", "1", "intra-op threads per session (0 = ONNX Runtime's default)", parse=_positive),
        Option("cache_size", "256", "how many compiled sessions to keep", parse=_positive),
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.provider: str = self.options["provider"]
        self.opset: int = self.options["opset"]
        self._cache: OrderedDict[tuple[Any, ...], _Compiled] = OrderedDict()
        self._session_options = ort.SessionOptions()
        self._session_options.log_severity_level = 3
        self._session_options.inter_op_num_threads = 1
        if self.options["threads"]:
            self._session_options.intra_op_num_threads = self.options["threads"]

    # -- protocol ---------------------------------------------------------------------------

    def execute(self, desc: dc.OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        plan = dc.plan(desc, self.spec)
        lower = LOWERINGS.get(plan.kernel)
        if lower is None:
            raise dc.Unsupported(
                f"{desc.operator}: kernel {plan.kernel!r} is not implemented by the onnxruntime backend "
                "(ONNX has no operator for it)"
            )
        return lower(self, plan, inputs)

    def _normalization(
        self, plan: dc.NormalizationPlan, inputs: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        io = plan.dtype(plan.input)
        if io not in _ONNX_TYPE:
            raise dc.Unsupported(f"data type {io} is not mapped to ONNX by this backend")
        forced = self.options["path"]
        if forced != "auto" and not path_fits(plan, forced, self.opset):
            raise dc.Unsupported(f"path={forced} does not fit this desc")
        path = forced if forced != "auto" else choose_path(plan, self.opset)
        key = (plan.structure_key(), path, tuple(plan.shape) if path == "blocked" else None)
        compiled = self._cache.get(key)
        hit = compiled is not None
        if compiled is None:
            compiled = self._compile(plan, path, io, allow_primitive=forced == "auto")
            self._cache[key] = compiled
            while len(self._cache) > max(self.options["cache_size"], 1):
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        feeds = {name: np.ascontiguousarray(feed(plan, inputs), dtype=io) for name, feed in compiled.feeds}
        results = compiled.session.run(compiled.output_names, feeds)
        self._last_info = {
            "path": compiled.path,
            "compute_dtype": compiled.compute.name,
            "upcast": compiled.compute != io,
            "cache": "hit" if hit else "miss",
            "provider": self.provider,
            "opset": self.opset,
        }
        if compiled.notes:
            self._last_info["notes"] = list(compiled.notes)
        return plan.finish(dict(zip(compiled.output_names, results, strict=True)))

    def versions(self) -> dict[str, str]:
        return {**super().versions(), "onnx": onnx.__version__, "onnxruntime": ort.__version__}

    def describe(self) -> str:
        return (
            f"onnxruntime {ort.__version__} ({self.provider}, opset {self.opset}; onnx {onnx.__version__}) "
            f"(feature level {self.feature_level})"
        )

    def _execute_other(
        self, plan: dc.KernelPlan, inputs: Mapping[str, np.ndarray], build: Callable[..., Any]
    ) -> dict[str, np.ndarray]:
        """The kernels beside the centred normalization: ``build(plan, io, compute, opset)``
        gives the graph and its path."""
        io = plan.dtypes.get(plan.input, np.dtype("V"))
        if io not in _ONNX_TYPE:
            raise dc.Unsupported(f"data type {io} is not mapped to ONNX by this backend")
        compute = np.dtype(np.float32) if self.options["float16"] == "float32" else io
        g, path = build(plan, io, compute, self.opset)
        session = self._session(g)
        feeds = {name: np.ascontiguousarray(feed(None, inputs), dtype=io) for name, feed in g.feeds}
        names = [o.name for o in g.outputs]
        results = session.run(names, feeds)
        self._last_info = {"path": path, "compute_dtype": compute.name, "provider": self.provider}
        if g.notes:
            self._last_info["notes"] = list(g.notes)
        return plan.finish(dict(zip(names, results, strict=True)))

    # -- compilation ------------------------------------------------------------------------

    def _session(self, g: _Graph) -> ort.InferenceSession:
        return ort.InferenceSession(
            g.model().SerializeToString(), sess_options=self._session_options, providers=[self.provider]
        )

    def _compile(
        self, plan: dc.NormalizationPlan, path: str, io: np.dtype, allow_primitive: bool
    ) -> _Compiled:
        """The first of (path, native dtype), (path, float32), and, when the path was chosen
        rather than forced, the same two for ``primitive``, that the provider accepts. With
        ``float16=float32`` the native float16 graph is not tried."""
        f32 = np.dtype(np.float32)
        dtypes = list(dict.fromkeys([f32 if self.options["float16"] == "float32" else io, f32]))
        attempts = [(path, dt) for dt in dtypes]
        if allow_primitive and path != "primitive":
            attempts += [("primitive", dt) for dt in dtypes]
        failures: list[str] = []
        for candidate, compute in attempts:
            g = build_graph(plan, candidate, io, compute, self.opset)
            try:
                session = self._session(g)
            except Exception as exc:  # the provider rejected this graph: try the next
                failures.append(f"{candidate}/{compute.name}: {str(exc).splitlines()[0][:200]}")
                continue
            notes = list(g.notes) + [f"rejected {f}" for f in failures]
            return _Compiled(session, candidate, compute, g.feeds, [o.name for o in g.outputs], notes)
        raise BackendError(f"onnxruntime rejected every graph for this desc: {' | '.join(failures)}")


# --------------------------------------------------------------------------------------------
# The kernels beside the centred normalization


def _whole_feed(member: str) -> Feed:
    def feed(plan: Any, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.asarray(inputs[member])

    return feed


def _vector_feed(member: str, channels: int) -> Feed:
    """A per-channel tensor as ONNX BatchNormalization's 1-D operand of C values."""

    def feed(plan: Any, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.ascontiguousarray(np.broadcast_to(np.asarray(inputs[member]).reshape(-1), (channels,)))

    return feed


def _per_channel(sizes: tuple[int, ...], rank: int) -> bool:
    return len(sizes) == rank and rank >= 2 and all(s == 1 for i, s in enumerate(sizes) if i != 1)


def _given_graph(p: dc.GivenStatisticsPlan, g: _Graph, inp: Callable[..., Any]) -> tuple[str, str]:
    """Given statistics: ONNX BatchNormalization in inference mode where Mean, Variance, Scale
    and Bias are per-channel, else its elementwise decomposition."""
    x = inp(p.input)
    rank = len(p.shape)
    members = (p.scale, p.bias, p.mean, p.variance)
    if all(m is not None and _per_channel(p.sizes(m), rank) for m in members):
        path = "BatchNormalization"
        ops = [g.add_input(f"__{m}", [p.shape[1]], _vector_feed(m, p.shape[1])) for m in members]  # type: ignore[arg-type]
        y = g.node("BatchNormalization", [x, *ops], epsilon=p.epsilon)
    else:
        path = "primitive"
        sd = g.node("Sqrt", [g.node("Add", [inp(p.variance), g.const(p.epsilon)])])
        y = g.node("Div", [g.node("Sub", [x, inp(p.mean)]), sd])
        if p.scale is not None:
            y = g.node("Mul", [y, inp(p.scale)])
        if p.bias is not None:
            y = g.node("Add", [y, inp(p.bias)])
    return y, path


def _rms_graph(p: dc.Rmsdc.NormalizationPlan, g: _Graph, inp: Callable[..., Any]) -> tuple[str, str]:
    """The second moment about zero: RMSNormalization's decomposition (ReduceMean(x * x), Sqrt,
    Div; the mean a blocked sum from LONG_ROW elements on, path "..., blocked")."""
    path = "RMSNormalization-decomposed"
    x = inp(p.input)
    y = x
    if p.normalize_variance:
        squares = g.node("Mul", [x, x])
        if p.axes and p.reduction_length >= LONG_ROW:  # ReduceMean sums long rows sequentially
            path += ", blocked"
            ms = g.blocked_mean(squares, tuple(p.shape), tuple(p.axes))
        else:
            ms = g.reduce_mean(squares, p.axes)
        y = g.node("Div", [x, g.node("Sqrt", [g.node("Add", [ms, g.const(p.epsilon)])])])
    if p.scale is not None:
        y = g.node("Mul", [y, inp(p.scale)])
    for m in (p.bias, p.fused_add):
        if m is not None:
            y = g.node("Add", [y, inp(m)])
    return y, path


def build_other_graph(
    p: dc.KernelPlan, io: np.dtype, compute: np.dtype, opset: int, body: Callable[..., Any]
) -> tuple[_Graph, str]:
    """(graph, path) of a kernel beside the centred normalization: ``body`` (one of
    :data:`LOWERINGS`' graph builders) adds the kernel's nodes from its registry plan; the fused
    activation and the output are common."""
    g = _Graph(io=io, compute=compute, opset=opset)

    def inp(member: str | None) -> str | None:
        if member is None:
            return None
        return g.add_input(member, list(p.sizes(member)), _whole_feed(member))

    y, path = body(p, g, inp)
    act, params, output = p.activation, p.activation_params, p.output
    if act is not None:
        build = _ACTIVATIONS.get(act)
        if build is None:
            raise dc.Unsupported(f"fused activation {act} has no ONNX mapping")
        y = build(g, y, params)
    g.add_output(output, y)
    return g, path


# --------------------------------------------------------------------------------------------
# Local response and Lp normalization: ONNX LRN (its region is the spec's), LpNormalization
# (no epsilon: Epsilon 0 only) or the decomposition x / sqrt(norm^2 + Epsilon)


def _lrn_graph(g: _Graph, p: dc.LocalResponsePlan) -> _Graph:
    """ONNX LRN: x / (bias + alpha / size * square_sum)^beta over channels c - floor((size-1)/2)
    to c + ceil((size-1)/2), the spec's window and divisor."""
    if p.axes != (1,):
        raise dc.Unsupported("ONNX LRN sums across channels only (CrossChannel FALSE has no ONNX operator)")
    if p.local_size % 2 == 0 or p.alpha <= 0:
        # lrn.h: "size_ % 2 == 1", "alpha_ > 0.0f" (the ONNX operator allows both)
        raise dc.Unsupported("ONNX Runtime's CPU LRN kernel takes an odd size and Alpha > 0 only")
    x = g.add_input(p.input, list(p.shape), _whole_feed(p.input))
    y = g.node("LRN", [x], size=p.local_size, alpha=p.alpha, beta=p.beta, bias=p.bias)
    g.add_output(p.output, y)
    g.notes.append("LRN")
    return g


def _lp_graph(g: _Graph, p: dc.Lpdc.NormalizationPlan) -> _Graph:
    """LpNormalization where Epsilon is 0 (it has none); otherwise x / sqrt(s + Epsilon) with s
    the squared norm (ReduceSumSquare, or ReduceL1 squared), the sum blocked from LONG_ROW
    elements on (ONNX Runtime's long-row reductions are sequential)."""
    if p.epsilon_placement != "squared_norm":
        raise dc.Unsupported(f"epsilon_placement {p.epsilon_placement!r} has no ONNX mapping")
    x = g.add_input(p.input, list(p.shape), _whole_feed(p.input))
    long_row = p.reduction_length >= LONG_ROW
    if p.epsilon == 0 and not long_row:
        g.notes.append("LpNormalization")
        g.add_output(p.output, g.node("LpNormalization", [x], axis=p.axes[0], p=p.p))
        return g
    terms = g.node("Abs", [x]) if p.p == 1 else g.node("Mul", [x, x])
    if long_row:
        s = g.node("Mul", [g.blocked_mean(terms, p.shape, p.axes), g.const(float(p.reduction_length))])
        g.notes.append("Lp-decomposed, blocked")
    else:
        s = g.node("Mul", [g.reduce_mean(terms, p.axes), g.const(float(p.reduction_length))])
        g.notes.append("Lp-decomposed")
    if p.p == 1:
        s = g.node("Mul", [s, s])
    y = g.node("Div", [x, g.node("Sqrt", [g.node("Add", [s, g.const(p.epsilon)])])])
    g.add_output(p.output, y)
    return g


def _other(body: Callable[..., Any]) -> Callable[..., dict[str, np.ndarray]]:
    """A lowering whose graph :func:`build_other_graph` builds around ``body``'s nodes."""

    def build(p: dc.KernelPlan, io: np.dtype, compute: np.dtype, opset: int) -> tuple[_Graph, str]:
        return build_other_graph(p, io, compute, opset, body)

    return _lowered(build)


def _whole(graph: Callable[..., _Graph]) -> Callable[..., dict[str, np.ndarray]]:
    """A lowering whose ``graph`` builds the whole graph, inputs and outputs included."""

    def build(p: dc.KernelPlan, io: np.dtype, compute: np.dtype, opset: int) -> tuple[_Graph, str]:
        g = graph(_Graph(io=io, compute=compute, opset=opset), p)
        return g, g.notes[0] if g.notes else p.kernel

    return _lowered(build)


def _lowered(build: Callable[..., tuple[_Graph, str]]) -> Callable[..., dict[str, np.ndarray]]:
    def lower(
        backend: OnnxRuntimeBackend, plan: dc.KernelPlan, inputs: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        return backend._execute_other(plan, inputs, build)

    return lower


#: This backend's lowering of each kernel ONNX has operators for (``plan.kernel``);
#: the gradients have no ONNX inference operator.
LOWERINGS: dict[str, Callable[..., dict[str, np.ndarray]]] = {
    "normalization": OnnxRuntimeBackend._normalization,
    "rms_normalization": _other(_rms_graph),
    "given_statistics": _other(_given_graph),
    "local_response": _whole(_lrn_graph),
    "lp_normalization": _whole(_lp_graph),
}
