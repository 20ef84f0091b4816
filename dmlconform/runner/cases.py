"""Deterministic case collection: (operator, level, data type, kind) groups of seeded cases.

Every pytest-xdist worker collects the suite independently and the controller insists that all of
them collect the same items in the same order, so everything here is a pure function of the run
settings (operators, levels, data types, cases per group, seed) and the spec: no clocks, no
set iteration, no global random state. Inputs are not generated here but when a case runs, from
a seed derived from the case id (``Case.input_seed``), which keeps collection cheap and lets a
case be re-created from its id alone.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields, replace
from typing import Any

from dmlconform.generation import data
from dmlconform.generation.edges import EDGE_RATE
from dmlconform.generation.illegal import breakable_rules, illegal_descs
from dmlconform.generation.legal import legal_descs
from dmlconform.runner import tiers
from dmlconform.runner.defaults import DEFAULT_CASES
from dmlconform.specification.desc import OperatorDesc, TensorDesc, parse_desc
from dmlconform.specification.spec import FeatureLevel, Operator, Relation, Spec
from dmlconform.tolerance import degenerate

KINDS = ("numeric", "validation", "metamorphic")


@dataclass(frozen=True)
class Case:
    """One conformance case; ``id`` is the pytest item name and stays stable across runs."""

    kind: str
    operator: str
    level: FeatureLevel
    data_type: str | None
    index: int
    desc: OperatorDesc
    seed: int = 0
    regime: str | None = None
    expected: str | None = None  # validation: legal | illegal
    rule: str | None = None  # validation of an illegal desc: the rule it breaks
    relation: Relation | None = None
    size: str | None = None  # a tier's size case: its label (n65537, n1048576x3)

    @property
    def id(self) -> str:
        n = f"{self.index:04d}" if self.size is None else f"{self.size}-{self.index:04d}"
        if self.kind == "validation":
            what = f"illegal-{self.rule}" if self.expected == "illegal" else "legal"
            return f"validation[{self.operator}-{self.level.name}-{what}-{n}]"
        if self.kind == "metamorphic":
            rel = self.relation.id if self.relation else "relation"
            return f"metamorphic[{self.operator}-{self.level.name}-{self.data_type}-{rel}-{n}]"
        return f"{self.kind}[{self.operator}-{self.level.name}-{self.data_type}-{n}]"

    @property
    def input_seed(self) -> int:
        """Seed of the case's input data: the run seed mixed with the id, so that inserting a case
        elsewhere never changes this one's data."""
        return (zlib.crc32(self.id.encode()) ^ (self.seed * 0x9E3779B1)) & 0x7FFFFFFF

    def to_dict(self) -> dict[str, Any]:
        """The case as JSON (case.json, a DxDispatch bundle's manifest): the level by its name."""
        return {
            "kind": self.kind,
            "operator": self.operator,
            "feature_level": self.level.name,
            "data_type": self.data_type,
            "index": self.index,
            "seed": self.seed,
            "regime": self.regime,
            "expected": self.expected,
            "rule": self.rule,
            "relation": self.relation.to_dict() if self.relation else None,
            "size": self.size,
            "desc": self.desc.to_dict(),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any], spec: Spec) -> Case:
        """The case :meth:`to_dict` wrote, its level resolved in ``spec`` (UnknownLevel, a
        ValueError, for a level this spec does not know)."""
        return cls(
            kind=raw["kind"],
            operator=raw["operator"],
            level=spec.level(raw["feature_level"]),
            data_type=raw.get("data_type"),
            index=int(raw.get("index") or 0),
            desc=parse_desc(raw["desc"], spec),
            seed=int(raw.get("seed") or 0),
            regime=raw.get("regime"),
            expected=raw.get("expected"),
            rule=raw.get("rule"),
            relation=Relation.from_dict(raw["relation"]) if raw.get("relation") else None,
            size=raw.get("size"),
        )


