"""Part-file formats of export and import: Parquet, Avro and CSV, written and read per task.

* Parquet: pyarrow, whole record batches.
* Avro: fastavro; the schema is derived from the Arrow schema (every field
  a ``["null", T]`` union; dates, timestamps and decimals as Avro logical
  types).  Avro is row-oriented, so records are built per row here.
* CSV: pyarrow's writer and reader with a header line; binary columns are
  written in HBase's ``Bytes.toStringBinary`` form (``\\xNN`` escapes) and
  turned back into bytes on reading; a null is an empty field and an empty
  string ``""``.  Nested columns (maps, lists, structs) cannot be CSV.

Files go through :class:`storage.vfs.fs.FileSystem`, so any path or URI works.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from storage import InvalidArgument

from jobs._binary_text import escape_binary, unescape_binary

__all__ = ["FORMATS", "EXTENSIONS", "check_format", "PartWriter", "read_part", "avro_schema", "format_of"]

FORMATS = ("parquet", "avro", "csv")
EXTENSIONS = {"parquet": ".parquet", "avro": ".avro", "csv": ".csv"}
_AVRO_BATCH = 8192


def format_of(name: str) -> str | None:
    """The format a file name's extension names, or None."""
    low = name.lower()
    for fmt, ext in EXTENSIONS.items():
        if low.endswith(ext):
            return fmt
    return None


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)


def _nested(t: pa.DataType) -> bool:
    return pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_struct(t)


def check_format(fmt: str, schema: pa.Schema) -> None:
    """Fail on the driver, naming the column, when ``fmt`` cannot hold ``schema``."""
    if fmt not in FORMATS:
        raise InvalidArgument(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "csv":
        nested = [f.name for f in schema if _nested(f.type)]
        if nested:
            raise InvalidArgument(f"CSV cannot hold the nested column(s) {nested}: use --format parquet or avro")
    if fmt == "avro":
        avro_schema(schema)


# -- Avro schema ---------------------------------------------------------------------
def _avro_type(t: pa.DataType, name: str, counter: list[int]) -> Any:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if _is_binary(t):
        return "bytes"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "long" if t.bit_width > 32 or (pa.types.is_unsigned_integer(t) and t.bit_width == 32) else "int"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        logical = "timestamp-micros" if t.tz else "local-timestamp-micros"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise InvalidArgument(f"Avro maps have string keys; column {name!r} is {t}")
        return {"type": "map", "values": ["null", _avro_type(t.item_type, name, counter)]}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "items": ["null", _avro_type(t.value_type, name, counter)]}
    if pa.types.is_struct(t):
        counter[0] += 1
        return {"type": "record", "name": f"struct_{counter[0]}",
                "fields": [{"name": f.name, "type": ["null", _avro_type(f.type, f.name, counter)], "default": None}
                           for f in t]}
    raise InvalidArgument(f"column {name!r} of type {t} has no Avro form")


def avro_schema(schema: pa.Schema, name: str = "Row") -> dict:
    """An Avro record schema for an Arrow schema (every field nullable)."""
    counter = [0]
    return {"type": "record", "name": name, "namespace": "regionscan",
            "fields": [{"name": f.name, "type": ["null", _avro_type(f.type, f.name, counter)], "default": None}
                       for f in schema]}


def _to_avro(t: pa.DataType):
    """Arrow ``to_pylist`` value -> fastavro datum (maps come as pair lists), or None if the same."""
    if pa.types.is_map(t):
        inner = _to_avro(t.item_type)
        return lambda v: {k: (x if inner is None or x is None else inner(x)) for k, x in v}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _to_avro(t.value_type)
        return None if inner is None else (lambda v: [x if x is None else inner(x) for x in v])
    if pa.types.is_struct(t):
        convs = [(f.name, _to_avro(f.type)) for f in t]
        if all(c is None for _, c in convs):
            return None
        return lambda v: {n: (v[n] if c is None or v[n] is None else c(v[n])) for n, c in convs}
    return None


# -- writing -------------------------------------------------------------------------
def _csv_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    arrays = [escape_binary(col) if _is_binary(col.type) else col for col in batch.columns]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _csv_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, pa.large_string()) if _is_binary(f.type) else f for f in schema])


