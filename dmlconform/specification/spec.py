"""Load the spec directory (YAML, schema-checked) into typed, immutable objects.

Everything downstream (validator, generators, reference, tolerance, spec-diff) reads the spec
through these objects, never the YAML, so the file format can evolve in one place.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from functools import total_ordering
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from dmlconform.specification.expr import ExprError, compile_expr
from dmlconform.specification.yaml_text import YAML_LOADER, refuse_deep

PACKAGE_DIR = Path(__file__).resolve().parent.parent
LEVEL_PREFIX = "DML_FEATURE_LEVEL_"


class SpecError(Exception):
    """A spec file that cannot be used; ``file``/``line``/``column`` locate it when known."""

    def __init__(
        self, message: str, file: str | None = None, line: int | None = None, column: int | None = None
    ):
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = self.file or ""
        if self.line is not None:
            where += f":{self.line}:{self.column or 1}"
        return f"{where}: {self.message}" if where else self.message


class UnknownLevel(ValueError):
    pass


class UnknownOperator(KeyError):
    """A name no operator of the spec goes by. A KeyError (a lookup by name), whose message reads
    as written: str() of a plain KeyError quotes it."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def default_spec_dir() -> Path:
    """The installed copy (wheel) or the repository's ``spec/`` (source checkout, editable)."""
    env = os.environ.get("DMLCONFORM_SPEC_DIR")
    if env:
        return Path(env)
    installed = PACKAGE_DIR / "_spec"
    if installed.is_dir():
        return installed
    return PACKAGE_DIR.parent / "spec"


# --------------------------------------------------------------------------------------------
# Spec objects


@total_ordering
@dataclass(frozen=True)
class FeatureLevel:
    """A DML feature level: ordered by its place in the spec's list (4_0 < 6_4), so that "at or
    below the level under test" is a comparison of objects, not of names looked up again."""

    name: str
    value: int
    directml: str
    max_dimension_count: int
    index: int

    def __str__(self) -> str:
        return self.name

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, FeatureLevel):
            return NotImplemented
        return self.index < other.index


@dataclass(frozen=True)
class DataType:
    name: str
    size: float
    numpy: str | None
    is_float: bool = False
    since: str | None = None
    value: int | None = None  # DML_TENSOR_DATA_TYPE, for descs packed for DirectML itself


@dataclass(frozen=True)
class TensorFlag:
    name: str
    value: int
    inputs_only: bool = False


@dataclass(frozen=True)
class ActivationParameter:
    name: str
    default: float | None = None


@dataclass(frozen=True)
class Activation:
    name: str
    since: str
    formula: str
    parameters: tuple[ActivationParameter, ...]
    branch_points: tuple[Any, ...] = ()
    cancellation: str | None = None  # error scale for the tolerance model (activations.yaml)
    value: int | None = None  # DML_OPERATOR_TYPE; parameters are in its desc struct's order
    extrema: tuple[Any, ...] = ()  # interior minima and maxima of a smooth stretch (activations.yaml)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)


def _resolve_points(points: tuple[Any, ...], values: dict[str, Any]) -> list[float]:
    """Spec points as numbers, parameter references taken from ``values`` (a parameter with no
    value is skipped)."""
    out = []
    for bp in points:
        if isinstance(bp, dict):
            v = values.get(bp["parameter"])
            if v is None:
                continue
            out.append(-float(v) if bp.get("negate") else float(v))
        else:
            out.append(float(bp))
    return out


def resolve_branch_points(act: Activation, values: dict[str, Any]) -> list[float]:
    """``act``'s spec ``branch_points`` as numbers (parameter references from ``values``)."""
    return _resolve_points(act.branch_points, values)


def resolve_bounding_points(act: Activation, values: dict[str, Any]) -> list[float]:
    """Where ``act`` may take its extreme value over an interval other than at the interval's
    ends: its branch points (a one-sided limit at a jump) and its interior ``extrema`` (GELU's
    minimum). The tolerance model bounds an element's error by the activation's largest change
    over the error interval, which these points and the ends hold; data generation draws values
    near the branch points only."""
    return _resolve_points(act.branch_points + act.extrema, values)


@dataclass(frozen=True)
class Member:
    name: str
    kind: str  # input | output | attribute
    type: str  # tensor | bool | uint | float | uint_array | activation
    nullable: bool = False
    default: Any = None
    size_member: str | None = None
    source: dict[str, Any] = field(default_factory=dict, compare=False)
    #: value classes generated legal descs draw this number attribute from (``draw:``); the
    #: rules alone say what is legal, this only keeps numeric cases in the formula's domain
    draw: tuple[float, ...] = ()


