"""Judging one computation of a case: the backend's outputs checked for members, shapes and
types, compared with the reference under the run's tolerance, and classed by the tightest
tolerance model they meet. :class:`CaseResult` holds the verdict.

Numeric cases (``runner.checks``) and metamorphic relations (``runner.relations``) judge by
this same code, so a relation's verdict reads like a numeric case's. A check that cannot pass
raises :class:`_Fail`, one that judges nothing :class:`_Skip`; ``run_case`` turns either into
the result's status and one-line message.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dmlconform.errors import Rejected
from dmlconform.kernels import execute
from dmlconform.report.classes import LADDER, NONE
from dmlconform.runner.error_record import errors_from
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.spec import Spec
from dmlconform.tolerance import compare as compare_outputs
from dmlconform.tolerance import degenerate, overflow_within
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

    def nan_where_number(self) -> bool:
        """Whether the worst output element is a NaN where the reference is a number, what an
        expectation with ``nan: false`` does not explain. A NaN's error is infinite, so it is
        the worst element whenever the outputs hold one."""
        worst = (self.errors or {}).get("worst") or {}
        try:
            backend, reference = float(worst.get("backend")), float(worst.get("reference"))
        except (TypeError, ValueError):
            return False
        return math.isnan(backend) and not math.isnan(reference)

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
    return bool(res.passed), errors_from(res, actual, expected, tolerance.max_ulp is not None)


# ------------------------------------------------------------------------------------------
# Running and the reference


def backend_outputs(
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
    ref = ref if ref is not None else reference_outputs(desc, inputs, spec)
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


def reference_outputs(desc: OperatorDesc, inputs: dict[str, np.ndarray], spec: Spec) -> dict[str, np.ndarray]:
    return execute(desc, inputs, spec)


# ------------------------------------------------------------------------------------------
# Rejudging and accuracy classes


def rejudger(
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