@dataclass(frozen=True)
class Selection:
    """What a run covers: the knobs of ``--dml-*`` that shape collection."""

    level: FeatureLevel
    operators: tuple[str, ...] = ()  # empty: every operator available at ``level``
    data_types: tuple[str, ...] = ()  # empty: every data type of the support tables
    cases: int = DEFAULT_CASES  # one default for run, the plugin and dxdispatch export
    seed: int = 0
    kinds: tuple[str, ...] = KINDS
    validation: bool = True  # the backend implements ``check``
    tier: str = "default"  # smoke | default | stress (dmlconform.runner.tiers)
    max_elements: int | None = None  # cap on a size case's input elements; None: the tier's default

    def to_dict(self) -> dict[str, Any]:
        """The selection as results.json and a DxDispatch manifest record it: the level by its
        name (``report merge`` compares these records to refuse shards of different runs)."""
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "level": self.level.name}


@dataclass(frozen=True)
class Shard:
    """Part ``index`` (1-based) of ``count`` equal parts of a run: ``--shard K/N``.

    Not part of :class:`Selection`, which says what a run covers: every shard of a run has the
    same selection, and ``report merge`` compares selections to refuse shards of different runs."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"K/N"`` with 1 <= K <= N; ValueError with one line otherwise."""
        k, sep, n = str(text).strip().partition("/")
        try:
            index, count = int(k), int(n)
        except ValueError:
            index = count = 0
        if not sep or count < 1 or not 1 <= index <= count:
            raise ValueError(f"--shard expects K/N with 1 <= K <= N (e.g. 2/4), got {text!r}")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def in_shard(cases: Iterable[Case], shard: Shard | None) -> Iterator[Case]:
    """The cases of one shard: positions K-1, K-1+N, K-1+2N, ... of the full collection.

    Round-robin over the collection order, which is a pure function of the settings, so every
    machine and every pytest-xdist worker picks the same cases, and the N shards partition the
    run exactly. Balanced by count, not by an expected cost: a case costs about the same whatever
    its desc (on the default run, the per-case time is 1-3 ms of harness and backend-call
    overhead and does not follow the tensor size, which is at most a few thousand elements),
    so equal counts are equal work; the cost that does differ is each shard's fixed start-up
    (imports, the reference's first compile), the same for every shard. Dealing the cases
    round-robin also spreads every operator x level x data type group over all shards, and the
    sizes of shards differ by at most one case."""
    if shard is None or shard.count == 1:
        yield from cases
        return
    for position, case in enumerate(cases):
        if position % shard.count == shard.index - 1:
            yield case


def input_data_type(op: Operator, desc: OperatorDesc) -> str | None:
    """The data type of a desc: that of its first input tensor (the support tables tie the rest)."""
    for m in op.input_members:
        t = desc.members.get(m.name)
        if isinstance(t, TensorDesc):
            return t.data_type
    return None


def tested_data_type(spec: Spec, op: Operator, level: FeatureLevel, desc: OperatorDesc) -> str | None:
    """The data type a validation case belongs to: a type the support row refuses for the tensor
    that has it (the case tests that the type is rejected: it says nothing of support for it),
    else the first input's."""
    row = op.support_row(spec, level)
    for m in op.tensor_members:
        t, support = desc.members.get(m.name), row.tensors.get(m.name)
        if isinstance(t, TensorDesc) and support is not None and t.data_type not in support.data_types:
            return t.data_type
    return input_data_type(op, desc)


def supported_data_types(spec: Spec, ops: Iterable[Operator], top: FeatureLevel) -> list[str]:
    """Every data type some operator's support table admits at a level up to ``top``."""
    out: list[str] = []
    for op in ops:
        for level in _levels(spec, op, top):
            out += [t for t in operator_data_types(spec, op, level) if t not in out]
    return out


def operator_data_types(spec: Spec, op: Operator, level: FeatureLevel) -> tuple[str, ...]:
    """Data types the support table admits for the operator's first input at ``level``."""
    row = op.support_row(spec, level)
    first = op.input_members[0].name
    support = row.tensors.get(first)
    return tuple(support.data_types) if support else ()


def selected_operators(spec: Spec, sel: Selection) -> list[Operator]:
    names = sel.operators or tuple(sorted(spec.operators))
    ops = [spec.operator(n) for n in names]
    return [op for op in ops if spec.level(op.introduced) <= sel.level]


def _levels(spec: Spec, op: Operator, top: FeatureLevel) -> list[FeatureLevel]:
    return [lv for lv in spec.levels_from(op) if lv <= top]


def _take(it: Iterable[Any], n: int) -> list[Any]:
    out = []
    for x in it:
        out.append(x)
        if len(out) >= n:
            break
    return out


