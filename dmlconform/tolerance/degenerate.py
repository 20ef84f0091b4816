"""Numeric cases that judge nothing, and inputs drawn so that none is run.

A numeric case judges a backend by comparing its outputs with the reference's, element by
element. Some inputs leave nothing to compare:

- an output with no finite reference element, or NaN in one (0 / 0 where Variance + Epsilon is
  0, which the docs leave undefined: any answer would have to pass there), or any element whose
  Variance + Epsilon is 0 (x != Mean there gives +-inf, equally undefined), or an output whose
  every element has an infinite reference or budget (FLOAT16 gradients of a constant slice
  divided by sqrt(1e-12) overflow);
- inputs on which an answer with nothing to do with the operator passes, every element of every
  output within the budget the comparison grants it: all zeros (a reference identically zero:
  RELU of all-negative data, THRESHOLDED_RELU above every value, Epsilon 100 shrinking every
  value under a threshold, a reduction over one element without Bias; or one smaller than what
  its budget resolves: SOFTPLUS of -60), the answer negated (the same, from the other side), or
  an input returned unchanged (no centring to do, nothing to scale). These three are
  :func:`impostors`;
  ``dmlconform.backends.broken`` runs them as backends (``Zeros``, ``Negated``,
  ``InputUnchanged``), and every numeric case must fail them.

:func:`judged_inputs` draws a case's inputs again (``data.make_inputs(..., draw=k)``, seeded;
then other regimes) until they judge something, and gives the reference it computed on the way,
so the runner does not compute it twice. For a case the compiled judge takes, the check asks
first the budgets of a sample (the first :data:`CHUNK` elements in the judge's slice order:
``tolerance.compare.sampled_budgets``): when a sampled element is judged in every output and
every impostor fails at one, that settles it; the pass over every element runs only when the
sample cannot tell (a degenerate case, or one whose judged elements lie elsewhere). Where no
input can help (every slice holds one value and the outputs are all 0, or 0 / 0), collection
replaces the desc (:func:`may_judge_nothing`, ``runner.cases``). Nothing here names an
operator: the outputs, the variance input and Epsilon come from the spec's semantics.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmlconform import execute, kernels
from dmlconform.errors import PlanError
from dmlconform.generation.data import (
    BIAS_MAGNITUDE,
    SCALE_MAGNITUDE,
    RegimeNotApplicable,
    branch_points,
    effective_reduction_size,
    make_inputs,
    regimes_for,
)
from dmlconform.kernels.base import centres, member_roles, normalizes_variance, written_epsilon
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec
from dmlconform.tolerance.compare import case_budgets, sampled_budgets
from dmlconform.tolerance.options import NO_OPTIONS
from dmlconform.tolerance.terms import Budgets

OWN_DRAWS = 4
"""Draws of a case's own regime tried before other regimes are."""
OTHER_DRAWS = 2
"""Draws of each other regime tried after those."""


class JudgesNothing(RegimeNotApplicable):
    """No draw of the regime gives this desc inputs that judge anything (the reason says why)."""