@dataclass(frozen=True)
class TensorSupport:
    dimension_counts: tuple[int, ...]
    data_types: tuple[str, ...]


@dataclass(frozen=True)
class SupportRow:
    since: str
    tensors: dict[str, TensorSupport]
    source: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Rule:
    """One documented constraint: a kind from the closed vocabulary in ``rules`` plus its
    parameters. ``since``/``until`` bound the levels where it holds (until is exclusive)."""

    id: str
    kind: str
    params: dict[str, Any]
    source: dict[str, Any]
    since: str | None = None
    until: str | None = None
    scope: str = "operator"  # operator | tensor | activation
    inferred: bool = False
    why: str | None = None
    text: str | None = None

    def active_at(self, spec: Spec, level: FeatureLevel) -> bool:
        if self.since is not None and level < spec.level(self.since):
            return False
        return not (self.until is not None and level >= spec.level(self.until))

    def source_text(self) -> str:
        return format_source(self.source)


def format_source(src: dict[str, Any]) -> str:
    """A short citation: ``PAGE, section S (seed F)`` or ``doc, section``."""
    if not src:
        return ""
    parts = [src.get("page") or src.get("doc") or ""]
    if src.get("section"):
        parts.append(f"section {src['section']}")
    text = ", ".join(p for p in parts if p)
    if src.get("seed"):
        text += f" (seed {src['seed']})"
    return text


@dataclass(frozen=True)
class Relation:
    """A metamorphic relation of an operator (its ``relations:`` section), checked by the suite's
    metamorphic items.

    ``kind`` is ``same_output_as`` (the desc, changed by ``set``/``drop``, run as ``operator``
    gives the same ``compare`` outputs), ``shift_invariant`` (adding a constant to ``member``
    leaves the ``compare`` outputs unchanged) or ``chained`` (a desc of ``operator`` built by
    ``map`` -- its member <- the source's member, an output of the source feeding the
    reference's result for it -- plus ``set`` gives the source's ``compare`` outputs). ``when`` forces members
    of the source desc first; ``data_types`` limits the relation to those types.
    ``directional_derivative``: the source's ``compare`` output is the gradient, with respect to
    ``member``, of sum(weights * forward output) for the desc ``map`` builds (``contract`` names
    {source weights input: forward output}); checked by central differences along a random
    direction.
    """

    id: str
    kind: str
    compare: tuple[str, ...]
    when: dict[str, Any] = field(default_factory=dict)
    operator: str | None = None
    set: dict[str, Any] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    member: str | None = None
    text: str = ""
    map: dict[str, str] = field(default_factory=dict)
    data_types: tuple[str, ...] = ()
    contract: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "compare": list(self.compare),
            "when": self.when,
            "operator": self.operator,
            "set": self.set,
            "drop": list(self.drop),
            "member": self.member,
            "text": self.text,
            "map": self.map,
            "data_types": list(self.data_types),
            "contract": self.contract,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Relation:
        return cls(
            id=raw["id"],
            kind=raw["kind"],
            compare=tuple(raw.get("compare") or ("OutputTensor",)),
            when=dict(raw.get("when") or {}),
            operator=raw.get("operator"),
            set=dict(raw.get("set") or {}),
            drop=tuple(raw.get("drop") or ()),
            member=raw.get("member"),
            text=raw.get("text") or "",
            map=dict(raw.get("map") or {}),
            data_types=tuple(raw.get("data_types") or ()),
            contract=dict(raw.get("contract") or {}),
        )


@dataclass(frozen=True)
class Operator:
    name: str
    struct: str
    introduced: str
    members: tuple[Member, ...]
    support: tuple[SupportRow, ...]
    rules: tuple[Rule, ...]
    semantics: dict[str, Any]
    tolerance: dict[str, Any]
    doc_notes: tuple[dict[str, Any], ...]
    summary: str = ""
    path: str = ""
    relations: tuple[Relation, ...] = ()
    operator_type: int | None = None  # DML_OPERATOR_TYPE, for descs packed for DirectML itself
    short_name: str = ""  # MVN1, BNTG, LP: what users type; Spec.operator accepts it

    def member(self, name: str) -> Member | None:
        for m in self.members:
            if m.name == name:
                return m
        return None

    @functools.cached_property
    def tensor_members(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.type == "tensor")

    @property
    def input_members(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.type == "tensor" and m.kind == "input")

    @property
    def output_members(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.type == "tensor" and m.kind == "output")

    def support_row(self, spec: Spec, level: FeatureLevel) -> SupportRow:
        """The row in force at ``level``; the first row for a level before the operator exists,
        so that a desc legal at introduction reports only ``available`` below it."""
        row = self.support[0]
        for candidate in self.support:
            if spec.level(candidate.since) <= level:
                row = candidate
        return row


