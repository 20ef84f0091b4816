"""index.html in a real browser: headless Chromium driven over the DevTools pipe (no network, no
chromedriver, no Python package). Skipped when no Chromium is installed (Debian: `chromium`).

Checks: no console errors or exceptions, no request other than the page itself, the matrix and a
failure visible, filtering by select and by clicking a matrix cell changes the visible rows, a
row opens its details, hostile text shows literally and runs nothing, and a screenshot is left in
the report directory (report_dir/screenshot.png) for people to look at.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))

from cdp_browser import Browser, find_chromium  # noqa: E402
from synthetic_results import make_results, write_results  # noqa: E402

from dmlconform.report import write_reports  # noqa: E402

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
ROOT = Path(__file__).resolve().parent.parent

VISIBLE_ROWS = """Array.from(document.querySelectorAll('#case-rows tr.case')).map(function (tr) {
  var td = tr.children; return [td[0].textContent, td[1].textContent, td[2].textContent, td[3].textContent,
  td[4].textContent]; })"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM is not None
    with Browser(CHROMIUM) as b:
        yield b


def load(browser: Browser, report_dir: Path) -> None:
    browser.log.console_errors.clear()
    browser.log.exceptions.clear()
    browser.log.dialogs.clear()
    browser.log.requests.clear()
    browser.open((report_dir / "index.html").resolve().as_uri())
    browser.wait_for("document.documentElement.dataset.ready === '1'")


def assert_clean(browser: Browser, report_dir: Path) -> None:
    assert browser.log.console_errors == []
    assert browser.log.exceptions == []
    assert browser.log.dialogs == []
    page = (report_dir / "index.html").resolve().as_uri()
    assert [r for r in browser.log.requests if r.split("#")[0] != page] == []


def select(browser: Browser, control: str, value: str) -> None:
    browser.evaluate(
        f"(function(){{var s=document.getElementById({json.dumps(control)}); s.value={json.dumps(value)};"
        "s.dispatchEvent(new Event('change'));})()"
    )


def visible(browser: Browser, selector: str) -> bool:
    return bool(
        browser.evaluate(
            f"(function(){{var e=document.querySelector({json.dumps(selector)}); if(!e) return false;"
            "var r=e.getBoundingClientRect(); return r.width > 0 && r.height > 0;})()"
        )
    )


