"""Expectations: what a backend is known to get wrong, and how far it must still be right.

Two formats, told apart by the file name (docs/running.md, "Expectations files"):

**Findings** (``*.yaml`` / ``*.yml``): each finding names the cases it covers by what they are,
not by their ids, and bounds them::

    findings:
      - id: F1
        reason: FLOAT16 statistics stored as FLOAT16
        when: {data_type: FLOAT16, kind: [numeric, metamorphic]}
        meets: fp16-statistics
      - id: F9
        reason: LRN_GRAD with an even LocalSize sums over the forward window
        when: {operator: LRNG, LocalSize: even}
        fails: true

``when`` is a mapping of predicates (all must hold; a list of mappings: any of them): the case's
``operator`` (full or short name), ``data_type``, ``kind``, ``regime``, ``feature_level``,
``reduction_length``, ``reduction_axes`` (``[[]]``: none), ``dimension_count``, ``relation``,
``rule``, ``expected``, ``id`` (a glob), any desc member by name (``LocalSize: even``, ``P: 1``,
``Epsilon: {max: 0}``, ``ScaleTensor: absent``, ``FusedActivation: ACTIVATION_SOFTPLUS``: an
activation by its type), and the data facts of the operator's kernel (``largest_squared_norm:
{min: 65520}``; known once the case ran, from the inputs it was judged on, and computed only
when a predicate asks). A value is one value, a list (any of), ``even`` / ``odd``,
``fractional`` (not a whole number: ``Bias: fractional``), ``{min: A, max: B}`` (inclusive) or
``present`` / ``absent``. ``meets: MODEL`` (or a mapping of tolerance overrides) says the cases must still meet
that tolerance model: a case that fails the run's model is judged again under it, and is a known
finding (xfailed, naming the finding) within it and a failure outside it. ``fails: true`` says
the cases fail (a bug); ``message: REGEX`` narrows that to failures whose message matches, and
``nan: false`` to failures without a NaN where the reference is a number (a saturation's wrong
values are finite: a NaN is another failure), ``nan: only`` to NaN. A ``fails`` finding named by
a per-slice fact (``squared_norm: {min: 65520}``: kernel registry ``slice_fact_names``) has
``scope: slices``: it excuses the output elements those slices decide, and the case's other
elements are judged again without them (``_settle_slices``); ``scope: case`` takes whole cases,
``scope_reason`` says why. A
``fails`` finding over whole operators or data types (no narrower predicate and no ``message``)
is refused: it would hide any regression there.

**Case ids** (any other name, the original format): one test id or ``fnmatch`` glob per line
with its reason, a matching case's failure is xfailed whatever it is::

    numeric[MEAN_VARIANCE_NORMALIZATION1-5_2-FLOAT16-0042]  # epsilon placement, bug 123
    numeric[MEAN_VARIANCE_NORMALIZATION-*-FLOAT16-*]  fp16 statistics overflow

``[`` and ``]`` in a pattern are literal (test ids are full of them). Everything after ``#`` or
the first run of whitespace is the reason. A reason is required in both formats: an
expectation without one rots, because nobody remembers why it was added.

Every problem with a file is one :class:`ExpectError` line, ``path:line: message``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from dmlconform import kernels
from dmlconform.generation.data import REGIMES
from dmlconform.kernels.base import kernel_named
from dmlconform.releases.predicates import INPUT_LAYOUTS
from dmlconform.runner.error_record import failure_message
from dmlconform.runner.finding_match import (
    CASE_FIELDS,
    AnyExpectation,
    Bound,
    CaseFacts,
    DataFacts,
    Expectation,
    Test,
)
from dmlconform.runner.slice_scope import Excused, JudgedOutputs, restricted, whole_case
from dmlconform.specification.spec import FeatureLevel, Spec, UnknownLevel, UnknownOperator
from dmlconform.specification.yaml_text import load_yaml
from dmlconform.tolerance import coefficients
from dmlconform.tolerance.options import NO_OPTIONS, ToleranceOptions


class ExpectError(ValueError):
    """An expectations file that cannot be used (``path:line: message``)."""


#: predicates that only say which operators, data types, kinds or levels: too wide on their own
#: for a ``fails`` finding (anything there would be masked)
BROAD = frozenset({"operator", "data_type", "kind", "feature_level"})
KINDS = ("numeric", "validation", "metamorphic")
#: what a case is matched against and the expectations, declared in runner/finding_match.py
__all__ = ["AnyExpectation", "Bound", "CaseFacts", "DataFacts", "Expectation", "Test"]


# ------------------------------------------------------------------------------------------
# The verdict on a case an expectation covers


@dataclass(frozen=True)
class Settled:
    """What becomes of a case: ``outcome`` passed | failed | xfailed | xpassed, the message
    (a failure outside its bound says which finding and model it broke), the finding hit, and
    ``excused``: what a ``fails`` finding excused (results.json ``excused``: the elements of a
    per-slice finding's slices, or the whole case and why), None where none did."""

    outcome: str
    message: str | None = None
    finding: str | None = None
    expectation: AnyExpectation | None = None
    excused: dict[str, Any] | None = None


#: Judges a case's outputs under tolerance options: (passed, failure message), or None when the
#: case compared nothing a tolerance judges (a rejected desc, a wrong shape)
Rejudge = Callable[[ToleranceOptions], "tuple[bool, str | None] | None"]

#: why a ``fails`` finding takes a whole case when its file says nothing
WHOLE_CASE = "the finding names no slices"
#: why a per-slice finding takes a metamorphic case whole
RELATION_WHOLE = "a relation compares two runs: its elements are not mapped to slices"


def settle(
    expectations: Iterable[AnyExpectation],
    facts: CaseFacts,
    status: str,
    message: str | None,
    rejudge: Rejudge | None = None,
    nan: bool = False,
    outputs: JudgedOutputs | None = None,
) -> Settled:
    """The outcome of a case that ended ``status`` (passed | failed | skipped) with ``message``.

    Of the expectations covering it (in file order), the first that explains a failure makes it
    a known finding (xfailed): a ``fails`` one whose ``message`` (if any) matches, a ``meets``
    one whose model ``rejudge`` passes. A failure none explains stays a failure; when one covered
    it, the message says which bound it broke. A pass under a ``fails`` expectation without a
    ``message`` is xpassed (the entry may be stale), under any other simply passed. ``nan``: the
    outputs hold a NaN where the reference is a number, which a ``nan: false`` entry does not
    explain.

    A ``fails`` finding scoped to slices, on a numeric case whose ``outputs`` were compared,
    explains only the elements of its slices: the others are judged again without them, under
    the run's model and then each covering ``meets`` bound; a failure there is not its."""
    covering = [e for e in expectations if e.covers(facts)]
    if not covering or status == "skipped":
        return Settled(status, message)
    if status == "passed":
        # a pass under a plain ``fails`` entry means it may be stale; one bounded by ``message``
        # says how its cases fail when they do (F12: some descs of the kind are refused), and a
        # ``meets`` one how far they may err: a pass is a pass there
        first = covering[0]
        # ``nan: only`` says how they fail when they do, as ``message`` does (F5: NaN)
        stale = first.fails and first.message is None and first.nan != "only"
        return Settled("xpassed" if stale else "passed", None, None, first)
    broken: list[str] = []
    excused: dict[str, Any] | None = None
    bounds = [e for e in covering if not e.fails]
    for e in covering:
        if e.fails and e.scope == "slices" and facts.kind == "numeric":
            assert isinstance(e, Bound)
            done, why, record = _settle_slices(e, facts, message, outputs, bounds)
            if done is not None:
                return done
            broken.append(why)
            excused = excused or record
            bounds = []  # judged on the elements outside its slices, and failed: not again whole
        elif e.fails:
            if nan and not e.nan:
                broken.append(f"its failure is not {e.finding}'s (a NaN where the reference is a number)")
            elif e.nan == "only" and not nan:
                broken.append(f"its failure is not {e.finding}'s (no NaN where the reference is a number)")
            elif e.message is None or (message and e.message.search(message)):
                why = RELATION_WHOLE if e.scope == "slices" else (e.scope_reason or WHOLE_CASE)
                return Settled("xfailed", message, e.finding, e, whole_case(e.finding, why))
            else:
                broken.append(f"its failure is not {e.finding}'s (message must match /{e.message.pattern}/)")
        elif any(e is b for b in bounds):
            assert e.meets is not None
            verdict = rejudge(e.meets) if rejudge else None
            label = e.meets.label()
            if verdict is None:
                broken.append(f"{e.finding} bounds it by the {label} model, which judges no outputs here")
            elif verdict[0]:
                return Settled(
                    "xfailed", f"{message} (within {e.finding}'s bound: meets {label})", e.finding, e
                )
            else:
                broken.append(f"outside {e.finding}'s bound: fails the {label} model too: {verdict[1]}")
    return Settled(
        "failed",
        f"{message}; known finding does not explain it: {'; '.join(broken)}",
        None,
        covering[0],
        excused,
    )


def _settle_slices(
    e: Bound,
    facts: CaseFacts,
    message: str | None,
    outputs: JudgedOutputs | None,
    bounds: list[AnyExpectation],
) -> tuple[Settled | None, str, dict[str, Any] | None]:
    """A per-slice finding on a numeric case: (the xfailed outcome when the elements outside its
    slices meet the run's model or a covering bound, else None; why not; the excused record)."""
    if outputs is None:
        return None, f"{e.finding} explains the values of its slices, and this case compared none", None
    sizes = outputs.sizes()
    nans = outputs.nan_where_number()
    masks = restricted(e.excused_elements(facts), sizes)
    if masks is None:  # every element of every output
        masks = {k: np.ones(np.shape(m), dtype=bool) for k, m in nans.items()}
    masks = {k: np.broadcast_to(m, np.shape(nans[k])) for k, m in masks.items()}
    if e.nan == "only":
        masks = {k: m & nans[k] for k, m in masks.items()}
    ex = Excused(e.finding, masks, sizes)
    record = ex.record()
    named = "the NaN elements of the slices it names" if e.nan == "only" else "the slices it names"
    if e.nan is False:
        inside = sum(int(np.count_nonzero(m & nans[k])) for k, m in masks.items())
        if inside:
            return (
                None,
                (
                    f"{e.finding} excuses {ex.text()}, but {inside} of them {'is' if inside == 1 else 'are'} NaN "
                    f"where the reference is a number ({e.finding}'s wrong values are finite)"
                ),
                record,
            )
    verdict = outputs.judge_outside(NO_OPTIONS, dict(masks))
    if verdict is None:
        return None, f"{e.finding} explains the values of its slices, and this case compared none", record
    if verdict[0]:
        said = f"{message} ({e.finding} excuses {ex.text()}, {named}; the others meet the model)"
        return Settled("xfailed", said, e.finding, e, record), "", record
    outside = verdict[1]
    for b in bounds:
        assert b.meets is not None
        within = outputs.judge_outside(b.meets, dict(masks))
        label = b.meets.label()
        if within is not None and within[0]:
            said = (
                f"{message} ({e.finding} excuses {ex.text()}, {named}; the others within "
                f"{b.finding}'s bound: meet {label})"
            )
            return Settled("xfailed", said, e.finding, e, record), "", record
    beyond = "; ".join(f"{b.finding}'s ({b.meets.label()})" for b in bounds if b.meets is not None)
    return (
        None,
        (
            f"{e.finding} excuses {ex.text()} ({named}), but outside them: {outside}"
            + (f" (and beyond every bound that covers it: {beyond})" if beyond else "")
        ),
        record,
    )


def settle_result(
    expectations: list[AnyExpectation], case: Any, nodeid: str, result: Any, spec: Spec
) -> Settled:
    """:func:`settle` for a case the runner ran (``runner.checks.run_case``'s result): the run's
    cases, ``replay`` and ``shrink`` settle a result the same way."""
    if not expectations:
        return Settled(result.status, result.message)

    def rejudge(options: ToleranceOptions) -> tuple[bool, str | None] | None:
        judged = result.judge_under(options)
        if judged is None:
            return None
        return judged[0], None if judged[0] else failure_message(judged[1])

    facts = CaseFacts.of(case, nodeid, result.regime, spec=spec, inputs=result.inputs)
    nan = result.nan_where_number()
    return settle(expectations, facts, result.status, result.message, rejudge, nan, result.compared)


def first_covering(expectations: Iterable[AnyExpectation], facts: CaseFacts) -> AnyExpectation | None:
    return next((e for e in expectations if e.covers(facts)), None)


def match(expectations: list[AnyExpectation], test_id: str, nodeid: str = "") -> AnyExpectation | None:
    """The first case-id expectation naming this id, or None (predicates need the case's facts:
    :func:`first_covering`)."""
    for e in expectations:
        if isinstance(e, Expectation) and e.matches(test_id, nodeid):
            return e
    return None


# ------------------------------------------------------------------------------------------
# Reading files


def parse_expectations(text: str, source: str = "<expectations>") -> list[Expectation]:
    """The case-id format: one pattern and its reason per line."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "#" in line:
            pattern, reason = line.split("#", 1)
        else:
            parts = line.split(None, 1)
            pattern, reason = parts[0], parts[1] if len(parts) > 1 else ""
        pattern, reason = pattern.strip(), reason.strip()
        if " " in pattern:
            pattern, extra = pattern.split(None, 1)
            reason = f"{extra} {reason}".strip()
        if pattern.rstrip(":") == "findings":
            raise ExpectError(f"{source}:{n}: this is the findings (YAML) format: name the file *.yaml")
        if not reason:
            raise ExpectError(f"{source}:{n}: expectation {pattern!r} has no reason")
        out.append(Expectation(pattern, reason, n, source))
    return out


def load_expectations(path: str | Path, spec: Spec) -> list[AnyExpectation]:
    """The expectations of a file: findings (YAML) for ``*.yaml`` / ``*.yml``, else case ids."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ExpectError(f"{p}: cannot read expectations file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ExpectError(f"{p}: not UTF-8 text") from None
    if p.suffix.lower() in (".yaml", ".yml"):
        return list(parse_findings(text, str(p), spec=spec))
    return list(parse_expectations(text, str(p)))


class _Lined(dict):
    """A YAML mapping that knows the line of itself and of each key."""

    line = 0
    key_lines: dict[str, int]


class _Loader(yaml.SafeLoader):
    pass


def _mapping(loader: _Loader, node: yaml.MappingNode) -> _Lined:
    loader.flatten_mapping(node)
    out = _Lined(loader.construct_pairs(node, deep=True))
    out.line = node.start_mark.line + 1
    out.key_lines = {str(k.value): k.start_mark.line + 1 for k, _ in node.value}
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)