class PartWriter:
    """Writes record batches of one schema into one part file; call ``close`` at the end."""

    def __init__(self, fmt: str, sink: Any, schema: pa.Schema):
        self.fmt = fmt
        self.sink = sink
        self.schema = schema
        self.rows = 0
        if fmt == "parquet":
            import pyarrow.parquet as pq

            self._writer = pq.ParquetWriter(sink, schema, compression="zstd")
        elif fmt == "csv":
            import pyarrow.csv as pcsv

            self._writer = pcsv.CSVWriter(sink, _csv_schema(schema))
        elif fmt == "avro":
            from fastavro import parse_schema
            from fastavro.write import Writer

            self._writer = Writer(sink, parse_schema(avro_schema(schema)), codec="deflate")
            self._convs = [(f.name, _to_avro(f.type)) for f in schema]
        else:
            raise InvalidArgument(f"unknown format {fmt!r}")

    def write(self, batch: pa.RecordBatch) -> None:
        """Append a batch (its schema must be this writer's)."""
        if not batch.num_rows:
            return
        self.rows += batch.num_rows
        if self.fmt == "parquet":
            self._writer.write_batch(batch)
        elif self.fmt == "csv":
            self._writer.write_batch(_csv_batch(batch))
        else:
            convs = [(n, c) for n, c in self._convs if c is not None]
            for record in batch.to_pylist():
                for name, conv in convs:
                    if record[name] is not None:
                        record[name] = conv(record[name])
                self._writer.write(record)

    def close(self) -> None:
        """Finish the file (footer, last Avro block) and close the sink."""
        try:
            if self.fmt == "avro":
                self._writer.flush()
            else:
                self._writer.close()
        finally:
            self.sink.close()


# -- reading -------------------------------------------------------------------------
def _cast_to(batch: pa.RecordBatch | pa.Table, schema: pa.Schema | None) -> pa.Table:
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    if schema is None:
        return table
    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise InvalidArgument(f"the input lacks column(s) {missing}; it has {table.column_names}")
    return table.select(schema.names).cast(schema)


def read_part(fmt: str, source: Any, schema: pa.Schema | None = None) -> Iterator[pa.Table]:
    """The rows of one part file as Arrow tables, cast to ``schema`` when given.

    For CSV, ``schema`` says which columns are binary (read as escaped
    text, then unescaped); without it every column is read as text.
    """
    if fmt == "parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(source).iter_batches(batch_size=65536):
            yield _cast_to(batch, schema)
    elif fmt == "csv":
        import pyarrow.csv as pcsv

        types = None
        if schema is not None:
            types = {f.name: (pa.large_string() if _is_binary(f.type) else f.type) for f in schema}
        reader = pcsv.open_csv(
            source,
            read_options=pcsv.ReadOptions(block_size=16 << 20),
            convert_options=pcsv.ConvertOptions(column_types=types, strings_can_be_null=True,
                                                quoted_strings_can_be_null=False),
        )
        for batch in reader:
            if schema is not None:
                arrays = []
                for name in batch.schema.names:
                    col = batch.column(name)
                    target = schema.field(name).type if name in schema.names else None
                    arrays.append(unescape_binary(col) if target is not None and _is_binary(target) else col)
                batch = pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)
            yield _cast_to(batch, schema)
    elif fmt == "avro":
        from fastavro import reader as avro_reader

        records = avro_reader(source)
        file_schema = schema
        buffer: list[dict] = []
        map_fields = [f.name for f in (schema or []) if pa.types.is_map(f.type)]
        for record in records:
            buffer.append(record)
            if len(buffer) >= _AVRO_BATCH:
                yield _avro_table(buffer, file_schema, map_fields)
                buffer = []
        if buffer:
            yield _avro_table(buffer, file_schema, map_fields)
    else:
        raise InvalidArgument(f"unknown format {fmt!r}")


def _avro_table(records: list[dict], schema: pa.Schema | None, map_fields: list[str]) -> pa.Table:
    if schema is None:
        return pa.Table.from_pylist(records)
    missing = [f.name for f in schema if f.name not in records[0]]
    if missing:
        raise InvalidArgument(f"the input lacks column(s) {missing}; it has {sorted(records[0])}")
    for name in map_fields:
        for r in records:
            value = r.get(name)
            if isinstance(value, dict):
                r[name] = list(value.items())
    return pa.Table.from_pylist(records, schema=schema)