@dataclass(frozen=True)
class Spec:
    directory: Path
    levels: tuple[FeatureLevel, ...]
    data_types: dict[str, DataType]
    tensor_flags: tuple[TensorFlag, ...]
    activations: dict[str, Activation]
    tensor_rules: tuple[Rule, ...]
    activation_rules: tuple[Rule, ...]
    operators: dict[str, Operator]

    def level(self, name: str | FeatureLevel) -> FeatureLevel:
        if isinstance(name, FeatureLevel):
            return name
        key = normalize_level(name)
        for lv in self.levels:
            if lv.name == key:
                return lv
        known = ", ".join(lv.name for lv in self.levels)
        raise UnknownLevel(f"unknown feature level {name!r} (known: {known})")

    def operator(self, name: str) -> Operator:
        """The operator a user names: its name, with or without DML_OPERATOR_, or its short name,
        in any case (``mvn1``, ``DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1``)."""
        key = name.strip().upper().removeprefix("DML_OPERATOR_")
        op = self.operators.get(key) or self._by_short_name.get(key)
        if op is None:
            known = ", ".join(
                f"{o.name} ({o.short_name})" if o.short_name else o.name
                for _, o in sorted(self.operators.items())
            )
            raise UnknownOperator(f"unknown operator {name!r} (known: {known})")
        return op

    @functools.cached_property
    def _by_short_name(self) -> dict[str, Operator]:
        return {op.short_name: op for op in self.operators.values() if op.short_name}

    def rules_for(self, op: Operator) -> tuple[Rule, ...]:
        """Every rule that binds ``op``: its own, the tensor-desc rules, the activation rules."""
        rules = list(op.rules) + list(self.tensor_rules)
        if any(m.type == "activation" for m in op.members):
            rules += list(self.activation_rules)
        return tuple(rules)

    def levels_from(self, op: Operator) -> tuple[FeatureLevel, ...]:
        start = self.level(op.introduced)
        return tuple(lv for lv in self.levels if lv >= start)


def normalize_level(name: Any) -> str:
    text = str(name).strip()
    text = text.removeprefix(LEVEL_PREFIX).replace(".", "_")
    return text


# --------------------------------------------------------------------------------------------
# Loading


def _parse(text: str) -> tuple[yaml.Node | None, Any]:
    """The document's node tree (for file:line:column in errors) and its data, built from that
    tree: one parse, not a compose and a load of the same text."""
    refuse_deep(text)
    loader = YAML_LOADER(text)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