FINDING_KEYS = ("id", "reason", "when", "fails", "meets", "message", "nan", "explained", "reproducer")
FINDING_KEYS += ("scope", "scope_reason")
#: ``explained`` (the page and section that explain a finding) and ``reproducer`` (its
#: reproducer under cases/) are for readers: the implementations table links them
#: (``dmlconform implementations``); the verdict does not read them
SCOPES = ("slices", "case")


#: where the built-in backends' known findings live: ``<backend name>.yaml``, in the package (a
#: wheel carries them), applied by default (``--no-known-findings`` judges without them)
KNOWN_DIR = Path(__file__).resolve().parent.parent / "known_findings"


def known_findings_file(backend: str) -> Path | None:
    """The shipped known findings of a backend (by its registered name), or None."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", backend or ""):
        return None
    path = KNOWN_DIR / f"{backend}.yaml"
    return path if path.is_file() else None


def shipped_findings(
    backend: str, versions: Mapping[str, str] | None = None, *, spec: Spec
) -> tuple[list[Bound], str | None]:
    """(the backend's shipped findings, a note for the run's header). A file whose
    ``applies_to`` (versions key -> glob) does not match the backend's ``versions`` is not
    applied, and the note says so: findings measured on one release say nothing of another."""
    path = known_findings_file(backend)
    if path is None:
        return [], None
    text = path.read_text(encoding="utf-8")
    doc = _read_findings(text, str(path))
    wanted = doc.get("applies_to") or {}
    have = dict(versions or {})
    off = [k for k, glob in wanted.items() if not fnmatch.fnmatchcase(str(have.get(k, "")), str(glob))]
    if off:
        k = off[0]
        return [], (
            f"known findings {path.name} are for {k} {wanted[k]}, this run's is {have.get(k, 'not reported')}: "
            "not applied (pass it with --expect to apply it anyway)"
        )
    found = parse_findings(text, str(path), spec=spec)
    ids = list(dict.fromkeys(b.finding for b in found))
    return (
        found,
        f"known findings applied ({path.name}: {', '.join(ids)}; --no-known-findings judges without)",
    )


def _read_findings(text: str, source: str) -> Any:
    try:
        return load_yaml(text, _Loader)  # a SafeLoader with line numbers
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ExpectError(f"{source}{line}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None


def parse_findings(text: str, source: str = "<findings>", *, spec: Spec) -> list[Bound]:
    """The findings format (see the module's docstring); :class:`ExpectError` with file:line."""
    doc = _read_findings(text, source)
    if not isinstance(doc, dict) or not isinstance(doc.get("findings"), list):
        raise ExpectError(f"{source}:1: a findings file is a mapping with a 'findings' list")
    extra = [k for k in doc if k not in ("findings", "about", "applies_to")]
    if not isinstance(doc.get("applies_to") or {}, dict):
        raise ExpectError(
            f"{source}:{_key_line(doc, 'applies_to')}: applies_to maps a versions key to a glob"
        )
    if extra:
        raise ExpectError(f"{source}:{_key_line(doc, extra[0])}: unknown top-level key {extra[0]!r}")
    # a finding id may head several entries (one bug seen by two kinds of case, two bounds)
    return [_bound(raw, source, spec, getattr(doc, "line", 1)) for raw in doc["findings"]]


def _key_line(m: Any, key: str) -> int:
    return getattr(m, "key_lines", {}).get(key, getattr(m, "line", 1))


def _bound(raw: Any, source: str, spec: Any, parent_line: int) -> Bound:
    if not isinstance(raw, _Lined):
        raise ExpectError(
            f"{source}:{parent_line}: each finding is a mapping (id, reason, when, fails or meets)"
        )
    at = raw.line

    def err(key: str | None, message: str) -> ExpectError:
        return ExpectError(f"{source}:{_key_line(raw, key) if key else at}: {message}")

    unknown = [k for k in raw if k not in FINDING_KEYS]
    if unknown:
        raise err(unknown[0], f"unknown key {unknown[0]!r} (known: {', '.join(FINDING_KEYS)})")
    fid = raw.get("id")
    if not isinstance(fid, (str, int)) or not str(fid).strip():
        raise err("id", "a finding needs an id (e.g. id: F1)")
    fid = str(fid).strip()
    reason = raw.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise err("reason", f"finding {fid} has no reason")
    if ("fails" in raw) == ("meets" in raw):
        raise err(None, f"finding {fid}: say either 'fails: true' (a bug) or 'meets: MODEL' (its bound)")
    if "fails" in raw and raw["fails"] is not True:
        raise err("fails", f"finding {fid}: 'fails' is true or absent (use 'meets: MODEL' for a bound)")
    conds = _conditions(raw.get("when"), fid, spec, source, lambda m: err("when", m))
    meets = _meets(raw.get("meets"), fid, spec, conds, lambda m: err("meets", m)) if "meets" in raw else None
    message = None
    if raw.get("message") is not None:
        try:
            message = re.compile(str(raw["message"]))
        except re.error as exc:
            raise err("message", f"finding {fid}: message is not a regular expression: {exc}") from None
    nan = raw.get("nan", True)
    if nan is not True and (nan not in (False, "only") or meets is not None):
        raise err(
            "nan",
            f"finding {fid}: 'nan: false' (a bug that never makes a NaN) or 'nan: only' (one whose wrong "
            "values are NaN) goes with 'fails: true'",
        )
    scope, scope_reason = _scope(raw, fid, conds, meets is None, nan, message, err)
    if meets is None and message is None:
        for cond in conds:
            if set(cond) <= BROAD:
                raise err(
                    "when",
                    f"finding {fid}: 'fails: true' over {_wide(cond)} would hide any regression there: "
                    "narrow 'when' (a member, reduction_length, regime, relation, rule or id), or bound it "
                    "with 'message:' or 'meets: MODEL'",
                )
    return Bound(
        fid, reason.strip(), tuple(conds), at, source, meets is None, meets, message, nan, scope, scope_reason
    )


def _scope(
    raw: Mapping[str, Any],
    fid: str,
    conds: list[dict[str, Test]],
    fails: bool,
    nan: Any,
    message: Any,
    err: Callable[[str | None, str], ExpectError],
) -> tuple[str, str | None]:
    """A finding's scope, explicit: ``slices`` where it says so or a ``fails`` finding names its
    slices by a per-slice fact (and ``scope: case`` is not written), else ``case``; refused where
    it cannot hold (a bound judges whole cases; a per-slice finding names its slices, or excuses
    NaN elements only)."""
    named = [any(t.per_slice for t in cond.values()) for cond in conds]
    scope = raw.get("scope", "slices" if fails and any(named) else "case")
    if scope not in SCOPES:
        raise err("scope", f"finding {fid}: scope is one of {', '.join(SCOPES)}, not {scope!r}")
    reason = raw.get("scope_reason")
    if reason is not None and (scope != "case" or not isinstance(reason, str) or not reason.strip()):
        raise err(
            "scope_reason", f"finding {fid}: scope_reason is the text that says why it takes whole cases"
        )
    if scope == "slices":
        if not fails:
            raise err(
                "scope",
                f"finding {fid}: a bound (meets) judges whole cases: 'scope: slices' goes with 'fails: true'",
            )
        if message is not None:
            raise err(
                "message",
                f"finding {fid}: 'message:' narrows a whole case's failure; a per-slice finding names its elements "
                "by its predicates (and 'nan: only' for NaN elements)",
            )
        if nan != "only" and not all(named):
            raise err(
                "when",
                f"finding {fid}: 'scope: slices' names its slices by a per-slice fact in every alternative of "
                f"'when' ({', '.join(_slice_fact_names())}), or excuses NaN elements only ('nan: only')",
            )
    return scope, reason.strip() if isinstance(reason, str) else None


def _wide(cond: Mapping[str, Test]) -> str:
    return "all cases" if not cond else "whole " + " x ".join(f"{k}s" for k in cond)


def _conditions(
    when: Any, fid: str, spec: Any, source: str, err: Callable[[str], ExpectError]
) -> list[dict[str, Test]]:
    if when is None:
        raise err(f"finding {fid} needs 'when': the predicates of the cases it covers")
    alternatives = when if isinstance(when, list) else [when]
    if not alternatives:
        raise err(f"finding {fid}: 'when' is empty")
    out = []
    for alt in alternatives:
        if not isinstance(alt, dict):
            raise err(f"finding {fid}: 'when' is a mapping of predicates (or a list of them)")
        out.append(_condition(alt, fid, spec, source))
    return out


def _condition(alt: dict[str, Any], fid: str, spec: Any, source: str) -> dict[str, Test]:
    """One mapping of predicates, each checked against the spec (names, members, levels)."""

    def bad(key: str, message: str) -> ExpectError:
        return ExpectError(f"{source}:{_key_line(alt, key)}: finding {fid}: {key}: {message}")

    operators = _operators(alt.get("operator"), spec, bad) if "operator" in alt else None
    members = _members_of(spec, operators)
    cond: dict[str, Test] = {}
    for key, value in alt.items():
        key = str(key)
        if key == "operator":
            cond[key] = Test("any_of", tuple(op.name for op in operators or ()))
        elif key == "data_type":
            cond[key] = Test("any_of", _names(value, set(spec.data_types), key, bad))
        elif key == "kind":
            cond[key] = Test("any_of", _names(value, set(KINDS), key, bad))
        elif key == "expected":
            cond[key] = Test("any_of", _names(value, {"legal", "illegal"}, key, bad))
        elif key == "regime":
            cond[key] = Test("any_of", _names(value, set(REGIMES), key, bad))
        elif key == "feature_level":
            cond[key] = _level_test(value, spec, bad)
        elif key == "relation":
            known = {r.id for op in (operators or spec.operators.values()) for r in op.relations}
            cond[key] = Test("any_of", _names(value, known, key, bad))
        elif key == "rule":
            known = {r.id for op in (operators or spec.operators.values()) for r in spec.rules_for(op)}
            cond[key] = Test("any_of", _names(value, known, key, bad))
        elif key == "input_layout":
            cond[key] = Test("any_of", _names(value, set(INPUT_LAYOUTS), key, bad))
        elif key == "id":
            cond[key] = Test("glob", tuple(str(v) for v in (value if isinstance(value, list) else [value])))
        elif key in (
            "reduction_length",
            "reduction_axes",
            "dimension_count",
            *members,
            *_facts_of(spec, operators),
        ):
            cond[key] = _value_test(value, key, bad)
        elif key in _facts_of(spec, operators, per_slice=True):
            cond[key] = _slice_test(value, key, bad)
        else:
            where = "the named operators" if operators else "any operator"
            raise bad(
                key,
                f"not a case field ({', '.join(CASE_FIELDS)}), a member or a data fact of {where} (case-wide or per slice)",
            )
    return cond


def _operators(value: Any, spec: Any, bad: Callable[[str, str], ExpectError]) -> list[Any]:

    names = value if isinstance(value, list) else [value]
    out = []
    for name in names:
        try:
            out.append(spec.operator(str(name)))
        except (UnknownOperator, KeyError, ValueError) as exc:
            raise bad("operator", str(exc).strip("'\"")) from None
    return out


def _members_of(spec: Any, operators: list[Any] | None) -> set[str]:
    return {m.name for op in (operators or spec.operators.values()) for m in op.members}


def _facts_of(spec: Any, operators: list[Any] | None, *, per_slice: bool = False) -> set[str]:
    """The data facts (kernel registry ``fact_names``, or ``slice_fact_names``: one value per
    slice) of the operators' kernels and the variants they hand descs to."""
    named = {kernel_named(op) for op in (operators or spec.operators.values())}
    entries = [kernels.KERNELS[name] for name in named if name in kernels.KERNELS]
    entries += [kernels.KERNELS[v] for e in entries for v in e.variants if v in kernels.KERNELS]
    return {f for e in entries for f in (e.slice_fact_names if per_slice else e.fact_names)}


def _slice_fact_names() -> list[str]:
    return sorted({f for e in kernels.KERNELS.values() for f in e.slice_fact_names})


def _slice_test(value: Any, key: str, bad: Callable[[str, str], ExpectError]) -> Test:
    """A per-slice fact's test: a range or a list of numbers, tested on every slice."""
    test = _value_test(value, key, bad)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in test.values)
    if test.how not in ("range", "any_of") or not numbers:
        raise bad(key, "a per-slice fact takes a range {min: A, max: B} or numbers")
    return Test(test.how, test.values, test.low, test.high, per_slice=True)


