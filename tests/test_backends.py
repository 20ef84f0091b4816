"""Backends: the loader, the numpy / reference / ONNX Runtime / torch backends against a float64
oracle written here (independent of the plan code: axes are spelled out per case), the paths the
third-party backends take, and the deliberately broken backends."""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from helpers import SPEC

import dmlconform as dc
from dmlconform.backends import BackendError, list_backends, load_backend
from dmlconform.backends.base import Option
from dmlconform.backends.broken import BROKEN_BACKENDS
from dmlconform.backends.numpy_backend import NumpyBackend

HAS_REFERENCE = importlib.util.find_spec("dmlconform.reference") is not None

# --------------------------------------------------------------------------------------------
# Cases and the float64 oracle


def T(sizes: list[int], dt: str = "FLOAT32", **extra: Any) -> dict[str, Any]:
    return {"DataType": dt, "Sizes": sizes, **extra}


def bn(shape: list[int], stat: list[int], dt: str = "FLOAT32", **members: Any) -> dict[str, Any]:
    """A BATCH_NORMALIZATION_TRAINING desc body: Scale/Bias/statistics of shape ``stat``."""
    body = {
        "InputTensor": T(shape, dt),
        "ScaleTensor": T(stat, dt),
        "BiasTensor": T(stat, dt),
        "OutputTensor": T(shape, dt),
        "OutputMeanTensor": T(stat, dt),
        "OutputVarianceTensor": T(stat, dt),
        "Epsilon": 1e-5,
    }
    body.update(members)
    return body


@dataclass(frozen=True)
class Case:
    """A hand-written desc with its semantics spelled out for the oracle, and the paths the
    ONNX Runtime and torch backends should take for it."""

    id: str
    operator: str
    body: dict[str, Any]
    axes: tuple[int, ...]
    normalize_variance: bool = True
    ort_path: str = "primitive"
    torch_path: str = "var_mean"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def desc(self) -> dc.OperatorDesc:
        return dc.parse_desc({"type": self.operator, "desc": self.body})


MVN, MVN1, BNT = "MEAN_VARIANCE_NORMALIZATION", "MEAN_VARIANCE_NORMALIZATION1", "BATCH_NORMALIZATION_TRAINING"
S4 = [2, 3, 4, 5]

CASES = [
    Case(
        "mvn-cross-false",
        MVN,
        {
            "InputTensor": T(S4),
            "ScaleTensor": T([1, 3, 1, 1]),
            "BiasTensor": T([1, 3, 1, 1]),
            "OutputTensor": T(S4),
            "CrossChannel": False,
            "NormalizeVariance": True,
        },
        (2, 3),
        ort_path="InstanceNormalization",
        torch_path="instance_norm",
    ),
    Case(
        "mvn-cross-true-relu",
        MVN,
        {
            "InputTensor": T(S4),
            "OutputTensor": T(S4),
            "CrossChannel": True,
            "NormalizeVariance": True,
            "Epsilon": 1e-3,
            "FusedActivation": {"Type": "ACTIVATION_RELU"},
        },
        (1, 2, 3),
        ort_path="LayerNormalization",
        torch_path="layer_norm",
    ),
    Case(
        "mvn-no-variance",
        MVN,
        {
            "InputTensor": T(S4),
            "ScaleTensor": T([1, 3, 1, 1]),
            "BiasTensor": T([1, 3, 1, 1]),
            "OutputTensor": T(S4),
            "CrossChannel": False,
            "NormalizeVariance": False,
        },
        (2, 3),
        normalize_variance=False,
    ),
    Case(
        "mvn1-batch-axes",
        MVN1,
        {
            "InputTensor": T(S4),
            "ScaleTensor": T([1, 3, 1, 1]),
            "OutputTensor": T(S4),
            "Axes": [0, 2, 3],
            "NormalizeVariance": True,
        },
        (0, 2, 3),
        ort_path="BatchNormalization",
        torch_path="batch_norm",
    ),
    Case(
        "mvn1-noncontiguous-axes",
        MVN1,
        {
            "InputTensor": T(S4),
            "BiasTensor": T([1, 1, 4, 1]),
            "OutputTensor": T(S4),
            "Axes": [3, 1],
            "NormalizeVariance": True,
            "FusedActivation": {"Type": "ACTIVATION_ELU", "Alpha": 0.5},
        },
        (1, 3),
    ),
    Case(
        "mvn1-eps0-mvn-op",
        MVN1,
        {
            "InputTensor": T(S4),
            "ScaleTensor": T([2, 1, 1, 5]),
            "OutputTensor": T(S4),
            "Axes": [1, 3],
            "NormalizeVariance": True,
            "Epsilon": 0.0,
        },
        (1, 3),
        ort_path="MeanVarianceNormalization",
    ),
    Case(
        "mvn1-layer-norm-scale",
        MVN1,
        {
            "InputTensor": T([3, 4, 6]),
            "ScaleTensor": T([1, 4, 6]),
            "BiasTensor": T([1, 1, 6]),
            "OutputTensor": T([3, 4, 6]),
            "Axes": [1, 2],
            "NormalizeVariance": True,
        },
        (1, 2),
        ort_path="LayerNormalization",
        torch_path="layer_norm",
    ),
    Case(
        "mvn1-1d",
        MVN1,
        {
            "InputTensor": T([7]),
            "OutputTensor": T([7]),
            "Axes": [0],
            "NormalizeVariance": True,
            "FusedActivation": {"Type": "ACTIVATION_GELU"},
        },
        (0,),
        ort_path="LayerNormalization",
        torch_path="layer_norm",
    ),
    Case(
        "mvn1-5d-scale-spatial",
        MVN1,
        {
            "InputTensor": T([2, 2, 3, 2, 3]),
            "ScaleTensor": T([1, 1, 3, 2, 3]),
            "OutputTensor": T([2, 2, 3, 2, 3]),
            "Axes": [2, 3, 4],
            "NormalizeVariance": True,
        },
        (2, 3, 4),
        ort_path="LayerNormalization",
        torch_path="layer_norm",
    ),
    Case(
        "bnt-per-channel-add",
        BNT,
        bn(S4, [1, 3, 1, 1], FusedAddTensor=T(S4)),
        (0, 2, 3),
        ort_path="BatchNormalization",
        torch_path="batch_norm",
    ),
    Case("bnt-per-sample", BNT, bn(S4, [2, 3, 1, 1], FusedActivation={"Type": "ACTIVATION_SIGMOID"}), (2, 3)),
    Case("bnt-1d", BNT, bn([6], [1]), (0,), ort_path="LayerNormalization", torch_path="layer_norm"),
    Case("bnt-3d-spatial-stats", BNT, bn([2, 3, 4], [1, 1, 4]), (0, 1)),
]


