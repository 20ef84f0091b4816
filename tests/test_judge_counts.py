"""The compiled judge's distinct counts (:mod:`dmlconform.tolerance.distinct_compiled`) and the
slices it leaves uncounted.

- The count equals the numpy model's (sort, count the changes: NaN and inf each distinct,
  -0 == +0) on data of a few values spread over a wide range of keys, the kind the
  few-values check takes, and on data where it must give up (more values than it keeps, or a
  new value only after its sample), on one slice and on a long one cut into parts.
- A slice whose sums are exact in any order is not counted where the model holds it to its
  division (``exact_replaces_growth``): the budgets, the verdict's figures and the statistics
  outputs' budgets are the same bits as with every slice counted, under every model.
- The statistics outputs read full counts where their own coefficients need them.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import centred_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlconform as dc
from dmlconform.kernels import normalization
from dmlconform.tolerance import distinct_compiled as dk
from dmlconform.tolerance import judge
from dmlconform.tolerance import judge_compiled as jk
from dmlconform.tolerance import long_slices as ls
from dmlconform.tolerance.options import NO_OPTIONS, ToleranceOptions

SPEC = dc.load_spec()
LIMIT = 2.0**24
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]


def numpy_distinct(values: np.ndarray) -> int:
    """:func:`dmlconform.tolerance.repetition`'s count: the sorted values' changes."""
    v = np.sort(values.ravel())
    with np.errstate(invalid="ignore"):
        return 1 + int(np.count_nonzero(np.diff(v)))


@st.composite
def few_valued(draw: st.DrawFn, n: int) -> np.ndarray:
    """``n`` float32 values drawn from a pool of 1 to FEW + 3 values far apart (keys spanning
    far more than a bitmap), the first FEW_SAMPLE of them from a part of the pool only where
    ``late``, non-finite values and zeros of both signs sometimes among them."""
    size = draw(st.integers(1, dk.FEW + 3))
    exponents = draw(st.lists(st.integers(-140, 120), min_size=size, max_size=size))
    signs = draw(st.lists(st.sampled_from([1.0, -1.0]), min_size=size, max_size=size))
    pool = np.array([s * 2.0**e * 1.25 for s, e in zip(signs, exponents, strict=True)], np.float32)
    extra = draw(st.sampled_from(["none", "none", "zeros", "nan", "inf"]))
    if extra == "zeros":
        pool = np.concatenate([pool, np.float32([0.0, -0.0])])
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = pool[rng.integers(0, pool.size, n)]
    if draw(st.booleans()):  # the sample sees one value; the others come later
        x[: min(n, dk.FEW_SAMPLE)] = pool[0]
        x[rng.integers(dk.FEW_SAMPLE, max(n, dk.FEW_SAMPLE + 1), 3) % n] = pool[-1]
    if extra in ("nan", "inf"):
        x[rng.integers(0, n, 5)] = np.nan if extra == "nan" else np.float32(np.inf) * pool[0]
    return x


def one_thread_count(x: np.ndarray) -> float:
    """The per-slice kernel's count of one slice."""
    out = [np.empty(1) for _ in range(5)]
    jk.slice_statistics(x, x.view(np.int32), x.size, x.size, 0, 1, 1, x.size, False, False, LIMIT, True, *out)
    return float(out[3][0])


@settings(max_examples=150, deadline=None, suppress_health_check=HEALTH)
@given(st.integers(dk.SMALL_SORT + 1, 3 * dk.FEW_SAMPLE).flatmap(few_valued))
def test_the_per_slice_count_of_few_values_is_numpys(x: np.ndarray) -> None:
    assert one_thread_count(x) == numpy_distinct(x)


