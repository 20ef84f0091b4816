"""The compiled judge decides a slice's exactness in its statistics pass
(:func:`dmlconform.tolerance.exact_compiled.exact_from_sums`, fed by
:func:`dmlconform.tolerance.judge_compiled.slice_statistics` and, for long slices, by
:mod:`dmlconform.tolerance.long_slices` on every thread), and its on-grid slices without float64
tensors (:mod:`dmlconform.tolerance.grid_compiled`). Both are held here to the separate
functions they replace: :func:`dmlconform.tolerance.exact.exact_slices` (its numpy loop and its
compiled three-walk loop, ``exact_rows``) and :func:`dmlconform.tolerance.normalization.grid_slices`.

The drawn slices sit on both sides of each of the test's conditions: values on a lattice 2^q
whose sum of |x| / 2^q is drawn around float32's 2^24 exact integers, a mean put on the lattice
or a little off it (n / gcd(sum, n) a power of two or not), squared deviations drawn around the
same bound, values one bit finer than the rest, zeros of both signs, subnormals, NaN and inf;
as many short slices (one thread per slice), slices split into rows, and long slices cut into
parts on one thread or several.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import centred_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlconform as dc
from dmlconform import tolerance as tl
from dmlconform.reference import compiled as rk
from dmlconform.specification.slices import to_slices
from dmlconform.tolerance import judge, long_slices
from dmlconform.tolerance.exact import _exact_rows_numpy, exact_slices
from dmlconform.tolerance.exact_compiled import NO_LOW, exact_rows, low_bit_exponent
from dmlconform.tolerance.grid_compiled import _to_half, grid_slices
from dmlconform.tolerance.terms import UNIT_ROUNDOFF, ulp_of

SPEC = dc.load_spec()
LIMIT = 1.0 / UNIT_ROUNDOFF["FLOAT32"]  # 2^24
HEALTH = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=HEALTH)


@st.composite
def lattice_slice(draw: st.DrawFn, n: int | None = None) -> np.ndarray:
    """One float32 slice near the edges of the exactness test (the module docstring)."""
    n = (
        n
        if n is not None
        else draw(st.one_of(st.integers(1, 9), st.sampled_from([16, 48, 64, 96, 100, 256])))
    )
    q = draw(st.integers(-149, 90))
    # the mean's size and the deviations' sized so that sum |x| / 2^q and the squared
    # deviations land around 2^24
    near = st.sampled_from([0.0, 0.1, 0.999, 1.0, 1.001, 1.5])  # the bounds themselves, often
    centre = round(draw(st.one_of(near, st.floats(0.0, 1.6))) * LIMIT / n) * draw(st.sampled_from([1, -1]))
    spread = max(1, round(draw(st.one_of(near, st.floats(0.0, 2.5))) * math.sqrt(LIMIT / n)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = centre + rng.integers(-spread, spread + 1, n)
    mean_fix = draw(st.sampled_from(["integer", "integer", "off", "as drawn"]))
    if mean_fix != "as drawn":  # the sum a multiple of n (an integer mean), or one more
        k[-1] -= int(k.sum()) % n
        k[-1] += mean_fix == "off"
    k = np.clip(k, -(2**24), 2**24)
    x = (k.astype(np.float64) * 2.0**q).astype(np.float32)
    special = draw(st.sampled_from(["none"] * 4 + ["finer", "zeros", "negative zero", "nan", "inf", "huge"]))
    at = draw(st.integers(0, n - 1))
    if special == "finer":  # one value a bit below the lattice
        x[at] = np.float32(float(x[at]) + 2.0 ** (q - 1)) if q > -149 else x[at]
    elif special == "zeros":
        x[: at + 1] = 0.0
    elif special == "negative zero":
        x[:] = -0.0
        x[at] = draw(st.sampled_from([0.0, -0.0, 2.0**q]))
    elif special in ("nan", "inf"):
        x[at] = np.nan if special == "nan" else -np.inf
    elif special == "huge":
        x[at] = np.float32(3.0e38)
    return x


def separate(rows: np.ndarray) -> np.ndarray:
    """The separate test's verdicts per row: the numpy loop and the compiled walk, which must
    agree with each other first."""
    rows64 = rows.astype(np.float64)
    numpy_loop = _exact_rows_numpy(rows64, LIMIT)
    assert np.array_equal(numpy_loop, exact_rows(rows64, LIMIT))
    return numpy_loop


def fused(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """The statistics pass's verdicts, slice by slice (to_slices order)."""
    ss = judge.slice_statistics(judge.Slicing(x.shape, axes), x)[0]
    return ss.exact


