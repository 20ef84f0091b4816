"""What one case checks, independent of pytest: numeric, validation and metamorphic cases.

``run_case`` returns a :class:`CaseResult` (never raises for a backend's misbehaviour), so that the
pytest item, ``dmlconform replay`` and the tests all judge a case by the same code. Messages are
one line that says what was expected and what came back; a reader should not need a traceback.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dmlconform.errors import Rejected, Unsupported
from dmlconform.generation import data
from dmlconform.runner.cases import Case, apply_when
from dmlconform.runner.error_record import failure_message
from dmlconform.runner.guard import BackendFailure
from dmlconform.runner.judging import (
    CaseResult,
    ComparedOutputs,
    _Fail,
    _Skip,
    backend_outputs,
    classify,
    compare,
    reference_outputs,
    rejudger,
    require_judged,
)
from dmlconform.runner.relations import RELATION_KINDS
from dmlconform.runner.tiers import memory_shortfall
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.rules import Context
from dmlconform.specification.spec import FeatureLevel, Spec
from dmlconform.specification.validate import active_rules, validate
from dmlconform.tolerance import degenerate
from dmlconform.tolerance.options import ToleranceOptions

# ------------------------------------------------------------------------------------------
# Rules a case exercises (coverage)


def exercised_rules(spec: Spec, desc: OperatorDesc, level: FeatureLevel) -> list[str]:
    """Rules a legal desc exercises: the active rules it depends on, those at whose edge it sits
    (``RuleKind.at_edge``: a dimension count at the end of its range, a broadcast dimension, an
    explicit size at the minimum). A rule every legal desc satisfies alike (same data type,
    required members) is exercised only by the illegal desc that breaks it."""
    op = spec.operator(desc.operator)
    ctx = Context(spec, op, level, desc, op.support_row(spec, level))
    for m in op.tensor_members:
        if not isinstance(desc.members.get(m.name), TensorDesc):
            ctx.unusable.add(m.name)
    return [rule.id for rule, kind in active_rules(spec, desc.operator, level) if kind.at_edge(rule, ctx)]


# ------------------------------------------------------------------------------------------
# Running


def make_inputs(case: Case, spec: Spec, desc: OperatorDesc | None = None) -> dict[str, np.ndarray]:
    desc = desc or case.desc
    try:
        return dict(data.make_inputs(desc, case.regime or "default", case.input_seed, spec=spec))
    except data.RegimeNotApplicable as exc:
        raise _Skip(f"input regime {case.regime} does not apply to this desc: {exc}") from None


def judged_inputs(case: Case, spec: Spec) -> degenerate.Judged:
    """A numeric case's inputs, drawn again (other regimes after its own) while they would judge
    nothing (``dmlconform.tolerance.degenerate``), with the reference's outputs on them, the
    regime they come from and the model's budgets where the check computed them."""
    try:
        return degenerate.judged_inputs(case.desc, case.regime or "default", case.input_seed, spec)
    except degenerate.JudgesNothing as exc:
        raise _Skip(f"the case would judge nothing: {exc}") from None
    except degenerate.RegimeNotApplicable as exc:
        raise _Skip(f"input regime {case.regime} does not apply to this desc: {exc}") from None


class _Asking:
    """A guard that asks the backend's ``supports(desc)`` once for every desc of a case before
    it sends that desc anywhere: the one place a backend says what it implements, honoured by
    every kind of case (a metamorphic relation's derived and chained descs included). Guards
    without ``supports`` (a DxDispatch bundle's recorder and player) are asked nothing."""

    def __init__(self, guard: Any, operator: str):
        self.guard = guard
        self.operator = operator
        # by identity (the desc objects a case makes live as long as it): hashing a desc costs
        # a JSON dump, paid by every case of a backend that has no supports() at all
        self._answers: dict[int, tuple[OperatorDesc, str | None]] = {}

    def require(self, desc: OperatorDesc) -> None:
        """Unsupported (the case is skipped) when the backend says it does not support ``desc``."""
        ask = getattr(self.guard, "supports", None)
        if not callable(ask):
            return
        if id(desc) not in self._answers:
            self._answers[id(desc)] = (desc, ask(desc))
        reason = self._answers[id(desc)][1]
        if reason is not None:
            whose = f" (its derived {desc.operator} desc)" if desc.operator != self.operator else ""
            raise Unsupported(f"{reason}{whose}")

    def call(self, method: str, desc: OperatorDesc, inputs: Any = None) -> tuple[Any, Any]:
        self.require(desc)
        return self.guard.call(method, desc, inputs)


