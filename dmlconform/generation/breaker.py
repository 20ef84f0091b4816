"""What a breaker is: how to break one rule kind, and nothing else, in a legal desc.

An illegal desc is a legal base built with *overrides* (e.g. one rank component forced to an
unsupported rank, one tensor forced to another dtype, some optional member forced present or
absent) followed by a *mutation* of the realized desc. The breakers of the kinds live beside
this module, grouped by what the kinds constrain (members' structure, single values, fused
activations); ``dmlconform.generation.illegal`` keys them by kind class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dmlconform.generation.chooser import Chooser
from dmlconform.generation.model import Model
from dmlconform.generation.plan import Overrides
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.model import Rule


@dataclass(frozen=True)
class Breaker:
    """How to break one rule kind alone. ``why_not`` returns the reason the rule cannot be
    broken alone at the model's level (None: it can); ``plan`` gives the legal base's overrides
    (None: retry); ``mutate`` turns the realized base into the illegal desc (None: retry)."""

    why_not: Callable[[Model, Rule], str | None]
    plan: Callable[[Model, Rule, Chooser], Overrides | None]
    mutate: Callable[[Model, Rule, OperatorDesc, Chooser], OperatorDesc | None]


def no_overrides(model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
    return Overrides()


def unchanged(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    return desc


def always_breakable(model: Model, rule: Rule) -> str | None:
    return None
