"""Legal and illegal operator descs, derived from the spec and its rule vocabulary alone.

Nothing here names an operator, a member or an activation: every constraint a generated desc
satisfies comes from the rules active at the level (``validate.active_rules``) and the support
row, read through the rule *kinds*. A new operator YAML therefore gets generators for free; a new
rule *kind* needs one entry in :data:`BREAKERS` (a test checks that every kind has one).

How a legal desc is built (constructively, never generate-and-filter):

1. A :class:`Model` per (spec, operator, level) turns the rules into structure: which tensors are
   required, which presence combinations ``paired_presence`` allows, *size groups* (union of
   ``same_sizes`` groups: they share one shape), *dtype groups* (``same_data_type``), *rank
   components* (size groups tied by ``same_dimension_count`` or a ``broadcastable`` pair: they
   share a rank), and the broadcast tree (a group whose member broadcasts to another group derives
   its shape from that group's: each dimension 1 or equal, ``fixed_dims`` equal).
2. A :class:`Plan` draws every choice (presence, ranks, dtypes, root shapes, broadcast masks,
   attribute values, fused activation) from a :class:`Chooser`.
3. :func:`realize` turns the plan into an OperatorDesc and draws each tensor's layout (packed,
   explicit strides, padded, permuted, zero-stride broadcast for inputs; explicit DimensionCount,
   TotalTensorSizeInBytes, alignment, flags).

An illegal desc is a legal base built with *overrides* (e.g. one rank component forced to an
unsupported rank, one tensor forced to another dtype, some optional member forced present or
absent) followed by a *mutation* of the realized desc; the validator then confirms that exactly the
labelled rule fires (cheap next to building, and it keeps the label honest for odd specs). Whether
a rule can be broken alone at a level is decided statically by each breaker's ``why_not``, which
returns the reason when it cannot (:func:`unbreakable_rules`).

Two drivers share this code through the chooser interface: :class:`RandomChooser` (seeded,
deterministic in any process; ``choice(..., key=...)`` deals from shuffled decks, so every class
of a choice appears within a few descs) and the hypothesis chooser in ``dmlconform.generation.strategies``.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from dmlconform.specification import semantics
from dmlconform.specification.desc import (
    ActivationDesc,
    OperatorDesc,
    TensorDesc,
    minimum_implied_size_in_bytes,
    packed_strides,
)
from dmlconform.specification.model import (
    Activation,
    FeatureLevel,
    Operator,
    Rule,
    Spec,
    SupportRow,
    load_spec,
)
from dmlconform.specification.rules import condition_holds, fixed_dims
from dmlconform.specification.validate import active_rules, validate

T = TypeVar("T")

OMIT: Any = type("Omit", (), {"__repr__": lambda self: "OMIT"})()
"""Plan value for a member that the desc leaves out (the spec's default applies)."""

FLOAT_ATTRIBUTE_CLASSES: tuple[float, ...] = (1e-5, 0.0, 1e-12, 1e-3, 1.0, 100.0)
"""Value classes for FLOAT attributes (Epsilon): zero, tiny, typical, large."""

ACTIVATION_PARAMETER_CLASSES: tuple[float, ...] = (1.0, 0.1, 0.25, 0.5, 1.5, 2.0, 3.0)
"""Activation parameters are drawn positive and non-zero: CELU and SOFTPLUS divide by theirs,
and the spec gives no parameter a lower bound except through ``activation_parameter_min``."""

DEFAULT_MAX_SIZE = 7
DEFAULT_MAX_ELEMENTS = 4096


# --------------------------------------------------------------------------------------------
# Chooser: the one interface both drivers implement


class Chooser(Protocol):
    """Where every random decision comes from. ``key`` names a class of choice (dtype of group 0,
    layout of OutputTensor...); the seeded chooser deals keyed choices round-robin from a shuffled
    deck, hypothesis ignores keys. Options are ordered simplest first, so hypothesis shrinks
    toward packed layouts, no activation and small sizes."""

    def integer(self, lo: int, hi: int) -> int: ...

    def choice(self, options: Sequence[T], key: str | None = None) -> T: ...

    def boolean(self) -> bool: ...

    def permutation(self, items: Sequence[T]) -> list[T]: ...


class RandomChooser:
    """A seeded :class:`random.Random` plus per-key decks (round-robin in shuffled order)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.decks: dict[tuple[str, int], list[int]] = {}

    def integer(self, lo: int, hi: int) -> int:
        return lo + int(self.rng.random() * (hi - lo + 1)) if hi > lo else lo

    def choice(self, options: Sequence[T], key: str | None = None) -> T:
        n = len(options)
        if n == 1:
            return options[0]
        if key is None:
            return options[int(self.rng.random() * n)]
        deck = self.decks.get((key, n))
        if not deck:
            deck = list(range(n))
            self.rng.shuffle(deck)
            self.decks[(key, n)] = deck
        return options[deck.pop()]

    def boolean(self) -> bool:
        return self.rng.random() < 0.5

    def permutation(self, items: Sequence[T]) -> list[T]:
        out = list(items)
        self.rng.shuffle(out)
        return out


def stable_seed(*parts: Any) -> int:
    """A seed that is the same in every process (``hash()`` is salted per process)."""
    return zlib.crc32("|".join(map(str, parts)).encode("utf-8"))


def seeded_chooser(*parts: Any) -> RandomChooser:
    return RandomChooser(random.Random(stable_seed(*parts)))


# --------------------------------------------------------------------------------------------
# Model: the rules of (operator, level) as structure


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


@dataclass(frozen=True)
class Bcast:
    """One active ``broadcastable`` rule, resolved to members and size groups."""

    rule: Rule
    member: str
    to: str
    when: dict[str, Any] = field(default_factory=dict)  # fixed dims hold only under this condition

    def fixed(self, rank: int) -> frozenset[int]:
        return fixed_dims(self.rule.params, rank)

    @property
    def fixes_any(self) -> bool:
        return bool(self.rule.params.get("fixed_dims") or self.rule.params.get("fixed_dims_by_rank"))


@dataclass
class Model:
    """Everything the generators need to know about (operator, level), computed once."""

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

    def rules_of_kind(self, kind: str) -> list[Rule]:
        return [r for r in self.active if r.kind == kind]


_MODELS: dict[tuple[int, str, str], Model] = {}


def model_for(operator: str, level: str | FeatureLevel, spec: Spec | None = None) -> Model:
    spec = spec or load_spec()
    op = spec.operator(operator)
    lv = spec.level(level)
    key = (id(spec), op.name, lv.name)
    m = _MODELS.get(key)
    if m is None:
        m = _MODELS[key] = _build_model(spec, op, lv)
    return m


def _build_model(spec: Spec, op: Operator, lv: FeatureLevel) -> Model:
    active = [r for r, _ in active_rules(spec, op.name, lv)]
    tensors = tuple(m.name for m in op.tensor_members)
    tensor_set = set(tensors)
    required = frozenset(n for r in active if r.kind == "required" for n in r.params["members"])
    optional = [t for t in tensors if t not in required]
    paired = [set(r.params["members"]) for r in active if r.kind == "paired_presence"]
    combos = []
    for mask in range(1 << len(optional)):
        present = frozenset(required & tensor_set) | {
            optional[i] for i in range(len(optional)) if mask >> i & 1
        }
        if all(not (g & present) or g <= present for g in paired):
            combos.append(frozenset(present))
    combos.sort(key=len)

    uf = _UnionFind(tensors)
    for r in active:
        if r.kind == "same_sizes":
            names = [n for n in r.params["members"] if n in tensor_set]
            for n in names[1:]:
                uf.union(names[0], n)
    size_groups = tuple(uf.groups(tensors))
    size_group_of = {t: i for i, g in enumerate(size_groups) for t in g}

    bcasts = tuple(
        Bcast(r, r.params["member"], r.params["to"], dict(r.params.get("fixed_when") or {}))
        for r in active
        if r.kind == "broadcastable"
    )
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
    order: list[int] = []

    def visit(g: int, seen: tuple[int, ...] = ()) -> None:
        if g in order or g in seen:
            return
        if g in parent:
            visit(parent[g], (*seen, g))
        order.append(g)

    for g in range(len(size_groups)):
        visit(g)
    for g in list(parent):  # a cycle (not in any real spec): break it
        if order.index(parent[g]) > order.index(g):
            del parent[g]

    cuf = _UnionFind(range(len(size_groups)))
    for r in active:
        if r.kind == "same_dimension_count":
            gs = [size_group_of[n] for n in r.params["members"] if n in tensor_set]
            for g in gs[1:]:
                cuf.union(gs[0], g)
    for g, p in parent.items():
        cuf.union(g, p)
    comps = tuple(cuf.groups(range(len(size_groups))))
    comp_of = {g: i for i, c in enumerate(comps) for g in c}
    top = lv.max_dimension_count
    comp_ranks: dict[int, tuple[int, ...]] = {}
    for i, c in enumerate(comps):
        allowed = set(range(1, top + 1))
        for g in c:
            for t in size_groups[g]:
                support = op.support_row(spec, lv).tensors.get(t)
                if support:
                    allowed &= set(support.dimension_counts)
        comp_ranks[i] = tuple(sorted(allowed))

    duf = _UnionFind(tensors)
    for r in active:
        if r.kind == "same_data_type":
            names = [n for n in r.params["members"] if n in tensor_set]
            for n in names[1:]:
                duf.union(names[0], n)
    dtype_groups = tuple(duf.groups(tensors))
    dtype_group_of = {t: i for i, g in enumerate(dtype_groups) for t in g}
    row = op.support_row(spec, lv)
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

    axes_of = {r.params["member"]: r.params["of"] for r in active if r.kind == "axes_in_range"}
    axes_unique = frozenset(r.params["member"] for r in active if r.kind == "axes_unique")
    length_of = {r.params["length_member"]: r.params["member"] for r in active if r.kind == "array_length"}
    for m in op.members:  # size_member without an active array_length rule still sizes the array
        if m.size_member and m.size_member not in length_of:
            length_of[m.size_member] = m.name
    activations = tuple(a for a in spec.activations.values() if spec.level(a.since).index <= lv.index)
    param_min = {
        (r.params["activation"], r.params["parameter"]): float(r.params["min"])
        for r in active
        if r.kind == "activation_parameter_min"
    }
    one_of = {r.params["member"]: tuple(r.params["values"]) for r in active if r.kind == "attribute_one_of"}
    ranges = {
        r.params["member"]: (r.params.get("min"), r.params.get("max"))
        for r in active
        if r.kind == "attribute_range"
    }
    return Model(
        one_of=one_of,
        ranges=ranges,
        spec=spec,
        op=op,
        level=lv,
        row=row,
        available=lv.index >= spec.level(op.introduced).index,
        active=active,
        tensors=tensors,
        inputs=frozenset(m.name for m in op.input_members),
        required=required,
        combos=tuple(combos),
        size_groups=size_groups,
        size_group_of=size_group_of,
        parent=parent,
        fixed_of=fixed_of,
        fixed_cond=fixed_cond,
        group_order=tuple(order),
        comps=comps,
        comp_of=comp_of,
        comp_ranks=comp_ranks,
        dtype_groups=dtype_groups,
        dtype_group_of=dtype_group_of,
        dtype_options=dtype_options,
        bcasts=bcasts,
        axes_of=axes_of,
        axes_unique=axes_unique,
        length_of=length_of,
        activation_members=tuple(m.name for m in op.members if m.type == "activation"),
        activations=activations,
        param_min=param_min,
    )


# --------------------------------------------------------------------------------------------
# Plan and realization


@dataclass
class Options:
    """Knobs of the legal generator: ``dtype`` forces a data type where supported; ``max_size``
    and ``max_elements`` bound shapes (defaults keep numeric runs fast)."""

    dtype: str | None = None
    max_size: int = DEFAULT_MAX_SIZE
    max_elements: int = DEFAULT_MAX_ELEMENTS
    layouts: bool = True


@dataclass
class Overrides:
    """What an illegal-desc breaker asks of the legal base."""

    force_present: frozenset[str] = frozenset()
    force_absent: frozenset[str] = frozenset()
    comp_rank: dict[int, int] = field(default_factory=dict)
    group_rank: dict[int, int] = field(default_factory=dict)
    dtype_group: dict[int, str] = field(default_factory=dict)
    dtype_tensor: dict[str, str] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)  # attribute values forced on the base


@dataclass
class Plan:
    present: frozenset[str]
    ranks: dict[int, int]
    dtypes: dict[str, str]
    shapes: dict[int, tuple[int, ...]]
    masks: dict[int, tuple[bool, ...]]
    attrs: dict[str, Any]

    def group_sizes(self, model: Model) -> dict[int, tuple[int, ...]]:
        out: dict[int, tuple[int, ...]] = {}
        for g in model.group_order:
            if g in self.masks:
                base = out[model.parent[g]]
                out[g] = tuple(s if keep else 1 for s, keep in zip(base, self.masks[g], strict=True))
            else:
                out[g] = self.shapes[g]
        return out


def _free_shape(ch: Chooser, rank: int, opts: Options) -> tuple[int, ...]:
    sizes = [ch.integer(1, opts.max_size) for _ in range(rank)]
    while math.prod(sizes) > opts.max_elements:
        i = max(range(rank), key=lambda k: sizes[k])
        sizes[i] = max(1, sizes[i] // 2)
    return tuple(sizes)


def choose_plan(model: Model, ch: Chooser, opts: Options, ov: Overrides | None = None) -> Plan | None:
    """Every choice of a desc; None when the overrides cannot be met."""
    ov = ov or Overrides()
    combos = [c for c in model.combos if ov.force_present <= c and not (ov.force_absent & c)]
    if not combos:
        return None
    present = ch.choice(combos, key="presence")

    ranks: dict[int, int] = {}
    for ci, comp in enumerate(model.comps):
        if ci in ov.comp_rank:
            r = ov.comp_rank[ci]
        else:
            options = model.comp_ranks[ci]
            if not options:
                return None
            r = ch.choice(options, key=f"rank{ci}")
        for g in comp:
            ranks[g] = ov.group_rank.get(g, r)

    dtypes: dict[str, str] = {}
    for gi, group in enumerate(model.dtype_groups):
        if gi in ov.dtype_group:
            d = ov.dtype_group[gi]
        elif opts.dtype is not None and opts.dtype in model.dtype_options[gi]:
            d = opts.dtype
        else:
            d = ch.choice(model.dtype_options[gi], key=f"dtype{gi}")
        for t in group:
            dtypes[t] = ov.dtype_tensor.get(t, d)

    shapes: dict[int, tuple[int, ...]] = {}
    masks: dict[int, tuple[bool, ...]] = {}
    for g in model.group_order:
        p = model.parent.get(g)
        rank = ranks[g]
        if p is not None and ranks[p] == rank:
            fixed = set().union(*(b.fixed(rank) for b in model.fixed_of.get(g, ())))
            mode = ch.choice(("mixed", "equal", "ones"), key=f"mask{g}")
            masks[g] = tuple(
                True if i in fixed else (mode == "equal" or (mode == "mixed" and ch.boolean()))
                for i in range(rank)
            )
        else:
            shapes[g] = _free_shape(ch, rank, opts)

    attrs: dict[str, Any] = {}
    required = model.required
    for m in model.op.members:
        if m.type == "tensor":
            continue
        can_omit = m.name not in required and m.default is not None
        if m.type == "activation":
            attrs[m.name] = _choose_activation(model, ch, m.name)
        elif m.type == "bool":
            attrs[m.name] = OMIT if can_omit and ch.boolean() else ch.choice((False, True), key=m.name)
        elif m.type == "float":
            attrs[m.name] = (
                OMIT
                if can_omit and ch.choice((False, True), key=m.name + ":omit")
                else ch.choice(_legal_draws(model, m.name, m.draw or FLOAT_ATTRIBUTE_CLASSES), key=m.name)
            )
        elif m.type == "uint_array":
            of = model.axes_of.get(m.name)
            rank = ranks[model.size_group_of[of]] if of else 4
            attrs[m.name] = _choose_axes(ch, rank, m.name in model.axes_unique or of is not None, m.name)
        elif m.type == "uint":
            if m.name in model.length_of:
                continue  # filled in below, once the array is known
            attrs[m.name] = OMIT if can_omit and ch.boolean() else _choose_uint(model, ch, m, ranks)
    for length_member, array_member in model.length_of.items():
        member = model.op.member(length_member)
        arr = attrs.get(array_member)
        can_omit = member is not None and member.default is not None and length_member not in required
        if isinstance(arr, tuple):
            attrs[length_member] = OMIT if can_omit and ch.boolean() else len(arr)
        else:
            attrs[length_member] = OMIT
    attrs.update(ov.attrs)
    _apply_conditional_fixed(model, attrs, ranks, masks)
    return Plan(present, ranks, dtypes, shapes, masks, attrs)


def _legal_draws(model: Model, name: str, classes: Sequence[float]) -> tuple[float, ...]:
    """The value classes of a number attribute that its one_of and range rules allow."""
    allowed = model.one_of.get(name)
    low, high = model.ranges.get(name, (None, None))
    out = tuple(
        v
        for v in classes
        if (allowed is None or v in allowed) and (low is None or v >= low) and (high is None or v <= high)
    )
    return out or tuple(allowed or ()) or tuple(classes)


def _choose_uint(model: Model, ch: Chooser, member: Any, ranks: dict[int, int]) -> int:
    """A UINT attribute: a single axis in range of its tensor (axes_in_range on a UINT), one
    of the values an attribute_one_of rule lists, the member's own ``draw`` classes, or a small
    number within its attribute_range."""
    of = model.axes_of.get(member.name)
    if of is not None:
        return ch.integer(0, ranks[model.size_group_of[of]] - 1)
    if member.name in model.one_of:
        return int(ch.choice(model.one_of[member.name], key=member.name))
    if member.draw:
        return int(ch.choice(_legal_draws(model, member.name, member.draw), key=member.name))
    low, high = model.ranges.get(member.name, (None, None))
    low_i = int(math.ceil(low)) if low is not None else 0
    return ch.integer(low_i, int(high) if high is not None else low_i + 4)


def _attr_value(model: Model, attrs: dict[str, Any], name: str) -> Any:
    value = attrs.get(name, OMIT)
    if value is OMIT:
        member = model.op.member(name)
        return member.default if member is not None else None
    return value


def _apply_conditional_fixed(
    model: Model, attrs: dict[str, Any], ranks: dict[int, int], masks: dict[int, tuple[bool, ...]]
) -> None:
    """Broadcast dims that must equal the parent's only under a condition on attributes
    (``fixed_when``): kept equal once the drawn attributes meet it."""
    for g, entries in model.fixed_cond.items():
        if g not in masks:
            continue
        rank = ranks[g]
        for b in entries:
            if condition_holds(b.when, lambda n: _attr_value(model, attrs, n)):
                fixed = b.fixed(rank)
                masks[g] = tuple(keep or i in fixed for i, keep in enumerate(masks[g]))


def _choose_axes(ch: Chooser, rank: int, unique: bool, key: str) -> tuple[int, ...]:
    """A set of axes: every length 1..rank, contiguous or not, sorted or in any order."""
    n = ch.choice(tuple(range(1, rank + 1)), key=f"{key}:len{rank}")
    mode = ch.choice(("contiguous", "any", "shuffled"), key=f"{key}:mode")
    if mode == "contiguous":
        start = ch.integer(0, rank - n)
        axes = list(range(start, start + n))
    else:
        pool = list(range(rank))
        axes = sorted(pool.pop(ch.integer(0, len(pool) - 1)) for _ in range(n))
    if mode == "shuffled":
        axes = ch.permutation(axes)
    return tuple(axes)


def _param_value(model: Model, ch: Chooser, act: str, p: str, key: str) -> float:
    lo = model.param_min.get((act, p))
    values = tuple(v for v in ACTIVATION_PARAMETER_CLASSES if lo is None or v >= lo)
    return ch.choice(values, key=key)


def _activation_params(model: Model, ch: Chooser, act: Activation, omit: str | None = None) -> tuple:
    params = []
    for p in act.parameters:
        if p.name == omit:
            continue
        if p.default is not None and ch.choice((True, False), key=f"{act.name}.{p.name}:omit"):
            continue
        params.append((p.name, _param_value(model, ch, act.name, p.name, f"{act.name}.{p.name}")))
    return tuple(params)


def _choose_activation(model: Model, ch: Chooser, member: str) -> Any:
    options: tuple[Any, ...] = (None, OMIT, *model.activations)
    act = ch.choice(options, key=f"{member}:type")
    if act is None or act is OMIT:
        return act
    return ActivationDesc(act.name, _activation_params(model, ch, act))


def _layout(
    model: Model, ch: Chooser, name: str, dtype: str, sizes: tuple[int, ...], opts: Options
) -> TensorDesc:
    """One tensor desc with a drawn layout; inputs may broadcast with zero strides."""
    is_input = name in model.inputs
    rank = len(sizes)
    if not opts.layouts:
        return TensorDesc(dtype, sizes)
    kinds = (
        ("packed", "explicit", "padded", "permuted", "broadcast")
        if is_input
        else ("packed", "explicit", "padded", "permuted")
    )
    kind = ch.choice(kinds, key=f"layout:{name}")
    strides: tuple[int, ...] | None = None
    if kind == "explicit":
        strides = packed_strides(sizes)
    elif kind in ("padded", "permuted"):
        order = list(range(rank)) if kind == "padded" else ch.permutation(range(rank))
        pad = kind == "padded" or ch.boolean()
        st = [0] * rank
        step = 1
        for d in reversed(order):
            st[d] = step
            step = step * sizes[d] + (ch.integer(0, 3) if pad else 0)
        strides = tuple(st)
    elif kind == "broadcast":
        zero = {i for i in range(rank) if ch.boolean()} or {ch.integer(0, rank - 1)}
        st = [0] * rank
        step = 1
        for d in reversed(range(rank)):
            if d not in zero:
                st[d] = step
                step *= sizes[d]
        strides = tuple(st)
    esize = model.element_size(dtype)
    total_kind = ch.choice(("none", "exact", "slack"), key="total")
    total = None
    if total_kind != "none":
        total = minimum_implied_size_in_bytes(sizes, strides or packed_strides(sizes), esize)
        if total_kind == "slack":
            total += 4 * ch.integer(1, 16)
    flags_options: list[str | None] = [None, "NONE"]
    flags_options += [f.name for f in model.spec.tensor_flags if f.value and (is_input or not f.inputs_only)]
    return TensorDesc(
        dtype,
        sizes,
        strides,
        ch.choice(tuple(flags_options), key=f"flags:{is_input}"),
        ch.choice((None, rank), key="dimcount"),
        total,
        ch.choice((None, 0, 16), key="align"),
    )


def realize(model: Model, plan: Plan, ch: Chooser, opts: Options) -> OperatorDesc:
    sizes = plan.group_sizes(model)
    members: dict[str, Any] = {}
    for m in model.op.members:
        if m.type == "tensor":
            if m.name in plan.present:
                members[m.name] = _layout(
                    model, ch, m.name, plan.dtypes[m.name], sizes[model.size_group_of[m.name]], opts
                )
            elif ch.choice((True, False), key=f"absent:{m.name}"):
                members[m.name] = None
        else:
            value = plan.attrs.get(m.name, OMIT)
            if value is not OMIT:
                members[m.name] = value
    return OperatorDesc(model.op.name, members)


# --------------------------------------------------------------------------------------------
# Legal descs


def build_legal(model: Model, ch: Chooser, opts: Options | None = None) -> OperatorDesc:
    """One desc legal at the model's level (below the operator's introduction: legal but for
    ``available``)."""
    opts = opts or Options()
    plan = choose_plan(model, ch, opts)
    if plan is None:
        raise ValueError(f"{model.op.name} at {model.level.name}: the spec admits no legal desc")
    return realize(model, plan, ch, opts)


def legal_descs(
    operator: str,
    level: str | FeatureLevel,
    seed: int = 0,
    count: int = 100,
    spec: Spec | None = None,
    dtype: str | None = None,
    max_size: int = DEFAULT_MAX_SIZE,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    edge_rate: float = 0.0,
) -> Iterator[OperatorDesc]:
    """``count`` descs legal at ``level``, the same sequence for the same arguments in any
    process. Keyed choices (dtype, rank, activation, presence, layouts...) cycle, so a handful of
    descs already spans the classes. Yields nothing below the operator's introduction level,
    where no desc is legal. ``edge_rate``: the share replaced by an edge of one of their rules
    (``dmlconform.generation.edges``; for descs that are only validated, never computed: an
    edge may carry a NaN Epsilon or 2^32 - 1 elements)."""
    from dmlconform.generation.edges import EdgeDrawer  # edges builds on this module

    model = model_for(operator, level, spec)
    if not model.available:
        return
    opts = Options(dtype=dtype, max_size=max_size, max_elements=max_elements)
    ch = seeded_chooser(model.op.name, model.level.name, seed, "legal")
    edge = EdgeDrawer(model, edge_rate)
    for _ in range(count):
        yield edge(build_legal(model, ch, opts), ch)


# --------------------------------------------------------------------------------------------
# Reduction sizes (short and long reductions)


def reduction_axes(desc: OperatorDesc, spec: Spec | None = None) -> tuple[int, ...]:
    """The input axes the operator reduces over (see dmlconform.specification.semantics)."""
    return semantics.reduction_axes(desc, spec)


def reduction_size(desc: OperatorDesc, spec: Spec | None = None) -> int:
    spec = spec or load_spec()
    inp = desc.members.get(spec.operator(desc.operator).semantics.get("input", ""))
    if not isinstance(inp, TensorDesc):
        return 0
    return math.prod(inp.sizes[a] for a in reduction_axes(desc, spec))


def _build_with_reduction(
    model: Model, ch: Chooser, opts: Options, n: int, attempts: int = 50
) -> OperatorDesc:
    """A legal desc whose reduction covers exactly ``n`` input elements: the input's root shape
    is set to 1 on every reduced axis but one, which gets ``n``, and the plan is re-realized
    (broadcast partners follow their masks). Descs whose reduction moves are drawn again."""
    spec = model.spec
    input_name = model.op.semantics.get("input")
    if input_name not in model.size_group_of:
        raise ValueError(f"{model.op.name}: semantics.input names no tensor member")
    g_in = model.size_group_of[input_name]
    for _ in range(attempts):
        plan = choose_plan(model, ch, opts)
        if plan is None or g_in not in plan.shapes:
            continue
        desc = realize(model, plan, ch, Options(opts.dtype, opts.max_size, opts.max_elements, layouts=False))
        axes = reduction_axes(desc, spec)
        if not axes:
            continue
        base = list(plan.shapes[g_in])
        for a in ch.permutation(axes):
            shape = [
                1 if i in axes else (min(s, 2) if n > opts.max_elements // 8 else s)
                for i, s in enumerate(base)
            ]
            shape[a] = n
            while math.prod(shape) > opts.max_elements:  # few slices: halve the largest kept dim
                i = max((i for i in range(len(shape)) if i not in axes), key=lambda k: shape[k], default=None)
                if i is None or shape[i] == 1:
                    break
                shape[i] = max(1, shape[i] // 2)
            plan.shapes[g_in] = tuple(shape)
            desc = realize(model, plan, ch, opts)
            if reduction_size(desc, spec) == n:
                return desc
    raise RuntimeError(f"{model.op.name} at {model.level.name}: no desc with a reduction of {n} elements")


def reduction_descs(
    operator: str,
    level: str | FeatureLevel,
    n: int,
    seed: int = 0,
    count: int = 10,
    spec: Spec | None = None,
    dtype: str | None = None,
) -> Iterator[OperatorDesc]:
    """Legal descs whose reduction has exactly ``n`` elements (n = 1 or 2 for the short-reduction
    cases: biased vs unbiased variance, zero variance by construction)."""
    model = model_for(operator, level, spec)
    if not model.available:
        return
    opts = Options(dtype=dtype, max_elements=max(DEFAULT_MAX_ELEMENTS, 8 * n))
    ch = seeded_chooser(model.op.name, model.level.name, seed, "reduction", n)
    for _ in range(count):
        yield _build_with_reduction(model, ch, opts, n)


def long_reduction_desc(
    operator: str,
    level: str | FeatureLevel,
    dtype: str | None = None,
    n: int = 100_000,
    seed: int = 0,
    spec: Spec | None = None,
) -> OperatorDesc:
    """A legal desc whose reduction has ``n`` (default 10^5) elements and few reduction slices
    (other dims at most 2), for accumulation-error cases."""
    model = model_for(operator, level, spec)
    if not model.available:
        raise ValueError(f"{model.op.name} is not available at {model.level.name}")
    opts = Options(dtype=dtype, max_elements=8 * n)
    ch = seeded_chooser(model.op.name, model.level.name, seed, "long", n)
    return _build_with_reduction(model, ch, opts, n)


# --------------------------------------------------------------------------------------------
# Illegal descs: one breaker per rule kind


@dataclass(frozen=True)
class Breaker:
    """How to break one rule kind alone. ``why_not`` returns the reason the rule cannot be
    broken alone at the model's level (None: it can); ``plan`` gives the legal base's overrides
    (None: retry); ``mutate`` turns the realized base into the illegal desc (None: retry)."""

    why_not: Callable[[Model, Rule], str | None]
    plan: Callable[[Model, Rule, Chooser], Overrides | None]
    mutate: Callable[[Model, Rule, OperatorDesc, Chooser], OperatorDesc | None]


def _no_overrides(model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
    return Overrides()


def _identity(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    return desc


def _always(model: Model, rule: Rule) -> str | None:
    return None


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
        if d.size > 0
        and d.name not in ok
        and (d.since is None or model.spec.level(d.since).index <= model.level.index)
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
    other_rules = {
        n for r in model.rules_of_kind("same_sizes") if r.id != rule.id for n in r.params["members"]
    }
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


# array_length / axes --------------------------------------------------------------------------


def _array_length_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    arr = desc.members.get(rule.params["member"])
    if not isinstance(arr, tuple):
        return None
    n = len(arr)
    wrong = [n + 1, n + 2] + ([0] if n > 0 else []) + ([n - 1] if n > 1 else [])
    return desc.replace(**{rule.params["length_member"]: ch.choice(wrong)})


def _axes_range_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    axes, t = desc.members.get(rule.params["member"]), desc.members.get(rule.params["of"])
    if isinstance(axes, int) and not isinstance(axes, bool) and isinstance(t, TensorDesc):
        return desc.replace(**{rule.params["member"]: t.rank + ch.integer(0, 3)})
    if not isinstance(axes, tuple) or not axes or not isinstance(t, TensorDesc):
        return None
    out = list(axes)
    out[ch.integer(0, len(out) - 1)] = t.rank + ch.integer(0, 3)
    return desc.replace(**{rule.params["member"]: tuple(out)})


def _axes_unique_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    name = rule.params["member"]
    axes = desc.members.get(name)
    if not isinstance(axes, tuple) or not axes:
        return None
    out = list(axes)
    if len(out) >= 2 and ch.boolean():
        i, j = ch.permutation(range(len(out)))[:2]
        out[i] = out[j]
        return desc.replace(**{name: tuple(out)})
    out.insert(ch.integer(0, len(out)), ch.choice(axes))
    changes: dict[str, Any] = {name: tuple(out)}
    for length_member, array_member in model.length_of.items():
        if array_member == name and length_member in desc.members:
            changes[length_member] = len(out)
    return desc.replace(**changes)


# scalar attribute kinds ----------------------------------------------------------------------


def _range_outside(model: Model, rule: Rule) -> list[float]:
    """Values just outside an attribute_range that the member's C type can hold."""
    member = model.op.member(rule.params["member"])
    low, high = rule.params.get("min"), rule.params.get("max")
    uint = member is not None and member.type == "uint"
    out: list[float] = []
    if low is not None:
        below = (math.ceil(low) - 1) if uint else low - 1.0
        if not uint or below >= 0:
            out.append(below)
    if high is not None:
        out.append((math.floor(high) + 1) if uint else high + 1.0)
    return out


