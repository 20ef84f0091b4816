"""Large tensors into the kernels' fast form (``dmlconform.reference.gather``): FLOAT16 widened by
table, short rows gathered into contiguous slices, float64 results narrowed to FLOAT16. Each is
held to numpy's own copy or cast bit for bit; and a channel-last tensor, which they exist for, still gets the
reference's accuracy and the numpy model's budgets."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import SPEC
from helpers import reference_path as path
from hypothesis import given, settings
from hypothesis import strategies as st

import dmlconform as dc
from dmlconform import reference
from dmlconform.generation import data
from dmlconform.reference import _as_3d, _rows, gather


def test_every_float16_widens_to_numpys_float32_bits() -> None:
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    got = gather.widen_half(every)
    assert got.dtype == np.float32 and got.shape == every.shape
    assert np.array_equal(got.view(np.uint32), every.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("axes", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_widening_keeps_shape_values_and_layout_of_a_transposed_array(axes) -> None:
    h = np.random.default_rng(1).standard_normal((6, 7, 8)).astype(np.float16).transpose(axes)
    got = gather.widen_half(h)
    assert got.shape == h.shape
    assert np.array_equal(got, h.astype(np.float32))
    assert np.argsort(got.strides).tolist() == np.argsort(h.strides).tolist()


def _narrowing_cases() -> np.ndarray:
    """Doubles where a float16 rounding can go wrong: every float16, the midpoints between
    neighbours and the doubles either side of them (ties go to even), the overflow and
    subnormal boundaries, NaNs with random payloads of both signs, and random magnitudes over
    the whole range."""
    rng = np.random.default_rng(7)
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
    finite = np.unique(every[np.isfinite(every)])
    mid = (finite[1:] + finite[:-1]) / 2
    edges = [65504.0, np.nextafter(65520.0, 0.0), 65520.0, 65536.0, 1e300, np.inf, 0.0, 5e-324,
             2.0**-25, np.nextafter(2.0**-25, 1.0), 1.5 * 2.0**-24, 2.0**-14, np.nextafter(2.0**-14, 0.0)]  # fmt: skip
    nan_bits = rng.integers(0x7FF0000000000001, 0x7FFFFFFFFFFFFFFF, 512, dtype=np.uint64)
    nan_bits[:2] = 0x7FF0000000000001, 0x7FF0000000000400  # payloads below what float16 keeps
    parts = [every, mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf), np.array(edges),
             nan_bits.view(np.float64), rng.standard_normal(1 << 16) * 10.0 ** rng.uniform(-12, 6, 1 << 16)]  # fmt: skip
    x = np.concatenate(parts)
    return np.concatenate([x, -x])


def test_narrowing_rounds_every_hard_case_as_numpy_does() -> None:
    x = _narrowing_cases()
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(np.float16)
    got = gather.narrow_half(x)
    assert got.dtype == np.float16
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("layout", ["c", "transposed", "strided"])
@pytest.mark.parametrize("into", [None, "c", "fortran"])
def test_narrowing_keeps_shape_and_writes_into_a_given_array(layout, into) -> None:
    x = np.random.default_rng(2).standard_normal((16, 30, 7)) * 300.0
    src = {"c": x, "transposed": x.transpose(2, 0, 1), "strided": x[:, ::2]}[layout]
    out = {
        None: None,
        "c": np.empty(src.shape, np.float16),
        "fortran": np.empty(src.shape, np.float16, order="F"),
    }[into]
    got = gather.narrow_half(src, out)
    assert got.shape == src.shape
    assert np.array_equal(got.view(np.uint16), src.astype(np.float16).view(np.uint16))
    if out is not None:
        assert got is out


def test_the_reference_narrows_large_float16_outputs_as_numpy_does() -> None:
    """A FLOAT16 output past the compiled threshold, fresh and into a preallocated array: the
    float64 result rounded once, as ``astype`` rounds it."""
    n = 2 * reference.GATHER_MIN_ELEMENTS
    t = {"DataType": "FLOAT16", "Sizes": [2, n // 2]}
    desc = dc.parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": {
        "InputTensor": t, "OutputTensor": t, "Axes": [1], "NormalizeVariance": True,
        "FusedActivation": {"Type": "ACTIVATION_ELU", "Alpha": 0.5}}})  # fmt: skip
    inputs = data.make_inputs(desc, "large_offset", seed=3, spec=SPEC)
    wide = dc.execute(desc, inputs, float64=True)["OutputTensor"]
    want = wide.astype(np.float16).view(np.uint16)
    assert np.array_equal(dc.execute(desc, inputs)["OutputTensor"].view(np.uint16), want)
    out = {"OutputTensor": np.empty(t["Sizes"], np.float16)}
    assert np.array_equal(dc.execute(desc, inputs, out=out)["OutputTensor"].view(np.uint16), want)


@settings(max_examples=80, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=2, max_size=4), data=st.data())
def test_gathered_rows_are_the_slices_in_order(shape, data) -> None:
    """Any permutation of a tensor whose (K, M, L) rows the kernels could address in place,
    gathered, equals numpy's contiguous copy of the same slices."""
    perm = data.draw(st.permutations(range(len(shape))))
    n_kept = data.draw(st.integers(0, len(shape) - 1))
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    view = x.transpose(perm)
    v3 = _as_3d(view, n_kept)
    if v3 is None:
        return
    got = gather.gather_rows(*_rows(v3), v3.shape)
    want = np.ascontiguousarray(view).reshape(v3.shape[0], 1, -1)
    assert got.shape == want.shape
    assert np.array_equal(got, want)