def _yaml_load(path: Path) -> tuple[Any, yaml.Node | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror or exc}", str(path)) from None
    try:
        node, data = _parse(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise SpecError(
            f"malformed YAML: {getattr(exc, 'problem', None) or exc}",
            str(path),
            mark.line + 1 if mark else None,
            mark.column + 1 if mark else None,
        ) from None
    return data, node


def node_at(node: yaml.Node | None, path: list[Any]) -> yaml.Node | None:
    """The YAML node at a jsonschema-style path, for file:line:column in error messages."""
    for key in path:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if k.value == str(key):
                    nxt = v
                    break
            if nxt is None:
                return node
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            return node
    return node


OVERLAY_FILE = "spec-overlay.yaml"
"""Marks a spec directory that is an overlay of another: ``base`` (a path relative to the
overlay) plus the files listed under ``replace`` (and ``add``) from the overlay directory, minus
those under ``remove``. A spec revision then holds only what differs from the base, and operators
added to the base appear in every revision built on it."""


def _overlay(spec_dir: Path) -> tuple[Path, dict[str, Any]] | None:
    """(base directory, overlay mapping) when ``spec_dir`` holds an overlay marker."""
    marker = spec_dir / OVERLAY_FILE
    if not marker.is_file():
        return None
    data, _ = _yaml_load(marker)
    if not isinstance(data, dict) or not isinstance(data.get("base"), str):
        raise SpecError("an overlay needs 'base: <spec directory>'", str(marker))
    unknown = sorted(set(data) - {"base", "replace", "add", "remove"})
    if unknown:
        raise SpecError(
            f"unknown overlay key {unknown[0]!r} (known: base, replace, add, remove)", str(marker)
        )
    base = (spec_dir / data["base"]).resolve()
    if base == spec_dir.resolve():
        raise SpecError("an overlay cannot be its own base", str(marker))
    if not base.is_dir():
        raise SpecError(f"overlay base {data['base']!r} is not a directory", str(marker))
    return base, data


def spec_paths(spec_dir: Path, _seen: tuple[Path, ...] = ()) -> dict[str, Path]:
    """Every spec file of ``spec_dir`` (relative name -> the file that provides it), overlays
    resolved: a plain directory lists its own ``common/`` files and ``operators/*.yaml``."""
    if spec_dir.resolve() in _seen:
        raise SpecError("overlay bases form a cycle", str(spec_dir / OVERLAY_FILE))
    overlay = _overlay(spec_dir)
    if overlay is None:
        paths = {rel: spec_dir / rel for rel in SCHEMA_FOR}
        for path in sorted((spec_dir / "operators").glob("*.yaml")):
            paths[str(path.relative_to(spec_dir))] = path
        return paths
    base, data = overlay
    marker = str(spec_dir / OVERLAY_FILE)
    paths = spec_paths(base, (*_seen, spec_dir.resolve()))
    for key in ("replace", "add"):
        for rel in data.get(key) or ():
            if key == "replace" and rel not in paths:
                raise SpecError(f"replace: {rel} is not a file of the base {base}", marker)
            if key == "add" and rel in paths:
                raise SpecError(f"add: {rel} is already in the base (use replace)", marker)
            if not (spec_dir / rel).is_file():
                raise SpecError(f"{key}: {rel} not found in the overlay", marker)
            paths[rel] = spec_dir / rel
    for rel in data.get("remove") or ():
        if paths.pop(rel, None) is None:
            raise SpecError(f"remove: {rel} is not a file of the base {base}", marker)
    return paths


def schema_dir(spec_dir: Path) -> Path:
    """Where the JSON Schemas of ``spec_dir`` live: its own ``schema/``, else its base's."""
    if (spec_dir / "schema").is_dir():
        return spec_dir / "schema"
    overlay = _overlay(spec_dir)
    return schema_dir(overlay[0]) if overlay else spec_dir / "schema"


def spec_file(spec_dir: Path, rel: str) -> Path:
    """The file that provides ``rel`` (for messages that name a file)."""
    try:
        return spec_paths(spec_dir).get(rel, spec_dir / rel)
    except SpecError:
        return spec_dir / rel


RULE_KINDS: set[str] = set()
"""The kinds a rule may name, which :func:`_schema` puts in the schemas' ``kind`` enum. Each rule
kind adds its name as it registers (``@kind`` in ``dmlconform.specification.rules``), so that the
vocabulary is written once, as classes: the kinds build on this module, which cannot import
them. Importing any part of ``dmlconform`` loads them first (the package's face imports the
validator), before a spec can load."""


KERNEL_NAMES: set[str] = set()
"""The kernels an operator's ``semantics.kernel`` may name, which :func:`_schema` puts in the
schema's enum: the kernel package's index adds every kernel module's name as it collects them
(``dmlconform.kernels``), so that a kernel is declared once, in its module. Importing any part
of ``dmlconform`` loads the kernels first (the package's face imports them)."""


@functools.lru_cache(maxsize=8)
def _schema(spec_dir: Path, name: str) -> dict[str, Any]:
    """The JSON Schema ``name`` of ``spec_dir``, with :data:`RULE_KINDS` as the enum of a rule's
    ``kind`` and :data:`KERNEL_NAMES` as that of ``semantics.kernel`` (the file lists neither)."""
    path = schema_dir(spec_dir) / name
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError(f"cannot load schema: {exc}", str(path)) from None
    kind = schema.get("$defs", {}).get("rule", {}).get("properties", {}).get("kind")
    if kind is not None:
        if not RULE_KINDS:
            raise SpecError(
                "no rule kind is registered: import dmlconform.specification.rules first", str(path)
            )
        kind["enum"] = sorted(RULE_KINDS)
    kernel = schema.get("properties", {}).get("semantics", {}).get("properties", {}).get("kernel")
    if kernel is not None:
        if not KERNEL_NAMES:
            raise SpecError("no kernel is registered: import dmlconform.kernels first", str(path))
        kernel["enum"] = sorted(KERNEL_NAMES)
    return schema


SCHEMA_FOR = {
    "common/feature_levels.yaml": "feature_levels.schema.json",
    "common/data_types.yaml": "data_types.schema.json",
    "common/tensor_desc.yaml": "rules_file.schema.json",
    "common/activations.yaml": "activations.schema.json",
}


def schema_errors(spec_dir: Path, rel: str, data: Any, node: yaml.Node | None) -> list[SpecError]:
    """Schema violations of one file, each located at file:line:column."""
    schema_name = SCHEMA_FOR.get(rel, "operator.schema.json")
    validator = jsonschema.Draft202012Validator(_schema(spec_dir, schema_name))
    out = []
    for err in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        n = node_at(node, list(err.absolute_path))
        loc = "/".join(map(str, err.absolute_path)) or "(top)"
        out.append(
            SpecError(
                f"{loc}: {err.message}",
                str(spec_file(spec_dir, rel)),
                n.start_mark.line + 1 if n is not None else None,
                n.start_mark.column + 1 if n is not None else None,
            )
        )
    return out


def read_spec_files(spec_dir: Path) -> dict[str, tuple[Any, yaml.Node | None]]:
    """Every spec file by path relative to the spec directory, parsed (no schema check)."""
    if not spec_dir.is_dir():
        raise SpecError("spec directory not found", str(spec_dir))
    paths = spec_paths(spec_dir)
    files = {}
    for rel in SCHEMA_FOR:
        path = paths.get(rel, spec_dir / rel)
        if not path.is_file():
            raise SpecError("missing spec file", str(path))
        files[rel] = _yaml_load(path)
    ops = [rel for rel in paths if rel not in SCHEMA_FOR]
    if not ops:
        raise SpecError("no operator files in operators/", str(spec_dir))
    for rel in ops:
        files[rel] = _yaml_load(paths[rel])
    return files


def expression_errors(spec_dir: Path, data: Any, node: yaml.Node | None) -> list[SpecError]:
    """Activation ``cancellation`` expressions outside the grammar of :mod:`dmlconform.specification.expr`."""
    out = []
    for i, act in enumerate(data.get("activations") or ()):
        text = act.get("cancellation")
        if text is None:
            continue
        names = ("x", *(p["name"] for p in act.get("parameters") or ()))
        try:
            compile_expr(str(text), tuple(sorted(names)))
        except ExprError as exc:
            n = node_at(node, ["activations", i, "cancellation"])
            line, col = (n.start_mark.line + 1, n.start_mark.column + 1) if n is not None else (None, None)
            out.append(
                SpecError(
                    f"activations/{i}/cancellation: {exc}",
                    str(spec_file(spec_dir, "common/activations.yaml")),
                    line,
                    col,
                )
            )
    return out


@functools.lru_cache(maxsize=8)
def _load_spec_cached(spec_dir: Path) -> Spec:
    files = read_spec_files(spec_dir)
    for rel, (data, node) in files.items():
        errors = schema_errors(spec_dir, rel, data, node)
        if errors:
            raise errors[0]
    errors = expression_errors(spec_dir, *files["common/activations.yaml"])
    if errors:
        raise errors[0]
    return build_spec(spec_dir, {rel: data for rel, (data, _) in files.items()})


_DEFAULT: list[Spec] = []


def load_spec(spec_dir: str | Path | None = None) -> Spec:
    """The spec at ``spec_dir`` (default: the bundled one), schema-checked, cached per dir."""
    if spec_dir is None:
        if not _DEFAULT:
            _DEFAULT.append(_load_spec_cached(default_spec_dir().resolve()))
        return _DEFAULT[0]
    return _load_spec_cached(Path(spec_dir).resolve())


def spec_or_default(spec: Spec | None) -> Spec:
    """``spec``, else the bundled one: the public API (``validate``, ``parse_desc``,
    ``load_desc``, ``execute``, ``OperatorDesc.get``) lets a caller omit the spec, internal code
    never does. Each public entry resolves it here once and passes the Spec down, so no
    function deeper in the stack loads a spec of its own."""
    return load_spec() if spec is None else spec


def _rule(raw: dict[str, Any], scope: str) -> Rule:
    reserved = {"id", "kind", "since", "until", "source", "inferred", "why", "text", "note"}
    return Rule(
        id=raw["id"],
        kind=raw["kind"],
        params={k: v for k, v in raw.items() if k not in reserved},
        source=dict(raw.get("source") or {}),
        since=_opt_level(raw.get("since")),
        until=_opt_level(raw.get("until")),
        scope=scope,
        inferred=bool(raw.get("inferred", False)),
        why=raw.get("why"),
        text=raw.get("text") or raw.get("note"),
    )


def _opt_level(value: Any) -> str | None:
    return None if value is None else normalize_level(value)


def build_spec(spec_dir: Path, files: dict[str, Any]) -> Spec:
    levels = _feature_levels(files["common/feature_levels.yaml"])
    dt = files["common/data_types.yaml"]
    data_types = _data_types(dt)
    flags = tuple(
        TensorFlag(x["name"], int(x["value"]), bool(x.get("inputs_only", False))) for x in dt["tensor_flags"]
    )
    act = files["common/activations.yaml"]
    activations = _activations(act)
    tensor_rules = tuple(_rule(r, "tensor") for r in files["common/tensor_desc.yaml"]["rules"])
    activation_rules = tuple(_rule(r, "activation") for r in act["rules"])
    operators: dict[str, Operator] = {}
    paths = spec_paths(spec_dir) if spec_dir.is_dir() else {}
    for rel, data in files.items():
        if not rel.startswith("operators"):
            continue
        path = str(paths.get(rel, spec_dir / rel))
        op = _operator(data, path)
        _check_operator_names(op, operators, path)
        operators[op.name] = op
    return Spec(spec_dir, levels, data_types, flags, activations, tensor_rules, activation_rules, operators)


def _feature_levels(fl: dict[str, Any]) -> tuple[FeatureLevel, ...]:
    return tuple(
        FeatureLevel(str(x["name"]), int(x["value"]), str(x["directml"]), int(x["max_dimension_count"]), i)
        for i, x in enumerate(fl["feature_levels"])
    )


def _data_types(dt: dict[str, Any]) -> dict[str, DataType]:
    return {
        x["name"]: DataType(
            x["name"], x["size"], x.get("numpy"), bool(x.get("float", False)), x.get("since"), x.get("value")
        )
        for x in dt["data_types"]
    }


def _activations(act: dict[str, Any]) -> dict[str, Activation]:
    return {
        x["name"]: Activation(
            x["name"],
            normalize_level(x["since"]),
            x["formula"],
            tuple(ActivationParameter(p["name"], p.get("default")) for p in x.get("parameters", [])),
            tuple(x.get("branch_points", [])),
            x.get("cancellation"),
            x.get("value"),
            tuple(x.get("extrema", [])),
        )
        for x in act["activations"]
    }


def _operator(data: dict[str, Any], path: str) -> Operator:
    """One operators/*.yaml file as an Operator; ``path`` is where its errors point."""
    return Operator(
        name=data["operator"],
        struct=data["struct"],
        introduced=normalize_level(data["introduced"]),
        members=tuple(_member(m) for m in data["members"]),
        support=tuple(_support_row(row) for row in data["support"]),
        rules=tuple(_rule(r, "operator") for r in data["rules"]),
        semantics=dict(data.get("semantics") or {}),
        tolerance=dict(data.get("tolerance") or {}),
        doc_notes=tuple(data.get("doc_notes") or ()),
        summary=data.get("summary", ""),
        path=path,
        relations=tuple(Relation.from_dict(r) for r in data.get("relations") or ()),
        operator_type=(data.get("operator_type") or {}).get("value"),
        short_name=data.get("short_name", ""),
    )


def _member(m: dict[str, Any]) -> Member:
    return Member(
        m["name"],
        m["kind"],
        m["type"],
        bool(m.get("nullable", False)),
        m.get("default"),
        m.get("size_member"),
        dict(m.get("source") or {}),
        tuple(m.get("draw") or ()),
    )


def _support_row(row: dict[str, Any]) -> SupportRow:
    return SupportRow(
        normalize_level(row["since"]),
        {
            name: TensorSupport(tuple(t["dimension_counts"]), tuple(t["data_types"]))
            for name, t in row["tensors"].items()
        },
        dict(row.get("source") or {}),
    )


def _check_operator_names(op: Operator, operators: dict[str, Operator], path: str) -> None:
    """Spec.operator looks an operator up by its name or its short name: each must pick out one."""
    if op.name in operators:
        raise SpecError(f"operator {op.name} defined twice", path)
    for other in operators.values():
        if op.short_name and op.short_name in (other.name, other.short_name):
            raise SpecError(f"operator {op.name}'s short name {op.short_name} is {other.name}'s too", op.path)
        if other.short_name == op.name:
            raise SpecError(f"operator {op.name} is {other.name}'s short name", op.path)
