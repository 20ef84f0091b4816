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
``reduction_length``, ``relation``, ``rule``, ``expected``, ``id`` (a glob), any desc member
by name (``LocalSize: even``, ``P: 1``, ``Epsilon: {max: 0}``, ``ScaleTensor: absent``), and the
data facts of the operator's kernel (``largest_squared_norm: {min: 65520}``; known once the case
ran, from the inputs it was judged on, and computed only when a predicate asks). A value is
one value, a list (any of), ``even`` / ``odd``, ``{min: A, max: B}`` (inclusive) or ``present`` /
``absent``. ``meets: MODEL`` (or a mapping of tolerance overrides) says the cases must still meet
that tolerance model: a case that fails the run's model is judged again under it, and is a known
finding (xfailed, naming the finding) within it and a failure outside it. ``fails: true`` says
the cases fail (a bug); ``message: REGEX`` narrows that to failures whose message matches, and
``nan: false`` to failures without a NaN where the reference is a number (a saturation's wrong
values are finite: a NaN is another failure). A
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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dmlconform import kernels
from dmlconform.generation.data import REGIMES
from dmlconform.kernels.base import kernel_named
from dmlconform.runner.cases import apply_when
from dmlconform.runner.tiers import elements_and_length
from dmlconform.specification.spec import FeatureLevel, Spec, UnknownLevel, UnknownOperator
from dmlconform.tolerance import coefficients
from dmlconform.tolerance.options import ToleranceOptions


class ExpectError(ValueError):
    """An expectations file that cannot be used (``path:line: message``)."""


#: the finding id at the start of a case-id line's reason (``# F1: ...``), for reports
_FINDING_PREFIX = re.compile(r"^\s*([A-Z][A-Za-z]*\d+[a-z]?)\s*:")
#: predicates that only say which operators, data types, kinds or levels: too wide on their own
#: for a ``fails`` finding (anything there would be masked)
BROAD = frozenset({"operator", "data_type", "kind", "feature_level"})
CASE_FIELDS = ("operator", "data_type", "kind", "regime", "feature_level", "reduction_length", "relation")
CASE_FIELDS += ("rule", "expected", "id")
KINDS = ("numeric", "validation", "metamorphic")


# ------------------------------------------------------------------------------------------
# What an expectation is matched against


@dataclass(frozen=True)
class CaseFacts:
    """What a case is, for the predicates: the fields of its id and desc. ``members`` are the
    desc that ran (a metamorphic relation's ``when`` applied); ``regime`` the data the case was
    judged on (known once it ran; None before); ``data`` the facts its kernel tells of the inputs
    it was judged on (kernel registry ``facts``: an Lp normalization's largest squared norm),
    empty before it ran."""

    id: str
    kind: str
    operator: str
    level: FeatureLevel
    data_type: str | None = None
    nodeid: str = ""
    regime: str | None = None
    relation: str | None = None
    rule: str | None = None
    expected: str | None = None
    reduction_length: int | None = None
    members: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        case: Any,
        nodeid: str = "",
        regime: str | None = None,
        *,
        spec: Spec,
        inputs: Mapping[str, Any] | None = None,
    ) -> CaseFacts:
        """The facts of a ``runner.cases.Case`` (``regime``: the one its inputs came from;
        ``inputs``: what it was judged on, for its kernel's data facts)."""

        ran = apply_when(case.desc, case.relation) if case.relation else case.desc
        length = elements_and_length(ran, spec)[1] if case.kind != "validation" else None
        return cls(
            id=case.id,
            kind=case.kind,
            operator=case.operator,
            level=case.level,
            data_type=case.data_type,
            nodeid=nodeid,
            regime=regime or case.regime,
            relation=case.relation.id if case.relation else None,
            rule=case.rule,
            expected=case.expected,
            reduction_length=length,
            members=dict(ran.members),
            data=DataFacts(ran, inputs, spec) if inputs and case.kind != "validation" else {},
        )

    def value(self, name: str) -> Any:
        """A predicate's subject: a case field, else the desc member (``_ABSENT`` if omitted)."""
        if name == "feature_level":
            return self.level
        if name in CASE_FIELDS:
            return getattr(self, name)
        if name in self.data:
            return self.data[name]
        return self.members.get(name, _ABSENT)


