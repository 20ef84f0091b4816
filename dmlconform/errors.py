"""Violations: errors as values, like jsonschema's ValidationError, for descs that break a rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Violation:
    """One broken rule: which rule, which member (a path such as ``ScaleTensor.Sizes[1]``), why,
    and where the rule is written (the doc page and section, and the seed file)."""

    rule: str
    member: str
    message: str
    source: str
    source_detail: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "member": self.member, "message": self.message, "source": self.source}

    def __str__(self) -> str:
        return f"[{self.rule}] {self.member}: {self.message}"


#: Where an implementation answered a desc: DirectML's CreateOperator, CompileOperator, and the
#: initialization and dispatch of a compiled operator (one stage, ``execute``).
STAGES = ("create", "compile", "execute")


class _Staged(Exception):
    """An answer of an implementation at a stage: where (``stage``, one of :data:`STAGES`) and
    with what (``hresult``), kept across a process boundary (pickling)."""

    def __init__(self, message: str = "", *, stage: str | None = None, hresult: int | None = None) -> None:
        super().__init__(message)
        self.stage = stage
        self.hresult = hresult

    def __reduce__(self) -> Any:
        return _rebuild, (type(self), str(self), self.stage, self.hresult)


class Rejected(_Staged):
    """Raised by a backend's ``check`` for a desc it considers illegal. ``stage`` (one of
    :data:`STAGES`) says where it refused and ``hresult`` with what, where the backend knows
    (DirectML: E_INVALIDARG at CompileOperator); None where it does not say (a validator)."""


class Failure(_Staged, RuntimeError):
    """Raised by a backend whose implementation returned a failure at ``stage`` that is no verdict
    on the desc (DirectML: an HRESULT other than E_INVALIDARG or E_NOTIMPL, such as 1.8.0's
    arithmetic overflow 0x8007023E at CompileOperator). A RuntimeError: a case's error as before;
    the acceptance corpus records it as its own outcome, neither accepted nor refused."""


def _rebuild(cls: type, message: str, stage: str | None, hresult: int | None) -> _Staged:
    return cls(message, stage=stage, hresult=hresult)


def hresult_hex(hresult: int) -> str:
    """``0x8007023E``: how an HRESULT is written in answers files, messages and the findings."""
    return f"0x{hresult & 0xFFFFFFFF:08X}"


class Unsupported(Exception):
    """Raised by a backend for a desc it does not implement: the case is skipped, not failed."""


class PlanError(ValueError):
    """A desc lacks what its kernel's plan needs (a member missing or malformed): an illegal desc
    that the validator also rejects. Raised where a desc is read into a plan
    (:func:`dmlconform.plan`), once, so nothing downstream checks members again."""