def test_the_low_bit_of_every_kind_of_float32() -> None:
    values = np.array([1.0, -1.0, 3.0, 0.75, 2.0**-149, 3 * 2.0**-149, 2.0**-126, 1.5 * 2.0**-126, 2.0**127,
                       float(np.finfo(np.float32).max), 1e-3, 0.0, -0.0], np.float32)  # fmt: skip
    want = [0, 0, 0, -2, -149, -149, -126, -127, 127, 104, None, None, None]
    for v, w in zip(values, want, strict=True):
        got = low_bit_exponent(np.int32(v.view(np.int32)))
        if w is None and v != 0:
            m, e = math.frexp(float(v))
            mant = int(m * 2**53)
            w = e - 53 + (mant & -mant).bit_length() - 1
        assert got == (NO_LOW if v == 0 else w), v


KNOWN = [
    ([1.0, 2.0, 3.0, 2.0], True),  # sum 8, mean 2
    ([1.0, 1.0, 2.0, 2.0**-23], False),  # on the lattice 2^-23, sum |x| past 2^24 of its steps
    ([1.0, 1.0, 2.0, 2.0**-21], False),  # within them, but the squared deviations are not
    ([1.0, 1.0, 1.0, 2.0], True),  # mean 5/4: on the lattice 1/4
    ([1.0, 1.0, 1.0, 1.0, 1.0, 0.0], False),  # mean 5/6: on no binary lattice
    ([1181.0, 0.0, 0.0, 0.0], True),  # squared deviations on the lattice 1/4: 12 * 1181^2 < 2^24
    ([1183.0, 0.0, 0.0, 0.0], False),  # 12 * 1183^2 > 2^24
    ([0.0, -0.0, 0.0], True),  # all zeros
    ([1.0, np.nan, 1.0], False),
    ([1.0, -np.inf, 1.0], False),
    ([2.0**-149, 3 * 2.0**-149], True),  # subnormals
    ([2.0**100, -(2.0**100)], True),
    ([16777215.0, 16777215.0], False),  # mean and deviations exact, but not the sum
    ([4095.0, 4097.0] * 2048, True),  # sum |x| exactly 2^24 steps of the lattice 1
    ([4097.0, 4097.0] + [4095.0, 4097.0] * 2047, False),  # two steps more
    ([2047.0, -2047.0] * 2 + [89.0, -89.0, 13.0, -13.0, 10.0, -10.0], True),  # squares exactly 2^24
    ([2047.0, -2047.0] * 2 + [89.0, -89.0, 13.0, -13.0, 11.0, -11.0], False),  # 42 more
]


@pytest.mark.parametrize(("row", "want"), KNOWN)
def test_known_slices_either_side_of_each_condition(row: list[float], want: bool) -> None:
    x = np.array([row], np.float32)
    assert separate(x).tolist() == [want]
    assert fused(x, (1,)).tolist() == [want]


@SETTINGS
@given(st.lists(lattice_slice(n=64), min_size=1, max_size=6))
def test_many_short_slices_decide_as_the_separate_test(rows: list[np.ndarray]) -> None:
    x = np.stack(rows)
    assert np.array_equal(fused(x, (1,)), separate(x))


@SETTINGS
@given(lattice_slice(), st.integers(1, 4))
def test_any_slice_length_decides_as_the_separate_test(row: np.ndarray, k: int) -> None:
    with np.errstate(over="ignore"):  # a doubled row may reach inf: a slice the test must decide too
        x = np.stack([row, row[::-1], -row, row * np.float32(2.0)][:k])
    assert np.array_equal(fused(x, (1,)), separate(x))


