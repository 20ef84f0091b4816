"""The reference executor: semantics of the three operators, layouts, data types, activations,
the numba-vs-numpy cross-check (hypothesis), and the numba disk cache."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import SPEC
from helpers import reference_path as path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmlconform import reference
from dmlconform.kernels import execute
from dmlconform.kernels import plan as make_plan
from dmlconform.reference import InputError, numpy_ref
from dmlconform.specification.desc import parse_desc

EPS32 = float(np.float32(1e-5))  # Epsilon is a C FLOAT: the reference uses its float32 value


def numpy_execute(desc, inputs, spec):
    """The plain-numpy cross-check's float64 outputs of ``desc``, statistics in their Sizes."""
    plan = make_plan(desc, spec)
    out = numpy_ref.compute(plan, {k: np.asarray(v) for k, v in inputs.items()})
    for name in (plan.mean_output, plan.variance_output):
        if name:
            out[name] = out[name].reshape(plan.sizes(name))
    return out


def tensor(sizes, dtype="FLOAT32", strides=None):
    t = {"DataType": dtype, "Sizes": list(sizes)}
    if strides is not None:
        t["Strides"] = list(strides)
    return t


def mvn1(shape, axes, dtype="FLOAT32", scale=None, bias=None, nv=True, act=None, eps=None, out_strides=None):
    d = {
        "InputTensor": tensor(shape, dtype),
        "ScaleTensor": tensor(scale, dtype) if scale else None,
        "BiasTensor": tensor(bias, dtype) if bias else None,
        "OutputTensor": tensor(shape, dtype, out_strides),
        "Axes": list(axes),
        "NormalizeVariance": nv,
        "FusedActivation": act,
    }
    if eps is not None:
        d["Epsilon"] = eps
    return parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": d})


def bnt(shape, stat_shape, dtype="FLOAT32", bias=True, fused_add=False, act=None):
    d = {
        "InputTensor": tensor(shape, dtype),
        "MeanTensor": tensor(stat_shape, dtype),
        "VarianceTensor": tensor(stat_shape, dtype),
        "ScaleTensor": tensor(stat_shape, dtype),
        "BiasTensor": tensor(stat_shape, dtype) if bias else None,
        "FusedAddTensor": tensor(shape, dtype) if fused_add else None,
        "OutputTensor": tensor(shape, dtype),
        "OutputMeanTensor": tensor(stat_shape, dtype),
        "OutputVarianceTensor": tensor(stat_shape, dtype),
        "Epsilon": 1e-5,
        "FusedActivation": act,
    }
    op = SPEC.operator("BATCH_NORMALIZATION_TRAINING")
    d = {k: v for k, v in d.items() if op.member(k) is not None}
    return parse_desc({"type": "BATCH_NORMALIZATION_TRAINING", "desc": d})


def normal(shape, seed=0, dtype=np.float32, loc=0.0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale + loc).astype(dtype)


# ---------------------------------------------------------------------------------------------
# Hand-computed values


def test_mvn1_hand_computed_values():
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    out = execute(mvn1([4], [0], eps=0.0), {"InputTensor": x})["OutputTensor"]
    # mean 2.5, population variance 1.25
    expected = (np.array([1, 2, 3, 4]) - 2.5) / math.sqrt(1.25)
    np.testing.assert_array_equal(out, expected.astype(np.float32))
    assert out.dtype == np.float32 and out.shape == (4,)


def test_normalize_variance_false_only_subtracts_mean():
    x = np.array([[1.0, 3.0], [10.0, 14.0]], np.float32)
    out = execute(mvn1([2, 2], [1], nv=False), {"InputTensor": x})["OutputTensor"]
    np.testing.assert_array_equal(out, np.array([[-1, 1], [-2, 2]], np.float32))


