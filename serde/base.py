"""The SerDe protocol and the machinery every built-in SerDe shares.

A SerDe is configured with a column mapping (any form :func:`load_mapping`
accepts) and properties.  It offers:

* ``deserialize(row) -> tuple``: one row as happybase gives it,
  ``(key, {b"cf:q": value})``, optionally with timestamps as a third element
  ``{b"cf:q": ts}`` or as happybase's ``include_timestamp`` pairs
  ``{b"cf:q": (value, ts)}``; returns the typed values in mapping order.
* ``deserialize_batch(batch) -> pa.RecordBatch``: the same on a row batch
  (``key`` + ``"cf:q"`` binary columns + ``"cf"`` map columns + optional
  ``"cf:q@ts"`` int64 columns), vectorized, value for value equal to the
  row-wise path.
* ``serialize(values) -> (key, cells)`` and ``serialize_batch(record_batch)``
  -> a row batch for the bulk-load writer.
* ``arrow_schema`` / ``ddl`` (Spark DDL) / ``scan_columns`` (what to ask the
  scan for) / ``needs_timestamps`` / ``stats``.

Storage of each value is decided, most specific first, by the column's
``#b``/``#s``/``#o`` suffix (or catalog ``storage``/``encoding``), the
``hbase.table.default.storage.type`` property, the SerDe's own default
(binary for ``binary``, text for ``string``), then the mapping form's
default (text for Hive, binary for hbase-spark forms).

Properties common to all SerDes:

=================================  ==============================================
``serde.on.error``                 ``fail`` (DecodeError) or ``null`` (counted null)
``hbase.table.default.storage.type``  ``binary`` or ``string``
``binary.timestamp.unit``          ``ms`` (default) or ``us`` for binary timestamps
``serialization.null.format``      text null sequence, default ``\\N``
``collection.delim``/``mapkey.delim``  text separators, default ``\\x02`` / ``\\x03``
``date.format``/``timestamp.formats``  text date formats
``serde.row.dates``                ``fast`` or ``naive`` (per-row strptime)
=================================  ==============================================

Each SerDe declares the properties it reads (:attr:`SerDe.common_properties`,
a subclass's ``own_properties``, and :meth:`SerDe.property_names` for those
that depend on the mapping), so a reader can refuse a property nothing reads
instead of ignoring it.
"""

from __future__ import annotations

from abc import ABC
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

from serde._columns import (
    CellReader,
    CellWriter,
    ColumnReader,
    ColumnWriter,
    ErrorPolicy,
    FamilyReader,
    FamilyWriter,
    KeyPartsReader,
    KeyReader,
    TimestampReader,
    encode_column,
)
from serde._avro_types import load_schema
from serde._column_serde import serde_for_column
from serde.codecs import Codec, TextOptions, make_codec
from serde.codecs.avro import AvroCodec
from serde.codecs.epoch import datetime_to_us
from serde.errors import EncodeError, MappingError
from serde.mapping import ColumnKind, ColumnMapping, MappedColumn, load_mapping
from serde.mapping.catalog import named_options
from serde.mapping.model import VARIABLE_LENGTH
from serde.rowkey import TERMINATED, CompositeKey
from serde.stats import SerDeStats
from storage.errors import InvalidArgument

__all__ = ["SerDe", "ON_ERROR_MODES"]

