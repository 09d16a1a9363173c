"""A JSON catalog in the hbase-spark connector's shape.

::

    {"table": {"namespace": "default", "name": "t"},
     "rowkey": "k1:k2",
     "columns": {
       "col0": {"cf": "rowkey", "col": "k1", "type": "string", "length": 4},
       "col1": {"cf": "rowkey", "col": "k2", "type": "int"},
       "col2": {"cf": "cf1", "col": "c1", "type": "int"},
       "col3": {"cf": "cf1", "col": "", "type": "map<string,string>"},
       "col4": {"col": ":timestamp", "type": "bigint"}}}

Columns appear in the output in catalog order.  ``cf: "rowkey"`` columns
are the parts of the row key, in the order ``rowkey`` names them (split on
``:``).  A single part is the plain row key; several parts make a composite
key: fixed-length by default (every part but the last needs a byte length,
from ``length`` or from a fixed-width binary type; the last may be
variable), or delimited when the top-level ``rowkey_delimiter`` is given.

As in hbase-spark: a string part of a composite key with no ``length``
(or ``length: -1``) before other parts ends at a 0x00 byte (see
:mod:`serde.rowkey`); ``avro`` gives a column's (or the key's) Avro schema,
inline as JSON text or an object, or as the name of a reader option that
holds it (``"avro": "avroSchema"`` with option ``avroSchema``); the schema
sets the column's type, and the column is Avro whatever the SerDe;
``serdes`` names the SerDe that encodes the column (a registered name such
as ``json`` or ``string``, or ``package.module:Class``; hbase-spark's
``DoubleSerDes`` reads as ``binary``).  Extras: ``storage``
(``binary``/``string``), ``encoding`` (``ordered``), ``col: ""`` for a
whole family, ``col: ":timestamp"``.  Values default to the binary
encoding, as in hbase-spark.  Errors name the offending token and its JSON
path.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from serde.errors import MappingError
from storage.jsonlimits import JsonLimitError, loads_bounded
from serde._avro_types import avro_to_type, load_schema
from serde.mapping.model import VARIABLE_LENGTH, ColumnKind, ColumnMapping, MappedColumn, RowKeySpec
from serde.types import STRING, DataType, parse_type

__all__ = ["parse_catalog", "named_options"]

_TOP_KEYS = {"table", "rowkey", "columns", "rowkey_delimiter"}
_TABLE_KEYS = {"namespace", "name", "tableCoder", "version"}
_MAX_JSON_DEPTH = 64  # a catalog is 3 levels deep; an inline Avro schema adds its own nesting
_COLUMN_KEYS = {"cf", "col", "type", "length", "storage", "encoding", "avro", "serdes"}
# hbase-spark's own SerDes classes, by what they write here.
_HBASE_SPARK_SERDES = {"org.apache.hadoop.hbase.spark.datasources.DoubleSerDes": "binary"}


def _check_loaded(doc: Mapping[str, Any]) -> None:
    """A catalog given as a dict gets the checks its JSON text would: nesting and 64-bit integers.

    Without them a key or value such as ``10**5000`` reaches an error
    message, and Python's limit on int-to-text conversion raises its own
    ValueError there.  An explicit stack: a deep dict must not recurse.
    """
    stack: list[tuple[Any, str, int]] = [(doc, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            if not -(2**63) <= value < 2**63:
                digits = int(abs(value).bit_length() * 0.30103) + 1
                raise MappingError("an integer outside the signed 64-bit range", f"<an integer of about {digits} "
                                   "digits>", path or "<catalog>")
            continue
        if isinstance(value, Mapping):
            items = [(k, v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            items = list(enumerate(value))
        else:
            continue
        if depth >= _MAX_JSON_DEPTH:
            raise MappingError(f"a catalog nested more than {_MAX_JSON_DEPTH} levels deep", None, path or "<catalog>")
        for key, item in items:
            if isinstance(value, Mapping) and not isinstance(key, str):
                shown = "a key" if not isinstance(key, int) or -(2**63) <= key < 2**63 else "a huge integer key"
                raise MappingError(f"catalog keys must be strings, got {shown} of type {type(key).__name__}", None,
                                   path or "<catalog>")
            stack.append((item, f"{path}.{key}" if path else str(key), depth + 1))


def _load(catalog: str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(catalog, Mapping):
        _check_loaded(catalog)
        return catalog
    if not isinstance(catalog, str):
        raise MappingError("a catalog must be a JSON string or a dict", type(catalog).__name__)
    try:
        doc = loads_bounded(catalog, _MAX_JSON_DEPTH)
    except JsonLimitError as exc:
        token = catalog[exc.position : exc.position + 20] or "<end>"
        raise MappingError(f"invalid JSON catalog ({exc})", token, exc.position) from None
    if not isinstance(doc, dict):
        raise MappingError("a catalog must be a JSON object", catalog[:20], 0)
    return doc


def _check_keys(obj: Any, allowed: set[str], path: str) -> None:
    if not isinstance(obj, Mapping):
        raise MappingError("expected a JSON object", obj, path)
    for key in obj:
        if key not in allowed:
            raise MappingError(f"unknown catalog key (expected one of {sorted(allowed)})", key, f"{path}.{key}" if path else key)


def _avro_schema(entry: Any, properties: Mapping[str, Any], path: str) -> Any:
    """A column's Avro schema: given inline (JSON text or object), or named as an option (hbase-spark)."""
    if isinstance(entry, str) and not entry.lstrip().startswith(("{", "[", '"')):
        named = properties.get(entry, properties.get(entry.lower()))
        if named is not None:
            return load_schema(named)
        try:
            return load_schema(entry)  # a bare primitive name such as "string"
        except MappingError:
            raise MappingError(
                "the avro entry names an option holding the schema, which is not set", entry, path
            ) from None
    try:
        return load_schema(entry)
    except MappingError as exc:
        raise MappingError(exc.message, exc.token, path) from None


