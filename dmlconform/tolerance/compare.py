"""The comparison and its verdict: every output member element by element against its budget,
the main output's aggregate check, the message naming the worst element. Picks the model through
the kernel registry and hands large normalization cases to the compiled judge.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dmlconform import kernels
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec
from dmlconform.tolerance.aggregate import aggregate_check
from dmlconform.tolerance.options import NO_OPTIONS, ToleranceOptions
from dmlconform.tolerance.terms import (
    BudgetModel,
    Budgets,
    Coefficients,
    overflow_within,
    overflowed_alike,
    ulp_distance,
    ulp_of,
)


@dataclass
class OutputComparison:
    """One output member: its worst element (largest error / budget) and summary metrics."""

    member: str
    passed: bool
    max_ulp: float
    max_abs: float
    worst_index: tuple[int, ...] | None = None
    backend_value: float | None = None
    reference_value: float | None = None
    budget: float | None = None
    budget_ulp: float | None = None
    ratio: float = 0.0
    failing_elements: int = 0
    message: str = ""
    aggregate: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["worst_index"] = list(self.worst_index) if self.worst_index is not None else None
        return d


@dataclass
class Comparison:
    """The verdict on one case: ``passed`` and, per output member, where the error is worst.

    ``nonfinite_inputs``: the inputs hold NaN or Inf; DirectML leaves that behaviour undefined,
    so the case is reported as information and always passes."""

    passed: bool
    outputs: dict[str, OutputComparison] = field(default_factory=dict)
    nonfinite_inputs: bool = False
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "nonfinite_inputs": self.nonfinite_inputs,
            "message": self.message,
            "outputs": {k: v.to_dict() for k, v in self.outputs.items()},
        }


def _compare_member(
    member: str, got: Any, ref: np.ndarray, budget: np.ndarray, co: Coefficients
) -> OutputComparison:
    ref = np.asarray(ref)
    unusable = _unusable_answer(member, got, ref)
    if unusable is not None:
        return unusable
    got = np.asarray(got)
    # in place where numpy allows, in the order of operations of the expressions in the comments
    # (the same values to the last bit): as expressions, their temporaries held ~46 bytes per
    # element beside the budget, the peak of a large gradient case's compare
    got_t = got.astype(ref.dtype, copy=False)
    budget = np.broadcast_to(budget, ref.shape)
    ulps = ulp_distance(got_t, ref)
    max_ulp = float(ulps.max()) if ulps.size else 0.0
    if co.max_ulp is None:
        del ulps  # not needed below: one tensor fewer at the peak
    err, same = _element_errors(got, got_t, ref, budget)
    ratio = _element_ratios(err, budget, ref)
    budget = _judging_budgets(budget, ref, same)
    del same
    # a fixed ULP budget replaces the analysis
    failing = err > budget if co.max_ulp is None else _fixed_ulp_ratios(ulps, co.max_ulp, ratio)
    if not ratio.size:
        return OutputComparison(member, True, 0.0, 0.0, message=f"{member}: ok; no elements")
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
    return member_comparison(
        member,
        failing=int(failing.sum()),
        max_ulp=max_ulp,
        max_abs=float(err.max()),
        index=idx,
        got=float(got[idx]),
        ref=float(ref[idx]),
        budget=float(budget[idx]),
        ratio=float(ratio[idx]),
        co=co,
        dtype=ref.dtype,
    )


def _unusable_answer(member: str, got: Any, ref: np.ndarray) -> OutputComparison | None:
    """The failed comparison of an answer that cannot be compared element by element (missing,
    or of another shape), else None."""
    if got is None:
        return OutputComparison(
            member, False, math.inf, math.inf, message=f"{member}: backend returned no output"
        )
    shape = np.shape(got)
    if shape != ref.shape:
        return OutputComparison(
            member,
            False,
            math.inf,
            math.inf,
            message=f"{member}: shape {list(shape)}, expected {list(ref.shape)}",
        )
    return None


def _element_errors(
    got: np.ndarray, got_t: np.ndarray, ref: np.ndarray, budget: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(err, same): each element's absolute error (float64; inf where it is NaN, 0 where the
    answer counts as the reference itself) and where it does: equal, both NaN, overflowed
    alike, or an overflow the budget reaches."""
    with np.errstate(invalid="ignore"):
        err = got.astype(np.float64)  # err = |got - ref| (float64)
        np.subtract(err, ref, out=err)
        np.abs(err, out=err)
    same = (got_t == ref) | (np.isnan(got_t) & np.isnan(ref)) | overflowed_alike(got_t, ref)
    same |= overflow_within(got_t, ref, budget)
    np.copyto(err, np.inf, where=np.isnan(err))  # err = where(same, 0, where(isnan(err), inf, err))
    np.copyto(err, 0.0, where=same)
    return err, same


