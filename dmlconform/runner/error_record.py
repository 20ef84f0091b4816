"""The results.json ``errors`` record of a comparison, and the one-line failure message read
from it.

A record is plain JSON (no numpy scalars, no NaN literals) because it rides on the pytest
report across pytest-xdist and is written to results.json and a reproducer's case.json as it is;
the failure message is read back from the same record, so that the console, the report and a
rejudged case under a known finding's bound say the same figures.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dmlconform.tolerance import ulp_distance


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def _plain_dict(d: Any) -> Any:
    if isinstance(d, dict):
        return {str(k): _plain_dict(v) for k, v in d.items()}
    if isinstance(d, (list, tuple)):
        return [_plain_dict(v) for v in d]
    return _plain(d)


def errors_from(
    res: Any,
    actual: dict[str, np.ndarray],
    expected: dict[str, np.ndarray],
    in_ulps: bool = False,
) -> dict[str, Any]:
    """The results.json ``errors`` record from a ``tolerance.Comparison``: per-output maxima and
    the worst element over all outputs (largest error relative to its own budget, among the
    failing outputs when there are any)."""
    per = {
        name: {"max_ulp": o.max_ulp, "max_abs": o.max_abs, "ratio": o.ratio, "aggregate": o.aggregate}
        for name, o in res.outputs.items()
    }
    located = [o for o in res.outputs.values() if o.worst_index is not None]
    worst = max(located, key=lambda o: (not o.passed, o.ratio), default=None)
    w = None
    if worst is not None:
        ref = np.asarray(expected[worst.member])
        got = np.asarray(actual[worst.member]).astype(ref.dtype)
        idx = tuple(worst.worst_index)
        ulp = float(ulp_distance(np.asarray([got[idx]]), np.asarray([ref[idx]]))[0])
        w = {
            "member": worst.member,
            "index": list(idx),
            "backend": worst.backend_value,
            "reference": worst.reference_value,
            "ulp": ulp,
            "abs": abs(float(got[idx]) - float(ref[idx])) if np.isfinite(float(got[idx])) else math.inf,
            "budget_ulp": worst.budget_ulp,
            "budget_abs": worst.budget,
            "unit": "ULP" if in_ulps else "abs",
        }
    out = {
        "max_ulp": max((o["max_ulp"] for o in per.values()), default=0.0),
        "max_abs": max((o["max_abs"] for o in per.values()), default=0.0),
        "ratio": max((o.ratio for o in res.outputs.values()), default=0.0),
        "budget_ulp": w["budget_ulp"] if w else None,
        "outputs": per,
        "worst": w,
    }
    if getattr(res, "nonfinite_inputs", False):
        out["note"] = "inputs hold NaN or Inf: behaviour undefined by DirectML, reported as information"
    return _plain_dict(out)


def failure_message(errors: dict[str, Any], what: str = "reference") -> str:
    w = errors.get("worst") or {}
    if not w:
        return f"outputs differ from the {what} beyond the budget"
    ratio = errors.get("ratio")
    for member, o in (errors.get("outputs") or {}).items():
        agg = o.get("aggregate") or {}
        over = {k: v for k, v in agg.items() if isinstance(v, (int, float)) and v > 1.0}
        if over and isinstance(ratio, (int, float)) and ratio <= 1.0:
            figures = ", ".join(f"{k} {_num(v, 3)}x" for k, v in over.items())
            return (
                f"{member}: systematic error against the {what}: aggregate {figures} its bound, "
                f"though every element is within its own budget (worst {_num(ratio, 3)} of it)"
            )
    budget_abs = w.get("budget_abs")
    where = (
        f"{w.get('member')}: at {w.get('index')}: backend {_num(w.get('backend'), 9)}, "
        f"{what} {_num(w.get('reference'), 9)}"
    )
    if budget_abs is None or w.get("unit") == "ULP":
        # a fixed ULP budget decided (--tolerance max_ulp=...)
        return f"{where}; {_num(w.get('ulp'), 4)} ULP > budget {_num(w.get('budget_ulp'), 4)} ULP"
    over = f" ({_num(ratio, 3)} of it)" if isinstance(ratio, (int, float)) and math.isfinite(ratio) else ""
    return f"{where}; abs error {_num(w.get('abs'), 3)} > budget {_num(budget_abs, 3)}{over}"


def _num(v: Any, digits: int = 6) -> str:
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)
