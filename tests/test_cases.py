"""The curated cases in ``cases/``: each one's violated rule ids equal its expected set, at every
level it lists; and every rule of every operator has a curated case that it accepts and one that
it rejects.

Case files (see cases/README.md): ``cases/<operator>/<rule-id>/<name>.yaml`` holds a desc in the
DxDispatch shape (``type`` + ``desc``), a ``comment`` citing the doc sentence, and
``expect: [{level: "5_1", rules: [scale-bias-paired]}, {level: "5_2", rules: []}]``; an empty
``rules`` list means legal. An expectation (or the whole file) may carry ``xfail: reason`` where
the validator disagrees with the docs.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import SPEC

import dmlconform as dc
from dmlconform.specification.yaml_text import YAML_LOADER

CASES_DIR = Path(__file__).resolve().parent.parent / "cases"
OPERATOR_DIRS = {Path(op.path).stem: op.name for op in SPEC.operators.values()}

# Rules that no desc can break alone, with the reason; they still need an accepting case.
UNBREAKABLE = {
    ("MEAN_VARIANCE_NORMALIZATION", "available"): "introduced at 1_0, the first feature level",
    ("BATCH_NORMALIZATION", "available"): "introduced at 1_0, the first feature level",
    ("LOCAL_RESPONSE_NORMALIZATION", "available"): "introduced at 1_0, the first feature level",
    ("LP_NORMALIZATION", "available"): "introduced at 1_0, the first feature level",
    ("MEAN_VARIANCE_NORMALIZATION2", "activation-available"): (
        "every fusable activation (GELU from 5_1 the latest) is available at 6_3, where the operator starts"
    ),
    **{
        (op, "supported-dimension-count"): (
            "the support row admits 1 to 8 dimensions at every level of the operator, the same range as "
            "tensor-dimension-count-range, which reports any other count first"
        )
        for op in (
            "MEAN_VARIANCE_NORMALIZATION2",
            "BATCH_NORMALIZATION_GRAD",
            "BATCH_NORMALIZATION_TRAINING_GRAD",
        )
    },
    ("BATCH_NORMALIZATION_TRAINING", "supported-dimension-count"): (
        "the support row admits 1 to 8 dimensions at every level, the same range as "
        "tensor-dimension-count-range, which reports any other count first (a tensor that breaks a "
        "tensor-desc rule is not checked further)"
    ),
}


def _case_files() -> list[Path]:
    return sorted(p for d in OPERATOR_DIRS for p in (CASES_DIR / d).glob("*/*.yaml"))


def _load(path: Path) -> dict[str, Any]:
    # libyaml: every xdist worker reads the corpus while collecting (2.8 s in pure Python, 0.24 s)
    return yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER)  # noqa: S506 - a safe loader


CASE_FILES = _case_files()
CASES = {path: _load(path) for path in CASE_FILES}


def _id(path: Path) -> str:
    return str(path.relative_to(CASES_DIR).with_suffix(""))


def _expectations() -> list[Any]:
    params = []
    for path, data in CASES.items():
        for exp in data.get("expect") or []:
            reason = exp.get("xfail") or data.get("xfail")
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            params.append(pytest.param(path, exp, marks=marks, id=f"{_id(path)}@{exp.get('level')}"))
    return params


def test_there_are_curated_cases() -> None:
    assert set(OPERATOR_DIRS) <= {p.name for p in CASES_DIR.iterdir() if p.is_dir()}
    for op_dir in OPERATOR_DIRS:
        assert list((CASES_DIR / op_dir).glob("*/*.yaml")), f"no cases for {op_dir}"


@pytest.mark.parametrize("path", CASE_FILES, ids=_id)
def test_case_file_is_well_formed(path: Path) -> None:
    data = CASES[path]
    assert isinstance(data, dict)
    assert set(data) <= {"comment", "type", "desc", "expect", "xfail", "name"}, sorted(data)
    assert isinstance(data.get("comment"), str) and data["comment"].strip(), "a case cites its doc source"
    op_name = OPERATOR_DIRS[path.parent.parent.name]
    desc = dc.load_desc(path)  # the desc loader accepts case files as they are
    assert desc.operator == op_name, f"{path}: type {data['type']} filed under {path.parent.parent.name}"
    op_rules = {r.id for r in SPEC.rules_for(SPEC.operator(op_name))}
    assert path.parent.name in op_rules, f"directory {path.parent.name} is not a rule of {op_name}"
    expect = data["expect"]
    assert isinstance(expect, list) and expect
    levels = [e["level"] for e in expect]
    assert len(set(levels)) == len(levels), "a level listed twice"
    for exp in expect:
        assert set(exp) <= {"level", "rules", "xfail"}
        SPEC.level(exp["level"])
        assert isinstance(exp["rules"], list)
        assert set(exp["rules"]) <= op_rules, f"unknown rule ids {set(exp['rules']) - op_rules}"


@pytest.mark.parametrize(("path", "expectation"), _expectations())
def test_case_verdict(path: Path, expectation: dict[str, Any]) -> None:
    desc = dc.load_desc(path)
    violations = dc.validate(desc, expectation["level"])
    got = {v.rule for v in violations}
    want = set(expectation["rules"])
    shown = "\n".join(f"  {v}" for v in violations) or "  (none)"
    assert got == want, f"{_id(path)} at {expectation['level']}: want {sorted(want)}, got:\n{shown}"


@functools.cache
def _coverage() -> dict[tuple[str, str], dict[str, list[str]]]:
    """(operator, rule) -> {'accepts': [...], 'rejects': [...]}, from the expectations of the cases
    filed under that rule. An accepting expectation is one at a level where the rule is in force
    and does not list the rule; a rejecting one lists it."""
    cov: dict[tuple[str, str], dict[str, list[str]]] = {}
    for path, data in CASES.items():
        op = SPEC.operator(OPERATOR_DIRS[path.parent.parent.name])
        for exp in data["expect"]:
            if exp.get("xfail") or data.get("xfail"):
                continue
            level = SPEC.level(exp["level"])
            for rule in SPEC.rules_for(op):
                if rule.id in exp["rules"]:
                    cov.setdefault((op.name, rule.id), {"accepts": [], "rejects": []})["rejects"].append(
                        f"{_id(path)}@{level.name}"
                    )
                elif rule.id == path.parent.name and rule.active_at(SPEC, level):
                    cov.setdefault((op.name, rule.id), {"accepts": [], "rejects": []})["accepts"].append(
                        f"{_id(path)}@{level.name}"
                    )
    return cov


@pytest.mark.parametrize(
    ("operator", "rule"),
    [(op.name, r.id) for op in SPEC.operators.values() for r in SPEC.rules_for(op)],
)
def test_every_rule_has_accepting_and_rejecting_cases(operator: str, rule: str) -> None:
    cov = _coverage().get((operator, rule), {"accepts": [], "rejects": []})
    assert cov["accepts"], f"no curated case that {operator} rule {rule} accepts (at a level where it holds)"
    if (operator, rule) in UNBREAKABLE:
        assert not cov["rejects"], f"{operator} {rule} was listed as unbreakable but a case rejects it"
    else:
        assert cov["rejects"], f"no curated case that {operator} rule {rule} rejects"


def test_rules_that_change_with_the_level_have_cases_on_both_sides() -> None:
    """A rule with since/until has a case that it rejects where it holds and that also lists a
    level where it does not hold (where the rule is then, by construction, not reported)."""
    for op in SPEC.operators.values():
        for rule in SPEC.rules_for(op):
            if rule.since is None and rule.until is None:
                continue
            found = False
            for path, data in CASES.items():
                if OPERATOR_DIRS[path.parent.parent.name] != op.name:
                    continue
                levels = [SPEC.level(e["level"]) for e in data["expect"]]
                rejects = any(rule.id in e["rules"] for e in data["expect"])
                if rejects and any(not rule.active_at(SPEC, lv) for lv in levels):
                    found = True
                    break
            assert found, f"{op.name} {rule.id}: no case that spans the level where it changes"
