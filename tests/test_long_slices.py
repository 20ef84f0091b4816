"""A long slice's spread and distinct count on every thread (``dmlconform.tolerance.long_slices``),
held to numpy: the count to the numpy model's own (sort, count the changes: NaN and inf each
distinct, -0 == +0), the spread to float64 numpy within 1e-12; both the same on one thread as
on two, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from dmlconform.reference import compiled as rk
from dmlconform.tolerance import distinct_compiled as dk
from dmlconform.tolerance import judge_compiled as jk
from dmlconform.tolerance import long_slices as ls

N = ls.LONG_SLICE + 12_345  # several parts, the last one short
LIMIT = 2.0**24  # float32's exact integers: the exactness test's


def numpy_distinct(values: np.ndarray) -> int:
    """:func:`dmlconform.tolerance.repetition`'s count: the sorted values' changes."""
    v = np.sort(values.ravel())
    with np.errstate(invalid="ignore"):
        return 1 + int(np.count_nonzero(np.diff(v)))


def numpy_spread(values: np.ndarray) -> tuple[float, float, float]:
    """(mean, variance, spread of the squared deviations) in float64."""
    x = values.astype(np.float64).ravel()
    with np.errstate(invalid="ignore", over="ignore"):
        mean = x.mean()
        var = ((x - mean) ** 2).mean()
        return float(mean), float(var), float(np.sqrt((((x - mean) ** 2 - var) ** 2).mean()))


def slices(kind: str) -> np.ndarray:
    """One slice of ``N`` values of a kind that takes one path of the count."""
    rng = np.random.default_rng(7)
    if kind == "offset":  # keys spanning few values: one bitmap per thread
        return (1000.0 + rng.standard_normal(N)).astype(np.float32)
    if kind == "normal":  # keys spanning 2^31 values: buckets
        return rng.standard_normal(N).astype(np.float32)
    if kind == "dense-bucket":  # one bucket holding most keys (cleared whole), and far outliers
        x = rng.uniform(1.0, 1.25, N).astype(np.float32)
        x[::1000] = rng.uniform(1e6, 1e7, x[::1000].size)
        return x
    if kind == "few-valued":  # every value repeated, zeros of both signs
        x = rng.integers(-3, 4, N).astype(np.float32)
        x[x == 0] = np.where(rng.random(int((x == 0).sum())) < 0.5, -0.0, 0.0)
        return x
    if kind == "non-finite":  # NaN and inf of both signs among wide data: each distinct
        x = rng.standard_normal(N).astype(np.float32) * 1e30
        x[::997] = np.nan
        x[5::1999] = np.inf
        x[7::2999] = -np.inf
        return x
    if kind == "half":  # FLOAT16 values, their own ordinals
        return rng.standard_normal(N).astype(np.float16).astype(np.float32)
    if kind == "sparse-aligned":  # 1000 sparse buckets, each key at the same place in its bucket
        bits = 0x00800000 + (np.arange(N) % 1000).astype(np.int64) * (1 << dk.BUCKET_BITS)
        return bits.astype(np.int32).view(np.float32)
    raise AssertionError(kind)


def figures(x: np.ndarray, shape: tuple[int, int, int], half: bool, k: int = 0) -> tuple[float, float]:
    """(spread, distinct count) of slice k."""
    rows = (x.ravel(), shape[1] * shape[2], shape[2], shape)
    mean, var, _ = numpy_spread(x.reshape(shape)[k])
    return ls.long_slice_statistics(rows, half, k, mean, var, LIMIT)[:2]


KINDS = ["offset", "normal", "dense-bucket", "sparse-aligned", "few-valued", "non-finite", "half"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_count_and_the_spread_equal_numpys(kind: str) -> None:
    x = slices(kind)
    sqstd, distinct = figures(x, (1, 1, x.size), kind == "half")
    assert distinct == numpy_distinct(x.astype(np.float16) if kind == "half" else x)
    want = numpy_spread(x)[2]
    if np.isfinite(want):
        assert sqstd == pytest.approx(want, rel=1e-12)
    else:
        assert np.isnan(sqstd) or sqstd == want


def test_parts_that_cross_rows_of_a_later_slice_are_read_where_they_lie() -> None:
    """(K, M, L) = (2, 5, 2^17 + 3): parts start mid-row; slice 1 starts at K's stride."""
    rng = np.random.default_rng(3)
    shape = (2, 5, (1 << 17) + 3)
    x = rng.standard_normal(shape).astype(np.float32)
    x[1] += 50.0
    for k in range(2):
        sqstd, distinct = figures(x, shape, False, k)
        assert distinct == numpy_distinct(x[k])
        assert sqstd == pytest.approx(numpy_spread(x[k])[2], rel=1e-12)


def test_an_all_nan_slice_counts_each_nan() -> None:
    x = np.full(N, np.nan, np.float32)
    assert figures(x, (1, 1, N), False)[1] == N


@pytest.mark.parametrize("kind", ["offset", "normal"])
def test_one_thread_and_two_give_the_same_bits(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    x = slices(kind)
    two = figures(x, (1, 1, x.size), False)
    monkeypatch.setattr(rk, "THREADS", 1)
    one = figures(x, (1, 1, x.size), False)
    assert np.float64(one[0]).tobytes() == np.float64(two[0]).tobytes() and one[1] == two[1]


@pytest.mark.parametrize("kind", ["dense-bucket", "sparse-aligned"])
def test_the_one_thread_kernel_counts_dense_and_sparse_buckets(kind: str) -> None:
    """The per-slice kernel (slices shorter than LONG_SLICE) clears a bucket of more keys than
    its bitmap has words whole, a sparser one key by key before the next bucket (whose keys
    here fall on the same bits): the count still equals numpy's."""
    x = slices(kind)[: ls.LONG_SLICE - 1]
    out = [np.empty(1) for _ in range(5)]
    jk.slice_statistics(x, x.view(np.int32), x.size, x.size, 0, 1, 1, x.size, False, False, LIMIT, True, *out)
    assert out[3][0] == numpy_distinct(x)
