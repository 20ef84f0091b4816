"""Illegal descs: each breaks exactly one rule, the one it is labelled with.

An illegal desc is a legal base drawn under the overrides its rule's kind asks for
(``RuleKind.break_plan``), then changed by the kind (``RuleKind.break_desc``); the validator then
confirms that exactly the labelled rule fires (cheap next to building, and it keeps the label
honest for odd specs). Whether a rule can be broken alone at a level is decided statically by
its kind's ``why_unbreakable``, which returns the reason when it cannot
(:func:`unbreakable_rules`).

A new rule *kind* needs nothing here: its breaker lives on its class, beside its check and its
edges (a test checks that every kind defines one).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from dmlconform.generation.choices import Options, draw_choices
from dmlconform.generation.chooser import seeded_chooser
from dmlconform.generation.realize import realize
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.rules import Available, Chooser, kind_of
from dmlconform.specification.spec import FeatureLevel, Rule, Spec
from dmlconform.specification.structure import Model
from dmlconform.specification.structure_builder import model_for
from dmlconform.specification.validate import validate


def why_unbreakable(model: Model, rule: Rule) -> str | None:
    """Why ``rule`` cannot be broken alone at the model's level; None when it can."""
    kind = kind_of(rule)
    if not model.available and not isinstance(kind, Available):
        return (
            f"{model.op.name} is not available at {model.level.name} (introduced in "
            f"{model.op.introduced}): every desc also breaks 'available'"
        )
    return kind.why_unbreakable(model, rule)


def breakable_rules(operator: str, level: str | FeatureLevel, spec: Spec) -> list[str]:
    """Ids of the rules active at ``level`` that an illegal desc can break alone, in checking order."""
    model = model_for(operator, level, spec)
    return [r.id for r in model.active if why_unbreakable(model, r) is None]


def unbreakable_rules(operator: str, level: str | FeatureLevel, spec: Spec) -> dict[str, str]:
    """Active rules that no desc can break alone at ``level``, with the reason."""
    model = model_for(operator, level, spec)
    out = {}
    for r in model.active:
        why = why_unbreakable(model, r)
        if why is not None:
            out[r.id] = why
    return out


class BreakFailed(RuntimeError):
    """A breakable rule that the generator did not manage to break alone (a generator bug)."""


def build_illegal(
    model: Model, rule: Rule, ch: Chooser, opts: Options | None = None, attempts: int = 60
) -> OperatorDesc:
    """A desc that breaks ``rule`` and nothing else at the model's level."""
    opts = opts or Options()
    kind = kind_of(rule)
    for _ in range(attempts):
        ov = kind.break_plan(model, rule, ch)
        if ov is None:
            continue
        plan = draw_choices(model, ch, opts, ov)
        if plan is None:
            continue
        desc = kind.break_desc(model, rule, realize(model, plan, ch, opts), ch)
        if desc is None:
            continue
        if {v.rule for v in validate(desc, model.level, model.spec)} == {rule.id}:
            return desc
    raise BreakFailed(f"{model.op.name} at {model.level.name}: could not break {rule.id} alone")


def illegal_descs(
    operator: str,
    level: str | FeatureLevel,
    seed: int = 0,
    count: int = 100,
    *,
    spec: Spec,
    rules: Sequence[str] | None = None,
) -> Iterator[tuple[OperatorDesc, str]]:
    """``count`` (desc, rule id) pairs, each desc breaking exactly that rule at ``level``.
    Rules come round-robin in checking order, so ``count >= len(breakable_rules(...))`` covers
    every breakable rule; ``rules`` restricts to some of them. Deterministic in any process."""
    model = model_for(operator, level, spec)
    ids = set(rules) if rules is not None else None
    targets = [r for r in model.active if why_unbreakable(model, r) is None and (ids is None or r.id in ids)]
    if not targets:
        return
    ch = seeded_chooser(model.op.name, model.level.name, seed, "illegal")
    for i in range(count):
        rule = targets[i % len(targets)]
        yield build_illegal(model, rule, ch), rule.id