def _column(
    name: str, spec: Mapping[str, Any], keys: list[str], properties: Mapping[str, Any]
) -> tuple[MappedColumn, str | None]:
    """Build one column; returns it and, for a key part, its rowkey part name."""
    path = f"columns.{name}"
    _check_keys(spec, _COLUMN_KEYS, path)
    type_text = spec.get("type", "string")
    if not isinstance(type_text, str):
        raise MappingError("a column type must be a string", type_text, f"{path}.type")
    try:
        data_type = parse_type(type_text)
    except MappingError as exc:
        raise MappingError(f"bad type in {path}.type", exc.token, f"{path}.type:{exc.position}") from None
    options: dict[str, Any] = {}
    if "avro" in spec:
        schema = _avro_schema(spec["avro"], properties, f"{path}.avro")
        options["avro.schema"] = schema
        try:
            value_type = avro_to_type(schema)  # the schema sets the type (hbase-spark's when no type is given)
        except MappingError as exc:
            raise MappingError(exc.message, exc.token, f"{path}.avro") from None
        except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a malformed schema object
            raise MappingError(f"invalid Avro schema ({type(exc).__name__}: {exc})", str(schema)[:60], f"{path}.avro") from None
        if spec.get("col") in ("", "*") and spec.get("cf") != "rowkey":  # a whole family: the schema is each value's
            data_type = DataType("map", key=data_type.key if data_type.name == "map" else STRING, value=value_type)
        else:
            data_type = value_type
    if "serdes" in spec:
        serde_name = spec["serdes"]
        if not isinstance(serde_name, str) or not serde_name:
            raise MappingError("serdes must name a SerDe", serde_name, f"{path}.serdes")
        options["serde"] = _HBASE_SPARK_SERDES.get(serde_name, serde_name)
    cf = spec.get("cf", "")
    col = spec.get("col")
    if not isinstance(cf, str):
        raise MappingError("cf must be a string", cf, f"{path}.cf")
    if col is None or not isinstance(col, str):
        raise MappingError("col must be a string", col, f"{path}.col")
    storage = spec.get("storage")
    encoding = spec.get("encoding")
    if encoding == "binary":  # accepted as "no special encoding"
        encoding = None
    length = spec.get("length")
    if isinstance(length, str) and length.isascii() and length.isdigit() and len(length) <= 9:
        length = int(length)  # ASCII digits only: str.isdigit() also accepts "²"
    elif length == "-1":
        length = VARIABLE_LENGTH
    part = None
    if cf == "rowkey":
        if col not in keys:
            raise MappingError("rowkey column not named in the rowkey spec", col, f"{path}.col")
        part = col
        kind = ColumnKind.KEY_PART
        family = qualifier = None
    elif col == ":timestamp":
        kind, family, qualifier = ColumnKind.TIMESTAMP, None, None
    elif col in ("", "*"):
        if not cf:
            raise MappingError("a whole-family column needs cf", name, f"{path}.cf")
        kind, family, qualifier = ColumnKind.FAMILY, cf, None
    else:
        if not cf:
            raise MappingError("missing column family", name, f"{path}.cf")
        kind, family, qualifier = ColumnKind.CELL, cf, col
    try:
        column = MappedColumn(
            name=name,
            type=data_type,
            kind=kind,
            family=family,
            qualifier=qualifier,
            storage=storage,
            key_storage=storage if kind == ColumnKind.FAMILY else None,
            encoding=encoding,
            length=length,
            options=MappingProxyType(options),
        )
    except MappingError as exc:
        raise MappingError(exc.message, exc.token, path) from None
    return column, part


