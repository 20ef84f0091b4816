"""A run's tolerance choices as one typed value, parsed and checked where they enter.

They enter in three places (``--tolerance KEY=VALUE``, a backend's ``tolerance`` attribute, a
known finding's ``meets:``) and are read deep in the budget models. Parsing them once into a
frozen value means a misspelt key or a bad number is one line at start-up, every later stage
reads fields instead of string keys, and the value is hashable (the coefficients cache) and
picklable (the ``--isolate`` worker, xdist workers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

#: names a model was known by before: ``strict`` was the 256-block model, now ``tight``
MODEL_ALIASES = {"strict": "tight"}

#: coefficients a spec may give per data type or model that are words, not numbers
TEXT_COEFFICIENTS = frozenset(
    {
        "working_precision",
        "mean_growth",
        "spread_growth",
        "model",
        "growth_cap",
        "statistics_storage",
        "pointwise_precision",
        "narrowing",
        "data_type",
    }
)


@dataclass(frozen=True)
class ToleranceOptions:
    """What a run changes of the spec's tolerance: the model (``None``: each operator's
    ``required``), a scale on every budget, an absolute floor, a flat ULP limit, and any named
    coefficient of the spec's ``coefficients:`` (``pointwise=8``)."""

    model: str | None = None
    ulp_scale: float | None = None
    atol: float | None = None
    max_ulp: float | None = None
    #: other coefficients by name, sorted: (name, value), the value a float or a word
    coefficients: tuple[tuple[str, float | str | None], ...] = ()

    @classmethod
    def parse(cls, pairs: Mapping[str, Any] | None) -> ToleranceOptions:
        """From ``KEY=VALUE`` pairs (strings, or numbers from YAML). ValueError with one line for
        a value that is not a number where one is needed; a name no coefficient has is refused
        by :func:`~dmlconform.tolerance.terms.coefficients`, which knows the spec's."""
        typed: dict[str, Any] = {}
        extra: dict[str, float | str] = {}
        for key, raw in (pairs or {}).items():
            key = str(key).strip()
            if key == "model":
                name = str(raw).strip() if raw is not None else ""
                if not name:  # it read as the operator's own model, silently
                    raise ValueError("tolerance override model=: names no model (e.g. model=lanes)")
                typed["model"] = MODEL_ALIASES.get(name, name)
            elif key in _numbers(cls):
                typed[key] = _number(key, raw)
            elif raw is None:  # a coefficient unset (``threads: null``: no thread count)
                extra[key] = None
            else:
                extra[key] = str(raw).strip() if key in TEXT_COEFFICIENTS else _number(key, raw)
        return cls(**typed, coefficients=tuple(sorted(extra.items())))

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) not in (None, ()) for f in fields(self))

    def merged(self, other: ToleranceOptions) -> ToleranceOptions:
        """These options with ``other``'s set fields on top (a known finding's ``meets`` over the
        run's ``--tolerance``)."""
        coeffs = dict(self.coefficients) | dict(other.coefficients)
        return replace(self, **other._typed(), coefficients=tuple(sorted(coeffs.items())))

    def scaled(self, factor: float) -> ToleranceOptions:
        """Every budget times ``factor`` more (the degenerate-input check's widening)."""
        return replace(self, ulp_scale=factor * (1.0 if self.ulp_scale is None else self.ulp_scale))

    def changes(self) -> dict[str, Any]:
        """The set options by name, typed: what the coefficients take over the spec's."""
        return dict(sorted({**self._typed(), **dict(self.coefficients)}.items()))

    def _typed(self) -> dict[str, Any]:
        """The typed fields that are set (the named coefficients aside)."""
        return {
            f.name: v
            for f in fields(self)
            if f.name != "coefficients" and (v := getattr(self, f.name)) is not None
        }

    def pairs(self) -> dict[str, str | None]:
        """:meth:`changes` as text, as results.json records them (``tolerance.overrides``) and
        :meth:`parse` reads them back: numbers written as they read (2, not 2.0)."""
        return {k: _text(v) for k, v in self.changes().items()}

    def label(self) -> str:
        """How these options are named in records and messages: the model's name alone when it
        is all there is, else ``key=value`` pairs."""
        pairs = self.pairs()
        if self.model is not None and len(pairs) == 1:
            return self.model
        return ", ".join(f"{k}={v}" for k, v in pairs.items())


def _numbers(cls: type[ToleranceOptions]) -> set[str]:
    """The typed numeric options: every field but the model's name and the named coefficients,
    so that a new option is one field here (and its use where the budgets read it)."""
    return {f.name for f in fields(cls)} - {"model", "coefficients"}


def _number(key: str, raw: Any) -> float:
    """A budget's number: finite and not negative. Every option and coefficient scales or adds
    to a budget, so a negative one fails every case and an infinite or NaN one passes or fails
    them all without saying why; each is refused here, in one line, before anything runs."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"tolerance override {key}={raw!r}: not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"tolerance override {key}={raw!r}: must be a finite number >= 0")
    return value


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    return str(value)


NO_OPTIONS = ToleranceOptions()
