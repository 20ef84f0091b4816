"""The repetition term is continuous at r = 1 (tolerance.terms.repeated_growth).

Continuous float32 data repeat a few values by chance (standard normal: 25 of 65536 values
at 2^16, 7501 of 2^20); those repeats add no correlated rounding, yet the full repetition term,
switched on by any r > 1, held such a slice's mean ten to thirty times looser than the same
data without them: a mean shifted by 100 u sd passed MVN1 at 2^16 (ratio 0.97) and one of 200
u sd at 2^20 (0.53), where data with every value distinct fail 20 u. Now chance repeats are
judged as distinct data are, sound summation orders still pass them, and data that repeat
every value (r >= 2: a broadcast input, few levels) keep the full term."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import judged_output

import dmlconform as dc
from dmlconform.backends.gpu_style import GpuStyleBackend
from dmlconform.runner.judging import reference_outputs

SPEC = dc.load_spec()
U = 2.0**-24


def _mvn1(n: int, normalize_variance: bool = False) -> dc.OperatorDesc:
    t = {"DataType": "FLOAT32", "Sizes": [1, n]}
    return dc.parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": {
        "InputTensor": t, "OutputTensor": t, "Axes": [1], "NormalizeVariance": normalize_variance}})  # fmt: skip


def _chance_repeats(n: int, seed: int = 1) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((1, n)).astype(np.float32)
    assert 1.0 < n / np.unique(x).size < 1.05  # a few values twice, by chance
    return x


def _passes(desc: dc.OperatorDesc, x: np.ndarray, got: np.ndarray, model: str = "default") -> bool:
    return judged_output(desc, {"InputTensor": x}, got, {"model": model}).passed


@pytest.mark.parametrize("n", [2**16, 2**20])
def test_a_shifted_mean_fails_on_data_with_chance_repeats(n: int) -> None:
    desc, x = _mvn1(n), _chance_repeats(n)
    ref = reference_outputs(desc, {"InputTensor": x}, SPEC)["OutputTensor"]
    shifted = (ref.astype(np.float64) - 40 * U).astype(np.float32)  # the mean 40 u sd off (sd = 1)
    assert not _passes(desc, x, shifted)


@pytest.mark.parametrize("n", [2**16, 2**20])
@pytest.mark.parametrize("threads", ["1", "8", "32", "1024"])
def test_sound_orders_pass_data_with_chance_repeats(n: int, threads: str) -> None:
    """One loop (sequential's class), SIMD lanes (lanes'), GPU threads (default's), each
    judged under its class, with and without the variance step."""
    model = {"1": "sequential", "8": "lanes"}.get(threads, "default")
    x = _chance_repeats(n, seed=n + int(threads))
    for normalize in (False, True):
        desc = _mvn1(n, normalize)
        got = GpuStyleBackend(threads=threads).execute(desc, {"InputTensor": x})["OutputTensor"]
        assert _passes(desc, x, got, model), (threads, normalize)


@pytest.mark.parametrize("levels", [2, 3, 5, 50])
def test_few_level_data_keep_the_full_term(levels: int) -> None:
    """Values drawn from a few levels (r = 2^16 / levels): one sequential float32 loop rounds
    their copies alike, 1.1 to 5.3 times the sequential model's bound without the repetition
    term; with it (r >= 2: unweighted) the loop meets that model, with and without the
    variance step."""
    n = 2**16
    rng = np.random.default_rng(levels)
    x = rng.choice(rng.uniform(0.05, 1.0, levels).astype(np.float32), n).reshape(1, n)
    for normalize in (False, True):
        desc = _mvn1(n, normalize)
        got = GpuStyleBackend(threads="1").execute(desc, {"InputTensor": x})["OutputTensor"]
        assert _passes(desc, x, got, "sequential"), normalize
