"""DirectML's F20: MVN1 and MVN2 over a strided input of more than 16 slices sum each slice in
one sequential float32 loop (cases/directml/mvn-strided-sequential-sum reproduces it bit for bit
on DirectML 1.15.4). The shipped findings name those cases by the ``input_layout`` case fact and
bound them by a chain of n terms: here the loop's answer, computed in numpy as the experiment
found it, fails the bound the other cases get and meets F20's, and a mean further off still
fails F20's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import judged_output, toward_zero16

import dmlconform as dc
from dmlconform.runner.expect import load_expectations
from dmlconform.runner.finding_match import CaseFacts
from dmlconform.specification.desc import parse_desc

SPEC = dc.load_spec()
SHIPPED = Path(dc.__file__).parent / "known_findings" / "directml.yaml"
F1_FLOAT16 = {"model": "fp16-statistics", "narrowing": "toward_zero", "pointwise_precision": "FLOAT16"}


def _padded(sizes: list[int]) -> list[int]:
    """One element after each row, three after each block of rows, five after each plane."""
    row = sizes[3] + 1
    block = sizes[2] * row + 3
    return [sizes[1] * block + 5, block, row, 1]


def _mvn1(sizes: list[int], dtype: str, strides: list[int] | None) -> object:
    t: dict = {"DataType": dtype, "Sizes": sizes}
    if strides is not None:
        t["Strides"] = strides
    return parse_desc({"type": "MEAN_VARIANCE_NORMALIZATION1", "desc": {
        "InputTensor": t, "OutputTensor": {"DataType": dtype, "Sizes": sizes}, "Axes": [0, 1, 2],
        "NormalizeVariance": False}})  # fmt: skip


def _facts(desc: object, data_type: str) -> CaseFacts:
    return CaseFacts.of(_Case(desc, data_type, SPEC.level("6_4")), spec=SPEC)


class _Case:
    """The fields of a runner case that CaseFacts reads."""

    def __init__(self, desc: object, data_type: str, level: object) -> None:
        self.desc, self.data_type, self.level = desc, data_type, level
        self.id, self.kind, self.operator = "numeric[x]", "numeric", "MEAN_VARIANCE_NORMALIZATION1"
        self.regime = self.relation = self.rule = self.expected = None


@pytest.mark.parametrize(
    ("strides", "layout"),
    [
        (None, "dense-as-output"),
        ([2048, 65536, 32, 1], "dense"),  # the first two axes' packed strides swapped
        ([0, 2048, 32, 1], "broadcast"),
        ([2 * 65536, 2 * 2048, 2 * 32, 2], "strided"),
        ("padded", "strided"),
    ],
)
def test_input_layout_names_the_layout_and_f20_covers_only_strided(strides: object, layout: str) -> None:
    sizes = [32, 32, 64, 32]
    desc = _mvn1(sizes, "FLOAT16", _padded(sizes) if strides == "padded" else strides)  # type: ignore[arg-type]
    facts = _facts(desc, "FLOAT16")
    assert facts.input_layout == layout
    f20 = [e for e in load_expectations(SHIPPED, SPEC) if getattr(e, "finding", None) == "F20"]
    assert len(f20) == 2
    assert any(e.covers(facts) for e in f20) == (layout == "strided")


def test_an_unknown_layout_is_one_line() -> None:
    from dmlconform.runner.expect import ExpectError, parse_findings

    text = "findings:\n  - {id: X1, reason: r, when: {input_layout: padded}, meets: lenient}\n"
    with pytest.raises(ExpectError, match="input_layout"):
        parse_findings(text, spec=SPEC)


def _judged(desc: object, x: np.ndarray, got: np.ndarray, tolerance: dict) -> tuple[bool, float]:
    result = judged_output(desc, {"InputTensor": x}, got, tolerance)
    return result.passed, result.outputs["OutputTensor"].ratio


@pytest.mark.parametrize("steps_off", [0, 8])
def test_float16_loop_meets_f20_not_f1_and_a_shifted_mean_fails_both(steps_off: int) -> None:
    sizes = [32, 32, 64, 16]  # 16 constant slices of 65536
    desc = _mvn1(sizes, "FLOAT16", _padded(sizes))
    x = np.broadcast_to(np.random.default_rng(3).uniform(-4, 4, 16).astype(np.float16), sizes).copy()
    x32 = x.astype(np.float32)
    loop = np.add.accumulate(x32.reshape(-1, 16), axis=0, dtype=np.float32)[-1]
    mean = toward_zero16(loop / np.float32(65536))
    mean = (mean + np.float16(steps_off) * np.spacing(np.abs(mean))).astype(np.float32)
    got = toward_zero16(x32 - mean)
    assert np.count_nonzero(got) > 0  # the loop's mean is off: a packed input's outputs are 0
    f1 = _judged(desc, x, got, F1_FLOAT16)
    f20 = _judged(desc, x, got, {**F1_FLOAT16, "threads": 1})
    assert not f1[0], f1
    assert f20[0] == (steps_off == 0), f20


@pytest.mark.parametrize("shift", [0.0, 2.0**-6])
def test_float32_loop_meets_sequential_not_default_and_a_shifted_mean_fails(shift: float) -> None:
    sizes = [4, 32, 64, 24]  # 24 slices of 8192, |mean| / sd = 1000
    desc = _mvn1(sizes, "FLOAT32", _padded(sizes))
    x = (1000.0 + np.random.default_rng(7).standard_normal(sizes)).astype(np.float32)
    loop = np.add.accumulate(x.reshape(-1, 24), axis=0, dtype=np.float32)[-1]
    # the loop's mean errs up to 0.0036 here; a mean off by sd / 64 more is a wrong answer
    got = (x - (loop / np.float32(8192) + np.float32(shift))).astype(np.float32)
    default = _judged(desc, x, got, {"model": "default"})
    sequential = _judged(desc, x, got, {"model": "sequential"})
    assert not default[0], default
    assert sequential[0] == (shift == 0.0), sequential
