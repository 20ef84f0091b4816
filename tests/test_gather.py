"""Large tensors into the kernels' fast form (``dmlconform.reference.gather``): FLOAT16 widened by
table, short rows gathered into contiguous slices. Both are copies, so they are held to numpy's
own copies bit for bit; and a channel-last tensor, which they exist for, still gets the
reference's accuracy and the numpy model's budgets."""

from __future__ import annotations

import numpy as np
import pytest
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
    inputs = data.make_inputs(desc, "large_offset", seed=3)
    exact = reference.execute(desc, inputs, float64=True)
    calls = []
    real = gather.gather_rows
    monkeypatch.setattr(gather, "gather_rows", lambda *a: calls.append(a[-1]) or real(*a))
    with path("numba"):
        got = reference.execute(desc, inputs)
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
    inputs = data.make_inputs(desc, "large_offset", seed=4)
    kernel, model, _ = kernel_and_model(desc, inputs)
    assert_budgets_agree(kernel, model)
