"""Kinds that tie members to one another: a group agrees on sizes, data type or dimension count,
one tensor broadcasts to another, members come in pairs.

Their breakers mostly work through the legal base's overrides (members forced present together,
one tensor given another data type or rank than its group) and change the desc only where the
relation is between sizes, so that the rest of the desc stays legal around the one broken
relation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.rules.base import Context, Finding, RuleKind, kind, of_kind
from dmlconform.specification.rules.breaking import Chooser, Overrides
from dmlconform.specification.spec import Rule
from dmlconform.specification.structure import Bcast, Model


def _repack(t: TensorDesc, sizes: tuple[int, ...]) -> TensorDesc:
    """New sizes with a packed layout (old strides/total size would not fit them)."""
    return t.replace(sizes=sizes, strides=None, total_tensor_size_in_bytes=None, dimension_count=None)


class _SameField(RuleKind):
    """Every present member of the group agrees with the first one in struct order."""

    params = ("members",)
    field_name: ClassVar[str]
    label: ClassVar[str]

    def get(self, t: TensorDesc) -> Any:
        raise NotImplementedError

    def show(self, value: Any) -> str:
        return str(value)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        present = [n for n in ctx.struct_order(rule.params["members"]) if ctx.tensor(n) is not None]
        if len(present) < 2:
            return
        anchor = present[0]
        want = self.get(ctx.tensor(anchor))  # type: ignore[arg-type]
        for name in present[1:]:
            got = self.get(ctx.tensor(name))  # type: ignore[arg-type]
            if got != want:
                yield (
                    f"{name}.{self.field_name}",
                    f"{name} {self.label} {self.show(got)} differs from {anchor}'s {self.show(want)}",
                )


@kind
class SameSizes(_SameField):
    name = "same_sizes"
    field_name = "Sizes"
    label = "Sizes"

    def get(self, t: TensorDesc) -> Any:
        return t.sizes

    def show(self, value: Any) -> str:
        return "{" + ", ".join(map(str, value)) + "}"

    @staticmethod
    def _candidates(model: Model, rule: Rule) -> list[tuple[str, str]]:
        """(member to change, another member) pairs: the changed member is no broadcast target and
        belongs to no other same_sizes rule, so only this rule sees its new Sizes."""
        names = [n for n in rule.params["members"] if n in model.size_group_of]
        targets = {b.to for b in model.bcasts}
        other_rules = {
            n for r in of_kind(model.active, SameSizes) if r.id != rule.id for n in r.params["members"]
        }
        out = []
        for m in names:
            if m in targets or m in other_rules:
                continue
            for o in names:
                if o != m and any({m, o} <= c for c in model.combos):
                    out.append((m, o))
        return out

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        if self._candidates(model, rule):
            return None
        return "every member is a broadcast target or in another same-Sizes group"

    def break_plan(self, model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
        m, o = ch.choice(self._candidates(model, rule), key=f"break:{rule.id}")
        return Overrides(force_present=frozenset({m, o}), force_absent=frozenset())

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        """One dimension of one member changed: past the other's size, or (where the member
        broadcasts) between 1 and its target's size, so that its broadcast rule still holds."""
        cands = [
            (m, o) for m, o in self._candidates(model, rule) if isinstance(desc.members.get(m), TensorDesc)
        ]
        cands = [(m, o) for m, o in cands if isinstance(desc.members.get(o), TensorDesc)]
        if not cands:
            return None
        m, _ = ch.choice(cands)
        t = desc.members[m]
        rank = len(t.sizes)
        if rank == 0:
            return None
        dims = list(range(rank))
        bc = [b for b in model.bcasts if b.member == m and isinstance(desc.members.get(b.to), TensorDesc)]
        sizes = list(t.sizes)
        if bc:
            fixed = set().union(*(fixed_dims(b.rule.params, rank) for b in bc))
            target = desc.members[bc[0].to].sizes
            if len(target) != rank:
                bc = []
            else:
                dims = [i for i in dims if i not in fixed and target[i] > 1]
                if not dims:
                    return None
                i = ch.choice(dims)
                sizes[i] = 1 if sizes[i] == target[i] else target[i]
        if not bc:
            i = ch.choice(dims)
            sizes[i] += 1
        return desc.replace(**{m: _repack(t, tuple(sizes))})