def make_inputs(
    desc: dc.OperatorDesc, seed: int = 0, offset: float = 0.0, spread: float = 1.0
) -> dict[str, np.ndarray]:
    """Random inputs of each input tensor's Sizes and dtype (Scale kept away from 0)."""
    rng = np.random.default_rng(seed)
    op = dc.load_spec().operator(desc.operator)
    out = {}
    for m in op.input_members:
        t = desc.members.get(m.name)
        if not isinstance(t, dc.TensorDesc):
            continue
        dtype = np.float16 if t.data_type == "FLOAT16" else np.float32
        if m.name == "ScaleTensor":
            data = rng.uniform(0.5, 2.0, t.sizes) * rng.choice([-1.0, 1.0], t.sizes)
        elif m.name == "InputTensor":
            data = offset + spread * rng.standard_normal(t.sizes)
        else:
            data = rng.standard_normal(t.sizes)
        out[m.name] = data.astype(dtype)
    return out


ACT64: dict[str, Any] = {
    "ACTIVATION_IDENTITY": lambda x, p: x,
    "ACTIVATION_LINEAR": lambda x, p: p["Alpha"] * x + p["Beta"],
    "ACTIVATION_SIGMOID": lambda x, p: 1.0 / (1.0 + np.exp(-x)),
    "ACTIVATION_HARD_SIGMOID": lambda x, p: np.clip(p.get("Alpha", 0.2) * x + p.get("Beta", 0.5), 0.0, 1.0),
    "ACTIVATION_TANH": lambda x, p: np.tanh(x),
    "ACTIVATION_SCALED_TANH": lambda x, p: p.get("Alpha", 1.0) * np.tanh(p.get("Beta", 0.5) * x),
    "ACTIVATION_RELU": lambda x, p: np.maximum(x, 0.0),
    "ACTIVATION_LEAKY_RELU": lambda x, p: np.where(x >= 0, x, p.get("Alpha", 0.01) * x),
    "ACTIVATION_THRESHOLDED_RELU": lambda x, p: np.where(x > p.get("Alpha", 1.0), x, 0.0),
    "ACTIVATION_ELU": lambda x, p: np.where(x >= 0, x, p.get("Alpha", 1.0) * (np.exp(x) - 1)),
    "ACTIVATION_SCALED_ELU": lambda x, p: np.where(
        x > 0,
        p.get("Gamma", 1.05070102214813232421875) * x,
        p.get("Gamma", 1.05070102214813232421875)
        * p.get("Alpha", 1.67326319217681884765625)
        * (np.exp(x) - 1),
    ),
    "ACTIVATION_SOFTPLUS": lambda x, p: (
        np.log1p(np.exp(p.get("Steepness", 1.0) * x)) / p.get("Steepness", 1.0)
    ),
    "ACTIVATION_PARAMETRIC_SOFTPLUS": lambda x, p: p["Alpha"] * np.log1p(np.exp(p["Beta"] * x)),
    "ACTIVATION_SOFTSIGN": lambda x, p: x / (1 + np.abs(x)),
    "ACTIVATION_SHRINK": lambda x, p: np.where(
        x > p.get("Threshold", 0.5),
        x - p.get("Bias", 0.0),
        np.where(x < -p.get("Threshold", 0.5), x + p.get("Bias", 0.0), 0.0),
    ),
    "ACTIVATION_CELU": lambda x, p: (
        np.maximum(0, x) + np.minimum(0, p.get("Alpha", 1.0) * (np.exp(x / p.get("Alpha", 1.0)) - 1))
    ),
    "ACTIVATION_GELU": lambda x, p: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
}

