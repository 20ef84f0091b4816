"""The report package without a browser: results.json loading, index.html and summary.md content,
escaping of hostile text, the compact embedded data, and `dmlconform report` / `report diff`."""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))

from synthetic_results import make_results, write_results  # noqa: E402

from dmlconform.cli import main  # noqa: E402
from dmlconform.report import ResultsError, diff_results, load_results, render_html, write_reports  # noqa: E402
from dmlconform.report.case_data import build_case_data  # noqa: E402
from dmlconform.report.formatting import json_for_script  # noqa: E402

HOSTILE = "<script>alert(1)</script> \"&' </script><!-- \u2028"


def embedded_data(html: str) -> dict:
    match = re.search(r'<script type="application/json" id="case-data">(.*?)</script>', html, re.S)
    assert match, "no embedded case data"
    return json.loads(match.group(1))


@pytest.fixture
def report_dir(tmp_path: Path) -> Path:
    write_results(tmp_path, make_results(300, seed=3))
    return tmp_path


def test_write_reports_writes_both_pages(report_dir: Path) -> None:
    written = write_reports(report_dir)
    assert [p.name for p in written] == ["index.html", "summary.md"]
    html = (report_dir / "index.html").read_text()
    results = json.loads((report_dir / "results.json").read_text())
    # Header facts and the reproduce command.
    assert results["command"] in html
    assert "CPUExecutionProvider" in html and "numba=0.59.1" in html
    # Every failing case is reachable: in the embedded data with a detail record.
    data = embedded_data(html)
    assert len(data["rows"]) == 300
    failing = [c for c in results["cases"] if c["outcome"] in ("failed", "error")]
    assert failing
    outcome_col, detail_col = data["cols"].index("outcome"), data["cols"].index("detail")
    failed_rows = [r for r in data["rows"] if data["outcomes"][r[outcome_col]] in ("failed", "error")]
    assert len(failed_rows) == len(failing)
    assert all(r[detail_col] >= 0 for r in failed_rows)
    # The worst failure's replay command and desc are rendered server-side too.
    assert failing[0]["replay"] in html or any(c["replay"] in html for c in failing)
    assert "DML_OPERATOR_" in html
    # Self-contained: no external resources.
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<link" not in html


def test_matrix_and_coverage(report_dir: Path) -> None:
    write_reports(report_dir)
    html = (report_dir / "index.html").read_text()
    matrix = html[
        html.index('<table class="matrix">') : html.index("</table>", html.index('<table class="matrix">'))
    ]
    for op in ("MEAN_VARIANCE_NORMALIZATION1", "BATCH_NORMALIZATION_TRAINING"):
        assert f'data-op="{op}"' in matrix
    assert "#cases?op=BATCH_NORMALIZATION_TRAINING&amp;level=4_1&amp;dtype=FLOAT32" in matrix
    # The synthetic run never exercises bias-broadcast of BATCH_NORMALIZATION_TRAINING.
    row = re.search(r'<tr class="st-untested"><td><code>bias-broadcast</code>', html)
    assert row, "an untested rule is highlighted"


def test_summary_markdown(report_dir: Path) -> None:
    write_reports(report_dir)
    md = (report_dir / "summary.md").read_text()
    summary = load_results(report_dir).summary()
    assert f"| {summary['total']} | {summary['passed']} | {summary['failed']} |" in md
    assert "| operator |" in md and "| BATCH_NORMALIZATION_TRAINING |" in md
    assert "### Top failures" in md and "(budget " in md  # the worst element's error and its own budget
    assert "index.html" in md