def test_batch_norm_outputs_population_variance_in_scale_shape():
    x = np.array([1.0, 3.0, 10.0, 30.0], np.float32).reshape(2, 2, 1, 1)  # channel 0: {1, 10}, 1: {3, 30}
    desc = bnt([2, 2, 1, 1], [1, 2, 1, 1])
    scale = np.array([2.0, 1.0], np.float32).reshape(1, 2, 1, 1)
    bias = np.array([0.5, -1.0], np.float32).reshape(1, 2, 1, 1)
    out = execute(desc, {"InputTensor": x, "ScaleTensor": scale, "BiasTensor": bias})
    assert out["OutputMeanTensor"].shape == (1, 2, 1, 1)
    np.testing.assert_array_equal(out["OutputMeanTensor"].ravel(), [5.5, 16.5])
    np.testing.assert_array_equal(out["OutputVarianceTensor"].ravel(), [20.25, 182.25])  # biased: /n
    z = np.array([[-4.5, -13.5], [4.5, 13.5]]) / np.sqrt(np.array([20.25, 182.25]) + EPS32)
    expected = (z * [2.0, 1.0] + [0.5, -1.0]).astype(np.float32)
    np.testing.assert_array_equal(out["OutputTensor"].reshape(2, 2), expected)


def test_batch_norm_fused_add_before_activation():
    x = np.array([0.0, 2.0], np.float32).reshape(2, 1)
    desc = bnt([2, 1], [1, 1], bias=False, fused_add=True, act={"Type": "ACTIVATION_RELU"})
    add = np.array([[0.5], [-3.0]], np.float32)
    out = execute(desc, {"InputTensor": x, "ScaleTensor": np.ones((1, 1), np.float32), "FusedAddTensor": add})
    z = 1.0 / math.sqrt(1.0 + EPS32)  # x normalized: -z, +z
    # relu(-z + 0.5) = 0; relu(z - 3) = 0 -- adding after the activation would give 0.5 and -2.0
    np.testing.assert_array_equal(out["OutputTensor"].ravel(), [0.0, 0.0])
    add2 = np.array([[1.5], [-0.5]], np.float32)
    out = execute(
        desc, {"InputTensor": x, "ScaleTensor": np.ones((1, 1), np.float32), "FusedAddTensor": add2}
    )
    np.testing.assert_array_equal(out["OutputTensor"].ravel(), np.float32([1.5 - z, z - 0.5]))


def _mvn(cross_channel: bool):
    return parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION",
            "desc": {
                "InputTensor": tensor([2, 3, 4, 5]),
                "OutputTensor": tensor([2, 3, 4, 5]),
                "CrossChannel": cross_channel,
                "NormalizeVariance": True,
            },
        }
    )


@pytest.mark.parametrize("cross, axes", [(False, (2, 3)), (True, (1, 2, 3))])
def test_mvn_cross_channel_axes(cross, axes):
    x = normal((2, 3, 4, 5), seed=1)
    out = execute(_mvn(cross), {"InputTensor": x})["OutputTensor"].astype(np.float64)
    # each normalized slice has mean 0 and (population) variance var/(var+eps) ~ 1
    np.testing.assert_allclose(out.mean(axis=axes), 0.0, atol=1e-6)
    np.testing.assert_allclose(out.var(axis=axes), 1.0, atol=1e-4)
    x64 = x.astype(np.float64)
    m, v = x64.mean(axis=axes, keepdims=True), x64.var(axis=axes, keepdims=True)
    np.testing.assert_allclose(out, (x64 - m) / np.sqrt(v + EPS32), rtol=1.2e-7, atol=1e-7)


def test_null_scale_is_one_and_null_bias_is_zero():
    x = normal((2, 3, 4), seed=2)
    plain = execute(mvn1([2, 3, 4], [2]), {"InputTensor": x})["OutputTensor"]
    ones = np.ones((1, 3, 1), np.float32)
    zeros = np.zeros((1, 3, 1), np.float32)
    only_scale = execute(mvn1([2, 3, 4], [2], scale=[1, 3, 1]), {"InputTensor": x, "ScaleTensor": ones})
    only_bias = execute(mvn1([2, 3, 4], [2], bias=[1, 3, 1]), {"InputTensor": x, "BiasTensor": zeros})
    np.testing.assert_array_equal(only_scale["OutputTensor"], plain)
    np.testing.assert_array_equal(only_bias["OutputTensor"], plain)