ON_ERROR_MODES = ("fail", "null")


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class SerDe(ABC):
    """Base class of SerDes: turns a row's cells into typed values and back.

    Subclasses set ``name`` and ``default_storage`` and may override
    :meth:`_value_codec` (how a cell value is encoded) and
    :meth:`_value_readers` / :meth:`_value_writers` (how cell columns are
    grouped, e.g. one document per row).
    """

    name: ClassVar[str] = "base"
    # Set by serde.registry when it loads: how a column's ``serde`` option finds its class.
    # Injected rather than imported because the registry itself imports this module.
    serde_class_resolver: ClassVar[Callable[[str], type] | None] = None
    default_storage: ClassVar[str | None] = "binary"
    # The properties every SerDe reads (the table above), the mapping's among them; a subclass
    # names those it adds in ``own_properties``.  Readers refuse a property that no SerDe part
    # declares (connector.source_config), so a property read anywhere must be declared here.
    common_properties: ClassVar[frozenset[str]] = frozenset({
        "serde.on.error", "hbase.table.default.storage.type", "binary.timestamp.unit",
        "serialization.null.format", "collection.delim", "colelction.delim", "mapkey.delim",
        "date.format", "timestamp.formats", "serde.row.dates",
        "hbase.columns.mapping", "columns", "columns.types", "catalog",
    })
    own_properties: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self,
        mapping: "ColumnMapping | str | Mapping[str, Any] | None" = None,
        properties: Mapping[str, Any] | None = None,
    ):
        props = dict(properties or {})
        for key, value in props.items():
            if not isinstance(key, str):
                raise InvalidArgument(f"SerDe property names must be strings, got {key!r}")
        self.properties = props
        self.mapping = load_mapping(mapping, props)
        self.on_error = props.get("serde.on.error", "fail")
        if self.on_error not in ON_ERROR_MODES:
            raise InvalidArgument(f"serde.on.error must be one of {ON_ERROR_MODES}, got {self.on_error!r}")
        self.text_options = TextOptions.from_properties(props)
        self.timestamp_unit = props.get("binary.timestamp.unit", "ms")
        explicit = props.get("hbase.table.default.storage.type")
        if explicit is not None and explicit not in ("binary", "string"):
            raise InvalidArgument(f"hbase.table.default.storage.type must be binary or string, got {explicit!r}")
        self.storage = explicit or self.default_storage or self.mapping.default_storage or "string"
        self.stats = SerDeStats()
        self._policy = ErrorPolicy(self.on_error, self.stats)
        self._configure()
        self._check_mapping()
        self.arrow_schema = self._schema()
        self.ddl = ", ".join(f"{_quote(f.name)} {self.column_type(f.name).ddl()}" for f in self.arrow_schema)
        self._composite = self._make_composite()
        self._key_codecs = self._make_key_codecs()
        self.readers: list[ColumnReader] = self._make_readers()
        order = [name for r in self.readers for name in r.names]
        names = self.mapping.names
        self._perm = None if order == names else [order.index(n) for n in names]
        self._row_fns = [r.row_fn() for r in self.readers]
        self._writers: list[ColumnWriter] = self._value_writers(self._cell_columns())
        self._needs_ts = self.mapping.needs_timestamps
        self._names = names

    # -- configuration hooks ------------------------------------------------
    def _configure(self) -> None:
        """Subclass hook: read SerDe-specific properties once the mapping is parsed."""

    @classmethod
    def declared_properties(cls) -> frozenset[str]:
        """The property names this class reads whatever the mapping: the common ones and the
        ``own_properties`` of every class it derives from."""
        names = set(SerDe.common_properties)
        for klass in cls.__mro__:
            names.update(vars(klass).get("own_properties", ()))
        return frozenset(names)

    def property_names(self) -> frozenset[str]:
        """Every property name this SerDe reads with its mapping: the declared ones, those its
        mapping adds (:meth:`_mapping_properties`), options a catalog's ``avro`` entries name,
        and the property names of the SerDes its columns name."""
        names = set(self.declared_properties()) | self._mapping_properties()
        catalog = self.properties.get("catalog")
        if catalog is not None:
            names |= named_options(catalog)
        for column in self.mapping.columns:
            other = self._column_serde(column)
            if other is not None:
                names |= other.property_names()
        return frozenset(names)

    def _mapping_properties(self) -> set[str]:
        """Subclass hook: property names that depend on the mapping (per-column ones)."""
        return set()

    def column_type(self, name: str):
        """The :class:`~serde.types.DataType` of output column ``name``."""
        column = self.mapping.column(name)
        other = self._column_serde(column)
        return column.type if other is None else other.column_type(name)

    def storage_of(self, column: MappedColumn, role: str = "value") -> str:
        """Storage type of a column's value (``role="value"``) or qualifier (``"map_key"``)."""
        own = column.key_storage if role == "map_key" else column.storage
        return own or self.storage

    def codec(self, column: MappedColumn, data_type, role: str = "value") -> Codec:
        """The binary/text codec for a column (``role``: key, value, map_key, map_value).

        A row key with its own codec (an Avro schema or a SerDe named in the
        catalog) gets that one.
        """
        if role == "key":
            own = self._own_codec(column, data_type, role)
            if own is not None:
                return own
        storage = self.storage_of(column, "map_key" if role == "map_key" else "value")
        ordered = column.encoding == "ordered" and role in ("key", "value")
        try:
            return make_codec(data_type, storage, self.text_options, ordered, self.timestamp_unit)
        except MappingError as exc:
            raise MappingError(f"column {column.name!r}: {exc.message}", exc.token, exc.position) from None

    def value_codec(self, column: MappedColumn, data_type, role: str) -> Codec:
        """The codec of a cell value (``role`` value or map_value).

        A column's own codec comes first: the SerDe its catalog entry names
        (``serdes``), else its Avro schema; then the SerDe's
        :meth:`_value_codec`.
        """
        own = self._own_codec(column, data_type, role)
        if own is not None:
            return own
        return self._value_codec(column, data_type, role)

    def _value_codec(self, column: MappedColumn, data_type, role: str) -> Codec:
        """Subclass hook: the codec of a cell value of a column with no codec of its own."""
        return self.codec(column, data_type, role)

    def _own_codec(self, column: MappedColumn, data_type, role: str) -> Codec | None:
        other = self._column_serde(column)
        if other is not None:
            inner = other.mapping.column(column.name)
            return other.codec(inner, data_type, "key") if role == "key" else other.value_codec(inner, data_type, role)
        schema = column.options.get("avro.schema")
        if schema is not None and role != "map_key":
            return AvroCodec(data_type, load_schema(schema), column.name)
        return None

    def _column_serde(self, column: MappedColumn) -> "SerDe | None":
        """The SerDe a column's ``serde`` option names, built for that column alone (None: this one)."""
        name = column.options.get("serde")
        if name is None:
            return None
        cache = self.__dict__.setdefault("_column_serdes", {})
        if column.name not in cache:
            resolver = SerDe.serde_class_resolver
            if resolver is None:
                raise MappingError(f"column {column.name!r} names SerDe {name!r}, but serde.registry is not loaded", name)
            cache[column.name] = serde_for_column(self, resolver, name, column)
        return cache[column.name]

    def _check_mapping(self) -> None:
        seen: dict[str, str] = {}
        for col in self._cell_columns():
            if col.kind == ColumnKind.CELL:
                if col.cell in seen:
                    raise MappingError(f"cell mapped by two columns ({seen[col.cell]!r} and {col.name!r})", col.cell)
                seen[col.cell] = col.name

    def _schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, self.column_type(c.name).arrow()) for c in self.mapping.columns])

    # -- assembly -------------------------------------------------------------
    def _cell_columns(self) -> list[MappedColumn]:
        return [c for c in self.mapping.columns if c.kind in (ColumnKind.CELL, ColumnKind.FAMILY)]

    def _key_parts(self) -> list[MappedColumn]:
        if self.mapping.rowkey is None:
            return []
        return [self.mapping.column(n) for n in self.mapping.rowkey.parts]

    def _make_composite(self) -> CompositeKey | None:
        parts = self._key_parts()
        if not parts:
            return None
        delimiter = self.mapping.rowkey.delimiter
        widths = []
        for i, col in enumerate(parts):
            codec = self.codec(col, col.type, "key")
            width = col.length if col.length not in (None, VARIABLE_LENGTH) else codec.fixed_width
            if width is None and delimiter is None and i < len(parts) - 1 and col.type.name == "string":
                width = TERMINATED  # hbase-spark's variable-length string part: ends at 0x00
            widths.append(width)
        return CompositeKey([c.name for c in parts], widths, delimiter)

    @property
    def composite_key(self) -> CompositeKey | None:
        """The layout of a composite row key (None for a plain ``:key``)."""
        return self._composite

    def _make_key_codecs(self) -> list[Codec]:
        cols = self._key_parts() or [c for c in self.mapping.columns if c.kind == ColumnKind.KEY]
        return [self.codec(c, c.type, "key") for c in cols]

    def _make_readers(self) -> list[ColumnReader]:
        readers: list[ColumnReader] = []
        policy = self._policy
        if self._composite is not None:
            readers.append(KeyPartsReader(self._composite.names, self._key_codecs, self._composite, policy))
        else:
            key = next(c for c in self.mapping.columns if c.kind == ColumnKind.KEY)
            readers.append(KeyReader(key.name, self._key_codecs[0], policy))
        readers.extend(self._value_readers(self._cell_columns()))
        for col in self.mapping.columns:
            if col.kind == ColumnKind.TIMESTAMP:
                cells = [c.cell for c in self.mapping.columns if c.kind == ColumnKind.CELL]
                readers.append(TimestampReader(col.name, cells, col.type.name == "timestamp", policy))
        return readers

    def _value_readers(self, columns: list[MappedColumn]) -> list[ColumnReader]:
        """Readers of the cell and family columns; one per column by default."""
        readers: list[ColumnReader] = []
        for col in columns:
            if col.kind == ColumnKind.CELL:
                readers.append(CellReader(col.name, col.cell, self.value_codec(col, col.type, "value"), self._policy))
            else:
                readers.append(
                    FamilyReader(
                        col.name,
                        col.family,
                        self.codec(col, col.type.key, "map_key"),
                        self.value_codec(col, col.type.value, "map_value"),
                        col.type.arrow(),
                        self._policy,
                    )
                )
        return readers

    def _value_writers(self, columns: list[MappedColumn]) -> list[ColumnWriter]:
        """Writers of the cell and family columns; one per column by default."""
        index = {n: i for i, n in enumerate(self.mapping.names)}
        writers: list[ColumnWriter] = []
        for col in columns:
            if col.kind == ColumnKind.CELL:
                writers.append(CellWriter(index[col.name], col.name, col.cell, self.value_codec(col, col.type, "value")))
            else:
                writers.append(
                    FamilyWriter(
                        index[col.name],
                        col.name,
                        col.family,
                        self.codec(col, col.type.key, "map_key"),
                        self.value_codec(col, col.type.value, "map_value"),
                    )
                )
        return writers

    # -- public properties -----------------------------------------------------
    @property
    def column_names(self) -> list[str]:
        """Output column names in order."""
        return list(self._names)

    @property
    def scan_columns(self) -> list[str]:
        """The ``columns=`` to request from a scan (``"cf:q"`` and ``"cf"``)."""
        return self.mapping.scan_columns

    def batch_sources(self, columns: Sequence[str]) -> list[str] | None:
        """The row batch's columns besides ``key`` that decoding the output ``columns`` reads
        (a caller may hand :meth:`deserialize_batch` those alone), or None when some reader
        may read any of them."""
        wanted = set(columns)
        out: list[str] = []
        for reader in self.readers:
            if wanted.intersection(reader.names):
                if reader.sources is None:
                    return None
                out.extend(s for s in reader.sources if s not in out)
        return out

    @property
    def needs_timestamps(self) -> bool:
        """True when the scan must include cell timestamps (a ``:timestamp`` column)."""
        return self._needs_ts

    # -- deserialization -----------------------------------------------------
    def deserialize(self, row: Sequence[Any]) -> tuple:
        """Decode one row ``(key, cells[, timestamps])`` into a tuple in mapping order."""
        key = row[0]
        cells = row[1]
        ts = row[2] if len(row) > 2 else None
        if self._needs_ts and ts is None and cells:
            cells, ts = _split_timestamps(cells)
        out: list = []
        for read in self._row_fns:
            read(key, cells, ts, out)
        self.stats.rows += 1
        if self._perm is not None:
            out = [out[i] for i in self._perm]
        return tuple(out)

    def deserialize_rows(self, rows: Iterable[Sequence[Any]]) -> Iterator[tuple]:
        """Decode many rows lazily (same as calling :meth:`deserialize` on each)."""
        for row in rows:
            yield self.deserialize(row)

    def deserialize_batch(self, batch: pa.RecordBatch, columns: Sequence[str] | None = None) -> pa.RecordBatch:
        """Decode a row batch into a record batch with :attr:`arrow_schema`, vectorized.

        With ``columns``, only those output columns are decoded, in that order:
        as Hive's lazy SerDes do, a column the query does not use (the row key
        of ``sum(n)``, say) costs nothing, and its bad values are not seen.
        """
        if isinstance(batch, pa.Table):
            batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else pa.RecordBatch.from_pylist([], schema=batch.schema)
        if columns is not None:
            return self._deserialize_columns(batch, list(columns))
        keys = _batch_keys(batch)
        arrays: list = []
        for reader in self.readers:
            arrays.extend(reader.read_batch(batch, keys))
        if self._perm is not None:
            arrays = [arrays[i] for i in self._perm]
        self.stats.rows += batch.num_rows
        self.stats.batches += 1
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _deserialize_columns(self, batch: pa.RecordBatch, columns: list[str]) -> pa.RecordBatch:
        unknown = [c for c in columns if c not in self._names]
        if unknown:
            raise InvalidArgument(f"unknown columns {unknown}; the mapping has {self._names}")
        if not columns:
            return batch.select([])  # no column, the row count kept
        wanted = set(columns)
        readers = [r for r in self.readers if wanted.intersection(r.names)]
        if len(wanted) == len(self._names):
            full = self.deserialize_batch(batch)
            return full.select(columns)
        keys = _batch_keys(batch)
        decoded: dict[str, pa.Array] = {}
        for reader in readers:
            if isinstance(reader, KeyPartsReader):  # only the key parts asked for are decoded
                decoded.update(reader.read_parts(keys, wanted))
                continue
            decoded.update(zip(reader.names, reader.read_batch(batch, keys)))
        self.stats.rows += batch.num_rows
        self.stats.batches += 1
        schema = pa.schema([self.arrow_schema.field(c) for c in columns])
        return pa.RecordBatch.from_arrays([decoded[c] for c in columns], schema=schema)

    # -- serialization -----------------------------------------------------
    def _values(self, values: Sequence[Any] | Mapping[str, Any]) -> Sequence[Any]:
        if isinstance(values, Mapping):
            unknown = set(values) - set(self._names)
            if unknown:
                raise InvalidArgument(f"unknown columns {sorted(unknown)}; the mapping has {self._names}")
            return [values.get(n) for n in self._names]
        if len(values) != len(self._names):
            raise InvalidArgument(f"expected {len(self._names)} values ({self._names}), got {len(values)}")
        return values

    def _encode_key(self, values: Sequence[Any]) -> bytes:
        index = {n: i for i, n in enumerate(self._names)}
        if self._composite is None:
            col = next(c for c in self.mapping.columns if c.kind == ColumnKind.KEY)
            parts_cols = [col]
        else:
            parts_cols = [self.mapping.column(n) for n in self._composite.names]
        parts = []
        for col, codec in zip(parts_cols, self._key_codecs):
            value = values[index[col.name]]
            if value is None:
                raise EncodeError(col.name, value, "a row key (part) cannot be null")
            try:
                parts.append(codec.encode(value))
            except (ValueError, TypeError, OverflowError) as exc:
                raise EncodeError(col.name, value, str(exc)) from None
        if self._composite is None:
            return parts[0]
        try:
            return self._composite.join(parts)
        except ValueError as exc:
            raise EncodeError("+".join(self._composite.names), tuple(parts), str(exc)) from None

    def serialize(self, values: Sequence[Any] | Mapping[str, Any]) -> tuple[bytes, dict[bytes, bytes]]:
        """Encode one row (a sequence in mapping order, or a dict by name) into ``(key, cells)``.

        Null values write no cell.  A ``:timestamp`` column is not a cell;
        see :meth:`timestamp_of`.
        """
        values = self._values(values)
        key = self._encode_key(values)
        cells: dict[bytes, bytes] = {}
        for writer in self._writers:
            writer.write_row(values, cells)
        self.stats.rows_serialized += 1
        return key, cells

    def timestamp_of(self, values: Sequence[Any] | Mapping[str, Any]) -> int | None:
        """The put timestamp (ms) a row's ``:timestamp`` column asks for, or None."""
        values = self._values(values)
        for i, col in enumerate(self.mapping.columns):
            if col.kind == ColumnKind.TIMESTAMP and values[i] is not None:
                value = values[i]
                return datetime_to_us(value) // 1000 if col.type.name == "timestamp" else int(value)
        return None

    def serialize_batch(self, record_batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
        """Encode a record batch with this SerDe's columns into a row batch.

        The result has ``key`` then one binary column per mapped cell
        (``"cf:q"``, null = no cell), a ``map<binary, binary>`` column per
        mapped family, and with a ``:timestamp`` column an int64 ``"cf:q@ts"``
        column (ms) after each cell column.
        """
        if isinstance(record_batch, pa.Table):
            record_batch = pa.RecordBatch.from_arrays(
                [c.combine_chunks() for c in record_batch.columns], names=record_batch.column_names
            )
        if not isinstance(record_batch, pa.RecordBatch):
            raise InvalidArgument(f"serialize_batch expects a pyarrow.RecordBatch, got {type(record_batch).__name__}")
        columns = []
        for field in self.arrow_schema:
            index = record_batch.schema.get_field_index(field.name)
            if index < 0:
                raise InvalidArgument(f"record batch lacks column {field.name!r}; has {record_batch.schema.names}")
            arr = record_batch.column(index)
            if arr.type != field.type:
                try:
                    arr = arr.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise EncodeError(field.name, str(arr.type), f"cannot cast to {field.type}: {exc}") from None
            columns.append(arr)
        key = self._encode_key_batch(columns)
        out_names = ["key"]
        out_arrays = [key]
        stamp = self._timestamp_batch(columns)
        for writer in self._writers:
            for name, arr in writer.write_batch(columns).items():
                out_names.append(name)
                out_arrays.append(arr)
                if stamp is not None and ":" in name:
                    out_names.append(f"{name}@ts")
                    out_arrays.append(stamp)
        self.stats.rows_serialized += record_batch.num_rows
        self.stats.batches_serialized += 1
        return pa.RecordBatch.from_arrays(out_arrays, names=out_names)

    def _encode_key_batch(self, columns: list[pa.Array]) -> pa.Array:
        index = {n: i for i, n in enumerate(self._names)}
        names = self._composite.names if self._composite is not None else [
            next(c.name for c in self.mapping.columns if c.kind == ColumnKind.KEY)
        ]
        parts = []
        for name, codec in zip(names, self._key_codecs):
            arr = columns[index[name]]
            if arr.null_count:
                raise EncodeError(name, None, "a row key (part) cannot be null")
            parts.append(encode_column(name, codec, arr))
        if self._composite is None:
            return parts[0]
        key, bad = self._composite.join_arrays(parts)
        if bad.any():
            row = int(bad.argmax())
            raw = tuple(p[row].as_py() for p in parts)
            try:
                self._composite.join(list(raw))
                reason = "key parts do not fit the key layout"
            except ValueError as exc:
                reason = str(exc)
            raise EncodeError("+".join(names), raw, reason)
        return key

    def _timestamp_batch(self, columns: list[pa.Array]) -> pa.Array | None:
        for i, col in enumerate(self.mapping.columns):
            if col.kind == ColumnKind.TIMESTAMP:
                arr = columns[i]
                if col.type.name == "timestamp":
                    return _floor_ms(arr.cast(pa.int64()))
                return arr.cast(pa.int64())
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.ddl!r})"


