"""DirectML's per-slice findings excuse their slices only: with one NaN planted in every FLOAT16
output, away from the elements the shipped findings explain, every FLOAT16 numeric case fails,
and the failure names the finding whose slices it left.

The planting backend delegates to the directml backend (keeping its name, so the run applies
the findings shipped for it) and finds the explained elements itself, from the mechanisms as
docs/directml-findings.md states them, in plain numpy: not through the slice facts under test,
so a scope the runner draws too wide (an element it excuses that no mechanism reaches) shows as
a case that stays known. Where every element of an output is explained, it plants the NaN
inside: the findings whose wrong values are finite (``nan: false``) do not take it; where the
finding's wrong values are NaN (F5), a finite wrong value instead.

Needs the stack ``dmlconform directml setup`` installs; without it the module is skipped with the
one line ``stack.locate()`` gives. ``DMLCONFORM_PLANT_LOG``: a file that gets one JSON line per
case planted (its desc and what was planted where), for measuring a whole run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from helpers import SPEC, dmlconform

from dmlconform.backends.directml.stack import StackMissing, locate

try:
    locate()
except StackMissing as exc:
    pytest.skip(str(exc), allow_module_level=True)

from dmlconform.backends.directml.backend import DirectMLBackend  # noqa: E402
from dmlconform.kernels import execute as reference  # noqa: E402
from dmlconform.kernels import plan as plan_of  # noqa: E402

pytestmark = pytest.mark.slow

F16_PAST = 65520.0  # the findings' threshold: past FLOAT16's largest finite, 65504
F16_TINY = 6.1e-5  # FLOAT16's smallest normal, 2^-14


def _float(inputs: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    return np.asarray(inputs[name], dtype=np.float64)


def _window_sums(v: np.ndarray, axes: tuple[int, ...], below: int, above: int) -> np.ndarray:
    """Each element's window sum of ``v`` (the window [j - below, j + above] on every axis)."""
    out = v
    for axis in axes:
        n = out.shape[axis]
        acc = np.zeros_like(out)
        for j in range(n):
            lo, hi = max(0, j - below), min(n, j + above + 1)
            idx = [slice(None)] * out.ndim
            idx[axis] = slice(lo, hi)
            dst = [slice(None)] * out.ndim
            dst[axis] = slice(j, j + 1)
            acc[tuple(dst)] = out[tuple(idx)].sum(axis=axis, keepdims=True)
        out = acc
    return out


def _dilated(mask: np.ndarray, axes: tuple[int, ...], reach: int) -> np.ndarray:
    """``mask`` widened by ``reach`` elements both ways on every axis of ``axes`` (a box)."""
    out = mask.copy()
    for axis in axes:
        grown = out.copy()
        for k in range(1, reach + 1):
            n = out.shape[axis]
            if k >= n:
                break
            lo = [slice(None)] * out.ndim
            hi = [slice(None)] * out.ndim
            lo[axis], hi[axis] = slice(0, n - k), slice(k, n)
            grown[tuple(lo)] |= out[tuple(hi)]
            grown[tuple(hi)] |= out[tuple(lo)]
        out = grown
    return out


#: what a finding explains at an element: nothing; a finite wrong value (``nan: false``); a NaN
#: only (F5's ``nan: only``); any value (F10 below FLOAT16's normal range with Epsilon 0)
AWAY, FINITE, NAN_ONLY, ANY = 0, 1, 2, 3


