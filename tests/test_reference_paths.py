"""The reference's two paths: the numba kernel and its numpy mirror (small tensors) give
bit-identical outputs and statistics, and small cases never compile (or import) numba.

Bit-identity is what makes the size-based path choice invisible: a case's verdict cannot depend
on which path ran. The property test below draws shapes that reach every part of the kernel's
summation order (short rows, 64-lane blocks in groups of four, single blocks, tails, several
rows per slice), broadcast and per-element operands, every activation with ordinary and extreme
parameters, special values (zeros of both signs, inf, nan, huge), and data whose first element
is far from the mean (the kernel's second pass)."""

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
from dmlconform.reference import compiled, mirror
from dmlconform.specification.desc import parse_desc

ROOT = Path(__file__).resolve().parents[1]


def both_paths(desc, inputs, **kw):
    with path("numba"):
        a = execute(desc, inputs, **kw)
    with path("mirror"):
        b = execute(desc, inputs, **kw)
    return a, b


def assert_bit_identical(a, b):
    """Same bits in every element (so -0.0 differs from 0.0), except that a NaN matches any NaN:
    the sign and payload of a NaN (x86 makes 0/0 negative) are no part of its value."""
    assert a.keys() == b.keys()
    for k in a:
        x, y = np.asarray(a[k]).ravel(), np.asarray(b[k]).ravel()
        assert x.dtype == y.dtype and a[k].shape == b[k].shape, k
        nan = np.isnan(x)
        assert (nan == np.isnan(y)).all(), f"{k}: NaN in one path only: {x[nan != np.isnan(y)]}"
        bits = np.dtype(f"u{x.itemsize}")
        diff = x[~nan].view(bits) != y[~nan].view(bits)
        assert not diff.any(), f"{k}: numba {x[~nan][diff][:8]} vs mirror {y[~nan][diff][:8]}"


def t(sizes, dtype):
    return {"DataType": dtype, "Sizes": list(sizes)}


ROW_LENGTHS = [1, 3, 63, 64, 65, 127, 200, 256, 300, 64 * 5 + 7, 64 * 9]
PARAM_VALUES = [0.5, 1.0, 2.0, -1.5, 1e-3, 30.0]


