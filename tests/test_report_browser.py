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