def _element_ratios(err: np.ndarray, budget: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Each element's error over its budget: 0 without error, inf where undefined (NaN), 0
    where the budget is unbounded."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.divide(err, budget)  # ratio = where(err == 0, 0, err / budget)
    np.copyto(ratio, 0.0, where=err == 0)
    # an element with an unbounded budget (0/0, undefined) accepts anything: never the worst;
    # one whose reference overflowed to inf is not unbounded: only that overflow is right
    unbounded = np.isposinf(budget) & ~np.isinf(ref)
    np.copyto(ratio, np.inf, where=np.isnan(ratio))  # where(unbounded, 0, where(isnan, inf, ratio))
    np.copyto(ratio, 0.0, where=unbounded)
    return ratio


def _judging_budgets(budget: np.ndarray, ref: np.ndarray, same: np.ndarray) -> np.ndarray:
    """The budgets the verdict holds errors to: 0 where the reference overflowed and the answer
    is not that overflow (nothing else is right there)."""
    overflowed = np.isinf(ref) & ~same
    if overflowed.any():  # budget = where(isinf(ref) & ~same, 0, budget): a copy only then
        budget = np.where(overflowed, 0.0, budget)
    return budget


def _fixed_ulp_ratios(ulps: np.ndarray, max_ulp: float, ratio: np.ndarray) -> np.ndarray:
    """Under a fixed ULP budget: each element's ULP distance over it (into ``ratio``), and the
    elements over it."""
    with np.errstate(divide="ignore"):
        np.divide(ulps, max(max_ulp, 1e-300), out=ratio)  # where(ulps == 0, 0, ulps / max_ulp)
    np.copyto(ratio, 0.0, where=ulps == 0)
    return ulps > max_ulp


def _fmt(v: float, digits: int = 3) -> str:
    return f"{v:.{digits}g}"


def member_comparison(
    member: str,
    *,
    failing: int,
    max_ulp: float,
    max_abs: float,
    index: tuple[int, ...],
    got: float,
    ref: float,
    budget: float,
    ratio: float,
    co: Coefficients,
    dtype: np.dtype,
) -> OutputComparison:
    """One member's verdict from its figures (the numpy model's and the compiled judge's alike).

    The message says what decided: the worst element (largest error over its own budget), its
    error and its budget in the unit that decided (absolute error for the model, ULP under a
    fixed ``max_ulp``), and how they compare. A budget in ULP is given only where it means
    something: not at a reference of 0 or a subnormal, whose ULP is a denormal's."""
    dtype = np.dtype(dtype) if np.dtype(dtype).kind == "f" else np.dtype(np.float32)
    ulp_here = float(ulp_of(np.asarray([ref]), dtype)[0])
    if co.max_ulp is not None:
        budget = float(co.max_ulp * ulp_here)
        budget_ulp: float | None = float(co.max_ulp)
    else:
        meaningful = math.isfinite(budget) and math.isfinite(ref) and abs(ref) >= float(np.finfo(dtype).tiny)
        budget_ulp = budget / ulp_here if meaningful else None
    out = OutputComparison(
        member=member,
        passed=failing == 0,
        max_ulp=max_ulp,
        max_abs=max_abs,
        failing_elements=failing,
        worst_index=index,
        backend_value=got,
        reference_value=ref,
        budget=budget,
        budget_ulp=budget_ulp,
        ratio=ratio,
    )
    out.message = (
        f"{member}: {'ok' if out.passed else f'FAIL ({failing} elements over budget)'}; "
        + worst_element(out, co)
    )
    return out


def worst_element(out: OutputComparison, co: Coefficients) -> str:
    """``worst at [i]: got g, want r; <error> <relation> <budget> (<ratio> of it)`` in the unit
    that decided; an element whose budget is unbounded (undefined by the docs) says so."""
    where = f"worst at {list(out.worst_index or ())}: got {out.backend_value!r}, want {out.reference_value!r}"
    if co.max_ulp is not None:
        err_ulp = float(
            ulp_distance(np.asarray([out.backend_value], np.float64), np.asarray([out.reference_value]))[0]
        )
        rel = ">" if err_ulp > co.max_ulp else "<="
        return f"{where}; {_fmt(err_ulp, 4)} ULP {rel} max_ulp {_fmt(co.max_ulp, 4)}"
    err = abs(out.backend_value - out.reference_value) if out.backend_value != out.reference_value else 0.0
    if math.isnan(out.backend_value) and math.isnan(out.reference_value):
        err = 0.0
    elif math.isnan(err):
        err = math.inf
    if math.isinf(out.budget or 0.0) and (out.budget or 0.0) > 0:
        return f"{where}; abs error {_fmt(err)}, budget unbounded (the docs leave the value undefined)"
    if out.budget is None or math.isnan(out.budget):
        return f"{where}; abs error {_fmt(err)}, no budget (the reference is not a number)"
    rel = ">" if err > out.budget else "<="
    return f"{where}; abs error {_fmt(err)} {rel} budget {_fmt(out.budget)} ({_fmt(out.ratio)} of it)"


def _judge_aggregate(
    b: Budgets,
    outputs: dict[str, OutputComparison],
    outputs_backend: dict[str, Any],
    outputs_reference: dict[str, np.ndarray],
) -> None:
    """Add the aggregate figures to the main output's comparison; over 1 fails it."""
    assert b.aggregate is not None
    name = b.aggregate.plan.output
    main, co = outputs.get(name), b.coefficients.get(name)
    if main is None or main.worst_index is None or co is None or co.max_ulp is not None:
        return
    got = np.asarray(outputs_backend.get(name))
    main.aggregate = aggregate_check(
        b.aggregate, got, np.asarray(outputs_reference[name]), b.by_member[name], co
    )
    _aggregate_verdict(main)


def _aggregate_verdict(main: OutputComparison) -> None:
    """Fold the aggregate figures into the main output's verdict and message; over 1 fails."""
    assert main.aggregate is not None
    over = {k: v for k, v in main.aggregate.items() if v > 1.0}
    figures = ", ".join(f"{k} {v:.3g}" for k, v in main.aggregate.items())
    if over:
        main.passed = False
        main.message = (
            f"{main.member}: FAIL (aggregate: {figures} of the bound: a systematic error);"
            + main.message.partition(";")[2]
        )
    else:
        main.message += f"; aggregate {figures} of the bound"


FINITE_CHUNK = 1 << 16
"""Elements per np.isfinite call in :func:`_all_finite`: its boolean temporary stays small."""


def _all_finite(values: Any) -> bool:
    """Whether every element is finite, in chunks of the array's own dtype: a float64 copy of a
    2^26-element input (the check as it was) cost 8 bytes per element and most of a fast judge's
    time."""
    a = np.asarray(values)
    if a.dtype.kind in "iub":
        return True
    if a.dtype.kind != "f" or not a.flags.c_contiguous:
        return bool(np.all(np.isfinite(np.asarray(a, dtype=np.float64))))
    flat = a.reshape(-1)
    if a.dtype == np.float16:
        # numpy's isfinite on float16 converts each element (4.5 ms per 2^22 elements, against
        # 0.6 ms here): a float16 is finite when its magnitude's bits are below inf's, 0x7C00
        bits = flat.view(np.int16)
        return all(
            int((bits[i : i + FINITE_CHUNK] & 0x7FFF).max()) < 0x7C00
            for i in range(0, bits.size, FINITE_CHUNK)
        )
    return all(bool(np.isfinite(flat[i : i + FINITE_CHUNK]).all()) for i in range(0, flat.size, FINITE_CHUNK))


def _given(budgets: Any, outputs_reference: dict[str, Any]) -> Budgets | None:
    """The caller's budgets cut to the members the backend returned (the model computes only
    those), or None when it has none or lacks one of them."""
    if not isinstance(budgets, Budgets) or not set(outputs_reference) <= set(budgets.by_member):
        return None
    keep = set(outputs_reference)
    return Budgets(
        {k: v for k, v in budgets.by_member.items() if k in keep},
        {k: v for k, v in budgets.coefficients.items() if k in keep},
        budgets.aggregate
        if budgets.aggregate is not None and budgets.aggregate.plan.output in keep
        else None,
    )


def _judge_plan(
    desc: OperatorDesc, got: dict[str, Any], reference: dict[str, Any], inputs: dict[str, Any], spec: Spec
) -> Any:
    """The plan when the compiled judge takes this case (its kernel has a ``judge`` part and
    that part accepts the case: large enough, outputs as expected), else None. numba-free: the
    judge compiles only for the cases it takes."""
    kernel = kernels.kernel_of(desc, spec)
    return None if kernel.judge is None else kernels.resolve(kernel.judge)(desc, got, reference, inputs, spec)


def case_budgets(
    desc: OperatorDesc,
    reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
) -> tuple[dict[str, np.ndarray], Budgets | None]:
    """Every output's per-element budget on these inputs: (budgets by member, the model's
    :class:`Budgets` when the numpy model computed them, which :func:`compare` takes back, since
    a model's budgets depend on the inputs and the reference only). A case that the compiled
    judge would take gets the judge's budgets (``judge_normalization(budget_out=...)``, equal
    to the model's to a relative 1e-12: tests/test_judge.py) at a fraction of the model's cost
    and memory."""
    plan = _judge_plan(desc, reference, reference, inputs, spec)
    if plan is None:
        b = _budget_model(desc, spec)(desc, reference, inputs, spec, tolerance)
        return b.by_member, b
    main = np.empty(np.shape(reference[plan.output]))
    _, by_member, _ = _compiled(desc, plan, reference[plan.output], reference, inputs, spec, tolerance, main)
    return {plan.output: main, **by_member}, None


def sampled_budgets(
    desc: OperatorDesc, reference: dict[str, np.ndarray], inputs: dict[str, Any], spec: Spec, count: int
) -> tuple[dict[str, tuple[np.ndarray | None, np.ndarray]], Any] | None:
    """For a case the compiled judge takes: each output's budgets, the main output's at its
    first ``count`` elements in the kernel's slice order only, as {member: (C-order flat
    indices or None for every element, budgets)}, and the judge's per-slice terms (which
    :func:`compare` takes back as ``budgets``: the statistics pass over every element is not
    repeated); None for a case the numpy model takes. A question that one element answers (is
    some element judged? does this answer fail somewhere?) costs a sample's pass instead of the
    whole tensor's."""
    from dmlconform.tolerance import judge

    plan = _judge_plan(desc, reference, reference, inputs, spec)
    if plan is None:
        return None
    at, main, terms = judge.sample_budgets(desc, reference, inputs, spec, plan, count)
    by_member, _ = _statistics_budgets(desc, terms.model, reference, spec, NO_OPTIONS)
    return {plan.output: (at, main), **{k: (None, v) for k, v in by_member.items()}}, terms


def _compiled(
    desc: OperatorDesc,
    plan: Any,
    got: Any,
    reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
    budget_out: np.ndarray | None = None,
    terms: Any = None,
) -> tuple[OutputComparison, dict[str, np.ndarray], dict[str, Coefficients]]:
    """The compiled judge's comparison of the main output (``budget_out`` receives its budgets),
    and the budgets and coefficients of the statistics outputs, from the judge's per-slice terms
    (``terms``: made earlier on these inputs, :func:`sampled_budgets`)."""
    from dmlconform.tolerance import judge

    main, terms = judge.judge_normalization(
        desc,
        got,
        reference[plan.output],
        inputs,
        spec,
        tolerance,
        budget_out=budget_out,
        plan=plan,
        terms=terms,
    )
    return main, *_statistics_budgets(desc, terms, reference, spec, tolerance)


def _statistics_budgets(
    desc: OperatorDesc,
    terms: Any,
    reference: dict[str, np.ndarray],
    spec: Spec,
    tolerance: ToleranceOptions,
) -> tuple[dict[str, np.ndarray], dict[str, Coefficients]]:
    """The statistics outputs' budgets and coefficients from the judge's per-slice terms (none
    for a model without statistics outputs: its terms are None)."""
    return ({}, {}) if terms is None else terms.output_budgets(desc, reference, spec, tolerance)


def compare(
    desc: OperatorDesc,
    outputs_backend: dict[str, Any],
    outputs_reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
    also_inputs: tuple[dict[str, Any], ...] = (),
    budgets: Any = None,
) -> Comparison:
    """Compare a backend's outputs against the reference's (rounded) outputs, element by element,
    each against its own budget. ``tolerance``: the run's changes to the spec's
    tolerance (a model, ``ulp_scale``, ``max_ulp``, ``atol``, named coefficients). ``also_inputs``: other input sets the compared outputs were
    computed from (a metamorphic relation's second run); each element gets the largest of the
    budgets, since either run's data may be the worse conditioned. ``budgets``: what the
    degenerate-input check computed on these inputs and reference outputs with these options,
    when the caller has it: the numpy model's :class:`Budgets` (:func:`case_budgets`) or the
    compiled judge's per-slice terms (:func:`sampled_budgets`); not recomputed then."""
    nonfinite = _nonfinite_inputs(desc, inputs, spec)
    plan = None if also_inputs else _judge_plan(desc, outputs_backend, outputs_reference, inputs, spec)
    if plan is not None:
        terms = None if isinstance(budgets, Budgets) else budgets
        outputs = _compiled_outputs(
            desc, plan, outputs_backend, outputs_reference, inputs, spec, tolerance, terms
        )
    else:
        b = _given(budgets, outputs_reference) or _budget_model(desc, spec)(
            desc, outputs_reference, inputs, spec, tolerance
        )
        outputs = _model_outputs(desc, b, outputs_backend, outputs_reference, spec, tolerance, also_inputs)
    return _verdict(outputs, nonfinite)


def _budget_model(desc: OperatorDesc, spec: Spec) -> BudgetModel:
    """The budget model of the kernel serving ``desc`` (the registry's ``budgets`` part)."""
    model: BudgetModel = kernels.resolve(kernels.kernel_of(desc, spec).budgets)
    return model


def _nonfinite_inputs(desc: OperatorDesc, inputs: dict[str, Any], spec: Spec) -> bool:
    """Whether an input member holds NaN or Inf (:class:`Comparison`'s ``nonfinite_inputs``)."""
    names = [m.name for m in spec.operator(desc.operator).input_members]
    return any(not _all_finite(inputs[m]) for m in names if m in inputs)


def _compiled_outputs(
    desc: OperatorDesc,
    plan: Any,
    outputs_backend: dict[str, Any],
    outputs_reference: dict[str, np.ndarray],
    inputs: dict[str, Any],
    spec: Spec,
    tolerance: ToleranceOptions,
    terms: Any,
) -> dict[str, OutputComparison]:
    """Every output's comparison where the compiled judge takes the case: the main output's
    from the judge (its aggregate figures folded in), the statistics outputs' from the budgets
    its per-slice terms give."""
    main, by_member, coeffs = _compiled(
        desc, plan, outputs_backend[plan.output], outputs_reference, inputs, spec, tolerance, terms=terms
    )
    outputs = {plan.output: main}
    for name in by_member:
        outputs[name] = _compare_member(
            name, outputs_backend.get(name), outputs_reference[name], by_member[name], coeffs[name]
        )
    if main.aggregate is not None:
        _aggregate_verdict(main)
    return outputs


def _model_outputs(
    desc: OperatorDesc,
    b: Budgets,
    outputs_backend: dict[str, Any],
    outputs_reference: dict[str, np.ndarray],
    spec: Spec,
    tolerance: ToleranceOptions,
    also_inputs: tuple[dict[str, Any], ...],
) -> dict[str, OutputComparison]:
    """Every output's comparison against the numpy model's budgets ``b``, widened to the largest
    over ``also_inputs``' budgets (the aggregate then left out: it fits one run's errors)."""
    for other in also_inputs:
        wider = _budget_model(desc, spec)(desc, outputs_reference, other, spec, tolerance).by_member
        b.by_member = {k: np.maximum(v, wider[k]) for k, v in b.by_member.items()}
    outputs = {
        name: _compare_member(
            name,
            outputs_backend.get(name),
            outputs_reference[name],
            b.by_member[name],
            b.coefficients[name],
        )
        for name in b.by_member
    }
    if b.aggregate is not None and not also_inputs:
        _judge_aggregate(b, outputs, outputs_backend, outputs_reference)
    return outputs


def _verdict(outputs: dict[str, OutputComparison], nonfinite: bool) -> Comparison:
    """The case's verdict from its outputs' comparisons: passed when each passed, or always
    where the inputs are not finite (information only)."""
    passed = all(o.passed for o in outputs.values())
    lines = [o.message for o in outputs.values()]
    if nonfinite:
        lines.insert(0, "inputs hold NaN or Inf: behaviour undefined by DirectML, reported as information")
        passed = True
    return Comparison(passed, outputs, nonfinite, "\n".join(lines))
