"""The parsed form of a column mapping, whatever syntax it was written in.

A :class:`ColumnMapping` is an ordered list of :class:`MappedColumn` (one per
output column) plus, for composite row keys, a :class:`RowKeySpec`.  Every
mapping parser (Hive, hbase-spark string form, JSON catalog) produces one,
and the SerDes only ever see this form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Mapping

from serde.errors import MappingError
from serde.types import DataType

__all__ = ["ColumnKind", "MappedColumn", "RowKeySpec", "ColumnMapping", "STORAGE_TYPES", "ENCODINGS", "MAX_KEY_PART_LENGTH",
           "VARIABLE_LENGTH"]

STORAGE_TYPES = ("binary", "string")
"""How a value is stored: HBase ``Bytes`` encodings or UTF-8 text."""
MAX_KEY_PART_LENGTH = 1 << 20
"""Most bytes of a fixed-length row key part (a key is far shorter in practice)."""
VARIABLE_LENGTH = -1
"""hbase-spark's ``length`` of a part with no fixed length (a string part before others ends at 0x00)."""

ENCODINGS = ("ordered",)
"""Optional binary encodings; ``ordered`` makes byte order equal value order."""


class ColumnKind(str, Enum):
    """Where a column's value comes from."""

    KEY = "key"  # the whole row key
    KEY_PART = "key_part"  # one part of a composite row key
    CELL = "cell"  # one cell family:qualifier
    FAMILY = "family"  # a whole family as a map qualifier -> value
    TIMESTAMP = "timestamp"  # the latest timestamp of the row's mapped cells


@dataclass(frozen=True)
class MappedColumn:
    """One output column and where it lives.

    ``storage`` (``"binary"``/``"string"``/None = the SerDe's default) applies
    to the value; for a FAMILY column ``key_storage`` applies to qualifiers.
    ``encoding="ordered"`` selects the order-preserving binary encoding.
    ``length`` is the fixed byte length of a composite-key part
    (:data:`VARIABLE_LENGTH` = none).  ``options`` carries per-column
    extras: ``avro.schema`` (the column's values, or the key, are Avro
    datums of that schema, whatever the SerDe) and ``serde`` (the name of a
    registered SerDe that encodes this column).
    """

    name: str
    type: DataType
    kind: ColumnKind
    family: str | None = None
    qualifier: str | None = None
    storage: str | None = None
    key_storage: str | None = None
    encoding: str | None = None
    length: int | None = None
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        for what, value in (("name", self.name), ("family", self.family), ("qualifier", self.qualifier)):
            if isinstance(value, str):
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError as exc:  # names become UTF-8 cell coordinates and schema fields
                    raise MappingError(f"column {what} holds a lone surrogate at character {exc.start}", value) from None
        for what, value, allowed in (
            ("storage", self.storage, STORAGE_TYPES),
            ("key storage", self.key_storage, STORAGE_TYPES),
            ("encoding", self.encoding, ENCODINGS),
        ):
            if value is not None and value not in allowed:
                raise MappingError(f"column {self.name!r}: {what} must be one of {allowed}", value)
        if self.encoding == "ordered" and self.storage == "string":
            raise MappingError(f"column {self.name!r}: the ordered encoding is binary, not string storage", "ordered")
        if self.kind in (ColumnKind.CELL, ColumnKind.FAMILY) and not self.family:
            raise MappingError(f"column {self.name!r} needs a column family", self.name)
        if self.kind == ColumnKind.CELL and self.qualifier is None:
            raise MappingError(f"column {self.name!r} needs a qualifier", self.name)
        if self.kind == ColumnKind.FAMILY and self.type.name != "map":
            raise MappingError(
                f"column {self.name!r} maps a whole family and must have a map type", str(self.type)
            )
        if self.kind == ColumnKind.TIMESTAMP and self.type.name not in ("bigint", "timestamp"):
            raise MappingError(f"column {self.name!r} maps :timestamp and must be bigint or timestamp", str(self.type))
        own_codec = "avro.schema" in self.options or "serde" in self.options
        if self.kind in (ColumnKind.KEY, ColumnKind.KEY_PART) and not self.type.is_primitive and not own_codec:
            raise MappingError(
                f"row key column {self.name!r} must have a primitive type (or an Avro schema)", str(self.type)
            )
        if self.length is not None and (
            not isinstance(self.length, int)
            or isinstance(self.length, bool)
            or not (self.length == VARIABLE_LENGTH or 1 <= self.length <= MAX_KEY_PART_LENGTH)
        ):
            raise MappingError(
                f"column {self.name!r}: length must be {VARIABLE_LENGTH} or an integer in [1, {MAX_KEY_PART_LENGTH}]",
                self.length,
            )

    @property
    def cell(self) -> str:
        """The row-batch column name: ``"family:qualifier"``, or ``"family"`` for a whole family."""
        if self.kind == ColumnKind.CELL:
            return f"{self.family}:{self.qualifier}"
        if self.kind == ColumnKind.FAMILY:
            return self.family
        raise MappingError(f"column {self.name!r} is not stored in a cell", self.kind.value)