@pytest.mark.parametrize(
    "scale_shape", [[1, 3, 1, 1], [2, 1, 1, 1], [1, 1, 4, 5], [2, 3, 4, 5], [1, 1, 1, 5]]
)
def test_scale_bias_broadcast_matches_numpy(scale_shape):
    shape = [2, 3, 4, 5]
    x, s, b = normal(shape, 3), normal(scale_shape, 4), normal(scale_shape, 5)
    desc = mvn1(shape, [2, 3], scale=scale_shape, bias=scale_shape)
    out = execute(desc, {"InputTensor": x, "ScaleTensor": s, "BiasTensor": b})["OutputTensor"]
    x64 = x.astype(np.float64)
    m, v = x64.mean((2, 3), keepdims=True), x64.var((2, 3), keepdims=True)
    expected = (s * ((x64 - m) / np.sqrt(v + EPS32)) + b).astype(np.float32)
    np.testing.assert_allclose(out, expected, rtol=1.2e-7, atol=1e-7)


def test_float16_rounds_once_from_float64():
    x = normal((3, 17), seed=6, dtype=np.float16)
    out = execute(mvn1([3, 17], [1], dtype="FLOAT16"), {"InputTensor": x})["OutputTensor"]
    assert out.dtype == np.float16
    x64 = x.astype(np.float64)
    z = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + EPS32)
    np.testing.assert_array_equal(out, z.astype(np.float16))  # numpy: float64 -> float16 directly


def test_strided_and_broadcast_inputs_and_strided_outputs():
    shape = [2, 3, 4]
    base = normal((2, 3, 8), seed=7)
    x = base[:, :, ::2]  # a strided view
    assert not x.flags.c_contiguous
    s = np.broadcast_to(normal((1, 3, 1), seed=8), (1, 3, 1))
    desc = mvn1(shape, [0, 2], scale=[1, 3, 1], out_strides=[1, 2, 6])
    got = execute(desc, {"InputTensor": x, "ScaleTensor": s})["OutputTensor"]
    packed = execute(mvn1(shape, [0, 2], scale=[1, 3, 1]), {"InputTensor": x.copy(), "ScaleTensor": s.copy()})
    np.testing.assert_array_equal(got, packed["OutputTensor"])
    zero_stride = np.broadcast_to(normal((2, 3, 1), seed=9), (2, 3, 4))  # constant along axis 2
    out = execute(mvn1(shape, [1, 2]), {"InputTensor": zero_stride})["OutputTensor"]
    np.testing.assert_array_equal(
        out, execute(mvn1(shape, [1, 2]), {"InputTensor": zero_stride.copy()})["OutputTensor"]
    )


def test_non_contiguous_axes_and_any_order():
    x = normal((2, 3, 4, 5), seed=10)
    a = execute(mvn1([2, 3, 4, 5], [3, 1]), {"InputTensor": x})["OutputTensor"]
    b = execute(mvn1([2, 3, 4, 5], [1, 3]), {"InputTensor": x})["OutputTensor"]
    np.testing.assert_array_equal(a, b)
    ref = numpy_execute(mvn1([2, 3, 4, 5], [1, 3]), {"InputTensor": x}, SPEC)["OutputTensor"]
    np.testing.assert_array_equal(a, ref.astype(np.float32))


def test_missing_and_misshapen_inputs_name_the_member():
    desc = mvn1([2, 3], [1], scale=[1, 3])
    with pytest.raises(InputError, match="InputTensor"):
        execute(desc, {"ScaleTensor": np.ones((1, 3), np.float32)})
    with pytest.raises(InputError, match="ScaleTensor"):
        execute(
            desc, {"InputTensor": np.ones((2, 3), np.float32), "ScaleTensor": np.ones((3, 1), np.float32)}
        )


def test_plan_is_read_from_the_spec_semantics():
    plan = make_plan(bnt([4, 3, 2, 2], [1, 3, 1, 1]), SPEC)
    assert plan.axes == (0, 2, 3) and plan.mean_output == "OutputMeanTensor"
    assert plan.reduction_length == 16 and plan.epsilon == EPS32
    plan = make_plan(mvn1([2, 3], [1], act={"Type": "ACTIVATION_SCALED_ELU"}), SPEC)
    assert plan.activation_params == {
        "Alpha": 1.67326319217681884765625,
        "Gamma": 1.05070102214813232421875,
    }  # DirectMLX.h, exact float32


# ---------------------------------------------------------------------------------------------
# Activations: every fusable activation against the independent numpy formulas


ACT_PARAMS = {
    "ACTIVATION_LINEAR": {"Alpha": 1.5, "Beta": -0.25},
    "ACTIVATION_PARAMETRIC_SOFTPLUS": {"Alpha": 0.5, "Beta": 2.0},
    "ACTIVATION_THRESHOLDED_RELU": {"Alpha": 0.3},
    "ACTIVATION_SHRINK": {"Bias": 0.1, "Threshold": 0.4},
}


