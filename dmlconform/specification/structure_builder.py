"""The rules of (operator, level) made into its structure (:func:`model_for`), once per spec.

Nothing here names an operator, a member or an activation: every constraint a generated desc
satisfies comes from the rules active at the level (``validate.active_rules``) and the support
row, read through the rule *kinds*, found by their class in ``dmlconform.specification.rules``
(:func:`of_kind`), never by their name. A new operator YAML therefore gets generators for free.
The :class:`~dmlconform.specification.structure.Model` it builds sits below the kinds, whose
breakers read it; this builder sits above them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dmlconform.specification.rules import (
    ActivationParameterMin,
    ArrayLength,
    AttributeOneOf,
    AttributeRange,
    AxesInRange,
    AxesUnique,
    Broadcastable,
    PairedPresence,
    Required,
    SameDataType,
    SameDimensionCount,
    SameSizes,
    of_kind,
)
from dmlconform.specification.spec import FeatureLevel, Operator, Rule, Spec, SupportRow
from dmlconform.specification.structure import Bcast, Model
from dmlconform.specification.validate import active_rules


class _UnionFind:
    def __init__(self, items: Sequence[Any]) -> None:
        self.parent = {x: x for x in items}

    def find(self, x: Any) -> Any:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra

    def groups(self, order: Sequence[Any]) -> list[tuple[Any, ...]]:
        out: dict[Any, list[Any]] = {}
        for x in order:
            out.setdefault(self.find(x), []).append(x)
        return [tuple(v) for v in out.values()]


_MODELS: dict[tuple[int, str, str], Model] = {}


def model_for(operator: str, level: str | FeatureLevel, spec: Spec) -> Model:
    op = spec.operator(operator)
    lv = spec.level(level)
    key = (id(spec), op.name, lv.name)
    m = _MODELS.get(key)
    if m is None:
        m = _MODELS[key] = _build_model(spec, op, lv)
    return m


def _build_model(spec: Spec, op: Operator, lv: FeatureLevel) -> Model:
    active = [r for r, _ in active_rules(spec, op.name, lv)]
    row = op.support_row(spec, lv)
    tensors = tuple(m.name for m in op.tensor_members)
    required = frozenset(n for r in of_kind(active, Required) for n in r.params["members"])
    size_groups = _joined_groups(tensors, of_kind(active, SameSizes))
    size_group_of = _group_index(size_groups)
    bcasts = _broadcasts(active)
    parent, fixed_of, fixed_cond = _broadcast_tree(bcasts, size_group_of)
    order = _group_order(len(size_groups), parent)
    same_rank = of_kind(active, SameDimensionCount)
    comps = _rank_components(same_rank, tensors, size_group_of, parent, len(size_groups))
    dtype_groups = _joined_groups(tensors, of_kind(active, SameDataType))
    return Model(
        spec=spec,
        op=op,
        level=lv,
        row=row,
        available=lv >= spec.level(op.introduced),
        active=active,
        tensors=tensors,
        inputs=frozenset(m.name for m in op.input_members),
        required=required,
        combos=_presence_combos(tensors, required, of_kind(active, PairedPresence)),
        size_groups=size_groups,
        size_group_of=size_group_of,
        parent=parent,
        fixed_of=fixed_of,
        fixed_cond=fixed_cond,
        group_order=order,
        comps=comps,
        comp_of=_group_index(comps),
        comp_ranks=_component_ranks(comps, size_groups, row, lv.max_dimension_count),
        dtype_groups=dtype_groups,
        dtype_group_of=_group_index(dtype_groups),
        dtype_options=_dtype_options(dtype_groups, row),
        bcasts=bcasts,
        axes_of={r.params["member"]: r.params["of"] for r in of_kind(active, AxesInRange)},
        axes_unique=frozenset(r.params["member"] for r in of_kind(active, AxesUnique)),
        length_of=_array_lengths(op, active),
        activation_members=tuple(m.name for m in op.members if m.type == "activation"),
        activations=tuple(a for a in spec.activations.values() if spec.level(a.since) <= lv),
        param_min=_parameter_minimums(active),
        one_of=_one_of(active),
        ranges=_ranges(active),
    )


def _group_index(groups: Sequence[Sequence[Any]]) -> dict[Any, int]:
    """Each item of ``groups`` to the index of the group that holds it."""
    return {t: i for i, g in enumerate(groups) for t in g}


def _presence_combos(
    tensors: tuple[str, ...], required: frozenset[str], paired: list[Rule]
) -> tuple[frozenset[str], ...]:
    """Every set of present tensors a legal desc may have (required ones always, each
    ``paired_presence`` group all or none), fewest first."""
    groups = [set(r.params["members"]) for r in paired]
    optional = [t for t in tensors if t not in required]
    combos = []
    for mask in range(1 << len(optional)):
        present = frozenset(required & set(tensors)) | {
            optional[i] for i in range(len(optional)) if mask >> i & 1
        }
        if all(not (g & present) or g <= present for g in groups):
            combos.append(frozenset(present))
    combos.sort(key=len)
    return tuple(combos)


def _joined_groups(tensors: tuple[str, ...], rules: list[Rule]) -> tuple[tuple[str, ...], ...]:
    """The tensors joined by rules that make their ``members`` agree (same Sizes, same data
    type): the union of the rules' groups, in tensor order."""
    uf = _UnionFind(tensors)
    for r in rules:
        names = [n for n in r.params["members"] if n in tensors]
        for n in names[1:]:
            uf.union(names[0], n)
    return tuple(uf.groups(tensors))


