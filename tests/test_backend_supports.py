"""What a backend supports, said once (``supports(desc)``), and validation as a declared capability
(``validates = True``): every kind of case honours the first, and only a declared validator gets
validation cases. The README's recipe, copied literally into a file, runs clean."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import REPO, SPEC, dmlconform

from dmlconform.backends.reference import ReferenceBackend
from dmlconform.errors import Rejected, Unsupported
from dmlconform.runner.cases import Selection, collect
from dmlconform.runner.checks import run_case
from dmlconform.runner.guard import ProcessGuard, ThreadGuard, backend_info, support_reason
from dmlconform.specification.desc import OperatorDesc
from dmlconform.tolerance.options import NO_OPTIONS

MVN, MVN1 = "MEAN_VARIANCE_NORMALIZATION", "MEAN_VARIANCE_NORMALIZATION1"


class _Counting(ReferenceBackend):
    """The reference, counting the descs each method was sent, per operator."""

    only = MVN1

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.sent: list[tuple[str, str]] = []

    def supports(self, desc: OperatorDesc) -> Any:
        return True if desc.operator == self.only else f"only {self.only} here, not {desc.operator}"

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> Any:
        self.sent.append(("execute", desc.operator))
        return super().execute(desc, inputs)

    def check(self, desc: OperatorDesc) -> None:
        self.sent.append(("check", desc.operator))
        super().check(desc)


class OnlyMVN(_Counting):
    only = MVN


def _cases(*operators: str) -> list[Any]:
    sel = Selection(level=SPEC.level("6_4"), operators=operators, cases=2, tier="smoke")
    return list(collect(SPEC, sel))


def test_every_kind_skips_what_supports_refuses_and_sends_it_nothing() -> None:
    backend = _Counting()
    cases = _cases(MVN, MVN1)
    assert {c.kind for c in cases if c.operator == MVN} == {"numeric", "validation", "metamorphic"}
    guard = ThreadGuard(backend, None)
    for case in cases:
        result = run_case(case, guard, SPEC, NO_OPTIONS)
        if case.operator == MVN:
            assert result.status == "skipped", (case.id, result.message)
            assert result.message == f"backend does not support this case: only {MVN1} here, not {MVN}"
            assert result.inputs is None  # skipped before any data was made
        else:
            assert result.status == "passed", (case.id, result.message)
    assert {op for _, op in backend.sent} == {MVN1}
    assert {method for method, _ in backend.sent} == {"execute", "check"}


def test_a_derived_desc_the_backend_does_not_support_skips_the_relation() -> None:
    """MVN's CrossChannel relations run MVN1 too: a backend of MVN alone skips them, naming the
    derived desc, and the MVN1 desc is never executed."""
    backend = OnlyMVN()
    cases = [c for c in _cases(MVN) if c.kind == "metamorphic" and c.relation.operator == MVN1]
    assert cases
    for case in cases:
        result = run_case(case, ThreadGuard(backend, None), SPEC, NO_OPTIONS)
        assert result.status == "skipped", (case.id, result.message)
        assert result.message.endswith(f"not {MVN1} (its derived {MVN1} desc)"), result.message
    assert ("execute", MVN1) not in backend.sent


class _Answers(ReferenceBackend):
    answer: Any = True

    def supports(self, desc: OperatorDesc) -> Any:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "status", "message"),
    [
        (True, "passed", None),
        (None, "passed", None),
        ("not on Tuesdays", "skipped", "backend does not support this case: not on Tuesdays"),
        (False, "skipped", "supports() returned False"),
        (Unsupported("no FLOAT16"), "skipped", "backend does not support this case: no FLOAT16"),
        (RuntimeError("boom"), "failed", "backend supports() raised RuntimeError: boom"),
    ],
)
def test_supports_answers(answer: Any, status: str, message: str | None) -> None:
    backend = _Answers()
    backend.answer = answer
    case = next(c for c in _cases(MVN1) if c.kind == "numeric")
    result = run_case(case, ThreadGuard(backend, None), SPEC, NO_OPTIONS)
    assert result.status == status, result.message
    assert (result.message is None) if message is None else (message in result.message)


def test_support_reason_normalizes_answers() -> None:
    assert support_reason(True) is None and support_reason(None) is None
    assert support_reason("  FLOAT32 only ") == "FLOAT32 only"
    assert "returned False" in (support_reason(False) or "")
    assert support_reason("") and support_reason(0)


def test_supports_is_asked_in_the_isolated_worker_too() -> None:
    guard = ProcessGuard("test_backend_supports:_Counting", {}, 60)
    try:
        cases = [c for c in _cases(MVN, MVN1) if c.kind == "numeric"]
        results = {c.operator: run_case(c, guard, SPEC, NO_OPTIONS) for c in cases}
        assert results[MVN].status == "skipped" and f"not {MVN}" in results[MVN].message
        assert results[MVN1].status == "passed", results[MVN1].message
    finally:
        guard.close()


class RefusesAtCompile(ReferenceBackend):
    """Refuses every desc where DirectML's CompileOperator would, with its HRESULT."""

    validates = True

    def check(self, desc: OperatorDesc) -> None:
        raise Rejected("CompileOperator returned E_INVALIDARG", stage="compile", hresult=0x80070057)


