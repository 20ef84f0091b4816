"""Where every random decision of the desc generators comes from.

Two drivers share the generators through the :class:`~dmlconform.specification.rules.Chooser`
interface (it lives beside the rule kinds, whose breakers draw through it too):
:class:`RandomChooser` (seeded, deterministic in any process; ``choice(..., key=...)`` deals
from shuffled decks, so every class of a choice appears within a few descs) and the hypothesis
chooser in ``dmlconform.generation.strategies``.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


class RandomChooser:
    """A seeded :class:`random.Random` plus per-key decks (round-robin in shuffled order)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.decks: dict[tuple[str, int], list[int]] = {}

    def integer(self, lo: int, hi: int) -> int:
        return lo + int(self.rng.random() * (hi - lo + 1)) if hi > lo else lo

    def choice(self, options: Sequence[T], key: str | None = None) -> T:
        n = len(options)
        if n == 1:
            return options[0]
        if key is None:
            return options[int(self.rng.random() * n)]
        deck = self.decks.get((key, n))
        if not deck:
            deck = list(range(n))
            self.rng.shuffle(deck)
            self.decks[(key, n)] = deck
        return options[deck.pop()]

    def boolean(self) -> bool:
        return self.rng.random() < 0.5

    def permutation(self, items: Sequence[T]) -> list[T]:
        out = list(items)
        self.rng.shuffle(out)
        return out


def stable_seed(*parts: Any) -> int:
    """A seed that is the same in every process (``hash()`` is salted per process)."""
    return zlib.crc32("|".join(map(str, parts)).encode("utf-8"))


def seeded_chooser(*parts: Any) -> RandomChooser:
    return RandomChooser(random.Random(stable_seed(*parts)))