#: One parameterization per activation (non-default values where there are parameters).
ACTIVATION_DESCS = [
    {"Type": "ACTIVATION_IDENTITY"},
    {"Type": "ACTIVATION_LINEAR", "Alpha": 0.5, "Beta": -0.25},
    {"Type": "ACTIVATION_SIGMOID"},
    {"Type": "ACTIVATION_HARD_SIGMOID", "Alpha": 0.3},
    {"Type": "ACTIVATION_TANH"},
    {"Type": "ACTIVATION_SCALED_TANH", "Alpha": 1.5, "Beta": 0.7},
    {"Type": "ACTIVATION_RELU"},
    {"Type": "ACTIVATION_LEAKY_RELU", "Alpha": 0.1},
    {"Type": "ACTIVATION_THRESHOLDED_RELU", "Alpha": 0.3},
    {"Type": "ACTIVATION_ELU", "Alpha": 0.8},
    {"Type": "ACTIVATION_SCALED_ELU"},
    {"Type": "ACTIVATION_SOFTPLUS", "Steepness": 2.0},
    {"Type": "ACTIVATION_PARAMETRIC_SOFTPLUS", "Alpha": 0.7, "Beta": 1.3},
    {"Type": "ACTIVATION_SOFTSIGN"},
    {"Type": "ACTIVATION_SHRINK", "Bias": 0.2, "Threshold": 0.4},
    {"Type": "ACTIVATION_CELU", "Alpha": 0.6},
    {"Type": "ACTIVATION_GELU"},
]


def oracle(
    case: Case, inputs: dict[str, np.ndarray], axes: tuple[int, ...] | None = None
) -> dict[str, np.ndarray]:
    """float64 Output (and statistics) per the documented formula, with explicit axes."""
    body = case.body
    axes = case.axes if axes is None else axes
    x = inputs["InputTensor"].astype(np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    eps = float(body.get("Epsilon", 1e-5))
    y = (x - mean) / np.sqrt(var + eps) if case.normalize_variance else x - mean
    if "ScaleTensor" in inputs:
        y = y * inputs["ScaleTensor"].astype(np.float64)
    if "BiasTensor" in inputs:
        y = y + inputs["BiasTensor"].astype(np.float64)
    if "FusedAddTensor" in inputs:
        y = y + inputs["FusedAddTensor"].astype(np.float64)
    act = body.get("FusedActivation")
    if act:
        y = ACT64[act["Type"]](y, {k: v for k, v in act.items() if k != "Type"})
    out = {"OutputTensor": y}
    if "OutputMeanTensor" in body:
        out["OutputMeanTensor"] = mean.reshape(body["OutputMeanTensor"]["Sizes"])
        out["OutputVarianceTensor"] = var.reshape(body["OutputVarianceTensor"]["Sizes"])
    return out


def assert_matches(
    got: dict[str, np.ndarray], want: dict[str, np.ndarray], desc: dc.OperatorDesc, rtol: float, atol: float
) -> None:
    """Same member set, exact Sizes and dtypes, values within tolerance of the float64 oracle."""
    assert set(got) == set(want)
    for member, value in want.items():
        t = desc.members[member]
        assert got[member].shape == tuple(t.sizes), member
        assert got[member].dtype == (np.float16 if t.data_type == "FLOAT16" else np.float32), member
        np.testing.assert_allclose(
            got[member].astype(np.float64), value, rtol=rtol, atol=atol, err_msg=member
        )


# --------------------------------------------------------------------------------------------
# Loader


def test_builtin_names_are_registered() -> None:
    assert {"reference", "numpy", "onnxruntime", "torch"} <= set(list_backends())


def test_load_by_name() -> None:
    backend = load_backend("numpy", {})
    assert isinstance(backend, NumpyBackend)
    assert backend.name == "numpy"
    assert backend.feature_level == "6_4"
    assert "numpy" in backend.describe()
    assert backend.versions()["numpy"] == np.__version__


def test_load_by_module_class_with_option() -> None:
    backend = load_backend(
        "dmlconform.backends.broken:UnbiasedVariance", {"feature_level": "DML_FEATURE_LEVEL_5_0"}
    )
    assert type(backend).__name__ == "UnbiasedVariance"
    assert backend.feature_level == "5_0"


class PlainBackend:
    """A duck-typed third-party backend: no base class, no options, no name."""

    feature_level = "4_1"

    def execute(self, desc: dc.OperatorDesc, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {}


def test_load_duck_typed_class() -> None:
    backend = load_backend(f"{__name__}:PlainBackend")
    assert backend.name == f"{__name__}:PlainBackend"
    with pytest.raises(BackendError, match="bad options") as info:
        load_backend(f"{__name__}:PlainBackend", {"device": "cpu"})
    assert "\n" not in str(info.value)


class TravellingBackend(NumpyBackend):
    """A backend whose ``mode`` changes results (travels) and whose ``note`` does not."""

    OPTIONS = (
        *NumpyBackend.OPTIONS,
        Option("mode", "fast", "a setting results depend on", choices=("fast", "exact"), travels=True),
        Option("note", "", "a label"),
    )


@pytest.mark.parametrize("isolate", [False, True])
def test_a_travelling_option_is_saved_with_the_run_even_at_its_default(isolate: bool) -> None:
    """What a run saves (results.json, case.json, the replay command) is OpenedBackend.options:
    it names a ``travels`` option at its resolved value though the user left it out, so a replay
    uses the same setting whatever the default becomes; other options stay as typed. The
    isolated path gets it from the worker's BackendInfo."""
    from dmlconform.runner.backend_loading import open_backend

    name = f"{__name__}:TravellingBackend"
    opened = open_backend(name, {"note": "x"}, isolate=isolate, timeout=60)
    try:
        assert opened.options == {"mode": "fast", "note": "x"}
        assert open_backend(name, {"mode": "exact"}).options == {"mode": "exact"}
        assert open_backend("numpy", {}).options == {}  # no travelling option: nothing added
    finally:
        if isolate:
            opened.handle.close()


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("nope", {}, r"unknown backend 'nope' \(registered: .*numpy"),
        ("numpy", {"colour": "red"}, r"unknown option 'colour' \(options: feature_level\)"),
        ("numpy", {"feature_level": "9_9"}, r"feature_level='9_9'.*unknown feature level"),
        ("no_such_pkg.mod:Backend", {}, r"cannot import no_such_pkg.mod"),
        ("dmlconform.backends.broken:NoSuchClass", {}, r"has no attribute 'NoSuchClass'"),
        ("dmlconform.backends.broken", {}, r"unknown backend"),
    ],
)
def test_load_errors_are_one_line(spec: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(BackendError, match=message) as info:
        load_backend(spec, options)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("name", "package", "extra"), [("onnxruntime", "onnxruntime", "ort"), ("torch", "torch", "torch")]
)
def test_missing_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, name: str, package: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # makes `import package` fail
    monkeypatch.delitem(sys.modules, f"dmlconform.backends.{name}_backend", raising=False)
    with pytest.raises(
        BackendError, match=rf"needs {package}, which is not installed: pip install dmlconform\[{extra}\]"
    ):
        load_backend(name, {})


