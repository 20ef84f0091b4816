"""Every answer kind of the acceptance corpus, and findings that claim precisely, without Wine.

A refusal keeps the stage that gave it (CreateOperator or CompileOperator) from the runner's reply
to the answers file and the published table; an HRESULT that is neither E_INVALIDARG nor
E_NOTIMPL is its own outcome (``failed``), never a verdict; a finding's claim names the stage,
the operator and a desc predicate, so F12 (CompileOperator refuses some legal LP_NORMALIZATION
descs) claims exactly its pattern and never a CreateOperator refusal; a disagreement no claim
covers makes ``directml publish`` fail with one line. The answers here are fabricated.
"""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path

import pytest
from helpers import SPEC

from dmlconform.backends.directml.backend import _raise_for
from dmlconform.backends.directml.client import RunReply
from dmlconform.cli import main
from dmlconform.errors import Failure, Rejected
from dmlconform.releases import acceptance as acc
from dmlconform.releases import findings, matrix, predicates, publish
from dmlconform.specification.desc import OperatorDesc, parse_desc
from dmlconform.specification.validate import validate

SMALL = acc.Settings(seed=3, legal=1, illegal=1, edges=0)  # the edge corpus: test_edges.py
E_INVALIDARG, E_NOTIMPL, OVERFLOW = 0x80070057, 0x80004001, 0x8007023E


def signed(hresult: int) -> int:
    """An HRESULT as the runner's reply carries it (int32)."""
    return struct.unpack("<i", struct.pack("<I", hresult))[0]


@pytest.fixture(scope="module")
def probes() -> list[acc.Probe]:
    return acc.corpus(SPEC, SMALL)


def lp(
    sizes: list[int],
    axis: int,
    p: int,
    data_type: str = "FLOAT32",
    strides: tuple[list[int] | None, list[int] | None] = (None, None),
) -> OperatorDesc:
    tensors = []
    for st in strides:
        t: dict = {"DataType": data_type, "Sizes": sizes}
        if st is not None:
            t["Strides"] = st
        tensors.append(t)
    return parse_desc(
        {
            "type": "DML_OPERATOR_LP_NORMALIZATION",
            "desc": {
                "InputTensor": tensors[0],
                "OutputTensor": tensors[1],
                "Axis": axis,
                "Epsilon": 1e-5,
                "P": p,
            },
        }
    )


# --------------------------------------------------------------------------------------------
# the runner's reply -> a refusal or a failure, with its stage and HRESULT


def test_a_reply_becomes_a_refusal_with_its_stage_or_a_failure_with_its_hresult() -> None:
    for stage, name in ((1, "create"), (2, "compile")):
        with pytest.raises(Rejected) as refused:
            _raise_for(RunReply(stage, signed(E_INVALIDARG), (0.0,) * 5))
        assert (refused.value.stage, refused.value.hresult) == (name, E_INVALIDARG)
    with pytest.raises(Rejected) as notimpl:
        _raise_for(RunReply(1, signed(E_NOTIMPL), (0.0,) * 5))
    assert notimpl.value.hresult == E_NOTIMPL
    # 1.8.0's CompileOperator on LRN_GRAD over 2^32 - 1 elements: arithmetic overflow, no refusal
    with pytest.raises(Failure) as failed:
        _raise_for(RunReply(2, signed(OVERFLOW), (0.0,) * 5))
    assert (failed.value.stage, failed.value.hresult) == ("compile", OVERFLOW)
    assert isinstance(failed.value, RuntimeError)  # still a case's error everywhere else
    assert "0x8007023E" in str(failed.value)
    with pytest.raises(RuntimeError) as removed:
        _raise_for(RunReply(5, signed(0x887A0005), (0.0,) * 5))
    assert not isinstance(removed.value, (Failure, Rejected))
    # the stage survives a process boundary (ProcessGuard pickles what a worker raised)
    again = pickle.loads(pickle.dumps(Rejected("no", stage="compile", hresult=E_INVALIDARG)))
    assert (str(again), again.stage, again.hresult) == ("no", "compile", E_INVALIDARG)


# --------------------------------------------------------------------------------------------
# the answers file


