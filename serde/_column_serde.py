"""A SerDe for one mapped column: hbase-spark's per-column ``serdes``, here a SerDe name.

A catalog column may name the SerDe that encodes it (``"serdes": "json"``,
any name :func:`serde.registry.get_serde_class` resolves).  The table's
SerDe then builds that SerDe over a mapping of the column alone (plus a
binary key) and takes the column's type and codecs from it.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, Callable, Mapping, Protocol

from serde.errors import MappingError
from serde.mapping import ColumnKind, ColumnMapping, MappedColumn
from serde.types import BINARY
from storage.errors import InvalidArgument

__all__ = ["MappedSerDe", "serde_for_column"]


class MappedSerDe(Protocol):
    """What a column's SerDe is built from and is: a :class:`serde.base.SerDe` (which
    calls :func:`serde_for_column`, so this module names it through this protocol)."""

    properties: Mapping[str, Any]
    mapping: ColumnMapping

# Properties that name cells of the whole mapping: meaningless for a one-column SerDe.
_MAPPING_PROPERTIES = ("avro.row.cell", "json.row.cell", "avro.schema.literal")


def serde_for_column(owner: MappedSerDe, resolve: Callable[[str], type], name: str,
                     column: MappedColumn) -> MappedSerDe | None:
    """The SerDe ``name`` over a mapping of ``column`` alone (plus a key), or None when it is ``owner``'s own.

    ``resolve`` turns a SerDe name into its class (serde.registry's ``get_serde_class``).
    """
    try:
        cls = resolve(name)
    except InvalidArgument as exc:
        raise MappingError(f"column {column.name!r}: {exc}", name) from None
    if cls is type(owner):
        return None
    options = MappingProxyType({k: v for k, v in column.options.items() if k != "serde"})
    inner = dataclasses.replace(column, options=options)
    if inner.kind in (ColumnKind.KEY, ColumnKind.KEY_PART):
        cols: tuple[MappedColumn, ...] = (dataclasses.replace(inner, kind=ColumnKind.KEY, length=None),)
    else:
        key_name = "key" if column.name != "key" else "row_key"
        cols = (MappedColumn(key_name, BINARY, ColumnKind.KEY, storage="binary"), inner)
    props = {k: v for k, v in owner.properties.items() if k not in _MAPPING_PROPERTIES}
    return cls(ColumnMapping(cols, default_storage=owner.mapping.default_storage, source=owner.mapping.source), props)