# --------------------------------------------------------------------------------------------
# Plan (semantics reading) and the numpy backend


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_plan_reads_axes_from_semantics(case: Case) -> None:
    plan = dc.plan(case.desc, SPEC)
    assert plan.axes == case.axes
    assert plan.normalize_variance == case.normalize_variance


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_numpy_matches_float64_oracle(case: Case) -> None:
    backend = NumpyBackend()
    inputs = make_inputs(case.desc)
    got = backend.execute(case.desc, inputs)
    assert_matches(got, oracle(case, inputs), case.desc, rtol=1e-4, atol=1e-4)
    assert backend.last_info()["path"] == "numpy"
    assert backend.last_info()["axes"] == list(case.axes)


def activation_case(act: dict[str, Any], dt: str = "FLOAT32") -> Case:
    return Case(
        f"act-{act['Type']}",
        MVN1,
        {
            "InputTensor": T([2, 3, 8], dt),
            "OutputTensor": T([2, 3, 8], dt),
            "Axes": [2],
            "NormalizeVariance": True,
            "FusedActivation": act,
        },
        (2,),
    )


@pytest.mark.parametrize("act", ACTIVATION_DESCS, ids=lambda a: a["Type"])
def test_numpy_activations(act: dict[str, Any]) -> None:
    case = activation_case(act)
    inputs = make_inputs(case.desc, seed=3)
    assert_matches(NumpyBackend().execute(case.desc, inputs), oracle(case, inputs), case.desc, 1e-4, 1e-5)


def test_numpy_float16_and_strided_inputs() -> None:
    case = Case(
        "fp16",
        MVN1,
        {
            "InputTensor": T(S4, "FLOAT16"),
            "ScaleTensor": T([1, 3, 1, 1], "FLOAT16"),
            "OutputTensor": T(S4, "FLOAT16"),
            "Axes": [2, 3],
            "NormalizeVariance": True,
        },
        (2, 3),
    )
    inputs = make_inputs(case.desc)
    strided = {k: np.ascontiguousarray(np.swapaxes(v, 0, 1)).swapaxes(0, 1) for k, v in inputs.items()}
    assert not strided["InputTensor"].flags.c_contiguous
    got = NumpyBackend().execute(case.desc, strided)
    assert_matches(got, oracle(case, inputs), case.desc, rtol=2e-3, atol=2e-3)


def test_numpy_check_uses_validator_at_its_level() -> None:
    one_sided = dc.parse_desc(
        {
            "type": MVN1,
            "desc": {
                "InputTensor": T(S4),
                "BiasTensor": T([1, 3, 1, 1]),
                "OutputTensor": T(S4),
                "Axes": [2, 3],
                "NormalizeVariance": True,
            },
        }
    )
    NumpyBackend().check(one_sided)  # legal from 5_2
    with pytest.raises(dc.Rejected, match="scale-bias-paired"):
        NumpyBackend(feature_level="5_0").check(one_sided)
    duplicate = one_sided.replace(Axes=(2, 2))
    with pytest.raises(dc.Rejected, match="axes-unique"):
        NumpyBackend().check(duplicate)


# --------------------------------------------------------------------------------------------
# Reference backend