def named_options(catalog: str | Mapping[str, Any]) -> frozenset[str]:
    """The option names a catalog's ``avro`` entries name (``"avro": "avroSchema"``): options it
    reads, so a reader's check of option names knows them (empty for a catalog that does not load)."""
    try:
        doc = _load(catalog)
    except MappingError:
        return frozenset()
    columns = doc.get("columns")
    if not isinstance(columns, Mapping):
        return frozenset()
    entries = [spec.get("avro") for spec in columns.values() if isinstance(spec, Mapping)]
    return frozenset(e for e in entries if isinstance(e, str) and not e.lstrip().startswith(("{", "[", '"')))


def _table_name(table: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The catalog's ``(namespace, name)``; a name written ``ns:t`` is table ``t`` of namespace ``ns``
    (as hbase-spark converts ``hbase.table``), and a ``namespace`` that names another is refused."""
    namespace, name = table.get("namespace"), table.get("name")
    if namespace is not None and not isinstance(namespace, str):
        raise MappingError("table.namespace must be a string", namespace, "table.namespace")
    if name is not None and not isinstance(name, str):
        raise MappingError("table.name must be a string", name, "table.name")
    if name is not None and ":" in name:
        prefix, _, name = name.partition(":")
        if namespace not in (None, "default", prefix):  # "default" is what hbase-spark's catalogs write
            raise MappingError(f"table.name names namespace {prefix!r} but table.namespace is {namespace!r}",
                               table.get("name"), "table.name")
        namespace = prefix
    return namespace, name


def parse_catalog(catalog: str | Mapping[str, Any], properties: Mapping[str, Any] | None = None) -> ColumnMapping:
    """Parse a JSON catalog (string or already-loaded dict) into a :class:`ColumnMapping`.

    ``properties`` (the reader's options) hold the Avro schemas that columns
    name (``"avro": "avroSchema"``); names are looked up as given, then in
    lower case (Spark lower-cases option names).
    """
    try:
        return _parse_catalog(catalog, properties or {})
    except MappingError as exc:  # a check made after parsing: point at the entry it names
        raise exc.at("<catalog>") from None


def _parse_catalog(catalog: str | Mapping[str, Any], properties: Mapping[str, Any]) -> ColumnMapping:
    doc = _load(catalog)
    _check_keys(doc, _TOP_KEYS, "")
    table = doc.get("table", {})
    _check_keys(table, _TABLE_KEYS, "table")
    coder = table.get("tableCoder", "PrimitiveType")
    if coder != "PrimitiveType":
        raise MappingError("unsupported tableCoder (only PrimitiveType)", coder, "table.tableCoder")
    rowkey = doc.get("rowkey")
    if not isinstance(rowkey, str) or not rowkey:
        raise MappingError("the catalog needs a rowkey naming its key columns", rowkey, "rowkey")
    keys = rowkey.split(":")
    for k in keys:
        if not k:
            raise MappingError("empty part in rowkey", rowkey, "rowkey")
    if len(set(keys)) != len(keys):
        raise MappingError("a rowkey part is named twice", rowkey, "rowkey")
    columns = doc.get("columns")
    if not isinstance(columns, Mapping) or not columns:
        raise MappingError("the catalog needs a non-empty columns object", columns, "columns")
    delimiter = doc.get("rowkey_delimiter")
    if delimiter is not None:
        if not isinstance(delimiter, str) or not delimiter:
            raise MappingError("rowkey_delimiter must be a non-empty string", delimiter, "rowkey_delimiter")
        try:
            delimiter = delimiter.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MappingError("rowkey_delimiter holds a lone surrogate", delimiter, f"rowkey_delimiter:{exc.start}") from None

    cols: list[MappedColumn] = []
    part_columns: dict[str, str] = {}
    for name, spec in columns.items():
        column, part = _column(name, spec, keys, properties)
        if part is not None:
            if part in part_columns:
                raise MappingError("two columns map the same rowkey part", part, f"columns.{name}.col")
            part_columns[part] = name
        cols.append(column)
    missing = [k for k in keys if k not in part_columns]
    if missing:
        raise MappingError("rowkey part has no column", missing[0], "rowkey")

    namespace, name = _table_name(table)
    spec_rowkey = None
    if len(keys) == 1:
        # One part: it is the plain row key.
        only = part_columns[keys[0]]
        cols = [
            MappedColumn(c.name, c.type, ColumnKind.KEY, storage=c.storage, encoding=c.encoding, options=c.options)
            if c.name == only
            else c
            for c in cols
        ]
    else:
        spec_rowkey = RowKeySpec(tuple(part_columns[k] for k in keys), delimiter)
    return ColumnMapping(
        tuple(cols),
        rowkey=spec_rowkey,
        default_storage="binary",
        namespace=namespace,
        table=name,
        source="catalog",
    )