@settings(max_examples=12, deadline=None, suppress_health_check=HEALTH)
@given(few_valued(ls.LONG_SLICE + 1000), st.sampled_from([1, 2]))
def test_a_long_slices_count_of_few_values_is_numpys(x: np.ndarray, threads: int) -> None:
    from dmlconform.reference import compiled as rk

    rows = (x, x.size, x.size, (1, 1, x.size))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rk, "THREADS", threads)
        with np.errstate(invalid="ignore", over="ignore"):
            mean, var = float(np.mean(x, dtype=np.float64)), float(np.var(x, dtype=np.float64))
        assert ls.long_slice_statistics(rows, False, 0, mean, var, LIMIT)[1] == numpy_distinct(x)


def test_few_distinct_gives_up_past_its_values_and_after_its_sample() -> None:
    """-1 (the counting sort then counts) for FEW + 1 values, and for a value first seen after
    the sample; the count itself for FEW."""
    pool = np.float32([2.0**e for e in range(-60, 60, 12)])  # 10 values, keys far apart
    keys = np.empty(4 * dk.FEW_SAMPLE, np.uint32)

    def distinct(x: np.ndarray) -> int:
        bits = x.view(np.int32).astype(np.int64)
        keys[:] = np.where(bits < 0, -(2**31) - bits, bits) + 2**31
        return int(dk.few_distinct(keys, 0, keys.size, int(keys.min()), int(keys.max())))

    x = np.resize(pool[: dk.FEW], keys.size)
    assert distinct(x) == dk.FEW
    assert distinct(np.resize(pool[: dk.FEW + 1], keys.size)) == -1
    x[-1] = pool[dk.FEW]
    assert distinct(x) == -1


def judged(desc, inputs, options: ToleranceOptions, count_all: bool):  # type: ignore[no-untyped-def]
    """(budgets, the main output's comparison, the statistics outputs' budgets, the model's
    per-slice terms) of the compiled judge, every slice counted where ``count_all``."""
    ref = dc.execute(desc, inputs)
    jp = judge.CompiledCase(normalization.build_plan(desc, SPEC), judge._centred_terms)
    main = ref[jp.output]
    budgets = np.empty(main.shape)
    with pytest.MonkeyPatch.context() as mp:
        if count_all:
            counted = judge.slice_statistics
            mp.setattr(judge, "slice_statistics", lambda *a, **k: counted(*a, **{**k, "count_exact": True}))
        out, model = judge.judge_normalization(
            desc, main, main, inputs, SPEC, options, budget_out=budgets, plan=jp
        )
    stats = model.output_budgets(desc, ref, SPEC, options)[0]
    return budgets, out, stats, model


OPTIONS = [NO_OPTIONS, *(ToleranceOptions.parse({"model": m}) for m in ("tight", "lenient", "sequential"))]


@settings(max_examples=40, deadline=None, suppress_health_check=HEALTH)
@given(
    st.sampled_from(["MVN1", "BNT"]),
    st.sampled_from([64, 1000, 4096]),
    st.sampled_from(["FLOAT32", "FLOAT16"]),
    st.sampled_from(["exact_statistics", "exact_statistics", "standard_normal"]),
    st.integers(0, 1000),
    st.sampled_from(OPTIONS),
)
def test_uncounted_exact_slices_give_the_same_bits(name, n, dtype, regime, seed, options) -> None:
    desc, inputs = centred_case(name, n, dtype, regime, seed)
    want = judged(desc, inputs, options, count_all=True)
    got = judged(desc, inputs, options, count_all=False)
    assert got[0].tobytes() == want[0].tobytes()
    assert repr(got[1]) == repr(want[1])
    assert got[2].keys() == want[2].keys()
    for member, budgets in want[2].items():
        assert np.asarray(got[2][member]).tobytes() == np.asarray(budgets).tobytes()


def test_exact_slices_go_uncounted_where_the_model_holds_them_exact() -> None:
    """The case above skips counts: the default model leaves every exact slice's repetition
    NaN, the lenient one (no exact-slice terms) counts them."""
    desc, inputs = centred_case("BNT", 4096, "FLOAT32", "exact_statistics", 1)
    model = judged(desc, inputs, NO_OPTIONS, count_all=False)[3]
    assert model.ss.exact.all() and np.isnan(model.ss.repetition).all()
    lenient = judged(desc, inputs, ToleranceOptions.parse({"model": "lenient"}), count_all=False)[3]
    assert np.isfinite(lenient.ss.repetition).all() and lenient.recount is None


