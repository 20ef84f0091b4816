"""DirectML releases side by side, without Wine: the status records behind ``directml versions``,
the acceptance corpus, the agreement matrix and availability analysis, the findings registry,
the published table and the ``report releases`` view.

The releases here are stand-ins whose CreateOperator is the validator at a chosen level (a
release that agrees with the spec everywhere) or the validator with one rule switched off (a lax
release): the analysis must find exactly the planted disagreements, and decide them only where
the findings registry claims them. The real releases are in tests/test_directml_sweep.py.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers import SPEC

from dmlconform.backends.directml import provision, status
from dmlconform.backends.directml.releases import RELEASES
from dmlconform.cli import main
from dmlconform.errors import Failure, Rejected, Unsupported
from dmlconform.releases import acceptance as acc
from dmlconform.releases import findings, matrix, predicates, publish
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.validate import validate

ROOT = Path(__file__).resolve().parent.parent
SMALL = acc.Settings(seed=3, legal=1, illegal=1, edges=0)  # the edge corpus: test_edges.py


@pytest.fixture(scope="module")
def probes() -> list[acc.Probe]:
    return acc.corpus(SPEC, SMALL)


def validator_at(level: str, ignore: frozenset[str] = frozenset()):
    """A stand-in CreateOperator: refuses what the spec forbids at ``level``, except ``ignore``."""

    def check(desc: OperatorDesc) -> None:
        rules = {v.rule for v in validate(desc, level, SPEC)} - ignore
        if rules:
            raise Rejected(", ".join(sorted(rules)), stage="create", hresult=0x80070057)

    return check


def answers_for(release: str, level: str, probes: list[acc.Probe], ignore: frozenset[str] = frozenset()):
    a = acc.ReleaseAnswers(release, f"{release}+test", level, SMALL, "hash")
    return acc.ask_all(validator_at(level, ignore), probes, a)


# --------------------------------------------------------------------------------------------
# status records and `directml versions`


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DMLCONFORM_DIRECTML_HOME", str(tmp_path))
    return tmp_path


def _install(home: Path, version: str) -> None:
    dll = home / "dll" / version / "DirectML.dll"
    dll.parent.mkdir(parents=True, exist_ok=True)
    dll.write_bytes(b"MZ")


def test_status_round_trip_stale_and_runnable(home: Path) -> None:
    runner, lavapipe = status.current_stack(home)
    for v, runs in (("1.9.1", True), ("1.10.1", False), ("1.15.4", True)):
        _install(home, v)
        status.write(
            status.Status(v, runs, "detail", max_feature_level="5_0", runner=runner, lavapipe=lavapipe)
        )
    assert status.read("1.9.1", home) == status.Status(
        "1.9.1", True, "detail", max_feature_level="5_0", runner=runner, lavapipe=lavapipe
    )
    assert status.runnable(home=home) == ["1.9.1", "1.15.4"]  # table order, the failing one left out
    status.write(status.Status("1.15.4", True, "old", runner="runner-000000000000.exe", lavapipe=lavapipe))
    assert status.stale(status.read("1.15.4", home), home)
    assert status.runnable(home=home) == ["1.9.1"]  # a record of another runner build does not count
    assert status.read("1.13.1", home) is None


def test_versions_lists_every_release_with_its_recorded_status(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner, lavapipe = status.current_stack(home)
    _install(home, "1.5.1")
    _install(home, "1.12.0")
    _install(home, "1.13.1")
    status.write(
        status.Status(
            "1.5.1",
            False,
            "the runner did not start: crashed (exit status 148)",
            runner=runner,
            lavapipe=lavapipe,
        )
    )
    status.write(
        status.Status(
            "1.12.0", True, "self-test passed: ok", max_feature_level="6_1", runner=runner, lavapipe=lavapipe
        )
    )
    assert main(["directml", "versions"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out[1:-1]}
    assert list(rows) == [r.dml_version for r in RELEASES]
    assert "cannot run here: the runner did not start" in rows["1.5.1"]
    assert rows["1.12.0"].split()[2] == "6_1" and "runs: self-test passed" in rows["1.12.0"]
    assert "not checked" in rows["1.13.1"]
    assert "not installed" in rows["1.15.4"] and rows["1.15.4"].split()[2] == "6_4?"
    assert out[-1] == "1 release(s) run here"


def test_the_dll_is_found_in_old_and_new_wheel_layouts(tmp_path: Path) -> None:
    old = ["onnxruntime_directml-1.10.0.data/purelib/onnxruntime/capi/DirectML.dll", "x/onnxruntime.dll"]
    assert provision.wheel_member(old) == old[0]
    assert provision.wheel_member(["onnxruntime/capi/DirectML.dll"]) == "onnxruntime/capi/DirectML.dll"
    with pytest.raises(KeyError):
        provision.wheel_member(["onnxruntime/capi/NotDirectML.dll", "capi/DirectML.dll.bak"])
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(old[0], b"dll")
    with zipfile.ZipFile(wheel) as z:
        assert z.read(provision.wheel_member(z.namelist())) == b"dll"


# --------------------------------------------------------------------------------------------
# the corpus


def test_corpus_is_deterministic_and_every_probe_is_what_its_id_says(probes: list[acc.Probe]) -> None:
    again = acc.corpus(SPEC, SMALL)
    assert [p.id for p in again] == [p.id for p in probes]
    assert [p.desc for p in again] == [p.desc for p in probes]
    assert len({p.id for p in probes}) == len(probes)
    for p in probes:
        found = {v.rule for v in validate(p.desc, p.level, SPEC)}
        assert found == ({p.rule} if p.kind == "illegal" else set()), p.id
    levels = {p.level for p in probes}
    assert levels == {lv.name for lv in SPEC.levels}  # below an introduction, 'available' is broken
    assert {p.kind for p in probes if p.operator == "MEAN_VARIANCE_NORMALIZATION2" and p.level == "5_0"} == {
        "illegal"
    }


def test_ask_maps_backend_answers_to_verdicts() -> None:
    def raising(exc: Exception):
        def check(desc: OperatorDesc) -> None:
            raise exc

        return check

    desc = OperatorDesc("MEAN_VARIANCE_NORMALIZATION1", {})
    assert acc.ask(lambda d: None, desc).verdict == acc.ACCEPTED
    # a refusal keeps its stage; a check that names none (a validator) refused at creation
    assert acc.ask(raising(Rejected("E_INVALIDARG")), desc) == acc.Answer(
        acc.REFUSED, "E_INVALIDARG", "create"
    )
    compiled = acc.ask(raising(Rejected("no", stage="compile", hresult=0x80070057)), desc)
    assert (compiled.verdict, compiled.stage, compiled.hresult) == (acc.REFUSED, "compile", 0x80070057)
    assert acc.ask(raising(Unsupported("C cannot")), desc).verdict == acc.INEXPRESSIBLE
    assert acc.ask(raising(RuntimeError("crashed")), desc).verdict == acc.ERROR
    # another HRESULT from a stage is its own outcome, never a refusal
    overflow = acc.ask(raising(Failure("overflow", stage="compile", hresult=0x8007023E)), desc)
    assert (overflow.verdict, overflow.stage, overflow.hresult) == (acc.FAILED, "compile", 0x8007023E)
    assert acc.ask(raising(Failure("where?")), desc).verdict == acc.ERROR


def test_answers_files_round_trip_and_sort_by_release_number(tmp_path: Path, probes: list[acc.Probe]) -> None:
    for release, level in (("1.12.0", "6_1"), ("1.9.1", "5_0")):
        acc.write_answers(answers_for(release, level, probes), tmp_path)
    loaded = acc.load_answers(tmp_path)
    assert [a.release for a in loaded] == ["1.9.1", "1.12.0"]
    assert loaded[0].verdicts == answers_for("1.9.1", "5_0", probes).verdicts
    (tmp_path / "acceptance-9.9.9.json").write_text('{"format": 99}')
    with pytest.raises(ValueError, match="acceptance-9.9.9.json"):
        acc.load_answers(tmp_path)


# --------------------------------------------------------------------------------------------
# the matrix and availability


def test_a_release_that_implements_the_spec_agrees_everywhere(probes: list[acc.Probe]) -> None:
    expect = matrix.Expectations(SPEC)
    a = answers_for("1.15.4", "6_4", probes)
    judged = matrix.judge(expect, probes, a)
    assert matrix.disagreements(judged) == []
    totals = matrix.acceptance(SPEC, judged, "1.15.4", "6_4").totals()
    assert totals[matrix.LEGAL].refused == 0 and totals["illegal"].accepted == 0
    assert totals[matrix.LEGAL].accepted > 0 and totals["illegal"].refused > 0
    assert totals[matrix.LEGAL].total + totals["illegal"].total == len(probes)  # every level is <= 6_4


def test_a_lax_release_disagrees_exactly_on_the_planted_rule(probes: list[acc.Probe]) -> None:
    expect = matrix.Expectations(SPEC)
    lax = answers_for("1.15.4", "6_4", probes, ignore=frozenset({"axes-unique"}))
    wrong = matrix.disagreements(matrix.judge(expect, probes, lax))
    assert wrong
    assert {j.expected for j in wrong} == {("axes-unique",)}
    assert all(j.verdict == acc.ACCEPTED for j in wrong)
    # judged at the release's level: a 5_0 release refusing a 6_4-only operator agrees
    old = matrix.judge(expect, probes, answers_for("1.9.1", "5_0", probes))
    mvn2 = [j for j in old if j.probe.operator == "MEAN_VARIANCE_NORMALIZATION2"]
    assert mvn2 and all(j.verdict == acc.REFUSED and j.agrees for j in mvn2)


def test_availability_confronts_each_boundary_with_the_releases_around_it(probes: list[acc.Probe]) -> None:
    expect = matrix.Expectations(SPEC)
    releases = [answers_for("1.9.1", "5_0", probes), answers_for("1.15.4", "6_4", probes)]
    bounds = {(b.operator, b.level, b.rule): b for b in matrix.availability(SPEC, expect, probes, releases)}
    mvn2 = bounds[("MEAN_VARIANCE_NORMALIZATION2", "6_3", "available")]
    assert mvn2.straddled and mvn2.witnesses and mvn2.agrees is True
    assert mvn2.below == [("1.9.1", "5_0")] and mvn2.above == [("1.15.4", "6_4")]
    gradients = bounds[("BATCH_NORMALIZATION_TRAINING_GRAD", "4_1", "available")]
    assert not gradients.straddled and gradients.reason() == "no release here is below 4_1"
    # a 5_0 release that fuses GELU anyway: the 5_1 boundary no longer agrees, the others do
    gelu = [answers_for("1.9.1", "5_0", probes, ignore=frozenset({"activation-available"})), releases[1]]
    again = {(b.operator, b.level, b.rule): b for b in matrix.availability(SPEC, expect, probes, gelu)}
    assert any(b.agrees is False for k, b in again.items() if k[1] == "5_1")
    assert again[("MEAN_VARIANCE_NORMALIZATION2", "6_3", "available")].agrees is True


# --------------------------------------------------------------------------------------------
# findings


def test_the_registry_is_consistent_with_the_spec_and_the_cases() -> None:
    reg = findings.registry()
    assert set(reg.decisions) == set(findings.DECISIONS)
    rules = {r.id for op in SPEC.operators.values() for r in op.rules}
    rules |= {r.id for r in (*SPEC.tensor_rules, *SPEC.activation_rules)}
    for f in reg.findings:
        for claim in f.acceptance:
            assert claim.rule in rules | {"legal"}, (f.id, claim.rule)
            assert claim.verdict in (acc.ACCEPTED, acc.REFUSED)
            assert claim.stage in (acc.CREATE, acc.COMPILE, acc.EXECUTE)
            assert claim.activation is None or claim.activation in SPEC.activations
            assert claim.operators and set(claim.operators) <= set(SPEC.operators), (f.id, claim.operators)
            for op in claim.operators:
                if claim.rule != "legal":  # the rule binds every operator the claim names
                    assert claim.rule in {r.id for r in SPEC.rules_for(SPEC.operator(op))}, (f.id, op)
                members = {m.name for m in SPEC.operator(op).members}
                subjects = claim.when.subjects if claim.when else set()
                assert subjects <= members | set(predicates.DERIVED), (f.id, op, subjects - members)
        for r in f.reproducers:
            assert (ROOT / r.path / "case.json").is_file(), r.path
            assert r.shows in ("passed", "failed")
        if f.experiment:
            assert (ROOT / f.experiment).is_file()
    assert [f.id for f in reg.findings] == [f"F{i}" for i in range(1, len(reg.findings) + 1)]


def test_disagreements_are_decided_only_when_every_rule_is_claimed() -> None:
    reg = findings.registry()
    mvn1 = "MEAN_VARIANCE_NORMALIZATION1"

    def answer(verdict: str, stage: str, operator: str = mvn1, activation: str | None = None):
        return findings.Answer(verdict, stage, operator, activation)

    assert reg.explain_disagreement(("axes-unique",), answer(acc.ACCEPTED, "compile")) == ["F3"]
    both = reg.explain_disagreement(
        ("activation-available", "axes-unique"), answer(acc.ACCEPTED, "compile", activation="ACTIVATION_GELU")
    )
    assert sorted(both) == ["F3", "F8"]
    gelu_on_lrn = answer(acc.ACCEPTED, "compile", "LOCAL_RESPONSE_NORMALIZATION", "ACTIVATION_GELU")
    assert reg.explain_disagreement(("activation-available",), gelu_on_lrn) == []  # not F8's operator
    celu = answer(acc.ACCEPTED, "compile", activation="ACTIVATION_CELU")
    assert reg.explain_disagreement(("activation-available",), celu) == []
    assert reg.explain_disagreement(("axes-unique",), answer(acc.REFUSED, "create")) == []
    assert (
        reg.explain_disagreement((), answer(acc.REFUSED, "compile")) == []
    )  # a refused legal desc: nobody's
    # an acceptance is claimed at any stage it got through; a refusal only at the stage that gave it
    assert reg.explain_disagreement(("axes-unique",), answer(acc.ACCEPTED, "create")) == ["F3"]
    assert reg.explain_disagreement(("axes-unique",), answer(acc.ACCEPTED, None)) == []
    assert reg.explain_case("numeric[MEAN_VARIANCE_NORMALIZATION-6_4-FLOAT16-0001]") == "F1"
    assert reg.explain_case("numeric[MEAN_VARIANCE_NORMALIZATION-6_4-FLOAT32-n65537-0000]") == "F2"
    assert reg.explain_case("numeric[MEAN_VARIANCE_NORMALIZATION-6_4-FLOAT32-0001]") is None
    # F5 (MVN1 over one-element slices gives NaN) claims a metamorphic case whose MVN1 side is
    # such a reduction, and no other case of that relation
    mvn1_side = "metamorphic[BATCH_NORMALIZATION_TRAINING-6_3-FLOAT32-output-is-mvn1-over-scale-ones-0001]"
    assert reg.explain_case(mvn1_side, 1) == "F5"
    assert reg.explain_case(mvn1_side, 7) is None
    assert reg.explain_case(mvn1_side) is None


def test_a_registry_with_an_unknown_decision_is_refused() -> None:
    text = (ROOT / "dmlconform/releases/findings.yaml").read_text()
    with pytest.raises(ValueError, match="unknown decision"):
        findings.parse(text.replace("decision: stack", "decision: shrug"))


# --------------------------------------------------------------------------------------------
# the published table


def _sweep_dir(tmp_path: Path, probes: list[acc.Probe], lax: frozenset[str]) -> Path:
    out = tmp_path / "sweep"
    rows = []
    for release, level, ignore in (("1.9.1", "5_0", frozenset()), ("1.15.4", "6_4", lax)):
        acc.write_answers(answers_for(release, level, probes, ignore), out)
        rows.append(
            {
                "release": release,
                "wheel": "onnxruntime-directml==x",
                "installed": True,
                "status": {"runs": True, "max_feature_level": level, "detail": "self-test passed"},
            }
        )
    rows.append(
        {
            "release": "1.10.1",
            "wheel": "onnxruntime-directml==1.14.1",
            "installed": True,
            "table_note": "records nothing",
            "status": {
                "runs": False,
                "max_feature_level": "5_2",
                "detail": "self-test failed: device removed",
            },
        }
    )
    (out / "releases.json").write_text(json.dumps({"releases": rows}))
    return out


def test_publish_renders_every_section_and_names_the_deciding_finding(
    tmp_path: Path, probes: list[acc.Probe]
) -> None:
    out = _sweep_dir(tmp_path, probes, frozenset({"axes-unique"}))
    sweep = publish.load(out, SPEC)
    text, health = publish.render(sweep, SPEC)
    assert (health["undecided"], health["unexplained"], health["failed"]) == (0, 0, 0)
    for heading in (
        "## Releases",
        "## Acceptance",
        "### Every disagreement",
        "## Availability",
        "## Findings",
    ):
        assert heading in text
    assert "| 1.10.1 | `onnxruntime-directml==1.14.1` | 5_2 | cannot run here: self-test failed" in text
    row = next(line for line in text.splitlines() if line.startswith("| F3 | MEAN_VARIANCE_NORMALIZATION1"))
    assert "| axes-unique | accepted | 1.15.4 (" in row
    assert "| MEAN_VARIANCE_NORMALIZATION2 | 6_3 | operator-added" in text


def test_publish_counts_an_unclaimed_disagreement_and_the_cli_fails(
    tmp_path: Path, probes: list[acc.Probe], capsys: pytest.CaptureFixture[str]
) -> None:
    out = _sweep_dir(tmp_path, probes, frozenset({"output-sizes"}))
    text, health = publish.render(publish.load(out, SPEC), SPEC)
    assert health["undecided"] > 0
    assert "| undecided |" in text
    doc = tmp_path / "doc.md"
    capsys.readouterr()
    assert main(["directml", "publish", str(out), "--out", str(doc)]) == 1
    assert doc.read_text() == text  # written all the same
    (line,) = capsys.readouterr().err.splitlines()  # one line: how many, and one of them
    assert f"{health['undecided']} undecided disagreement(s)" in line and "e.g. probe " in line
    assert line.split("e.g. probe ")[1].split()[0] in text  # an id the page lists as undecided
    assert main(["directml", "publish", str(tmp_path / "nowhere")]) == 2
    assert "not a sweep directory" in capsys.readouterr().err


def test_publish_judges_the_wave_ops_off_runs_and_replays_beside_the_default(
    tmp_path: Path, probes: list[acc.Probe]
) -> None:
    """A sweep judges both wave_ops settings (sweep.py): the off runs get their own table naming
    each case whose outcome moved, their failures are claimed by findings or counted unexplained
    like the default's, and each reproducer's replays are shown per setting."""
    out = _sweep_dir(tmp_path, probes, frozenset({"axes-unique"}))
    long_case = "numeric[MEAN_VARIANCE_NORMALIZATION1-6_4-FLOAT32-n65535-0000]"  # claimed by F2
    wave_case = "numeric[MEAN_VARIANCE_NORMALIZATION1-6_4-FLOAT32-0003]"  # no finding claims it
    for directory, said, outcomes in (
        (out / "runs" / "1.15.4", "on: 32 lanes (the device itself: none)", {long_case: ("failed", 2.0)}),
        (
            out / "runs-wave-ops-off" / "1.15.4",
            "off: none (the device itself: none)",
            {long_case: ("failed", 3.0), wave_case: ("failed", 1.5)},
        ),
    ):
        if wave_case not in outcomes:
            outcomes[wave_case] = ("passed", 0.2)
        _results(directory, "1.15.4", "6_4", outcomes)
        data = json.loads((directory / "results.json").read_text())
        data["versions"]["fake.wave_ops"] = said
        (directory / "results.json").write_text(json.dumps(data))
    repro = "cases/directml/float32-long-reduction"
    (out / "replays.json").write_text(json.dumps({"F2": {repro: {"1.15.4": {"outcome": "passed"}}}}))
    (out / "replays-wave-ops-off.json").write_text(
        json.dumps({"F2": {repro: {"1.15.4": {"outcome": "failed"}}}})
    )
    sweep = publish.load(out, SPEC)
    assert set(sweep.runs) == {"1.15.4"} and set(sweep.other_runs["off"]) == {"1.15.4"}
    text, health = publish.render(sweep, SPEC)
    assert (health["undecided"], health["unexplained"]) == (0, 1)  # wave_case, under off only
    assert "### The same runs with `wave_ops=off`" in text
    moved = next(line for line in text.splitlines() if line.startswith("| 1.15.4 | 2 |"))
    assert f"`{wave_case}` (passed -> failed)" in moved and long_case not in moved
    f2 = next(line for line in text.splitlines() if line.startswith("| F2 |"))
    assert "1.15.4 (1), 1.15.4 wave_ops=off (1)" in f2
    assert f"`{repro}`: none; wave_ops=off: 1.15.4" in f2
    assert f"- 1.15.4 wave_ops=off: `{wave_case}`" in text
    assert "on: 32 lanes (the device itself: none) (`runs/`)" in text
    assert "off: none (the device itself: none) (`runs-wave-ops-off/`)" in text


# --------------------------------------------------------------------------------------------
# `report releases`


def _results(path: Path, release: str, level: str, outcomes: dict[str, tuple[str, float]]) -> Path:
    cases = []
    for case_id, (outcome, ratio) in outcomes.items():
        kind, rest = case_id.split("[", 1)
        op, lv, dt = rest.split("-")[:3]
        cases.append(
            {
                "id": case_id,
                "outcome": outcome,
                "kind": kind,
                "operator": op,
                "feature_level": lv,
                "data_type": dt,
                "errors": {"ratio": ratio, "max_ulp": ratio, "budget_ulp": 1.0},
            }
        )
    path.mkdir(parents=True)
    data = {
        "schema_version": 1,
        "backend": {"name": "fake"},
        "feature_level": level,
        "spec_hash": "h",
        "complete": True,
        "versions": {"fake": f"{release}+build"},
        "cases": cases,
    }
    (path / "results.json").write_text(json.dumps(data))
    return path


def test_report_releases_orders_by_release_and_names_each_changed_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = _results(
        tmp_path / "b",
        "1.12.0",
        "6_1",
        {
            "numeric[MVN-5_0-FLOAT32-0000]": ("failed", 3.0),
            "numeric[MVN-5_0-FLOAT16-0000]": ("passed", 0.5),
            "numeric[MVN-6_1-FLOAT32-0000]": ("failed", 2.0),
        },
    )
    older = _results(
        tmp_path / "a",
        "1.9.1",
        "5_0",
        {"numeric[MVN-5_0-FLOAT32-0000]": ("passed", 0.25), "numeric[MVN-5_0-FLOAT16-0000]": ("failed", 7.0)},
    )
    assert main(["report", "releases", str(newer), str(older), "--format", "json"]) == 0
    view: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in view["releases"]] == ["1.9.1", "1.12.0"]
    (step,) = view["steps"]
    assert [c["id"] for c in step["to_failing"]] == ["numeric[MVN-5_0-FLOAT32-0000]"]
    assert [c["id"] for c in step["to_passing"]] == ["numeric[MVN-5_0-FLOAT16-0000]"]
    assert (step["common"], step["only_newer"], step["only_newer_failing"]) == (2, 1, 1)
    worst = {(w["operator"], w["data_type"]): w["ratio"] for w in view["releases"][1]["worst"]}
    assert worst[("MVN", "FLOAT32")] == 3.0
    assert main(["report", "releases", str(older), str(older)]) == 2
    assert "same release" in capsys.readouterr().err


def test_conformance_runs_go_two_at_a_time_and_report_in_release_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep's runs overlap (PARALLEL_RUNS), yet its log and sweep.json keep release order
    whichever run ends first."""
    import threading
    import time as _time

    from dmlconform.releases import sweep

    running, most = [0], [0]
    lock = threading.Lock()

    def fake(version: str, settings: object, out: Path, wave_ops: str) -> tuple[str, dict, str]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        _time.sleep(0.2 if version == "1.8.0" else 0.05)  # the first release ends last
        with lock:
            running[0] -= 1
        return version, {"seconds": 0}, f"ran {version}"

    monkeypatch.setattr(sweep, "_one_run", fake)
    log: list[str] = []
    done = sweep.run_conformance(["1.8.0", "1.13.1", "1.15.4"], sweep.SweepSettings(), tmp_path, log.append)
    assert log == ["ran 1.8.0", "ran 1.13.1", "ran 1.15.4"]
    assert list(done) == ["1.8.0", "1.13.1", "1.15.4"]
    assert most[0] == sweep.PARALLEL_RUNS == 2