class DataFacts(Mapping[str, float]):
    """The facts the case's kernel tells of its inputs, computed on the first look at one: most
    cases are settled by predicates that never ask, and a fact costs a pass over the inputs
    (2^26 elements in the stress tier). Which facts there are is known without computing them."""

    def __init__(self, desc: Any, inputs: Mapping[str, Any], spec: Spec) -> None:
        self._desc, self._inputs, self._spec = desc, inputs, spec
        self._entry = kernels.kernel_of(desc, spec)
        self._values: dict[str, float] | None = None

    def __contains__(self, name: object) -> bool:
        return name in self._entry.fact_names

    def __getitem__(self, name: str) -> float:
        if self._values is None:
            compute = kernels.resolve(self._entry.facts) if self._entry.facts else None
            self._values = dict(compute(self._desc, dict(self._inputs), self._spec)) if compute else {}
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entry.fact_names)

    def __len__(self) -> int:
        return len(self._entry.fact_names)


_ABSENT = object()


# ------------------------------------------------------------------------------------------
# Values of predicates


@dataclass(frozen=True)
class Test:
    """One predicate's test of a value: ``how`` is one of ``any_of`` (``values``), ``parity``,
    ``range`` (``low``, ``high``; levels by their order), ``presence``, ``glob``."""

    how: str
    values: tuple[Any, ...] = ()
    low: Any = None
    high: Any = None

    def __call__(self, value: Any) -> bool:
        if self.how == "presence":
            return (value is not _ABSENT and value is not None) == self.values[0]
        if value is _ABSENT or value is None:
            return False
        if self.how == "glob":
            return any(_compile(str(p)).fullmatch(str(value)) for p in self.values)
        if self.how == "parity":
            return _is_int(value) and int(value) % 2 == self.values[0]
        if self.how == "range":
            try:
                return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)
            except (TypeError, ValueError, KeyError):
                return False
        return any(_same(value, want) for want in self.values)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _same(value: Any, want: Any) -> bool:
    """Equality as a file means it: 1 is 1.0, a sequence equals a list, bool is not 1."""
    if isinstance(value, FeatureLevel):  # its ``value`` is DirectML's number, not a file's name
        return value == want
    if isinstance(value, bool) or isinstance(want, bool):
        return isinstance(value, bool) and isinstance(want, bool) and value == want
    if isinstance(value, (tuple, list)):
        return isinstance(want, list) and list(value) == want
    if hasattr(value, "value") and not isinstance(value, (int, float, str)):
        value = value.value  # an enum-like member value
    return value == want


# ------------------------------------------------------------------------------------------
# The two kinds of expectation


@dataclass(frozen=True)
class Expectation:
    """A line of a case-id file: ``pattern`` (an id or glob) and its reason. A failure of a
    case it names is expected, whatever the failure."""

    pattern: str
    reason: str
    line: int
    source: str = ""

    fails = True
    meets: ToleranceOptions | None = None
    message: re.Pattern[str] | None = None
    nan = True

    @property
    def finding(self) -> str | None:
        """The finding id a reason starts with (``F1: ...``), or None."""
        m = _FINDING_PREFIX.match(self.reason)
        return m.group(1) if m else None

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def matches(self, test_id: str, nodeid: str = "") -> bool:
        rx = _compile(self.pattern)
        return bool(
            rx.fullmatch(test_id)
            or (nodeid and (rx.fullmatch(nodeid) or nodeid.endswith("::" + self.pattern)))
        )

    def covers(self, facts: CaseFacts) -> bool:
        return self.matches(facts.id, facts.nodeid)


@dataclass(frozen=True)
class Bound:
    """A finding of a YAML file: the cases it covers (``when``: any of these predicate sets,
    each a mapping of name -> :class:`Test`) and what they must still do: fail (``fails``,
    optionally only with a ``message`` matching) or meet the tolerance overrides ``meets``."""

    finding: str
    reason: str
    when: tuple[Mapping[str, Test], ...]
    line: int
    source: str = ""
    fails: bool = False
    meets: ToleranceOptions | None = None
    message: re.Pattern[str] | None = None
    #: ``nan: false``: the bug's wrong values are never NaN, so a NaN where the reference is a
    #: number is another failure, which the entry does not take
    nan: bool = True

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def covers(self, facts: CaseFacts) -> bool:
        return any(all(test(facts.value(name)) for name, test in cond.items()) for cond in self.when)


AnyExpectation = Expectation | Bound


def _compile(pattern: str) -> re.Pattern[str]:
    # fnmatch treats [...] as a character class; escape brackets so ids match literally.
    escaped = pattern.replace("[", "\0L").replace("]", "\0R")
    rx = fnmatch.translate(escaped).replace("\0L", r"\[").replace("\0R", r"\]")
    return re.compile(rx)


# ------------------------------------------------------------------------------------------
# The verdict on a case an expectation covers