def test_an_isolated_refusal_keeps_its_stage_and_hresult() -> None:
    """What the release sweep reads of a refusal (acceptance.ask) survives the worker's pipe."""
    desc = _cases(MVN1)[0].desc
    guard = ProcessGuard("test_backend_supports:RefusesAtCompile", {}, 60)
    try:
        with pytest.raises(Rejected) as refused:
            guard.call("check", desc)
    finally:
        guard.close()
    assert (str(refused.value), refused.value.stage, refused.value.hresult) == (
        "CompileOperator returned E_INVALIDARG",
        "compile",
        0x80070057,
    )


class CheckWithoutDeclaring:
    """The old recipe's shape: a check() that was meant to skip, and no validates = True."""

    name = "undeclared"
    feature_level = "6_4"

    def execute(self, desc: OperatorDesc, inputs: Mapping[str, np.ndarray]) -> Any:
        return ReferenceBackend().execute(desc, inputs)

    def check(self, desc: OperatorDesc) -> None:
        raise Unsupported("meant to skip")


def test_validation_is_declared_not_implied_by_check() -> None:
    assert backend_info(ReferenceBackend()).validates  # the built-in validators declare it
    info = backend_info(CheckWithoutDeclaring())
    assert info.has_check and not info.validates
    noted = type("Noted", (CheckWithoutDeclaring,), {"validates": "yes"})  # only True declares it
    assert not backend_info(noted()).validates
    declared = type("Declared", (CheckWithoutDeclaring,), {"validates": True})
    assert backend_info(declared()).validates


def test_check_without_validates_runs_no_validation_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "undeclared.py").write_text("from test_backend_supports import CheckWithoutDeclaring as B\n")
    proc = dmlconform(
        "run", "--backend", "undeclared:B", "--operators", MVN1, "--cases", "2", "--tier", "smoke",
        "--report", "r", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "defines check() but not validates = True" in proc.stdout
    kinds = {c["kind"] for c in json.loads((tmp_path / "r" / "results.json").read_text())["cases"]}
    assert kinds == {"numeric", "metamorphic"}


def readme_recipe() -> str:
    """The Python block of the README's "Plug in your own backend", exactly as written."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Plug in your own backend") :]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "the README's backend recipe has no python block"
    return found.group(1)


def test_the_readme_recipe_copied_literally_runs_clean(tmp_path: Path) -> None:
    """Only MVN1 cases run (the ones with a fused activation it lacks are skipped), and every
    other operator's case is skipped with the recipe's own reason, in every kind."""
    (tmp_path / "mybackend.py").write_text(readme_recipe())
    proc = dmlconform(
        "run", "--backend", "mybackend:MyBackend", "--report", "r", "--max-elements", "16384", cwd=tmp_path
    )  # size cases to 16384: the 2^20 ones add 25 s and nothing about the recipe
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["summary"]["failed"] == results["summary"]["errors"] == 0
    ran = [c for c in results["cases"] if c["outcome"] == "passed"]
    assert ran and {c["operator"] for c in ran} == {MVN1}
    assert {c["kind"] for c in ran} == {"numeric", "metamorphic"}
    others = [c for c in results["cases"] if c["operator"] != MVN1]
    assert {c["kind"] for c in others} == {"numeric", "metamorphic"}  # validates = False: no validation
    for c in others:
        assert c["outcome"] == "skipped"
        assert c["message"] == f"backend does not support this case: {c['operator']} is not implemented"
    for c in results["cases"]:
        if c["operator"] == MVN1 and c["outcome"] == "skipped":
            assert re.fullmatch(
                r"backend does not support this case: fused ACTIVATION_\w+ is not implemented", c["message"]
            )
