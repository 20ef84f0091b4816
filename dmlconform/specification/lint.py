"""``spec lint``: schema errors and internal consistency of a spec directory, located at
file:line:column so an editor can jump to them.

The schema checks shape; this module checks what a schema cannot: that a rule names members that
exist and have the right type, that every level is a known level, that support rows are in
order and cover every tensor, that ids are unique, and that a quoted sentence really is in the
seed document it cites (when the seeds are at hand).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dmlconform.specification.rules import KINDS
from dmlconform.specification.spec import (
    SCHEMA_FOR,
    SpecError,
    build_spec,
    expression_errors,
    node_at,
    normalize_level,
    read_spec_files,
    schema_errors,
    spec_file,
)


@dataclass(frozen=True)
class LintFinding:
    file: str
    line: int | None
    column: int | None
    message: str

    def __str__(self) -> str:
        where = self.file + (f":{self.line}:{self.column or 1}" if self.line else "")
        return f"{where}: {self.message}"


def default_seeds_dir(spec_dir: Path) -> Path | None:
    """``../shared/seeds`` beside the repository, where the docs the spec cites live."""
    for base in (spec_dir.resolve().parent, Path.cwd()):
        cand = base.parent / "shared" / "seeds"
        if cand.is_dir():
            return cand
    return None


def lint(spec_dir: Path, seeds_dir: Path | None = None) -> list[LintFinding]:
    """Every finding in ``spec_dir``; raises SpecError only when nothing can be read at all."""
    files = read_spec_files(spec_dir)
    findings: list[LintFinding] = []
    schema_ok = True
    for rel, (data, node) in files.items():
        for err in schema_errors(spec_dir, rel, data, node):
            schema_ok = False
            findings.append(LintFinding(err.file or rel, err.line, err.column, err.message))
    if not schema_ok:
        return findings  # consistency checks assume the schema holds
    for err in expression_errors(spec_dir, *files["common/activations.yaml"]):
        findings.append(LintFinding(err.file or "common/activations.yaml", err.line, err.column, err.message))
    ctx = _Lint(spec_dir, files, findings)
    ctx.check_levels()
    ctx.check_operators()
    ctx.check_quotes(seeds_dir if seeds_dir is not None else default_seeds_dir(spec_dir))
    if not findings:
        try:
            build_spec(spec_dir, {rel: data for rel, (data, _) in files.items()})
        except (SpecError, KeyError, TypeError, ValueError) as exc:
            findings.append(LintFinding(str(spec_dir), None, None, f"spec does not load: {exc}"))
    return findings


class _Lint:
    def __init__(
        self, spec_dir: Path, files: dict[str, tuple[Any, yaml.Node | None]], out: list[LintFinding]
    ):
        self.spec_dir = spec_dir
        self.files = files
        self.out = out
        levels = files["common/feature_levels.yaml"][0]["feature_levels"]
        self.levels = [normalize_level(x["name"]) for x in levels]
        self.data_types = {x["name"] for x in files["common/data_types.yaml"][0]["data_types"]}
        self.common_rule_ids = {
            r["id"]: rel
            for rel in ("common/tensor_desc.yaml", "common/activations.yaml")
            for r in files[rel][0]["rules"]
        }

    def add(self, rel: str, path: list[Any], message: str) -> None:
        node = node_at(self.files[rel][1], path)
        line = node.start_mark.line + 1 if node is not None else None
        col = node.start_mark.column + 1 if node is not None else None
        self.out.append(LintFinding(str(spec_file(self.spec_dir, rel)), line, col, message))

    def level_ok(self, rel: str, path: list[Any], value: Any) -> bool:
        if value is not None and normalize_level(value) not in self.levels:
            self.add(rel, path, f"unknown feature level {value!r}")
            return False
        return True

    def check_levels(self) -> None:
        rel = "common/feature_levels.yaml"
        values = [x["value"] for x in self.files[rel][0]["feature_levels"]]
        for i in range(1, len(values)):
            if values[i] <= values[i - 1]:
                self.add(rel, ["feature_levels", i, "value"], "feature levels are not in increasing order")
        if len(set(self.levels)) != len(self.levels):
            self.add(rel, ["feature_levels"], "duplicate feature level names")
        rel = "common/activations.yaml"
        for i, act in enumerate(self.files[rel][0]["activations"]):
            self.level_ok(rel, ["activations", i, "since"], act["since"])
        for rel in ("common/tensor_desc.yaml", "common/activations.yaml"):
            self.check_rules(rel, self.files[rel][0]["rules"], members=None)

    def check_rules(
        self, rel: str, rules: list[dict[str, Any]], members: dict[str, dict[str, Any]] | None
    ) -> None:
        seen: dict[str, int] = {}
        for i, rule in enumerate(rules):
            rid = rule["id"]
            if rid in seen:
                self.add(rel, ["rules", i, "id"], f"rule id {rid!r} repeats rules[{seen[rid]}]")
            seen[rid] = i
            if members is not None and rid in self.common_rule_ids:
                self.add(
                    rel,
                    ["rules", i, "id"],
                    f"rule id {rid!r} is also a common rule ({self.common_rule_ids[rid]})",
                )
            kind = KINDS.get(rule["kind"])
            if kind is None:
                self.add(rel, ["rules", i, "kind"], f"unknown rule kind {rule['kind']!r}")
                continue
            for param in kind.params:
                if param not in rule:
                    self.add(rel, ["rules", i], f"rule {rid!r} of kind {rule['kind']} needs {param!r}")
            for key in ("since", "until"):
                self.level_ok(rel, ["rules", i, key], rule.get(key))
            if (
                rule.get("since")
                and rule.get("until")
                and self.levels.index(normalize_level(rule["since"]))
                >= self.levels.index(normalize_level(rule["until"]))
            ):
                self.add(rel, ["rules", i], f"rule {rid!r} is never active (since >= until)")
            if members is None:
                continue
            for key in ("members", "member", "to", "of", "length_member"):
                names = rule.get(key)
                for j, name in enumerate(names if isinstance(names, list) else [names] if names else []):
                    path = ["rules", i, key] + ([j] if isinstance(names, list) else [])
                    if name not in members:
                        self.add(rel, path, f"rule {rid!r} names unknown member {name!r}")
            for name in rule.get("fixed_when") or {}:
                if name not in members or members[name]["kind"] != "attribute":
                    self.add(
                        rel,
                        ["rules", i, "fixed_when", name],
                        f"rule {rid!r}: {name!r} is no attribute member",
                    )

    def check_operators(self) -> None:
        names: dict[str, str] = {}
        for rel, (data, _node) in self.files.items():
            if rel in SCHEMA_FOR:
                continue
            op = data["operator"]
            if op in names:
                self.add(rel, ["operator"], f"operator {op} is also defined in {names[op]}")
            names[op] = rel
            members = {m["name"]: m for m in data["members"]}
            if len(members) != len(data["members"]):
                self.add(rel, ["members"], "duplicate member names")
            for i, m in enumerate(data["members"]):
                if m.get("size_member") and m["size_member"] not in members:
                    self.add(rel, ["members", i, "size_member"], f"unknown member {m['size_member']!r}")
                default = m.get("default")
                if isinstance(default, dict) and default.get("length_of") not in members:
                    self.add(rel, ["members", i, "default"], f"unknown member {default.get('length_of')!r}")
            self.level_ok(rel, ["introduced"], data["introduced"])
            self.check_support(rel, data, members)
            self.check_rules(rel, data["rules"], members)
            sem = data["semantics"]
            for key in SEMANTICS_MEMBER_KEYS:
                if isinstance(sem.get(key), str) and sem[key] not in members:
                    self.add(rel, ["semantics", key], f"unknown member {sem[key]!r}")
            for key in (
                *SEMANTICS_REF_KEYS,
                *(k for k in SEMANTICS_MEMBER_KEYS if isinstance(sem.get(k), dict)),
            ):
                ref = sem.get(key)
                name = ref.get("member") or ref.get("where_size_one") if isinstance(ref, dict) else None
                if name and name not in members:
                    self.add(rel, ["semantics", key], f"unknown member {name!r}")

    def check_support(self, rel: str, data: dict[str, Any], members: dict[str, dict[str, Any]]) -> None:
        tensors = {n for n, m in members.items() if m["type"] == "tensor"}
        previous = -1
        for i, row in enumerate(data["support"]):
            if not self.level_ok(rel, ["support", i, "since"], row["since"]):
                continue
            idx = self.levels.index(normalize_level(row["since"]))
            if idx <= previous:
                self.add(rel, ["support", i, "since"], "support rows must be in increasing level order")
            previous = idx
            if i == 0 and normalize_level(row["since"]) != normalize_level(data["introduced"]):
                self.add(rel, ["support", i, "since"], "the first support row must start at 'introduced'")
            for name, cell in row["tensors"].items():
                if name not in tensors:
                    self.add(rel, ["support", i, "tensors", name], f"{name} is not a tensor member")
                for j, dt in enumerate(cell["data_types"]):
                    if dt not in self.data_types:
                        self.add(
                            rel, ["support", i, "tensors", name, "data_types", j], f"unknown data type {dt!r}"
                        )
            for name in sorted(tensors - set(row["tensors"])):
                self.add(rel, ["support", i, "tensors"], f"tensor member {name} has no support cell")

    def check_quotes(self, seeds_dir: Path | None) -> None:
        """A quoted sentence must appear in the seed it cites (whitespace and markdown ignored)."""
        if seeds_dir is None:
            return
        texts: dict[str, str] = {}
        for rel, (data, _node) in self.files.items():
            for path, src in _sources(data, []):
                seed, quote = src.get("seed"), src.get("quote")
                if not seed or not quote:
                    continue
                if seed not in texts:
                    f = seeds_dir / seed
                    texts[seed] = _flat(f.read_text(encoding="utf-8")) if f.is_file() else ""
                if not texts[seed]:
                    self.add(rel, path + ["seed"], f"seed file {seed} not found in {seeds_dir}")
                elif _flat(quote) not in texts[seed]:
                    self.add(rel, path + ["quote"], f"quote not found in {seed}: {quote[:60]!r}")


SEMANTICS_MEMBER_KEYS = (
    "input",
    "scale",
    "bias",
    "fused_add",
    "output",
    "mean_output",
    "variance_output",
    "mean",
    "variance_input",
    "input_gradient",
    "scale_gradient_output",
    "bias_gradient_output",
)
"""``semantics:`` keys whose value is a member name."""

SEMANTICS_REF_KEYS = (
    "center",
    "normalize_variance",
    "epsilon",
    "activation",
    "reduce_axes",
    "cross_channel",
    "local_size",
    "alpha",
    "beta",
    "bias_term",
    "p",
)
"""``semantics:`` keys whose value is ``{member: ...}`` (or a reduce_axes form naming one)."""


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[*`_\\]", "", text)).strip()


def _sources(data: Any, path: list[Any]):
    if isinstance(data, dict):
        for k, v in data.items():
            if k == "source" and isinstance(v, dict):
                yield path + [k], v
            else:
                yield from _sources(v, path + [k])
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _sources(v, path + [i])