def test_every_spec_activation_is_covered():
    assert set(SPEC.activations) >= {"ACTIVATION_GELU", "ACTIVATION_CELU"}
    for name in SPEC.activations:
        x = normal((2, 8), seed=11)
        act = {"Type": name, **ACT_PARAMS.get(name, {})}
        desc = mvn1([2, 8], [1], act=act)
        got = execute(desc, {"InputTensor": x}, float64=True)["OutputTensor"]
        want = numpy_execute(desc, {"InputTensor": x}, SPEC)["OutputTensor"]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14, err_msg=name)
        identity = execute(mvn1([2, 8], [1]), {"InputTensor": x}, float64=True)["OutputTensor"]
        if name != "ACTIVATION_IDENTITY":
            assert not np.array_equal(got, identity), name


@pytest.mark.parametrize(
    "name, x, expected",
    [
        ("ACTIVATION_ELU", [-1.0, 0.0, 2.0], [math.expm1(-1.0), 0.0, 2.0]),
        ("ACTIVATION_LEAKY_RELU", [-2.0, 0.0, 3.0], [-0.02, 0.0, 3.0]),
        (
            "ACTIVATION_SCALED_ELU",
            [-1.0, 0.0, 1.0],
            [
                1.05070102214813232421875 * 1.67326319217681884765625 * math.expm1(-1.0),
                0.0,
                1.05070102214813232421875,
            ],
        ),
        ("ACTIVATION_GELU", [-1.0, 0.0, 1.0], [-0.15865525393145707, 0.0, 0.8413447460685429]),
        ("ACTIVATION_HARD_SIGMOID", [-10.0, 0.0, 10.0], [0.0, 0.5, 1.0]),
        ("ACTIVATION_SOFTPLUS", [0.0, 100.0], [math.log(2.0), 100.0]),
        ("ACTIVATION_CELU", [-1.0, 1.0], [math.expm1(-1.0), 1.0]),
    ],
)
def test_activation_formulas_at_known_points(name, x, expected):
    # LINEAR normalization with NormalizeVariance=False and a zero-mean pair keeps x itself
    xs = np.array([x, [-v for v in x]], np.float64).T  # each row: (v, -v), mean 0
    desc = mvn1(list(xs.shape), [1], nv=False, act={"Type": name}, dtype="FLOAT32")
    params = SPEC.activations[name].parameters
    assert all(p.default is not None for p in params)
    got = execute(desc, {"InputTensor": xs}, float64=True)["OutputTensor"][:, 0]
    # parameters are C FLOATs: compare at float32 precision
    np.testing.assert_allclose(got, expected, rtol=3e-7, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Property test: numba kernel == plain numpy float64 implementation


@st.composite
def cases(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    axes = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    scale_shape = [draw(st.sampled_from([1, s])) for s in shape]
    bias_shape = [draw(st.sampled_from([1, s])) for s in shape]
    use_scale, use_bias, nv = draw(st.booleans()), draw(st.booleans()), draw(st.booleans())
    act_name = draw(st.sampled_from([None, *sorted(SPEC.activations)]))
    dtype = draw(st.sampled_from(["FLOAT32", "FLOAT16"]))
    seed = draw(st.integers(0, 2**16))
    loc = draw(st.sampled_from([0.0, 3.0, -100.0]))
    act = {"Type": act_name, **ACT_PARAMS.get(act_name, {})} if act_name else None
    desc = mvn1(
        shape, axes, dtype, scale_shape if use_scale else None, bias_shape if use_bias else None, nv, act
    )
    npdt = np.float32 if dtype == "FLOAT32" else np.float16
    inputs = {"InputTensor": normal(shape, seed, npdt, loc=loc)}
    if use_scale:
        inputs["ScaleTensor"] = normal(scale_shape, seed + 1, npdt)
    if use_bias:
        inputs["BiasTensor"] = normal(bias_shape, seed + 2, npdt)
    return desc, inputs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from(["numba", "mirror"]))
def test_numba_agrees_with_numpy(case, which):
    desc, inputs = case
    with path(which):
        got = execute(desc, inputs, float64=True)
    want = numpy_execute(desc, inputs, SPEC)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10, atol=1e-10, err_msg=name)
    with path(which):
        rounded = execute(desc, inputs)
    out_dtype = np.float32 if desc.get("InputTensor").data_type == "FLOAT32" else np.float16
    assert rounded["OutputTensor"].dtype == out_dtype


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 4),
    c=st.integers(1, 4),
    hw=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    seed=st.integers(0, 1000),
    fused=st.booleans(),
    which=st.sampled_from(["numba", "mirror"]),
)
def test_batch_norm_numba_agrees_with_numpy(n, c, hw, seed, fused, which):
    shape = (n, c, *hw)
    desc = bnt(shape, [1, c, 1, 1], fused_add=fused, act={"Type": "ACTIVATION_TANH"})
    inputs = {
        "InputTensor": normal(shape, seed),
        "ScaleTensor": normal((1, c, 1, 1), seed + 1),
        "BiasTensor": normal((1, c, 1, 1), seed + 2),
    }
    if fused:
        inputs["FusedAddTensor"] = normal(shape, seed + 3)
    with path(which):
        got = execute(desc, inputs, float64=True)
    want = numpy_execute(desc, inputs, SPEC)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-10, atol=1e-12, err_msg=name)


