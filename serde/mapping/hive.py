"""Hive's ``hbase.columns.mapping`` with ``columns`` and ``columns.types``.

::

    hbase.columns.mapping = ":key,cf:a#b,cf:b#s,cf:,:timestamp"
    columns               = "id,a,b,rest,ts"
    columns.types         = "string:int:string:map<string,string>:timestamp"

Entries are matched to columns by position.  ``columns.types`` is
colon-separated as Hive writes it (commas are accepted too).  Without
``columns`` the names are derived (``key``, ``cf_q``, the family name,
``timestamp``) and the types default to ``string`` (``map<string,string>``
for a family, ``timestamp`` for ``:timestamp``).  Values are stored as text
unless ``hbase.table.default.storage.type`` says ``binary`` (Hive's default).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from serde.errors import MappingError
from serde.mapping._cellspec import offset_of, CellSpec, column_from_cell_spec, parse_cell_spec
from serde.mapping.model import ColumnKind, ColumnMapping
from serde.types import STRING, TIMESTAMP, DataType, parse_type, parse_type_at

__all__ = ["parse_hive_mapping", "hive_mapping_from_properties"]


def _split_entries(text: str) -> list[tuple[str, int]]:
    """Split on commas; each entry stripped, with its offset in ``text``."""
    entries = []
    start = 0
    for piece in text.split(","):
        stripped = piece.strip()
        entries.append((stripped, start + (len(piece) - len(piece.lstrip()))))
        start += len(piece) + 1
    return entries


def _split_types(text: str) -> list[tuple[DataType, str, int]]:
    """Read a ':'- or ','-separated list of types; each with its text and offset."""
    types = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        start = pos
        data_type, pos = parse_type_at(text, pos)
        types.append((data_type, text[start:pos].strip(), start))
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return types
        if text[pos] not in ":,":
            raise MappingError("expected ':' between column types", text[pos:].split()[0], pos)
        pos += 1


def _default_name(spec: CellSpec) -> str:
    if spec.kind == ColumnKind.KEY:
        return "key"
    if spec.kind == ColumnKind.TIMESTAMP:
        return "timestamp"
    if spec.kind == ColumnKind.FAMILY:
        return spec.family
    return f"{spec.family}_{spec.qualifier}"


def _default_type(spec: CellSpec) -> DataType:
    if spec.kind == ColumnKind.TIMESTAMP:
        return TIMESTAMP
    if spec.kind == ColumnKind.FAMILY:
        return DataType("map", key=STRING, value=STRING)
    return STRING


def parse_hive_mapping(
    mapping: str,
    columns: str | Sequence[str] | None = None,
    types: str | Sequence[str] | None = None,
    default_storage: str = "string",
) -> ColumnMapping:
    """Parse Hive's column mapping into a :class:`ColumnMapping`.

    ``columns`` is the comma-separated list of column names (or a list),
    ``types`` the colon-separated list of Hive types (or a list).  Errors are
    :class:`~serde.errors.MappingError` naming the token and its position.
    """
    try:
        return _parse_hive_mapping(mapping, columns, types, default_storage)
    except MappingError as exc:  # a check made after parsing: point at the entry it names
        raise exc.at(offset_of(mapping, exc.token) if isinstance(mapping, str) else 0) from None


def _parse_hive_mapping(
    mapping: str,
    columns: str | Sequence[str] | None = None,
    types: str | Sequence[str] | None = None,
    default_storage: str = "string",
) -> ColumnMapping:

    if not isinstance(mapping, str) or not mapping.strip():
        raise MappingError("hbase.columns.mapping must be a non-empty string", mapping, 0)
    if default_storage not in ("binary", "string"):
        raise MappingError("hbase.table.default.storage.type must be binary or string", default_storage, 0)
    entries = _split_entries(mapping)
    specs = [(parse_cell_spec(tok, pos), tok, pos) for tok, pos in entries]

    if columns is None:
        names = [_default_name(s) for s, _, _ in specs]
    elif isinstance(columns, str):
        names = [n for n, _ in _split_entries(columns)]
    else:
        names = [str(n).strip() for n in columns]
    for name in names:
        if not name:
            raise MappingError("empty column name in columns", columns, 0)
    if len(names) != len(specs):
        extra = entries[len(names)][0] if len(specs) > len(names) else names[len(specs)]
        raise MappingError(
            f"hbase.columns.mapping has {len(specs)} entries but columns has {len(names)} names", extra
        )

    if types is None:
        column_types = [_default_type(s) for s, _, _ in specs]
    elif isinstance(types, str):
        parsed = _split_types(types)
        if len(parsed) != len(specs):
            extra = parsed[len(specs)][1] if len(parsed) > len(specs) else "<end>"
            raise MappingError(
                f"columns.types has {len(parsed)} types but the mapping has {len(specs)} entries",
                extra,
                parsed[len(specs)][2] if len(parsed) > len(specs) else len(types),
            )
        column_types = [t for t, _, _ in parsed]
    else:
        column_types = [t if isinstance(t, DataType) else parse_type(t) for t in types]
        if len(column_types) != len(specs):
            raise MappingError(
                f"columns.types has {len(column_types)} types but the mapping has {len(specs)} entries",
                types,
            )

    cols = []
    for (spec, tok, pos), name, data_type in zip(specs, names, column_types):
        cols.append(column_from_cell_spec(spec, name, data_type, tok, pos))
    return ColumnMapping(tuple(cols), default_storage=default_storage, source="hive")


def hive_mapping_from_properties(properties: Mapping[str, str]) -> ColumnMapping:
    """Build the mapping from Hive table properties.

    Reads ``hbase.columns.mapping``, ``columns``, ``columns.types`` and
    ``hbase.table.default.storage.type``.
    """
    if "hbase.columns.mapping" not in properties:
        raise MappingError("missing table property", "hbase.columns.mapping")
    return parse_hive_mapping(
        properties["hbase.columns.mapping"],
        properties.get("columns"),
        properties.get("columns.types"),
        properties.get("hbase.table.default.storage.type", "string"),
    )
