"""Findings scoped to the slices they explain: a case's per-slice facts, read once, a predicate
tested on every slice, and the output elements a finding excuses.

Why: a finding whose mechanism is per slice (DirectML's F10 holds each LP slice's squared norm
in FLOAT16) explains the elements of the slices whose data put it out of range, and nothing
else. Excusing the whole case once one slice qualifies hid any regression in the case's other
slices: DirectML with one NaN planted in every FLOAT16 output kept 73 of its cases known. Here
a finding names its slices (``squared_norm: {min: 65520}``) and excuses their elements; the
runner (``runner.expect.settle``) judges every other element by the tolerance model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dmlconform import kernels
from dmlconform.specification.spec import Spec


class SliceData:
    """The per-slice facts the case's kernel tells of the inputs it was judged on (registry
    ``slice_facts``), computed on the first look: a fact costs a pass over the inputs, and most
    cases are settled by predicates that never ask."""

    def __init__(self, desc: Any, inputs: Mapping[str, Any], spec: Spec) -> None:
        self._desc, self._inputs, self._spec = desc, inputs, spec
        entry = kernels.kernel_of(desc, spec)
        self.names: tuple[str, ...] = entry.slice_fact_names
        self._part = entry.slice_facts
        self._facts: Any = None

    def _computed(self) -> Any:
        if self._facts is None:
            if self._part is None:
                raise KeyError("this case's kernel tells no per-slice facts")
            self._facts = kernels.resolve(self._part)(self._desc, dict(self._inputs), self._spec)
        return self._facts

    def values(self, name: str) -> np.ndarray:
        """One value of fact ``name`` per slice (KeyError for a fact this kernel does not tell)."""
        if name not in self.names:
            raise KeyError(name)
        return np.asarray(self._computed().values[name])

    def elements(self, slices: np.ndarray) -> dict[str, np.ndarray]:
        """{output member: its elements that the ``slices`` (a mask of the slices' shape) decide}."""
        return self._computed().spread(np.asarray(slices, dtype=bool))


def slice_mask(test: Any, values: np.ndarray) -> np.ndarray:
    """Which slices a predicate's test (``runner.expect.Test``: a range or a list of values)
    holds for; a NaN value holds for none."""
    v = np.asarray(values, dtype=np.float64)
    if test.how == "range":
        out = np.ones(v.shape, dtype=bool)
        with np.errstate(invalid="ignore"):
            if test.low is not None:
                out &= v >= float(test.low)
            if test.high is not None:
                out &= v <= float(test.high)
        return out
    if test.how == "any_of":
        return np.isin(v, np.asarray([float(x) for x in test.values]))
    raise ValueError(f"a per-slice fact takes a range or values, not a {test.how} test")


class JudgedOutputs(Protocol):
    """What settling a per-slice finding needs of a numeric case's outputs (``runner.judging``)."""

    def sizes(self) -> dict[str, int]:
        """Element count of each output member compared."""

    def nan_where_number(self) -> dict[str, np.ndarray]:
        """Each member's elements that are NaN where the reference is a number."""

    def judge_outside(
        self, options: Any, excused: Mapping[str, np.ndarray]
    ) -> tuple[bool, str | None] | None:
        """(passed, failure message) of the outputs with the excused elements left out, under
        the run's tolerance with ``options`` on top; None when nothing was compared."""


@dataclass(frozen=True)
class Excused:
    """The elements one finding excused in a case: ``masks`` (member -> which elements) of the
    outputs ``sizes`` lists (member -> element count)."""

    finding: str
    masks: Mapping[str, np.ndarray]
    sizes: Mapping[str, int]

    @property
    def by_member(self) -> dict[str, int]:
        return {k: int(np.count_nonzero(m)) for k, m in self.masks.items()}

    @property
    def elements(self) -> int:
        return sum(self.by_member.values())

    @property
    def of(self) -> int:
        return sum(self.sizes.values())

    def text(self) -> str:
        """``64 of 256 elements (OutputTensor 64)``."""
        members = ", ".join(f"{k} {n}" for k, n in self.by_member.items() if n)
        return f"{self.elements} of {self.of} elements" + (f" ({members})" if members else "")

    def record(self) -> dict[str, Any]:
        """The results.json ``excused`` record (docs/results-json.md)."""
        return {
            "finding": self.finding,
            "scope": "slices",
            "elements": self.elements,
            "of": self.of,
            "outputs": {k: n for k, n in self.by_member.items() if n},
        }


def whole_case(finding: str | None, why: str | None) -> dict[str, Any]:
    """The results.json ``excused`` record of a case a finding took whole."""
    return {"finding": finding, "scope": "case", "why": why}


def restricted(
    masks: Mapping[str, np.ndarray] | None, sizes: Mapping[str, int]
) -> dict[str, np.ndarray] | None:
    """The element masks of the compared outputs only (None: every element of every output)."""
    if masks is None:
        return None
    return {k: np.asarray(m, dtype=bool) for k, m in masks.items() if k in sizes}


def substituted(
    actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], excused: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The outputs with each excused element replaced by the reference's, rounded to the
    output's type: what a sound backend returns there, so that the tolerance judges the other
    elements alone (their own budgets and the aggregate fit)."""
    out = dict(actual)
    for name, mask in excused.items():
        if name not in out or not np.any(mask):
            continue
        got = np.array(out[name], copy=True)
        ref = np.asarray(expected[name])
        with np.errstate(over="ignore", invalid="ignore"):
            got[mask] = np.broadcast_to(ref, got.shape)[mask].astype(got.dtype)
        out[name] = got
    return out
