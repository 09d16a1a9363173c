"""The cell-spec token shared by the Hive and hbase-spark mapping strings.

A cell spec says where a column lives and how it is stored::

    :key            the row key          :key#b      stored binary
    :timestamp      the cell timestamp
    cf:q            one cell             cf:q#s      stored as text
    cf:q#o          one cell, binary order-preserving encoding
    cf:             a whole family       cf:#s:b     qualifiers text, values binary

Storage suffixes: ``b``/``binary``, ``s``/``string``, ``o``/``ordered``.
"""

from __future__ import annotations

from dataclasses import dataclass

from serde.errors import MappingError
from serde.mapping.model import ColumnKind, MappedColumn

__all__ = ["CellSpec", "parse_cell_spec", "offset_of"]

_SUFFIX = {
    "b": ("binary", None),
    "binary": ("binary", None),
    "s": ("string", None),
    "string": ("string", None),
    "o": ("binary", "ordered"),
    "ordered": ("binary", "ordered"),
}


@dataclass(frozen=True)
class CellSpec:
    """One parsed cell spec."""

    kind: ColumnKind
    family: str | None = None
    qualifier: str | None = None
    storage: str | None = None
    key_storage: str | None = None
    encoding: str | None = None


def column_from_cell_spec(spec: CellSpec, name: str, data_type, token: str, pos: int) -> MappedColumn:
    """The mapped column a cell spec names; a bad combination names ``token`` at ``pos``."""
    try:
        return MappedColumn(
            name=name,
            type=data_type,
            kind=spec.kind,
            family=spec.family,
            qualifier=spec.qualifier,
            storage=spec.storage,
            key_storage=spec.key_storage,
            encoding=spec.encoding,
        )
    except MappingError as exc:
        raise MappingError(exc.message, token, pos) from None


def offset_of(text: str, token: object) -> int:
    """Where ``token`` first appears in the mapping ``text`` (0 when it does not)."""
    return max(text.find(token), 0) if isinstance(token, str) and token else 0


def _suffix(text: str, pos: int) -> tuple[str, str | None]:
    """Storage and encoding of one suffix word (``text`` starts at ``pos``)."""
    try:
        return _SUFFIX[text.lower()]
    except KeyError:
        raise MappingError("unknown storage type (use b, s, o, binary, string, ordered)", text, pos) from None


def parse_cell_spec(token: str, pos: int) -> CellSpec:
    """Parse one cell spec; ``pos`` is its offset in the whole mapping string."""
    if not token:
        raise MappingError("empty column mapping entry", token, pos)
    body, hash_, suffix = token.partition("#")
    suffix_pos = pos + len(body) + 1
    if hash_ and not suffix:
        raise MappingError("missing storage type after '#'", token, pos)
    if body.startswith(":"):
        special = body[1:].lower()
        if special == "key":
            storage, encoding = _suffix(suffix, suffix_pos) if hash_ else (None, None)
            return CellSpec(ColumnKind.KEY, storage=storage, encoding=encoding)
        if special == "timestamp":
            if hash_:
                raise MappingError(":timestamp takes no storage type", token, pos)
            return CellSpec(ColumnKind.TIMESTAMP)
        raise MappingError("unknown special column (use :key or :timestamp)", body, pos)
    family, colon, qualifier = body.partition(":")
    if not colon:
        raise MappingError("expected family:qualifier", token, pos)
    if not family:
        raise MappingError("missing column family", token, pos)
    if any(ch.isspace() for ch in body):
        raise MappingError("whitespace inside a column name", token, pos)
    if "*" in qualifier:
        raise MappingError("qualifier patterns are not supported", token, pos)
    if qualifier == "":
        key_storage = storage = None
        if hash_:
            first, colon2, second = suffix.partition(":")
            key_storage, enc1 = _suffix(first, suffix_pos)
            storage, enc2 = _suffix(second, suffix_pos + len(first) + 1) if colon2 else (key_storage, enc1)
            if enc1 or enc2:
                raise MappingError("a whole family cannot use the ordered encoding", token, pos)
        return CellSpec(ColumnKind.FAMILY, family=family, storage=storage, key_storage=key_storage)
    storage, encoding = _suffix(suffix, suffix_pos) if hash_ else (None, None)
    return CellSpec(ColumnKind.CELL, family=family, qualifier=qualifier, storage=storage, encoding=encoding)
