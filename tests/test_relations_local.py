"""The relations of LOCAL_RESPONSE_NORMALIZATION and its GRAD (spec ``relations:``) in both
directions: sound backends (numpy, the reference) pass every case the suite collects, and a
backend broken the way the relation is meant to catch fails it. LP_NORMALIZATION declares none:
P = 2 against MEAN_VARIANCE_NORMALIZATION2 without the mean differs by sqrt(n) in the output and
by n in Epsilon, which no relation kind's ``set`` can express (it sets members to literals)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import pytest

import dmlconform as dc
from dmlconform import kernels
from dmlconform.backends.numpy_backend import NumpyBackend, window_sum
from dmlconform.backends.reference import ReferenceBackend
from dmlconform.runner.cases import Selection, collect
from dmlconform.runner.checks import run_case
from dmlconform.runner.guard import ThreadGuard
from dmlconform.specification.desc import OperatorDesc
from dmlconform.tolerance.options import NO_OPTIONS

SPEC = dc.load_spec()
LRN, LRNG = "LOCAL_RESPONSE_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION_GRAD"


class LrnGradForwardWindow(NumpyBackend):
    """DirectML 1.15.4's LRN_GRAD (finding F9): the backward sum over the forward window W(j)
    instead of the transposed one {i : j in W(i)}; the two differ for an even LocalSize only."""

    name: ClassVar[str] = "test:LrnGradForwardWindow"

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if desc.operator != LRNG:
            return super().execute(desc, inputs)
        p = dc.plan(desc, SPEC)
        x = np.asarray(inputs[p.input], dtype=np.float64)
        g = np.asarray(inputs[p.input_gradient], dtype=np.float64)

        def region(v: np.ndarray) -> np.ndarray:
            for axis in p.axes:
                v = window_sum(v, axis, p.below, p.above, np.float64)
            return v

        a = p.alpha / p.divisor
        d = p.bias + a * region(x * x)
        out = g * d**-p.beta - 2 * a * p.beta * x * region(g * x * d ** (-p.beta - 1))
        return {p.output: out.astype(np.float32)}


class LrnLocalSizeAsRadius(NumpyBackend):
    """LocalSize read as the window's reach on each side (2 LocalSize + 1 elements per axis):
    at LocalSize 1 a window of three channels, or of 3 x 3 elements, not the element itself."""

    name: ClassVar[str] = "test:LrnLocalSizeAsRadius"

    def lrn_window(self, plan: dc.LocalResponsePlan) -> tuple[int, int]:
        return plan.local_size, plan.local_size


def _cases(operator: str, relation: str, n: int = 16, seed: int = 0) -> list:
    sel = Selection(
        level=SPEC.level("6_4"),
        operators=(operator,),
        data_types=("FLOAT32",),
        cases=n,
        seed=seed,
        kinds=("metamorphic",),
    )
    cases = [c for c in collect(SPEC, sel) if c.relation and c.relation.id == relation]
    assert cases, f"no {relation} cases collected"
    return cases


def _statuses(backend, cases) -> list[tuple[str, str, str]]:
    return [
        (c.id, r.status, r.message or "")
        for c in cases
        for r in [run_case(c, ThreadGuard(backend, None), SPEC, NO_OPTIONS)]
    ]


@pytest.mark.parametrize("backend", [NumpyBackend(), ReferenceBackend()], ids=lambda b: b.name)
@pytest.mark.parametrize(
    ("operator", "relation"),
    [(LRN, "local-size-one-is-element-wise"), (LRNG, "derivative-of-local-response-normalization")],
)
def test_sound_backends_hold_the_relation(backend, operator, relation):
    """Every regime, large offsets included (a step of the data's root mean square once threw
    elements of order 2 among ones of 5e4 past their own bend: the reference itself failed)."""
    cases = _cases(operator, relation, n=16, seed=0) + _cases(operator, relation, n=16, seed=7)
    assert {c.regime for c in cases} >= {"standard_normal", "large_offset"}
    bad = [(i, m) for i, s, m in _statuses(backend, cases) if s != "passed"]
    assert not bad, bad


def test_the_forward_window_gradient_fails_the_derivative_relation():
    """F9's arithmetic fails wherever it differs visibly: an even LocalSize, Alpha of order 1 (at
    1e-4 the backward sum's term is below the tolerance) and a windowed axis longer than the
    window (else both windows cover the whole axis); with odd LocalSize the windows coincide and
    it passes."""
    cases = _cases(LRNG, "derivative-of-local-response-normalization", n=16)
    results = _statuses(LrnGradForwardWindow(), cases)

    def visible(desc: OperatorDesc) -> bool:
        p = dc.plan(desc, SPEC)
        longest = max(p.shape[a] for a in p.axes)
        return p.local_size % 2 == 0 and p.alpha >= 1 and longest > p.local_size

    shown = [r for c, r in zip(cases, results, strict=True) if visible(c.desc)]
    odd = [r for c, r in zip(cases, results, strict=True) if c.desc.members["LocalSize"] % 2 == 1]
    assert shown and odd
    assert all(s == "failed" and "central difference" in m for _, s, m in shown), shown
    assert all(s == "passed" for _, s, _ in odd), odd


def test_local_size_as_radius_fails_the_element_wise_relation():
    cases = _cases(LRN, "local-size-one-is-element-wise", n=8)
    results = _statuses(LrnLocalSizeAsRadius(), cases)
    assert all(s == "failed" for _, s, _ in results), results


def test_the_relations_force_their_preconditions():
    (rel,) = [r for r in SPEC.operator(LRN).relations if r.id == "local-size-one-is-element-wise"]
    assert rel.when == {"LocalSize": 1, "CrossChannel": True} and rel.set == {"CrossChannel": False}
    (rel,) = [r for r in SPEC.operator(LRNG).relations if r.kind == "directional_derivative"]
    assert rel.operator == LRN and list(rel.data_types) == ["FLOAT32"]


def test_a_gradient_kernel_without_a_derivative_part_is_reported():
    import dataclasses

    registry = dict(kernels.KERNELS)
    registry["local_response_grad"] = dataclasses.replace(registry["local_response_grad"], derivative=None)
    assert any("no derivative part" in p for p in kernels.problems(SPEC, registry))
    registry["local_response_grad"] = dataclasses.replace(
        registry["local_response_grad"], derivative="dmlconform.tolerance.derivatives:no_such"
    )
    assert any("does not resolve" in p for p in kernels.problems(SPEC, registry))
