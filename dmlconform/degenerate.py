"""Numeric cases that judge nothing, and inputs drawn so that none is run.

A numeric case judges a backend by comparing its outputs with the reference's, element by
element. Some inputs leave nothing to compare:

- an output with no finite reference element, or NaN in one (0 / 0 where Variance + Epsilon is
  0, which the docs leave undefined: any answer would have to pass there), or any element whose
  Variance + Epsilon is 0 (x != Mean there gives +-inf, equally undefined);
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
so the runner does not compute it twice. Where no input can help (every slice holds one value
and the outputs are all 0, or 0 / 0), collection replaces the desc (:func:`may_judge_nothing`,
``runner.cases``). Nothing here names an operator: the outputs, the variance input and
Epsilon come from the spec's semantics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmlconform.data import RegimeNotApplicable, effective_reduction_size, epsilon, make_inputs, regimes_for
from dmlconform.desc import OperatorDesc
from dmlconform.spec import Spec, load_spec

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
    spec: Spec | None = None,
) -> dict[str, np.ndarray]:
    """The answer of a backend that copies: each output replaced by the semantics' input if it
    has that output's shape, else by the first input member (in the spec's order) that has it,
    else by zeros; in the output's data type."""
    spec = spec or load_spec()
    op = spec.operator(desc.operator)
    main = op.semantics.get("input")
    order = [main] + [m.name for m in op.input_members if m.name != main]
    out = {}
    for name, value in outputs.items():
        value = np.asarray(value)
        same = next((inputs[m] for m in order if m in inputs and np.shape(inputs[m]) == value.shape), None)
        with np.errstate(over="ignore"):
            out[name] = np.zeros_like(value) if same is None else np.asarray(same).astype(value.dtype)
    return out


def impostors(
    desc: OperatorDesc,
    outputs: Mapping[str, np.ndarray],
    inputs: Mapping[str, np.ndarray],
    spec: Spec | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """Three answers with nothing to do with the operator, for a case whose right answer is
    ``outputs``: ``zeros``, ``negated`` and ``input`` (:func:`unchanged_inputs`)."""
    return {
        "zeros": {k: np.zeros_like(np.asarray(v)) for k, v in outputs.items()},
        "negated": {k: -np.asarray(v) for k, v in outputs.items()},
        "input": unchanged_inputs(desc, outputs, inputs, spec),
    }


def budgets(
    desc: OperatorDesc, reference: Mapping[str, np.ndarray], inputs: Mapping[str, np.ndarray], spec: Spec
) -> dict[str, np.ndarray]:
    """The per-element budgets the comparison grants each output (the operator's tolerance
    model, as ``tolerance.compare`` picks it)."""
    from dmlconform import tolerance, tolerance_models

    fn = tolerance_models.budgets if tolerance_models.handles(desc, spec) else tolerance.budgets
    with np.errstate(all="ignore"):
        return fn(desc, dict(reference), dict(inputs), spec).by_member


def _passes(
    answer: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray], budget: Mapping[str, Any]
) -> bool:
    """Whether ``answer`` lies within the budget of every element of every output."""
    for name, b in budget.items():
        r = np.asarray(reference[name], dtype=np.float64)
        a = np.asarray(answer[name], dtype=np.float64)
        with np.errstate(invalid="ignore"):
            if not np.all(np.abs(a - r) <= np.broadcast_to(b, r.shape)):
                return False
    return True


def why_degenerate(
    desc: OperatorDesc,
    inputs: Mapping[str, np.ndarray],
    reference: Mapping[str, np.ndarray],
    spec: Spec | None = None,
) -> str | None:
    """Why a numeric case on ``inputs`` (whose reference outputs are ``reference``) would judge
    nothing, or None when it judges something. Inputs that hold NaN or Inf are not this
    module's concern (the comparison reports them as information)."""
    spec = spec or load_spec()
    sem = spec.operator(desc.operator).semantics
    var_name, eps = sem.get("variance_input"), epsilon(desc, spec)
    if var_name in inputs and eps is not None:
        undefined = int(np.count_nonzero(np.asarray(inputs[var_name], dtype=np.float64) + eps == 0))
        if undefined:
            return f"{var_name} + Epsilon = 0 at {undefined} elements (undefined by the docs)"
    for name, ref in reference.items():
        r = np.asarray(ref, dtype=np.float64)
        if r.size and not np.isfinite(r).any():
            return f"{name} has no finite element"
        nan = int(np.count_nonzero(np.isnan(r)))
        if nan:
            return f"{name} is NaN at {nan} elements (0 / 0, undefined by the docs)"
    budget = budgets(desc, reference, inputs, spec)
    for label, answer in impostors(desc, reference, inputs, spec).items():
        if _passes(answer, reference, budget):
            what = {"zeros": "all zeros", "negated": "the answer negated", "input": "an input unchanged"}
            return f"{what[label]} would pass (every output within its budget)"
    return None


@dataclass
class Judged:
    """Inputs that judge something, the reference's outputs on them, and where they came from."""

    inputs: dict[str, np.ndarray]
    reference: dict[str, Any]
    regime: str
    draw: int


def _attempts(desc: OperatorDesc, regime: str, spec: Spec) -> list[tuple[str, int]]:
    others = [r for r in regimes_for(desc, spec) if r != regime]
    return [(regime, d) for d in range(OWN_DRAWS)] + [(r, d) for r in others for d in range(OTHER_DRAWS)]


def judged_inputs(desc: OperatorDesc, regime: str, seed: int = 0, spec: Spec | None = None) -> Judged:
    """``data.make_inputs(desc, regime, seed)`` and the reference's outputs on them; while
    :func:`why_degenerate` finds they judge nothing, drawn again: :data:`OWN_DRAWS` draws of the
    regime, then :data:`OTHER_DRAWS` of each other regime that applies (a regime can fail a desc
    whatever its draw: Epsilon 100 keeps standard normal data under a THRESHOLDED_RELU's Alpha,
    where large_offset's spread does not). Deterministic: the same case always gets the same
    data. Raises :class:`JudgesNothing` (with the last reason) when no attempt judges anything."""
    from dmlconform import execute

    spec = spec or load_spec()
    why = ""
    for reg, draw in _attempts(desc, regime, spec):
        inputs = make_inputs(desc, reg, seed, spec, draw=draw)
        with np.errstate(all="ignore"):
            reference = execute(desc, inputs)
        why = why_degenerate(desc, inputs, reference, spec) or ""
        if not why:
            return Judged(inputs, reference, reg, draw)
    raise JudgesNothing(f"no input of any regime judges anything: {why}")


def may_judge_nothing(desc: OperatorDesc, spec: Spec | None = None) -> bool:
    """Whether no input at all might make ``desc`` judge something: only where every reduction
    slice holds one value (``data.effective_reduction_size`` 1), so that x - mean is 0 whatever
    the data, and the outputs depend on it through Bias, the gradients or nothing. Elsewhere some
    regime's data always judge something (bench/bench_budgets.py counts the cases skipped:
    none at --cases 32 over three seeds), so collection only tries inputs for these descs."""
    return effective_reduction_size(desc, spec) == 1