@kind
class SameDataType(_SameField):
    name = "same_data_type"
    field_name = "DataType"
    label = "DataType"

    def get(self, t: TensorDesc) -> Any:
        return t.data_type

    @staticmethod
    def _ways(model: Model, rule: Rule) -> list[tuple[str, str, str, str]]:
        """(tensor, its dtype, other member, the group's dtype) ways to break the group."""
        names = [n for n in rule.params["members"] if n in model.size_group_of]
        out = []
        for m in names:
            others = [o for o in names if o != m]
            if not others:
                continue
            common = None
            for o in others:
                s = set(model.supported_dtypes(o))
                common = s if common is None else common & s
            for t in model.supported_dtypes(m):
                for g in sorted(common or ()):
                    if t != g:
                        for o in others:
                            if any({m, o} <= c for c in model.combos):
                                out.append((m, t, o, g))
        return out

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        if self._ways(model, rule):
            return None
        return "no member supports a data type that differs from one all the others support"

    def break_plan(self, model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
        """One member drawn in a data type it supports, another in one that differs from it."""
        m, t, o, g = ch.choice(self._ways(model, rule), key=f"break:{rule.id}")
        return Overrides(
            force_present=frozenset({m, o}), dtype_group={model.dtype_group_of[o]: g}, dtype_tensor={m: t}
        )


@kind
class SameDimensionCount(_SameField):
    name = "same_dimension_count"
    field_name = "DimensionCount"
    label = "DimensionCount"

    def get(self, t: TensorDesc) -> Any:
        return t.rank

    @staticmethod
    def _ways(model: Model, rule: Rule) -> list[tuple[int, int, int, str, str, int]]:
        """(size group, its rank, comp, member in group, other member, other rank)."""
        names = [n for n in rule.params["members"] if n in model.size_group_of]
        out = []
        for g in sorted({model.size_group_of[n] for n in names}):
            inside = [n for n in names if model.size_group_of[n] == g]
            outside = [n for n in names if model.size_group_of[n] != g]
            comp = model.comp_of[g]
            rest = [t for h in model.comps[comp] if h != g for t in model.size_groups[h]]
            top = set(range(1, model.level.max_dimension_count + 1))
            r_in = top.intersection(*(set(model.supported_ranks(t)) for t in model.size_groups[g]))
            r_out = top.intersection(*(set(model.supported_ranks(t)) for t in rest)) if rest else top
            for a in inside:
                for b in outside:
                    if not any({a, b} <= c for c in model.combos):
                        continue
                    for ri in sorted(r_in):
                        for ro in sorted(r_out):
                            if ri != ro:
                                out.append((g, ri, comp, a, b, ro))
        return out

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        if self._ways(model, rule):
            return None
        counts = sorted(
            {r for n in rule.params["members"] if n in model.size_group_of for r in model.supported_ranks(n)}
        )
        return (
            f"every member supports only dimension count(s) {counts} at {model.level.name}, so a "
            f"different count also breaks supported-dimension-count"
        )

    def break_plan(self, model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
        """One size group drawn at a rank its component's other groups do not share."""
        g, ri, comp, a, b, ro = ch.choice(self._ways(model, rule), key=f"break:{rule.id}")
        return Overrides(force_present=frozenset({a, b}), comp_rank={comp: ro}, group_rank={g: ri})


@kind
class Broadcastable(RuleKind):
    """Each dimension of ``member`` is 1 or equal to ``to``'s; ``fixed_dims`` (Python-style
    indices, negative from the end; ``fixed_dims_by_rank`` adds dims for one rank: which dimension
    is "the channel" depends on the rank) must be equal, and only while every attribute named in
    ``fixed_when`` has the given value (a doc sentence such as "Spatial FALSE requires Width and
    Height not to be broadcast"). Tensors of different rank are left to the dimension-count
    rules."""

    name = "broadcastable"
    params = ("member", "to")
    has_edge = True

    def at_edge(self, rule: Rule, ctx: Context) -> bool:
        """The desc broadcasts: a dimension of 1 against a larger one, or, while ``fixed_when``
        holds, a fixed dimension larger than 1 (one that could have been broadcast otherwise)."""
        t, target = ctx.tensor(rule.params["member"]), ctx.tensor(rule.params["to"])
        if t is None or target is None or len(t.sizes) != len(target.sizes):
            return False
        fixed: frozenset[int] = frozenset()
        if condition_holds(rule.params.get("fixed_when"), ctx.value):
            fixed = fixed_dims(rule.params, len(t.sizes))
        return any(
            (i in fixed and b > 1) or (i not in fixed and a == 1 < b)
            for i, (a, b) in enumerate(zip(t.sizes, target.sizes, strict=False))
        )

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        t, target = ctx.tensor(rule.params["member"]), ctx.tensor(rule.params["to"])
        if t is None or target is None or len(t.sizes) != len(target.sizes):
            return
        rank = len(t.sizes)
        fixed: frozenset[int] = frozenset()
        if condition_holds(rule.params.get("fixed_when"), ctx.value):
            fixed = fixed_dims(rule.params, rank)
        for i, (a, b) in enumerate(zip(t.sizes, target.sizes, strict=False)):
            if a == b:
                continue
            if i in fixed:
                yield (
                    f"{rule.params['member']}.Sizes[{i}]",
                    f"dimension {i} is {a} but must equal {rule.params['to']}'s {b} at {ctx.level.name}",
                )
            elif a != 1:
                yield (
                    f"{rule.params['member']}.Sizes[{i}]",
                    f"dimension {i} is {a}: must be 1 or {rule.params['to']}'s {b}",
                )

    @staticmethod
    def _conflicts(model: Model, rule: Rule) -> list[Bcast]:
        """Other broadcast rules that see the same new Sizes: on a member of the rule's size group
        that must be present with it, toward the same size group."""
        me = next(b for b in model.bcasts if b.rule.id == rule.id)
        gm, gt = model.size_group_of[me.member], model.size_group_of[me.to]
        out = []
        for b in model.bcasts:
            if b.rule.id == rule.id or model.size_group_of[b.member] != gm or model.size_group_of[b.to] != gt:
                continue
            if b.member == me.member or not model.can_be_absent(b.member, frozenset({me.member, me.to})):
                out.append(b)
        return out

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        me = next(b for b in model.bcasts if b.rule.id == rule.id)
        if not any({me.member, me.to} <= c for c in model.combos):
            return f"{me.member} and {me.to} are never present together"
        conflicts = self._conflicts(model, rule)
        if not conflicts:
            return None
        ranks = model.comp_ranks[model.comp_of[model.size_group_of[me.to]]]
        for r in ranks:
            if any(
                all(d not in fixed_dims(c.rule.params, r) for c in conflicts)
                for d in fixed_dims(me.rule.params, r)
            ):
                return None
        names = ", ".join(f"{c.member} ({c.rule.id})" for c in conflicts)
        return (
            f"{me.member} must have the same Sizes as {names}, which must be present with it and "
            f"broadcasts to {me.to} under the same constraint: any Sizes that break {rule.id} break "
            f"that rule too"
        )

    def break_plan(self, model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
        """The member and its target present, the other broadcasting members of its size group
        absent where they may be, and sometimes the ``fixed_when`` condition met."""
        me = next(b for b in model.bcasts if b.rule.id == rule.id)
        gm = model.size_group_of[me.member]
        absent = {
            b.member
            for b in model.bcasts
            if b.rule.id != rule.id
            and model.size_group_of[b.member] == gm
            and b.member != me.member
            and model.can_be_absent(b.member, frozenset({me.member, me.to}))
        }
        attrs = dict(me.when) if me.when and me.fixes_any and ch.boolean() else {}
        return Overrides(
            force_present=frozenset({me.member, me.to}), force_absent=frozenset(absent), attrs=attrs
        )

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        """One dimension of the member's size group moved off the target's: a fixed one to 1, a
        free one past the target's size."""
        me = next(b for b in model.bcasts if b.rule.id == rule.id)
        t, target = desc.members.get(me.member), desc.members.get(me.to)
        if (
            not isinstance(t, TensorDesc)
            or not isinstance(target, TensorDesc)
            or len(t.sizes) != len(target.sizes)
        ):
            return None
        rank = len(t.sizes)
        fixed = fixed_dims(me.rule.params, rank)
        if me.when and not condition_holds(me.when, lambda n: desc.get(n, model.spec)):
            fixed = frozenset()
        conflicts = self._conflicts(model, rule)
        moves: list[tuple[int, int]] = []
        for i in range(rank):
            if i in fixed:
                if target.sizes[i] > 1 and all(i not in fixed_dims(c.rule.params, rank) for c in conflicts):
                    moves.append((i, 1))
            elif not conflicts:
                moves.append((i, target.sizes[i] + ch.integer(1, 2)))
        if not moves:
            return None
        i, v = ch.choice(moves)
        sizes = list(t.sizes)
        sizes[i] = v
        group = model.size_groups[model.size_group_of[me.member]]
        changes = {
            n: _repack(desc.members[n], tuple(sizes))
            for n in group
            if isinstance(desc.members.get(n), TensorDesc)
        }
        return desc.replace(**changes)


def fixed_dims(params: dict[str, Any], rank: int) -> frozenset[int]:
    """The dimensions a ``broadcastable`` rule fixes on a tensor of ``rank``: ``fixed_dims`` (any
    rank, negative from the end) plus the ``fixed_dims_by_rank`` entry for that rank."""
    dims = list(params.get("fixed_dims", ()))
    for entry in params.get("fixed_dims_by_rank", ()):
        if entry["rank"] == rank:
            dims += entry["dims"]
    return frozenset(d % rank for d in dims if -rank <= d < rank)


def condition_holds(when: dict[str, Any] | None, value: Any) -> bool:
    """Whether every member named in ``when`` has the given value (``value(name)`` reads a
    member, defaults applied; BOOL members compare as truth values). No condition holds always;
    an absent member does not satisfy one."""
    for name, want in (when or {}).items():
        got = value(name)
        if got is None:
            return False
        if isinstance(want, bool) or isinstance(got, bool):
            if bool(got) != bool(want):
                return False
        elif got != want:
            return False
    return True


@kind
class PairedPresence(RuleKind):
    name = "paired_presence"
    params = ("members",)

    def check(self, rule: Rule, ctx: Context) -> Iterator[Finding]:
        names = rule.params["members"]
        present = [n for n in names if ctx.present(n)]
        if present and len(present) != len(names):
            for n in names:
                if n not in present:
                    yield (
                        n,
                        f"{n} is required when {' and '.join(present)} is present"
                        + (f" below DML_FEATURE_LEVEL_{rule.until}" if rule.until else ""),
                    )

    @staticmethod
    def _optional(model: Model, rule: Rule) -> list[str]:
        return [n for n in rule.params["members"] if n not in model.required]

    def why_unbreakable(self, model: Model, rule: Rule) -> str | None:
        if len(rule.params["members"]) >= 2 and self._optional(model, rule):
            return None
        return "every member is required"

    def break_plan(self, model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
        return Overrides(
            force_present=frozenset(n for n in rule.params["members"] if n in model.size_group_of)
        )

    def break_desc(self, model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        """One optional member of the pair left out (or null) while the others are present."""
        name = ch.choice(self._optional(model, rule), key=f"break:{rule.id}")
        return desc.replace(**{name: None if ch.boolean() else ...})