def unchanged_inputs(
    desc: OperatorDesc,
    outputs: Mapping[str, np.ndarray],
    inputs: Mapping[str, np.ndarray],
    spec: Spec,
    at: Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """The answer of a backend that copies: each output replaced by the semantics' input if it
    has that output's shape, else by the first input member (in the spec's order) that has it,
    else by zeros; in the output's data type. ``at``: per output, the index (into the output's
    shape) of the elements wanted, the whole output where absent."""
    op = spec.operator(desc.operator)
    main = member_roles(op).input
    order = [main] + [m.name for m in op.input_members if m.name != main]
    out = {}
    for name, value in outputs.items():
        value = np.asarray(value)
        where = (at or {}).get(name, ...)
        same = next((inputs[m] for m in order if m in inputs and np.shape(inputs[m]) == value.shape), None)
        with np.errstate(over="ignore"):
            out[name] = (
                np.zeros_like(value[where]) if same is None else np.asarray(same)[where].astype(value.dtype)
            )
    return out


def impostors(
    desc: OperatorDesc,
    outputs: Mapping[str, np.ndarray],
    inputs: Mapping[str, np.ndarray],
    spec: Spec,
    at: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """Three answers with nothing to do with the operator, for a case whose right answer is
    ``outputs``: ``zeros``, ``negated`` and ``input`` (:func:`unchanged_inputs`); ``at`` as
    there (the answers at some elements only)."""
    right = {k: np.asarray(v)[(at or {}).get(k, ...)] for k, v in outputs.items()}
    return {
        "zeros": {k: np.zeros_like(v) for k, v in right.items()},
        "negated": {k: -v for k, v in right.items()},
        "input": unchanged_inputs(desc, outputs, inputs, spec, at),
    }


def budgets(
    desc: OperatorDesc, reference: Mapping[str, np.ndarray], inputs: Mapping[str, np.ndarray], spec: Spec
) -> dict[str, np.ndarray]:
    """The per-element budgets the comparison grants each output (the operator's tolerance
    model, as ``tolerance.compare`` picks it)."""
    return _budgets(desc, reference, inputs, spec)[0]


def _budgets(
    desc: OperatorDesc, reference: Mapping[str, np.ndarray], inputs: Mapping[str, np.ndarray], spec: Spec
) -> tuple[dict[str, np.ndarray], Budgets | None]:
    with np.errstate(all="ignore"):
        return case_budgets(desc, dict(reference), dict(inputs), spec, NO_OPTIONS)


CHUNK = 1 << 16
"""Elements per step of the checks below: an impostor fails a case that judges something within
its first elements, so a large case stops after one step instead of building float64 copies of
every output (the check as it was cost as much as the comparison)."""


def _flat(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` broadcast to ``shape``, flat: a view of an array of that shape, a one-element
    array for a scalar (broadcast per chunk), a copy only of other shapes (small outputs)."""
    a = np.asarray(value)
    if a.size == 1:
        return a.reshape(1)
    return np.broadcast_to(a, shape).reshape(-1)


def _chunks(reference: np.ndarray, *others: Any) -> Iterator[list[np.ndarray]]:
    """[reference, *others] flat, :data:`CHUNK` elements at a time; ``others`` broadcast to the
    reference's shape (a one-element one stays one element)."""
    shape = np.shape(reference)
    flats = [_flat(a, shape) for a in (reference, *others)]
    for i in range(0, flats[0].size, CHUNK):
        yield [f if f.size == 1 else f[i : i + CHUNK] for f in flats]


def _passes(
    answer: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray], budget: Mapping[str, Any]
) -> bool:
    """Whether ``answer`` lies within the budget of every element of every output."""
    for name, b in budget.items():
        for r, a, bound in _chunks(reference[name], answer[name], b):
            with np.errstate(invalid="ignore"):
                if not np.all(np.abs(a.astype(np.float64) - r) <= bound):
                    return False
    return True


def _judges_some_element(reference: np.ndarray, budget: Any) -> bool:
    """Whether some element has a finite reference and a finite budget."""
    if not np.size(reference):
        return True
    return any(bool(np.any(np.isfinite(r) & np.isfinite(b))) for r, b in _chunks(reference, budget))


def why_degenerate(
    desc: OperatorDesc,
    inputs: Mapping[str, np.ndarray],
    reference: Mapping[str, np.ndarray],
    spec: Spec,
    exact: bool = False,
) -> str | None:
    """Why a numeric case on ``inputs`` (whose reference outputs are ``reference``) would judge
    nothing, or None when it judges something. Inputs that hold NaN or Inf are not this
    module's concern (the comparison reports them as information). ``exact``: an impostor
    counts only where it equals the reference exactly (no budgets computed: what no input can
    rescue is exact)."""
    return _why(desc, inputs, reference, spec, exact)[0]


def _why(
    desc: OperatorDesc,
    inputs: Mapping[str, np.ndarray],
    reference: Mapping[str, np.ndarray],
    spec: Spec,
    exact: bool,
) -> tuple[str | None, Any]:
    """:func:`why_degenerate`'s answer and what it computed that the comparison takes back
    (``tolerance.compare``'s ``budgets``): the numpy model's budgets, or the compiled judge's
    per-slice terms where a sample settled it; None when neither."""
    var_name, eps = member_roles(spec.operator(desc.operator)).variance, written_epsilon(desc, spec)
    if var_name in inputs and eps is not None:
        undefined = int(np.count_nonzero(np.asarray(inputs[var_name], dtype=np.float64) + eps == 0))
        if undefined:
            return f"{var_name} + Epsilon = 0 at {undefined} elements (undefined by the docs)", None
    for name, ref in reference.items():
        r = np.asarray(ref)
        if r.size and not np.isfinite(r).any():
            return f"{name} has no finite element", None
        nan = int(np.count_nonzero(np.isnan(r)))
        if nan:
            return f"{name} is NaN at {nan} elements (0 / 0, undefined by the docs)", None
    model = None
    if exact:
        budget: dict[str, Any] = {k: 0.0 for k in reference}
    else:
        with np.errstate(all="ignore"):
            sampled = sampled_budgets(desc, dict(reference), dict(inputs), spec, CHUNK)
        if sampled is not None and _judges_on_sample(desc, sampled[0], reference, inputs, spec):
            return None, sampled[1]
        budget, model = _budgets(desc, reference, inputs, spec)
    for name, b in budget.items():
        if not _judges_some_element(reference[name], b):
            return f"{name} judges no element (its reference or budget is infinite everywhere)", model
    for label, answer in impostors(desc, reference, inputs, spec).items():
        if _passes(answer, reference, budget):
            what = {"zeros": "all zeros", "negated": "the answer negated", "input": "an input unchanged"}
            return f"{what[label]} would pass (every output within its budget)", model
    return None, model


def _judges_on_sample(
    desc: OperatorDesc,
    sampled: dict[str, tuple[np.ndarray | None, np.ndarray]],
    reference: Mapping[str, np.ndarray],
    inputs: Mapping[str, np.ndarray],
    spec: Spec,
) -> bool:
    """Whether the sampled elements alone show that the case judges something: every output
    judges some element of the sample, and every impostor fails at some sampled element. False
    means only that the sample does not show it (the whole check decides then): what holds on
    a subset of the elements holds on all of them, so the answer never differs from the whole
    check's, which a large case would otherwise pay a pass over every element for."""
    where = {
        k: np.unravel_index(at, np.shape(reference[k])) for k, (at, _) in sampled.items() if at is not None
    }
    ref = {k: np.asarray(reference[k])[where.get(k, ...)] for k in sampled}
    budget = {k: b for k, (_, b) in sampled.items()}
    if not all(_judges_some_element(ref[k], budget[k]) for k in sampled):
        return False
    answers = impostors(desc, {k: reference[k] for k in sampled}, inputs, spec, at=where)
    return not any(_passes(answer, ref, budget) for answer in answers.values())


@dataclass
class Judged:
    """Inputs that judge something, the reference's outputs on them, and where they came from."""

    inputs: dict[str, np.ndarray]
    reference: dict[str, Any]
    regime: str
    draw: int
    #: what the check computed that the comparison takes back: the numpy model's budgets or
    #: the compiled judge's per-slice terms (``tolerance.compare``'s ``budgets``)
    budgets: Any = None


def _attempts(desc: OperatorDesc, regime: str, spec: Spec, probe: bool) -> list[tuple[str, int]]:
    others = [] if probe else [r for r in regimes_for(desc, spec) if r != regime]
    return [(regime, d) for d in range(OWN_DRAWS)] + [(r, d) for r in others for d in range(OTHER_DRAWS)]


def judged_inputs(desc: OperatorDesc, regime: str, seed: int, spec: Spec, probe: bool = False) -> Judged:
    """``data.make_inputs(desc, regime, seed)`` and the reference's outputs on them; while
    :func:`why_degenerate` finds they judge nothing, drawn again: :data:`OWN_DRAWS` draws of the
    regime, then :data:`OTHER_DRAWS` of each other regime that applies (a regime can fail a desc
    whatever its draw: Epsilon 100 keeps standard normal data under a THRESHOLDED_RELU's Alpha,
    where large_offset's spread does not). Deterministic: the same case always gets the same
    data. Raises :class:`JudgesNothing` (with the last reason) when no attempt judges anything.
    ``probe``: what collection tries (:func:`may_judge_nothing`): the regime's own draws only,
    judged by exact impostors only."""
    why = ""
    for reg, draw in _attempts(desc, regime, spec, probe):
        inputs = make_inputs(desc, reg, seed, spec=spec, draw=draw)
        with np.errstate(all="ignore"):
            reference = execute(desc, inputs, spec=spec)
        why, model = _why(desc, inputs, reference, spec, exact=probe)
        if not why:
            return Judged(inputs, reference, reg, draw, model)
        why = why or ""
    raise JudgesNothing(f"no input of any regime judges anything: {why}")


def may_judge_nothing(desc: OperatorDesc, spec: Spec) -> bool:
    """Whether no draw of any regime might make ``desc`` judge something, from the desc alone:

    - every reduction slice holds one value (``data.effective_reduction_size`` 1): x - mean is
      0 whatever the data, and the outputs depend on it through Bias and the gradients or not
      at all (0, or 0 / 0 with Epsilon 0);
    - the fused activation has a branch point beyond what the pre-activation value can reach
      (Samuelson: |z| <= sqrt(n - 1) over a slice of n values, so |Scale z + Bias| <=
      2 sqrt(n - 1) + 1 as Scale and Bias are drawn), within a factor 2: THRESHOLDED_RELU Alpha
      1 over two elements without Scale gives 0 everywhere (z = +-1);
    - nothing is centred or divided: the output is an activation of Scale x + Bias, the input
      itself without them.

    Elsewhere some draw judges something (bench/bench_budgets.py counts the cases a run would
    skip), so collection tries inputs for these descs only, and only the regime's own draws,
    judged exactly (``judged_inputs(..., probe=True)``): what no input rescues is exact (0, 0 / 0,
    the input itself), and the run's own draws catch the rest, budgets included."""
    n = effective_reduction_size(desc, spec)
    if n <= 1:
        return True
    roles = member_roles(spec.operator(desc.operator))
    try:
        if getattr(kernels.plan(desc, spec), "may_be_identity", False):
            return True  # the kernel's plan says its scalars can make it the input itself
    except PlanError:
        return False
    present = {
        k
        for k, member in (("scale", roles.scale), ("bias", roles.bias), ("fused_add", roles.fused_add))
        if member and desc.members.get(member) is not None
    }
    if "fused_add" not in present:  # a standard-normal FusedAdd reaches any branch point
        reach = (SCALE_MAGNITUDE[1] if "scale" in present else 1.0) * math.sqrt(n - 1)
        reach += BIAS_MAGNITUDE if "bias" in present else 0.0
        if any(abs(p) * 2.0 >= reach for p in branch_points(desc, spec) if p != 0.0):
            return True
    try:
        return not (centres(desc, spec) or normalizes_variance(desc, spec))
    except PlanError:
        return False