@SETTINGS
@given(lattice_slice(n=48), st.sampled_from([(3, 16), (4, 12), (48, 1)]))
def test_slices_split_into_rows_decide_as_the_separate_test(row: np.ndarray, split: tuple[int, int]) -> None:
    """Slices over two axes, the first kept axis between them: the kernel reads each slice as
    several rows."""
    x = np.stack([row, -row]).reshape(2, *split)
    x = np.ascontiguousarray(np.moveaxis(x, 0, 1))  # (M, K, L): the kept axis in the middle
    assert np.array_equal(fused(x, (0, 2)), separate(to_slices(x, (0, 2))))


def tiled(row: np.ndarray, length: int, rng: np.random.Generator, changes: int, finer: str) -> np.ndarray:
    """``row`` repeated to ``length`` values, ``changes`` of them set to other values of the row
    (parts of a long slice then differ); ``finer``: one value in the second half set to 2^-149,
    float32's finest lattice, which the first parts do not see ("one"), or two set to 2^-149 and
    -2^-149 (their sum, and their squares beside the others', leave the float64 sums as they
    were: only the lowest bits tell)."""
    x = np.resize(row, length)
    at = rng.integers(0, length, changes)
    x[at] = row[rng.integers(0, row.size, changes)]
    if finer != "none":
        x[rng.integers(length // 2, length)] = 2.0**-149
    if finer == "pair":
        x[rng.integers(length // 2, length)] = -(2.0**-149)
    return x


@settings(max_examples=25, deadline=None, suppress_health_check=HEALTH)
@given(
    row=lattice_slice(),
    seed=st.integers(0, 2**32 - 1),
    k=st.sampled_from([1, 2, 3]),
    threads=st.sampled_from([1, 2, 3]),
    finer=st.sampled_from(["none", "one", "pair"]),
)
def test_long_slices_on_every_thread_decide_as_the_separate_test(
    row: np.ndarray, seed: int, k: int, threads: int, finer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slices long enough to be cut into parts (``long_slices``), on one thread or several: the
    parts' figures combined decide as the whole slice's."""
    rng = np.random.default_rng(seed)
    length = long_slices.LONG_SLICE + int(rng.integers(0, long_slices.PART))
    x = np.stack([tiled(row, length, rng, 3, finer) for _ in range(k)])
    assert long_slices.is_long(x.reshape(k, 1, length).shape)
    monkeypatch.setattr(rk, "THREADS", threads)
    assert np.array_equal(fused(x, (1,)), separate(x))


@settings(max_examples=15, deadline=None, suppress_health_check=HEALTH)
@given(
    row=lattice_slice(),
    seed=st.integers(0, 2**32 - 1),
    threads=st.sampled_from([1, 2, 3]),
    finer=st.sampled_from(["none", "one", "pair"]),
)
def test_medium_slices_on_the_pool_decide_as_the_separate_test(
    row: np.ndarray, seed: int, threads: int, finer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five slices of 2^16 and more: the one-slice kernel on the pool's threads, chunks of slices."""
    rng = np.random.default_rng(seed)
    length = (1 << 16) + int(rng.integers(0, 1000))
    x = np.stack([tiled(row, length, rng, 2, finer) for _ in range(5)])
    monkeypatch.setattr(rk, "THREADS", threads)
    assert np.array_equal(fused(x, (1,)), separate(x))


def test_a_long_exact_slice_and_one_bit_finer() -> None:
    """2^19 + 6 values +-2^-3 (mean 0, squared deviations n steps of the lattice: exact), then
    one of them, in the last part, 2^-30: the lattice 2^27 times finer, the sum's span past 2^24
    of its steps."""
    n = long_slices.LONG_SLICE + 6
    x = np.full((1, n), 0.125, np.float32)
    x[0, 1::2] = -0.125
    assert separate(x)[0] and fused(x, (1,))[0]
    x[0, -1] = 2.0**-30
    assert not separate(x)[0] and not fused(x, (1,))[0]


def test_float16_rounding_is_numpys() -> None:
    """Ties to even, subnormals, the overflow edge, NaN and the signs of zero."""
    rng = np.random.default_rng(1)
    halves = rng.integers(0, 0x7C00, 20000).astype(np.uint16).view(np.float16).astype(np.float64)
    nexts = np.nextafter(halves.astype(np.float16), np.float16(np.inf)).astype(np.float64)
    ties = (halves + nexts) / 2  # exactly between two float16 numbers
    values = np.concatenate([
        halves, ties, np.nextafter(ties, 0), np.nextafter(ties, np.inf), rng.standard_normal(5000) * 1e3,
        [65504.0, 65519.99, 65520.0, 1e300, 2.0**-25, 2.0**-25 * 1.0000001, 0.0, np.inf, np.nan, 2.0**-26],
    ])  # fmt: skip
    values = np.concatenate([values, -values])
    with np.errstate(over="ignore"):  # 1e300 and the values past 65520 are inf in float16
        want = values.astype(np.float16).astype(np.float64)
    got = np.array([_to_half(v) for v in values])
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_the_spacing_of_the_grid_is_ulp_ofs() -> None:
    from dmlconform.tolerance.float_bits import spacing

    rng = np.random.default_rng(2)
    for dtype, half in ((np.float16, True), (np.float32, False)):
        bits = rng.integers(0, 0x7C00 if half else 0x7F800000, 20000)
        v = bits.astype(np.uint16 if half else np.uint32).view(dtype).astype(np.float64)
        v = np.concatenate([v, [0.0, float(np.finfo(dtype).max)]])  # inf: never asked (_on_grid)
        assert np.array_equal([spacing(a, half) for a in v], ulp_of(v, dtype))


@settings(max_examples=30, deadline=None, suppress_health_check=HEALTH)
@given(
    st.sampled_from(["MVN1", "BNT"]),
    st.sampled_from([6, 64, 1000, 4096]),
    st.sampled_from(["FLOAT32", "FLOAT16"]),
    st.sampled_from(["exact_statistics", "exact_statistics", "large_offset"]),
    st.integers(0, 1000),
    st.sampled_from(["none", "one off the grid", "scaled"]),
)
def test_on_grid_slices_are_the_numpy_models(name, n, dtype, regime, seed, change) -> None:
    desc, inputs = centred_case(name, n, dtype, regime, seed)
    plan = dc.plan(desc, SPEC)
    x = inputs[plan.input]
    if change == "one off the grid":  # one value a quarter of its lattice step off
        x = x.copy()
        flat = x.reshape(-1)
        flat[seed % flat.size] += flat.dtype.type(abs(float(flat[seed % flat.size])) * 2.0**-9)
    elif change == "scaled":
        x = x * x.dtype.type(3.0)
    inputs = {**inputs, plan.input: x}
    ss, rows, perm = judge.slice_statistics(plan, x)
    for out in (np.dtype(np.float32), np.dtype(np.float16)):
        want = tl.grid_slices(plan, inputs, ss, out)
        got = grid_slices(plan, inputs, ss.exact, rows, perm, out)
        assert (got is None) == (want is None)
        if want is not None:
            assert np.array_equal(got, want), (got, want)


def test_exact_data_has_on_grid_slices_and_others() -> None:
    """The drawn cases above reach both verdicts: exact data's slices are on the grid for some
    outputs and not for others."""
    seen = set()
    for seed in range(6):
        desc, inputs = centred_case("BNT", 64, "FLOAT32", "exact_statistics", seed)
        plan = dc.plan(desc, SPEC)
        ss, rows, perm = judge.slice_statistics(plan, inputs[plan.input])
        got = grid_slices(plan, inputs, ss.exact, rows, perm, np.dtype(np.float32))
        seen |= set(got.tolist())
    assert seen == {True, False}


def test_the_separate_test_is_still_what_the_numpy_model_reads() -> None:
    """exact_slices (the numpy model's, small cases) and the judge's pass agree on drawn data of
    the exact-statistics regime."""
    desc, inputs = centred_case("MVN1", 4096, "FLOAT32", "exact_statistics", 3)
    plan = dc.plan(desc, SPEC)
    x = inputs[plan.input]
    want = exact_slices(to_slices(np.asarray(x), plan.axes), UNIT_ROUNDOFF["FLOAT32"])
    assert want.all() and np.array_equal(fused(x, plan.axes), want)
