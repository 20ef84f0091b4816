"""What one case checks, independent of pytest: numeric, validation and metamorphic cases.

``run_case`` returns a :class:`CaseResult` (never raises for a backend's misbehaviour), so that the
pytest item, ``dmlconform replay`` and the tests all judge a case by the same code. Messages are
one line that says what was expected and what came back; a reader should not need a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dmlconform import kernels
from dmlconform.errors import Rejected, Unsupported
from dmlconform.generation import data
from dmlconform.reference import execute
from dmlconform.report.classes import LADDER, NONE
from dmlconform.runner.cases import Case, apply_when, literal
from dmlconform.runner.guard import BackendFailure
from dmlconform.runner.tiers import memory_shortfall
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.model import Relation, Spec
from dmlconform.specification.rules import Context
from dmlconform.specification.validate import active_rules, validate
from dmlconform.tolerance import compare as compare_outputs
from dmlconform.tolerance import degenerate, overflow_within, ulp_distance
from dmlconform.tolerance.options import MODEL_ALIASES, ToleranceOptions
from dmlconform.tolerance.terms import block_length, coefficients

#: The accuracy classes, tightest first (``CaseResult.accuracy_class``; report/classes.py): the
#: tolerance models a case is judged under to say how accurate a backend is. ``default`` is the
#: one a run requires; ``tight`` is tried on a pass, the looser ones on a failure.
ACCURACY_LADDER = LADDER
NO_CLASS = NONE
#: Models that change a verdict only for these data types (others meet them as they meet default).
MODEL_DATA_TYPES = {"fp16-statistics": ("FLOAT16",)}

Rejudge = Callable[[ToleranceOptions], tuple[bool, dict[str, Any]]]


@dataclass
class CaseResult:
    """The verdict on one case plus everything the report and a reproducer need."""

    status: str  # passed | failed | skipped
    message: str | None = None
    errors: dict[str, Any] | None = None
    info: Any = None
    inputs: dict[str, np.ndarray] | None = None
    rules: list[str] = field(default_factory=list)
    regime: str | None = None
    #: the backend's formatted traceback when it raised (the message names only the raising
    #: frame): saved in the reproducer's case.json and printed by replay
    traceback: str | None = None
    #: the tolerance models (labels: ``ToleranceOptions.label``) the outputs were judged under -> met
    models: dict[str, bool] = field(default_factory=dict)
    #: the class: the tightest model of :data:`ACCURACY_LADDER` the case meets (``none`` when it
    #: meets none judged); None when no tolerance judged it (validation, a rejected desc)
    accuracy_class: str | None = None
    #: judges the same outputs under other tolerance options, (passed, errors) (None: nothing
    #: compared): what an expectation's ``meets`` bound asks; held only while the case is settled
    rejudge: Rejudge | None = field(default=None, repr=False, compare=False)

    def judge_under(self, options: ToleranceOptions) -> tuple[bool, dict[str, Any]] | None:
        """(passed, errors) of the outputs under ``options`` over the run's (remembered in
        :attr:`models`), or None when the case compared nothing a tolerance judges."""
        if self.rejudge is None:
            return None
        passed, errors = self.rejudge(options)
        self.models[options.label()] = passed
        return passed, errors


class _Fail(Exception):
    pass


class _Skip(Exception):
    pass


# ------------------------------------------------------------------------------------------
# Outputs


def numpy_dtype(spec: Spec, data_type: str) -> np.dtype:
    dt = spec.data_types.get(data_type)
    if dt is None or not dt.numpy:
        raise ValueError(f"data type {data_type} has no numpy dtype")
    return np.dtype(dt.numpy)


def expected_outputs(spec: Spec, desc: OperatorDesc) -> dict[str, TensorDesc]:
    op = spec.operator(desc.operator)
    return {m.name: t for m in op.output_members if isinstance(t := desc.members.get(m.name), TensorDesc)}


def check_outputs(spec: Spec, desc: OperatorDesc, outputs: Any) -> dict[str, np.ndarray]:
    """The backend's outputs, or ``_Fail`` naming the first member with the wrong set, shape or
    dtype. Checked before any comparison, so a wrong shape is reported as such and not as a
    confusing broadcast error inside the tolerance model."""
    want = expected_outputs(spec, desc)
    if not isinstance(outputs, dict):
        raise _Fail(f"backend returned {type(outputs).__name__}, expected a dict of output member -> array")
    missing = [m for m in want if m not in outputs]
    extra = [m for m in outputs if m not in want]
    if missing:
        raise _Fail(
            f"backend returned no {', '.join(missing)} (expected members {sorted(want)}, got {sorted(outputs)})"
        )
    if extra:
        raise _Fail(
            f"backend returned unexpected member(s) {', '.join(map(str, extra))} (expected {sorted(want)})"
        )
    out = {}
    for name, t in want.items():
        arr = outputs[name]
        if not isinstance(arr, np.ndarray):
            raise _Fail(f"{name}: backend returned {type(arr).__name__}, expected a numpy array")
        if tuple(arr.shape) != tuple(t.sizes):
            raise _Fail(f"{name}: backend returned shape {list(arr.shape)}, expected Sizes {list(t.sizes)}")
        dtype = numpy_dtype(spec, t.data_type)
        if arr.dtype != dtype:
            raise _Fail(f"{name}: backend returned dtype {arr.dtype}, expected {dtype} ({t.data_type})")
        out[name] = arr
    return out


# ------------------------------------------------------------------------------------------
# Comparison


def compare(
    spec: Spec,
    desc: OperatorDesc,
    actual: dict[str, np.ndarray],
    expected: dict[str, np.ndarray],
    inputs: dict[str, np.ndarray],
    tolerance: ToleranceOptions,
    scale: float = 1.0,
    also_inputs: tuple[dict[str, np.ndarray], ...] = (),
    budgets: Any = None,
) -> tuple[bool, dict[str, Any]]:
    """(passed, errors record in the results.json shape), judged by ``dmlconform.tolerance``;
    ``scale`` widens the budget (a metamorphic relation compares two computations
    that each carry the implementation's error), and ``also_inputs`` are the other computation's
    inputs, whose budget counts where it is the larger. ``tolerance``: the run's changes to the
    spec's tolerance (``dmlconform run --tolerance``); ``budgets``: the model's on these inputs
    with none, when the degenerate-input check computed them (``tolerance.compare``); not used
    under any."""
    if scale != 1.0:
        tolerance = tolerance.scaled(scale)
    # budgets from the degenerate-input check were computed without options (scale is one)
    res = compare_outputs(
        desc, actual, expected, inputs, spec, tolerance, also_inputs, None if tolerance else budgets
    )
    return bool(res.passed), _errors_from(res, actual, expected, tolerance.max_ulp is not None)


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


def _errors_from(
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


# ------------------------------------------------------------------------------------------
# Rules a case exercises (coverage)


def exercised_rules(spec: Spec, desc: OperatorDesc, level: str) -> list[str]:
    """Rules a legal desc exercises: the active rules it depends on, those at whose edge it sits
    (``RuleKind.at_edge``: a dimension count at the end of its range, a broadcast dimension, an
    explicit size at the minimum). A rule every legal desc satisfies alike (same data type,
    required members) is exercised only by the illegal desc that breaks it."""
    lv = spec.level(level)
    op = spec.operator(desc.operator)
    ctx = Context(spec, op, lv, desc, op.support_row(spec, lv))
    for m in op.tensor_members:
        if not isinstance(desc.members.get(m.name), TensorDesc):
            ctx.unusable.add(m.name)
    return [rule.id for rule, kind in active_rules(spec, desc.operator, level) if kind.at_edge(rule, ctx)]


# ------------------------------------------------------------------------------------------
# Running


def make_inputs(case: Case, desc: OperatorDesc | None = None) -> dict[str, np.ndarray]:
    desc = desc or case.desc
    try:
        return dict(data.make_inputs(desc, case.regime or "default", case.input_seed))
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


def _execute(
    guard: Any, spec: Spec, desc: OperatorDesc, inputs: dict[str, np.ndarray], result: CaseResult
) -> dict:
    try:
        raw, info = guard.call("execute", desc, inputs)
    except Rejected as exc:
        raise _Fail(f"backend rejected a legal desc: {exc}") from None
    if info is not None:
        result.info = info
    return check_outputs(spec, desc, raw)


def require_judged(ref: dict[str, Any], members: Any, what: str) -> None:
    """``_Skip`` where the reference has no finite element in any compared member: NaN against NaN
    is no error, so such a case would pass every backend (one returning NaN everywhere too). A
    case that judges nothing is never a pass."""
    for name in members:
        if name in ref and np.isfinite(np.asarray(ref[name], dtype=np.float64)).any():
            return
    raise _Skip(f"{what}: the reference has no finite element to compare: nothing judged")


def require_finite(
    spec: Spec,
    got: dict[str, Any],
    desc: OperatorDesc,
    inputs: dict[str, np.ndarray],
    members: Any,
    what: str,
    ref: dict[str, np.ndarray] | None = None,
) -> None:
    """``_Fail`` where the backend produced NaN or inf and the reference, on the same desc and
    inputs, is finite. A relation compares two of the backend's own runs, and NaN against NaN is
    no error there: without this, a backend returning NaN everywhere satisfied every relation.
    An inf of the reference's sign where the reference's budget reaches the magnitudes that round
    to inf is right, as in a numeric case (``tolerance.overflow_within``)."""
    ref = ref if ref is not None else _reference(desc, inputs)
    budgets = None
    for name in members:
        if name not in ref or name not in got:
            continue
        g = np.asarray(got[name])
        r = np.asarray(ref[name])
        if g.shape != r.shape:
            continue
        bad = ~np.isfinite(g.astype(np.float64)) & np.isfinite(r.astype(np.float64))
        if (bad & np.isinf(g)).any():  # only then the budgets: an overflow may be within them
            budgets = budgets if budgets is not None else degenerate.budgets(desc, ref, inputs, spec)
            bad &= ~overflow_within(g, r, np.broadcast_to(budgets[name], r.shape))
        if bad.any():
            idx = [int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape)]
            raise _Fail(
                f"{name}: the backend gave {float(g[tuple(idx)])!r} at {idx} where the reference is "
                f"{float(r[tuple(idx)])!r} ({int(bad.sum())} such elements; {what})"
            )


def _reference(desc: OperatorDesc, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return execute(desc, inputs)


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
    got = _execute(guard, spec, case.desc, result.inputs, result)
    ref = ref if ref is not None else _reference(case.desc, result.inputs)
    require_judged(ref, list(got), "numeric case")
    expected = {k: ref[k] for k in got}
    passed, errors = compare(spec, case.desc, got, expected, result.inputs, tolerance, budgets=budgets)
    result.errors = errors
    result.rejudge = _rejudger(spec, case.desc, got, expected, result.inputs, 1.0, (), tolerance)
    classify(result, spec, case.desc, case.data_type, passed, tolerance)
    if not passed:
        raise _Fail(failure_message(errors))


def _rejudger(
    spec: Spec,
    desc: OperatorDesc,
    actual: dict[str, np.ndarray],
    expected: dict[str, np.ndarray],
    inputs: dict[str, np.ndarray],
    scale: float,
    also_inputs: tuple[dict[str, np.ndarray], ...],
    tolerance: ToleranceOptions,
) -> Rejudge:
    """A function judging these outputs again under other options (the run's, with the given
    ones on top): the backend runs once, whatever models the case is judged under."""

    def rejudge(options: ToleranceOptions) -> tuple[bool, dict[str, Any]]:
        return compare(spec, desc, actual, expected, inputs, tolerance.merged(options), scale, also_inputs)

    return rejudge


def classify(
    result: CaseResult,
    spec: Spec,
    desc: OperatorDesc,
    data_type: str | None,
    passed: bool,
    tolerance: ToleranceOptions,
) -> None:
    """Record which models of :data:`ACCURACY_LADDER` the outputs meet, and the case's class.

    Judged only as far as the class needs: a pass under ``default`` is tried under ``tight``; a
    failure under the looser models in turn (``fp16-statistics`` only for the data types it
    changes) until one is met. A run whose overrides name another model records that one only."""
    op_tolerance = spec.operator(desc.operator).tolerance or {}
    required = str(op_tolerance.get("required", "default"))
    base = tolerance.model or MODEL_ALIASES.get(required, required)
    result.models[base] = passed
    known = set(op_tolerance.get("models") or ())
    if base != "default" or result.rejudge is None:
        result.accuracy_class = base if passed else None
        return
    at = ACCURACY_LADDER.index(base)
    tries = ACCURACY_LADDER[:at] if passed else ACCURACY_LADDER[at + 1 :]
    met = base if passed else NO_CLASS
    for model in tries:
        if model not in known or (model in MODEL_DATA_TYPES and data_type not in MODEL_DATA_TYPES[model]):
            continue
        if same_budgets(op_tolerance, desc, data_type, base, model, tolerance):
            result.models[model] = passed  # the same budgets: the same verdict, nothing to judge
            judged: tuple[bool, Any] | None = (passed, None)
        else:
            judged = result.judge_under(ToleranceOptions(model=model))
        if judged is not None and judged[0]:
            met = model
            break
    result.accuracy_class = met


def same_budgets(
    op_tolerance: dict[str, Any],
    desc: OperatorDesc,
    data_type: str | None,
    a: str,
    b: str,
    tolerance: ToleranceOptions,
) -> bool:
    """Whether models ``a`` and ``b`` give every element of this desc the same budget, so that
    one verdict serves both (the cost of the classes: ``tight`` differs from ``default`` only in
    the threads a GPU kernel may cut a sum into, which lengthen a sequential chain past the
    block only for sums longer than the desc's tensors here): their coefficients differ in the
    name and ``threads`` alone, and no sum of at most the largest tensor's element count gets
    a longer chain than one block under either."""
    if not data_type or data_type not in (op_tolerance.get("coefficients") or {}):
        return False
    try:
        ca = coefficients(op_tolerance, data_type, None, replace(tolerance, model=a))
        cb = coefficients(op_tolerance, data_type, None, replace(tolerance, model=b))
    except ValueError:
        return False
    if replace(ca, model="", threads=None) != replace(cb, model="", threads=None):
        return False
    n = max((t.element_count for t in desc.tensors().values()), default=0)
    one_block = min(n, int(max(ca.block, 1.0)))
    return block_length(ca, n) == block_length(cb, n) == one_block


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


# ------------------------------------------------------------------------------------------
# Metamorphic relations


def derive(spec: Spec, desc: OperatorDesc, rel: Relation) -> OperatorDesc:
    """The desc a ``same_output_as`` relation compares with: members the target operator has,
    minus ``drop``, plus ``set`` (values may be ``{where_size_one: Member}``: the dims where that
    tensor's size is 1), with array lengths (``default: {length_of: ...}``) filled in."""
    target = spec.operator(rel.operator or desc.operator)
    names = {m.name for m in target.members}
    members = {k: v for k, v in desc.members.items() if k in names and k not in rel.drop}
    for key, value in rel.set.items():
        if isinstance(value, dict) and "where_size_one" in value:
            t = desc.members.get(value["where_size_one"])
            if not isinstance(t, TensorDesc):
                raise _Skip(f"relation {rel.id}: {value['where_size_one']} is absent")
            value = [i for i, s in enumerate(t.sizes) if s == 1]
        members[key] = literal(value)
    for m in target.members:
        d = m.default
        if isinstance(d, dict) and "length_of" in d and isinstance(members.get(d["length_of"]), tuple):
            members[m.name] = len(members[d["length_of"]])
    return OperatorDesc(target.name, members)


def chain(
    spec: Spec,
    base: OperatorDesc,
    rel: Relation,
    inputs: dict[str, np.ndarray],
    outputs: dict[str, np.ndarray],
) -> tuple[OperatorDesc, dict[str, np.ndarray]]:
    """A ``chained`` relation's desc and inputs: each target member from the source member that
    ``map`` names (descs of tensors and attribute values alike), ``set`` on top; a target input
    mapped from a source output is fed ``outputs`` (the caller passes the reference's), one
    mapped from a source input the same data."""
    target = spec.operator(rel.operator or base.operator)
    members: dict[str, Any] = {}
    feed: dict[str, np.ndarray] = {}
    inputs_of_target = {m.name for m in target.input_members}
    for name, source in rel.map.items():
        value = base.members.get(source)
        if value is None:
            continue
        members[name] = value
        if name in inputs_of_target:
            data = outputs.get(source, inputs.get(source))
            if data is None:
                raise _Skip(f"relation {rel.id}: no data for {name} (from {source})")
            feed[name] = np.asarray(data)
    for key, value in rel.set.items():
        members[key] = literal(value)
    return OperatorDesc(target.name, members), feed


DERIVATIVE_RTOL = 2.0**-5
"""Allowed |difference - prediction| relative to sum |gradient * step|: the step's truncation
error is ~step^2, far below; formula-level mistakes (a missing term) are O(1)."""


def directional_derivative(
    case: Case, guard: Any, spec: Spec, base: OperatorDesc, rel: Relation, result: CaseResult
) -> None:
    """``kind: directional_derivative``: run the source desc (its ``compare`` output is a
    gradient), then the forward desc at x + d and x - d for a random direction d (rounded to the
    input's type, whose actual difference is used), and check that
    sum(w * (forward(x + d) - forward(x - d))) equals sum(gradient * (d+ - d-)) to
    ``DERIVATIVE_RTOL`` of the magnitudes plus the forward outputs' rounding."""
    inputs = result.inputs or {}
    a = _execute(guard, spec, base, inputs, result)
    forward, feed = chain(spec, base, rel, inputs, {})
    forward = forward.replace(
        **{
            k: v.replace(strides=None, total_tensor_size_in_bytes=None, flags=None)
            for k, v in forward.members.items()
            if isinstance(v, TensorDesc)
        }
    )
    bad = validate(forward, case.level, spec)
    if bad:
        raise _Skip(
            f"relation {rel.id}: forward {forward.operator} desc is illegal at {case.level} ({bad[0]})"
        )
    seed = rel.member or "InputTensor"
    ((weights_member, of),) = rel.contract.items()
    x = np.asarray(inputs[seed])
    xf = x.astype(np.float64)
    # the step's scale and the elements judged are the gradient kernel's (runner/derivatives.py)
    size, judged = kernels.part(base, spec, "derivative")(base, spec, inputs, seed)
    d = np.random.default_rng(case.input_seed).standard_normal(x.shape) * size
    plus, minus = (xf + d).astype(x.dtype), (xf - d).astype(x.dtype)
    step = plus.astype(np.float64) - minus.astype(np.float64)
    if not step.any():
        raise _Skip(f"relation {rel.id}: the step rounds to 0 in the input's type: nothing judged")
    require_finite(spec, a, base, inputs, rel.compare[:1], f"relation {rel.id}")
    runs = []
    for moved in (plus, minus):
        out = _execute(guard, spec, forward, {**feed, seed: moved}, result)
        require_finite(
            spec,
            out,
            forward,
            {**feed, seed: moved},
            [of],
            f"relation {rel.id}, {forward.operator} at x +- d",
        )
        runs.append(out[of].astype(np.float64))
    f_plus, f_minus = runs
    w = np.broadcast_to(np.asarray(inputs[weights_member], dtype=np.float64), f_plus.shape)
    grad = a[rel.compare[0]].astype(np.float64)
    # 0/0 (Epsilon 0 over a zero-variance slice) is undefined by the docs: those elements are
    # left out, as the tolerance model accepts anything there
    ok = np.isfinite(f_plus) & np.isfinite(f_minus) & np.broadcast_to(np.isfinite(grad), f_plus.shape)
    if judged is not None:
        ok &= np.broadcast_to(judged, f_plus.shape)
    if not ok.any():
        raise _Skip(
            f"relation {rel.id}: no element where it applies on this data (0/0, statistics not the "
            "slice's own, or too ill-conditioned): nothing judged"
        )
    grad_b = np.broadcast_to(grad, f_plus.shape)
    diff = float(np.sum((w * (f_plus - f_minus))[ok]))
    pred = float(np.sum((grad_b * step)[ok]))
    eps_out = float(np.finfo(np.dtype(a[rel.compare[0]].dtype)).eps)
    slack = DERIVATIVE_RTOL * float(np.sum(np.abs(grad_b * step)[ok])) + 4 * eps_out * float(
        np.sum((np.abs(w) * (np.abs(f_plus) + np.abs(f_minus)))[ok])
    )
    result.errors = {
        "max_abs": abs(diff - pred),
        "max_ulp": 0.0,
        "budget_ulp": None,
        "outputs": {},
        "worst": None,
    }
    if abs(diff - pred) > slack:
        raise _Fail(
            f"{rel.compare[0]}: sum(gradient * step) = {pred:.9g} but the central difference of "
            f"{forward.operator}'s {of} gives {diff:.9g} (|difference| {abs(diff - pred):.3g} > allowed "
            f"{slack:.3g}; {rel.id})"
        )


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
        raise _Skip(f"relation {rel.id}: its precondition {rel.when} makes this desc illegal at {case.level}")
    result.rules = exercised_rules(spec, base, case.level)
    result.inputs = inputs if inputs is not None else make_inputs(case, base)
    if rel.kind == "same_output_as":
        other = derive(spec, base, rel)
        bad = validate(other, case.level, spec)
        if bad:
            raise _Skip(
                f"relation {rel.id}: derived {other.operator} desc is illegal at {case.level} ({bad[0]})"
            )
        other_names = {m.name for m in spec.operator(other.operator).input_members}
        other_inputs = {
            k: v for k, v in result.inputs.items() if k in other_names and other.members.get(k) is not None
        }
        a = _execute(guard, spec, base, result.inputs, result)
        b = _execute(guard, spec, other, other_inputs, result)
        a_inputs, b_desc, b_inputs = result.inputs, other, other_inputs
        what = f"{other.operator} ({rel.id})"
        budget_inputs, also = result.inputs, ()
    elif rel.kind == "shift_invariant":
        member = rel.member or "InputTensor"
        base_inputs, shifted = shift_inputs(result.inputs, member)
        result.inputs = base_inputs
        a = _execute(guard, spec, base, shifted, result)
        b = _execute(guard, spec, base, base_inputs, result)
        a_inputs, b_desc, b_inputs = shifted, base, base_inputs
        what = f"unshifted run ({rel.id})"
        budget_inputs, also = shifted, (base_inputs,)  # the shift may raise or lower |mean|
    elif rel.kind == "directional_derivative":
        directional_derivative(case, guard, spec, base, rel, result)
        return
    elif rel.kind == "chained":
        a = _execute(guard, spec, base, result.inputs, result)
        # fed the reference's outputs, not the backend's: the backend's statistics are judged by
        # the numeric cases, and the derived run's data stays a function of the case alone (as
        # a DxDispatch bundle needs: it is written before any device runs)
        other, other_inputs = chain(spec, base, rel, result.inputs, _reference(base, result.inputs))
        bad = validate(other, case.level, spec)
        if bad:
            raise _Skip(
                f"relation {rel.id}: chained {other.operator} desc is illegal at {case.level} ({bad[0]})"
            )
        b = _execute(guard, spec, other, other_inputs, result)
        a_inputs, b_desc, b_inputs = result.inputs, other, other_inputs
        what = f"{other.operator} fed {base.operator}'s outputs ({rel.id})"
        budget_inputs, also = result.inputs, ()
    else:
        raise _Skip(f"relation kind {rel.kind!r} is not implemented")
    keys = [k for k in rel.compare if k in a and k in b]
    ref_a = _reference(base, a_inputs)
    require_judged(ref_a, keys, what)
    require_finite(spec, a, base, a_inputs, keys, what, ref_a)
    require_finite(spec, b, b_desc, b_inputs, keys, what)
    actual, expected = {k: a[k] for k in keys}, {k: b[k] for k in keys}
    passed, errors = compare(spec, base, actual, expected, budget_inputs, tolerance, 2.0, also)
    result.errors = errors
    result.rejudge = _rejudger(spec, base, actual, expected, budget_inputs, 2.0, also, tolerance)
    classify(result, spec, base, case.data_type, passed, tolerance)
    if not passed:
        raise _Fail(failure_message(errors, what))


def shift_inputs(
    inputs: dict[str, np.ndarray], member: str
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(base, shifted) inputs where ``shifted[member] == base[member] + c`` exactly.

    The shift ``c`` is a power of two about four spreads wide, and the base data is first rounded
    to the grid of ``ulp(max|x| + c)``, so that adding ``c`` is exact in the input's own data
    type: the relation then tests the implementation, not the rounding of its input."""
    x = np.asarray(inputs[member])
    xf = x.astype(np.float64)
    finite = xf[np.isfinite(xf)]
    spread = float(finite.std()) if finite.size else 1.0
    c = 2.0 ** math.ceil(math.log2(max(4.0 * spread, 1.0)))
    peak = float(np.abs(finite).max()) if finite.size else 0.0
    room = float(np.finfo(x.dtype).max) - peak
    if c > room / 2 and room > 0:  # keep the shifted data finite (FLOAT16: max 65504)
        c = 2.0 ** math.floor(math.log2(room / 2))
    top = peak + c
    grid = 2.0 ** (math.floor(math.log2(top)) - np.finfo(x.dtype).nmant + 1)
    q = (np.round(xf / grid) * grid).astype(x.dtype)
    shifted = (q.astype(np.float64) + c).astype(x.dtype)
    base = dict(inputs)
    base[member] = q
    moved = dict(inputs)
    moved[member] = shifted
    return base, moved