def _range_why(model: Model, rule: Rule) -> str | None:
    if _range_outside(model, rule):
        return None
    return f"{rule.params['member']} is a UINT: no value lies below {rule.params.get('min')}"


def _range_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    options = _range_outside(model, rule)
    return desc.replace(**{rule.params["member"]: ch.choice(options)}) if options else None


def _one_of_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
    allowed = [int(v) for v in rule.params["values"]]
    options = [v for v in (0, max(allowed) + 1, max(allowed) + 2) if v not in allowed]
    return desc.replace(**{rule.params["member"]: ch.choice(options)})


# tensor-desc kinds ----------------------------------------------------------------------------


def _tensor_mutator(
    fn: Callable[[Model, Rule, str, TensorDesc, Chooser], TensorDesc | None],
    which: Callable[[Model, str], bool] = lambda model, name: True,
) -> Callable[[Model, Rule, OperatorDesc, Chooser], OperatorDesc | None]:
    def mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        names = [n for n, t in desc.members.items() if isinstance(t, TensorDesc) and which(model, n)]
        if not names:
            return None
        name = ch.choice(names, key=f"break:{rule.kind}:tensor")
        new = fn(model, rule, name, desc.members[name], ch)
        return None if new is None else desc.replace(**{name: new})

    return mutate