def test_report_in_browser(browser: Browser, tmp_path: Path) -> None:
    write_results(tmp_path, make_results(600, seed=11))
    write_reports(tmp_path)
    load(browser, tmp_path)

    # The matrix, with one row per operator, and the worst failure open with its details.
    assert visible(browser, "table.matrix")
    assert (
        browser.evaluate("document.querySelectorAll('table.matrix tbody tr').length") == 6
    )  # 3 operators x 2 types
    assert visible(browser, "#failure-1 pre.desc")
    failure = browser.evaluate("document.getElementById('failure-1').innerText")
    assert "reproduce" in failure and "dmlconform replay" in failure
    assert visible(browser, "#charts svg.chart rect") and visible(browser, "table.coverage tr.st-untested")

    # First page of the case table.
    rows = browser.evaluate(VISIBLE_ROWS)
    assert len(rows) == 100
    assert {"passed", "failed"} <= {r[0] for r in rows}

    # Filter by outcome with the select.
    select(browser, "f-outcome", "failed")
    rows = browser.evaluate(VISIBLE_ROWS)
    assert rows and len(rows) < 100 and {r[0] for r in rows} == {"failed"}
    assert "matching" in browser.evaluate("document.getElementById('page-info').textContent")

    # The text search narrows further.
    browser.evaluate(
        "(function(){var t=document.getElementById('f-text'); t.value='FLOAT16';"
        "t.dispatchEvent(new Event('input'));})()"
    )
    rows16 = browser.evaluate(VISIBLE_ROWS)
    assert rows16 and len(rows16) < len(rows) and all("FLOAT16" in r[1] for r in rows16)
    browser.click("#f-reset")
    assert len(browser.evaluate(VISIBLE_ROWS)) == 100

    # Click a matrix cell: the table filters to that operator, level and data type.
    browser.click(
        'table.matrix a[data-op="MEAN_VARIANCE_NORMALIZATION1"][data-level="5_2"][data-dtype="FLOAT16"]'
    )
    browser.wait_for("location.hash.indexOf('#cases?') === 0")
    # the table re-renders in the hashchange handler, which runs after the hash is set
    browser.wait_for("document.getElementById('f-op').value === 'MEAN_VARIANCE_NORMALIZATION1'")
    rows = browser.evaluate(VISIBLE_ROWS)
    assert rows and {tuple(r[2:5]) for r in rows} == {("MEAN_VARIANCE_NORMALIZATION1", "5_2", "FLOAT16")}
    assert browser.evaluate("document.getElementById('f-op').value") == "MEAN_VARIANCE_NORMALIZATION1"

    # A failing row opens its detail panel with the desc.
    browser.click("#f-reset")
    select(browser, "f-outcome", "failing")
    browser.click("#case-rows tr.case")
    detail = browser.evaluate("document.querySelector('#case-rows tr.detail').innerText")
    assert "desc" in detail and "DML_OPERATOR_" in detail
    first_id = browser.evaluate("document.querySelector('#case-rows tr.case td.id').textContent")
    slug = first_id.replace("[", "-").rstrip("]")
    assert f"dmlconform replay reports/synthetic/failures/{slug} --backend onnxruntime" in detail

    # Pagination.
    browser.click("#f-reset")
    first = browser.evaluate(VISIBLE_ROWS)[0][1]
    browser.click("#page-next")
    assert browser.evaluate(VISIBLE_ROWS)[0][1] != first

    assert_clean(browser, tmp_path)
    browser.evaluate("window.scrollTo(0, 0)")
    shot = browser.screenshot(tmp_path / "screenshot.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_hostile_text_shown_literally(browser: Browser, tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script> \"&' <img src=x onerror=alert(2)>"
    doc = make_results(60, seed=4)
    doc["backend"]["description"] = "<b id='injected'>bold</b>"
    case = next(c for c in doc["cases"] if c["outcome"] == "failed")
    case["message"] = hostile
    case["desc"]["desc"]["Note"] = hostile
    case["regime"] = "<i id='injected2'>x</i>"
    write_results(tmp_path, doc)
    write_reports(tmp_path)
    load(browser, tmp_path)
    body = browser.evaluate("document.body.innerText")
    assert hostile in body
    assert "<b id='injected'>bold</b>" in body
    # Now through the script's path: the case table and its detail panel.
    browser.evaluate(
        "(function(){var t=document.getElementById('f-text'); t.value='alert(1)';"
        "t.dispatchEvent(new Event('input'));})()"
    )
    rows = browser.evaluate(VISIBLE_ROWS)
    assert len(rows) == 1
    browser.click("#case-rows tr.case")
    detail = browser.evaluate("document.querySelector('#case-rows tr.detail').innerText")
    assert hostile in detail and "<i id='injected2'>x</i>" in detail
    assert browser.evaluate("document.querySelectorAll('img, #injected, #injected2').length") == 0
    assert_clean(browser, tmp_path)


def test_real_run_report(browser: Browser, tmp_path: Path) -> None:
    """A report from a real (small) run of the reference backend, when the runner works."""
    report = tmp_path / "real"
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "dmlconform.cli",
                "run",
                "--backend",
                "reference",
                "--cases",
                "1",
                "--operators",
                "MEAN_VARIANCE_NORMALIZATION",
                "--report",
                str(report),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("dmlconform run took too long")
    if proc.returncode not in (0, 1) or not (report / "results.json").exists():
        pytest.skip(
            f"dmlconform run is not usable here (exit {proc.returncode}): {proc.stderr.strip()[-200:]}"
        )
    write_reports(report)
    load(browser, report)
    assert visible(browser, "table.matrix")
    assert browser.evaluate("document.querySelectorAll('#case-rows tr.case').length") > 0
    results = json.loads((report / "results.json").read_text())
    if results["summary"]["failed"]:
        assert visible(browser, "#failure-1")
    assert_clean(browser, report)
    browser.evaluate("window.scrollTo(0, 0)")
    browser.screenshot(report / "screenshot.png")


def test_minimal_reproducer_beside_the_original(browser: Browser, tmp_path: Path) -> None:
    """After ``run --shrink`` a failure shows its minimal reproducer beside the original desc,
    in the failures section and in the case table's detail panel."""
    from dmlconform.cli import main

    report = tmp_path / "shrunk"
    code = main(
        ["run", "--backend", "dmlconform.backends.broken:UnbiasedVariance", "--tier", "smoke", "--cases", "2",
         "--operators", "MEAN_VARIANCE_NORMALIZATION1", "--kinds", "numeric", "--report", str(report),
         "--shrink", "--shrink-time", "60"]
    )  # fmt: skip
    assert code == 1
    load(browser, report)
    failure = browser.evaluate("document.getElementById('failure-1').innerText")
    assert "minimal reproducer" in failure and "elements" in failure and "/shrunk --backend" in failure
    # side by side: the original desc on the left, the shrunk one on the right
    lefts = browser.evaluate(
        "Array.from(document.querySelectorAll('#failure-1 div.sidebyside pre.desc'))"
        ".map(function (e) { return e.getBoundingClientRect().left; })"
    )
    assert len(lefts) == 2 and lefts[0] < lefts[1]
    select(browser, "f-outcome", "failing")
    browser.click("#case-rows tr.case")
    detail = browser.evaluate("document.querySelector('#case-rows tr.detail').innerText")
    assert "minimal reproducer" in detail and "steps" in detail
    assert_clean(browser, report)


# -- readable at 1280 px ------------------------------------------------------------------------

NARROW = 1280
# Elements whose right edge passes the viewport (a page wider than the window), by tag and class.
OVERFLOWING = """Array.from(document.querySelectorAll('body *')).filter(function (e) {
  var r = e.getBoundingClientRect(); return r.width > 0 && r.right > innerWidth + 0.5; })
  .slice(0, 10).map(function (e) { return e.tagName + '.' + e.className; })"""
# Table cells of the case table whose content is wider than the cell (cut or spilling over).
SPILLING = """Array.from(document.querySelectorAll('#case-rows tr.case td')).filter(function (td) {
  return td.scrollWidth > td.clientWidth + 1; }).slice(0, 10).map(function (td) { return td.textContent; })"""
# Case-id segments (the text between two break points) laid out on more than one line: a word cut.
CUT_IDS = """Array.from(document.querySelectorAll('#case-rows td.id')).filter(function (td) {
  return Array.from(td.childNodes).some(function (n) {
    if (n.nodeType !== 3) return false; var r = document.createRange(); r.selectNodeContents(n);
    var tops = new Set(Array.from(r.getClientRects()).map(function (q) { return Math.round(q.top); }));
    return tops.size > 1; }); }).map(function (td) { return td.textContent; })"""


def _with_known_findings(doc: dict) -> dict:
    """The synthetic run as an expectations file would leave it: its xfailed cases covered by
    finding F1, one of them by a reason with no finding id, one case an unexpected pass of F1,
    a skipped case named by an entry (not judged, so no label), and one failure with a message
    far longer than its column."""
    xfailed = [c for c in doc["cases"] if c["outcome"] == "xfailed"]
    for case in xfailed[1:]:
        case["expectation"] = "F1: DirectML FLOAT16 shaders lose precision beyond one rounding"
    xfailed[0]["expectation"] = "the reference path accumulates FLOAT16 in FLOAT32 here"
    xpassed = next(c for c in doc["cases"] if c["outcome"] == "passed" and c["errors"])
    xpassed["outcome"] = "xpassed"
    xpassed["expectation"] = "F1: DirectML FLOAT16 shaders lose precision beyond one rounding"
    skipped = next(c for c in doc["cases"] if c["outcome"] == "skipped")
    skipped["expectation"] = "F9: never judged"
    failed = next(c for c in doc["cases"] if c["outcome"] == "failed")
    # Under the row's cap (report.case_data.ROW_MESSAGE_CHARS), with a path longer than the column.
    failed["message"] = (
        "OutputTensor: " + ", ".join(f"[{i}, 0, 0, 1]" for i in range(6)) + " exceed the budget: see "
        "failures/numeric-MEAN_VARIANCE_NORMALIZATION1-5_2-FLOAT16-0003/outputs-of-the-worst-slice.npz"
    )
    assert len(failed["message"]) < 240
    summary = doc["summary"]
    summary["passed"] -= 1
    summary["xpassed"] += 1
    return doc


def failed_message(doc: dict) -> str:
    return next(c["message"] for c in doc["cases"] if "worst-slice" in (c["message"] or ""))


@pytest.fixture(scope="module")
def narrow_browser() -> Iterator[Browser]:
    assert CHROMIUM is not None
    with Browser(CHROMIUM, width=NARROW, height=1000) as b:
        yield b


def test_report_reads_at_1280_px(narrow_browser: Browser, tmp_path: Path) -> None:
    """At 1280 px nothing is wider than the window, no case-table cell is cut, ids wrap between
    their words, the overview comes before the long lists, and a case an expectations file
    covered carries its finding's label."""
    browser = narrow_browser
    doc = _with_known_findings(make_results(600, seed=11))
    write_results(tmp_path, doc)
    write_reports(tmp_path)
    load(browser, tmp_path)
    assert browser.evaluate("innerWidth") == NARROW

    def assert_fits() -> None:
        assert browser.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
        assert browser.evaluate(OVERFLOWING) == []

    assert_fits()
    assert browser.evaluate(SPILLING) == []
    assert browser.evaluate(CUT_IDS) == []
    # The ids wrap: some id in the table takes more than one line, and reads whole (no <wbr> text).
    ids = browser.evaluate(
        "Array.from(document.querySelectorAll('#case-rows td.id')).map(function (td) {"
        "return [td.textContent, td.getClientRects()[0].height]; })"
    )
    assert {i for i, _ in ids} <= {c["id"] for c in doc["cases"]}
    line = browser.evaluate(
        "parseFloat(getComputedStyle(document.querySelector('#case-rows td.id')).lineHeight)"
    )
    assert any(height > 1.5 * line for _, height in ids)

    # The overview sits above the long lists.
    tops = browser.evaluate(
        "(function(){var t={}; ['summary','matrix','accuracy','charts','coverage','failures','cases']"
        ".forEach(function(id){t[id]=document.getElementById(id).getBoundingClientRect().top;}); return t;})()"
    )
    for overview in ("summary", "matrix", "accuracy", "charts", "coverage"):
        assert tops[overview] < tops["failures"] < tops["cases"], tops

    # The long message shows whole, wrapped in its cell, and the page still fits.
    select(browser, "f-outcome", "failed")
    browser.evaluate(
        "(function(){var t=document.getElementById('f-text'); t.value='worst-slice';"
        "t.dispatchEvent(new Event('input'));})()"
    )
    message = browser.evaluate("document.querySelector('#case-rows tr.case td.msg').innerText")
    assert message.replace("\n", "") == failed_message(doc)
    assert browser.evaluate(SPILLING) == []
    browser.click("#case-rows tr.case")  # the detail panel, with its desc and worst element
    assert_fits()

    # Known findings: listed in the summary, each linking to its cases.
    known = browser.evaluate("document.getElementById('known-findings').innerText")
    n_f1 = sum(1 for c in doc["cases"] if c.get("expectation", "").startswith("F1:"))
    assert f"known: F1\t{n_f1 - 1} xfailed, 1 xpassed" in known
    # a reason without a finding id is the label itself, shortened to fit a cell
    assert "known: the reference path accumulates FLOAT16 in FLOAT\u2026\t1 xfailed" in known
    assert "F9" not in known  # the skipped case was never judged
    browser.click("#known-findings a[href*='known=F1']")
    browser.wait_for("document.getElementById('f-known').value === 'F1'")
    rows = browser.evaluate(VISIBLE_ROWS)
    assert len(rows) == n_f1 and {r[0] for r in rows} == {"xfailed known: F1", "xpassed known: F1"}
    tag = browser.evaluate("document.querySelector('#case-rows tr.case span.known').title")
    assert tag == "known finding: F1: DirectML FLOAT16 shaders lose precision beyond one rounding"
    # An xfailed case in the unfiltered table carries the label; its detail panel gives the reason.
    browser.click("#f-reset")
    select(browser, "f-outcome", "xfailed")
    labels = browser.evaluate(
        "Array.from(document.querySelectorAll('#case-rows tr.case td:first-child')).map(function (td) {"
        "return td.innerText; })"
    )
    assert labels and all("known: " in text for text in labels)
    browser.click("#case-rows tr.case")
    detail = browser.evaluate("document.querySelector('#case-rows tr.detail').innerText")
    assert "known finding: " in detail
    # The unexpected pass is in the failures list, tagged, and says what its passing means.
    entry = browser.evaluate(
        "(function(){var d=document.querySelector('#failures span.o-xpassed').closest('details');"
        "d.open=true; return [d.querySelector('summary').innerText, d.innerText];})()"
    )
    assert entry[0].startswith("xpassed known: F1 ") and "is the expectation stale?" in entry[1]
    assert_fits()
    # Everything open at once (every failure, every coverage block, a page of case details).
    browser.click("#f-reset")
    browser.evaluate(
        "document.querySelectorAll('details').forEach(function (d) { d.open = true; });"
        "Array.from(document.querySelectorAll('#case-rows tr.case')).slice(0, 40)"
        ".forEach(function (tr) { tr.click(); })"
    )
    assert browser.evaluate("document.querySelectorAll('#case-rows tr.detail').length") == 40
    assert_fits()
    assert_clean(browser, tmp_path)