@st.composite
def mvn1_cases(draw):
    rank = draw(st.integers(2, 4))
    shape = [draw(st.integers(1, 4)) for _ in range(rank - 1)] + [draw(st.sampled_from(ROW_LENGTHS))]
    axes = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    dtype = draw(st.sampled_from(["FLOAT32", "FLOAT16"]))
    npdt = np.float32 if dtype == "FLOAT32" else np.float16

    def operand_shape():  # per slice, per element, or fully broadcast
        return [draw(st.sampled_from([1, s])) for s in shape]

    scale = operand_shape() if draw(st.booleans()) else None
    bias = operand_shape() if draw(st.booleans()) else None
    act_name = draw(st.sampled_from([None, *sorted(SPEC.activations)]))
    act = None
    if act_name:
        act = {"Type": act_name}
        for p in SPEC.activations[act_name].parameters:
            act[p.name] = draw(st.sampled_from(PARAM_VALUES))
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": t(shape, dtype),
                "ScaleTensor": t(scale, dtype) if scale else None,
                "BiasTensor": t(bias, dtype) if bias else None,
                "OutputTensor": t(shape, dtype),
                "Axes": axes,
                "NormalizeVariance": draw(st.booleans()),
                "FusedActivation": act,
                "Epsilon": draw(st.sampled_from([0.0, 1e-5])),
            },
        }
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    loc = draw(st.sampled_from([0.0, 3.0, -100.0, 1e4]))
    spread = draw(st.sampled_from([1.0, 1e-3, 0.0]))
    x = loc + spread * rng.standard_normal(shape)
    if draw(st.booleans()):  # far first element of each slice: the kernel's second pass
        x.reshape(-1)[:: max(1, shape[-1])] = loc + 50.0
    specials = draw(st.lists(st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, 6e4, -6e4]), max_size=3))
    flat = x.reshape(-1)
    for v in specials:
        flat[rng.integers(flat.size)] = v
    inputs = {"InputTensor": x.astype(npdt)}
    if scale:
        inputs["ScaleTensor"] = rng.standard_normal(scale).astype(npdt)
    if bias:
        inputs["BiasTensor"] = (30 * rng.standard_normal(bias)).astype(npdt)
    return desc, inputs


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # 6e4 in FLOAT16
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mvn1_cases(), st.booleans())
def test_numba_and_mirror_are_bit_identical(case, float64):
    desc, inputs = case
    a, b = both_paths(desc, inputs, float64=float64)
    assert_bit_identical(a, b)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 5),
    c=st.integers(1, 3),
    hw=st.tuples(st.integers(1, 9), st.sampled_from([1, 7, 64, 130])),
    seed=st.integers(0, 1000),
    fused=st.booleans(),
    loc=st.sampled_from([0.0, 1e3]),
    act=st.sampled_from([None, "ACTIVATION_GELU", "ACTIVATION_RELU", "ACTIVATION_SOFTPLUS"]),
)
def test_batch_norm_paths_are_bit_identical(n, c, hw, seed, fused, loc, act):
    """Batch-norm slices are several rows (N x H) of W elements: the rows' order in the sums."""
    shape, stat = (n, c, *hw), (1, c, 1, 1)
    members = {
        "InputTensor": t(shape, "FLOAT32"),
        "ScaleTensor": t(stat, "FLOAT32"),
        "BiasTensor": t(stat, "FLOAT32"),
        "FusedAddTensor": t(shape, "FLOAT32") if fused else None,
        "OutputTensor": t(shape, "FLOAT32"),
        "OutputMeanTensor": t(stat, "FLOAT32"),
        "OutputVarianceTensor": t(stat, "FLOAT32"),
        "Epsilon": 1e-5,
        "FusedActivation": {"Type": act} if act else None,
    }
    op = SPEC.operator("BATCH_NORMALIZATION_TRAINING")
    desc = parse_desc(
        {"type": "BATCH_NORMALIZATION_TRAINING", "desc": {k: v for k, v in members.items() if op.member(k)}}
    )
    rng = np.random.default_rng(seed)
    inputs = {
        "InputTensor": (loc + rng.standard_normal(shape)).astype(np.float32),
        "ScaleTensor": rng.standard_normal(stat).astype(np.float32),
        "BiasTensor": rng.standard_normal(stat).astype(np.float32),
    }
    if fused and "FusedAddTensor" in desc.members:
        inputs["FusedAddTensor"] = rng.standard_normal(shape).astype(np.float32)
    for float64 in (False, True):
        assert_bit_identical(*both_paths(desc, inputs, float64=float64))


def test_strided_inputs_and_outputs_bit_identical():
    """Rows the kernel cannot address in place are copied first; permuted outputs are written
    through a strided view: the same glue feeds both paths."""
    base = np.random.default_rng(3).standard_normal((2, 3, 300)).astype(np.float32)
    x = base[:, :, ::2]
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": t((2, 3, 150), "FLOAT32"),
                "OutputTensor": {**t((2, 3, 150), "FLOAT32"), "Strides": [1, 2, 6]},
                "Axes": [0, 2],
                "NormalizeVariance": True,
            },
        }
    )
    a, b = both_paths(desc, {"InputTensor": x})
    assert_bit_identical(a, b)
    out = {"OutputTensor": np.full((2, 3, 150), np.nan, np.float32)}
    with path("mirror"):
        execute(desc, {"InputTensor": x}, out=out)
    assert out["OutputTensor"].tobytes() == a["OutputTensor"].tobytes()