def legal_for(
    spec: Spec,
    op: Operator,
    level: FeatureLevel,
    data_type: str,
    count: int,
    seed: int,
    edge_rate: float = 0.0,
) -> list[OperatorDesc]:
    """``count`` legal descs of one data type (the generator forces the type where supported);
    ``edge_rate`` of them at the edge of a rule (validation cases only: never computed)."""
    descs = list(
        legal_descs(op.name, level, seed=seed, count=count, spec=spec, dtype=data_type, edge_rate=edge_rate)
    )
    return [d for d in descs if input_data_type(op, d) == data_type]


def illegal_for(
    spec: Spec, op: Operator, level: FeatureLevel, count: int, seed: int
) -> list[tuple[OperatorDesc, str]]:
    return _take(illegal_descs(op.name, level, seed=seed, count=count, spec=spec), count)


def breakable_rule_count(spec: Spec, op: Operator, level: FeatureLevel) -> int:
    return len(breakable_rules(op.name, level, spec))


def regimes(desc: OperatorDesc, spec: Spec) -> list[str]:
    return list(data.regimes_for(desc, spec)) or ["default"]


def collect(spec: Spec, sel: Selection) -> Iterator[Case]:
    """Every case of the run, in a fixed order: operator, kind, level, data type, index; the
    tier's size cases (``runner.tiers``) follow each operator's seeded numeric cases."""
    tier = tiers.tier(sel.tier)
    full = sel  # validation cases are cheap: every tier keeps them all (same ids, same descs)
    if tier.seeded_cases is not None and sel.cases > tier.seeded_cases:
        sel = replace(sel, cases=tier.seeded_cases)  # the first N of a group are the same descs
    for op in selected_operators(spec, sel):
        levels = _levels(spec, op, sel.level) if tier.all_levels else [sel.level]
        if "numeric" in sel.kinds:
            for level in levels:
                for dt in _data_types(spec, op, level, sel):
                    yield from _numeric(spec, op, level, dt, sel)
            for dt in _data_types(spec, op, sel.level, sel):
                for sc in tiers.size_cases(
                    spec, op.name, sel.level, dt, sel.tier, sel.max_elements, sel.seed
                ):
                    yield Case(
                        "numeric",
                        op.name,
                        sel.level,
                        dt,
                        sc.index,
                        sc.desc,
                        sel.seed,
                        sc.regime,
                        size=sc.label,
                    )
        if "validation" in sel.kinds and sel.validation:
            yield from _validation(spec, op, [sel.level], full)
        if "metamorphic" in sel.kinds:
            yield from _metamorphic(spec, op, sel)


SPARE_DESCS = 8
"""Spare descs tried at most for a case whose desc would judge nothing whatever its inputs."""


def _numeric(spec: Spec, op: Operator, level: FeatureLevel, dt: str, sel: Selection) -> Iterator[Case]:
    """The seeded numeric cases of one group. A desc whose case would judge nothing whatever its
    inputs (every output 0 or undefined, or the input itself: ``dmlconform.tolerance.degenerate``) is
    replaced, under the same id, by the first that judges something of the generator's spare
    descs for that id (:func:`_spares`); the other cases keep their ids, descs and data."""
    for i, desc in enumerate(legal_for(spec, op, level, dt, sel.cases, sel.seed)):
        case = _numeric_case(spec, op, level, dt, i, desc, sel.seed)
        if _judges_nothing(case, spec):
            spare = next(
                (c for c in _spares(spec, op, level, dt, i, sel.seed) if not _judges_nothing(c, spec)), None
            )
            case = spare or case  # none: the case runs and is skipped with its reason
        yield case


def _spares(spec: Spec, op: Operator, level: FeatureLevel, dt: str, index: int, seed: int) -> Iterator[Case]:
    """Stand-ins for case ``index`` of a group: legal descs from a stream of the generator keyed
    by the run seed and the index, so that they do not depend on ``--cases`` (a smoke case is
    the default case of the same id) nor on the other cases."""
    key = zlib.crc32(f"spare {seed} {index}".encode()) & 0x7FFFFFFF
    for desc in legal_for(spec, op, level, dt, SPARE_DESCS, key):
        yield _numeric_case(spec, op, level, dt, index, desc, seed)


