"""Shrink a reproducer directory into another one, in the format ``dmlconform replay`` runs.

Shared by ``dmlconform shrink`` and ``dmlconform run --shrink``: the backend, its options and
the tolerance come from the reproducer's case.json unless the caller overrides the backend, and
the backend runs behind the same guards as in a run (a raising, hanging or crashing backend
fails the candidate, never the shrink).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dmlconform.runner.backend_loading import open_saved_backend
from dmlconform.runner.checks import run_case
from dmlconform.runner.settings import saved_tolerance
from dmlconform.shrink.search import NotFailing, Shrunk, shrink
from dmlconform.specification.spec import load_spec


def shrink_dir(
    case_dir: Path,
    out: Path,
    *,
    backend: str | None = None,
    options: dict[str, str] | None = None,
    isolate: bool = False,
    timeout: float = 60.0,
    max_seconds: float = 60.0,
    progress: Callable[[str], None] | None = None,
    tolerance_overrides: list[str] | None = None,
) -> tuple[Shrunk, str, dict[str, Any]]:
    """Shrink the case in ``case_dir`` and write the result into ``out``; returns it, the
    backend's name and the shrunk case's record (as in case.json). ``tolerance_overrides``:
    ``--tolerance`` pairs over the tolerance the case was judged under. ValueError (one line)
    for an unusable reproducer, tolerance or backend;
    :class:`~dmlconform.shrink.search.NotFailing` when the case passes on the backend."""
    from dmlconform.runner.results import case_record, finish_record, load_case_dir, save_reproducer

    spec = load_spec()
    case, inputs, meta = load_case_dir(case_dir, spec)
    judged_by = saved_tolerance(spec, meta.get("tolerance"), tolerance_overrides)
    tolerance = judged_by.pairs() or None
    guard, opened = open_saved_backend(meta, backend, options, isolate, timeout)
    info, name, options = opened.info, opened.name, opened.options
    data = inputs if case.kind != "validation" else None

    def run(c: Any, inp: Any) -> Any:
        return run_case(c, guard, spec, judged_by, inputs=inp)

    try:
        found = shrink(case, data, run, spec, max_seconds, progress)
    finally:
        guard.close()
    half = case_record(found.case, str(meta.get("nodeid") or found.case.id), found.result, spec=spec)
    half.reproducer = str(out)
    extra = {"shrink": {"from": str(case_dir), **found.to_dict()}}
    save_reproducer(out, found.case, found.result, half, name, options, tolerance, extra)
    record = finish_record(half, "failed", found.result.message, 0.0)
    _annotate(out / "desc.yaml", case_dir, found)
    return found, info.name, record


def _annotate(path: Path, origin: Path, found: Shrunk) -> None:
    """Head desc.yaml with what the shrink did (YAML comments: the file still loads as is)."""
    (e0, d0), (e1, d1) = found.original_size, found.size
    lines = [
        f"# shrunk from {origin} ({e0} elements, {d0} dims -> {e1} elements, {d1} dims; {found.stopped})",
        f"# fails the same way: {found.signature}",
    ]
    lines += [f"#   {step}" for step in found.steps]
    path.write_text("\n".join(lines) + "\n" + path.read_text(encoding="utf-8"), encoding="utf-8")


def shrink_report(
    report_dir: Path,
    *,
    max_seconds: float,
    isolate: bool = False,
    timeout: float = 60.0,
    log: Callable[[str], None] = print,
) -> int:
    """``run --shrink``: shrink every failure of a finished run within ``max_seconds`` in all
    (shared out evenly over the failures still to do), record each result as the case's
    ``shrunk`` field in results.json and render the reports again. Returns how many shrank."""
    import json
    import time

    from dmlconform.report.pages import write_reports
    from dmlconform.report.results_file import write_results_file

    path = report_dir / "results.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    todo = [r for r in data.get("cases") or [] if r.get("outcome") == "failed" and r.get("reproducer")]
    end = time.monotonic() + max_seconds
    shrunk = 0
    for n, record in enumerate(todo, 1):
        left = end - time.monotonic()
        if left <= 0:
            log(f"shrink: time budget spent; {len(todo) - n + 1} failures left as they are")
            break
        budget = left / (len(todo) - n + 1)
        shrunk += _shrink_record(report_dir, record, f"shrink {n}/{len(todo)}", budget, isolate, timeout, log)
    write_results_file(report_dir, data)
    write_reports(report_dir)
    return shrunk


def _shrink_record(
    report_dir: Path,
    record: dict[str, Any],
    label: str,
    max_seconds: float,
    isolate: bool,
    timeout: float,
    log: Callable[[str], None],
) -> bool:
    """Shrink one failure of a run into ``<its reproducer>/shrunk`` and set the record's
    ``shrunk`` field (the error, when it could not be shrunk); whether a smaller case fails."""
    rel = Path(record["reproducer"]) / "shrunk"
    try:
        found, _, shrunk_record = shrink_dir(
            report_dir / record["reproducer"],
            report_dir / rel,
            isolate=isolate,
            timeout=timeout,
            max_seconds=max_seconds,
        )
    except (ValueError, NotFailing) as exc:
        record["shrunk"] = {"error": str(exc)}
        log(f"{label}: {record['id']}: not shrunk: {exc}")
        return False
    record["shrunk"] = {
        "reproducer": rel.as_posix(),
        "replay": shrunk_record.get("replay"),
        "desc": shrunk_record.get("desc"),
        "message": found.result.message,
        **found.to_dict(),
    }
    (e0, d0), (e1, d1) = found.original_size, found.size
    log(
        f"{label}: {record['id']}: {e0} elements, {d0} dims -> {e1}, {d1} "
        f"({found.seconds:.1f} s, {found.stopped})"
    )
    return bool(found.steps)
