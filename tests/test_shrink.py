"""Shrinking failures: every broken backend's failure shrinks to a case that still fails the same
way with it and passes with the reference; the search is deterministic, bounded in time, never
hands back a case that does not fail; moves keep descs and data consistent; the CLI and
``run --shrink`` write reproducers that ``replay`` runs and reports that show them."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import SPEC, mvn1

from dmlconform.backends import broken
from dmlconform.backends.numpy_backend import NumpyBackend
from dmlconform.backends.reference import ReferenceBackend
from dmlconform.cli import main
from dmlconform.errors import Rejected
from dmlconform.runner.cases import Case, Selection, collect
from dmlconform.runner.checks import run_case
from dmlconform.runner.guard import ThreadGuard
from dmlconform.runner.judging import CaseResult
from dmlconform.shrink import moves
from dmlconform.shrink.search import NotFailing, shrink
from dmlconform.shrink.signature import Signature, same_failure, signature
from dmlconform.specification.validate import validate
from dmlconform.tolerance.options import NO_OPTIONS

MUTANTS = sorted(
    n for n, o in vars(broken).items() if isinstance(o, type) and o.__module__ == broken.__name__
)
ONLY_BIG = {"SequentialSumStatistics", "Float16AccumulationAtLongReductions"}


def first_failure(backend: object, sel: Selection) -> tuple[ThreadGuard, Case, CaseResult]:
    guard = ThreadGuard(backend, 60)
    for case in collect(SPEC, sel):
        result = run_case(case, guard, SPEC, NO_OPTIONS)
        if result.status == "failed":
            return guard, case, result
    raise AssertionError(f"{backend} never failed")


def selection(mutant: str) -> Selection:
    if mutant in ONLY_BIG:  # only long reductions catch them (the default tier's 65537 cases)
        return Selection(
            level=SPEC.level("6_4"),
            operators=("MEAN_VARIANCE_NORMALIZATION1",),
            kinds=("numeric",),
            cases=1,
            max_elements=140000,
        )
    return Selection(level=SPEC.level("6_4"), kinds=("numeric", "metamorphic"), cases=2, max_elements=5000)


def runner(guard: ThreadGuard):  # type: ignore[no-untyped-def]
    return lambda case, inputs: run_case(case, guard, SPEC, NO_OPTIONS, inputs=inputs)


@pytest.mark.parametrize("mutant", MUTANTS)
def test_each_broken_backend_shrinks_to_a_case_that_fails_with_it_and_passes_with_the_reference(
    mutant: str,
) -> None:
    guard, case, result = first_failure(getattr(broken, mutant)(), selection(mutant))
    found = shrink(case, result.inputs, runner(guard), SPEC, max_seconds=60)
    assert found.stopped == "minimal"
    (e0, d0), (e1, d1) = found.original_size, found.size
    assert e1 <= e0 and d1 <= d0 and (e1, d1) != (e0, d0), found.steps
    assert not validate(found.case.desc, case.level, SPEC)
    again = run_case(found.case, guard, SPEC, NO_OPTIONS, inputs=found.inputs)
    assert same_failure(found.signature, found.case, again), again.message
    reference = run_case(
        found.case, ThreadGuard(ReferenceBackend(), 60), SPEC, NO_OPTIONS, inputs=found.inputs
    )
    assert reference.status == "passed", reference.message
    if mutant in ONLY_BIG:  # the bug needs a long reduction: the shrunk case keeps one
        assert e1 > 257


def test_the_search_is_deterministic() -> None:
    guard, case, result = first_failure(broken.ScaleReversed(), selection("ScaleReversed"))
    a = shrink(case, result.inputs, runner(guard), SPEC, max_seconds=60)
    b = shrink(case, result.inputs, runner(guard), SPEC, max_seconds=60)
    assert a.steps == b.steps and a.case.desc == b.case.desc
    assert sorted(a.inputs) == sorted(b.inputs)
    assert all(np.array_equal(a.inputs[k], b.inputs[k]) for k in a.inputs)


def test_no_time_gives_back_the_original_unchanged() -> None:
    guard, case, result = first_failure(broken.OutputScaled(), selection("OutputScaled"))
    found = shrink(case, result.inputs, runner(guard), SPEC, max_seconds=0)
    assert found.stopped == "time limit" and found.tried == 0 and not found.steps
    assert found.case == case and found.size == found.original_size


def test_a_passing_case_is_not_shrunk() -> None:
    case = next(
        iter(collect(SPEC, Selection(level=SPEC.level("6_4"), kinds=("numeric",), cases=1, tier="smoke")))
    )
    with pytest.raises(NotFailing):
        shrink(case, None, runner(ThreadGuard(ReferenceBackend(), 60)), SPEC)


class _Flaky(NumpyBackend):
    """Wrong (every output 1.5x) on its first call only: every later run passes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def execute(self, desc, inputs):  # type: ignore[no-untyped-def]
        self.calls += 1
        out = super().execute(desc, inputs)
        return {k: v * 1.5 for k, v in out.items()} if self.calls == 1 else out