def _names(value: Any, known: set[str], key: str, bad: Callable[[str, str], ExpectError]) -> tuple[str, ...]:
    names = tuple(str(v) for v in (value if isinstance(value, list) else [value]))
    for name in names:
        if name not in known:
            raise bad(key, f"unknown {key} {name!r} (known: {', '.join(sorted(known))})")
    return names


def _level_test(value: Any, spec: Any, bad: Callable[[str, str], ExpectError]) -> Test:
    """The test of a ``feature_level`` predicate: its levels resolved here, once, where the file
    enters, and compared as the spec's objects (ordered) with the case's own."""

    def level(v: Any) -> FeatureLevel:
        if not isinstance(v, str):
            raise bad("feature_level", f"write a level as a quoted string (e.g. '6_4'), not {v!r}")
        try:
            return spec.level(v)
        except UnknownLevel as exc:
            raise bad("feature_level", str(exc).strip("'\"")) from None

    if isinstance(value, dict):
        _range_keys(value, "feature_level", bad)
        low = level(value["min"]) if "min" in value else None
        high = level(value["max"]) if "max" in value else None
        return Test("range", low=low, high=high)
    return Test("any_of", tuple(level(v) for v in (value if isinstance(value, list) else [value])))


def _range_keys(value: dict[str, Any], key: str, bad: Callable[[str, str], ExpectError]) -> None:
    extra = [k for k in value if k not in ("min", "max")]
    if extra or not value:
        raise bad(key, "a range is {min: A, max: B} (either may be left out)")


