"""Policy options, each declared once: a dataclass field whose metadata (made by :func:`option`)
says what it means and where it can be set.

The declarations are the fields of :class:`~connmgr.core.config.PolicyConfig` (every policy
option) and of :class:`~connmgr.aio.options.PolicyOptions` (the two keywords only the drop-in
clients take). Everything else is derived from them by :func:`declared_options`: the parsing of
``--set KEY=VALUE`` text (:meth:`OptionSpec.parse`), which keywords the drop-in clients accept
and their type checks (:meth:`OptionSpec.check`), the CLI's help and the options tables of
``docs/drop-in-clients.md`` (both rendered by :mod:`connmgr.docblocks`; a test fails when the
doc differs). Adding an option is adding one field.

How a value is parsed and which Python values a keyword accepts follow from the field's
annotation (:data:`VALUE_KINDS`); an annotation with no kind raises when the declaring module is
imported, naming the field.
"""

from __future__ import annotations

import enum
import functools
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

from connmgr.core.endpoint import Endpoint, parse_bootstrap
from connmgr.errors import ConfigError

_NONE_TEXTS = ("none", "null", "")
_TRUE_TEXTS = ("true", "1", "yes", "on")
_FALSE_TEXTS = ("false", "0", "no", "off")


@dataclass(frozen=True, slots=True)
class ValueKind:
    """How an option's value is written as text and which Python values it takes."""

    expected: str
    """What a keyword argument must be, for type errors: ``"int or None"``."""
    parse: Callable[[str, str], object]
    """``(name, text) -> value``; raises :class:`ConfigError` naming ``name`` and ``text``."""
    accepts: Callable[[object], bool]


def _is_int(value: object) -> bool:
    # bool is an int subclass: True must not pass for connection_linger_ms and friends.
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE_TEXTS:
        return True
    if lowered in _FALSE_TEXTS:
        return False
    raise ConfigError(f"{name}={text!r}: expected true or false")


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r}: expected an integer") from None


def _parse_optional_int(name: str, text: str) -> int | None:
    return None if text.strip().lower() in _NONE_TEXTS else _parse_int(name, text)


def _parse_optional_str(name: str, text: str) -> str | None:
    return None if text.strip().lower() in _NONE_TEXTS else text


def _parse_node_ids(name: str, text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"{name}={text!r}: expected node ids like 3,1,-2") from None


BOOL = ValueKind("bool", _parse_bool, lambda v: isinstance(v, bool))
INT = ValueKind("int", _parse_int, _is_int)
OPTIONAL_INT = ValueKind("int or None", _parse_optional_int, lambda v: v is None or _is_int(v))
STR = ValueKind("str", lambda name, text: text, lambda v: isinstance(v, str))
OPTIONAL_STR = ValueKind(
    "str or None", _parse_optional_str, lambda v: v is None or isinstance(v, str)
)
NODE_IDS = ValueKind(
    "a tuple of node ids (int)",
    _parse_node_ids,
    lambda v: isinstance(v, tuple) and all(_is_int(x) for x in v),
)
ENDPOINTS = ValueKind(
    "a tuple of Endpoint",
    lambda name, text: parse_bootstrap(text),
    lambda v: isinstance(v, tuple) and all(isinstance(x, Endpoint) for x in v),
)


@functools.cache
def enum_kind(cls: type[enum.Enum]) -> ValueKind:
    """The kind of an enum-typed option: written as a member's value, case-insensitively
    (one kind per enum, so specs derived twice compare equal)."""
    values = " or ".join(str(member.value) for member in cls)

    def parse(name: str, text: str) -> enum.Enum:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ConfigError(f"{name}={text!r}: expected {values}") from None

    return ValueKind(cls.__name__, parse, lambda v: isinstance(v, cls))


