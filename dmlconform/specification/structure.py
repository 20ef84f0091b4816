"""The structure of one operator at one level as its rules shape it: what the generators and
the rule kinds' breakers read instead of the rules.

A :class:`Model` per (spec, operator, level) holds the rules as structure: which tensors are
required, which presence combinations ``paired_presence`` allows, *size groups* (union of
``same_sizes`` groups: they share one shape), *dtype groups* (``same_data_type``), *rank
components* (size groups tied by ``same_dimension_count`` or a ``broadcastable`` pair: they
share a rank), and the broadcast tree (a group whose member broadcasts to another group derives
its shape from that group's: each dimension 1 or equal, ``fixed_dims`` equal).

It is data over the spec model and nothing else, so that it sits below the rule kinds: each
kind's breaker (``RuleKind.break_plan``, ``break_desc``) reads it, and
``dmlconform.specification.structure_builder`` builds it from the kinds (``model_for``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dmlconform.specification.spec import (
    Activation,
    FeatureLevel,
    Operator,
    Rule,
    Spec,
    SupportRow,
)


@dataclass(frozen=True)
class Bcast:
    """One active ``broadcastable`` rule, resolved to its members (the dimensions it fixes on a
    tensor of some rank: ``fixed_dims(bcast.rule.params, rank)``)."""

    rule: Rule
    member: str
    to: str
    when: dict[str, Any] = field(default_factory=dict)  # fixed dims hold only under this condition

    @property
    def fixes_any(self) -> bool:
        return bool(self.rule.params.get("fixed_dims") or self.rule.params.get("fixed_dims_by_rank"))


@dataclass
class Model:
    """Everything the generators and the breakers need to know about (operator, level), computed
    once."""

    spec: Spec
    op: Operator
    level: FeatureLevel
    row: SupportRow
    available: bool
    active: list[Rule]
    tensors: tuple[str, ...]
    inputs: frozenset[str]
    required: frozenset[str]
    combos: tuple[frozenset[str], ...]
    size_groups: tuple[tuple[str, ...], ...]
    size_group_of: dict[str, int]
    parent: dict[int, int]
    fixed_of: dict[int, tuple[Bcast, ...]]
    fixed_cond: dict[int, tuple[Bcast, ...]]
    group_order: tuple[int, ...]
    comps: tuple[tuple[int, ...], ...]
    comp_of: dict[int, int]
    comp_ranks: dict[int, tuple[int, ...]]
    dtype_groups: tuple[tuple[str, ...], ...]
    dtype_group_of: dict[str, int]
    dtype_options: dict[int, tuple[str, ...]]
    bcasts: tuple[Bcast, ...]
    axes_of: dict[str, str]
    axes_unique: frozenset[str]
    length_of: dict[str, str]
    activation_members: tuple[str, ...]
    activations: tuple[Activation, ...]
    param_min: dict[tuple[str, str], float]
    one_of: dict[str, tuple[float, ...]]  # attribute_one_of: the values a member may take
    ranges: dict[str, tuple[float | None, float | None]]  # attribute_range: (min, max)

    def supported_ranks(self, name: str) -> tuple[int, ...]:
        top = self.level.max_dimension_count
        support = self.row.tensors.get(name)
        counts = support.dimension_counts if support else tuple(range(1, top + 1))
        return tuple(r for r in counts if 1 <= r <= top)

    def supported_dtypes(self, name: str) -> tuple[str, ...]:
        support = self.row.tensors.get(name)
        if support:
            return support.data_types
        return next(iter(self.row.tensors.values())).data_types

    def element_size(self, dtype: str) -> float:
        return self.spec.data_types[dtype].size

    def can_be_absent(self, name: str, with_present: frozenset[str] = frozenset()) -> bool:
        """Whether a legal desc may leave ``name`` out while ``with_present`` are present."""
        return any(name not in c and with_present <= c for c in self.combos)
