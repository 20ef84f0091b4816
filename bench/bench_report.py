"""Benchmark: render the report for a synthetic run of N cases (default 50,000).

The report must stay usable for big runs: index.html under 10 MB and quick to render. Prints the
results.json size, the render time (load + index.html + summary.md) and the page size; with
--browser, also the time headless Chromium takes until the page's script has run (needs the
Debian chromium package).

    python bench/bench_report.py [--cases 50000] [--failure-rate 0.05] [--out DIR] [--browser]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

from synthetic_results import make_results, write_results  # noqa: E402

from dmlconform.report import write_reports  # noqa: E402
from dmlconform.report.results_file import jsonable  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=50_000)
    parser.add_argument("--failure-rate", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="report directory (default: a temporary one)")
    parser.add_argument(
        "--browser", action="store_true", help="also time loading the page in headless Chromium"
    )
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="dmlconform-bench-"))

    document = make_results(args.cases, args.seed, failure_rate=args.failure_rate)
    t0 = time.perf_counter()
    results = write_results(out, document)
    t1 = time.perf_counter()
    html, md = write_reports(out)
    t2 = time.perf_counter()
    # the layout results.json had before a case took one line: indented throughout, each value
    # copied by jsonable first; written beside the run's own, alternately
    indented = out / "results-indented.json"
    own, old = [], []
    for _ in range(2):
        t3 = time.perf_counter()
        indented.write_text(json.dumps(jsonable(document), indent=1), encoding="utf-8")
        t4 = time.perf_counter()
        write_results(out, document)
        own.append(time.perf_counter() - t4)
        old.append(t4 - t3)
    mib = 1024 * 1024
    print(f"cases:        {args.cases} (failure rate {args.failure_rate})")
    print(
        f"results.json: {results.stat().st_size / mib:.2f} MiB written in {t1 - t0:.2f} s; best of 2: "
        f"{min(own):.2f} s against {min(old):.2f} s and {indented.stat().st_size / mib:.2f} MiB indented "
        f"throughout (ratio {min(own) / min(old):.2f})"
    )
    indented.unlink()
    print(f"render:       {t2 - t1:.2f} s (load results.json, index.html, summary.md)")
    print(
        f"index.html:   {html.stat().st_size / mib:.2f} MiB ({html.stat().st_size / args.cases:.0f} bytes/case)"
    )
    print(f"summary.md:   {md.stat().st_size / 1024:.1f} KiB")
    if args.browser:
        from cdp_browser import Browser, find_chromium

        binary = find_chromium()
        if binary is None:
            print("browser:      chromium not found")
            return 1
        with Browser(binary) as browser:
            t3 = time.perf_counter()
            browser.open(html.resolve().as_uri())
            browser.wait_for("document.documentElement.dataset.ready")
            t4 = time.perf_counter()
            browser.evaluate(
                "var s=document.getElementById('f-outcome'); s.value='failing'; s.dispatchEvent(new Event('change'))"
            )
            t5 = time.perf_counter()
            print(
                f"browser:      page ready {t4 - t3:.2f} s after navigation; a filter change took {t5 - t4:.3f} s"
            )
            errors = browser.log.console_errors + browser.log.exceptions
            if errors:
                print(f"browser:      errors: {errors}")
    print(f"report dir:   {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