#: the activations the mirror evaluates as array operations (mirror._piecewise)
PIECEWISE = [1, 3, 6, 7, 8, 13, 14]
SPECIAL = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 1.7e308, -1.7e308]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(PIECEWISE),
    st.lists(
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(SPECIAL)), max_size=40
    ),
    st.one_of(st.floats(-1e3, 1e3), st.sampled_from(SPECIAL)),
    st.one_of(st.floats(-1e3, 1e3), st.sampled_from(SPECIAL)),
)
def test_array_activations_are_the_scalar_function_bit_for_bit(code, values, a, b):
    """The piecewise activations on whole arrays give what ``activate`` gives per element, the
    sign of a zero included: the mirror may take either without the verdict noticing."""
    x = np.array(values + SPECIAL, dtype=np.float64)
    got = mirror.activate_array(code, x, a, b)
    want = np.array(mirror._activate_all(code, x.tolist(), a, b), dtype=np.float64)
    assert_bit_identical({"y": got}, {"y": want})


def test_mirror_follows_the_kernels_constants():
    assert mirror.LANES == compiled.LANES and mirror.SHIFT_LIMIT == compiled.SHIFT_LIMIT


def test_activation_overflow_is_ieee_in_the_mirror():
    """Python's math raises where compiled code returns inf (CELU's expm1(x/Alpha) of a large x,
    a division by a zero parameter); the mirror must return what the kernel returns."""

    def desc_with(act):  # x - mean is exactly 0 (size-1 axis): the output is act(Bias)
        members = {
            "InputTensor": t((4, 1), "FLOAT32"),
            "ScaleTensor": t((4, 1), "FLOAT32"),
            "BiasTensor": t((4, 1), "FLOAT32"),
            "OutputTensor": t((4, 1), "FLOAT32"),
            "Axes": [1],
            "NormalizeVariance": False,
            "FusedActivation": act,
        }
        return parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": members})

    desc = desc_with({"Type": "ACTIVATION_CELU", "Alpha": 1e-3})
    inputs = {
        "InputTensor": np.zeros((4, 1), np.float32),
        "ScaleTensor": np.ones((4, 1), np.float32),
        "BiasTensor": np.array([[5.0], [-5.0], [0.0], [np.nan]], np.float32),
    }
    a, b = both_paths(desc, inputs)
    assert_bit_identical(a, b)
    assert b["OutputTensor"][0, 0] == 5.0 and b["OutputTensor"][1, 0] == np.float32(-1e-3)
    zero_steepness = desc_with({"Type": "ACTIVATION_SOFTPLUS", "Steepness": 0.0})
    a, b = both_paths(zero_steepness, inputs)  # softplus(0 * x) / 0 = ln(2) / 0: inf, no exception
    assert_bit_identical(a, b)
    assert np.isinf(b["OutputTensor"][0, 0]) and np.isnan(b["OutputTensor"][3, 0])


