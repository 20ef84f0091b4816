"""Breakers of the kinds that relate members to each other and to the support table:
available, required, supported ranks and data types, shared data types, ranks and Sizes,
broadcasts, paired presence.

Most of them work through the legal base's overrides (a rank component forced to an unsupported
rank, a tensor to another data type, members forced present or absent) rather than by editing
the desc, so that the rest of the desc stays legal around the one broken relation.
"""

from __future__ import annotations

from dmlconform.generation.breaker import Breaker, no_overrides, unchanged
from dmlconform.generation.chooser import Chooser
from dmlconform.generation.model import Bcast, Model
from dmlconform.generation.plan import Overrides
from dmlconform.specification.desc import OperatorDesc, TensorDesc
from dmlconform.specification.model import Rule
from dmlconform.specification.rules import (
    Available,
    Broadcastable,
    PairedPresence,
    Required,
    RuleKind,
    SameDataType,
    SameDimensionCount,
    SameSizes,
    SupportDataType,
    SupportDimensionCount,
    condition_holds,
)


def _repack(t: TensorDesc, sizes: tuple[int, ...]) -> TensorDesc:
    """New sizes with a packed layout (old strides/total size would not fit them)."""
    return t.replace(sizes=sizes, strides=None, total_tensor_size_in_bytes=None, dimension_count=None)


# available ------------------------------------------------------------------------------------


def _available_why(model: Model, rule: Rule) -> str | None:
    if model.available:
        return f"{model.op.name} is available at {model.level.name} (introduced in {model.op.introduced})"
    return None


# required -------------------------------------------------------------------------------------


def _required_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    names = [n for n in rule.params["members"] if desc.members.get(n) is not None]
    if not names:
        return None
    name = ch.choice(names, key=f"break:{rule.id}")
    member = model.op.member(name)
    if member is not None and member.type in ("tensor", "activation") and ch.boolean():
        return desc.replace(**{name: None})
    return desc.replace(**{name: ...})


def _required_why(model: Model, rule: Rule) -> str | None:
    return None if rule.params.get("members") else "the rule names no member"


# support_dimension_count ----------------------------------------------------------------------


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


def _support_dims_why(model: Model, rule: Rule) -> str | None:
    if any(_bad_ranks(model, c) for c in range(len(model.comps))):
        return None
    top = model.level.max_dimension_count
    return (
        f"every tensor supports every dimension count 1 to {top} at {model.level.name}, the whole "
        f"range a valid tensor desc has there, so an unsupported count also breaks the tensor-desc "
        f"dimension-count rule"
    )


