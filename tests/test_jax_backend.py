"""The jax backend: each lowering (dmlconform/backends/jax_lowering.py) against numpy float64
formulas written here, the backend's paths, options and supports() reasons, and its known
findings (dmlconform/known_findings/jax.yaml) against their reproducers (cases/jax/).

Skipped whole without jax. Shapes are small and each lowering is jitted once for the module
(a cold XLA compile costs tens of milliseconds; the file takes about 13 s of CPU)."""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from dmlconform.backends import jax_lowering as low  # noqa: E402
from dmlconform.reference.activations import ACTIVATION_CODES, activate  # noqa: E402

RNG = np.random.default_rng(54)


def f32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def close(got: Any, want: np.ndarray, rtol: float = 2e-6, atol: float = 1e-6) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol, atol=atol)


@functools.cache
def jitted(fn: Any, **static: Any) -> Any:
    return jax.jit(functools.partial(fn, **static))


def _frozen(params: dict[str, float]) -> Any:
    return tuple(sorted(params.items()))


# --------------------------------------------------------------------------------------------
# Lowerings against float64 formulas


def _mvn64(x: np.ndarray, axes: tuple[int, ...], eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = x.astype(np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps), mean, var


def test_normalization_is_the_two_pass_formula_with_scale_bias_add_and_activation() -> None:
    x = f32(RNG.standard_normal((3, 4, 5)) * 2 + 7)
    scale, bias = f32(RNG.standard_normal((1, 4, 1))), f32(RNG.standard_normal((1, 4, 1)))
    add = f32(RNG.standard_normal((3, 4, 5)))
    fn = jax.jit(
        lambda *a: low.normalization(
            *a,
            axes=(0, 2),
            normalize_variance=True,
            epsilon=1e-3,
            activation="ACTIVATION_ELU",
            params={"Alpha": 0.5},
        )
    )
    y, mean, var = fn(x, scale, bias, add)
    z, m64, v64 = _mvn64(x, (0, 2), 1e-3)
    pre = z * scale + bias + add
    close(y, np.where(pre >= 0, pre, 0.5 * np.expm1(pre)), rtol=1e-5, atol=1e-5)
    close(mean, m64, rtol=1e-6)
    close(var, v64, rtol=1e-5)


def test_normalization_without_variance_only_centres() -> None:
    x = f32(RNG.standard_normal((4, 6)) + 3)
    y, _, _ = low.normalization(
        x, None, None, None, axes=(1,), normalize_variance=False, epsilon=1e-5, activation=None, params={}
    )
    close(y, x - x.astype(np.float64).mean(axis=1, keepdims=True), atol=2e-6)


def test_standardize_path_is_jax_nn_standardize_and_its_one_pass_variance() -> None:
    """On centred data the option path agrees with the formula; on a slice 1000 deviations off 0
    its variance is E[x^2] - E[x]^2 (cases/jax/standardize-one-pass-variance) and the default
    path's is not."""
    kw = dict(axes=(1,), normalize_variance=True, epsilon=1e-5, activation=None, params={})
    x = f32(RNG.standard_normal((2, 256)))
    close(
        low.normalization(x, None, None, None, standardize=True, **kw)[0], _mvn64(x, (1,), 1e-5)[0], atol=1e-5
    )
    offset = f32(1000 + RNG.standard_normal((2, 256)))
    want = _mvn64(offset, (1,), 1e-5)[0]
    fast = np.abs(
        np.asarray(low.normalization(offset, None, None, None, standardize=True, **kw)[0]) - want
    ).max()
    two_pass = np.abs(np.asarray(low.normalization(offset, None, None, None, **kw)[0]) - want).max()
    assert fast > 1e-2 > 1e-3 > two_pass


def test_rms_normalization() -> None:
    x = f32(RNG.standard_normal((2, 3, 4)))
    scale = f32(RNG.standard_normal((1, 3, 1)))
    y = low.rms_normalization(
        x, scale, None, None, axes=(1, 2), normalize_variance=True, epsilon=1e-5, activation=None, params={}
    )
    x64 = x.astype(np.float64)
    close(y, x64 / np.sqrt((x64**2).mean(axis=(1, 2), keepdims=True) + 1e-5) * scale, rtol=1e-5)


def test_given_statistics() -> None:
    x = f32(RNG.standard_normal((2, 3, 4)))
    mean, var = f32(RNG.standard_normal((1, 3, 1))), f32(RNG.random((1, 3, 1)) + 0.1)
    scale, bias = f32(RNG.standard_normal((1, 3, 1))), f32(RNG.standard_normal((1, 3, 1)))
    y = low.given_statistics(x, mean, var, scale, bias, epsilon=1e-3, activation="ACTIVATION_RELU", params={})
    want = (x.astype(np.float64) - mean) / np.sqrt(var.astype(np.float64) + 1e-3) * scale + bias
    close(y, np.maximum(want, 0), rtol=1e-5, atol=1e-6)


def _grad64(x, dy, mean, var, scale, axes, eps, batch, centre_member):
    """The batch-norm gradients in float64 (spec/operators/batch_normalization*_grad.yaml)."""
    x, dy, mean, var, scale = (a.astype(np.float64) for a in (x, dy, mean, var, scale))
    inv = 1 / np.sqrt(var + eps)
    dbias = dy.sum(axis=axes, keepdims=True)
    dscale = (dy * (x - mean)).sum(axis=axes, keepdims=True) * inv
    if not batch:
        return dy * scale * inv, dscale, dbias
    xc = x - mean if centre_member else x - x.mean(axis=axes, keepdims=True)
    dx = dy - dy.mean(axis=axes, keepdims=True) - xc * (dy * xc).mean(axis=axes, keepdims=True) / (var + eps)
    return dx * scale * inv, dscale, dbias


@pytest.mark.parametrize(("batch", "centre_member"), [(False, True), (True, True), (True, False)])
def test_normalization_grad_is_the_vjp_with_the_spec_statistics(batch: bool, centre_member: bool) -> None:
    """Given statistics are constants; batch ones keep the given values (here the variance 1 %
    off the batch one, and the Mean member off the batch mean where the gradient centres on it,
    so that a lowering using the batch values would differ) with the batch statistics'
    derivative, centred on the Mean member or the batch mean."""
    x = f32(RNG.standard_normal((4, 3, 5)) * 1.5 + 0.5)
    dy = f32(RNG.standard_normal((4, 3, 5)))
    axes = (0, 2)
    mean = f32(x.astype(np.float64).mean(axis=axes, keepdims=True) + (0.01 if centre_member else 0.0))
    var = f32(x.astype(np.float64).var(axis=axes, keepdims=True) * 1.01)
    scale = f32(RNG.standard_normal((1, 3, 1)))
    fn = jitted(
        low.normalization_grad, axes=axes, epsilon=1e-3, batch=batch, centre_on_mean_member=centre_member
    )
    got = fn(x, dy, mean, var, scale)
    for g, w in zip(got, _grad64(x, dy, mean, var, scale, axes, 1e-3, batch, centre_member), strict=True):
        close(g, w, rtol=2e-5, atol=2e-5)


def _window64(v: np.ndarray, axis: int, below: int, above: int) -> np.ndarray:
    out = np.zeros_like(v, dtype=np.float64)
    for i in range(v.shape[axis]):
        lo, hi = max(i - below, 0), min(i + above, v.shape[axis] - 1)
        out.swapaxes(0, axis)[i] = v.swapaxes(0, axis)[lo : hi + 1].sum(axis=0)
    return out


def _lrn64(
    x: np.ndarray, axes: tuple[int, ...], below: int, above: int, a: float, b: float, k: float
) -> np.ndarray:
    s = x.astype(np.float64) ** 2
    for axis in axes:
        s = _window64(s, axis, below, above)
    return k + a * s


LRN_SHAPES = [((1,), 1, 2), ((2, 3), 1, 1)]  # across channels, an even window; within, 3 x 3


@pytest.mark.parametrize(("axes", "below", "above"), LRN_SHAPES)
def test_local_response_and_its_gradient(axes: tuple[int, ...], below: int, above: int) -> None:
    x = f32(RNG.standard_normal((2, 5, 4, 3)))
    g = f32(RNG.standard_normal((2, 5, 4, 3)))
    kw = dict(axes=axes, below=below, above=above, alpha_over_divisor=0.25, beta=0.75, bias=1.5)
    d = _lrn64(x, axes, below, above, 0.25, 0.75, 1.5)
    close(jitted(low.local_response, **kw)(x), x / d**0.75, rtol=1e-5)
    inner = g * x * d**-1.75
    for axis in axes:  # the window's transpose: below and above swapped
        inner = _window64(inner, axis, above, below)
    want = g * d**-0.75 - 2 * 0.25 * 0.75 * x * inner
    close(jitted(low.local_response_grad, **kw)(x, g), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("p", "eps", "path"),
    [(1, 0.0, "linalg_norm"), (1, 1e-3, "squared_norm"), (2, 0.0, "linalg_norm"), (2, 1e-3, "squared_norm")],
)
def test_lp_normalization(p: int, eps: float, path: str) -> None:
    x = f32(RNG.standard_normal((3, 7)))
    y, took = low.lp_normalization(jnp.asarray(x), axes=(1,), p=p, epsilon=eps)
    x64 = x.astype(np.float64)
    norm = np.abs(x64).sum(axis=1, keepdims=True) if p == 1 else np.sqrt((x64**2).sum(axis=1, keepdims=True))
    close(y, x64 / np.sqrt(norm**2 + eps), rtol=1e-5)
    assert took == path


ACTIVATION_PARAMS = {
    "Alpha": 0.7,
    "Beta": 1.3,
    "Gamma": 1.1,
    "Steepness": 2.0,
    "Bias": 0.25,
    "Threshold": 0.5,
}


@pytest.mark.parametrize("act", [a for a in ACTIVATION_CODES if a])
def test_activations_are_the_spec_formulas(act: str) -> None:
    """Every activation against the reference's scalar formula in float64 (an independent
    evaluation: the reference does not use jax)."""
    x = f32(np.linspace(-4, 4, 41))
    code, names = ACTIVATION_CODES[act]
    params = {n: ACTIVATION_PARAMS[n] for n in names}
    slots = [params[n] for n in names] + [0.0, 0.0]
    want = np.array([activate(code, float(v), slots[0], slots[1]) for v in x])
    got = low.activate(jnp.asarray(x), act, params)
    close(got, want, rtol=4e-6, atol=4e-7)


def test_every_activation_of_the_spec_has_a_lowering() -> None:
    assert set(low.ACTIVATIONS) == {a for a in ACTIVATION_CODES if a}


# --------------------------------------------------------------------------------------------
# The backend: paths, compute types, options, supports()

import dmlconform as dc  # noqa: E402
from dmlconform.backends import BackendError, load_backend  # noqa: E402


def T(sizes: list[int], dt: str = "FLOAT32") -> dict[str, Any]:
    return {"DataType": dt, "Sizes": sizes}


def _desc(operator: str, body: dict[str, Any]) -> dc.OperatorDesc:
    return dc.parse_desc({"type": operator, "desc": body})


S = [2, 3, 4, 5]
C = [1, 3, 1, 1]
#: one desc per kernel, and the path the backend takes for it
KERNEL_DESCS: dict[str, tuple[str, dict[str, Any], str]] = {
    "normalization": (
        "MEAN_VARIANCE_NORMALIZATION1",
        {"InputTensor": T(S), "OutputTensor": T(S), "Axes": [2, 3], "NormalizeVariance": True},
        "mean_var",
    ),
    "rms_normalization": (
        "MEAN_VARIANCE_NORMALIZATION2",
        {"InputTensor": T(S), "OutputTensor": T(S), "Axes": [1, 2, 3], "UseMean": False, "UseVariance": True},
        "rsqrt_mean_square",
    ),
    "given_statistics": (
        "BATCH_NORMALIZATION",
        {
            "InputTensor": T(S),
            "MeanTensor": T(C),
            "VarianceTensor": T(C),
            "ScaleTensor": T(C),
            "BiasTensor": T(C),
            "OutputTensor": T(S),
            "Spatial": True,
            "Epsilon": 1e-3,
        },
        "rsqrt_affine",
    ),
    "normalization_grad": (
        "BATCH_NORMALIZATION_TRAINING_GRAD",
        {
            "InputTensor": T(S),
            "InputGradientTensor": T(S),
            "MeanTensor": T(C),
            "VarianceTensor": T(C),
            "ScaleTensor": T(C),
            "OutputGradientTensor": T(S),
            "OutputScaleGradientTensor": T(C),
            "OutputBiasGradientTensor": T(C),
            "Epsilon": 1e-3,
        },
        "vjp_batch",
    ),
    "local_response": (
        "LOCAL_RESPONSE_NORMALIZATION",
        {
            "InputTensor": T(S),
            "OutputTensor": T(S),
            "CrossChannel": False,
            "LocalSize": 3,
            "Alpha": 1.0,
            "Beta": 0.75,
            "Bias": 1.0,
        },
        "reduce_window",
    ),
    "local_response_grad": (
        "LOCAL_RESPONSE_NORMALIZATION_GRAD",
        {
            "InputTensor": T(S),
            "InputGradientTensor": T(S),
            "OutputGradientTensor": T(S),
            "CrossChannel": True,
            "LocalSize": 2,
            "Alpha": 1.0,
            "Beta": 0.75,
            "Bias": 1.0,
        },
        "vjp_reduce_window",
    ),
    "lp_normalization": (
        "LP_NORMALIZATION",
        {"InputTensor": T(S), "OutputTensor": T(S), "Axis": 3, "P": 2, "Epsilon": 1e-5},
        "squared_norm",
    ),
}


@pytest.fixture(scope="module")
def backend() -> Any:
    return load_backend("jax")


def _inputs(desc: dc.OperatorDesc, dtype: Any = np.float32) -> dict[str, np.ndarray]:
    """Standard-normal inputs at each input member's Sizes, the Variance members positive."""
    rng = np.random.default_rng(7)
    out = {}
    for name, t in desc.tensors().items():
        if "Output" in name:
            continue
        v = rng.standard_normal(t.sizes)
        out[name] = (np.abs(v) + 0.5 if "Variance" in name else v).astype(dtype)
    return out


@pytest.mark.parametrize("kernel", sorted(KERNEL_DESCS))
def test_each_kernel_matches_the_reference_and_records_its_path(backend: Any, kernel: str) -> None:
    operator, body, path = KERNEL_DESCS[kernel]
    desc = _desc(operator, body)
    inputs = _inputs(desc)
    got = backend.execute(desc, inputs)
    want = dc.execute(desc, inputs)
    assert set(got) == set(want)
    for member, value in want.items():
        assert got[member].shape == value.shape and got[member].dtype == value.dtype
        np.testing.assert_allclose(got[member], value, rtol=2e-4, atol=2e-4, err_msg=member)
    info = backend.last_info()
    assert info["path"] == path and info["compute_dtype"] == "float32"


def test_float16_is_native_by_default_and_float32_on_request() -> None:
    """Native: the computation in float16 (MVN1 over a slice 60 deviations off 0 shows it); the
    option: float32 within, FLOAT16 at the ends, within one FLOAT16 rounding of the answer."""
    operator, body, _ = KERNEL_DESCS["normalization"]
    desc = _desc(
        operator, {k: (T(v["Sizes"], "FLOAT16") if isinstance(v, dict) else v) for k, v in body.items()}
    )
    x = (60 + np.random.default_rng(1).standard_normal(S)).astype(np.float16)
    want = dc.execute(desc, {"InputTensor": x}, float64=True)["OutputTensor"]
    native, upcast = load_backend("jax"), load_backend("jax", {"float16": "float32"})
    err = {}
    for name, b in (("native", native), ("float32", upcast)):
        out = b.execute(desc, {"InputTensor": x})["OutputTensor"]
        assert out.dtype == np.float16
        err[name] = np.max(np.abs(out.astype(np.float64) - want))
        assert b.last_info()["compute_dtype"] == ("float16" if name == "native" else "float32")
    assert err["float32"] <= 2**-11 * 4 < 2**-7 < err["native"]
    assert upcast.last_info()["upcast_reason"] == "option float16=float32"


def test_structures_are_compiled_once_and_reused_for_other_sizes() -> None:
    b = load_backend("jax")
    operator, body, _ = KERNEL_DESCS["normalization"]
    reused = []
    for n in (5, 6, 5):
        desc = _desc(operator, {**body, "InputTensor": T([2, 3, 4, n]), "OutputTensor": T([2, 3, 4, n])})
        b.execute(desc, _inputs(desc))
        reused.append(b.last_info()["compiled_reused"])
    assert reused == [False, True, True]


def test_supports_gives_the_reason_for_what_is_left_out() -> None:
    operator, body, _ = KERNEL_DESCS["normalization"]
    standardize = load_backend("jax", {"path": "standardize"})
    assert standardize.supports(_desc(operator, body)) is True
    reason = standardize.supports(_desc(operator, {**body, "NormalizeVariance": False}))
    assert isinstance(reason, str) and "NormalizeVariance FALSE" in reason
    with pytest.raises(dc.Unsupported, match="NormalizeVariance FALSE"):
        standardize.execute(
            _desc(operator, {**body, "NormalizeVariance": False}), {"InputTensor": np.zeros(S, np.float32)}
        )
    assert load_backend("jax").supports(_desc(operator, {**body, "NormalizeVariance": False})) is True


def test_options_are_checked_and_versions_named() -> None:
    with pytest.raises(BackendError, match="float16='half'"):
        load_backend("jax", {"float16": "half"})
    with pytest.raises(BackendError, match="path='fast'"):
        load_backend("jax", {"path": "fast"})
    b = load_backend("jax")
    assert b.versions()["jax"] == jax.__version__ and "jaxlib" in b.versions()
    assert b.options["float16"] == "native" and not jax.config.jax_enable_x64


# --------------------------------------------------------------------------------------------
# The known findings (dmlconform/known_findings/jax.yaml) against their reproducers (cases/jax/)

import dataclasses  # noqa: E402

from helpers import REPO, SPEC  # noqa: E402

from dmlconform.runner.checks import run_case  # noqa: E402
from dmlconform.runner.expect import CaseFacts, known_findings_file, parse_findings  # noqa: E402
from dmlconform.runner.guard import ThreadGuard  # noqa: E402
from dmlconform.runner.results import load_case_dir  # noqa: E402
from dmlconform.tolerance.options import NO_OPTIONS  # noqa: E402

CASES = REPO / "cases" / "jax"


def _scaled(factor: float) -> Any:
    def change(case: Any, inputs: dict[str, np.ndarray]) -> tuple[Any, dict[str, np.ndarray]]:
        x = next(iter(inputs))  # the input tensor comes first
        return case, {**inputs, x: (inputs[x].astype(np.float64) * factor).astype(inputs[x].dtype)}

    return change


def _epsilon(value: float) -> Any:
    return lambda case, inputs: (dataclasses.replace(case, desc=case.desc.replace(Epsilon=value)), inputs)


def _variance_one(case: Any, inputs: dict[str, np.ndarray]) -> tuple[Any, dict[str, np.ndarray]]:
    return case, {**inputs, "VarianceTensor": np.ones_like(inputs["VarianceTensor"])}


#: finding -> (its reproducer's case under cases/jax/, a change that takes the case outside it)
FINDING_CASES: dict[str, tuple[str, Any]] = {
    "J1": ("quotient-vjp-squares-denominator", _scaled(1e-4)),  # small denominators
    "J2": ("float16-native", None),  # the same case in FLOAT32: below
    "J3": ("float16-epsilon-underflow", _epsilon(1e-5)),  # an Epsilon float16 holds
    "J4": ("float16-range", _scaled(1e-2)),  # a variance in float16's range
    "J5": ("float16-rsqrt-derivative", _variance_one),  # Variance 1: the rsqrt rule in range
    "J6": ("float16-vjp-sums", None),  # the same case in FLOAT32
    "J8": ("xla-in-order-reduction", None),  # the same case in FLOAT16
}


@functools.cache
def _findings() -> list[Any]:
    path = known_findings_file("jax")
    assert path is not None
    return parse_findings(path.read_text(), str(path), spec=SPEC)


def _covered_by(finding: str, case: Any, inputs: dict[str, np.ndarray], **facts: Any) -> bool:
    of = dataclasses.replace(CaseFacts.of(case, spec=SPEC, inputs=inputs), **facts)
    return any(b.covers(of) for b in _findings() if b.finding == finding)


def _run(name: str, options: dict[str, str] | None = None, tolerance: Any = NO_OPTIONS) -> str:
    case, inputs, _ = load_case_dir(CASES / name, SPEC)
    return run_case(
        case, ThreadGuard(load_backend("jax", options or {}), None), SPEC, tolerance, inputs=inputs
    ).status


def test_every_finding_names_its_explanation_and_a_reproducer_that_exists() -> None:
    text = known_findings_file("jax").read_text()  # type: ignore[union-attr]
    ids = {b.finding for b in _findings()}
    assert ids == set(FINDING_CASES)
    for target in set(re.findall(r"(?:reproducer|explained): (\S+)", text)):
        assert (REPO / target.split("#")[0]).exists(), target


@pytest.mark.parametrize("finding", sorted(FINDING_CASES))
def test_each_finding_covers_its_reproducers_case_and_not_one_beside_it(finding: str) -> None:
    name, outside = FINDING_CASES[finding]
    case, inputs, _ = load_case_dir(CASES / name, SPEC)
    assert _covered_by(finding, case, inputs)
    if outside is None:
        other = "FLOAT16" if case.data_type == "FLOAT32" else "FLOAT32"
        assert not _covered_by(finding, case, inputs, data_type=other)
    else:
        assert not _covered_by(finding, *outside(case, inputs))


@pytest.mark.parametrize("finding", sorted(FINDING_CASES))
def test_each_reproducer_fails_natively(finding: str) -> None:
    assert _run(FINDING_CASES[finding][0]) == "failed"


@pytest.mark.parametrize("finding", ["J2", "J3", "J4", "J5", "J6"])
def test_the_float32_option_removes_the_float16_findings(finding: str) -> None:
    assert _run(FINDING_CASES[finding][0], {"float16": "float32"}) == "passed"


@pytest.mark.parametrize("finding", ["J2", "J8"])
def test_the_bounds_hold_for_their_reproducers(finding: str) -> None:
    """J2 and J8 are bounds (meets), not bugs: their cases pass under the entry's tolerance."""
    name = FINDING_CASES[finding][0]
    case, inputs, _ = load_case_dir(CASES / name, SPEC)
    of = CaseFacts.of(case, spec=SPEC, inputs=inputs)
    bound = next(b for b in _findings() if b.finding == finding and b.covers(of))
    assert _run(name, tolerance=bound.meets) == "passed"


def test_the_standardize_path_fails_offset_data_the_default_path_passes() -> None:
    """J6 (path=standardize, not in the shipped findings): jax.nn.standardize's one-pass
    variance fails a large-offset MVN1 case; the default two-pass lowering passes it."""
    assert _run("standardize-one-pass-variance", {"path": "standardize"}) == "failed"
    assert _run("standardize-one-pass-variance") == "passed"


def test_each_reproducer_experiment_names_its_finding() -> None:
    """Each experiment prints '<finding> reproduced' or 'not reproduced' (run by hand: they
    take seconds each; here only their contract)."""
    for directory in sorted(CASES.iterdir()):
        text = (directory / "experiment.py").read_text()
        assert re.search(r'"J\d reproduced"', text), directory.name
        assert (directory / "README.md").is_file()