def test_hostile_text_is_escaped(tmp_path: Path) -> None:
    doc = make_results(40, seed=1)
    doc["backend"]["description"] = "<b>bold</b> " + HOSTILE
    doc["command"] = "dmlconform run --backend x # " + HOSTILE
    case = next(c for c in doc["cases"] if c["outcome"] == "failed")
    case["message"] = HOSTILE
    case["desc"]["desc"]["Note"] = "<img src=x onerror=alert(2)>"
    write_results(tmp_path, doc)
    write_reports(tmp_path)
    html = (tmp_path / "index.html").read_text()
    assert "<script>alert(1)" not in html
    assert "<img" not in html and "<b>bold" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # The JSON blob cannot close its element and still decodes to the original text.
    data = embedded_data(html)
    assert HOSTILE in data["msgs"]
    md = (tmp_path / "summary.md").read_text()
    outside_code = re.sub(r"`[^`\n]*`", "", md)  # code spans show their text literally
    assert "<script>" not in outside_code and "&lt;script&gt;" in md


def test_json_for_script_escapes_markup() -> None:
    text = str(json_for_script({"a": "</script><!--\u2028\u2029"}))
    assert "<" not in text and "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == {"a": "</script><!--\u2028\u2029"}


def test_non_finite_errors_render(tmp_path: Path) -> None:
    doc = make_results(30, seed=2)
    case = next(c for c in doc["cases"] if c["errors"])
    case["outcome"] = "failed"
    case["errors"]["max_ulp"] = float("inf")
    case["errors"]["worst"]["backend"] = float("nan")
    write_results(tmp_path, doc)  # json.dumps writes Infinity/NaN, as Python's json module reads
    write_reports(tmp_path)
    data = embedded_data((tmp_path / "index.html").read_text())  # strict JSON: no Infinity literal
    assert "inf" in json.dumps(data["rows"])


def test_compact_rows_scale(tmp_path: Path) -> None:
    """Bytes per case bound the 50,000-case page: well under 200 bytes each keeps it under 10 MB."""
    results_path = write_results(tmp_path, make_results(3000, seed=5))
    html = render_html(load_results(results_path))
    assert len(html.encode()) / 3000 < 200
    data = build_case_data(load_results(results_path), [])
    assert all(isinstance(r, list) for r in data["rows"])
    # Canonical ids are rebuilt in the page rather than stored.
    assert sum(1 for r in data["rows"] if r[0] == 0) == 3000


@pytest.mark.parametrize(
    "content", [None, "{not json", '{"cases": 3}', "[]", '{"schema_version": 99, "cases": []}']
)
def test_unusable_results(tmp_path: Path, content: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    if content is not None:
        (tmp_path / "results.json").write_text(content)
    with pytest.raises(ResultsError):
        load_results(tmp_path)
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dmlconform report render: error:")


def test_cli_report_dir(report_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(report_dir)]) == 0
    out = capsys.readouterr().out
    assert "index.html" in out and "summary.md" in out
    assert (report_dir / "index.html").stat().st_size > 10_000
    assert main(["report", str(report_dir / "results.json")]) == 0