def _broadcasts(active: list[Rule]) -> tuple[Bcast, ...]:
    return tuple(
        Bcast(r, r.params["member"], r.params["to"], dict(r.params.get("fixed_when") or {}))
        for r in of_kind(active, Broadcastable)
    )


def _broadcast_tree(
    bcasts: tuple[Bcast, ...], size_group_of: dict[str, int]
) -> tuple[dict[int, int], dict[int, tuple[Bcast, ...]], dict[int, tuple[Bcast, ...]]]:
    """(parent, fixed_of, fixed_cond): the size group each group broadcasts to (the first rule
    that names a pair of groups wins), with the rules that fix some of its dimensions always and
    those that fix them only under a condition on attributes."""
    parent: dict[int, int] = {}
    fixed_of: dict[int, tuple[Bcast, ...]] = {}
    fixed_cond: dict[int, tuple[Bcast, ...]] = {}
    for b in bcasts:
        gm, gt = size_group_of[b.member], size_group_of[b.to]
        if gm == gt or parent.get(gm, gt) != gt:
            continue
        parent[gm] = gt
        if b.when:  # fixed only while the attributes say so: applied once they are drawn
            fixed_cond[gm] = (*fixed_cond.get(gm, ()), b)
        else:
            fixed_of[gm] = (*fixed_of.get(gm, ()), b)
    return parent, fixed_of, fixed_cond


def _group_order(n_groups: int, parent: dict[int, int]) -> tuple[int, ...]:
    """The size groups, each after the group it broadcasts to (a plan derives a child's shape
    from its parent's). Drops from ``parent`` the edges of a cycle (not in any real spec)."""
    order: list[int] = []

    def visit(g: int, seen: tuple[int, ...] = ()) -> None:
        if g in order or g in seen:
            return
        if g in parent:
            visit(parent[g], (*seen, g))
        order.append(g)

    for g in range(n_groups):
        visit(g)
    for g in list(parent):  # a cycle (not in any real spec): break it
        if order.index(parent[g]) > order.index(g):
            del parent[g]
    return tuple(order)


def _rank_components(
    same_rank: list[Rule],
    tensors: tuple[str, ...],
    size_group_of: dict[str, int],
    parent: dict[int, int],
    n_groups: int,
) -> tuple[tuple[int, ...], ...]:
    """Size groups that share one rank: tied by ``same_dimension_count`` or by a broadcast."""
    cuf = _UnionFind(range(n_groups))
    for r in same_rank:
        gs = [size_group_of[n] for n in r.params["members"] if n in tensors]
        for g in gs[1:]:
            cuf.union(gs[0], g)
    for g, p in parent.items():
        cuf.union(g, p)
    return tuple(cuf.groups(range(n_groups)))


def _component_ranks(
    comps: tuple[tuple[int, ...], ...], size_groups: tuple[tuple[str, ...], ...], row: SupportRow, top: int
) -> dict[int, tuple[int, ...]]:
    """The ranks every tensor of each rank component supports at the level."""
    comp_ranks: dict[int, tuple[int, ...]] = {}
    for i, c in enumerate(comps):
        allowed = set(range(1, top + 1))
        for g in c:
            for t in size_groups[g]:
                support = row.tensors.get(t)
                if support:
                    allowed &= set(support.dimension_counts)
        comp_ranks[i] = tuple(sorted(allowed))
    return comp_ranks


def _dtype_options(dtype_groups: tuple[tuple[str, ...], ...], row: SupportRow) -> dict[int, tuple[str, ...]]:
    """The data types every tensor of each dtype group supports, in the support row's order."""
    dtype_options: dict[int, tuple[str, ...]] = {}
    for i, g in enumerate(dtype_groups):
        opts: list[str] | None = None
        for t in g:
            support = row.tensors.get(t)
            if support:
                opts = [
                    d for d in (opts if opts is not None else support.data_types) if d in support.data_types
                ]
        dtype_options[i] = tuple(opts if opts is not None else next(iter(row.tensors.values())).data_types)
    return dtype_options


def _array_lengths(op: Operator, active: list[Rule]) -> dict[str, str]:
    """Each length member to the array member it counts."""
    length_of = {r.params["length_member"]: r.params["member"] for r in of_kind(active, ArrayLength)}
    for m in op.members:  # size_member without an active array_length rule still sizes the array
        if m.size_member and m.size_member not in length_of:
            length_of[m.size_member] = m.name
    return length_of


def _parameter_minimums(active: list[Rule]) -> dict[tuple[str, str], float]:
    return {
        (r.params["activation"], r.params["parameter"]): float(r.params["min"])
        for r in of_kind(active, ActivationParameterMin)
    }


def _one_of(active: list[Rule]) -> dict[str, tuple[float, ...]]:
    return {r.params["member"]: tuple(r.params["values"]) for r in of_kind(active, AttributeOneOf)}


def _ranges(active: list[Rule]) -> dict[str, tuple[float | None, float | None]]:
    return {
        r.params["member"]: (r.params.get("min"), r.params.get("max"))
        for r in of_kind(active, AttributeRange)
    }


def operators_and_levels(spec: Spec) -> list[tuple[str, str]]:
    """Every (operator, level) pair of the spec, levels from 1_0 up (below introduction too:
    illegal descs there break ``available``)."""
    return [(op, lv.name) for op in sorted(spec.operators) for lv in spec.levels]