def test_reference_check_without_executor() -> None:
    backend = load_backend("reference", {})
    assert backend.feature_level == "6_4"
    desc = CASES[0].desc
    backend.check(desc)
    with pytest.raises(dc.Rejected, match="available"):
        load_backend("reference", {"feature_level": "4_0"}).check(
            dc.parse_desc({"type": BNT, "desc": bn(S4, [1, 3, 1, 1])})
        )


@pytest.mark.skipif(not HAS_REFERENCE, reason="dmlconform.reference (the executor) is not in the tree yet")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_reference_and_numpy_agree(case: Case) -> None:
    inputs = make_inputs(case.desc)
    ref = load_backend("reference", {})
    want = ref.execute(case.desc, inputs)
    assert ref.last_info()["path"] == "reference"
    got = NumpyBackend().execute(case.desc, inputs)
    assert set(got) == set(want)
    for member in want:
        assert want[member].shape == got[member].shape and want[member].dtype == got[member].dtype
        np.testing.assert_allclose(got[member], want[member], rtol=1e-4, atol=1e-4, err_msg=member)


# --------------------------------------------------------------------------------------------
# Broken backends: each one's bug shows on a desc and data chosen to expose it, while the
# correct numpy backend stays within tolerance there.


def _mvn1(shape: list[int], axes: list[int], **members: Any) -> dict[str, Any]:
    return {
        "InputTensor": T(shape),
        "OutputTensor": T(shape),
        "Axes": axes,
        "NormalizeVariance": True,
        **members,
    }


EXPOSING: dict[str, tuple[Case, dict[str, float]]] = {
    "UnbiasedVariance": (Case("n2", MVN1, _mvn1([3, 2], [1]), (1,)), {}),
    "EpsilonOutsideSqrt": (Case("small-spread", MVN1, _mvn1([4, 16], [1]), (1,)), {"spread": 3e-3}),
    "Float16Statistics": (Case("fp16-overflow", MVN1, _mvn1([2, 64], [1]), (1,)), {"spread": 400.0}),
    "IgnoredActivation": (
        Case("relu", MVN1, _mvn1([2, 16], [1], FusedActivation={"Type": "ACTIVATION_RELU"}), (1,)),
        {},
    ),
    "ScaleReversed": (Case("scale", MVN1, _mvn1(S4, [2, 3], ScaleTensor=T([1, 3, 1, 1])), (2, 3)), {}),
    "NaiveVariance": (Case("offset", MVN1, _mvn1([2, 256], [1]), (1,)), {"offset": 1e4}),
    "OneSidedBiasIgnored": (
        Case("bias-only", MVN1, _mvn1(S4, [2, 3], BiasTensor=T([1, 3, 1, 1])), (2, 3)),
        {},
    ),
    "BatchAxisIncluded": (
        Case(
            "cross-false",
            MVN,
            {"InputTensor": T(S4), "OutputTensor": T(S4), "CrossChannel": False, "NormalizeVariance": True},
            (2, 3),
        ),
        {},
    ),
    "FusedAddAfterActivation": (
        Case(
            "add-relu",
            BNT,
            bn(S4, [1, 3, 1, 1], FusedAddTensor=T(S4), FusedActivation={"Type": "ACTIVATION_RELU"}),
            (0, 2, 3),
        ),
        {},
    ),
    "UnbiasedVarianceReported": (Case("bnt-n2", BNT, bn([2, 3], [1, 3]), (0,)), {}),
    "ActivationParametersIgnored": (
        Case(
            "leaky",
            MVN1,
            _mvn1([2, 16], [1], FusedActivation={"Type": "ACTIVATION_LEAKY_RELU", "Alpha": 0.5}),
            (1,),
        ),
        {},
    ),
    "EpsilonIgnored": (Case("small-spread", MVN1, _mvn1([4, 16], [1]), (1,)), {"spread": 3e-3}),
    # the three that only fail big: long reductions, offset data
    "SequentialSumStatistics": (Case("long-offset", MVN1, _mvn1([1, 2**21], [1]), (1,)), {"offset": 100.0}),
    "Float16AccumulationAtLongReductions": (
        Case("long-offset", MVN1, _mvn1([1, 65536], [1]), (1,)),
        {"offset": 10.0},
    ),
    "OutputScaled": (
        Case(
            "linear-x8",
            MVN1,
            _mvn1([2, 4096], [1], FusedActivation={"Type": "ACTIVATION_LINEAR", "Alpha": 8.0, "Beta": 0.0}),
            (1,),
        ),
        {},
    ),
    # the three that compute nothing: any case whose output is neither 0 nor the input
    "Zeros": (Case("plain", MVN1, _mvn1([2, 16], [1]), (1,)), {}),
    "Negated": (Case("plain", MVN1, _mvn1([2, 16], [1]), (1,)), {}),
    "InputUnchanged": (Case("plain", MVN1, _mvn1([2, 16], [1]), (1,)), {}),
}


#: Mutants of the local_response and lp_normalization lowerings: their exposing cases (and the
#: budget they must exceed) are in tests/test_tolerance_local.py, whose oracle is the reference.
OTHER_KERNELS = {"LrnWindowBelow", "LrnAlphaNotDivided", "LpWithoutAbs", "LpEpsilonOutsideRoot"}