def test_a_failure_that_does_not_come_back_is_reported_as_such() -> None:
    case = next(
        iter(collect(SPEC, Selection(level=SPEC.level("6_4"), kinds=("numeric",), cases=1, tier="smoke")))
    )
    found = shrink(case, _inputs(case), runner(ThreadGuard(_Flaky(), 60)), SPEC, 30)
    assert found.stopped == "minimal" and found.tried > 0  # candidates ran; none failed again
    assert found.case == case and not found.steps  # nothing smaller failed: the original it is


def _inputs(case: Case) -> dict[str, np.ndarray]:
    from dmlconform.runner.checks import make_inputs

    return make_inputs(case, SPEC)


class _Crashes(NumpyBackend):
    """Raises on inputs of more than 40 elements: a crash, not a wrong value."""

    def execute(self, desc, inputs):  # type: ignore[no-untyped-def]
        if max(np.asarray(v).size for v in inputs.values()) > 40:
            raise RuntimeError("scratch buffer too small")
        return super().execute(desc, inputs)


def test_a_crash_shrinks_to_a_case_that_still_crashes() -> None:
    sel = Selection(level=SPEC.level("6_4"), kinds=("numeric",), cases=1, tier="smoke")
    guard, case, result = first_failure(_Crashes(), sel)
    found = shrink(case, result.inputs, runner(guard), SPEC, max_seconds=60)
    assert found.signature.kind == "failed" and "raised RuntimeError" in found.signature.detail
    assert 40 < found.size[0] <= 80 < found.original_size[0]  # bisected down to the threshold


class _Hangs(NumpyBackend):
    """Hangs on more than 16 elements, is wrong (OutputScaled) on fewer."""

    def execute(self, desc, inputs):  # type: ignore[no-untyped-def]
        if max(np.asarray(v).size for v in inputs.values()) > 16:
            threading.Event().wait(5)
        return {k: v * 1.5 for k, v in super().execute(desc, inputs).items()}


def test_a_hanging_backend_is_cut_off_by_the_call_timeout_and_the_deadline() -> None:
    case = next(
        iter(collect(SPEC, Selection(level=SPEC.level("6_4"), kinds=("numeric",), cases=1, tier="smoke")))
    )
    assert case.desc.members["InputTensor"].element_count > 16
    guard = ThreadGuard(_Hangs(), 0.2)
    t0 = time.monotonic()
    found = shrink(case, _inputs(case), runner(guard), SPEC, max_seconds=1.5)
    assert time.monotonic() - t0 < 4
    assert found.signature.kind == "failed" and "timed out" in found.signature.detail
    assert found.size[0] > 16  # a smaller case that fails differently (wrong values) is not it


class _AcceptsEverything(NumpyBackend):
    def check(self, desc):  # type: ignore[no-untyped-def]
        return None


def test_an_accepted_illegal_desc_shrinks_to_one_that_breaks_the_same_rule_alone() -> None:
    sel = Selection(
        level=SPEC.level("6_4"), kinds=("validation",), cases=2, operators=("MEAN_VARIANCE_NORMALIZATION1",)
    )
    guard = ThreadGuard(_AcceptsEverything(), 60)
    shrunk_any = False
    for case in collect(SPEC, sel):
        if case.expected != "illegal" or case.rule != "axes-unique":
            continue
        found = shrink(case, None, runner(guard), SPEC, max_seconds=30)
        assert found.signature == Signature("accepted-illegal", "axes-unique")
        assert {v.rule for v in validate(found.case.desc, case.level, SPEC)} == {"axes-unique"}
        assert found.size <= found.original_size
        shrunk_any = shrunk_any or found.size < found.original_size
    assert shrunk_any


class _RejectsScale(NumpyBackend):
    def check(self, desc):  # type: ignore[no-untyped-def]
        if desc.members.get("ScaleTensor") is not None:
            raise Rejected("ScaleTensor not supported")


def test_a_rejected_legal_desc_keeps_what_the_backend_rejects() -> None:
    sel = Selection(
        level=SPEC.level("6_4"), kinds=("validation",), cases=8, operators=("MEAN_VARIANCE_NORMALIZATION1",)
    )
    guard = ThreadGuard(_RejectsScale(), 60)
    case = next(
        c
        for c in collect(SPEC, sel)
        if c.expected == "legal" and c.desc.members.get("ScaleTensor") is not None
        and c.desc.members.get("FusedActivation") is not None
    )  # fmt: skip
    found = shrink(case, None, runner(guard), SPEC, max_seconds=30)
    assert found.signature.kind == "rejected-legal"
    assert found.case.desc.members.get("ScaleTensor") is not None
    assert "FusedActivation" not in found.case.desc.members
    assert found.size[0] == 1


