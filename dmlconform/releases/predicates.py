"""Desc predicates of the findings' acceptance claims: which probes of an operator a claim covers.

A claim's ``when`` is a mapping of predicates that must all hold, or a list of such mappings of
which one must (as ``when:`` in an expectations file, runner/expect.py, whose values this shares
and extends with ``multiple_of``)::

    when: {P: 1, slices: {multiple_of: 4}}
    when: [{P: 1, slices: {multiple_of: 4}}, {P: 2, axis_size: 1, slices: {multiple_of: 4}}]
    when: {rank: [3, 4], Axis: {min: 1}}

Subjects, evaluated on the probe's desc:

- any member of the operator's desc by name (``P``, ``Axis``, ``LocalSize``, ``CrossChannel``,
  ``Epsilon``, ``Axes`` compared as a list, ``ScaleTensor: present``);
- ``data_type``: the data type of the operator's input (``FLOAT32``);
- ``rank``: InputTensor's dimension count;
- ``axis_size``: the elements of one slice, the product of InputTensor's sizes over the reduced
  axes (``Axis``, or ``Axes``; an operator with neither has none, so no predicate on it holds);
- ``slices``: how many slices are normalized: InputTensor's element count / ``axis_size``;
- ``input_layout``: how InputTensor's elements lie beside OutputTensor's (:func:`input_layout`).

Values: one value (1 is 1.0; a bool is not 1), a list (any of), ``{min: A, max: B}`` (inclusive,
either may be left out), ``even`` / ``odd``, ``{multiple_of: N}``, ``present`` / ``absent``.
Every problem with a predicate is a ValueError of one line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The subjects that are not desc members.
DERIVED = ("data_type", "rank", "axis_size", "slices", "input_layout")
INPUT_LAYOUTS = ("dense-as-output", "dense", "strided", "broadcast")
_ABSENT = object()


@dataclass(frozen=True)
class ValueTest:
    """One predicate's test of a value: ``how`` is ``any_of`` (``values``), ``range`` (``low``,
    ``high``), ``multiple_of`` (``values[0]``; parity is multiple_of 2 with a remainder), or
    ``presence`` (``values[0]``: True for present)."""

    how: str
    values: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    remainder: int = 0

    def __call__(self, value: Any) -> bool:
        if self.how == "presence":
            return (value is not _ABSENT and value is not None) == self.values[0]
        if value is _ABSENT or value is None:
            return False
        if self.how == "multiple_of":
            return _is_int(value) and value % self.values[0] == self.remainder
        if self.how == "range":
            if not _is_number(value):
                return False
            return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)
        return any(_same(value, want) for want in self.values)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(value: Any, want: Any) -> bool:
    """Equality as a file means it: 1 is 1.0, a sequence equals a list, a bool is not 1."""
    if isinstance(value, bool) or isinstance(want, bool):
        return isinstance(value, bool) and isinstance(want, bool) and value == want
    if isinstance(value, (tuple, list)):
        return isinstance(want, list) and list(value) == want
    return bool(value == want)


def value_test(value: Any, subject: str) -> ValueTest:
    """The test a predicate's value asks for (ValueError: one line naming ``subject``)."""
    if value in ("even", "odd"):
        return ValueTest("multiple_of", (2,), remainder=0 if value == "even" else 1)
    if value in ("present", "absent"):
        return ValueTest("presence", (value == "present",))
    if isinstance(value, dict):
        if set(value) == {"multiple_of"}:
            n = value["multiple_of"]
            if not _is_int(n) or n < 1:
                raise ValueError(f"{subject}: multiple_of is a positive integer, not {n!r}")
            return ValueTest("multiple_of", (n,))
        if not value or set(value) - {"min", "max"}:
            raise ValueError(f"{subject}: a mapping is {{min: A, max: B}} or {{multiple_of: N}}")
        for bound in value.values():
            if not _is_number(bound):
                raise ValueError(f"{subject}: range bounds are numbers, not {bound!r}")
        return ValueTest("range", low=value.get("min"), high=value.get("max"))
    if isinstance(value, list):
        if not value:
            raise ValueError(f"{subject}: an empty list matches nothing")
        return ValueTest("any_of", tuple(value))
    return ValueTest("any_of", (value,))


@dataclass(frozen=True)
class Predicate:
    """Alternatives (any must hold), each a tuple of (subject, test) pairs (all must hold)."""

    alternatives: tuple[tuple[tuple[str, ValueTest], ...], ...]

    @property
    def subjects(self) -> set[str]:
        return {name for alt in self.alternatives for name, _ in alt}

    def holds(self, desc: Any, data_type: str | None = None) -> bool:
        facts = Facts(desc, data_type)
        return any(all(test(facts.value(name)) for name, test in alt) for alt in self.alternatives)