def test_deterministic_across_calls():
    x = normal((4, 3, 33, 7), seed=12, loc=50.0)
    desc = bnt(x.shape, [1, 3, 1, 1])
    inputs = {"InputTensor": x, "ScaleTensor": normal((1, 3, 1, 1), 1), "BiasTensor": normal((1, 3, 1, 1), 2)}
    a = execute(desc, inputs)
    b = execute(desc, inputs)
    for k in a:
        assert a[k].tobytes() == b[k].tobytes()


@pytest.mark.parametrize("which", ["numba", "mirror"])
@pytest.mark.parametrize(
    ("shape", "axes", "strided"),
    [
        ((2, 3, 37, 29), (2, 3), False),  # rows of 1073: full 64-lane blocks plus a tail
        ((3, 2, 17, 45), (0, 2, 3), False),  # batch-norm layout: several rows per slice
        ((2, 2, 130, 3), (1, 2), True),  # strided input rows: copied, then the same kernel
        ((1, 1, 4096, 1), (2,), False),  # one long slice
    ],
)
def test_long_rows_agree_with_numpy(shape, axes, strided, which):
    """The lane blocks only run on rows of 64 or more elements: small hypothesis shapes never
    reach them, so they get their own cross-check."""
    x = normal(shape, seed=sum(shape), loc=3.0)
    if strided:
        x = np.repeat(x, 2, axis=-1)[..., ::2]
        assert not x.flags.c_contiguous
    stat = [1 if i in axes else s for i, s in enumerate(shape)]
    desc = mvn1(list(shape), axes, scale=stat, bias=stat)
    inputs = {"InputTensor": x, "ScaleTensor": normal(stat, 1), "BiasTensor": normal(stat, 2)}
    with path(which):
        got = execute(desc, inputs, float64=True)["OutputTensor"]
    want = numpy_execute(desc, inputs, SPEC)["OutputTensor"]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_results_do_not_depend_on_the_thread_count(monkeypatch):
    from dmlconform.reference import compiled

    x = normal((4, 3, 70, 9), seed=21, loc=1e3)
    desc = bnt(x.shape, [1, 3, 1, 1])
    inputs = {"InputTensor": x, "ScaleTensor": normal((1, 3, 1, 1), 1), "BiasTensor": normal((1, 3, 1, 1), 2)}
    xm = normal((7, 5, 130, 1), seed=22, loc=-3.0)  # MVN1: 35 slices, chunked unevenly
    mdesc = mvn1(list(xm.shape), [2, 3])
    monkeypatch.setattr(compiled, "PARALLEL_MIN_ELEMENTS", 0)
    results = []
    for threads in (1, 2, 3):
        monkeypatch.setattr(compiled, "THREADS", threads)
        with path("numba"):
            results.append((execute(desc, inputs, float64=True), execute(mdesc, {"InputTensor": xm})))
    for got in results[1:]:
        for a, b in zip(results[0], got, strict=True):
            for k in a:
                assert a[k].tobytes() == b[k].tobytes(), k