# ------------------------------------------------------------------------------- moves


def _mvn1(sizes: list[int], axes: list[int], **extra: object):  # type: ignore[no-untyped-def]
    return mvn1(sizes, axes, AxisCount=len(axes), **extra)


def test_dropping_a_size_one_dimension_renumbers_the_axes_and_squeezes_the_data() -> None:
    desc = _mvn1([2, 1, 3, 4], [1, 2, 3])
    x = np.arange(24, dtype=np.float32).reshape(2, 1, 3, 4)
    (move,) = list(moves.drop_dims(desc, {"InputTensor": x}, SPEC))
    assert move.desc.members["InputTensor"].sizes == (2, 3, 4)
    assert move.desc.members["OutputTensor"].sizes == (2, 3, 4)
    assert move.desc.members["Axes"] == (1, 2) and move.desc.members["AxisCount"] == 2
    assert np.array_equal(move.inputs["InputTensor"], x[:, 0])


def test_a_smaller_dimension_keeps_the_leading_data_and_broadcast_tensors_keep_size_one() -> None:
    scale = {"DataType": "FLOAT32", "Sizes": [1, 3, 1]}
    desc = _mvn1([2, 3, 8], [2], ScaleTensor=scale, BiasTensor=scale)
    x = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
    s = np.arange(3, dtype=np.float32).reshape(1, 3, 1)
    got = {
        m.note: m
        for m in moves.shrink_sizes(desc, {"InputTensor": x, "ScaleTensor": s, "BiasTensor": s}, SPEC)
    }
    half = got["dimension 2: 8 -> 4"]
    assert np.array_equal(half.inputs["InputTensor"], x[:, :, :4])
    assert half.desc.members["ScaleTensor"].sizes == (1, 3, 1)
    chan = got["dimension 1: 3 -> 1"]
    assert chan.desc.members["ScaleTensor"].sizes == (1, 1, 1)
    assert np.array_equal(chan.inputs["ScaleTensor"], s[:, :1])
    sizes = [m.desc.members["InputTensor"].element_count for m in got.values()]
    assert sizes == sorted(sizes)  # smallest first


def test_paired_members_are_dropped_together_where_a_rule_ties_them() -> None:
    scale = {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 8]}
    desc = _mvn1([1, 1, 2, 8], [3], ScaleTensor=scale, BiasTensor=scale)
    notes = [m.note for m in moves.drop_members(desc, None, SPEC)]
    assert "removed ScaleTensor, BiasTensor" in notes
    assert "removed ScaleTensor" in notes and "removed BiasTensor" in notes
    # at 5_1 Bias needs Scale (scale-bias-paired): dropping Scale alone is illegal there
    alone = next(m for m in moves.drop_members(desc, None, SPEC) if m.note == "removed ScaleTensor")
    assert any(v.rule == "scale-bias-paired" for v in validate(alone.desc, "5_1", SPEC))


def test_data_moves_only_go_simpler() -> None:
    desc = _mvn1([6], [0])
    x = np.array([0.3, -1.7, 2.2, 8.5, -9.0, 1.0], np.float32)
    levels = [
        moves.simplicity(m.inputs["InputTensor"]) for m in moves.simplify_data(desc, {"InputTensor": x}, SPEC)
    ]
    assert levels == sorted(levels) and max(levels) < moves.simplicity(x)
    ints = np.array([0.0, 1.0, -3.0], np.float32)
    assert [m.note for m in moves.simplify_data(desc, {"InputTensor": ints}, SPEC)] == [
        "InputTensor: all 0",
        "InputTensor: all 1",
    ]


def test_signature_reads_json_safe_infinities_and_keeps_the_strength() -> None:
    case = next(
        iter(collect(SPEC, Selection(level=SPEC.level("6_4"), kinds=("numeric",), cases=1, tier="smoke")))
    )
    errors = {
        "worst": {"member": "OutputTensor"},
        "outputs": {"OutputTensor": {"ratio": "nan"}, "Other": {"ratio": 3.0}},
    }
    sig = signature(case, CaseResult("failed", errors=errors))
    assert sig == Signature("out-of-budget", "OutputTensor", 2.0)
    weaker = CaseResult("failed", errors={"outputs": {"OutputTensor": {"ratio": 1.5}}})
    assert not same_failure(sig, case, weaker)
    assert same_failure(sig, case, CaseResult("failed", errors={"outputs": {"OutputTensor": {"ratio": 2.5}}}))
    agg = CaseResult(
        "failed", errors={"outputs": {"OutputTensor": {"ratio": 0.5, "aggregate": {"scale": 1.3}}}}
    )
    assert signature(case, agg) == Signature("systematic", "OutputTensor", 1.3)
    assert not same_failure(sig, case, agg)
    assert signature(case, CaseResult("passed")) is None