def explained(desc: Any, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """member -> what the shipped per-slice findings explain at each element (:data:`AWAY` ...)
    of a FLOAT16 numeric case, by the mechanisms of docs/directml-findings.md."""
    op, m = desc.operator, desc.members
    if op == "LP_NORMALIZATION":  # F10: a slice's squared norm out of FLOAT16's range
        plan = plan_of(desc, SPEC)
        x = _float(inputs, plan.input)
        if plan.p == 1:
            s = np.sum(np.abs(x), axis=plan.axes, keepdims=True) ** 2
        else:
            s = np.sum(x * x, axis=plan.axes, keepdims=True)
        code = np.where(s >= F16_PAST, FINITE, AWAY)
        # below FLOAT16's normal range: x / sqrt(Epsilon), finite; x / 0 with Epsilon 0 (0 / 0 NaN)
        low = (s <= F16_TINY) & (plan.epsilon <= F16_TINY)
        code = np.where(low, ANY if plan.epsilon == 0 else FINITE, code)
        return {plan.output: np.broadcast_to(code, x.shape)}
    if op == "LOCAL_RESPONSE_NORMALIZATION_GRAD":  # F18: a window's sum of squares or term out of range
        plan = plan_of(desc, SPEC)
        x = _float(inputs, plan.input)
        sums = _window_sums(x * x, plan.axes, plan.below, plan.above)
        # the sum of squares, or the term d = Bias + Alpha / LocalSize * it, past 65504
        bad = (sums >= F16_PAST) | (plan.bias + plan.alpha / plan.divisor * sums >= F16_PAST)
        return {plan.output: np.where(_dilated(bad, plan.axes, max(plan.below, plan.above)), FINITE, AWAY)}
    if op == "BATCH_NORMALIZATION_GRAD":  # F19: a channel's sum of dy (x - Mean) past 65504
        plan = plan_of(desc, SPEC)
        x, dy = _float(inputs, plan.input), _float(inputs, plan.input_gradient)
        bad = np.abs(np.sum((x - _float(inputs, plan.mean)) * dy, axis=plan.axes, keepdims=True)) >= F16_PAST
        return {
            plan.scale_gradient_output: np.where(bad, FINITE, AWAY).reshape(
                m[plan.scale_gradient_output].sizes
            )
        }
    if op in MVN_FAMILY[:3] and all(s == 1 for s in _reduced_sizes(desc)):
        plan = plan_of(desc, SPEC)
        if plan.kernel == "normalization" and plan.normalize_variance:
            # F5: a one-element slice's variance taken as its value x: NaN where x + Epsilon <= 0,
            # which HARD_SIGMOID, SHRINK and CELU turn into 0 (the finding names x < 0)
            x = _float(inputs, plan.input)
            kind = FINITE if plan.activation in NAN_TO_ZERO else NAN_ONLY
            code = np.where(x <= 0, kind, AWAY)
            return {plan.output: np.broadcast_to(code, tuple(m[plan.output].sizes))}
    if op in MVN_FAMILY:  # F1: a slice's variance past 65504 saturates
        plan = plan_of(desc, SPEC)
        x = _float(inputs, plan.input)
        if plan.kernel == "normalization":  # the rms variant divides by the mean square
            var = np.var(x, axis=plan.axes, keepdims=True)
        else:
            var = np.mean(x * x, axis=plan.axes, keepdims=True)
        code = np.where(var >= F16_PAST, FINITE, AWAY)
        out = {plan.output: np.broadcast_to(code, tuple(m[plan.output].sizes))}
        variance = getattr(plan, "variance_output", None)
        if variance:
            out[variance] = code.reshape(m[variance].sizes)
        return out
    return {}


#: fused activations that turn a NaN into 0 on DirectML (F5)
NAN_TO_ZERO = ("ACTIVATION_HARD_SIGMOID", "ACTIVATION_SHRINK", "ACTIVATION_CELU")

MVN_FAMILY = (
    "MEAN_VARIANCE_NORMALIZATION",
    "MEAN_VARIANCE_NORMALIZATION1",
    "MEAN_VARIANCE_NORMALIZATION2",
    "BATCH_NORMALIZATION_TRAINING",
)


def _reduced_sizes(desc: Any) -> list[int]:
    plan = plan_of(desc, SPEC)
    sizes = desc.members[plan.input].sizes
    return [sizes[a] for a in plan.axes]


def plant(
    outputs: dict[str, np.ndarray], ref: Mapping[str, np.ndarray], codes: dict[str, np.ndarray]
) -> dict[str, str]:
    """Plant in place in each FLOAT16 output, at its last element of the first kind that has one
    where the reference is a number, and say which: ``outside`` (a NaN where no finding explains
    anything), ``inside`` (a NaN where a finding explains finite wrong values only), ``finite``
    (a finite wrong value where one explains NaN only), ``any`` (a NaN where one explains any
    value: nothing can tell it), ``none`` (the reference is NaN everywhere)."""
    done = {}
    for name, out in outputs.items():
        if not isinstance(out, np.ndarray) or out.dtype != np.float16 or not out.size:
            continue
        r = np.broadcast_to(np.asarray(ref[name], dtype=np.float64), out.shape).reshape(-1)
        code = np.broadcast_to(codes.get(name, AWAY), out.shape).reshape(-1)
        flat = out.reshape(-1)
        done[name] = "none"
        for kind, label in ((AWAY, "outside"), (FINITE, "inside"), (NAN_ONLY, "finite"), (ANY, "any")):
            at = np.flatnonzero((code == kind) & ~np.isnan(r))
            if at.size:
                i = at[-1]
                flat[i] = np.float16(r[i] + 1000.0 * (abs(r[i]) + 1.0)) if kind == NAN_ONLY else np.nan
                done[name] = label
                break
    return done


class NanAwayFromFindings(DirectMLBackend):
    """DirectML with one NaN planted in every FLOAT16 output of a case, away from the elements the
    shipped findings explain (see :func:`plant`)."""

    name: ClassVar[str] = "directml"

    def execute(self, desc: Any, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = {k: np.array(v, copy=True) for k, v in super().execute(desc, inputs).items()}
        codes = explained(desc, inputs)
        done = plant(outputs, reference(desc, dict(inputs), SPEC), codes)
        log = os.environ.get("DMLCONFORM_PLANT_LOG")
        if log:
            counts = {k: int(np.count_nonzero(v)) for k, v in codes.items()}
            line = {"desc": desc.to_dict(), "planted": done, "explained": counts}
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps(line, sort_keys=True) + "\n")
        return outputs


def desc_key(desc: dict[str, Any]) -> str:
    return json.dumps(desc, sort_keys=True)


#: the FLOAT16 numeric cases of the operators whose findings are per slice, the first two of each
#: seed-0 group of eight: 8 of them in F10's, F18's and F1's (saturation) slices
SELECTION = ["--operators", "LP", "LRNG", "BNG", "MVN1", "--dtypes", "FLOAT16", "--kinds", "numeric"]
SELECTION += ["--cases", "2"]


def test_a_nan_away_from_the_findings_slices_fails_every_case(tmp_path: Path) -> None:
    report, log = tmp_path / "r", tmp_path / "planted.jsonl"
    os.environ["DMLCONFORM_PLANT_LOG"] = str(log)
    try:
        done = dmlconform(
            "run", "--backend", "test_directml_scoped_findings:NanAwayFromFindings", *SELECTION,
            "--report", str(report), cwd=tmp_path,
        )  # fmt: skip
    finally:
        del os.environ["DMLCONFORM_PLANT_LOG"]
    assert (report / "results.json").is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    planted = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        planted[desc_key(entry["desc"])] = entry
    cases = json.loads((report / "results.json").read_text())["cases"]
    judged = [c for c in cases if c["outcome"] != "skipped"]
    assert done.returncode == 1 and judged
    telling = 0
    for c in judged:
        entry = planted[desc_key(c["desc"])]
        if set(entry["planted"].values()) <= {"any", "none"}:
            continue  # every element in slices where F10 explains any value (Epsilon 0): nothing tells
        telling += 1
        # every other case fails: a NaN outside the explained elements, or one inside a
        # finding's whose wrong values are finite, or a finite wrong value among F5's NaN
        assert c["outcome"] == "failed", (c["id"], entry, c["message"])
    assert telling >= len(judged) - 2, (telling, len(judged))
    scoped = [c for c in judged if (c.get("excused") or {}).get("scope") == "slices"]
    assert scoped, "no case in a per-slice finding's slices"  # the selection holds some
    for c in scoped:
        f = c["excused"]["finding"]
        assert 0 < c["excused"]["elements"] <= c["excused"]["of"]
        assert f"{f} excuses" in c["message"] and "known finding does not explain it" in c["message"]