def run_case(
    case: Case,
    guard: Any,
    spec: Spec,
    tolerance: ToleranceOptions,
    inputs: dict[str, np.ndarray] | None = None,
) -> CaseResult:
    """Run one case against a guarded backend. ``inputs`` replays saved data (reproducers);
    ``tolerance``: the run's changes to the spec's tolerance (``--tolerance model=lenient``).

    The backend's ``supports`` is asked first, before any input is made: a desc it does not
    support skips the case, whatever its kind, with the backend's reason."""
    result = CaseResult("passed", regime=case.regime)
    guard = _Asking(guard, case.operator)
    try:
        guard.require(apply_when(case.desc, case.relation) if case.relation else case.desc)
        if case.kind != "validation":
            _fits_in_memory(case, spec)
        if case.kind == "validation":
            _validation(case, guard, spec, result)
        elif case.kind == "metamorphic":
            _metamorphic(case, guard, spec, result, inputs, tolerance)
        else:
            _numeric(case, guard, spec, result, inputs, tolerance)
    except _Fail as exc:
        result.status, result.message = "failed", str(exc)
    except _Skip as exc:
        result.status, result.message = "skipped", str(exc)
    except Unsupported as exc:
        result.status, result.message = "skipped", f"backend does not support this case: {exc}"
    except BackendFailure as exc:
        result.status, result.message = "failed", str(exc)
        result.traceback = exc.traceback
    return result


def _fits_in_memory(case: Case, spec: Spec) -> None:
    """Skip (with the figures) a case too large for the memory this machine has free now."""
    short = memory_shortfall(case.desc, spec)
    if short:
        raise _Skip(short)


def _numeric(
    case: Case, guard: Any, spec: Spec, result: CaseResult, inputs: dict | None, tolerance: ToleranceOptions
) -> None:
    result.rules = exercised_rules(spec, case.desc, case.level)
    ref, budgets = None, None
    if inputs is None:
        judged = judged_inputs(case, spec)
        inputs, ref, result.regime = judged.inputs, judged.reference, judged.regime
        budgets = judged.budgets
    result.inputs = inputs
    got = backend_outputs(guard, spec, case.desc, result.inputs, result)
    ref = ref if ref is not None else reference_outputs(case.desc, result.inputs, spec)
    require_judged(ref, list(got), "numeric case")
    expected = {k: ref[k] for k in got}
    passed, errors = compare(spec, case.desc, got, expected, result.inputs, tolerance, budgets=budgets)
    result.errors = errors
    result.rejudge = rejudger(spec, case.desc, got, expected, result.inputs, 1.0, (), tolerance)
    result.compared = ComparedOutputs(got, expected, result.rejudge)
    classify(result, spec, case.desc, case.data_type, passed, tolerance)
    if not passed:
        raise _Fail(failure_message(errors))


def _metamorphic(
    case: Case, guard: Any, spec: Spec, result: CaseResult, inputs: dict | None, tolerance: ToleranceOptions
) -> None:
    rel = case.relation
    if rel is None:
        raise _Skip("metamorphic case without a relation")
    base = apply_when(case.desc, rel)
    if rel.data_types and case.data_type not in rel.data_types:
        raise _Skip(f"relation {rel.id} holds for {', '.join(rel.data_types)} only")
    if validate(base, case.level, spec):
        raise _Skip(
            f"relation {rel.id}: its precondition {rel.when} makes this desc illegal at {case.level.name}"
        )
    result.rules = exercised_rules(spec, base, case.level)
    result.inputs = inputs if inputs is not None else make_inputs(case, spec, base)
    check = RELATION_KINDS.get(rel.kind)
    if check is None:
        raise _Skip(f"relation kind {rel.kind!r} is not implemented")
    check(case, guard, spec, base, rel, result, tolerance)


def _validation(case: Case, guard: Any, spec: Spec, result: CaseResult) -> None:
    if case.expected == "illegal":
        result.rules = [case.rule] if case.rule else []
        try:
            guard.call("check", case.desc)
        except Rejected:
            return
        found = validate(case.desc, case.level, spec)
        why = next((v for v in found if v.rule == case.rule), found[0] if found else None)
        detail = f": {why.member}: {why.message}" if why else ""
        raise _Fail(f"backend accepted an illegal desc that breaks rule {case.rule}{detail}")
    result.rules = exercised_rules(spec, case.desc, case.level)
    try:
        guard.call("check", case.desc)
    except Rejected as exc:
        raise _Fail(f"backend rejected a legal desc: {exc}") from None