def test_every_broken_backend_has_an_exposing_case() -> None:
    assert set(EXPOSING) == set(BROKEN_BACKENDS) - OTHER_KERNELS
    assert len({cls.name for cls in BROKEN_BACKENDS.values()}) == len(BROKEN_BACKENDS)


@pytest.mark.parametrize("name", sorted(set(BROKEN_BACKENDS) - OTHER_KERNELS))
def test_broken_backend_differs_from_correct(name: str) -> None:
    case, regime = EXPOSING[name]
    inputs = make_inputs(case.desc, seed=7, **regime)
    want = oracle(case, inputs)
    good = NumpyBackend().execute(case.desc, inputs)
    assert_matches(good, want, case.desc, rtol=1e-3, atol=1e-3)
    broken = load_backend(f"dmlconform.backends.broken:{name}", {})
    assert broken.name == f"broken:{name}"
    bad = broken.execute(case.desc, inputs)
    errors = []
    for member, value in want.items():
        assert bad[member].shape == good[member].shape and bad[member].dtype == np.float32  # right contract
        with np.errstate(invalid="ignore"):
            errors.append(np.nanmax(np.where(np.isfinite(bad[member]), np.abs(bad[member] - value), np.inf)))
    assert max(errors) > 1e-2, f"{name} is indistinguishable from the correct result (max errors {errors})"


# --------------------------------------------------------------------------------------------
# ONNX Runtime


@pytest.fixture(scope="module")
def ort_backend() -> Any:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    return load_backend("onnxruntime", {})


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_ort_matches_oracle_and_path(ort_backend: Any, case: Case) -> None:
    inputs = make_inputs(case.desc)
    got = ort_backend.execute(case.desc, inputs)
    assert_matches(got, oracle(case, inputs), case.desc, rtol=1e-4, atol=1e-4)
    info = ort_backend.last_info()
    assert info["path"] == case.ort_path
    assert info["compute_dtype"] == "float32" and info["upcast"] is False


@pytest.mark.parametrize("act", ACTIVATION_DESCS, ids=lambda a: a["Type"])
def test_ort_activations(ort_backend: Any, act: dict[str, Any]) -> None:
    case = activation_case(act)
    inputs = make_inputs(case.desc, seed=3)
    assert_matches(ort_backend.execute(case.desc, inputs), oracle(case, inputs), case.desc, 1e-4, 1e-5)


def test_ort_session_cache_serves_other_sizes(ort_backend: Any) -> None:
    body = {
        "InputTensor": T([2, 3, 4, 5]),
        "ScaleTensor": T([1, 3, 1, 1]),
        "OutputTensor": T([2, 3, 4, 5]),
        "Axes": [0, 2, 3],
        "NormalizeVariance": True,
        "Epsilon": 2e-5,
    }
    first = Case("a", MVN1, body, (0, 2, 3))
    second = Case(
        "b",
        MVN1,
        {
            **body,
            "InputTensor": T([3, 5, 2, 2]),
            "ScaleTensor": T([1, 5, 1, 1]),
            "OutputTensor": T([3, 5, 2, 2]),
        },
        (0, 2, 3),
    )
    ort_backend.execute(first.desc, make_inputs(first.desc))
    inputs = make_inputs(second.desc, seed=1)
    got = ort_backend.execute(second.desc, inputs)
    assert ort_backend.last_info()["cache"] == "hit"
    assert_matches(got, oracle(second, inputs), second.desc, 1e-4, 1e-4)


def test_ort_float16() -> None:
    pytest.importorskip("onnxruntime")
    ort_backend = load_backend("onnxruntime", {"float16": "native"})
    case = Case(
        "fp16", BNT, bn(S4, [1, 3, 1, 1], "FLOAT16", FusedActivation={"Type": "ACTIVATION_CELU"}), (0, 2, 3)
    )
    inputs = make_inputs(case.desc)
    got = ort_backend.execute(case.desc, inputs)
    assert_matches(got, oracle(case, inputs), case.desc, rtol=4e-3, atol=4e-3)
    info = ort_backend.last_info()
    assert info["path"] == "BatchNormalization" and info["compute_dtype"] == "float16"
    assert any("Celu" in note for note in info["notes"])


def test_ort_old_opsets() -> None:
    pytest.importorskip("onnxruntime")
    # opset 13: no LayerNormalization, no Gelu, ReduceMean axes as an attribute.
    backend = load_backend("onnxruntime", {"opset": "13"})
    case = Case("gelu", MVN1, _mvn1([3, 8], [1], FusedActivation={"Type": "ACTIVATION_GELU"}), (1,))
    inputs = make_inputs(case.desc)
    assert_matches(backend.execute(case.desc, inputs), oracle(case, inputs), case.desc, 1e-4, 1e-5)
    assert backend.last_info()["path"] == "primitive"
    bn_shaped = next(c for c in CASES if c.id == "mvn1-batch-axes")  # training_mode needs opset 14
    inputs = make_inputs(bn_shaped.desc)
    assert_matches(
        backend.execute(bn_shaped.desc, inputs), oracle(bn_shaped, inputs), bn_shaped.desc, 1e-4, 1e-4
    )
    assert backend.last_info()["path"] == "primitive"
    # opset 18: MeanVarianceNormalization has no float16 before 21, so the graph is upcast.
    backend = load_backend("onnxruntime", {"opset": "18"})
    case = Case(
        "mvn16",
        MVN1,
        {
            "InputTensor": T(S4, "FLOAT16"),
            "OutputTensor": T(S4, "FLOAT16"),
            "Axes": [1, 3],
            "NormalizeVariance": True,
            "Epsilon": 0.0,
        },
        (1, 3),
    )
    inputs = make_inputs(case.desc)
    assert_matches(backend.execute(case.desc, inputs), oracle(case, inputs), case.desc, 4e-3, 4e-3)
    info = backend.last_info()
    assert info["path"] == "MeanVarianceNormalization" and info["upcast"] is True


