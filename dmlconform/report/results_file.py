"""results.json as text: strict JSON, each case on a line of its own.

The run's fields read as ``json.dumps(indent=1)`` writes them; each case is one line, written by
the C encoder: a case reads and greps as one record, ``diff`` of two runs' files names the cases
that changed, and a 50,000-case run's file takes 1.5 s and 51 MiB, not 7.3 s and 67 MiB
(indented throughout, every value first copied by :func:`jsonable`; ``bench/bench_report.py``).
Everything that writes the file (a run, its crash watcher, a DxDispatch check, shrink, report
merge) writes it through :func:`write_results_file`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np


def jsonable(value: Any) -> Any:
    """Coerce backend-reported info and numpy scalars into strict JSON (no NaN literals)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def compact(value: Any) -> str:
    """``value`` on one line, as :func:`jsonable` would make it: straight through the encoder
    when it holds only JSON's own types and finite numbers (nearly every case), else copied."""
    try:
        return json.dumps(value, allow_nan=False, default=jsonable)
    except ValueError:  # a NaN or an infinity: written as its name, a string
        return json.dumps(jsonable(value))


def results_text(results: dict[str, Any]) -> str:
    """The file's text: the run's fields indented, ``cases`` one per line."""
    fields = []
    for key, value in results.items():
        if key == "cases" and isinstance(value, list) and value:
            text = "[\n  " + ",\n  ".join(compact(case) for case in value) + "\n ]"
        else:
            # JSON writes a newline inside a string as \n, so every newline here is layout
            text = json.dumps(jsonable(value), indent=1).replace("\n", "\n ")
        fields.append(f" {json.dumps(str(key))}: {text}")
    return "{\n" + ",\n".join(fields) + "\n}\n" if fields else "{}\n"


def write_results_file(report_dir: Path, results: dict[str, Any]) -> Path:
    """``report_dir/results.json`` through a temporary file replaced in one step, so that an
    interrupted write leaves the previous file or none, never half of one."""
    report_dir.mkdir(parents=True, exist_ok=True)
    path = report_dir / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(results_text(results), encoding="utf-8")
    tmp.replace(path)
    return path
