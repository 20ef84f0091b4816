"""What every rule kind shares: the :class:`Context` a check sees, the :class:`RuleKind` base
and the ``KINDS`` registry its ``@kind`` decorator fills.

Every rule in the spec names one of these kinds; the kind knows how to check a desc against the
rule's parameters, which legal values sit at its edge, and how to break it alone (the generator,
``dmlconform.generation``, satisfies it through the structure it reads). Nothing here names an
operator: a new operator is YAML that reuses these kinds, and a new *kind* of constraint is one
new class in the family module it belongs to: its check, edges and breaker. The spec's schema
takes its list of kinds from ``KINDS`` when it is loaded.

A check yields ``(member_path, message)`` pairs; the validator turns them into Violations with the
rule's id and source. Checks see a :class:`Context` that already knows which tensors are unusable
(missing, or not a valid DML_BUFFER_TENSOR_DESC), so that one mistake is reported once, by the
rule that names it, and not again by every rule that reads the same tensor.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dmlconform.specification.desc import OperatorDesc, TensorDesc, as_c_float
from dmlconform.specification.rules.breaking import Chooser, Overrides
from dmlconform.specification.spec import RULE_KINDS, FeatureLevel, Operator, Rule, Spec, SupportRow
from dmlconform.specification.structure import Model

Finding = tuple[str, str]
Edge = tuple[str, OperatorDesc]  # (label, desc)


@dataclass
class Context:
    spec: Spec
    op: Operator
    level: FeatureLevel
    desc: OperatorDesc
    row: SupportRow
    unusable: set[str] = field(default_factory=set)

    def tensor(self, name: str) -> TensorDesc | None:
        """The member's tensor desc if it is present and usable, else None."""
        if name in self.unusable:
            return None
        value = self.desc.members.get(name)
        return value if isinstance(value, TensorDesc) else None

    def present(self, name: str) -> bool:
        return self.desc.members.get(name) is not None

    def value(self, name: str) -> Any:
        """The member's effective value as DirectML reads it: a FLOAT rounded to float32."""
        value = self.desc.get(name, self.spec)
        return as_c_float(value) if isinstance(value, float) else value

    def struct_order(self, names: list[str]) -> list[str]:
        order = {m.name: i for i, m in enumerate(self.op.members)}
        return sorted(names, key=lambda n: order.get(n, len(order)))


class RuleKind:
    """One kind of constraint. ``params`` are the rule parameters the spec must give."""

    name: ClassVar[str]
    params: ClassVar[tuple[str, ...]] = ()
    scope: ClassVar[str] = "operator"

    #: Whether a legal desc can sit at this kind's boundary (coverage, ``at_edge``). Kinds that
    #: only demand presence or equality (required members, same sizes, a supported data type)
    #: have no edge: every legal desc satisfies them the same way, so only an illegal desc, one
    #: that breaks the rule, exercises them.
    has_edge: ClassVar[bool] = False
    #: Whether the rule bounds the values of the members it names (a range, a list): members no
    #: such rule names take any value of their type, and their type's edges.
    bounds_values: ClassVar[bool] = False

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        raise NotImplementedError

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """Whether the legal desc in ``ctx`` depends on this rule: a value the rule reads sits at
        the limit of what it allows (a range's end, a minimum, the level something arrives at) or
        uses a permission the rule grants (a broadcast dimension, a non-zero alignment). An
        implementation that got the rule wrong meets such a desc; the coverage table counts it
        as exercising the rule, and no other legal desc."""
        return False

    def edge_reachable(
        self, rule: Rule, spec: Spec, op: Operator, level: FeatureLevel, row: SupportRow
    ) -> bool:
        """Whether any legal desc at ``level`` can sit at this rule's edge (``at_edge``): not the
        arrival level of an operator at a later level, nor a dimension count at the end of the
        range where the support table allows only 4."""
        return self.has_edge

    def edges(self, rule: Rule, ctx: Context) -> Iterator[Edge]:
        """Descs made from the legal desc in ``ctx`` whose values sit at this rule's boundary on
        the legal side, derived from the rule's own parameters (a range's ends, the least
        alignment, the largest buffer, an output's unusual strides), each labelled. The edge
        generator (``dmlconform.generation.edges``) keeps those still legal; the breaker is the
        value just past it."""
        return iter(())

    # The breaker: an illegal desc that breaks this rule and no other is a legal base drawn under
    # ``break_plan``'s overrides, then changed by ``break_desc``; the generator
    # (``dmlconform.generation.illegal``) keeps it once the validator finds exactly this rule
    # broken, and retries on None. Most kinds need one or two of the three methods.

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        """Why no desc at the model's level breaks ``rule`` alone (the reason lands in the
        coverage table), None when one can. Decided from the structure alone, so that the
        generator never spends attempts on a rule it cannot break. Default: breakable."""
        return None

    def break_plan(self, model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
        """What the legal base must look like for ``break_desc`` to break ``rule`` alone (a
        member present, a rank component at a rank a tensor does not support...); None to retry.
        Default: any legal base, since most kinds break by changing one value of it."""
        return Overrides()

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        """The legal base ``desc`` changed so that it breaks ``rule`` and nothing else; None to
        retry. Default: the base itself, for kinds whose overrides already break the rule."""
        return desc

    def members(self, rule: Rule) -> list[str]:
        """Members the rule binds (for spec lint and spec-diff)."""
        out = list(rule.params.get("members", []))
        for key in ("member", "to", "of", "length_member"):
            if key in rule.params:
                out.append(rule.params[key])
        return out


KINDS: dict[str, RuleKind] = {}


def kind(cls: type[RuleKind]) -> type[RuleKind]:
    """Registers one instance of the kind class under its ``name``: rules name their kind by a
    string (the spec's YAML), and ``KINDS`` is where that string becomes the kind. The name also
    joins the spec schema's list of kinds (``RULE_KINDS``), so that a spec naming an unknown
    kind is refused where it is loaded."""
    KINDS[cls.name] = cls()
    RULE_KINDS.add(cls.name)
    return cls


def kind_of(rule: Rule) -> RuleKind:
    """The kind object of ``rule``. A rule names its kind by a string (the spec's YAML); this is
    the one place that string becomes the kind, so that everything else compares kind classes:
    renaming a kind's string then fails here, loudly, instead of leaving a string comparison
    that silently never holds."""
    return KINDS[rule.kind]


def of_kind(rules: Iterable[Rule], kind: type[RuleKind]) -> list[Rule]:
    """The rules among ``rules`` whose kind is ``kind`` (or a subclass of it)."""
    return [r for r in rules if isinstance(kind_of(r), kind)]