def parse(raw: Any) -> Predicate | None:
    """A claim's ``when`` (None when it has none); ValueError of one line."""
    if raw is None:
        return None
    alternatives = raw if isinstance(raw, list) else [raw]
    if not alternatives:
        raise ValueError("'when' is empty")
    out = []
    for alt in alternatives:
        if not isinstance(alt, Mapping) or not alt:
            raise ValueError("'when' is a mapping of predicates (or a list of them)")
        tests = []
        for key, value in alt.items():
            test = value_test(value, str(key))
            if key == "input_layout" and not (
                test.how == "any_of" and set(test.values) <= set(INPUT_LAYOUTS)
            ):
                raise ValueError(f"input_layout: one or more of {', '.join(INPUT_LAYOUTS)}, not {value!r}")
            tests.append((str(key), test))
        out.append(tuple(tests))
    return Predicate(tuple(out))


class Facts:
    """The subjects of one desc (members by name, and the derived ones of :data:`DERIVED`)."""

    def __init__(self, desc: Any, data_type: str | None = None) -> None:
        self.desc = desc
        self.data_type = data_type

    def value(self, name: str) -> Any:
        if name == "data_type":
            return self.data_type if self.data_type is not None else _ABSENT
        if name == "rank":
            sizes = self._sizes()
            return len(sizes) if sizes is not None else _ABSENT
        if name in ("axis_size", "slices"):
            sizes, axes = self._sizes(), self._axes()
            if sizes is None or axes is None or any(not 0 <= a < len(sizes) for a in axes):
                return _ABSENT
            reduced = math.prod(sizes[a] for a in axes)
            if name == "axis_size":
                return reduced
            return math.prod(sizes) // reduced if reduced else 0
        if name == "input_layout":
            return self._input_layout()
        value = self.desc.members.get(name, _ABSENT)
        if hasattr(value, "value") and not isinstance(value, (int, float, str, bool)):
            value = value.value  # an enum-like member value
        return value

    def _input_layout(self) -> Any:
        members = self.desc.members
        return input_layout(members.get("InputTensor"), members.get("OutputTensor")) or _ABSENT

    def _sizes(self) -> tuple[int, ...] | None:
        tensor = self.desc.members.get("InputTensor")
        sizes = getattr(tensor, "sizes", None)
        return tuple(int(s) for s in sizes) if sizes is not None else None

    def _axes(self) -> tuple[int, ...] | None:
        members = self.desc.members
        if isinstance(members.get("Axis"), int) and not isinstance(members.get("Axis"), bool):
            return (members["Axis"],)
        axes = members.get("Axes")
        if isinstance(axes, (list, tuple)) and all(_is_int(a) for a in axes):
            return tuple(axes)
        return None


def input_layout(tensor: Any, output: Any) -> str | None:
    """How an input tensor desc's elements lie beside its output's, dimensions of size 1 left
    out (their stride reaches no other element): ``dense-as-output`` (one contiguous block, no
    padding and no zero stride, its dimensions ordered by stride as the output's are: packed
    input and output are), ``dense`` (one contiguous block in another order), ``broadcast`` (a
    zero stride), ``strided`` (padding, or strides that overlap). DirectML picks kernels by it:
    a refusal (F12) and a summation order (F20) hold for some layouts only. None where either
    desc has no sizes."""
    if getattr(tensor, "sizes", None) is None or getattr(output, "sizes", None) is None:
        return None
    (i_dims, i_dense), (o_dims, _) = _by_stride(tensor), _by_stride(output)
    if not i_dense:
        strides = getattr(tensor, "strides", None) or ()
        return "broadcast" if any(int(strides[d]) == 0 for d in i_dims) else "strided"
    return "dense-as-output" if i_dims == o_dims else "dense"


def _by_stride(tensor: Any) -> tuple[list[int], bool]:
    """The dimensions of size > 1 of a tensor desc from the largest stride to the smallest (ties
    in dimension order), and whether its elements fill one contiguous block in that order."""
    sizes = [int(n) for n in tensor.sizes]
    strides = getattr(tensor, "strides", None)
    if strides is None:
        strides, step = [0] * len(sizes), 1
        for d in reversed(range(len(sizes))):
            strides[d] = step
            step *= sizes[d]
    dims = sorted((d for d, n in enumerate(sizes) if n > 1), key=lambda d: (-int(strides[d]), d))
    step = 1
    for d in reversed(dims):
        if int(strides[d]) != step:
            return dims, False
        step *= sizes[d]
    return dims, True
