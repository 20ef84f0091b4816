"""Greedy, deterministic search for the smallest case that still fails the same way.

The loop is delta debugging's in its simplest form: from the current case, try the moves in
their fixed order (``moves.candidates``: biggest reductions first); the first candidate that is
a case worth running and fails with the original's signature becomes the current case, and the
moves start again from it; when no move works, the case is minimal for these moves. A candidate
is never run twice (a desc's YAML and its data's hash key a cache), and never run at all when the
validator says it is not the same kind of case (a numeric case must stay legal; an illegal one
must break exactly the rule it broke). The run stops at the deadline with the smallest case
found so far, which was itself seen to fail.

The final case is run once more: a backend whose verdict changes from run to run (a race, an
uninitialized read) could otherwise hand back a "smaller" case that does not fail. Then the
original is reported instead, with the reason.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from dmlconform.runner.cases import Case
from dmlconform.runner.judging import CaseResult
from dmlconform.shrink.moves import Inputs, Move, candidates, size_of
from dmlconform.shrink.signature import Signature, same_failure, signature
from dmlconform.specification.spec import Spec
from dmlconform.specification.validate import validate

Runner = Callable[[Case, Inputs], CaseResult]
SHRUNK_SIZE_LABEL = "shrunk"  # the shrunk case's size label: its id says it is not the original


class NotFailing(Exception):
    """The original case does not fail on this backend now: nothing to shrink."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(
            f"the case does not fail on this backend ({result.status}: {result.message or 'ok'})"
        )
        self.result = result


@dataclass
class Shrunk:
    """The outcome of a search: the smallest failing case found, and how it was found."""

    case: Case
    inputs: Inputs
    result: CaseResult
    signature: Signature
    original_size: tuple[int, int]  # (elements, dimensions) of the main input
    size: tuple[int, int]
    steps: list[str] = field(default_factory=list)
    tried: int = 0
    seconds: float = 0.0
    stopped: str = "minimal"  # minimal | time limit | not reproducible

    def to_dict(self) -> dict[str, object]:
        return {
            "signature": str(self.signature),
            "original": {"elements": self.original_size[0], "dimensions": self.original_size[1]},
            "shrunk": {"elements": self.size[0], "dimensions": self.size[1]},
            "steps": list(self.steps),
            "tried": self.tried,
            "seconds": round(self.seconds, 3),
            "stopped": self.stopped,
        }


def _fingerprint(move: Move) -> str:
    h = hashlib.blake2b(move.desc.to_yaml().encode(), digest_size=16)
    for name in sorted(move.inputs or {}):
        a = np.ascontiguousarray(move.inputs[name])
        h.update(f"{name}{a.dtype}{a.shape}".encode())
        h.update(a.data)
    return h.hexdigest()


def _worth_running(case: Case, move: Move, spec: Spec) -> bool:
    """The candidate is the same kind of case as the original: legal for a case that must be
    legal, breaking exactly the original's rule for an illegal one."""
    found = {v.rule for v in validate(move.desc, case.level, spec)}
    if case.kind == "validation" and case.expected == "illegal":
        return found == {case.rule}
    return not found


def shrink(
    case: Case,
    inputs: Inputs,
    run: Runner,
    spec: Spec,
    max_seconds: float = 60.0,
    progress: Callable[[str], None] | None = None,
) -> Shrunk:
    """Shrink a failing case. ``run`` runs one case (with its inputs) on the backend under test;
    raises :class:`NotFailing` when the original does not fail."""
    start = time.monotonic()
    deadline = start + max(0.0, max_seconds)
    first = run(case, inputs)
    sig = signature(case, first)
    if sig is None:
        raise NotFailing(first)
    original = size_of(case.desc, spec)
    best = Shrunk(case, inputs, first, sig, original, original)
    seen: set[str] = set()
    stopped = "improved"
    while stopped == "improved":
        stopped = _take_first_smaller(best, case, run, spec, seen, deadline, progress)
    if best.steps:
        again = run(best.case, best.inputs)
        if not same_failure(sig, best.case, again):
            stopped = "not reproducible"
            best = Shrunk(case, inputs, first, sig, original, original, tried=best.tried)
    best.stopped = stopped
    best.seconds = time.monotonic() - start
    return best


def _take_first_smaller(
    best: Shrunk,
    case: Case,
    run: Runner,
    spec: Spec,
    seen: set[str],
    deadline: float,
    progress: Callable[[str], None] | None,
) -> str:
    """Run the candidates one move smaller than ``best`` until one fails the same way and make
    it ``best``: "improved"; "minimal" when none does, "time limit" when the deadline came first.
    ``seen`` (fingerprints of the candidates run) spares running one twice across calls."""
    for move in candidates(best.case.desc, best.inputs, spec):
        if time.monotonic() >= deadline:
            return "time limit"
        if not _worth_running(case, move, spec):
            continue
        key = _fingerprint(move)
        if key in seen:
            continue
        seen.add(key)
        trial = replace(best.case, desc=move.desc, size=SHRUNK_SIZE_LABEL)
        result = run(trial, move.inputs)
        best.tried += 1
        if same_failure(best.signature, trial, result):
            best.case, best.inputs, best.result = trial, move.inputs, result
            best.size = size_of(move.desc, spec)
            best.steps.append(move.note)
            if progress:
                progress(f"{move.note}: {best.size[0]} elements, {best.size[1]} dims")
            return "improved"
    return "minimal"