def _every_kind() -> acc.ReleaseAnswers:
    a = acc.ReleaseAnswers("1.8.0", "1.8.0+test", "5_0", SMALL, "hash")
    a.record("p-accepted", acc.Answer(acc.ACCEPTED))
    a.record(
        "p-create", acc.Answer(acc.REFUSED, "CreateOperator returned E_INVALIDARG", "create", E_INVALIDARG)
    )
    a.record(
        "p-compile", acc.Answer(acc.REFUSED, "CompileOperator returned E_INVALIDARG", "compile", E_INVALIDARG)
    )
    a.record("p-notimpl", acc.Answer(acc.REFUSED, "CreateOperator returned E_NOTIMPL", "create", E_NOTIMPL))
    a.record("p-failed", acc.Answer(acc.FAILED, "CompileOperator returned 0x8007023E", "compile", OVERFLOW))
    a.record("p-inexpressible", acc.Answer(acc.INEXPRESSIBLE, "C cannot"))
    a.record("p-error", acc.Answer(acc.ERROR, "the runner crashed"))
    return a


def test_every_answer_kind_and_a_refusals_stage_round_trip_through_the_answers_file(tmp_path: Path) -> None:
    a = _every_kind()
    path = acc.write_answers(a, tmp_path)
    raw = json.loads(path.read_text())
    assert raw["format"] == acc.FORMAT == 2
    assert raw["verdicts"] == "ARCRFXE"  # one letter per probe: the stage of a refusal in its letter
    assert raw["failures"] == {"p-failed": {"stage": "compile", "hresult": "0x8007023E"}}
    assert raw["hresults"] == {"p-notimpl": "0x80004001"}
    assert set(raw["details"]) == {"p-notimpl", "p-failed", "p-error"}
    (back,) = acc.load_answers(tmp_path)
    assert back.verdicts == a.verdicts
    assert back.stages == {
        "p-create": "create",
        "p-compile": "compile",
        "p-notimpl": "create",
        "p-failed": "compile",
    }
    assert back.hresults == {"p-notimpl": E_NOTIMPL, "p-failed": OVERFLOW}
    assert back.stage("p-accepted") == "compile"  # an accepted probe got through every stage asked
    assert back.stage("p-inexpressible") is None
    assert back.failures() == [("p-failed", "compile", OVERFLOW)]
    (line,) = acc.failure_lines(back)  # what sweep and accept print for a release that meets one
    assert "FAILED" in line and "0x8007023E" in line and "CompileOperator" in line and "p-failed" in line


def test_a_sweep_that_meets_a_failed_answer_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dmlconform.releases import sweep

    monkeypatch.setattr(acc, "corpus", lambda spec, settings: [])
    monkeypatch.setattr(acc, "ask_release", lambda version, probes, settings, spec: _every_kind())
    log: list[str] = []
    sweep.run_acceptance(["1.8.0"], sweep.SweepSettings(), SPEC, tmp_path, log.append)
    counts = next(line for line in log if "accepted" in line)
    assert "3 refused (1 by CompileOperator)" in counts and "1 failed" in counts
    (failed,) = [line for line in log if "FAILED" in line]
    assert "0x8007023E" in failed and "p-failed" in failed
    assert acc.load_answers(tmp_path)[0].failures() == [("p-failed", "compile", OVERFLOW)]


