"""Metamorphic relations: two of the backend's own computations that must agree.

A relation (``relations:`` in an operator's spec) judges what no reference comparison can: that
a backend's operator agrees with itself under a change the spec says it must not see (a shift of
the input, another operator's equivalent desc, a chained pair, a small step along its gradient).
Each kind is one function of :data:`RELATION_KINDS`; the relation's ``compare`` outputs are
judged by the tolerance as a numeric case's, with the budget doubled for the two computations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmlconform import kernels
from dmlconform.runner.cases import Case, literal
from dmlconform.runner.error_record import failure_message
from dmlconform.runner.judging import (
    CaseResult,
    _Fail,
    _Skip,
    backend_outputs,
    classify,
    compare,
    reference_outputs,
    rejudger,
    require_finite,
    require_judged,
)
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.spec import FeatureLevel, Relation, Spec
from dmlconform.specification.validate import validate
from dmlconform.tolerance.options import ToleranceOptions


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
    case: Case,
    guard: Any,
    spec: Spec,
    base: OperatorDesc,
    rel: Relation,
    result: CaseResult,
    tolerance: ToleranceOptions,
) -> None:
    """``kind: directional_derivative``: run the source desc (its ``compare`` output is a
    gradient), then the forward desc at x + d and x - d for a random direction d (rounded to the
    input's type, whose actual difference is used), and check that
    sum(w * (forward(x + d) - forward(x - d))) equals sum(gradient * (d+ - d-)) to
    ``DERIVATIVE_RTOL`` of the magnitudes plus the forward outputs' rounding (``tolerance`` is
    not used: no tolerance model bounds a central difference)."""
    inputs = result.inputs or {}
    a = backend_outputs(guard, spec, base, inputs, result)
    forward, feed = chain(spec, base, rel, inputs, {})
    forward = forward.replace(
        **{
            k: v.replace(strides=None, total_tensor_size_in_bytes=None, flags=None)
            for k, v in forward.members.items()
            if isinstance(v, TensorDesc)
        }
    )
    _require_legal(forward, "forward", case.level, spec, rel)
    seed = rel.member or "InputTensor"
    ((weights_member, of),) = rel.contract.items()
    plus, minus, step, judged = _steps(case, spec, base, rel, inputs, seed)
    require_finite(spec, a, base, inputs, rel.compare[:1], f"relation {rel.id}")
    f_plus, f_minus = [
        _forward_output(guard, spec, forward, {**feed, seed: moved}, of, rel, result)
        for moved in (plus, minus)
    ]
    w = np.broadcast_to(np.asarray(inputs[weights_member], dtype=np.float64), f_plus.shape)
    difference = (f_plus, f_minus, step, judged)
    _judge_difference(rel, f"{forward.operator}'s {of}", a[rel.compare[0]], w, difference, result)


def _steps(
    case: Case, spec: Spec, base: OperatorDesc, rel: Relation, inputs: dict[str, np.ndarray], seed: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """(x + d and x - d in the input's type, their actual difference in float64, the elements
    judged or None) for the input member ``seed``; ``_Skip`` when the step rounds to nothing."""
    x = np.asarray(inputs[seed])
    xf = x.astype(np.float64)
    # the step's scale and the elements judged are the gradient kernel's (tolerance/derivatives.py)
    size, judged = kernels.part(base, spec, "derivative")(base, spec, inputs, seed)
    d = np.random.default_rng(case.input_seed).standard_normal(x.shape) * size
    plus, minus = (xf + d).astype(x.dtype), (xf - d).astype(x.dtype)
    step = plus.astype(np.float64) - minus.astype(np.float64)
    if not step.any():
        raise _Skip(f"relation {rel.id}: the step rounds to 0 in the input's type: nothing judged")
    return plus, minus, step, judged


def _forward_output(
    guard: Any,
    spec: Spec,
    forward: OperatorDesc,
    inputs: dict[str, np.ndarray],
    of: str,
    rel: Relation,
    result: CaseResult,
) -> np.ndarray:
    """The forward desc's output ``of`` on the moved inputs, in float64; ``_Fail`` where the
    backend gives a non-finite value the reference does not."""
    out = backend_outputs(guard, spec, forward, inputs, result)
    require_finite(spec, out, forward, inputs, [of], f"relation {rel.id}, {forward.operator} at x +- d")
    return out[of].astype(np.float64)


def _judge_difference(
    rel: Relation,
    forward_output: str,
    gradient: np.ndarray,
    w: np.ndarray,
    difference: tuple[np.ndarray, np.ndarray, np.ndarray, Any],
    result: CaseResult,
) -> None:
    """Compare sum(w * (f(x + d) - f(x - d))) with sum(gradient * step) over the elements where
    the relation applies (``difference``: f(x + d), f(x - d), the step, the elements judged or
    None); sets the result's errors, ``_Fail`` beyond the allowed slack."""
    f_plus, f_minus, step, judged = difference
    grad = gradient.astype(np.float64)
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
    eps_out = float(np.finfo(np.dtype(gradient.dtype)).eps)
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
            f"{forward_output} gives {diff:.9g} (|difference| {abs(diff - pred):.3g} > allowed "
            f"{slack:.3g}; {rel.id})"
        )


