"""Operator-level kinds of presence and support: the operator exists at the level, its required
members are given, and its tensors have a dimension count and a data type the support table
admits at the level.

Their breakers work through the legal base's overrides (a rank component forced to a rank a
tensor does not support, a dtype group to a data type one of its tensors does not) rather than
by editing the desc, so that the rest of the desc stays legal around the one broken relation.
"""

from __future__ import annotations

from collections.abc import Iterator

from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.rules.base import Context, Finding, RuleKind, kind
from dmlconform.specification.rules.breaking import Chooser, Overrides
from dmlconform.specification.spec import FeatureLevel, Operator, Rule, Spec, SupportRow
from dmlconform.specification.structure import Model


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

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        """Broken by the level alone: below the operator's introduction every legal base breaks
        this rule and no other, so it needs neither overrides nor a change."""
        if model.available:
            return f"{model.op.name} is available at {model.level.name} (introduced in {model.op.introduced})"
        return None


@kind
class Required(RuleKind):
    name = "required"
    params = ("members",)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        for name in rule.params["members"]:
            if ctx.value(name) is None:
                state = "null" if name in ctx.desc.members else "missing"
                yield name, f"{name} is required but {state}"

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        return None if rule.params.get("members") else "the rule names no member"

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        """One required member left out, or (a tensor or an activation) given as null."""
        names = [n for n in rule.params["members"] if desc.members.get(n) is not None]
        if not names:
            return None
        name = ch.choice(names, key=f"break:{rule.id}")
        member = model.op.member(name)
        if member is not None and member.type in ("tensor", "activation") and ch.boolean():
            return desc.replace(**{name: None})
        return desc.replace(**{name: ...})


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

    @staticmethod
    def _bad_ranks(model: Model, comp: int) -> list[tuple[int, str]]:
        """(rank, tensor) pairs: a valid tensor-desc rank that ``tensor`` of the component does not
        support at this level."""
        top = model.level.max_dimension_count
        out = []
        for g in model.comps[comp]:
            for t in model.size_groups[g]:
                if t not in model.row.tensors:
                    continue
                for r in range(1, top + 1):
                    if r not in model.supported_ranks(t):
                        out.append((r, t))
        return out

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        if any(self._bad_ranks(model, c) for c in range(len(model.comps))):
            return None
        top = model.level.max_dimension_count
        return (
            f"every tensor supports every dimension count 1 to {top} at {model.level.name}, the whole "
            f"range a valid tensor desc has there, so an unsupported count also breaks the tensor-desc "
            f"dimension-count rule"
        )

    def break_plan(self, model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
        """A rank component drawn at a rank one of its tensors does not support, that tensor
        present."""
        comps = [c for c in range(len(model.comps)) if self._bad_ranks(model, c)]
        comp = ch.choice(comps, key=f"break:{rule.id}:comp")
        r, t = ch.choice(self._bad_ranks(model, comp), key=f"break:{rule.id}:{comp}")
        return Overrides(force_present=frozenset({t}), comp_rank={comp: r})


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

    @staticmethod
    def _bad_dtypes(model: Model, group: int) -> list[str]:
        ok = set(model.dtype_options[group])
        return [
            d.name
            for d in model.spec.data_types.values()
            if d.size > 0
            and d.name not in ok
            and (d.since is None or model.spec.level(d.since) <= model.level)
        ]

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        if any(self._bad_dtypes(model, g) for g in range(len(model.dtype_groups))):
            return None
        return "every tensor supports every data type"

    def break_plan(self, model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
        """A dtype group drawn in a data type one of its tensors does not support, that tensor
        present."""
        groups = [g for g in range(len(model.dtype_groups)) if self._bad_dtypes(model, g)]
        g = ch.choice(groups, key=f"break:{rule.id}:group")
        d = ch.choice(self._bad_dtypes(model, g), key=f"break:{rule.id}:{g}")
        victims = [t for t in model.dtype_groups[g] if d not in model.supported_dtypes(t)]
        return Overrides(force_present=frozenset({ch.choice(victims)}), dtype_group={g: d})
