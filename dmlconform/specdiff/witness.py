"""Witnesses: a concrete desc legal on one side of a change and illegal on the other.

The illegal side must report the rule the change is about; every witness is confirmed by
:func:`validate` on both sides, so the diff never claims a difference the validator does not see.
Candidates come from the generators (``dmlconform.generation.legal`` and ``.illegal``),
and from a small constructive builder plus single-member mutations (``desc_builder``), driven by
rule kinds and the support table only.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from dmlconform.specdiff.changes import Change, DiffResult, Side, Witness
from dmlconform.specdiff.desc_builder import build_desc, mutations
from dmlconform.specification.desc import OperatorDesc
from dmlconform.specification.rules import (
    ActivationAvailable,
    Available,
    RuleKind,
    SupportDataType,
    SupportDimensionCount,
    TensorDimensionCountRange,
    of_kind,
)
from dmlconform.specification.validate import is_legal, validate

# The rule kind whose violation shows each kind of change, for changes that are not about one
# rule (a support cell is checked by the support_* rule, an activation by activation_available).
_CHECKED_BY: dict[str, type[RuleKind]] = {
    "operator-added": Available,
    "operator-removed": Available,
    "support-dimension-counts": SupportDimensionCount,
    "support-data-types": SupportDataType,
    "activation-added": ActivationAvailable,
    "activation-removed": ActivationAvailable,
    "tensor-limit": TensorDimensionCountRange,
}


def add_witnesses(result: DiffResult, budget: int = 4000) -> None:
    """Attach a confirmed witness (or the reason there is none) to every change that has sides.

    In a level diff a witness is found at the step where its change happens; ``across_range``
    then says whether it also tells the range's two ends apart (legal at the end on its legal
    side, illegal at the other), which is what "what can I do at B that I could not at A" asks.
    A later change inside the range can make that false, and the reader should know.
    """
    for name, changes in result.operators.items():
        out = []
        for c in changes:
            if not c.sides:
                out.append(c)
                continue
            w = find_witness(name, c, budget)
            if w.desc is not None and result.mode == "levels":
                w = replace(w, across_range=_across_range(result, c, w))
            out.append(replace(c, witness=w))
        result.operators[name] = out


def _across_range(result: DiffResult, change: Change, w: Witness) -> bool:
    assert change.sides is not None and w.desc is not None
    spec = change.sides[0].spec
    ends = sorted((spec.level(result.from_), spec.level(result.to)))
    legal, illegal = spec.level(str(w.legal_at)), spec.level(str(w.illegal_at))
    good, bad = (ends[1], ends[0]) if legal > illegal else (ends[0], ends[1])
    return not validate(w.desc, good, spec) and bool(validate(w.desc, bad, spec))


# Why no desc shows a change, by kind, when the search finds none.
_NO_WITNESS_BECAUSE = {
    "rule-on": "the new rule is implied by the rules already in force",
    "rule-off": "the rule that ends is implied by the rules still in force",
    "tensor-limit": "the operator's support table admits fewer dimensions than either limit",
}


def find_witness(operator: str, change: Change, budget: int = 4000) -> Witness:
    """A desc that one side accepts and the other rejects *for this change's rule*.

    Both directions are tried (a relaxation is shown by a desc legal after, a restriction by one
    legal before). A candidate counts only if the validator returns no violation on one side and,
    on the other, a violation of the rule that checks this change; otherwise a desc that differs
    for an unrelated reason (another change at the same step) would be shown as this one's.
    Every generator candidate is checked and the simplest confirmed desc is shown (generated
    descs exercise layouts, flags and strides, which a reader of a diff does not need).
    """
    if change.sides is None:
        return Witness(None, reason="not decided by any level; no desc can show it")
    before, after = change.sides
    if change.kind.startswith(("member-", "doc-note-", "feature-levels")):
        return Witness(None, reason="a description change: no desc is legal on one side only because of it")
    expected = _expected_rule_ids(operator, change, before, after)
    search = _Search(operator, change, expected, budget)
    for legal, illegal in ((after, before), (before, after)):
        best = search.best(legal, illegal)
        if best is not None:
            return replace(best, tried=search.tried)
    why = _NO_WITNESS_BECAUSE.get(
        change.kind, "no desc is legal on one side and rejected by this rule on the other"
    )
    return Witness(None, reason=f"none among {search.tried} candidates: {why}", tried=search.tried)


@dataclass
class _Search:
    """One witness search: the candidates tried so far count against one budget over both
    directions, and a desc tried in one direction is not tried again in the other."""

    operator: str
    change: Change
    expected: set[str]
    budget: int
    tried: int = 0
    seen: set[OperatorDesc] = field(default_factory=set)

    def best(self, legal: Side, illegal: Side) -> Witness | None:
        """The simplest confirmed witness legal at ``legal``, or None."""
        best: Witness | None = None
        best_length: int | None = None  # best's desc file length, written once a tie needs it
        stop_at: int | None = None
        for origin, cand in _candidates(self.operator, self.change, legal, illegal):
            if stop_at is not None and self.tried >= stop_at:
                break
            if cand in self.seen:
                continue
            self.seen.add(cand)
            self.tried += 1
            if self.tried > self.budget:
                break
            found = self._confirmed(cand, legal, illegal)
            if found is None:
                continue
            # fewest violations (the change's rule alone is the clearest witness), then the
            # shortest desc file, written only to break a tie (every candidate's was half the time)
            if best is None or len(found.violations) < len(best.violations):
                best, best_length = found, None
            elif len(found.violations) == len(best.violations):
                if best_length is None:
                    best_length = _yaml_length(best)
                length = _yaml_length(found)
                if length < best_length:
                    best, best_length = found, length
            if origin == "built" and stop_at is None:
                stop_at = self.tried + 200  # a few more built neighbours may break the rule alone
        return best

    def _confirmed(self, cand: OperatorDesc, legal: Side, illegal: Side) -> Witness | None:
        """``cand`` as a witness when it is legal at ``legal`` and breaks an expected rule at ``illegal``."""
        if not is_legal(cand, legal.level, legal.spec):
            return None
        bad = validate(cand, illegal.level, illegal.spec)
        if not any(v.rule in self.expected for v in bad):
            return None
        return Witness(
            cand,
            legal.label,
            illegal.label,
            tuple(f"{v.rule}: {v.member}: {v.message}" for v in bad),
            tried=self.tried,
        )


def _yaml_length(w: Witness) -> int:
    return len(w.desc.to_yaml()) if w.desc is not None else 0


def _expected_rule_ids(operator: str, change: Change, before: Side, after: Side) -> set[str]:
    ids = {change.rule} if change.rule else set()
    if change.kind == "rule-renamed":
        ids |= set(change.subject.split(" -> "))
    rule_kind = _CHECKED_BY.get(change.kind)
    if rule_kind:
        for side in (before, after):
            if operator in side.spec.operators:
                ids |= {r.id for r in of_kind(side.spec.rules_for(side.spec.operators[operator]), rule_kind)}
    return ids


def _candidates(
    operator: str, change: Change, legal: Side, illegal: Side
) -> Iterator[tuple[str, OperatorDesc]]:
    """Generator descs first (when ``dmlconform.generation`` has them), then our own: bases built from
    the legal side's support table, ordered so that the ones this change is about come first, each
    followed by its single-member mutations."""
    spec = legal.spec
    op = spec.operators.get(operator)
    if op is None or operator not in illegal.spec.operators:
        return
    yield from (("generator", d) for d in _generator_candidates(operator, change, legal, illegal))
    row = op.support_row(spec, legal.level)
    counts = sorted({c for t in row.tensors.values() for c in t.dimension_counts})
    focus: list[int] = []
    if change.kind == "support-dimension-counts":
        focus = sorted(set(change.before or []) ^ set(change.after or []))
    if change.kind == "tensor-limit":
        lo, hi = sorted([change.before or 0, change.after or 0])
        focus = list(range(lo + 1, hi + 1))
    ranks = _ordered(focus + ([4] if 4 in counts else []) + counts + list(range(1, 9)))
    focus_types = (
        list(change.after or []) + list(change.before or []) if change.kind == "support-data-types" else []
    )
    dtypes = _ordered(focus_types + [d for t in row.tensors.values() for d in t.data_types])
    nullable = [m.name for m in op.tensor_members if m.nullable]
    presences = [set(nullable)] + [
        set(c) for n in range(len(nullable) - 1, -1, -1) for c in itertools.combinations(nullable, n)
    ]
    acts: list[str | None] = [None]
    if any(m.type == "activation" for m in op.members):
        named = [change.subject] if change.kind.startswith("activation-") else []
        rule = legal.spec.rules_for(op) + illegal.spec.rules_for(illegal.spec.operators[operator])
        named += [r.params["activation"] for r in rule if r.id == change.rule and "activation" in r.params]
        acts += _ordered(named)
        if change.kind.startswith("activation-") or any(
            r.scope == "activation" and r.id == change.rule for r in rule
        ):
            acts += [a for a in spec.activations if a not in acts]
    for rank, dtype, present, act in itertools.product(ranks, dtypes, presences, acts):
        base = build_desc(spec, op, legal.level, rank, dtype, present, act)
        yield "built", base
        yield from (("built", m) for m in mutations(spec, op, base))


def _ordered(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


def _generator_candidates(
    operator: str, change: Change, legal: Side, illegal: Side
) -> Iterator[OperatorDesc]:
    """Descs from ``dmlconform.generation.legal`` and ``.illegal``: legal ones on the legal side, and illegal ones on the
    other side labelled with this change's rule. Absent or failing generators are skipped: the
    constructive search below does not depend on them."""
    try:
        from dmlconform.generation.illegal import illegal_descs
        from dmlconform.generation.legal import legal_descs
    except ImportError:
        return
    try:
        if change.rule:
            for desc, rule_id in illegal_descs(
                operator, illegal.level.name, seed=0, count=64, spec=illegal.spec
            ):
                if rule_id == change.rule:
                    yield desc
        yield from legal_descs(operator, legal.level.name, seed=0, count=64, spec=legal.spec)
    except Exception:  # noqa: BLE001 - a generator bug must not hide what the search can still find
        return
