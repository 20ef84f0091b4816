"""What a kind's breaker works with: the :class:`Chooser` every random decision comes from and
the :class:`Overrides` it asks of the legal base.

They sit here, beside the kinds and below the generator, so that each kind can carry its own
breaker (``RuleKind.why_unbreakable``, ``break_plan``, ``break_desc``) without the
specification importing the generator; the generator draws its legal descs through the same
:class:`Chooser`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Chooser(Protocol):
    """Where every random decision comes from. ``key`` names a class of choice (dtype of group 0,
    layout of OutputTensor...); the seeded chooser deals keyed choices round-robin from a shuffled
    deck, hypothesis ignores keys. Options are ordered simplest first, so hypothesis shrinks
    toward packed layouts, no activation and small sizes."""

    def integer(self, lo: int, hi: int) -> int: ...

    def choice(self, options: Sequence[T], key: str | None = None) -> T: ...

    def boolean(self) -> bool: ...

    def permutation(self, items: Sequence[T]) -> list[T]: ...


@dataclass
class Overrides:
    """What a breaker asks of the legal base: members forced present or absent, a rank component
    or size group forced to a rank, a dtype group or one tensor to a data type, attribute values
    forced. The rest of the base is drawn as for any legal desc, so it stays legal around the one
    broken relation."""

    force_present: frozenset[str] = frozenset()
    force_absent: frozenset[str] = frozenset()
    comp_rank: dict[int, int] = field(default_factory=dict)
    group_rank: dict[int, int] = field(default_factory=dict)
    dtype_group: dict[int, str] = field(default_factory=dict)
    dtype_tensor: dict[str, str] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)  # attribute values forced on the base
