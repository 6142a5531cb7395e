"""Each rule of the proposed policy lives in one place, whose docstring opens with the rule:
the index in ``connmgr.policies.proposed``'s docstring names that place, rule by rule."""

from __future__ import annotations

import importlib
import re
from types import ModuleType

import connmgr.policies.proposed as proposed

_ENTRY = re.compile(r"^(\w+)\. (.*?) --\s+:\w+:`~?([\w.]+)`", re.M | re.S)
_RULES = ("a", "b", "c", "d", "e", "f", "g", "h", "h2", "i", "j")


def _resolve(target: str) -> object:
    if target.startswith("ProposedPolicy"):
        target = "connmgr.policies.proposed.policy." + target
    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            found = getattr(found, name)
        return found
    raise AssertionError(f"{target}: nothing to import")


def _index() -> list[tuple[str, str, str]]:
    assert proposed.__doc__ is not None
    return _ENTRY.findall(proposed.__doc__)


def test_the_index_names_one_place_per_rule() -> None:
    entries = _index()
    assert tuple(letter for letter, _, _ in entries) == _RULES
    places = [target for _, _, target in entries]
    assert len(set(places)) == len(places), "two rules share a place"


def test_each_place_opens_with_its_rule() -> None:
    for letter, text, target in _index():
        place = _resolve(target)
        doc = " ".join((place.__doc__ or "").split())
        first_words = " ".join(" ".join(text.split()).split()[:2]).rstrip(":,")
        kind = "module" if isinstance(place, ModuleType) else "definition"
        assert doc.startswith(f"{letter}. {first_words}"), (
            f"rule {letter}: the {kind} {target} does not open with the rule ({doc[:60]!r})"
        )