def _t_dim_range(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    top = model.level.max_dimension_count
    rank = ch.choice((0, top + 1))
    sizes = tuple(ch.integer(1, 2) for _ in range(rank))
    return TensorDesc(
        t.data_type, sizes, None, t.flags, ch.choice((None, rank)), None, t.guaranteed_base_offset_alignment
    )


def _t_sizes_count(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    top, n = model.level.max_dimension_count, len(t.sizes)
    wrong = [r for r in (n - 1, n + 1, n + 2) if 1 <= r <= top]
    return t.replace(dimension_count=ch.choice(wrong), total_tensor_size_in_bytes=None)


def _t_sizes_positive(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    sizes = list(t.sizes)
    sizes[ch.integer(0, len(sizes) - 1)] = 0
    return t.replace(sizes=tuple(sizes))


def _t_strides_count(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    st = list(t.effective_strides)
    st = st[:-1] if st and ch.boolean() else [*st, ch.integer(0, 8)]
    return t.replace(strides=tuple(st))


def _t_element_count(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    need = int(rule.params["max"]) + 1
    rank = len(t.sizes)
    if rank == 1:
        sizes = (need + ch.integer(0, 7),)
    else:
        a = 1 << 16
        sizes = (a, -(-need // a) + ch.integer(0, 3)) + (1,) * (rank - 2)
        sizes = tuple(ch.permutation(sizes))
    return t.replace(sizes=sizes, strides=None, total_tensor_size_in_bytes=None)


def _t_total_size(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    need = minimum_implied_size_in_bytes(t.sizes, t.effective_strides, model.element_size(t.data_type))
    return t.replace(
        total_tensor_size_in_bytes=ch.choice((0, need - 1, max(0, need - 4), ch.integer(0, need - 1)))
    )


def _t_total_size_max(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    """A TotalTensorSizeInBytes one byte to a few elements past ``max`` elements' worth (the
    layout itself stays small)."""
    size = model.element_size(t.data_type)
    top = int(int(rule.params["max"]) * size)
    return t.replace(total_tensor_size_in_bytes=ch.choice((top + 1, top + size, top + 4 * size, 1 << 40)))


def _t_alignment(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    least = max(int(rule.params["minimum"]), model.element_size(t.data_type))
    bad = [3, 6, 12, 24, 100] + [p for p in (1, 2, 4, 8, 16, 32) if p < least]
    return t.replace(guaranteed_base_offset_alignment=ch.choice(bad))


def _inputs_only_flags(model: Model) -> list[str]:
    return [f.name for f in model.spec.tensor_flags if f.inputs_only]


def _t_flags(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    return t.replace(flags=ch.choice(_inputs_only_flags(model)))


def _outputs_why(model: Model, rule: Rule) -> str | None:
    return None if model.op.output_members else "the operator has no output tensor"


def _flags_why(model: Model, rule: Rule) -> str | None:
    if not _inputs_only_flags(model):
        return "no tensor flag is restricted to inputs"
    if not model.op.output_members:
        return "the operator has no output tensor"
    return None


def _t_short_span(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    """An output packed but for its outermost dimension of size above 1, which steps one to a
    few slots short of the rest: it spans fewer slots than it has elements while its strides stay
    non-zero and distinct (tensor-output-distinct-strides holds). Its TotalTensorSizeInBytes, if
    stated, still covers it (the span only shrinks)."""
    big = [d for d, n in enumerate(t.sizes) if n > 1]
    if not big:
        return None
    st = list(packed_strides(t.sizes))
    d = big[0]
    taken = {st[k] for k in big if k != d}
    shorter = [s for s in range(max(st[d] - 3, 1), st[d]) if s not in taken]
    if not shorter:
        return None
    st[d] = ch.choice(shorter, key="short:stride")
    return t.replace(strides=tuple(st))


def _t_repeated_stride(model: Model, rule: Rule, name: str, t: TensorDesc, ch: Chooser) -> TensorDesc | None:
    """An output whose innermost dimension of size above 1 takes the stride of the outermost one
    (repeated) or 0 while the outermost grows to keep the span: it holds every element, so only
    the distinct-strides rule is broken."""
    big = [d for d, n in enumerate(t.sizes) if n > 1]
    if len(big) < 2:
        return None
    st = list(packed_strides(t.sizes))
    outer, inner = big[0], big[-1]
    if ch.boolean():
        st[inner] = st[outer]  # the span only grows
    else:
        st[outer] += -(-(t.sizes[inner] - 1) * st[inner] // (t.sizes[outer] - 1))
        st[inner] = 0
    return t.replace(strides=tuple(st), total_tensor_size_in_bytes=None)


# activation kinds -----------------------------------------------------------------------------


def _activation_plan(model: Model, rule: Rule, ch: Chooser) -> Overrides | None:
    return Overrides()


def _set_activation(fn: Callable[[Model, Rule, OperatorDesc, Chooser], ActivationDesc | None]):
    def mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> OperatorDesc | None:
        if not model.activation_members:
            return None
        act = fn(model, rule, desc, ch)
        if act is None:
            return None
        return desc.replace(**{ch.choice(model.activation_members): act})

    return mutate


def _has_activation(model: Model, rule: Rule) -> str | None:
    return None if model.activation_members else "the operator has no fused activation"


def _non_fusable_names(model: Model) -> list[str]:
    """Operator names that are not fusable activations: the ELEMENT_WISE twins of the fusable
    ones (ELEMENT_WISE_IDENTITY exists in DirectML; none of them may be fused)."""
    names = [
        "ELEMENT_WISE_" + a.name.removeprefix("ACTIVATION_")
        for a in model.spec.activations.values()
        if not a.parameters
    ]
    return [n for n in names if n not in model.spec.activations]


def _fusable_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> ActivationDesc | None:
    return ActivationDesc(ch.choice(_non_fusable_names(model), key=f"break:{rule.id}"))


def _later_activations(model: Model) -> list[Activation]:
    return [a for a in model.spec.activations.values() if model.spec.level(a.since).index > model.level.index]


def _available_act_why(model: Model, rule: Rule) -> str | None:
    if not model.activation_members:
        return "the operator has no fused activation"
    if _later_activations(model):
        return None
    return f"every fusable activation is available at {model.level.name}"


def _available_act_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> ActivationDesc | None:
    act = ch.choice(_later_activations(model), key=f"break:{rule.id}")
    return ActivationDesc(act.name, _activation_params(model, ch, act))


def _tensors_null_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> ActivationDesc | None:
    if not model.activations:
        return None
    act = ch.choice(model.activations)
    tensors = list(desc.tensors().values())
    t = ch.choice(tensors).replace(flags=None) if tensors else TensorDesc("FLOAT32", (1,))
    which = ch.choice(("input", "output", "both"), key=f"break:{rule.id}")
    return ActivationDesc(
        act.name,
        _activation_params(model, ch, act),
        t if which != "output" else None,
        t if which != "input" else None,
    )


def _param_required_acts(model: Model) -> list[Activation]:
    return [a for a in model.activations if any(p.default is None for p in a.parameters)]


def _param_required_why(model: Model, rule: Rule) -> str | None:
    if not model.activation_members:
        return "the operator has no fused activation"
    return None if _param_required_acts(model) else "every available activation parameter has a default"


def _param_required_mutate(
    model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser
) -> ActivationDesc | None:
    act = ch.choice(_param_required_acts(model), key=f"break:{rule.id}")
    omit = ch.choice([p.name for p in act.parameters if p.default is None])
    return ActivationDesc(act.name, _activation_params(model, ch, act, omit=omit))


def _param_min_why(model: Model, rule: Rule) -> str | None:
    if not model.activation_members:
        return "the operator has no fused activation"
    if not any(a.name == rule.params["activation"] for a in model.activations):
        return f"{rule.params['activation']} is not available at {model.level.name}"
    return None


def _param_min_mutate(model: Model, rule: Rule, desc: OperatorDesc, ch: Chooser) -> ActivationDesc | None:
    act = model.spec.activations[rule.params["activation"]]
    lo = float(rule.params["min"])
    p = rule.params["parameter"]
    bad = [v for v in (lo - 0.5, lo / 2, 0.0, -1.0, lo - 1e-3) if v < lo]
    params = [(k, v) for k, v in _activation_params(model, ch, act) if k != p]
    params.append((p, ch.choice(bad, key=f"break:{rule.id}")))
    order = {q.name: i for i, q in enumerate(act.parameters)}
    return ActivationDesc(act.name, tuple(sorted(params, key=lambda kv: order.get(kv[0], 99))))


BREAKERS: dict[str, Breaker] = {
    "available": Breaker(_available_why, _no_overrides, _identity),
    "required": Breaker(_required_why, _no_overrides, _required_mutate),
    "support_dimension_count": Breaker(_support_dims_why, _support_dims_plan, _identity),
    "support_data_type": Breaker(_support_dtype_why, _support_dtype_plan, _identity),
    "same_data_type": Breaker(_same_dtype_why, _same_dtype_plan, _identity),
    "same_dimension_count": Breaker(_same_rank_why, _same_rank_plan, _identity),
    "same_sizes": Breaker(_same_sizes_why, _same_sizes_plan, _same_sizes_mutate),
    "broadcastable": Breaker(_bcast_why, _bcast_plan, _bcast_mutate),
    "paired_presence": Breaker(_paired_why, _paired_plan, _paired_mutate),
    "array_length": Breaker(_always, _no_overrides, _array_length_mutate),
    "axes_in_range": Breaker(_always, _no_overrides, _axes_range_mutate),
    "axes_unique": Breaker(_always, _no_overrides, _axes_unique_mutate),
    "attribute_range": Breaker(_range_why, _no_overrides, _range_mutate),
    "attribute_one_of": Breaker(_always, _no_overrides, _one_of_mutate),
    "tensor_dimension_count_range": Breaker(_always, _no_overrides, _tensor_mutator(_t_dim_range)),
    "tensor_sizes_count": Breaker(_always, _no_overrides, _tensor_mutator(_t_sizes_count)),
    "tensor_sizes_positive": Breaker(_always, _no_overrides, _tensor_mutator(_t_sizes_positive)),
    "tensor_strides_count": Breaker(_always, _no_overrides, _tensor_mutator(_t_strides_count)),
    "tensor_element_count_max": Breaker(_always, _no_overrides, _tensor_mutator(_t_element_count)),
    "tensor_total_size": Breaker(_always, _no_overrides, _tensor_mutator(_t_total_size)),
    "tensor_total_size_max": Breaker(_always, _no_overrides, _tensor_mutator(_t_total_size_max)),
    "tensor_alignment": Breaker(_always, _no_overrides, _tensor_mutator(_t_alignment)),
    "tensor_flags": Breaker(
        _flags_why, _no_overrides, _tensor_mutator(_t_flags, lambda model, n: n not in model.inputs)
    ),
    "tensor_output_span": Breaker(
        _outputs_why, _no_overrides, _tensor_mutator(_t_short_span, lambda model, n: n not in model.inputs)
    ),
    "tensor_output_distinct_strides": Breaker(
        _outputs_why,
        _no_overrides,
        _tensor_mutator(_t_repeated_stride, lambda model, n: n not in model.inputs),
    ),
    "activation_fusable": Breaker(_has_activation, _activation_plan, _set_activation(_fusable_mutate)),
    "activation_available": Breaker(
        _available_act_why, _activation_plan, _set_activation(_available_act_mutate)
    ),
    "activation_tensors_null": Breaker(
        _has_activation, _activation_plan, _set_activation(_tensors_null_mutate)
    ),
    "activation_parameter_required": Breaker(
        _param_required_why, _activation_plan, _set_activation(_param_required_mutate)
    ),
    "activation_parameter_min": Breaker(_param_min_why, _activation_plan, _set_activation(_param_min_mutate)),
}


def why_unbreakable(model: Model, rule: Rule) -> str | None:
    """Why ``rule`` cannot be broken alone at the model's level; None when it can."""
    if not model.available and rule.kind != "available":
        return (
            f"{model.op.name} is not available at {model.level.name} (introduced in "
            f"{model.op.introduced}): every desc also breaks 'available'"
        )
    breaker = BREAKERS.get(rule.kind)
    if breaker is None:
        return f"no breaker for rule kind {rule.kind!r}"
    return breaker.why_not(model, rule)


def breakable_rules(operator: str, level: str | FeatureLevel, spec: Spec | None = None) -> list[str]:
    """Ids of the rules active at ``level`` that an illegal desc can break alone, in checking order."""
    model = model_for(operator, level, spec)
    return [r.id for r in model.active if why_unbreakable(model, r) is None]


def unbreakable_rules(operator: str, level: str | FeatureLevel, spec: Spec | None = None) -> dict[str, str]:
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
    breaker = BREAKERS[rule.kind]
    for _ in range(attempts):
        ov = breaker.plan(model, rule, ch)
        if ov is None:
            continue
        plan = choose_plan(model, ch, opts, ov)
        if plan is None:
            continue
        desc = breaker.mutate(model, rule, realize(model, plan, ch, opts), ch)
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
    spec: Spec | None = None,
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


def operators_and_levels(spec: Spec | None = None) -> list[tuple[str, str]]:
    """Every (operator, level) pair of the spec, levels from 1_0 up (below introduction too:
    illegal descs there break ``available``)."""
    spec = spec or load_spec()
    return [(op, lv.name) for op in sorted(spec.operators) for lv in spec.levels]