def exit_code(argv: list[str]) -> int:
    """``main(argv)``'s exit status: returned, or raised by argparse (a usage error)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["diff", "{r}"], "dmlconform report diff: error: the following arguments are required: NEW"),
        (["{r}", "{r}"], "dmlconform report render: error: unrecognized arguments: {r}"),
        (
            ["{r}", "--format", "json"],
            "dmlconform report render: error: unrecognized arguments: --format json",
        ),
        (["merge", "{r}"], "dmlconform report merge: error: merge needs -o/--out DIR"),
        (["releases", "{r}", "--factor", "2"], "dmlconform report releases: error: unrecognized arguments"),
        ([], "dmlconform report: error: the following arguments are required: ACTION"),
    ],
)
def test_cli_usage_errors(
    report_dir: Path, argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each action takes its own options only, and says so in one line naming itself."""
    r = str(report_dir)
    assert exit_code(["report", *(a.format(r=r) for a in argv)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(line.format(r=r)) and err.count("\n") == 1, err


@pytest.mark.parametrize("action", ["render", "diff", "merge", "releases"])
def test_each_report_action_has_its_own_help(action: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``report ACTION --help`` is that action's: its usage line, its positionals, its options."""
    assert exit_code(["report", action, "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: dmlconform report {action} ")
    assert "Exit status" in " ".join(text.split())
    wanted = {
        "render": ["DIR"],
        "diff": ["OLD NEW", "--factor F", "-o FILE, --out FILE", "--allow-lost"],
        "merge": ["R [R ...]", "-o DIR, --out DIR", "--allow-incomplete"],
        "releases": ["R [R ...]", "-o FILE, --out FILE", "--format"],
    }[action]
    for piece in wanted:
        assert piece in text, (piece, text)
    if action != "diff":
        assert "--factor" not in text and "--allow-lost" not in text


def test_report_help_lists_every_action(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(["report", "--help"]) == 0
    text = capsys.readouterr().out
    for action in ("render", "diff", "merge", "releases"):
        assert f"\n    {action} " in text, text


def test_report_render_is_report_dir(report_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (report_dir / "index.html").unlink(missing_ok=True)
    assert main(["report", "render", str(report_dir)]) == 0
    assert (report_dir / "index.html").is_file()


# --------------------------------------------------------------------------- diff


def _flip(doc: dict, index: int, outcome: str, **errors: float) -> dict:
    case = doc["cases"][index]
    case["outcome"] = outcome
    case["message"] = None if outcome == "passed" else "OutputTensor: 99 ULP > budget"
    if errors:
        case["errors"] = {**(case["errors"] or {}), **errors}
    return case


@pytest.fixture
def baseline() -> dict:
    doc = make_results(120, seed=7)
    # Deterministic cases to flip: two passing numeric ones and one failing one.
    numeric = [i for i, c in enumerate(doc["cases"]) if c["kind"] == "numeric" and c["outcome"] == "passed"]
    doc["_passing"] = numeric[:3]
    failing = [i for i, c in enumerate(doc["cases"]) if c["outcome"] == "failed"]
    doc["_failing"] = failing[:1]
    return doc


def _write(path: Path, doc: dict) -> Path:
    doc = {k: v for k, v in doc.items() if not k.startswith("_")}
    return write_results(path, doc)


def test_diff_identical_is_clean(tmp_path: Path, baseline: dict, capsys: pytest.CaptureFixture[str]) -> None:
    old = _write(tmp_path / "old", baseline)
    new = _write(tmp_path / "new", baseline)
    diff = diff_results(load_results(old), load_results(new))
    assert not diff.regressions and not diff.fixed and not diff.error_changes
    assert main(["report", "diff", str(old), str(new)]) == 0
    assert "0 regression(s), 0 fixed" in capsys.readouterr().out


def test_diff_regressions_fixes_and_error_changes(
    tmp_path: Path, baseline: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    new_doc = copy.deepcopy(baseline)
    p0, p1, p2 = baseline["_passing"]
    regressed = _flip(new_doc, p0, "failed")
    fixed_index = baseline["_failing"][0]
    fixed = _flip(new_doc, fixed_index, "passed")
    worse = new_doc["cases"][p1]
    worse["errors"]["max_ulp"] = max(worse["errors"]["max_ulp"], 1.0) * 3  # still passing, 3x worse
    new_case = copy.deepcopy(new_doc["cases"][p2])
    new_case["id"] = "numeric[BRAND_NEW-6_4-FLOAT32-9999]"
    new_case["outcome"] = "error"
    new_doc["cases"].append(new_case)
    old = _write(tmp_path / "old", baseline)
    new = _write(tmp_path / "new", new_doc)

    diff = diff_results(load_results(old), load_results(new))
    assert {c.id for c in diff.regressions} == {regressed["id"], new_case["id"]}
    assert [c.id for c in diff.fixed] == [fixed["id"]]
    assert worse["id"] in {e.id for e in diff.error_changes}
    assert diff.added == 1

    assert main(["report", "diff", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "Regressions:" in out and regressed["id"] in out and "passed -> failed" in out
    assert "Fixed:" in out and fixed["id"] in out
    assert "new -> error" in out

    assert main(["report", "diff", str(old.parent), str(new.parent), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["has_regressions"] is True and len(data["regressions"]) == 2

    assert main(["report", "diff", str(old), str(new), "--format", "markdown"]) == 1
    assert "### Regressions" in capsys.readouterr().out

    # Reversed: the fix is now the one regression, the regression a fix, the new case gone.
    reverse = diff_results(load_results(new), load_results(old))
    assert [c.id for c in reverse.regressions] == [fixed["id"]]
    assert [c.id for c in reverse.fixed] == [regressed["id"]]
    assert reverse.removed == [new_case["id"]]


def _set_errors(case: dict, ulp: float, ratio: float) -> None:
    case["errors"]["max_ulp"] = ulp
    case["errors"]["ratio"] = ratio


def test_diff_budget_crossing_and_factor(tmp_path: Path, baseline: dict) -> None:
    new_doc = copy.deepcopy(baseline)
    case = new_doc["cases"][baseline["_passing"][0]]
    budget = case["errors"]["budget_ulp"]
    old_case = baseline["cases"][baseline["_passing"][0]]
    _set_errors(old_case, budget * 0.9, 0.9)
    _flip(new_doc, baseline["_passing"][0], "failed")
    _set_errors(case, budget * 1.1, 1.1)  # 1.22x: under the factor, but across the budget
    diff = diff_results(
        load_results(_write(tmp_path / "a", baseline)), load_results(_write(tmp_path / "b", new_doc))
    )
    change = next(e for e in diff.error_changes if e.id == case["id"])
    assert change.crossed_budget and change.worse
    assert (change.before_ratio, change.after_ratio) == (0.9, 1.1)
    # Sub-ULP noise is not a change: 0.1 -> 0.3 ULP.
    old_case["errors"]["max_ulp"], case["errors"]["max_ulp"] = 0.1, 0.3
    case["outcome"], case["errors"]["ratio"] = "passed", 0.3
    diff = diff_results(
        load_results(_write(tmp_path / "a", baseline)), load_results(_write(tmp_path / "b", new_doc))
    )
    assert case["id"] not in {e.id for e in diff.error_changes}


def test_diff_passed_in_both_never_crossed_a_budget(tmp_path: Path, baseline: dict) -> None:
    """max_ulp and budget_ulp can come from different elements: a case that passed in both runs
    stayed inside its budget, whatever those two figures say."""
    new_doc = copy.deepcopy(baseline)
    index = baseline["_passing"][0]
    budget = baseline["cases"][index]["errors"]["budget_ulp"]
    _set_errors(baseline["cases"][index], budget * 0.5, 0.5)
    _set_errors(new_doc["cases"][index], budget * 3, 0.8)  # max ULP above budget_ulp, yet passed
    diff = diff_results(
        load_results(_write(tmp_path / "a", baseline)), load_results(_write(tmp_path / "b", new_doc))
    )
    change = next(e for e in diff.error_changes if e.id == baseline["cases"][index]["id"])
    assert change.worse and not change.crossed_budget
    assert "crossed budget" not in diff.format_text() and "crossed budget" not in diff.format_markdown()


def test_diff_failed_relation_shows_no_invented_figures(tmp_path: Path, baseline: dict) -> None:
    """A relation judged on a sum has no ULP figures: the line must not claim '0 ULP, budget -'."""
    new_doc = copy.deepcopy(baseline)
    index = baseline["_passing"][0]
    case = _flip(new_doc, index, "failed")
    case["kind"] = baseline["cases"][index]["kind"] = "metamorphic"
    relation = {"max_abs": 0.51, "max_ulp": 0.0, "budget_ulp": None, "outputs": {}, "worst": None}
    case["errors"] = relation
    baseline["cases"][index]["errors"] = {**relation, "max_abs": 0.0}
    case["message"] = "OutputGradientTensor: sum(gradient * step) = 0 but the central difference gives -0.51"
    diff = diff_results(
        load_results(_write(tmp_path / "a", baseline)), load_results(_write(tmp_path / "b", new_doc))
    )
    text = diff.format_text()
    assert [c.id for c in diff.regressions] == [case["id"]]
    assert "0 ULP" not in text and "budget -" not in text and "central difference" in text
    assert case["id"] not in {e.id for e in diff.error_changes}


OUTCOME_CHOICES = ("passed", "failed", "skipped", "xfailed", "xpassed", "error", None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_diff_is_symmetric(tmp_path: Path, data: st.DataObject) -> None:
    """Swapping OLD and NEW: regressions become fixes or failures no longer run, error changes
    keep their ids and crossings and flip worse/better, lost cases become new ones."""
    base = make_results(24, seed=5)
    sides = []
    for _ in range(2):
        doc = copy.deepcopy(base)
        kept = []
        for case in doc["cases"]:
            outcome = data.draw(st.sampled_from(OUTCOME_CHOICES))
            if outcome is None:
                continue  # the case is absent from this run
            case["outcome"] = outcome
            if outcome in ("skipped", "error"):
                case["errors"] = None
            elif case["errors"] is not None:
                ratio = data.draw(st.floats(0.01, 0.99) if outcome == "passed" else st.floats(0.01, 50))
                case["errors"]["max_ulp"] = ratio * case["errors"]["budget_ulp"]
                case["errors"]["ratio"] = ratio
            kept.append(case)
        doc["cases"] = kept
        sides.append(load_results(write_results(tmp_path / f"side{len(sides)}", doc)))
    ab, ba = diff_results(sides[0], sides[1]), diff_results(sides[1], sides[0])
    assert {c.id for c in ab.regressions} == {c.id for c in ba.fixed} | {c.id for c in ba.unrun}
    assert {c.id for c in ba.regressions} == {c.id for c in ab.fixed} | {c.id for c in ab.unrun}
    forward = {e.id: e for e in ab.error_changes}
    backward = {e.id: e for e in ba.error_changes}
    assert forward.keys() == backward.keys()
    for key, e in forward.items():
        assert backward[key].crossed_budget == e.crossed_budget and backward[key].worse != e.worse
    assert len(ab.removed) == ba.added and len(ba.removed) == ab.added


def test_diff_that_loses_cases_fails_unless_allowed(
    tmp_path: Path, baseline: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    new_doc = copy.deepcopy(baseline)
    gone = new_doc["cases"].pop(baseline["_passing"][0])
    skipped = new_doc["cases"][baseline["_passing"][1] - 1]
    skipped["outcome"], skipped["errors"] = "skipped", None
    old, new = _write(tmp_path / "old", baseline), _write(tmp_path / "new", new_doc)
    diff = diff_results(load_results(old), load_results(new))
    assert diff.removed == [gone["id"]] and diff.skipped_now == [skipped["id"]]
    assert not diff.has_regressions and diff.lost == 2 and diff.fails
    assert main(["report", "diff", str(old), str(new)]) == 1
    captured = capsys.readouterr()
    assert "LOST: 2 case(s) of OLD have no verdict in NEW (1 absent, 1 skipped now)" in captured.out
    assert "--allow-lost" in captured.err
    assert main(["report", "diff", str(old), str(new), "--allow-lost"]) == 0
    assert "accepted (--allow-lost)" in capsys.readouterr().out
    assert main(["report", "diff", str(old), str(new), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["lost"] == 2 and data["fails"] is True and data["has_regressions"] is False


def test_diff_unusable_input(tmp_path: Path, baseline: dict, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(tmp_path / "good", baseline)
    assert main(["report", "diff", str(good), str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_replay_commands_are_framed(tmp_path: Path) -> None:
    """Replay commands are stored once as a frame around the reproducer path; a case without a
    replay command is marked so the page does not invent one."""
    doc = make_results(200, seed=9)
    failing = [c for c in doc["cases"] if c["outcome"] == "failed"]
    failing[0]["replay"] = None
    failing[1]["replay"] = "custom replay command"
    results = load_results(write_results(tmp_path, doc))
    notable = [c for c in results.cases if c.outcome in ("failed", "error")]
    data = build_case_data(results, notable)
    prefix, suffix = data["replay"]
    by_id = {c.id: d for c, d in zip(notable, data["details"], strict=True)}
    assert by_id[failing[0]["id"]]["cmd"] == 0
    assert by_id[failing[1]["id"]]["cmd"] == "custom replay command"
    other = next(c for c in notable if c.id == failing[2]["id"])
    assert "cmd" not in by_id[other.id] and prefix + other.reproducer + suffix == other.replay


def test_matrix_shows_illegal_type_rows_as_rejection_tests(tmp_path: Path) -> None:
    """A data type that appears only in illegal descs (validation cases the backend must reject)
    is not support: its row and cells say "rejected", not a green pass count."""
    doc = make_results(60, seed=4)
    template = next(c for c in doc["cases"] if c["kind"] == "validation")
    illegal = {
        **copy.deepcopy(template),
        "id": "validation[BATCH_NORMALIZATION-6_4-illegal-supported-data-type-0003]",
        "operator": "BATCH_NORMALIZATION",
        "feature_level": "6_4",
        "data_type": "UINT16",
        "expected": "illegal",
        "rule": "supported-data-type",
        "outcome": "passed",
        "message": None,
    }
    doc["cases"].append(illegal)
    write_results(tmp_path, doc)
    write_reports(tmp_path)
    md = (tmp_path / "summary.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| BATCH_NORMALIZATION | UINT16"))
    assert "(unsupported: rejection tests)" in row and "rejected 1/1" in row
    assert not re.search(r"\| 1/1 \|", row)
    html = (tmp_path / "index.html").read_text()
    assert "unsupported: rejection tests" in html and 'class="cell illegal"' in html
    # supported types' rows are not marked
    float_row = next(line for line in md.splitlines() if "| FLOAT32 |" in line)
    assert "rejected" not in float_row


# -- the page at a glance: overview first, known findings labelled ------------------------------


@pytest.mark.parametrize(
    ("reason", "label"),
    [
        ("F1: DirectML FLOAT16 shaders lose precision beyond one rounding", "F1"),
        ("O1: ONNX Runtime LRN's approximate power", "O1"),
        ("T2: vector_norm(ord=1)'s sequential float32 sum at 2^16 elements", "T2"),
        ("F12 : CompileOperator refuses some legal descs", "F12"),
        ("known slow path", "known slow path"),
        ("Note: no finding id, a word before the colon", "Note: no finding id, a word before the colon"),
        ("the reference path accumulates FLOAT16 in FLOAT32 on this stack, see the notes", None),
    ],
)
def test_known_label(reason: str, label: str | None) -> None:
    from dmlconform.report.findings import known_label

    got = known_label(reason)
    if label is None:  # a long reason without an id: cut to fit a cell, marked as cut
        assert got == "the reference path accumulates FLOAT16 in FLOAT\u2026"  # 47 + 1
    else:
        assert got == label


def test_breakable_ids_wrap_between_words_and_stay_escaped() -> None:
    from dmlconform.report.formatting import breakable

    out = str(breakable("numeric[MVN1-5_0-FLOAT16-0003]<b>"))
    assert out == "numeric[<wbr>MVN1-<wbr>5_<wbr>0-<wbr>FLOAT16-<wbr>0003]<wbr>&lt;b&gt;"
    assert out.replace("<wbr>", "") == "numeric[MVN1-5_0-FLOAT16-0003]&lt;b&gt;"


def _known_results(tmp_path: Path) -> Path:
    doc = make_results(600, seed=11)
    xfailed = [c for c in doc["cases"] if c["outcome"] == "xfailed"]
    assert len(xfailed) >= 3
    for case in xfailed:
        case["expectation"] = "F5: DirectML MVN1 returns NaN for one-element reductions"
    skipped = next(c for c in doc["cases"] if c["outcome"] == "skipped")
    skipped["expectation"] = "F9: <never judged>"
    write_results(tmp_path, doc)
    return tmp_path


def test_known_findings_are_labelled(tmp_path: Path) -> None:
    """An xfailed case's expectation reason becomes a "known: F5" label: counted in the summary's
    table (which links to the case table filtered by it) and carried by each case's row. A
    skipped case an entry named was never judged: no label, not counted."""
    write_reports(_known_results(tmp_path))
    html = (tmp_path / "index.html").read_text()
    doc = json.loads((tmp_path / "results.json").read_text())
    n = sum(1 for c in doc["cases"] if c["outcome"] == "xfailed")
    table = html[
        html.index('id="known-findings"') : html.index("</table>", html.index('id="known-findings"'))
    ]
    assert '<a href="#cases?known=F5">' in table
    assert (
        'title="known finding: F5: DirectML MVN1 returns NaN for one-element reductions">known: F5</span>'
        in table
    )
    assert f"{n} xfailed" in table and "F9" not in html
    assert '<option value="F5">F5</option>' in html  # the case table's filter
    data = embedded_data(html)
    column = data["cols"].index("known")
    outcome = data["cols"].index("outcome")
    labelled = [r for r in data["rows"] if r[column] >= 0]
    assert len(labelled) == n and all(data["outcomes"][r[outcome]] == "xfailed" for r in labelled)
    assert data["reasons"] == ["F5: DirectML MVN1 returns NaN for one-element reductions"]
    assert data["labels"] == ["F5"]


def test_overview_before_the_long_lists(report_dir: Path) -> None:
    """The matrix, the accuracy chart, the error charts and the coverage come before the
    failures and the case table (which can be hundreds of rows long)."""
    write_reports(report_dir)
    html = (report_dir / "index.html").read_text()
    body = html[html.index("<main>") :]
    at = {
        s: body.index(f'<section id="{s}">') for s in ("summary", "matrix", "accuracy", "charts", "coverage")
    }
    assert max(at.values()) < body.index('<section id="failures">') < body.index('<section id="cases">')
    assert re.search(r'<table class="cases" id="case-table">\s*<colgroup>', body)  # a fixed layout


def test_diff_names_an_accuracy_class_that_got_worse(
    tmp_path: Path, baseline: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    old_doc = copy.deepcopy(baseline)
    p0, p1, _ = baseline["_passing"]
    for i in (p0, p1):
        old_doc["cases"][i]["accuracy_class"] = "tight"
    new_doc = copy.deepcopy(old_doc)
    case = new_doc["cases"][p0]
    case["accuracy_class"] = "default"  # still passing: only its class is weaker
    op, dt = case["operator"], case["data_type"]
    others = [c for c in old_doc["cases"] if c["operator"] == op and c["data_type"] == dt and c is not case]
    assert all(c.get("accuracy_class") in (None, "tight") for c in others if c["kind"] == "numeric")
    old = _write(tmp_path / "old", old_doc)
    new = _write(tmp_path / "new", new_doc)

    diff = diff_results(load_results(old), load_results(new))
    assert [(c.operator, c.data_type, c.before, c.after) for c in diff.worse_classes] == [
        (op, dt, "tight", "default")
    ]
    assert not diff_results(load_results(new), load_results(old)).worse_classes
    main(["report", "diff", str(old), str(new)])
    out = capsys.readouterr().out
    assert "Accuracy classes that got worse" in out and f"{op} {dt}: tight -> default" in out