def test_preallocated_outputs_are_written_and_returned():
    x = normal((3, 4, 70, 5), seed=22)
    desc = bnt(x.shape, [1, 4, 1, 1])
    inputs = {"InputTensor": x, "ScaleTensor": normal((1, 4, 1, 1), 1), "BiasTensor": normal((1, 4, 1, 1), 2)}
    fresh = execute(desc, inputs)
    out = {k: np.full(v.shape, np.nan, v.dtype) for k, v in fresh.items()}
    got = execute(desc, inputs, out=out)
    for k in fresh:
        assert got[k] is out[k]
        np.testing.assert_array_equal(out[k], fresh[k])
    # FLOAT16 output: computed in float64 and rounded once into the caller's float16 array
    desc16 = mvn1([3, 4, 70, 5], [2, 3], dtype="FLOAT16")
    x16 = x.astype(np.float16)
    want = execute(desc16, {"InputTensor": x16})["OutputTensor"]
    buf = np.zeros(want.shape, np.float16)
    execute(desc16, {"InputTensor": x16}, out={"OutputTensor": buf})
    np.testing.assert_array_equal(buf, want)


def test_bad_preallocated_outputs_name_the_member():
    desc = mvn1([2, 3, 4], [2])
    x = normal((2, 3, 4))
    with pytest.raises(InputError, match="OutputTensor.*float32"):
        execute(desc, {"InputTensor": x}, out={"OutputTensor": np.empty((2, 3, 4), np.float64)})
    with pytest.raises(InputError, match="OutputTensor"):
        execute(desc, {"InputTensor": x}, out={"OutputTensor": np.empty((2, 3), np.float32)})
    with pytest.raises(InputError, match="MeanTensor: not an output"):
        execute(desc, {"InputTensor": x}, out={"MeanTensor": np.empty((2, 3, 1), np.float32)})
    frozen = np.empty((2, 3, 4), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(InputError, match="read-only"):
        execute(desc, {"InputTensor": x}, out={"OutputTensor": frozen})


def test_input_is_read_in_place_not_copied():
    """Batch-norm slices (N, H, W per channel) are addressed as rows of the caller's array."""
    from dmlconform.reference import _as_3d

    x = normal((8, 4, 16, 16))
    v = _as_3d(x.transpose(1, 0, 2, 3), 1)
    assert v is not None and v.shape == (4, 8, 256) and np.shares_memory(v, x)


# ---------------------------------------------------------------------------------------------
# numba disk cache: a second process loads the compiled kernel instead of compiling it


def test_second_process_loads_kernel_from_cache():
    big = [4, 4, 64, 65]  # above MIRROR_MAX_ELEMENTS: the numba kernel runs
    assert math.prod(big) > reference.MIRROR_MAX_ELEMENTS
    x = normal(big, seed=13)
    execute(mvn1(big, [2, 3]), {"InputTensor": x})  # ensure this signature is compiled + cached
    from dmlconform.reference import compiled

    cache_dir = Path(compiled.__file__).parent / "__pycache__"
    index = [p for p in cache_dir.glob("compiled._normalize-*.nbi")] if cache_dir.is_dir() else []
    if not index or os.environ.get("NUMBA_CACHE_DIR"):
        pytest.skip("numba cache not in the package __pycache__ (read-only install or NUMBA_CACHE_DIR)")
    code = (
        "import numpy as np, json\n"
        "from dmlconform.specification.desc import parse_desc\n"
        "from dmlconform.kernels import execute\n"
        "from dmlconform.reference.compiled import normalize_kernel\n"
        "d = parse_desc({'type': 'MEAN_VARIANCE_NORMALIZATION1', 'desc': {"
        f"'InputTensor': {{'DataType': 'FLOAT32', 'Sizes': {big}}},"
        f"'OutputTensor': {{'DataType': 'FLOAT32', 'Sizes': {big}}},"
        "'Axes': [2, 3], 'NormalizeVariance': True}})\n"
        f"execute(d, {{'InputTensor': np.ones({big}, np.float32)}})\n"
        "s = normalize_kernel(np.float32, np.float32).compiled.stats\n"
        "print(json.dumps([sum(s.cache_hits.values()), sum(s.cache_misses.values())]))\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    hits, misses = json.loads(proc.stdout.strip().splitlines()[-1])
    assert hits >= 1 and misses == 0