def _run_python(code: str, cache_dir: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["NUMBA_CACHE_DIR"] = str(cache_dir)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


SMALL_RUN = """
import json, sys
import numpy as np
import dmlconform as dc
t = lambda s: {"DataType": "FLOAT32", "Sizes": list(s)}
x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
mvn1 = dc.parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": {
    "InputTensor": t(x.shape), "OutputTensor": t(x.shape), "Axes": [2, 3], "NormalizeVariance": True}})
dc.execute(mvn1, {"InputTensor": x})
s = (1, 3, 1, 1)
bnt = dc.parse_desc({"type": "BATCH_NORMALIZATION_TRAINING", "desc": {
    "InputTensor": t(x.shape), "ScaleTensor": t(s), "BiasTensor": t(s), "OutputTensor": t(x.shape),
    "OutputMeanTensor": t(s), "OutputVarianceTensor": t(s), "Epsilon": 1e-5,
    "FusedActivation": {"Type": "ACTIVATION_GELU"}}})
dc.execute(bnt, {"InputTensor": x, "ScaleTensor": np.ones(s, np.float32), "BiasTensor": np.zeros(s, np.float32)})
print(json.dumps({"numba_imported": "numba" in sys.modules}))
"""


def test_small_cases_neither_import_nor_compile_numba(tmp_path):
    """The cold start of a conformance run: small descs run through the mirror, so nothing is
    compiled and nothing lands in an empty numba cache."""
    got = _run_python(SMALL_RUN, tmp_path)
    assert got == {"numba_imported": False}
    assert not any(tmp_path.rglob("*.nbi"))


@pytest.mark.slow
def test_a_large_case_compiles_only_its_own_signature(tmp_path):
    n = reference.MIRROR_MAX_ELEMENTS + 1
    assert n > reference.MIRROR_MAX_ELEMENTS and math.prod((1, n)) == n
    code = f"""
import json
import numpy as np
import dmlconform as dc
from dmlconform.reference import compiled
t = {{"DataType": "FLOAT32", "Sizes": [1, {n}]}}
d = dc.parse_desc({{"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": {{
    "InputTensor": t, "OutputTensor": t, "Axes": [1], "NormalizeVariance": True}}}})
dc.execute(d, {{"InputTensor": np.ones((1, {n}), np.float32)}})
print(json.dumps(sorted("-".join(k) for k in compiled._COMPILED)))
"""
    assert _run_python(code, tmp_path) == ["float32-float32"]
    assert len(list(tmp_path.rglob("compiled._normalize-*.nbc"))) == 1


def test_large_fresh_output_equals_out_and_the_mirror():
    """The kernel path in chunks on the thread pool: a fresh output holds exactly what the same
    run writes into a caller's array, and what the mirror computes."""
    shape = (4, 16, 128, 128)  # 4 MiB of FLOAT32: the kernel path
    assert math.prod(shape) > reference.MIRROR_MAX_ELEMENTS
    stat = (1, 16, 1, 1)
    desc = parse_desc(
        {
            "type": "BATCH_NORMALIZATION_TRAINING",
            "desc": {
                "InputTensor": t(shape, "FLOAT32"),
                "ScaleTensor": t(stat, "FLOAT32"),
                "BiasTensor": t(stat, "FLOAT32"),
                "OutputTensor": t(shape, "FLOAT32"),
                "OutputMeanTensor": t(stat, "FLOAT32"),
                "OutputVarianceTensor": t(stat, "FLOAT32"),
                "Epsilon": 1e-5,
            },
        }
    )
    rng = np.random.default_rng(5)
    inputs = {
        "InputTensor": rng.standard_normal(shape).astype(np.float32),
        "ScaleTensor": rng.standard_normal(stat).astype(np.float32),
        "BiasTensor": rng.standard_normal(stat).astype(np.float32),
    }
    fresh = execute(desc, inputs)
    out = {k: np.full_like(v, np.nan) for k, v in fresh.items()}
    execute(desc, inputs, out=out)
    for k in fresh:
        assert fresh[k].tobytes() == out[k].tobytes(), k
    with path("mirror"):
        assert_bit_identical(fresh, execute(desc, inputs))


@pytest.mark.parametrize("which", ["numba", "mirror"])
def test_in_place_output_over_the_input(which):
    """``out=`` may be the input array itself (normalizing in place): each slice's statistics
    are computed before its output is written, on both paths."""
    shape = (2, 8, 128, 130)  # above MIRROR_MAX_ELEMENTS: the kernel, in chunks
    desc = parse_desc(
        {
            "type": "MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": t(shape, "FLOAT32"),
                "OutputTensor": t(shape, "FLOAT32"),
                "Axes": [2, 3],
                "NormalizeVariance": True,
            },
        }
    )
    x = (3.0 + np.random.default_rng(8).standard_normal(shape)).astype(np.float32)
    with path(which):
        want = execute(desc, {"InputTensor": x.copy()})["OutputTensor"]
        buf = x.copy()
        got = execute(desc, {"InputTensor": buf}, out={"OutputTensor": buf})["OutputTensor"]
    assert got is buf
    assert got.tobytes() == want.tobytes()