@dataclass(frozen=True)
class RowKeySpec:
    """A composite row key: the key-part column names in key order.

    With ``delimiter`` None the parts are fixed-length (every part but the
    last needs a byte length, the last may be variable); otherwise the parts
    are separated by ``delimiter`` and the last part takes the rest of the key.
    """

    parts: tuple[str, ...]
    delimiter: bytes | None = None

    def __post_init__(self) -> None:
        if not self.parts:
            raise MappingError("a composite row key needs at least one part", "")
        if self.delimiter is not None and not (isinstance(self.delimiter, bytes) and self.delimiter):
            raise MappingError("a row key delimiter must be non-empty bytes", self.delimiter)


@dataclass(frozen=True)
class ColumnMapping:
    """An ordered set of columns, one of which (or whose key parts) is the row key."""

    columns: tuple[MappedColumn, ...]
    rowkey: RowKeySpec | None = None
    default_storage: str | None = None
    namespace: str | None = None
    table: str | None = None
    source: str = "python"

    def __post_init__(self) -> None:
        names = set()
        for col in self.columns:
            if col.name in names:
                raise MappingError("duplicate column name", col.name)
            names.add(col.name)
        if self.default_storage is not None and self.default_storage not in STORAGE_TYPES:
            raise MappingError(f"default storage type must be one of {STORAGE_TYPES}", self.default_storage)
        keys = [c for c in self.columns if c.kind == ColumnKind.KEY]
        parts = [c for c in self.columns if c.kind == ColumnKind.KEY_PART]
        if len(keys) > 1:
            raise MappingError("the row key is mapped more than once", keys[1].name)
        if keys and parts:
            raise MappingError("a mapping has either :key or composite key parts, not both", parts[0].name)
        if not keys and not parts:
            raise MappingError("the mapping has no row key column (:key)", ",".join(names) or "<empty>")
        if parts:
            if self.rowkey is None:
                raise MappingError("key-part columns need a rowkey spec", parts[0].name)
            if sorted(self.rowkey.parts) != sorted(c.name for c in parts):
                raise MappingError(
                    "rowkey parts do not match the key-part columns", ":".join(self.rowkey.parts)
                )
        elif self.rowkey is not None:
            raise MappingError("a rowkey spec needs key-part columns", ":".join(self.rowkey.parts))
        stamps = [c for c in self.columns if c.kind == ColumnKind.TIMESTAMP]
        if len(stamps) > 1:
            raise MappingError(":timestamp is mapped more than once", stamps[1].name)
        if stamps and not any(c.kind == ColumnKind.CELL for c in self.columns):
            raise MappingError(":timestamp needs at least one single-cell column to take it from", stamps[0].name)

    @property
    def names(self) -> list[str]:
        """Output column names in order."""
        return [c.name for c in self.columns]

    def column(self, name: str) -> MappedColumn:
        """The column called ``name``."""
        for col in self.columns:
            if col.name == name:
                return col
        raise MappingError("no such column in the mapping", name)

    @property
    def scan_columns(self) -> list[str]:
        """The ``columns=`` argument for a scan: each distinct ``"cf:q"`` / ``"cf"``, in mapping order."""
        seen: dict[str, None] = {}
        for col in self.columns:
            if col.kind in (ColumnKind.CELL, ColumnKind.FAMILY):
                seen.setdefault(col.cell, None)
        return list(seen)

    @property
    def needs_timestamps(self) -> bool:
        """True when a ``:timestamp`` column needs cell timestamps from the scan."""
        return any(c.kind == ColumnKind.TIMESTAMP for c in self.columns)