def _value_test(value: Any, key: str, bad: Callable[[str, str], ExpectError]) -> Test:
    if value in ("even", "odd"):
        return Test("parity", (0 if value == "even" else 1,))
    if value == "fractional":
        return Test("fractional")
    if value in ("present", "absent"):
        return Test("presence", (value == "present",))
    if isinstance(value, dict):
        _range_keys(value, key, bad)
        for bound in value.values():
            if not isinstance(bound, (int, float)) or isinstance(bound, bool):
                raise bad(key, f"range bounds are numbers, not {bound!r}")
        return Test("range", low=value.get("min"), high=value.get("max"))
    if isinstance(value, list):
        return Test("any_of", tuple(value))
    return Test("any_of", (value,))


def _meets(
    value: Any, fid: str, spec: Any, conds: list[dict[str, Test]], err: Callable[[str], ExpectError]
) -> ToleranceOptions:
    """The tolerance options of ``meets`` (a model name, or options such as {model: default,
    ulp_scale: 16}), checked against every covered operator's tolerance section."""
    if isinstance(value, str) and value.strip():
        pairs: dict[str, Any] = {"model": value.strip()}
    elif isinstance(value, dict) and value:
        pairs = {str(k): v for k, v in value.items()}
    else:
        raise err(f"finding {fid}: meets is a tolerance model's name or a mapping of tolerance overrides")
    try:
        options = ToleranceOptions.parse(pairs)
    except ValueError as exc:
        raise err(f"finding {fid}: meets: {exc}") from None
    names = {n for c in conds for n in (c["operator"].values if "operator" in c else spec.operators)}
    for name in sorted(names):
        op = spec.operator(name)
        for dt in sorted((op.tolerance or {}).get("coefficients") or {}):
            try:
                coefficients(op.tolerance, dt, None, options)
            except (ValueError, TypeError) as exc:
                raise err(f"finding {fid}: meets: {op.name}: {exc}") from None
    return options