def _numeric_case(
    spec: Spec, op: Operator, level: FeatureLevel, dt: str, i: int, desc: OperatorDesc, seed: int
) -> Case:
    regs = regimes(desc, spec)
    regime = regs[i % len(regs)]
    return Case("numeric", op.name, level, dt, i, data.regime_desc(desc, regime, spec), seed, regime=regime)


def _judges_nothing(case: Case, spec: Spec) -> bool:
    """Whether no input makes the case judge anything; inputs are drawn only for the few descs
    where that can happen (``degenerate.may_judge_nothing``), so collection stays cheap."""
    if not degenerate.may_judge_nothing(case.desc, spec):
        return False
    try:
        degenerate.judged_inputs(case.desc, case.regime or "default", case.input_seed, spec, probe=True)
    except degenerate.JudgesNothing:
        return True
    except degenerate.RegimeNotApplicable:
        return False
    return False


def _data_types(spec: Spec, op: Operator, level: FeatureLevel, sel: Selection) -> list[str]:
    types = operator_data_types(spec, op, level)
    return [t for t in types if not sel.data_types or t in sel.data_types]


def _validation(spec: Spec, op: Operator, levels: list[FeatureLevel], sel: Selection) -> Iterator[Case]:
    """Legal descs must be accepted, and one illegal desc per active rule (at least) rejected.
    ``--dtypes`` filters both: an illegal desc belongs to the type it tests (``tested_data_type``).

    Only at the selected level: ``check(desc)`` takes no level, a backend judges a desc at the
    one level it implements (the plugin loads it at the selected level when it can), so a desc
    illegal at 4_1 but legal at 6_4 says nothing about a 6_4 backend.

    The illegal generator cycles through the rules it can break; asking for as many descs as
    there are breakable rules covers each at least once per level."""
    for level in levels:
        legal: list[OperatorDesc] = []
        for dt in operator_data_types(spec, op, level):  # all of them: the ids of a full run
            legal += legal_for(spec, op, level, dt, max(1, sel.cases // 2), sel.seed, EDGE_RATE)
        for i, desc in enumerate(legal):
            data_type = input_data_type(op, desc)
            if sel.data_types and data_type not in sel.data_types:
                continue
            yield Case("validation", op.name, level, data_type, i, desc, sel.seed, expected="legal")
        count = max(sel.cases, breakable_rule_count(spec, op, level))
        for i, (desc, rule) in enumerate(illegal_for(spec, op, level, count, sel.seed)):
            data_type = tested_data_type(spec, op, level, desc)
            if sel.data_types and data_type not in sel.data_types:
                continue  # --dtypes selects every kind; the index keeps the id of the full run's case
            yield Case(
                "validation",
                op.name,
                level,
                data_type,
                i,
                desc,
                sel.seed,
                expected="illegal",
                rule=rule,
            )


def literal(value: Any) -> Any:
    """A spec YAML value as a desc member holds it (arrays are tuples)."""
    return tuple(value) if isinstance(value, list) else value


def apply_when(desc: OperatorDesc, rel: Relation) -> OperatorDesc:
    """The desc a relation starts from: ``desc`` with the relation's ``when`` members forced."""
    return desc.replace(**{k: literal(v) for k, v in rel.when.items()}) if rel.when else desc


def _metamorphic(spec: Spec, op: Operator, sel: Selection) -> Iterator[Case]:
    """Relations run at the selected level only: they test the backend against itself, so one
    level is enough to catch an inconsistency, and it keeps the default run short."""
    level = sel.level
    rels = op.relations
    if not rels:
        return
    for dt in _data_types(spec, op, level, sel):
        descs = legal_for(spec, op, level, dt, sel.cases, sel.seed + 1)
        for rel in rels:
            if rel.data_types and dt not in rel.data_types:
                continue  # the relation holds for other data types only
            for i, desc in enumerate(descs):
                # the data is drawn for the forced desc; a relation compares the backend's runs
                # with each other, where exact statistics sharpen nothing (numeric cases only)
                forced = apply_when(desc, rel)
                regs = [r for r in regimes(forced, spec) if r != "exact_statistics"] or ["default"]
                yield Case(
                    "metamorphic",
                    op.name,
                    level,
                    dt,
                    i,
                    desc,
                    sel.seed,
                    regime=regs[i % len(regs)],
                    relation=rel,
                )