VALUE_KINDS: Mapping[object, ValueKind] = {
    bool: BOOL,
    int: INT,
    int | None: OPTIONAL_INT,
    str: STR,
    str | None: OPTIONAL_STR,
    tuple[int, ...]: NODE_IDS,
    tuple[Endpoint, ...]: ENDPOINTS,
}
"""Option annotations and their kinds; enum annotations get :func:`enum_kind`."""


def value_kind(annotation: object, where: str) -> ValueKind:
    """The kind for an option annotated ``annotation``; :class:`TypeError` naming ``where``
    (``Class.field``) if there is none."""
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return enum_kind(annotation)
    try:
        return VALUE_KINDS[annotation]
    except (KeyError, TypeError):
        raise TypeError(
            f"option {where}: no value kind for annotation {annotation!r}; use one of "
            f"{', '.join(map(repr, VALUE_KINDS))} or an Enum, or add a kind to VALUE_KINDS"
        ) from None


class Reach(enum.Enum):
    """Where an option can be set, besides ``PolicyConfig`` and ``connmgr simulate --set``."""

    MODELS = "models"
    """Nowhere else: the simulator and the policy models only."""
    DROP_IN = "drop-in"
    """Also a keyword of the drop-in clients, proposed as a Kafka client setting."""
    DROP_IN_TESTS = "drop-in, tests"
    """Also a keyword of the drop-in clients, for the test harness only."""

    @property
    def drop_in(self) -> bool:
        return self is not Reach.MODELS


@dataclass(frozen=True, slots=True)
class OptionAbout:
    """The part of an option's declaration its field cannot say (see :func:`option`)."""

    help: str
    reach: Reach
    meaning: str
    keyword: str


_METADATA_KEY = "connmgr.option"


def option(
    help: str, *, reach: Reach = Reach.MODELS, meaning: str = "", keyword: str = ""
) -> dict[str, OptionAbout]:
    """Field metadata declaring an option: ``field(default=..., metadata=option(...))``.

    ``help``: one line, for ``--help``. ``meaning``: the docs' longer text (default ``help``).
    ``keyword``: the drop-in clients' keyword argument, if not the field's name.
    """
    return {_METADATA_KEY: OptionAbout(help, reach, meaning or help, keyword)}


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option as derived from its declaration."""

    name: str
    """The field's name, which is also the ``--set`` key."""
    kind: ValueKind
    required: bool
    """No default: ``default`` is None and means nothing."""
    default: object
    help: str
    meaning: str
    reach: Reach
    keyword: str
    """The drop-in clients' keyword argument."""

    def parse(self, text: str) -> object:
        """``text`` (a ``--set`` value) as this option's value; :class:`ConfigError` saying
        what was expected."""
        return self.kind.parse(self.name, text)

    def check(self, value: object) -> None:
        """Raise :class:`ConfigError` unless ``value`` (a keyword argument) has the option's
        type, naming the keyword, the value, its type and what was expected."""
        if not self.kind.accepts(value):
            raise ConfigError(
                f"{self.keyword}={value!r} ({type(value).__name__}): expected {self.kind.expected}"
            )


def declared_options(cls: type[Any]) -> tuple[OptionSpec, ...]:
    """The options a dataclass declares (its fields with :func:`option` metadata), in field
    order. Raises :class:`TypeError` for an annotation without a :class:`ValueKind`."""
    hints = typing.get_type_hints(cls)
    specs: list[OptionSpec] = []
    for f in fields(cls):
        about = f.metadata.get(_METADATA_KEY)
        if not isinstance(about, OptionAbout):
            continue
        if f.default is not MISSING:
            required, default = False, f.default
        elif f.default_factory is not MISSING:
            required, default = False, f.default_factory()
        else:
            required, default = True, None
        specs.append(
            OptionSpec(
                name=f.name,
                kind=value_kind(hints[f.name], f"{cls.__name__}.{f.name}"),
                required=required,
                default=default,
                help=about.help,
                meaning=about.meaning,
                reach=about.reach,
                keyword=about.keyword or f.name,
            )
        )
    return tuple(specs)