def _floor_ms(micros: pa.Array) -> pa.Array:
    """Microseconds -> milliseconds, floored (so pre-1970 values round down like Java)."""
    valid = micros.is_valid().to_numpy(zero_copy_only=False)
    values = np.floor_divide(micros.fill_null(0).to_numpy(zero_copy_only=False), 1000)
    return pa.array(values, type=pa.int64(), mask=~valid)


def _split_timestamps(cells: Mapping[bytes, Any]) -> tuple[dict, dict | None]:
    """happybase ``include_timestamp`` form ``{col: (value, ts)}`` -> ``({col: value}, {col: ts})``."""
    first = next(iter(cells.values()))
    if not isinstance(first, tuple):
        return cells, None
    return {k: v[0] for k, v in cells.items()}, {k: v[1] for k, v in cells.items()}


def _batch_keys(batch: Any) -> pa.Array:
    """The ``key`` column of a row batch, or one line saying what the batch lacks."""
    if not isinstance(batch, pa.RecordBatch):
        raise InvalidArgument(f"deserialize_batch expects a pyarrow.RecordBatch, got {type(batch).__name__}")
    index = batch.schema.get_field_index("key")
    if index < 0:
        raise InvalidArgument(f"a row batch needs a 'key' column; got columns {batch.schema.names}")
    return batch.column(index)
