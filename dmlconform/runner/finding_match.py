"""What an expectation is matched against and how: a case's facts (its id's fields, its desc,
the data facts of the inputs it was judged on, case-wide and per slice), a predicate's test of
a value, and the two kinds of expectation, a case-id line and a finding of a YAML file
(runner/expect.py reads the files and settles a covered case's outcome).
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dmlconform import kernels
from dmlconform.kernels.base import input_member, output_member, reduction_axes
from dmlconform.releases.predicates import input_layout
from dmlconform.runner.cases import apply_when
from dmlconform.runner.slice_scope import SliceData, slice_mask
from dmlconform.runner.tiers import elements_and_length
from dmlconform.specification.desc import ActivationDesc, TensorDesc
from dmlconform.specification.spec import FeatureLevel, Spec
from dmlconform.tolerance.options import ToleranceOptions

#: the finding id at the start of a case-id line's reason (``# F1: ...``), for reports
_FINDING_PREFIX = re.compile(r"^\s*([A-Z][A-Za-z]*\d+[a-z]?)\s*:")
CASE_FIELDS = ("operator", "data_type", "kind", "regime", "feature_level", "reduction_length", "relation")
CASE_FIELDS += ("rule", "expected", "id", "reduction_axes", "dimension_count", "input_layout")


# ------------------------------------------------------------------------------------------
# What an expectation is matched against


@dataclass(frozen=True)
class CaseFacts:
    """What a case is, for the predicates: the fields of its id and desc. ``members`` are the
    desc that ran (a metamorphic relation's ``when`` applied); ``regime`` the data the case was
    judged on (known once it ran; None before); ``data`` the facts its kernel tells of the inputs
    it was judged on (kernel registry ``facts``: an Lp normalization's largest squared norm),
    empty before it ran."""

    id: str
    kind: str
    operator: str
    level: FeatureLevel
    data_type: str | None = None
    nodeid: str = ""
    regime: str | None = None
    relation: str | None = None
    rule: str | None = None
    expected: str | None = None
    reduction_length: int | None = None
    #: the input axes the kernel reduces (or windows) over, sorted; () over none
    reduction_axes: tuple[int, ...] | None = None
    #: the input's dimension count
    dimension_count: int | None = None
    #: how the input's elements lie beside the output's (releases.predicates.input_layout):
    #: dense-as-output, dense, broadcast or strided
    input_layout: str | None = None
    members: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, float] = field(default_factory=dict)
    #: the per-slice facts of the inputs judged (``runner.slice_scope.SliceData``), None before
    #: the case ran or where its kernel tells none
    slices: SliceData | None = None

    @classmethod
    def of(
        cls,
        case: Any,
        nodeid: str = "",
        regime: str | None = None,
        *,
        spec: Spec,
        inputs: Mapping[str, Any] | None = None,
    ) -> CaseFacts:
        """The facts of a ``runner.cases.Case`` (``regime``: the one its inputs came from;
        ``inputs``: what it was judged on, for its kernel's data facts)."""

        ran = apply_when(case.desc, case.relation) if case.relation else case.desc
        length = elements_and_length(ran, spec)[1] if case.kind != "validation" else None
        axes, dims, layout = _layout_facts(ran, spec) if case.kind != "validation" else (None, None, None)
        return cls(
            id=case.id,
            kind=case.kind,
            operator=case.operator,
            level=case.level,
            data_type=case.data_type,
            nodeid=nodeid,
            regime=regime or case.regime,
            relation=case.relation.id if case.relation else None,
            rule=case.rule,
            expected=case.expected,
            reduction_length=length,
            reduction_axes=axes,
            dimension_count=dims,
            input_layout=layout,
            members=dict(ran.members),
            data=DataFacts(ran, inputs, spec) if inputs and case.kind != "validation" else {},
            slices=SliceData(ran, inputs, spec) if inputs and case.kind != "validation" else None,
        )

    def value(self, name: str) -> Any:
        """A predicate's subject: a case field, else the desc member (``_ABSENT`` if omitted)."""
        if name == "feature_level":
            return self.level
        if name in CASE_FIELDS:
            return getattr(self, name)
        if name in self.data:
            return self.data[name]
        return self.members.get(name, _ABSENT)


def _layout_facts(desc: Any, spec: Spec) -> tuple[tuple[int, ...] | None, int | None, str | None]:
    """(the reduced axes, the input's dimension count, its layout beside the output's) of a
    desc, None where it has none."""
    try:
        op = spec.operator(desc.operator)
        inp = desc.members.get(input_member(op) or "")
        if not isinstance(inp, TensorDesc):
            return None, None, None
        layout = input_layout(inp, desc.members.get(output_member(op) or ""))
        return reduction_axes(desc, spec), len(inp.sizes), layout
    except (ValueError, KeyError, TypeError, IndexError):
        return None, None, None


class DataFacts(Mapping[str, float]):
    """The facts the case's kernel tells of its inputs, computed on the first look at one: most
    cases are settled by predicates that never ask, and a fact costs a pass over the inputs
    (2^26 elements in the stress tier). Which facts there are is known without computing them."""

    def __init__(self, desc: Any, inputs: Mapping[str, Any], spec: Spec) -> None:
        self._desc, self._inputs, self._spec = desc, inputs, spec
        self._entry = kernels.kernel_of(desc, spec)
        self._values: dict[str, float] | None = None

    def __contains__(self, name: object) -> bool:
        return name in self._entry.fact_names

    def __getitem__(self, name: str) -> float:
        if self._values is None:
            compute = kernels.resolve(self._entry.facts) if self._entry.facts else None
            self._values = dict(compute(self._desc, dict(self._inputs), self._spec)) if compute else {}
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entry.fact_names)

    def __len__(self) -> int:
        return len(self._entry.fact_names)


_ABSENT = object()


# ------------------------------------------------------------------------------------------
# Values of predicates


@dataclass(frozen=True)
class Test:
    """One predicate's test of a value: ``how`` is one of ``any_of`` (``values``), ``parity``,
    ``fractional`` (a number that is not a whole one), ``range`` (``low``, ``high``; levels by
    their order), ``presence``, ``glob``."""

    how: str
    values: tuple[Any, ...] = ()
    low: Any = None
    high: Any = None
    #: a per-slice fact's test: it names the slices it holds for (``runner.slice_scope``)
    per_slice: bool = False

    def __call__(self, value: Any) -> bool:
        if self.how == "presence":
            return (value is not _ABSENT and value is not None) == self.values[0]
        if value is _ABSENT or value is None:
            return False
        if self.how == "glob":
            return any(_compile(str(p)).fullmatch(str(value)) for p in self.values)
        if self.how == "parity":
            return _is_int(value) and int(value) % 2 == self.values[0]
        if self.how == "fractional":
            return _is_number(value) and math.isfinite(value) and value != math.floor(value)
        if self.how == "range":
            try:
                return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)
            except (TypeError, ValueError, KeyError):
                return False
        return any(_same(value, want) for want in self.values)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(value: Any, want: Any) -> bool:
    """Equality as a file means it: 1 is 1.0, a sequence equals a list, bool is not 1."""
    if isinstance(value, FeatureLevel):  # its ``value`` is DirectML's number, not a file's name
        return value == want
    if isinstance(value, ActivationDesc):  # a fused activation is named by its type
        return value.type == want
    if isinstance(value, bool) or isinstance(want, bool):
        return isinstance(value, bool) and isinstance(want, bool) and value == want
    if isinstance(value, (tuple, list)):
        return isinstance(want, list) and list(value) == want
    if hasattr(value, "value") and not isinstance(value, (int, float, str)):
        value = value.value  # an enum-like member value
    return value == want


# ------------------------------------------------------------------------------------------
# The two kinds of expectation


@dataclass(frozen=True)
class Expectation:
    """A line of a case-id file: ``pattern`` (an id or glob) and its reason. A failure of a
    case it names is expected, whatever the failure."""

    pattern: str
    reason: str
    line: int
    source: str = ""

    fails = True
    meets: ToleranceOptions | None = None
    message: re.Pattern[str] | None = None
    nan: bool | str = True
    scope = "case"
    scope_reason: str | None = "listed by id"

    @property
    def finding(self) -> str | None:
        """The finding id a reason starts with (``F1: ...``), or None."""
        m = _FINDING_PREFIX.match(self.reason)
        return m.group(1) if m else None

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def matches(self, test_id: str, nodeid: str = "") -> bool:
        rx = _compile(self.pattern)
        return bool(
            rx.fullmatch(test_id)
            or (nodeid and (rx.fullmatch(nodeid) or nodeid.endswith("::" + self.pattern)))
        )

    def covers(self, facts: CaseFacts) -> bool:
        return self.matches(facts.id, facts.nodeid)


@dataclass(frozen=True)
class Bound:
    """A finding of a YAML file: the cases it covers (``when``: any of these predicate sets,
    each a mapping of name -> :class:`Test`) and what they must still do: fail (``fails``,
    optionally only with a ``message`` matching) or meet the tolerance overrides ``meets``."""

    finding: str
    reason: str
    when: tuple[Mapping[str, Test], ...]
    line: int
    source: str = ""
    fails: bool = False
    meets: ToleranceOptions | None = None
    message: re.Pattern[str] | None = None
    #: ``nan: false``: the bug's wrong values are never NaN, so a NaN where the reference is a
    #: number is another failure, which the entry does not take; ``"only"``: its wrong values
    #: are NaN, and a finite wrong value is another failure
    nan: bool | str = True
    #: ``slices``: a ``fails`` finding excuses the output elements of the slices its per-slice
    #: predicates name (every slice where an alternative names none), and the case's other
    #: elements are judged; ``case``: it takes the whole case (``scope_reason`` says why)
    scope: str = "case"
    scope_reason: str | None = None

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def covers(self, facts: CaseFacts) -> bool:
        return any(_slices_named(cond, facts) is not None for cond in self.when)

    def excused_elements(self, facts: CaseFacts) -> dict[str, np.ndarray] | None:
        """The output elements (member -> mask) that the slices this finding names in the case
        decide; None: every element (an alternative that holds names no slice)."""
        union = None
        for cond in self.when:
            named = _slices_named(cond, facts)
            if named is True:
                return None
            if named is not None:
                union = named if union is None else union | named
        if union is None or facts.slices is None:
            return {}
        return facts.slices.elements(union)


def _slices_named(cond: Mapping[str, Test], facts: CaseFacts) -> np.ndarray | bool | None:
    """Whether a mapping of predicates holds for the case: None if not; True if it does and names
    no slice (no per-slice predicate); else the mask of the slices that every per-slice
    predicate holds for (one slice at least)."""
    if not all(test(facts.value(name)) for name, test in cond.items() if not test.per_slice):
        return None
    per_slice = {name: test for name, test in cond.items() if test.per_slice}
    if not per_slice:
        return True
    if facts.slices is None or not set(per_slice) <= set(facts.slices.names):
        return None
    mask = None
    for name, test in per_slice.items():
        held = slice_mask(test, facts.slices.values(name))
        mask = held if mask is None else mask & held
    return mask if mask is not None and mask.any() else None


AnyExpectation = Expectation | Bound


def _compile(pattern: str) -> re.Pattern[str]:
    # fnmatch treats [...] as a character class; escape brackets so ids match literally.
    escaped = pattern.replace("[", "\0L").replace("]", "\0R")
    rx = fnmatch.translate(escaped).replace("\0L", r"\[").replace("\0R", r"\]")
    return re.compile(rx)