@dataclass(frozen=True)
class Settled:
    """What becomes of a case: ``outcome`` passed | failed | xfailed | xpassed, the message
    (a failure outside its bound says which finding and model it broke) and the finding hit."""

    outcome: str
    message: str | None = None
    finding: str | None = None
    expectation: AnyExpectation | None = None


#: Judges a case's outputs under tolerance options: (passed, failure message), or None when the
#: case compared nothing a tolerance judges (a rejected desc, a wrong shape)
Rejudge = Callable[[ToleranceOptions], "tuple[bool, str | None] | None"]


def settle(
    expectations: Iterable[AnyExpectation],
    facts: CaseFacts,
    status: str,
    message: str | None,
    rejudge: Rejudge | None = None,
    nan: bool = False,
) -> Settled:
    """The outcome of a case that ended ``status`` (passed | failed | skipped) with ``message``.

    Of the expectations covering it (in file order), the first that explains a failure makes it
    a known finding (xfailed): a ``fails`` one whose ``message`` (if any) matches, a ``meets``
    one whose model ``rejudge`` passes. A failure none explains stays a failure; when one covered
    it, the message says which bound it broke. A pass under a ``fails`` expectation without a
    ``message`` is xpassed (the entry may be stale), under any other simply passed. ``nan``: the
    outputs hold a NaN where the reference is a number, which a ``nan: false`` entry does not
    explain."""
    covering = [e for e in expectations if e.covers(facts)]
    if not covering or status == "skipped":
        return Settled(status, message)
    if status == "passed":
        # a pass under a plain ``fails`` entry means it may be stale; one bounded by ``message``
        # says how its cases fail when they do (F12: some descs of the kind are refused), and a
        # ``meets`` one how far they may err: a pass is a pass there
        first = covering[0]
        stale = first.fails and first.message is None
        return Settled("xpassed" if stale else "passed", None, None, first)
    broken: list[str] = []
    for e in covering:
        if e.fails:
            if nan and not e.nan:
                broken.append(f"its failure is not {e.finding}'s (a NaN where the reference is a number)")
            elif e.message is None or (message and e.message.search(message)):
                return Settled("xfailed", message, e.finding, e)
            else:
                broken.append(f"its failure is not {e.finding}'s (message must match /{e.message.pattern}/)")
            continue
        assert e.meets is not None
        verdict = rejudge(e.meets) if rejudge else None
        label = e.meets.label()
        if verdict is None:
            broken.append(f"{e.finding} bounds it by the {label} model, which judges no outputs here")
        elif verdict[0]:
            return Settled("xfailed", f"{message} (within {e.finding}'s bound: meets {label})", e.finding, e)
        else:
            broken.append(f"outside {e.finding}'s bound: fails the {label} model too: {verdict[1]}")
    return Settled(
        "failed", f"{message}; known finding does not explain it: {'; '.join(broken)}", None, covering[0]
    )


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
#: ``explained`` (the page and section that explain a finding) and ``reproducer`` (its
#: reproducer under cases/) are for readers: the implementations table links them
#: (``dmlconform implementations``); the verdict does not read them


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
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader with line numbers
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
    if nan is not True and (nan is not False or meets is not None):
        raise err(
            "nan", f"finding {fid}: 'nan: false' (a bug that never makes a NaN) goes with 'fails: true'"
        )
    if meets is None and message is None:
        for cond in conds:
            if set(cond) <= BROAD:
                raise err(
                    "when",
                    f"finding {fid}: 'fails: true' over {_wide(cond)} would hide any regression there: "
                    "narrow 'when' (a member, reduction_length, regime, relation, rule or id), or bound it "
                    "with 'message:' or 'meets: MODEL'",
                )
    return Bound(fid, reason.strip(), tuple(conds), at, source, meets is None, meets, message, nan)


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
        elif key == "id":
            cond[key] = Test("glob", tuple(str(v) for v in (value if isinstance(value, list) else [value])))
        elif key == "reduction_length" or key in members or key in _facts_of(spec, operators):
            cond[key] = _value_test(value, key, bad)
        else:
            where = "the named operators" if operators else "any operator"
            raise bad(key, f"not a case field ({', '.join(CASE_FIELDS)}), a member or a data fact of {where}")
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


def _facts_of(spec: Any, operators: list[Any] | None) -> set[str]:
    """The data facts (kernel registry ``fact_names``) of the operators' kernels."""
    named = {kernel_named(op) for op in (operators or spec.operators.values())}
    return {f for name in named if name in kernels.KERNELS for f in kernels.KERNELS[name].fact_names}


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
