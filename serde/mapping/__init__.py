"""Column mappings in the forms users already write.

* Hive: ``hbase.columns.mapping`` + ``columns`` + ``columns.types``
  (:func:`parse_hive_mapping`);
* hbase-spark string form ``"key STRING :key, n INT cf:n"``
  (:func:`parse_spark_mapping`);
* hbase-spark style JSON catalog (:func:`parse_catalog`).

:func:`load_mapping` accepts any of them (or a ready :class:`ColumnMapping`)
and tells the string forms apart.  The mapping names its table as the
forms do: a catalog by its ``table`` entry, the string forms by the table
option beside them (``hbase.table``; ``ns:t`` is table ``t`` of namespace
``ns``, as hbase-spark converts it).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from serde.errors import MappingError
from serde.mapping.catalog import parse_catalog
from serde.mapping.hive import hive_mapping_from_properties, parse_hive_mapping
from serde.mapping.model import ColumnKind, ColumnMapping, MappedColumn, RowKeySpec
from serde.mapping.spark import parse_spark_mapping

__all__ = [
    "ColumnKind",
    "MappedColumn",
    "RowKeySpec",
    "ColumnMapping",
    "parse_hive_mapping",
    "hive_mapping_from_properties",
    "parse_spark_mapping",
    "parse_catalog",
    "load_mapping",
]


def _looks_like_spark_form(text: str) -> bool:
    # Hive entries are single tokens ("cf:a#b"); hbase-spark entries are "name TYPE spec".
    return any(len(entry.split()) > 1 for entry in text.split(","))


# the options that name the table beside a string mapping: TableInputFormat's, hbase-spark's,
# the short Spark option and Hive's table property, in that order
_TABLE_OPTIONS = ("hbase.mapreduce.inputtable", "hbase.table", "table", "hbase.table.name")


def _named_table(mapping: ColumnMapping, properties: Mapping[str, Any]) -> ColumnMapping:
    """``mapping`` naming the table of the table option (``ns:t`` or ``t``, namespace ``default``),
    unless it names its own (a catalog's ``table`` entry)."""
    if mapping.table is not None:
        return mapping
    for key in _TABLE_OPTIONS:
        value = properties.get(key)
        if isinstance(value, str) and value:
            namespace, sep, name = value.partition(":")
            if not sep:
                namespace, name = "default", value
            return dataclasses.replace(mapping, namespace=namespace, table=name)
    return mapping


def load_mapping(
    mapping: "ColumnMapping | str | Mapping[str, Any] | None",
    properties: Mapping[str, str] | None = None,
) -> ColumnMapping:
    """Turn any supported mapping form into a :class:`ColumnMapping`.

    * a :class:`ColumnMapping` is returned as is;
    * a dict, or a string starting with ``{``, is a JSON catalog;
    * a string whose entries have several words is the hbase-spark form;
    * any other string is Hive's ``hbase.columns.mapping``, with ``columns``,
      ``columns.types`` and ``hbase.table.default.storage.type`` taken from
      ``properties``;
    * None reads Hive's properties (``hbase.columns.mapping`` ...), or a
      ``catalog`` property holding a JSON catalog.

    A string form's mapping names the table of ``hbase.table`` (or
    ``hbase.mapreduce.inputtable``, ``table``, ``hbase.table.name``) in
    ``properties``: ``NAMESPACE:TABLE`` is ``namespace`` NAMESPACE and
    ``table`` TABLE, a bare name is in namespace ``default``.
    """
    properties = properties or {}
    if isinstance(mapping, ColumnMapping):
        return mapping
    return _named_table(_load_mapping(mapping, properties), properties)


def _load_mapping(mapping: "str | Mapping[str, Any] | None", properties: Mapping[str, Any]) -> ColumnMapping:
    if mapping is None:
        if "catalog" in properties:
            return parse_catalog(properties["catalog"], properties)
        return hive_mapping_from_properties(properties)
    if isinstance(mapping, Mapping):
        return parse_catalog(mapping, properties)
    if not isinstance(mapping, str):
        raise MappingError("a mapping must be a ColumnMapping, a string or a catalog dict", type(mapping).__name__)
    if mapping.lstrip().startswith("{"):
        return parse_catalog(mapping, properties)
    if _looks_like_spark_form(mapping):
        return parse_spark_mapping(mapping)
    return parse_hive_mapping(
        mapping,
        properties.get("columns"),
        properties.get("columns.types"),
        properties.get("hbase.table.default.storage.type", "string"),
    )
