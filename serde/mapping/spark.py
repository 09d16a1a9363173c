"""The hbase-spark connector's string mapping: ``"name TYPE spec, ..."``.

::

    key STRING :key, n INT cf:n, s STRING cf:s, m MAP<STRING,INT> cf:

Each entry names a column, gives its type (Spark or Hive spelling, any case)
and its cell spec (see :mod:`serde.mapping._cellspec`; a ``#b``/``#s``/``#o``
suffix is accepted).  As in hbase-spark, values default to the binary
(HBase ``Bytes``) encoding, and a trailing comma is allowed.  Names may be
back-quoted.
"""

from __future__ import annotations

from serde.errors import MappingError
from serde.mapping._cellspec import offset_of, column_from_cell_spec, parse_cell_spec
from serde.mapping.model import ColumnMapping
from serde.types import parse_type_at

__all__ = ["parse_spark_mapping"]


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _read_name(text: str, pos: int) -> tuple[str, int]:
    if pos < len(text) and text[pos] == "`":
        end = text.find("`", pos + 1)
        if end < 0:
            raise MappingError("unterminated back-quoted name", text[pos:], pos)
        return text[pos + 1 : end], end + 1
    start = pos
    while pos < len(text) and (text[pos].isalnum() or text[pos] in "_$"):
        pos += 1
    if start == pos:
        token = text[start:].split()[0] if text[start:].split() else "<end>"
        raise MappingError("expected a column name", token, start)
    return text[start:pos], pos


def parse_spark_mapping(mapping: str, default_storage: str = "binary") -> ColumnMapping:
    """Parse ``"name TYPE spec, ..."`` into a :class:`ColumnMapping`.

    Errors are :class:`~serde.errors.MappingError` naming the token and its
    position.
    """
    try:
        return _parse_spark_mapping(mapping, default_storage)
    except MappingError as exc:  # a check made after parsing: point at the entry it names
        raise exc.at(offset_of(mapping, exc.token) if isinstance(mapping, str) else 0) from None


def _parse_spark_mapping(mapping: str, default_storage: str = "binary") -> ColumnMapping:
    if not isinstance(mapping, str) or not mapping.strip():
        raise MappingError("the column mapping must be a non-empty string", mapping, 0)
    cols = []
    pos = 0
    while True:
        pos = _skip_ws(mapping, pos)
        name, pos = _read_name(mapping, pos)
        if pos >= len(mapping) or not mapping[pos].isspace():
            token = mapping[pos:].split(",")[0] or "<end>"
            raise MappingError(f"expected a type after column name {name!r}", token, pos)
        pos = _skip_ws(mapping, pos)
        data_type, pos = parse_type_at(mapping, pos)
        pos = _skip_ws(mapping, pos)
        spec_start = pos
        while pos < len(mapping) and mapping[pos] != "," and not mapping[pos].isspace():
            pos += 1
        token = mapping[spec_start:pos]
        if not token:
            raise MappingError(f"expected a cell spec (cf:q or :key) for column {name!r}", "<end>", spec_start)
        spec = parse_cell_spec(token, spec_start)
        cols.append(column_from_cell_spec(spec, name, data_type, token, spec_start))
        pos = _skip_ws(mapping, pos)
        if pos >= len(mapping):
            break
        if mapping[pos] != ",":
            raise MappingError("expected ',' between column entries", mapping[pos:].split()[0], pos)
        pos = _skip_ws(mapping, pos + 1)
        if pos >= len(mapping):
            break  # a trailing comma ends the list, as hbase-spark reads it
    return ColumnMapping(tuple(cols), default_storage=default_storage, source="spark")