def same_output_as(
    case: Case,
    guard: Any,
    spec: Spec,
    base: OperatorDesc,
    rel: Relation,
    result: CaseResult,
    tolerance: ToleranceOptions,
) -> None:
    """``kind: same_output_as``: the desc and the one :func:`derive` makes of it (another
    operator, or the same one with members dropped or set) agree on the same inputs."""
    other = derive(spec, base, rel)
    _require_legal(other, "derived", case.level, spec, rel)
    other_names = {m.name for m in spec.operator(other.operator).input_members}
    other_inputs = {
        k: v for k, v in result.inputs.items() if k in other_names and other.members.get(k) is not None
    }
    a = backend_outputs(guard, spec, base, result.inputs, result)
    b = backend_outputs(guard, spec, other, other_inputs, result)
    runs = _Runs(a, result.inputs, b, other, other_inputs, f"{other.operator} ({rel.id})")
    _judge_runs(case, spec, base, rel, result, tolerance, runs)


def shift_invariant(
    case: Case,
    guard: Any,
    spec: Spec,
    base: OperatorDesc,
    rel: Relation,
    result: CaseResult,
    tolerance: ToleranceOptions,
) -> None:
    """``kind: shift_invariant``: the desc gives the same outputs on its input shifted by a
    constant (:func:`shift_inputs`) as on the input itself."""
    member = rel.member or "InputTensor"
    base_inputs, shifted = shift_inputs(result.inputs, member)
    result.inputs = base_inputs
    a = backend_outputs(guard, spec, base, shifted, result)
    b = backend_outputs(guard, spec, base, base_inputs, result)
    # the shift may raise or lower |mean|: the unshifted inputs' budget counts where larger
    runs = _Runs(a, shifted, b, base, base_inputs, f"unshifted run ({rel.id})", also=(base_inputs,))
    _judge_runs(case, spec, base, rel, result, tolerance, runs)


def chained(
    case: Case,
    guard: Any,
    spec: Spec,
    base: OperatorDesc,
    rel: Relation,
    result: CaseResult,
    tolerance: ToleranceOptions,
) -> None:
    """``kind: chained``: the desc agrees with the desc :func:`chain` makes, fed the source's
    outputs."""
    a = backend_outputs(guard, spec, base, result.inputs, result)
    # fed the reference's outputs, not the backend's: the backend's statistics are judged by
    # the numeric cases, and the derived run's data stays a function of the case alone (as
    # a DxDispatch bundle needs: it is written before any device runs)
    other, other_inputs = chain(spec, base, rel, result.inputs, reference_outputs(base, result.inputs, spec))
    _require_legal(other, "chained", case.level, spec, rel)
    b = backend_outputs(guard, spec, other, other_inputs, result)
    what = f"{other.operator} fed {base.operator}'s outputs ({rel.id})"
    _judge_runs(
        case, spec, base, rel, result, tolerance, _Runs(a, result.inputs, b, other, other_inputs, what)
    )


RelationCheck = Callable[[Case, Any, Spec, OperatorDesc, Relation, CaseResult, ToleranceOptions], None]

#: Each relation kind's check, by the ``kind`` of a spec relation; a kind not here is skipped
#: (``relation kind ... is not implemented``).
RELATION_KINDS: dict[str, RelationCheck] = {
    "same_output_as": same_output_as,
    "shift_invariant": shift_invariant,
    "directional_derivative": directional_derivative,
    "chained": chained,
}


@dataclass(frozen=True)
class _Runs:
    """The two computations a relation compares: the source desc's outputs ``a`` on
    ``a_inputs`` (whose budget judges), and ``b`` of ``b_desc`` on ``b_inputs``; ``what`` names
    ``b`` in messages; ``also``: other inputs whose budget counts where it is the larger."""

    a: dict[str, np.ndarray]
    a_inputs: dict[str, np.ndarray]
    b: dict[str, np.ndarray]
    b_desc: OperatorDesc
    b_inputs: dict[str, np.ndarray]
    what: str
    also: tuple[dict[str, np.ndarray], ...] = ()


def _judge_runs(
    case: Case,
    spec: Spec,
    base: OperatorDesc,
    rel: Relation,
    result: CaseResult,
    tolerance: ToleranceOptions,
    runs: _Runs,
) -> None:
    """Judge the relation's ``compare`` outputs of the two runs against each other, as a numeric
    case's against the reference but with twice the budget (each run carries its own error)."""
    a, b, what = runs.a, runs.b, runs.what
    keys = [k for k in rel.compare if k in a and k in b]
    ref_a = reference_outputs(base, runs.a_inputs, spec)
    require_judged(ref_a, keys, what)
    require_finite(spec, a, base, runs.a_inputs, keys, what, ref_a)
    require_finite(spec, b, runs.b_desc, runs.b_inputs, keys, what)
    actual, expected = {k: a[k] for k in keys}, {k: b[k] for k in keys}
    passed, errors = compare(spec, base, actual, expected, runs.a_inputs, tolerance, 2.0, runs.also)
    result.errors = errors
    result.rejudge = rejudger(spec, base, actual, expected, runs.a_inputs, 2.0, runs.also, tolerance)
    classify(result, spec, base, case.data_type, passed, tolerance)
    if not passed:
        raise _Fail(failure_message(errors, what))


def _require_legal(desc: OperatorDesc, role: str, level: FeatureLevel, spec: Spec, rel: Relation) -> None:
    """``_Skip`` when the desc a relation derives (``role``: derived, chained, forward) is illegal
    at ``level``: the relation says nothing of a desc the backend need not accept."""
    bad = validate(desc, level, spec)
    if bad:
        raise _Skip(f"relation {rel.id}: {role} {desc.operator} desc is illegal at {level.name} ({bad[0]})")


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