def test_an_answers_file_of_the_previous_format_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    out.mkdir()
    old = {
        "format": 1,
        "release": "1.15.4",
        "file_version": "x",
        "max_feature_level": "6_4",
        "settings": SMALL.to_json(),
        "spec_hash": "h",
        "verdicts": "AR",
        "ids": ["a", "b"],
        "details": {},
    }
    (out / "acceptance-1.15.4.json").write_text(json.dumps(old))
    (out / "releases.json").write_text(json.dumps({"releases": []}))
    with pytest.raises(ValueError, match=r"acceptance-1\.15\.4\.json: answers of format 1 .*reads format 2"):
        acc.load_answers(out)
    assert main(["directml", "publish", str(out), "--out", str(tmp_path / "doc.md")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "format 1" in err and "Traceback" not in err


# --------------------------------------------------------------------------------------------
# a failed answer: its own outcome, in the matrix and on the page


def _write_sweep(out: Path, answers: list[acc.ReleaseAnswers]) -> Path:
    rows = []
    for a in answers:
        acc.write_answers(a, out)
        rows.append(
            {
                "release": a.release,
                "wheel": "onnxruntime-directml==x",
                "installed": True,
                "status": {
                    "runs": True,
                    "max_feature_level": a.max_feature_level,
                    "detail": "self-test passed",
                },
            }
        )
    (out / "releases.json").write_text(json.dumps({"releases": rows}))
    return out


def _agreeing(release: str, level: str, probes: list[acc.Probe]) -> acc.ReleaseAnswers:
    """A release that answers every probe as the spec says at its level (refusing at creation)."""
    a = acc.ReleaseAnswers(release, f"{release}+test", level, SMALL, "hash")
    for p in probes:
        if validate(p.desc, level, SPEC):
            a.record(p.id, acc.Answer(acc.REFUSED, "E_INVALIDARG", "create", E_INVALIDARG))
        else:
            a.record(p.id, acc.Answer(acc.ACCEPTED))
    return a


def test_a_failed_answer_is_neither_accepted_nor_refused_nor_agreement_nor_disagreement(
    tmp_path: Path, probes: list[acc.Probe]
) -> None:
    a = _agreeing("1.15.4", "6_4", probes)
    legal = next(p for p in probes if p.operator == "LOCAL_RESPONSE_NORMALIZATION_GRAD" and p.kind == "legal")
    illegal = next(
        p
        for p in probes
        if p.operator == "LOCAL_RESPONSE_NORMALIZATION_GRAD" and a.verdicts[p.id] == acc.REFUSED
    )
    before = matrix.acceptance(
        SPEC, matrix.judge(matrix.Expectations(SPEC), probes, a), "1.15.4", "6_4"
    ).totals()
    for p in (legal, illegal):
        a.record(p.id, acc.Answer(acc.FAILED, "CompileOperator returned 0x8007023E", "compile", OVERFLOW))
    judged = matrix.judge(matrix.Expectations(SPEC), probes, a)
    failed = matrix.failures(judged)
    assert {j.probe.id for j in failed} == {legal.id, illegal.id}
    assert all(j.agrees is None and not j.asked and j.hresult == OVERFLOW for j in failed)
    assert matrix.disagreements(judged) == []
    totals = matrix.acceptance(SPEC, judged, "1.15.4", "6_4").totals()
    lg, il = totals[matrix.LEGAL], totals["illegal"]
    assert (lg.failed, il.failed) == (1, 1)
    assert (lg.accepted, il.refused) == (before[matrix.LEGAL].accepted - 1, before["illegal"].refused - 1)
    assert (lg.refused, il.accepted) == (0, 0)
    # on the page: its own column, its own count per operator, its own section with the HRESULT
    sweep = publish.load(_write_sweep(tmp_path / "sweep", [a]), SPEC)
    text, health = publish.render(sweep, SPEC)
    assert (health["failed"], health["undecided"]) == (2, 0)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| release | level | probes |"))
    row = next(line for line in lines if line.startswith("| 1.15.4 | 6_4 |"))
    assert dict(zip(header.split("|"), row.split("|"), strict=True))[" failed "] == " 2 "
    lrng = next(line for line in lines if line.startswith("| LOCAL_RESPONSE_NORMALIZATION_GRAD | "))
    assert lrng.endswith("; 2 failed |")
    assert "### Answers that failed" in text
    assert f"| 1.15.4 | CompileOperator | 0x8007023E | 2 | `{legal.id}` |" in text


def test_a_refusals_stage_reaches_the_matrix_and_the_page(tmp_path: Path, probes: list[acc.Probe]) -> None:
    a = _agreeing("1.15.4", "6_4", probes)
    illegal = [p for p in probes if a.verdicts[p.id] == acc.REFUSED][:3]
    for p in illegal:
        a.record(
            p.id, acc.Answer(acc.REFUSED, "CompileOperator returned E_INVALIDARG", "compile", E_INVALIDARG)
        )
    judged = matrix.judge(matrix.Expectations(SPEC), probes, a)
    assert {j.probe.id for j in judged if j.stage == "compile" and j.verdict == acc.REFUSED} == {
        p.id for p in illegal
    }
    il = matrix.acceptance(SPEC, judged, "1.15.4", "6_4").totals()["illegal"]
    assert il.refused_at["compile"] == 3 and il.refused_at["create"] == il.refused - 3
    text, _ = publish.render(publish.load(_write_sweep(tmp_path / "sweep", [a]), SPEC), SPEC)
    row = next(line for line in text.splitlines() if line.startswith("| 1.15.4 | 6_4 |"))
    assert f"| {il.refused} (3 by CompileOperator) |" in row


# --------------------------------------------------------------------------------------------
# claims: stage, operator, predicate


def _judged(desc: OperatorDesc, verdict: str, stage: str | None, data_type: str = "FLOAT32") -> matrix.Judged:
    expected = tuple(sorted({v.rule for v in validate(desc, "6_4", SPEC)}))
    probe = acc.Probe("LP_NORMALIZATION-6_4-legal-x-00", desc.operator, "6_4", "legal", None, data_type, desc)
    return matrix.Judged("1.15.4", probe, verdict, expected, stage)


@pytest.mark.parametrize(
    ("sizes", "axis", "p", "data_type", "strides", "claimed"),
    [
        ([2, 3, 4, 6], 0, 1, "FLOAT32", (None, None), True),  # 72 slices
        ([2, 3, 4, 5], 3, 1, "FLOAT32", (None, None), True),  # 24 slices
        ([2, 3, 4, 5], 2, 1, "FLOAT32", (None, None), False),  # 30 slices: 1.15.4 compiles it
        ([2, 3, 4, 6], 0, 2, "FLOAT32", (None, None), False),  # P 2 over 2 or more elements compiles
        ([2, 3, 4, 6], 0, 1, "FLOAT16", (None, None), False),  # FLOAT16 compiles
        ([4, 1], 1, 2, "FLOAT32", (None, None), True),  # one element per slice, 4 slices, packed
        ([4, 1], 1, 2, "FLOAT32", ([2, 1], None), False),  # ... with a padded input it compiles
        ([2, 1, 2], 1, 1, "FLOAT32", ([1, 1, 2], [2, 2, 1]), False),  # permuted input only: compiles
        ([2, 1, 2], 1, 2, "FLOAT32", ([1, 1, 2], [1, 1, 2]), True),  # both permuted alike
    ],
)
def test_f12_claims_compile_refusals_of_its_pattern_and_never_a_createoperator_refusal(
    sizes: list[int], axis: int, p: int, data_type: str, strides: tuple, claimed: bool
) -> None:
    reg = findings.registry()
    desc = lp(sizes, axis, p, data_type, strides)
    assert not validate(desc, "6_4", SPEC)  # a legal desc
    at_compile = reg.explain_judged(_judged(desc, acc.REFUSED, "compile", data_type), SPEC)
    assert at_compile == (["F12"] if claimed else [])
    assert reg.explain_judged(_judged(desc, acc.REFUSED, "create", data_type), SPEC) == []
    assert reg.explain_judged(_judged(desc, acc.FAILED, "compile", data_type), SPEC) == []


def test_a_createoperator_refusal_of_a_legal_lp_desc_is_undecided_and_publish_fails(
    tmp_path: Path, probes: list[acc.Probe], capsys: pytest.CaptureFixture[str]
) -> None:
    a = _agreeing("1.15.4", "6_4", probes)
    lp_legal = [p for p in probes if p.operator == "LP_NORMALIZATION" and a.verdicts[p.id] == acc.ACCEPTED]
    assert lp_legal
    for p in lp_legal:
        a.record(
            p.id, acc.Answer(acc.REFUSED, "CreateOperator returned E_INVALIDARG", "create", E_INVALIDARG)
        )
    out = _write_sweep(tmp_path / "sweep", [a])
    text, health = publish.render(publish.load(out, SPEC), SPEC)
    assert health["undecided"] == len(lp_legal)
    assert "| undecided | LP_NORMALIZATION | legal | refused by CreateOperator |" in text
    doc = tmp_path / "doc.md"
    assert main(["directml", "publish", str(out), "--out", str(doc)]) == 1
    assert doc.read_text() == text
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{len(lp_legal)} undecided disagreement(s)" in line and lp_legal[0].id in line


def test_claims_must_name_their_stage_and_operator() -> None:
    base = {"rule": "legal", "verdict": "refused", "stage": "compile", "operator": "LP_NORMALIZATION"}
    claim = findings.Claim.from_yaml(base, "F0")
    assert (claim.stage, claim.operators, claim.when) == ("compile", ("LP_NORMALIZATION",), None)
    for missing in ("stage", "operator", "verdict", "rule"):
        with pytest.raises(ValueError, match=f"needs '{missing}'"):
            findings.Claim.from_yaml({k: v for k, v in base.items() if k != missing}, "F0")
    with pytest.raises(ValueError, match="stage is one of create, compile, execute"):
        findings.Claim.from_yaml({**base, "stage": "CompileOperator"}, "F0")
    with pytest.raises(ValueError, match="verdict is one of accepted, refused"):
        findings.Claim.from_yaml({**base, "verdict": "failed"}, "F0")
    with pytest.raises(ValueError, match="unknown key 'whne'"):
        findings.Claim.from_yaml({**base, "whne": {"P": 1}}, "F0")
    with pytest.raises(ValueError, match="multiple_of"):
        findings.Claim.from_yaml({**base, "when": {"slices": {"multiple_of": 0}}}, "F0")
    text = (Path(__file__).resolve().parent.parent / "dmlconform/releases/findings.yaml").read_text()
    with pytest.raises(ValueError, match="F12.*needs 'stage'"):
        findings.parse(text.replace("        stage: compile\n", "", 1))


# --------------------------------------------------------------------------------------------
# the predicate vocabulary


def test_desc_predicates_on_members_and_derived_subjects() -> None:
    def holds(when: object, desc: OperatorDesc, data_type: str | None = "FLOAT32") -> bool:
        predicate = predicates.parse(when)
        assert predicate is not None
        return predicate.holds(desc, data_type)

    d = lp([2, 3, 4, 5], 2, 1)
    assert holds({"P": 1, "Axis": [1, 2], "rank": 4}, d)
    assert not holds({"P": True}, d)  # a bool is not 1
    assert holds({"Epsilon": 1e-5, "axis_size": 4, "slices": 30}, d)
    assert holds({"slices": "even", "axis_size": {"multiple_of": 4}}, d)
    assert not holds({"slices": {"multiple_of": 4}}, d)
    assert holds([{"P": 2}, {"rank": {"min": 4, "max": 4}}], d)  # a list: any of them
    assert not holds({"data_type": "FLOAT16"}, d)
    assert not holds({"ScaleTensor": "present"}, d) and holds({"ScaleTensor": "absent"}, d)
    mvn1 = parse_desc(
        {
            "type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1",
            "desc": {
                "InputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5]},
                "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 4, 5]},
                "AxisCount": 2,
                "Axes": [2, 3],
                "NormalizeVariance": True,
                "Epsilon": 1e-5,
            },
        }
    )
    assert holds({"axis_size": 20, "slices": 6, "Axes": [[2, 3]], "NormalizeVariance": True}, mvn1)
    layouts = {
        "dense-as-output": [(None, None), ([60, 20, 5, 1], None), ([1, 2, 6, 24], [1, 2, 6, 24])],
        "dense": [([1, 2, 6, 24], None), (None, [1, 2, 6, 24])],
        "strided": [([61, 20, 5, 1], None), ([40, 10, 2, 1], None)],
        "broadcast": [([0, 20, 5, 1], None)],
    }
    for name, cases in layouts.items():
        for strides in cases:
            assert holds({"input_layout": name}, lp([2, 3, 4, 5], 1, 1, strides=strides)), (name, strides)
    # dimensions of size 1 do not count: any stride there is still packed
    assert holds({"input_layout": "dense-as-output"}, lp([4, 1], 1, 2, strides=([1, 7], [1, 1])))
    for bad, message in (
        ({"input_layout": "packed"}, "input_layout"),
        ({"P": []}, "empty list"),
        ({"P": {"min": "a"}}, "range bounds"),
        ({"P": {"below": 3}}, "min: A, max: B"),
        ([], "'when' is empty"),
        ("P", "mapping of predicates"),
    ):
        with pytest.raises(ValueError, match=message):
            predicates.parse(bad)
