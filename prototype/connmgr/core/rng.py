"""The randomness a policy is given (never drawn from a global: runs replay exactly)."""

from __future__ import annotations

from collections.abc import MutableSequence
from typing import Protocol, TypeVar

_T = TypeVar("_T")


class RandomSource(Protocol):
    """The part of ``random.Random`` policies use; pass a seeded instance."""

    def random(self) -> float: ...

    def randrange(self, start: int, stop: int | None = ..., step: int = ...) -> int: ...

    def shuffle(self, x: MutableSequence[_T]) -> None: ...