def test_ort_options() -> None:
    pytest.importorskip("onnxruntime")
    case = CASES[0]
    backend = load_backend("onnxruntime", {"path": "primitive"})
    inputs = make_inputs(case.desc)
    assert_matches(backend.execute(case.desc, inputs), oracle(case, inputs), case.desc, 1e-4, 1e-4)
    assert backend.last_info()["path"] == "primitive"
    with pytest.raises(dc.Unsupported, match="path=LayerNormalization"):
        load_backend("onnxruntime", {"path": "LayerNormalization"}).execute(case.desc, inputs)
    with pytest.raises(BackendError, match="provider='NoSuchExecutionProvider'.*available"):
        load_backend("onnxruntime", {"provider": "NoSuchExecutionProvider"})
    with pytest.raises(BackendError, match="opset='7'"):
        load_backend("onnxruntime", {"opset": "7"})
    assert "CPUExecutionProvider" in load_backend("onnxruntime", {}).describe()


# --------------------------------------------------------------------------------------------
# torch


@pytest.fixture(scope="module")
def torch_backend() -> Any:
    pytest.importorskip("torch")
    return load_backend("torch", {})


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_torch_matches_oracle_and_path(torch_backend: Any, case: Case) -> None:
    inputs = make_inputs(case.desc)
    got = torch_backend.execute(case.desc, inputs)
    assert_matches(got, oracle(case, inputs), case.desc, rtol=1e-4, atol=1e-4)
    info = torch_backend.last_info()
    assert info["path"] == case.torch_path
    assert info["device"] == "cpu" and info["upcast"] is False


@pytest.mark.parametrize("act", ACTIVATION_DESCS, ids=lambda a: a["Type"])
def test_torch_activations(torch_backend: Any, act: dict[str, Any]) -> None:
    case = activation_case(act)
    inputs = make_inputs(case.desc, seed=3)
    assert_matches(torch_backend.execute(case.desc, inputs), oracle(case, inputs), case.desc, 1e-4, 1e-5)