def test_the_statistics_outputs_count_where_their_coefficients_read_the_repetition() -> None:
    """Per-slice terms made under the default model (exact slices uncounted) asked for the
    statistics outputs' budgets under the lenient model with a ceiling, whose floor reads every
    repetition: they recount, and give the full counts' budgets; under the default model they
    do not recount."""
    desc, inputs = centred_case("BNT", 4096, "FLOAT32", "exact_statistics", 2)
    ref = dc.execute(desc, inputs)
    model = judged(desc, inputs, NO_OPTIONS, count_all=False)[3]
    calls = []

    def recount():  # type: ignore[no-untyped-def]
        calls.append(1)
        return model.recount()

    counting = judge.ModelTerms(model.plan, model.ss, model.st, model.u, recount)
    counting.output_budgets(desc, ref, SPEC, NO_OPTIONS)
    assert not calls
    lenient = ToleranceOptions.parse({"model": "lenient", "ceiling": 2.0**-10})
    got = counting.output_budgets(desc, ref, SPEC, lenient)[0]
    assert calls == [1]
    full = judge.ModelTerms(model.plan, model.recount(), model.st, model.u)
    assert np.isfinite(full.ss.repetition).all()
    want = full.output_budgets(desc, ref, SPEC, lenient)[0]
    assert got.keys() == want.keys() and len(want) == 2
    for member in want:
        assert got[member].tobytes() == want[member].tobytes()


@st.composite
def narrow_long_slice(draw: st.DrawFn) -> np.ndarray:
    """A long slice of values spanning a narrow range of keys (the first pass's window marks
    them), sometimes with NaN or inf (never marked), a few far outliers or a skew that leaves
    keys outside the window around the mean (the keys are then written and counted apart)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = ls.LONG_SLICE + draw(st.integers(0, 5000))
    centre = draw(st.sampled_from([1000.0, -3.0, 1.0e-30, 0.0]))
    levels = draw(st.sampled_from([7, 1000, 1 << 16]))
    x = (centre + rng.integers(0, levels, n) * draw(st.sampled_from([2.0**-20, 2.0**-12, 1.0]))).astype(
        np.float32
    )
    change = draw(st.sampled_from(["none", "nan", "inf", "outliers", "skew", "all nan"]))
    if change == "nan":
        x[rng.integers(0, n, 7)] = np.nan
    elif change == "inf":
        x[rng.integers(0, n, 7)] = np.inf * np.sign(rng.standard_normal(7)).astype(np.float32)
    elif change == "outliers":
        x[rng.integers(0, n, 3)] = np.float32(1e20)
    elif change == "skew":  # most values at one end: the mean's window misses the other end
        x[: n - 100] = x[0]
        x[n - 100 :] = np.nextafter(x[0], np.float32(np.inf)) * np.float32(1 + 2.0**-10)
    elif change == "all nan":
        x[:] = np.nan
    return x


@settings(max_examples=20, deadline=None, suppress_health_check=HEALTH)
@given(narrow_long_slice(), st.sampled_from([1, 2]), st.booleans())
def test_a_long_slices_count_is_numpys_in_and_out_of_its_window(
    x: np.ndarray, threads: int, half: bool
) -> None:
    from dmlconform.reference import compiled as rk

    if half:
        with np.errstate(over="ignore"):
            x = x.astype(np.float16).astype(np.float32)
    rows = (x, x.size, x.size, (1, 1, x.size))
    with pytest.MonkeyPatch.context() as mp, np.errstate(invalid="ignore", over="ignore"):
        mp.setattr(rk, "THREADS", threads)
        mean, var = float(np.mean(x, dtype=np.float64)), float(np.var(x, dtype=np.float64))
        got = ls.long_slice_statistics(rows, half, 0, mean, var, LIMIT)[1]
    assert got == numpy_distinct(x.astype(np.float16) if half else x)
