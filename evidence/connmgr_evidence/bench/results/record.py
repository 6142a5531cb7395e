"""Typed records: a result's columns declared once, on the fields of a frozen dataclass.

A report's result (a comparison, a headline row, a regression ...) is a frozen dataclass
that subclasses :class:`Record`; each field's annotation says which columns it stands for:

- a plain column: ``kind: Text``, ``points: Count``, ``ratio: MaybeReal``, ``regressed:
  Flag`` (the aliases below carry the :class:`~connmgr_evidence.bench.results.schema.ColumnType`);
- one column per key of a mapping: ``Annotated[Mapping[str, float | None], Keyed(ROLES,
  "opened_{}", DOUBLE)]`` (or a nested record per key, whose columns are suffixed);
- one boolean column per key of a set of flags: ``Annotated[tuple[str, ...], Flags(KEYS,
  "worse_{}")]``;
- a list of texts carried with the record but in no table: ``Annotated[tuple[str, ...],
  TEXTS]``.

From that one declaration come the record's table columns (:meth:`Record.columns`, in field
order, with their types: the Parquet schema and the Markdown header of the tables built
from it), a subset of them by name (:meth:`Record.pick`), the record from a flat mapping
such as a collected Spark row (:meth:`Record.from_record`, which ignores keys it does not
name) and back (:meth:`Record.record`, whose keys are the column names).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Annotated, Any, Self, get_args, get_origin, get_type_hints

from connmgr_evidence.bench.results.schema import BOOL, DOUBLE, LONG, STRING, ColumnType

Columns = tuple[tuple[str, ColumnType], ...]
"""(name, type) per column, in order: what a :class:`~connmgr_evidence.bench.report.table.Table`
takes."""


@dataclass(frozen=True, slots=True)
class Scalar:
    """One column, named as the field."""

    type: ColumnType

    def columns(self, name: str) -> Columns:
        return ((name, self.type),)

    def read(self, name: str, record: Mapping[str, Any]) -> Any:
        return record[name]

    def write(self, name: str, value: Any, flat: dict[str, Any]) -> None:
        flat[name] = value


@dataclass(frozen=True, slots=True)
class Texts:
    """Texts carried with the record (a tuple; a list is accepted), in no table."""

    def columns(self, name: str) -> Columns:
        return ()

    def read(self, name: str, record: Mapping[str, Any]) -> Any:
        return tuple(record[name])

    def write(self, name: str, value: Any, flat: dict[str, Any]) -> None:
        flat[name] = value


@dataclass(frozen=True, slots=True)
class Keyed:
    """A mapping with one entry per key of ``keys``, flattened to the columns
    ``pattern.format(key)`` of type ``value``; or, if ``value`` is a :class:`Record` type,
    to that record's columns, each prefixed by ``pattern.format(key)``."""

    keys: tuple[str, ...]
    pattern: str
    value: ColumnType | type[Record]

    def columns(self, name: str) -> Columns:
        if isinstance(self.value, ColumnType):
            return tuple((self.pattern.format(k), self.value) for k in self.keys)
        inner = self.value.columns()
        return tuple((self.pattern.format(k) + n, t) for k in self.keys for n, t in inner)

    def read(self, name: str, record: Mapping[str, Any]) -> Any:
        if isinstance(self.value, ColumnType):
            return {k: record[self.pattern.format(k)] for k in self.keys}
        inner = self.value
        return {k: inner.from_record(_Prefixed(record, self.pattern.format(k))) for k in self.keys}

    def write(self, name: str, value: Any, flat: dict[str, Any]) -> None:
        for k in self.keys:
            if isinstance(self.value, ColumnType):
                flat[self.pattern.format(k)] = value[k]
            else:
                prefix = self.pattern.format(k)
                flat |= {prefix + n: v for n, v in value[k].record().items()}


