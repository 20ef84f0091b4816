"""The ``openvino`` backend: each lowering against its float64 formula on small tensors, the path
each desc takes, what ``supports()`` leaves out and why, and the known findings held to their
reproducers (dmlconform/known_findings/openvino.yaml, cases/openvino/).

Skipped in one line without the ``openvino`` extra.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

pytest.importorskip("openvino", reason="needs the openvino extra: pip install dmlconform[openvino]")

import openvino as ov  # noqa: E402

from dmlconform.backends import openvino_graphs as graphs  # noqa: E402
from dmlconform.backends.openvino_graphs import Graph, Operand  # noqa: E402

CORE = ov.Core()
F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
RNG = np.random.default_rng(54)


def run(
    build: Callable[..., dict[str, Any]],
    arrays: Sequence[np.ndarray],
    compute: np.dtype | None = None,
) -> list[np.ndarray]:
    """Build a graph whose parameters are ``arrays`` (their own dtypes), whose results are what
    ``build(g, *operands)`` returns (in the input's dtype), compile and run it."""
    io = arrays[0].dtype
    g = Graph(np.dtype(compute or io))
    rank = arrays[0].ndim
    operands = []
    for a in arrays:
        sizes = (1,) * (rank - a.ndim) + a.shape
        operands.append(Operand(g.input(sizes, a.dtype), sizes))
    outputs = build(g, *operands)
    for node in outputs.values():
        g.output(node, io)
    compiled = graphs.compile_model(CORE, g.model())
    feed = [a.reshape((1,) * (rank - a.ndim) + a.shape) for a in arrays]
    return list(compiled(feed).to_tuple())


# ------------------------------------------------------------------------------------------
# float64 formulas (DirectML's, from the spec)


def mvn_ref(x, axes, eps, normalize=True, scale=None, bias=None, add=None):
    x = x.astype(np.float64)
    mean = x.mean(axis=tuple(axes), keepdims=True)
    y = x - mean
    if normalize:
        y = y / np.sqrt(((x - mean) ** 2).mean(axis=tuple(axes), keepdims=True) + eps)
    for term, op in ((scale, np.multiply), (bias, np.add), (add, np.add)):
        if term is not None:
            y = op(y, term.astype(np.float64))
    return y


def lrn_ref(x, axes, size, alpha, beta, bias, divisor, below, above):
    """DirectML's window: ``below`` under and ``above`` over each element on every windowed axis."""
    x = x.astype(np.float64)
    sq = x * x
    total = np.zeros_like(x)
    for shift in np.ndindex(*(below + above + 1 for _ in axes)):
        part = sq
        for axis, s in zip(axes, shift, strict=True):
            part = _shifted(part, axis, s - below)
        total += part
    return x / (bias + alpha / divisor * total) ** beta


def _shifted(a, axis, offset):
    """a[..., i + offset, ...] along ``axis``, 0 outside."""
    out = np.zeros_like(a)
    n = a.shape[axis]
    src = [slice(None)] * a.ndim
    dst = [slice(None)] * a.ndim
    if offset >= 0:
        src[axis], dst[axis] = slice(offset, n), slice(0, max(n - offset, 0))
    else:
        src[axis], dst[axis] = slice(0, n + offset), slice(-offset, n)
    out[tuple(dst)] = a[tuple(src)]
    return out


def close(got, want, rtol=2e-6, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------------
# Normalizations


def normal(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize(
    ("shape", "axes", "scale_shape", "path"),
    [
        ((2, 3, 4, 5), (2, 3), (1, 3, 1, 1), "group_normalization"),  # instance norm: C groups
        ((2, 3, 4, 5), (1, 2, 3), (1, 3, 1, 1), "group_normalization"),  # one group
        ((2, 3, 4, 5), (0, 2, 3), (1, 3, 1, 1), "mvn6"),  # batch norm's axes
        ((2, 3, 4, 5), (2, 3), (1, 1, 4, 5), "mvn6"),  # Scale varies within the slice
        ((2, 3, 4, 5), (3,), (1, 1, 1, 5), "mvn6"),
    ],
)
def test_normalization_lowers_to_its_path_and_meets_the_formula(shape, axes, scale_shape, path):
    x, s, b = normal(*shape), normal(*scale_shape), normal(*scale_shape)
    eps = 0.25  # large beside the variance's scale: inside or outside the root differ by 10%

    def build(g, x_, s_, b_):
        nodes, took = graphs.normalization(
            g, x_.node, shape, axes, normalize_variance=True, epsilon=eps, scale=s_, bias=b_
        )
        assert took == path
        return nodes

    (got,) = run(build, [x, s, b])
    close(got, mvn_ref(x, axes, eps, scale=s, bias=b))


def test_normalization_without_variance_fused_add_and_statistics():
    shape, axes = (2, 3, 4, 5), (0, 2, 3)
    x, add = normal(*shape) * 3 + 5, normal(*shape)

    def build(g, x_, a_):
        nodes, took = graphs.normalization(
            g,
            x_.node,
            shape,
            axes,
            normalize_variance=False,
            epsilon=1e-5,
            fused_add=a_,
            want_statistics=True,
        )
        assert took == "mvn6"  # GroupNormalization always divides by the deviation
        return nodes

    y, mean, var = run(build, [x, add])
    close(y, mvn_ref(x, axes, 0.0, normalize=False, add=add), atol=1e-5)
    x64 = x.astype(np.float64)
    close(mean.reshape(-1), x64.mean(axis=axes).reshape(-1))
    close(var.reshape(-1), x64.var(axis=axes).reshape(-1), rtol=1e-5)


def test_group_count_fits_only_per_channel_weights_over_its_axes():
    per_channel = Operand(None, (1, 3, 1, 1))
    spatial = Operand(None, (1, 3, 4, 1))
    assert graphs.group_count((2, 3, 4, 5), (2, 3), per_channel, None) == 3
    assert graphs.group_count((2, 3, 4, 5), (1, 2, 3), None, per_channel) == 1
    assert graphs.group_count((2, 3, 4, 5), (2, 3), spatial, None) is None
    assert graphs.group_count((2, 3, 4, 5), (0, 2, 3), None, None) is None
    assert graphs.group_count((2, 3, 4, 5), (3,), None, None) is None


def test_rms_normalization_is_the_second_moment_about_zero():
    shape, axes, eps = (2, 3, 4), (1, 2), 0.5
    x, s = normal(*shape) + 2, normal(1, 1, 4)

    def build(g, x_, s_):
        nodes, took = graphs.rms_normalization(
            g, x_.node, axes, normalize_variance=True, epsilon=eps, scale=s_
        )
        assert took == "reduce_mean+sqrt"
        return nodes

    (got,) = run(build, [x, s])
    x64 = x.astype(np.float64)
    close(got, x64 / np.sqrt((x64**2).mean(axis=axes, keepdims=True) + eps) * s)


@pytest.mark.parametrize(
    ("stat_shape", "path"), [((1, 3, 1, 1), "batch_norm_inference"), ((1, 3, 4, 1), "elementwise")]
)
def test_given_statistics(stat_shape, path):
    shape, eps = (2, 3, 4, 5), 0.125
    x = normal(*shape)
    mean, var = normal(*stat_shape), (RNG.random(stat_shape) * 2).astype(np.float32)
    scale, bias = normal(*stat_shape), normal(*stat_shape)

    def build(g, x_, m_, v_, s_, b_):
        nodes, took = graphs.given_statistics(
            g, x_.node, shape, mean=m_, variance=v_, epsilon=eps, scale=s_, bias=b_
        )
        assert took == path
        return nodes

    (got,) = run(build, [x, mean, var, scale, bias])
    want = (x.astype(np.float64) - mean) / np.sqrt(var.astype(np.float64) + eps) * scale + bias
    close(got, want, rtol=1e-5, atol=1e-5)


def test_given_statistics_null_scale_and_bias_broadcast_channel():
    shape = (2, 4, 3)
    x, mean, var = normal(*shape), normal(1, 1, 1), np.full((1, 1, 1), 0.5, np.float32)

    def build(g, x_, m_, v_):
        nodes, took = graphs.given_statistics(g, x_.node, shape, mean=m_, variance=v_, epsilon=1e-3)
        assert took == "batch_norm_inference"  # a size-1 channel axis broadcasts to C
        return nodes

    (got,) = run(build, [x, mean, var])
    close(got, (x.astype(np.float64) - mean) / np.sqrt(0.5 + 1e-3), rtol=1e-5)


# ------------------------------------------------------------------------------------------
# Local response normalization


@pytest.mark.parametrize(
    ("axes", "size", "divisor"),
    [((1,), 3, 3.0), ((1,), 5, 5.0), ((1,), 1, 1.0), ((2, 3), 3, 3.0), ((2, 3), 3, 9.0)],
)
def test_lrn_meets_directml_formula_for_odd_windows_and_integer_bias(axes, size, divisor):
    x = normal(2, 6, 5, 4)
    alpha, beta, bias = 2.0, 0.75, 2.0  # Alpha large: the sum of squares, and so its divisor, matters

    def build(g, x_):
        nodes, took = graphs.local_response(
            g, x_.node, axes, local_size=size, alpha=alpha, beta=beta, bias=bias, divisor=divisor
        )
        assert took == "lrn"
        return nodes

    (got,) = run(build, [x])
    half = (size - 1) // 2
    close(got, lrn_ref(x, axes, size, alpha, beta, bias, divisor, half, half), rtol=1e-5)


def test_lrn_alpha_divides_as_directml_does():
    assert graphs.lrn_alpha(0.5, 3, 1, 3.0) == 0.5  # across channels: OpenVINO divides by size too
    assert graphs.lrn_alpha(0.5, 3, 2, 3.0) == 1.5  # within: OpenVINO by size^2, DirectML by LocalSize
    assert graphs.lrn_alpha(0.5, 3, 2, 9.0) == 0.5


def _lrn_bias(x: np.ndarray, bias: float, bias_first: bool) -> np.ndarray:
    def build(g, x_):
        nodes, took = graphs.local_response(
            g,
            x_.node,
            (1,),
            local_size=3,
            alpha=1e-4,
            beta=0.75,
            bias=bias,
            divisor=3.0,
            bias_first=bias_first,
        )
        assert took == ("lrn+divide-first" if bias_first else "lrn")
        return nodes

    return run(build, [x])[0]


def test_lrn_fractional_bias_is_the_plugins_integer_bias_and_divide_first_restores_it():
    x = normal(1, 6, 3, 3)
    want = lrn_ref(x, (1,), 3, 1e-4, 0.75, 0.5, 3.0, 1, 1)
    close(_lrn_bias(x, 0.5, bias_first=True), want, rtol=1e-5)
    got = _lrn_bias(x, 0.5, bias_first=False)
    # OV1: Bias 0.5 acts as 0 (x / (alpha / 3 * sum)^0.75): far from the answer
    close(got, lrn_ref(x, (1,), 3, 1e-4, 0.75, 0.0, 3.0, 1, 1), rtol=1e-4)
    assert np.max(np.abs(got / want)) > 100


# ------------------------------------------------------------------------------------------
# Lp normalization


@pytest.mark.parametrize(("p", "path"), [(2, "normalize_l2"), (1, "reduce_l1+divide")])
@pytest.mark.parametrize("eps", [0.0, 0.5])
def test_lp_normalization_places_epsilon_under_the_root_of_the_squared_norm(p, path, eps):
    x = normal(2, 3, 4) * 0.5

    def build(g, x_):
        nodes, took = graphs.lp_normalization(g, x_.node, (1,), p=p, epsilon=eps)
        assert took == path
        return nodes

    (got,) = run(build, [x])
    x64 = x.astype(np.float64)
    norm = np.abs(x64).sum(1, keepdims=True) if p == 1 else np.sqrt((x64**2).sum(1, keepdims=True))
    close(got, x64 / np.sqrt(norm**2 + eps), rtol=1e-5)


@pytest.mark.parametrize(("placement", "p"), [("max", 2), ("add", 1), ("inside_root", 2)])
def test_lp_other_epsilon_placements(placement, p):
    x, eps = normal(3, 5) * 0.1, 0.75

    def build(g, x_):
        return graphs.lp_normalization(g, x_.node, (1,), p=p, epsilon=eps, placement=placement)[0]

    (got,) = run(build, [x])
    x64 = x.astype(np.float64)
    norm = np.abs(x64).sum(1, keepdims=True) if p == 1 else np.sqrt((x64**2).sum(1, keepdims=True))
    want_den = {"max": np.maximum(norm, eps), "add": norm + eps, "inside_root": np.sqrt(norm**2 + eps)}
    close(got, x64 / want_den[placement], rtol=1e-5)


# ------------------------------------------------------------------------------------------
# Fused activations against spec/common/activations.yaml's formulas


def _erf(v: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(v)


ACTIVATION_FORMULAS: dict[str, tuple[dict[str, float], Callable[..., np.ndarray]]] = {
    "ACTIVATION_IDENTITY": ({}, lambda x, p: x),
    "ACTIVATION_LINEAR": ({"Alpha": 1.5, "Beta": -0.25}, lambda x, p: p["Alpha"] * x + p["Beta"]),
    "ACTIVATION_SIGMOID": ({}, lambda x, p: 1 / (1 + np.exp(-x))),
    "ACTIVATION_HARD_SIGMOID": (
        {"Alpha": 0.3, "Beta": 0.4},
        lambda x, p: np.maximum(0, np.minimum(p["Alpha"] * x + p["Beta"], 1)),
    ),
    "ACTIVATION_TANH": ({}, lambda x, p: np.tanh(x)),
    "ACTIVATION_SCALED_TANH": (
        {"Alpha": 1.5, "Beta": 0.75},
        lambda x, p: p["Alpha"] * np.tanh(p["Beta"] * x),
    ),
    "ACTIVATION_RELU": ({}, lambda x, p: np.maximum(0, x)),
    "ACTIVATION_LEAKY_RELU": ({"Alpha": 0.125}, lambda x, p: np.where(x >= 0, x, p["Alpha"] * x)),
    "ACTIVATION_THRESHOLDED_RELU": ({"Alpha": 0.5}, lambda x, p: np.where(x > p["Alpha"], x, 0)),
    "ACTIVATION_ELU": ({"Alpha": 0.75}, lambda x, p: np.where(x >= 0, x, p["Alpha"] * (np.exp(x) - 1))),
    "ACTIVATION_SCALED_ELU": (
        {"Alpha": 1.5, "Gamma": 1.25},
        lambda x, p: np.where(x > 0, p["Gamma"] * x, p["Gamma"] * (p["Alpha"] * np.exp(x) - p["Alpha"])),
    ),
    "ACTIVATION_SOFTPLUS": (
        {"Steepness": 2.0},
        lambda x, p: np.log1p(np.exp(p["Steepness"] * x)) / p["Steepness"],
    ),
    "ACTIVATION_PARAMETRIC_SOFTPLUS": (
        {"Alpha": 1.5, "Beta": 0.5},
        lambda x, p: p["Alpha"] * np.log1p(np.exp(p["Beta"] * x)),
    ),
    "ACTIVATION_SOFTSIGN": ({}, lambda x, p: x / (1 + np.abs(x))),
    "ACTIVATION_SHRINK": (
        {"Bias": 0.25, "Threshold": 0.5},
        lambda x, p: np.where(
            x > p["Threshold"], x - p["Bias"], np.where(x < -p["Threshold"], x + p["Bias"], 0)
        ),
    ),
    "ACTIVATION_CELU": (
        {"Alpha": 0.5},
        lambda x, p: np.maximum(0, x) + np.minimum(0, p["Alpha"] * (np.exp(x / p["Alpha"]) - 1)),
    ),
    "ACTIVATION_GELU": ({}, lambda x, p: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
}


def test_every_activation_of_the_spec_is_lowered():
    import dmlconform as dc

    assert set(dc.load_spec().activations) == set(graphs.ACTIVATIONS) == set(ACTIVATION_FORMULAS)


@pytest.mark.parametrize("name", sorted(ACTIVATION_FORMULAS))
def test_activation_meets_its_formula(name):
    params, formula = ACTIVATION_FORMULAS[name]
    x = (np.linspace(-4, 4, 97) + 1e-3).astype(np.float32)  # off the branch points themselves

    def build(g, x_):
        return {"y": graphs.activate(g, x_.node, name, params)}

    (got,) = run(build, [x])
    close(got, formula(x.astype(np.float64), params), rtol=3e-6, atol=3e-6)


def test_float32_compute_keeps_float16_only_at_the_ends():
    """``float16=float32``: an Epsilon of 1e-12 under FLOAT16's least subnormal survives in a
    float32 graph with FLOAT16 parameters (a native FLOAT16 graph drops it: OV3)."""
    x = np.array([[1e-6, -1e-6]], np.float16)

    def build(g, x_):
        return graphs.normalization(g, x_.node, (1, 2), (1,), normalize_variance=True, epsilon=1e-12)[0]

    (got,) = run(build, [x], compute=F32)
    assert got.dtype == F16
    close(got, mvn_ref(x, (1,), 1e-12), rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------------------------------------
# The backend: paths, supports(), options (through the public plan API)

import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

import dmlconform as dc  # noqa: E402
from dmlconform.backends.openvino_backend import OpenVinoBackend  # noqa: E402
from dmlconform.runner.cases import Case  # noqa: E402
from dmlconform.runner.expect import CaseFacts, known_findings_file, parse_findings  # noqa: E402
from dmlconform.runner.judging import compare, reference_outputs  # noqa: E402
from dmlconform.tolerance.options import NO_OPTIONS, ToleranceOptions  # noqa: E402

SPEC = dc.load_spec()
REPRODUCERS = Path(__file__).resolve().parents[1] / "cases" / "openvino"


def desc_of(operator: str, members: dict[str, Any]) -> dc.OperatorDesc:
    return dc.parse_desc({"type": operator, "desc": members})


def tensor(sizes: Sequence[int], data_type: str = "FLOAT32") -> dict[str, Any]:
    return {"DataType": data_type, "Sizes": list(sizes)}


def inputs_for(desc: dc.OperatorDesc, seed: int = 0) -> dict[str, np.ndarray]:
    """Standard-normal inputs (a positive Variance) for every input member the plan reads."""
    plan = dc.plan(desc)
    rng = np.random.default_rng(seed)
    out = {}
    for member in plan.inputs:
        value = rng.standard_normal(plan.sizes(member))
        if "Variance" in member:
            value = np.abs(value) + 0.5
        out[member] = value.astype(plan.dtype(member))
    return out


def meets(
    desc: dc.OperatorDesc, outputs: dict[str, np.ndarray], inputs: dict[str, np.ndarray], options=NO_OPTIONS
) -> bool:
    ref = reference_outputs(desc, inputs, SPEC)
    return compare(SPEC, desc, outputs, ref, inputs, options)[0]


X4 = tensor((2, 3, 4, 5))
PATH_CASES = [
    ("MEAN_VARIANCE_NORMALIZATION1", {"InputTensor": X4, "OutputTensor": X4, "ScaleTensor": tensor((1, 3, 1, 1)), "AxisCount": 2, "Axes": [2, 3], "NormalizeVariance": True}, "group_normalization"),
    ("MEAN_VARIANCE_NORMALIZATION1", {"InputTensor": X4, "OutputTensor": X4, "AxisCount": 1, "Axes": [3], "NormalizeVariance": True, "FusedActivation": {"Type": "ACTIVATION_ELU", "Alpha": 0.5}}, "mvn6"),
    ("MEAN_VARIANCE_NORMALIZATION", {"InputTensor": X4, "OutputTensor": X4, "CrossChannel": True, "NormalizeVariance": False}, "mvn6"),
    ("MEAN_VARIANCE_NORMALIZATION2", {"InputTensor": X4, "OutputTensor": X4, "AxisCount": 2, "Axes": [1, 3], "UseMean": False, "UseVariance": True}, "reduce_mean+sqrt"),
    ("MEAN_VARIANCE_NORMALIZATION2", {"InputTensor": X4, "OutputTensor": X4, "AxisCount": 1, "Axes": [1], "UseMean": False, "UseVariance": False, "BiasTensor": tensor((1, 3, 1, 1))}, "elementwise"),
    ("BATCH_NORMALIZATION_TRAINING", {"InputTensor": X4, "OutputTensor": X4, "ScaleTensor": tensor((1, 3, 1, 1)), "BiasTensor": tensor((1, 3, 1, 1)), "OutputMeanTensor": tensor((1, 3, 1, 1)), "OutputVarianceTensor": tensor((1, 3, 1, 1)), "Epsilon": 1e-3}, "mvn6"),
    ("BATCH_NORMALIZATION", {"InputTensor": X4, "OutputTensor": X4, "MeanTensor": tensor((1, 3, 1, 1)), "VarianceTensor": tensor((1, 3, 1, 1)), "ScaleTensor": tensor((1, 3, 1, 1)), "BiasTensor": tensor((1, 3, 1, 1)), "Spatial": True, "Epsilon": 1e-3}, "batch_norm_inference"),
    ("BATCH_NORMALIZATION", {"InputTensor": X4, "OutputTensor": X4, "MeanTensor": tensor((1, 3, 4, 5)), "VarianceTensor": tensor((1, 3, 4, 5)), "ScaleTensor": tensor((1, 3, 4, 5)), "BiasTensor": tensor((1, 3, 4, 5)), "Spatial": False, "Epsilon": 1e-3}, "elementwise"),
    ("LOCAL_RESPONSE_NORMALIZATION", {"InputTensor": X4, "OutputTensor": X4, "CrossChannel": False, "LocalSize": 3, "Alpha": 0.5, "Beta": 0.75, "Bias": 2.0}, "lrn"),
    ("LP_NORMALIZATION", {"InputTensor": X4, "OutputTensor": X4, "Axis": 2, "Epsilon": 1e-3, "P": 2}, "normalize_l2"),
    ("LP_NORMALIZATION", {"InputTensor": X4, "OutputTensor": X4, "Axis": 0, "Epsilon": 0.0, "P": 1}, "reduce_l1+divide"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("operator", "members", "path"), PATH_CASES, ids=[f"{c[0]}-{c[2]}" for c in PATH_CASES]
)
@pytest.mark.parametrize("data_type", ["FLOAT32", "FLOAT16"])
def test_each_desc_takes_its_path_and_meets_the_default_model(operator, members, path, data_type):
    members = {
        k: ({**v, "DataType": data_type} if isinstance(v, dict) and "Sizes" in v else v)
        for k, v in members.items()
    }
    desc = desc_of(operator, members)
    backend = OpenVinoBackend()
    assert backend.supports(desc) is True
    inputs = inputs_for(desc)
    outputs = backend.execute(desc, inputs)
    info = backend.last_info()
    assert info["path"] == path
    assert info["precision"] == data_type.lower()
    assert meets(desc, outputs, inputs)
    backend.execute(desc, inputs)
    assert backend.last_info()["cache"] == "hit"  # compiled once per structure


def test_float32_option_computes_float16_descs_in_float32():
    members = {
        k: ({**v, "DataType": "FLOAT16"} if isinstance(v, dict) and "Sizes" in v else v)
        for k, v in PATH_CASES[1][1].items()
    }
    desc = desc_of(PATH_CASES[1][0], members)
    backend = OpenVinoBackend(float16="float32")
    out = backend.execute(desc, inputs_for(desc))
    assert backend.last_info()["precision"] == "float32"
    assert out["OutputTensor"].dtype == np.float16


@pytest.mark.parametrize(
    ("operator", "word"),
    [
        ("BATCH_NORMALIZATION_GRAD", "batch normalization gradient"),
        ("BATCH_NORMALIZATION_TRAINING_GRAD", "batch normalization gradient"),
        ("LOCAL_RESPONSE_NORMALIZATION_GRAD", "LRN gradient"),
    ],
)
def test_supports_gives_the_reason_for_the_gradients(operator, word):
    x, s = tensor((2, 3, 4, 5)), tensor((1, 3, 1, 1))
    if operator.startswith("LOCAL"):
        members = {
            "InputTensor": x,
            "InputGradientTensor": x,
            "OutputGradientTensor": x,
            "CrossChannel": True,
        }
        members |= {"LocalSize": 3, "Alpha": 1.0, "Beta": 0.75, "Bias": 1.0}
    else:
        members = {
            "InputTensor": x,
            "InputGradientTensor": x,
            "MeanTensor": s,
            "VarianceTensor": s,
            "ScaleTensor": s,
        }
        members |= {
            "OutputGradientTensor": x,
            "OutputScaleGradientTensor": s,
            "OutputBiasGradientTensor": s,
            "Epsilon": 1e-3,
        }
    reason = OpenVinoBackend().supports(desc_of(operator, members))
    assert isinstance(reason, str)
    assert "no training or gradient operators" in reason and word in reason
    with pytest.raises(dc.Unsupported):
        OpenVinoBackend().execute(desc_of(operator, members), {})


# ------------------------------------------------------------------------------------------
# The known findings, held to their reproducers


def reproducer(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"ov_{name.replace('-', '_')}", REPRODUCERS / name / "experiment.py"
    )
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


#: each finding's entries (one id may head several: OV6 per slice, and per case for BN)
FINDINGS: dict[str, list[Any]] = {}
for _entry in parse_findings(known_findings_file("openvino").read_text(), "openvino.yaml", spec=SPEC):
    FINDINGS.setdefault(_entry.finding, []).append(_entry)


def covered(finding: str, facts: CaseFacts) -> bool:
    return any(entry.covers(facts) for entry in FINDINGS[finding])


def facts_of(case: dict[str, Any], inputs: dict[str, np.ndarray] | None) -> CaseFacts:
    desc = dc.parse_desc(case)
    data_type = next(v.data_type for v in desc.tensors().values())
    level = SPEC.level("6_4")
    return CaseFacts.of(Case("numeric", desc.operator, level, data_type, 0, desc), spec=SPEC, inputs=inputs)


def _retyped(case: dict[str, Any], data_type: str) -> dict[str, Any]:
    members = {
        k: ({**v, "DataType": data_type} if isinstance(v, dict) and "DataType" in v else v)
        for k, v in case["desc"].items()
    }
    return {**case, "desc": members}


def _resized(case: dict[str, Any], sizes: list[int]) -> dict[str, Any]:
    members = {
        k: ({**v, "Sizes": sizes} if isinstance(v, dict) and "Sizes" in v else v)
        for k, v in case["desc"].items()
    }
    return {**case, "desc": members}


def _with(case: dict[str, Any], **members: Any) -> dict[str, Any]:
    return {**case, "desc": {**case["desc"], **members}}


#: finding -> (its reproducer, a case just outside it: what makes the difference)
OUTSIDE: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "OV1": ("lrn-integer-bias", lambda c: _with(c, Bias=2.0)),
    "OV2": ("lrn-even-window", lambda c: _with(c, LocalSize=3)),
    "OV3": ("reduction-over-no-axes", lambda c: _resized(c, [2, 3, 2])),
    "OV4": ("softplus-negative-inputs", lambda c: _with(c, FusedActivation={"Type": "ACTIVATION_ELU"})),
    "OV5": ("float16-constants", lambda c: _retyped(c, "FLOAT32")),
    "OV6": ("float16-epsilon-flushed", lambda c: _with(c, Epsilon=1e-5)),
    "OV7": ("reduction-order", lambda c: _resized(c, [1, 1, 1023, 2])),
}


def test_every_finding_has_a_reproducer_and_a_case_outside_it():
    assert set(OUTSIDE) == set(FINDINGS)
    for name, _ in OUTSIDE.values():
        assert (REPRODUCERS / name / "README.md").is_file()


@pytest.mark.parametrize("finding", sorted(OUTSIDE))
def test_finding_covers_its_reproducers_case_and_not_the_one_outside(finding):
    name, outside = OUTSIDE[finding]
    module = reproducer(name)
    inputs = module.case_inputs() if hasattr(module, "case_inputs") else None
    assert covered(finding, facts_of(module.CASE, inputs))
    assert not covered(finding, facts_of(outside(module.CASE), inputs))


@pytest.mark.parametrize("finding", ["OV1", "OV2", "OV3", "OV6"])
def test_the_backend_fails_each_bug_findings_reproducer_case(finding):
    module = reproducer(OUTSIDE[finding][0])
    desc, inputs = dc.parse_desc(module.CASE), module.case_inputs()
    assert not meets(desc, OpenVinoBackend().execute(desc, inputs), inputs)


@pytest.mark.parametrize(
    ("finding", "bound"),
    [
        ("OV4", {"model": "default", "ulp_scale": 64}),
        ("OV5", {"model": "default", "pointwise_precision": "FLOAT16"}),
        ("OV7", {"model": "sequential"}),
    ],
)
def test_bounded_findings_fail_the_default_model_and_meet_their_bound(finding, bound):
    module = reproducer(OUTSIDE[finding][0])
    desc, inputs = dc.parse_desc(module.CASE), module.case_inputs()
    outputs = OpenVinoBackend().execute(desc, inputs)
    assert not meets(desc, outputs, inputs)
    (entry,) = FINDINGS[finding]
    assert meets(desc, outputs, inputs, entry.meets)
    assert entry.meets == ToleranceOptions.parse(bound)


@pytest.mark.parametrize("finding", ["OV5", "OV6"])
def test_float32_compute_removes_the_float16_findings(finding):
    module = reproducer(OUTSIDE[finding][0])
    desc, inputs = dc.parse_desc(module.CASE), module.case_inputs()
    assert meets(desc, OpenVinoBackend(float16="float32").execute(desc, inputs), inputs)


def test_divide_first_lrn_bias_removes_ov1():
    module = reproducer("lrn-integer-bias")
    desc, inputs = dc.parse_desc(module.CASE), module.case_inputs()
    backend = OpenVinoBackend(lrn_bias="divide-first")
    assert meets(desc, backend.execute(desc, inputs), inputs)
    assert backend.last_info()["path"] == "lrn+divide-first"


@pytest.mark.parametrize("finding", sorted(OUTSIDE))
def test_each_reproducer_runs_alone_and_reproduces_its_finding(finding):
    """``python cases/openvino/<name>/experiment.py`` needs openvino and numpy only, and says so."""
    import subprocess
    import sys

    path = REPRODUCERS / OUTSIDE[finding][0] / "experiment.py"
    assert not {m for m in _imports(path) if m.startswith("dmlconform")}
    done = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == f"{finding} reproduced", done.stdout[-2000:]


def _imports(path: Path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


@pytest.mark.parametrize(
    ("variance", "covers", "fails"),
    [(0.0, True, True), (1e-6, True, False), (1.0, False, False)],  # 1e-6: Epsilon invisible there
)
def test_ov6_names_batch_normalizations_by_the_smallest_variance_given(variance, covers, fails):
    """A slice at its own mean over a Variance of 0: Epsilon 1e-12 makes it 0, its FLOAT16 0 makes
    it 0 / 0."""
    t = tensor((1, 2, 2, 2), "FLOAT16")
    s = tensor((1, 2, 2, 2), "FLOAT16")  # spatial statistics: the elementwise graph
    case = {"type": "BATCH_NORMALIZATION", "desc": {"InputTensor": t, "MeanTensor": s, "VarianceTensor": s}}
    case["desc"] |= {"OutputTensor": t, "Spatial": False, "Epsilon": 1e-12}
    x = np.full((1, 2, 2, 2), 0.5, np.float16)
    inputs = {"InputTensor": x, "MeanTensor": x, "VarianceTensor": np.full_like(x, variance)}
    assert covered("OV6", facts_of(case, inputs)) == covers
    desc = dc.parse_desc(case)
    assert meets(desc, OpenVinoBackend().execute(desc, inputs), inputs) != fails