def _bnt(shape: tuple[int, ...], stat: tuple[int, ...], dtype: str) -> dc.OperatorDesc:
    def t(sizes):
        return {"DataType": dtype, "Sizes": list(sizes)}

    return dc.parse_desc(
        {
            "type": "BATCH_NORMALIZATION_TRAINING",
            "desc": {
                "InputTensor": t(shape), "ScaleTensor": t(stat), "BiasTensor": t(stat),
                "OutputTensor": t(shape), "OutputMeanTensor": t(stat), "OutputVarianceTensor": t(stat),
                "Epsilon": 1e-3,
            },
        }
    )  # fmt: skip


@pytest.mark.parametrize("dtype", ["FLOAT32", "FLOAT16"])
def test_a_channel_last_tensor_is_gathered_and_keeps_the_references_accuracy(dtype, monkeypatch) -> None:
    """Channels innermost (rows of one element): the gathered kernel's outputs are the
    correctly rounded float64 ones within an ULP, as are the mirror's (which reads the rows
    as they are), and the two agree to float64 accuracy in the statistics."""
    shape, stat = (64, 32, 40, 16), (1, 1, 1, 16)
    assert np.prod(shape) > reference.GATHER_MIN_ELEMENTS
    desc = _bnt(shape, stat, dtype)
    inputs = data.make_inputs(desc, "large_offset", seed=3, spec=SPEC)
    exact = dc.execute(desc, inputs, float64=True)
    calls = []
    real = gather.gather_rows
    monkeypatch.setattr(gather, "gather_rows", lambda *a: calls.append(a[-1]) or real(*a))
    with path("numba"):
        got = dc.execute(desc, inputs)
    assert calls == [(16, 81920, 1)]  # the input's slices: rows of one element
    np_dtype = np.dtype(dtype.lower())
    for name, want in exact.items():
        g = got[name].astype(np.float64)
        ulp = np.spacing(np.abs(want).astype(np_dtype)).astype(np.float64)
        assert np.all(np.abs(g - want) <= ulp), name
    assert np.allclose(
        got["OutputMeanTensor"], exact["OutputMeanTensor"], rtol=1e-6 if dtype == "FLOAT32" else 1e-3
    )


@pytest.mark.parametrize("dtype", ["FLOAT32", "FLOAT16"])
def test_the_judge_on_a_channel_last_tensor_gives_the_models_budgets(dtype) -> None:
    from test_judge import assert_budgets_agree, kernel_and_model

    desc = _bnt((64, 32, 40, 16), (1, 1, 1, 16), dtype)
    inputs = data.make_inputs(desc, "large_offset", seed=4, spec=SPEC)
    kernel, model, _ = kernel_and_model(desc, inputs)
    assert_budgets_agree(kernel, model)