@dataclass(frozen=True, slots=True)
class Flags:
    """The keys (of ``keys``, in their order) whose flag is set: one boolean column
    ``pattern.format(key)`` per key."""

    keys: tuple[str, ...]
    pattern: str

    def columns(self, name: str) -> Columns:
        return tuple((self.pattern.format(k), BOOL) for k in self.keys)

    def read(self, name: str, record: Mapping[str, Any]) -> Any:
        return tuple(k for k in self.keys if record[self.pattern.format(k)])

    def write(self, name: str, value: Any, flat: dict[str, Any]) -> None:
        flat |= {self.pattern.format(k): k in value for k in self.keys}


Spec = Scalar | Texts | Keyed | Flags

Text = Annotated[str, Scalar(STRING)]
MaybeText = Annotated[str | None, Scalar(STRING)]
Count = Annotated[int, Scalar(LONG)]
MaybeCount = Annotated[int | None, Scalar(LONG)]
Real = Annotated[float, Scalar(DOUBLE)]
MaybeReal = Annotated[float | None, Scalar(DOUBLE)]
Flag = Annotated[bool, Scalar(BOOL)]
TEXTS = Texts()


class _Prefixed(Mapping[str, Any]):
    """``record``'s keys that start with ``prefix``, without it (a nested record's view)."""

    def __init__(self, record: Mapping[str, Any], prefix: str) -> None:
        self._record, self._prefix = record, prefix

    def __getitem__(self, key: str) -> Any:
        return self._record[self._prefix + key]

    def __iter__(self) -> Any:
        n = len(self._prefix)
        return (k[n:] for k in self._record if k.startswith(self._prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Record:
    """The base of a typed record (a frozen dataclass whose fields are annotated as the
    module docstring says)."""

    __slots__ = ()

    @classmethod
    def columns(cls) -> Columns:
        """Every table column of the record, in field order, with its type."""
        return tuple(c for name, spec in _specs(cls) for c in spec.columns(name))

    @classmethod
    def pick(cls, *names: str) -> Columns:
        """The columns ``names``, in that order, with their declared types; a name the
        record does not declare raises ``KeyError`` naming the record."""
        types = dict(cls.columns())
        missing = [n for n in names if n not in types]
        if missing:
            raise KeyError(f"{cls.__name__} has no column {missing}; it has {list(types)}")
        return tuple((n, types[n]) for n in names)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Self:
        """The record from a flat mapping holding at least its columns (others ignored);
        values are taken as they are (a table coerces them to the column types)."""
        return cls(**{name: spec.read(name, record) for name, spec in _specs(cls)})

    def record(self) -> dict[str, Any]:
        """The flat mapping, keyed by :meth:`columns`' names (and any texts' fields)."""
        flat: dict[str, Any] = {}
        for name, spec in _specs(type(self)):
            spec.write(name, getattr(self, name), flat)
        return flat


_SPECS: dict[type[Record], tuple[tuple[str, Spec], ...]] = {}


def _specs(cls: type[Record]) -> tuple[tuple[str, Spec], ...]:
    """(field name, its spec) per dataclass field of ``cls``; a field without one is a
    declaration error, raised at once."""
    if cls not in _SPECS:
        _SPECS[cls] = _declared(cls)
    return _SPECS[cls]


def _declared(cls: type[Record]) -> tuple[tuple[str, Spec], ...]:
    hints = get_type_hints(cls, include_extras=True)
    found: list[tuple[str, Spec]] = []
    for f in fields(cls):  # type: ignore[arg-type]
        hint = hints[f.name]
        specs: Sequence[Any] = get_args(hint)[1:] if get_origin(hint) is Annotated else ()
        spec = next((s for s in specs if isinstance(s, Scalar | Texts | Keyed | Flags)), None)
        if spec is None:
            raise TypeError(
                f"{cls.__name__}.{f.name}: annotate it with its column (Text, Count, Real, "
                "Keyed(...), ... from connmgr_evidence.bench.results.record)"
            )
        found.append((f.name, spec))
    return tuple(found)