def test_torch_float16_and_upcast(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")

    torch_backend = load_backend("torch", {"float16": "native"})
    assert load_backend("torch").options["float16"] == "float32"  # default: accumulate in float32

    from dmlconform.backends import torch_backend as tb

    case = Case(
        "fp16",
        MVN1,
        {
            "InputTensor": T(S4, "FLOAT16"),
            "ScaleTensor": T([1, 3, 1, 1], "FLOAT16"),
            "OutputTensor": T(S4, "FLOAT16"),
            "Axes": [2, 3],
            "NormalizeVariance": True,
            "FusedActivation": {"Type": "ACTIVATION_RELU"},
        },
        (2, 3),
    )
    inputs = make_inputs(case.desc)
    assert_matches(torch_backend.execute(case.desc, inputs), oracle(case, inputs), case.desc, 4e-3, 4e-3)
    assert torch_backend.last_info()["compute_dtype"] == "float16"

    def relu_without_half(x: Any, p: Any) -> Any:
        if x.dtype == torch.float16:
            raise RuntimeError("\"relu\" not implemented for 'Half'")
        return torch.relu(x)

    monkeypatch.setitem(tb._ACTIVATIONS, "ACTIVATION_RELU", relu_without_half)
    assert_matches(torch_backend.execute(case.desc, inputs), oracle(case, inputs), case.desc, 4e-3, 4e-3)
    info = torch_backend.last_info()
    assert info["upcast"] is True and "Half" in info["upcast_reason"]


def test_torch_options() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(BackendError, match="device='tpu'"):
        load_backend("torch", {"device": "tpu"})
    auto = load_backend("torch", {"device": "auto"})
    assert str(auto.device) == ("cuda" if torch.cuda.is_available() else "cpu")
    case = CASES[0]
    forced = load_backend("torch", {"path": "var_mean"})
    inputs = make_inputs(case.desc)
    assert_matches(forced.execute(case.desc, inputs), oracle(case, inputs), case.desc, 1e-4, 1e-4)
    assert forced.last_info()["path"] == "var_mean"
    assert "torch" in forced.versions()


@pytest.mark.parametrize("name", ["onnxruntime", "torch"])
def test_float16_option_computes_in_float32(name: str) -> None:
    pytest.importorskip(name)
    backend = load_backend(name, {"float16": "float32"})
    case = Case(
        "fp16",
        MVN1,
        {
            "InputTensor": T([3, 40], "FLOAT16"),
            "OutputTensor": T([3, 40], "FLOAT16"),
            "Axes": [1],
            "NormalizeVariance": True,
        },
        (1,),
    )
    # a large offset: float16 statistics lose the spread, float32 ones keep it
    inputs = make_inputs(case.desc, offset=300.0, spread=0.5)
    assert_matches(backend.execute(case.desc, inputs), oracle(case, inputs), case.desc, 4e-3, 4e-3)
    info = backend.last_info()
    assert info["compute_dtype"] == "float32" and info["upcast"] is True
    with pytest.raises(BackendError, match="float16='half'"):
        load_backend(name, {"float16": "half"})


def test_ort_mvn_path_not_used_when_epsilon_keeps_zero_variance_finite() -> None:
    """ONNX Runtime's CPU MeanVarianceNormalization kernel divides by sqrt(var) with no epsilon
    (ONNX's function adds 1e-9 to the std; the kernel does not), so a one-element reduction or a
    constant slice gives NaN. DirectML with Epsilon > 0 is finite there (0 / sqrt(Epsilon)), so
    the backend must not pick that path for Epsilon > 0 (seed-0 run: BATCH_NORMALIZATION_TRAINING
    5_2-0000 and 6_1-0006, Epsilon 1e-12, reductions over a size-1 axis, were all NaN)."""
    pytest.importorskip("onnxruntime")
    backend = load_backend("onnxruntime")
    rng = np.random.default_rng(0)
    for eps, shape, axes in ((1e-12, [2, 3, 1, 4], [2]), (1e-12, [2, 3, 5, 4], [0, 2])):
        desc = dc.parse_desc({"type": MVN1, "desc": _mvn1(shape, axes, Epsilon=eps)})
        x = rng.standard_normal(shape).astype(np.float32)
        x[1] = 2.5  # constant slices too, where the axes allow
        out = backend.execute(desc, {"InputTensor": x})["OutputTensor"]
        assert backend.last_info()["path"] != "MeanVarianceNormalization"
        assert np.isfinite(out).all()
        ref = dc.execute(desc, {"InputTensor": x})["OutputTensor"]
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_torch_avoids_batch_kernels_where_they_refuse_what_directml_accepts(torch_backend: Any) -> None:
    """F.batch_norm(training=True) / F.instance_norm raise on Epsilon 0 and on one-element
    reductions, both legal in DirectML (seed-7 run: 18 cases failed with ValueError)."""
    rng = np.random.default_rng(5)
    for eps, shape, axes in (
        (0.0, [2, 3, 4, 5], [2, 3]),
        (1e-5, [2, 3, 1, 1], [2, 3]),
        (0.0, [4, 3, 2, 2], [0, 2, 3]),
    ):
        desc = dc.parse_desc({"type": MVN1, "desc": _mvn1(shape, axes, Epsilon=eps)})
        x = rng.standard_normal(shape).astype(np.float32)
        out = torch_backend.execute(desc, {"InputTensor": x})["OutputTensor"]
        assert torch_backend.last_info()["path"] not in ("instance_norm", "batch_norm")
        ref = dc.execute(desc, {"InputTensor": x})["OutputTensor"]
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_ort_session_cache_tells_fused_add_broadcasts_apart(ort_backend: Any) -> None:
    """The compiled graph pins FusedAdd's size-1 dims, so two descs differing only there must not
    share a session (seed-7 run: BATCH_NORMALIZATION_TRAINING-4_1-0022 got the wrong session)."""
    shape, stat = [2, 3, 4, 5], [1, 3, 1, 1]

    def desc(add: list[int]) -> Any:
        body = {
            "InputTensor": T(shape),
            "ScaleTensor": T(stat),
            "BiasTensor": T(stat),
            "FusedAddTensor": T(add),
            "OutputTensor": T(shape),
            "OutputMeanTensor": T(stat),
            "OutputVarianceTensor": T(stat),
            "Epsilon": 1e-5,
        }
        return dc.parse_desc({"type": "BATCH_NORMALIZATION_TRAINING", "desc": body})

    for add in ([2, 3, 4, 5], [1, 3, 4, 1], [2, 1, 1, 5]):
        d = desc(add)
        inputs = make_inputs(d, seed=len(add) + sum(add))
        got = ort_backend.execute(d, inputs)
        ref = dc.execute(d, inputs)
        np.testing.assert_allclose(got["OutputTensor"], ref["OutputTensor"], rtol=1e-4, atol=1e-4)


def test_the_numpy_backends_gelu_is_the_same_above_and_below_its_compiled_erf_size() -> None:
    """Large tensors take a compiled erf (math.erf per element cost 12 s of a 2^26 case): the
    same float32 bits as math.erf per element, on both sides of the switch."""
    from dmlconform.backends import numpy_backend as nb

    f32 = np.float32
    x = (np.random.default_rng(2).standard_normal(nb.COMPILED_ERF_MIN + 7) * 4).astype(f32)
    for part in (x[:100], x):
        erf = np.vectorize(math.erf)(part.astype(np.float64) / math.sqrt(2)).astype(f32)
        want = f32(0.5) * part * (f32(1) + erf)
        got = nb.ACTIVATIONS["ACTIVATION_GELU"](part, {})
        assert got.dtype == f32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))
