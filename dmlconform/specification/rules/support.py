"""Operator-level kinds of presence and support: the operator exists at the level, its required
members are given, and its tensors have a dimension count and a data type the support table
admits at the level."""

from __future__ import annotations

from collections.abc import Iterator

from dmlconform.specification.model import FeatureLevel, Operator, Rule, Spec, SupportRow
from dmlconform.specification.rules.base import Context, Finding, RuleKind, kind


@kind
class Available(RuleKind):
    name = "available"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        intro = ctx.spec.level(ctx.op.introduced)
        if ctx.level < intro:
            yield (
                "type",
                f"{ctx.op.name} was introduced in DML_FEATURE_LEVEL_{intro.name}, "
                f"not available at {ctx.level.name}",
            )

    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """At the level the operator arrives at."""
        return ctx.level == ctx.spec.level(ctx.op.introduced)

    def edge_reachable(
        self, rule: Rule, spec: Spec, op: Operator, level: FeatureLevel, row: SupportRow
    ) -> bool:
        return level == spec.level(op.introduced)


@kind
class Required(RuleKind):
    name = "required"
    params = ("members",)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for name in rule.params["members"]:
            if ctx.value(name) is None:
                state = "null" if name in ctx.desc.members else "missing"
                yield name, f"{name} is required but {state}"


@kind
class SupportDimensionCount(RuleKind):
    name = "support_dimension_count"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for name, support in ctx.row.tensors.items():
            t = ctx.tensor(name)
            if t is not None and t.rank not in support.dimension_counts:
                yield (
                    f"{name}.DimensionCount",
                    f"{name} has {t.rank} dimensions; supported at {ctx.level.name}: "
                    f"{_counts(support.dimension_counts)} (support row 'DML_FEATURE_LEVEL_{ctx.row.since} and above')",
                )

    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """A tensor with the fewest or the most dimensions its support row admits."""
        return any(
            (t := ctx.tensor(name)) is not None
            and support.dimension_counts
            and t.rank in (min(support.dimension_counts), max(support.dimension_counts))
            for name, support in ctx.row.tensors.items()
        )


def _counts(counts: tuple[int, ...]) -> str:
    if len(counts) > 2 and list(counts) == list(range(counts[0], counts[-1] + 1)):
        return f"{counts[0]} to {counts[-1]}"
    return ", ".join(map(str, counts))


@kind
class SupportDataType(RuleKind):
    name = "support_data_type"

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for name, support in ctx.row.tensors.items():
            t = ctx.tensor(name)
            if t is not None and t.data_type not in support.data_types:
                yield (
                    f"{name}.DataType",
                    f"{name} is {t.data_type}; supported: {', '.join(support.data_types)}",
                )