def _support_dims_plan(model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
    comps = [c for c in range(len(model.comps)) if _bad_ranks(model, c)]
    comp = ch.choice(comps, key=f"break:{rule.id}:comp")
    r, t = ch.choice(_bad_ranks(model, comp), key=f"break:{rule.id}:{comp}")
    return Overrides(force_present=frozenset({t}), comp_rank={comp: r})


# support_data_type ----------------------------------------------------------------------------


def _bad_dtypes(model: Model, group: int) -> list[str]:
    ok = set(model.dtype_options[group])
    return [
        d.name
        for d in model.spec.data_types.values()
        if d.size > 0 and d.name not in ok and (d.since is None or model.spec.level(d.since) <= model.level)
    ]


def _support_dtype_why(model: Model, rule: Rule) -> str | None:
    if any(_bad_dtypes(model, g) for g in range(len(model.dtype_groups))):
        return None
    return "every tensor supports every data type"


def _support_dtype_plan(model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
    groups = [g for g in range(len(model.dtype_groups)) if _bad_dtypes(model, g)]
    g = ch.choice(groups, key=f"break:{rule.id}:group")
    d = ch.choice(_bad_dtypes(model, g), key=f"break:{rule.id}:{g}")
    victims = [t for t in model.dtype_groups[g] if d not in model.supported_dtypes(t)]
    return Overrides(force_present=frozenset({ch.choice(victims)}), dtype_group={g: d})


# same_data_type -------------------------------------------------------------------------------


def _same_dtype_options(model: Model, rule: Rule) -> list[tuple[str, str, str, str]]:
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


def _same_dtype_why(model: Model, rule: Rule) -> str | None:
    if _same_dtype_options(model, rule):
        return None
    return "no member supports a data type that differs from one all the others support"


def _same_dtype_plan(model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
    m, t, o, g = ch.choice(_same_dtype_options(model, rule), key=f"break:{rule.id}")
    return Overrides(
        force_present=frozenset({m, o}), dtype_group={model.dtype_group_of[o]: g}, dtype_tensor={m: t}
    )


# same_dimension_count -------------------------------------------------------------------------


def _same_rank_options(model: Model, rule: Rule) -> list[tuple[int, int, int, str, str, int]]:
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


def _same_rank_why(model: Model, rule: Rule) -> str | None:
    if _same_rank_options(model, rule):
        return None
    counts = sorted(
        {r for n in rule.params["members"] if n in model.size_group_of for r in model.supported_ranks(n)}
    )
    return (
        f"every member supports only dimension count(s) {counts} at {model.level.name}, so a "
        f"different count also breaks supported-dimension-count"
    )


def _same_rank_plan(model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
    g, ri, comp, a, b, ro = ch.choice(_same_rank_options(model, rule), key=f"break:{rule.id}")
    return Overrides(force_present=frozenset({a, b}), comp_rank={comp: ro}, group_rank={g: ri})


# same_sizes -----------------------------------------------------------------------------------


def _same_sizes_candidates(model: Model, rule: Rule) -> list[tuple[str, str]]:
    """(member to change, another member) pairs: the changed member is no broadcast target and
    belongs to no other same_sizes rule, so only this rule sees its new Sizes."""
    names = [n for n in rule.params["members"] if n in model.size_group_of]
    targets = {b.to for b in model.bcasts}
    other_rules = {n for r in model.rules_of_kind(SameSizes) if r.id != rule.id for n in r.params["members"]}
    out = []
    for m in names:
        if m in targets or m in other_rules:
            continue
        for o in names:
            if o != m and any({m, o} <= c for c in model.combos):
                out.append((m, o))
    return out


def _same_sizes_why(model: Model, rule: Rule) -> str | None:
    if _same_sizes_candidates(model, rule):
        return None
    return "every member is a broadcast target or in another same-Sizes group"


def _same_sizes_plan(model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
    m, o = ch.choice(_same_sizes_candidates(model, rule), key=f"break:{rule.id}")
    return Overrides(force_present=frozenset({m, o}), force_absent=frozenset())


def _same_sizes_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    cands = [
        (m, o) for m, o in _same_sizes_candidates(model, rule) if isinstance(desc.members.get(m), TensorDesc)
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
        fixed = set().union(*(b.fixed(rank) for b in bc))
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


# broadcastable --------------------------------------------------------------------------------


def _bcast_conflicts(model: Model, rule: Rule) -> list[Bcast]:
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


def _bcast_why(model: Model, rule: Rule) -> str | None:
    me = next(b for b in model.bcasts if b.rule.id == rule.id)
    if not any({me.member, me.to} <= c for c in model.combos):
        return f"{me.member} and {me.to} are never present together"
    conflicts = _bcast_conflicts(model, rule)
    if not conflicts:
        return None
    ranks = model.comp_ranks[model.comp_of[model.size_group_of[me.to]]]
    for r in ranks:
        if any(all(d not in c.fixed(r) for c in conflicts) for d in me.fixed(r)):
            return None
    names = ", ".join(f"{c.member} ({c.rule.id})" for c in conflicts)
    return (
        f"{me.member} must have the same Sizes as {names}, which must be present with it and "
        f"broadcasts to {me.to} under the same constraint: any Sizes that break {rule.id} break "
        f"that rule too"
    )


def _bcast_plan(model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
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
    return Overrides(force_present=frozenset({me.member, me.to}), force_absent=frozenset(absent), attrs=attrs)


def _bcast_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    me = next(b for b in model.bcasts if b.rule.id == rule.id)
    t, target = desc.members.get(me.member), desc.members.get(me.to)
    if (
        not isinstance(t, TensorDesc)
        or not isinstance(target, TensorDesc)
        or len(t.sizes) != len(target.sizes)
    ):
        return None
    rank = len(t.sizes)
    fixed = me.fixed(rank)
    if me.when and not condition_holds(me.when, lambda n: desc.get(n, model.spec)):
        fixed = frozenset()
    conflicts = _bcast_conflicts(model, rule)
    moves: list[tuple[int, int]] = []
    for i in range(rank):
        if i in fixed:
            if target.sizes[i] > 1 and all(i not in c.fixed(rank) for c in conflicts):
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


# paired_presence ------------------------------------------------------------------------------


def _paired_optional(model: Model, rule: Rule) -> list[str]:
    return [n for n in rule.params["members"] if n not in model.required]


def _paired_why(model: Model, rule: Rule) -> str | None:
    if len(rule.params["members"]) >= 2 and _paired_optional(model, rule):
        return None
    return "every member is required"


def _paired_plan(model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
    return Overrides(force_present=frozenset(n for n in rule.params["members"] if n in model.size_group_of))


def _paired_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    name = ch.choice(_paired_optional(model, rule), key=f"break:{rule.id}")
    return desc.replace(**{name: None if ch.boolean() else ...})


#: The breakers of the kinds that relate members: presence, support, shared sizes, types and
#: ranks, broadcasts.
STRUCTURE_BREAKERS: dict[type[RuleKind], Breaker] = {
    Available: Breaker(_available_why, no_overrides, unchanged),
    Required: Breaker(_required_why, no_overrides, _required_mutate),
    SupportDimensionCount: Breaker(_support_dims_why, _support_dims_plan, unchanged),
    SupportDataType: Breaker(_support_dtype_why, _support_dtype_plan, unchanged),
    SameDataType: Breaker(_same_dtype_why, _same_dtype_plan, unchanged),
    SameDimensionCount: Breaker(_same_rank_why, _same_rank_plan, unchanged),
    SameSizes: Breaker(_same_sizes_why, _same_sizes_plan, _same_sizes_mutate),
    Broadcastable: Breaker(_bcast_why, _bcast_plan, _bcast_mutate),
    PairedPresence: Breaker(_paired_why, _paired_plan, _paired_mutate),
}