# ------------------------------------------------------------------------------- CLI and reports


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    report = tmp_path_factory.mktemp("run") / "r"
    code = main(
        ["run", "--backend", "dmlconform.backends.broken:UnbiasedVariance", "--tier", "smoke", "--cases", "2",
         "--operators", "MEAN_VARIANCE_NORMALIZATION1", "--kinds", "numeric", "--report", str(report),
         "--shrink", "--shrink-time", "60"]
    )  # fmt: skip
    assert code == 1
    return report


def test_run_shrink_records_and_shows_each_minimal_reproducer(failed_run: Path) -> None:
    data = json.loads((failed_run / "results.json").read_text())
    failed = [c for c in data["cases"] if c["outcome"] == "failed"]
    assert failed
    for record in failed:
        shrunk = record["shrunk"]
        assert shrunk["shrunk"]["elements"] < shrunk["original"]["elements"] == record["elements"]
        assert (failed_run / shrunk["reproducer"] / "inputs.npz").is_file()
        assert shrunk["replay"].startswith("dmlconform replay ") and shrunk["desc"]["type"]
    html = (failed_run / "index.html").read_text()
    assert "minimal reproducer" in html and '"shr"' in html
    assert failed[0]["shrunk"]["reproducer"] in html
    assert "minimal reproducer" in (failed_run / "summary.md").read_text()


def test_the_shrunk_reproducer_replays_failing_with_the_backend_and_passing_with_the_reference(
    failed_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = next(
        c for c in json.loads((failed_run / "results.json").read_text())["cases"] if c.get("shrunk")
    )
    shrunk = failed_run / record["shrunk"]["reproducer"]
    assert main(["replay", str(shrunk)]) == 1
    assert main(["replay", str(shrunk), "--backend", "reference"]) == 0
    assert "# shrunk from" in (shrunk / "desc.yaml").read_text()
    capsys.readouterr()


def test_shrink_cli_writes_where_told_and_says_what_it_removed(
    failed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = next(
        c for c in json.loads((failed_run / "results.json").read_text())["cases"] if c.get("shrunk")
    )
    out = tmp_path / "small"
    assert main(["shrink", str(failed_run / record["reproducer"]), "--out", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert "shrunk:" in text and f"written:  {out}" in text
    meta = json.loads((out / "case.json").read_text())
    assert meta["shrink"]["steps"] and meta["shrink"]["stopped"] == "minimal"
    assert meta["case"]["desc"] == record["shrunk"]["desc"]  # the same search, the same result
    assert main(["shrink", str(failed_run / record["reproducer"]), "--backend", "reference", "--out",
                 str(tmp_path / "x")]) == 1  # fmt: skip
    assert "does not fail" in capsys.readouterr().err
    assert main(["shrink", str(tmp_path / "missing")]) == 2
    assert main(["shrink", str(out), "--out", str(out)]) == 2
    assert main(["shrink", str(out), "--shrink-time", "-1"]) == 2
    assert main(["shrink", str(out), "--max-time", "-1"]) == 2  # the older spelling, hidden
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("dmlconform shrink: error:") == 4
    assert err.count("--shrink-time must not be negative") == 2


def test_a_shrunk_case_id_says_it_is_shrunk(failed_run: Path) -> None:
    record = next(
        c for c in json.loads((failed_run / "results.json").read_text())["cases"] if c.get("shrunk")
    )
    meta = json.loads((failed_run / record["shrunk"]["reproducer"] / "case.json").read_text())
    case = Case.from_dict(meta["case"], SPEC)
    assert case.size == "shrunk" and "shrunk" in case.id and case.id != record["id"]
    assert replace(case, size=None).desc == case.desc


def test_attributes_with_a_plain_default_can_take_it() -> None:
    desc = _mvn1([2, 8], [1], Epsilon=0.0)
    (move,) = list(moves.default_attributes(desc, None, SPEC))
    assert "Epsilon" not in move.desc.members and move.note == "Epsilon: 0.0 -> default 1e-05"
    assert move.desc.get("Epsilon", SPEC) == 1e-5
    assert not list(moves.default_attributes(_mvn1([2, 8], [1], Epsilon=1e-5), None, SPEC))
    assert not list(moves.default_attributes(_mvn1([2, 8], [1]), None, SPEC))  # AxisCount: no plain default
