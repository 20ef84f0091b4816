"""The desc generators as hypothesis strategies, for property tests that shrink.

Same code as the seeded drivers (``dmlconform.generation.legal`` and ``.illegal``): the
generators are written against the :class:`~dmlconform.specification.rules.Chooser` interface, and
here every choice is a ``data.draw``, so hypothesis can shrink a failing desc toward the simplest
choices (options are listed simplest first: packed layouts, no activation, small sizes, the first
data type).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st

from dmlconform.generation.choices import DEFAULT_MAX_ELEMENTS, DEFAULT_MAX_SIZE, Options
from dmlconform.generation.illegal import build_illegal, why_unbreakable
from dmlconform.generation.realize import build_legal
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.spec import Spec
from dmlconform.specification.structure_builder import model_for
from dmlconform.specification.structure_builder import operators_and_levels as all_operators_and_levels

T = TypeVar("T")


class HypothesisChooser:
    """A :class:`~dmlconform.specification.rules.Chooser` backed by hypothesis draws (keys are
    ignored: hypothesis explores on its own)."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi)) if hi > lo else lo

    def choice(self, options: Sequence[T], key: str | None = None) -> T:
        return options[0] if len(options) == 1 else self.draw(st.sampled_from(options))

    def boolean(self) -> bool:
        return self.draw(st.booleans())

    def permutation(self, items: Sequence[T]) -> list[T]:
        return self.draw(st.permutations(list(items)))


def operators_and_levels(spec: Spec, available_only: bool = False) -> st.SearchStrategy[tuple[str, str]]:
    """(operator, level) pairs of the spec; ``available_only`` keeps levels from introduction."""
    pairs = all_operators_and_levels(spec)
    if available_only:
        pairs = [(o, lv) for o, lv in pairs if model_for(o, lv, spec).available]
    return st.sampled_from(pairs)


@st.composite
def legal_descs(
    draw: Any,
    operator: str,
    level: str,
    spec: Spec,
    dtype: str | None = None,
    max_size: int = DEFAULT_MAX_SIZE,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
) -> OperatorDesc:
    """A desc legal at ``level`` (the operator must be available there)."""
    model = model_for(operator, level, spec)
    if not model.available:
        raise ValueError(f"{model.op.name} is not available at {model.level.name}: no legal desc")
    return build_legal(model, HypothesisChooser(draw), Options(dtype, max_size, max_elements))


@st.composite
def illegal_descs(
    draw: Any, operator: str, level: str, spec: Spec, rule: str | None = None
) -> tuple[OperatorDesc, str]:
    """(desc, rule id): a desc that breaks exactly that rule at ``level``; the rule is drawn from
    ``breakable_rules`` unless given."""
    model = model_for(operator, level, spec)
    rules = [r for r in model.active if why_unbreakable(model, r) is None]
    if rule is not None:
        rules = [r for r in rules if r.id == rule]
        if not rules:
            raise ValueError(f"rule {rule!r} cannot be broken alone at {model.level.name}")
    target = draw(st.sampled_from(rules))
    return build_illegal(model, target, HypothesisChooser(draw)), target.id


@st.composite
def any_legal_desc(draw: Any, spec: Spec) -> tuple[OperatorDesc, str]:
    """(desc, level) over every operator and every level where it is available."""
    op, level = draw(operators_and_levels(spec, available_only=True))
    return draw(legal_descs(op, level, spec)), level


@st.composite
def any_illegal_desc(draw: Any, spec: Spec) -> tuple[OperatorDesc, str, str]:
    """(desc, level, rule id) over every operator and level."""
    op, level = draw(operators_and_levels(spec))
    desc, rule = draw(illegal_descs(op, level, spec))
    return desc, level, rule
