"""Legal descs at the edges of the spec's rules: the values where an implementation's reading of a
rule and the spec's part ways first.

The legal generator alone draws the middle of the legal space (alignments 0 or 16, no stated
buffer sizes, packed outputs); the acceptance sweep can only disagree with DirectML about descs
someone makes. Each rule kind says what its edges are (``RuleKind.edges`` in
``dmlconform.specification.rules``, beside its check); this module turns a legal desc into those
variants, keeps the ones the validator still calls legal (an edge of one rule must not break
another), and serves them three ways: mixed into the legal generator at ``EDGE_RATE``, as the
whole edge corpus of an operator and level (``dmlconform generate --edges``), and as probes of
the release sweep.

Float members that no rule constrains (Epsilon, LRN's Alpha, Beta and Bias) have edges of their
type: the C struct holds any FLOAT, so 0, -0, a denormal, a negative value, NaN, the infinities
and the largest float are all legal descs, and DirectML accepts them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from dmlconform.generation.choices import Options
from dmlconform.generation.chooser import seeded_chooser
from dmlconform.generation.realize import build_legal
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.rules import Chooser, Context, kind_of
from dmlconform.specification.spec import FeatureLevel, Spec
from dmlconform.specification.structure import Model
from dmlconform.specification.structure_builder import model_for
from dmlconform.specification.validate import is_legal

#: The share of legal validation descs replaced by an edge of one of their rules (rules taken in
#: turn, so that a run's first few edge draws already spread over the rules).
EDGE_RATE = 0.25

_FLT_MAX = float.fromhex("0x1.fffffep+127")
#: The values a FLOAT member no rule constrains takes at its type's edges.
FLOAT_EDGES: tuple[tuple[str, float], ...] = (
    ("0", 0.0),
    ("-0", -0.0),
    ("the smallest denormal", 2.0**-149),
    ("-1", -1.0),
    ("NaN", math.nan),
    ("+inf", math.inf),
    ("-inf", -math.inf),
    ("the largest float", _FLT_MAX),
)


@dataclass(frozen=True)
class EdgeDesc:
    """A legal desc at the edge of ``rule`` (a rule id, or ``member:Name`` for a float member no
    rule constrains), made by changing what ``label`` says."""

    rule: str
    label: str
    desc: OperatorDesc


def _float_members_without_rule(model: Model) -> list[str]:
    ruled = {n for r in model.active if kind_of(r).bounds_values for n in kind_of(r).members(r)}
    return [m.name for m in model.op.members if m.type == "float" and m.name not in ruled]


def edge_variants(model: Model, desc: OperatorDesc) -> list[EdgeDesc]:
    """Every edge of every active rule made from the legal ``desc``, those still legal."""
    ctx = Context(model.spec, model.op, model.level, desc, model.row)
    out: list[EdgeDesc] = []
    for rule in model.active:
        for label, new in kind_of(rule).edges(rule, ctx):
            if new != desc and is_legal(new, model.level, model.spec):
                out.append(EdgeDesc(rule.id, label, new))
    for name in _float_members_without_rule(model):
        for label, value in FLOAT_EDGES:
            new = desc.replace(**{name: value})
            if is_legal(new, model.level, model.spec):
                out.append(EdgeDesc(f"member:{name}", f"{name} {label}", new))
    return out


def edge_order(model: Model) -> list[str]:
    """Rule ids (and ``member:Name``) in checking order: the order edge draws take them in."""
    return [r.id for r in model.active] + [f"member:{n}" for n in _float_members_without_rule(model)]


class EdgeDrawer:
    """Replaces legal descs by edges at a rate, taking the rules in turn: the n-th edge draw
    prefers the n-th rule (cyclically) and falls back to the next rule the desc has an edge of."""

    def __init__(self, model: Model, rate: float) -> None:
        self.model, self.rate, self.drawn = model, rate, 0

    def __call__(self, desc: OperatorDesc, ch: Chooser) -> OperatorDesc:
        if self.rate <= 0 or ch.integer(0, 999) >= self.rate * 1000:
            return desc
        variants = edge_variants(self.model, desc)
        if not variants:
            return desc
        by_rule: dict[str, list[EdgeDesc]] = {}
        for v in variants:
            by_rule.setdefault(v.rule, []).append(v)
        order = [r for r in edge_order(self.model) if r in by_rule]
        rule = order[self.drawn % len(order)]
        self.drawn += 1
        return ch.choice(by_rule[rule], key=f"edge:{rule}").desc


_CORPORA: dict[tuple[int, str, str, int, int], tuple[EdgeDesc, ...]] = {}


def edge_corpus(
    operator: str, level: str | FeatureLevel, spec: Spec, seed: int = 0, bases: int = 1
) -> tuple[EdgeDesc, ...]:
    """The whole edge corpus of an operator at a level: every edge of ``bases`` legal descs per
    data type the operator supports there (generator seed ``seed``), each desc once. Kept per
    (spec, operator, level, seed, bases): the sweep's corpus and the coverage check ask for the
    same corpora, and making one validates every variant."""
    model = model_for(operator, level, spec)
    key = (id(spec), model.op.name, model.level.name, seed, bases)
    if key not in _CORPORA:
        _CORPORA[key] = tuple(_make_corpus(model, seed, bases))
    return _CORPORA[key]


def _make_corpus(model: Model, seed: int, bases: int) -> Iterator[EdgeDesc]:
    if not model.available:
        return
    seen: set[str] = set()  # repr: NaN-safe and cheap (yaml is 20 ms a desc)
    dtypes = sorted({d for name in model.tensors for d in model.supported_dtypes(name)})
    for dtype in dtypes:
        ch = seeded_chooser(model.op.name, model.level.name, seed, "edges", dtype)
        for _ in range(bases):
            base = build_legal(model, ch, Options(dtype=dtype))
            for edge in edge_variants(model, base):
                key = repr(edge.desc)
                if key not in seen:
                    seen.add(key)
                    yield edge
