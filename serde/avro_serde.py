"""The ``avro`` SerDe: cell values as Avro binary (fastavro, schemaless datums).

Two layouts:

* per column (default): each cell column holds one Avro datum.  Its schema
  comes from, in order, the catalog column's ``avro`` entry, the property
  ``<column>.avro.schema.literal``, the property
  ``<family>.<qualifier>.avro.schema.literal``, or is derived from the
  declared column type.  A given schema is authoritative: the column's type
  is read from it (records become structs).  For a whole-family column the
  schema is that of each value.  Columns marked ``#b``/``#s`` without a
  schema keep that storage.
* per row: property ``avro.row.cell = "cf:q"``; the whole row is one Avro
  record in that cell, and every column mapped to that cell is the record
  field of the same name.  ``avro.schema.literal`` gives the record schema
  (else it is derived from the mapped columns, every field nullable).

The row key uses binary/text storage as for the other SerDes (default text,
or the mapping form's default).  Decoding loops per value (fastavro has no
batch reader for schemaless datums); the parsed schema and the converters
are built once per column, and a datum with trailing bytes is rejected.
"""

from __future__ import annotations

import io
from typing import Any

from serde._avro_types import avro_to_type, load_schema, reader_converter, type_to_avro, writer_converter
from serde._document import RowDocumentSerDe
from serde.codecs.avro import AvroCodec, fastavro, parse_schema, require_fastavro
from serde.codecs.base import Codec
from serde.errors import MappingError
from serde.mapping import ColumnKind, MappedColumn
from serde.types import DataType

class _AvroRecord:
    """Decode/encode one row record, keeping only the mapped fields."""

    def __init__(self, schema: Any, fields: list[str], types: list[DataType]):
        self.parsed = parse_schema(schema, "avro.row.cell")
        self.fields = fields
        self.readers = [(f, reader_converter(t)) for f, t in zip(fields, types)]
        self.writers = [(f, writer_converter(t)) for f, t in zip(fields, types)]

    def decode(self, raw: bytes) -> dict:
        stream = io.BytesIO(raw)
        record = fastavro.schemaless_reader(stream, self.parsed, None)
        if stream.tell() != len(raw):
            raise ValueError(f"{len(raw) - stream.tell()} trailing bytes after the Avro record")
        if not isinstance(record, dict):
            raise ValueError("the row cell does not hold a record")
        return {f: (record.get(f) if c is None or record.get(f) is None else c(record.get(f))) for f, c in self.readers}

    def encode(self, doc: dict) -> bytes:
        record = {f: (doc.get(f) if c is None or doc.get(f) is None else c(doc.get(f))) for f, c in self.writers}
        stream = io.BytesIO()
        try:
            fastavro.schemaless_writer(stream, self.parsed, record)
        except (ValueError, TypeError, OverflowError):
            raise
        except Exception as exc:  # fastavro reports some type mismatches as other errors
            raise ValueError(str(exc)) from None
        return stream.getvalue()


class AvroSerDe(RowDocumentSerDe):
    """Avro cell values, per column or one record per row."""

    name = "avro"
    default_storage = None
    own_properties = frozenset({"avro.row.cell", "avro.schema.literal"})

    def _mapping_properties(self) -> set[str]:
        # a column's schema may be given as "<column>.avro.schema.literal" or "<cf>.<q>.avro.schema.literal"
        names = set()
        for col in self.mapping.columns:
            if col.kind in (ColumnKind.CELL, ColumnKind.FAMILY):
                names.add(f"{col.name}.avro.schema.literal")
            if col.kind == ColumnKind.CELL:
                names.add(f"{col.family}.{col.qualifier}.avro.schema.literal")
        return names

    def _configure(self) -> None:
        require_fastavro()
        props = self.properties
        self.row_cell = props.get("avro.row.cell")
        self._types: dict[str, DataType] = {}
        self._schemas: dict[str, Any] = {}
        self._doc_columns: list[MappedColumn] = []
        for col in self.mapping.columns:
            if col.kind not in (ColumnKind.CELL, ColumnKind.FAMILY) or "serde" in col.options:
                continue  # not a cell, or encoded by the SerDe its catalog entry names
            if self.row_cell is not None and col.kind == ColumnKind.CELL and col.cell == self.row_cell:
                self._doc_columns.append(col)
                continue
            explicit = col.options.get("avro.schema")
            if explicit is None:
                explicit = props.get(f"{col.name}.avro.schema.literal")
            if explicit is None and col.kind == ColumnKind.CELL:
                explicit = props.get(f"{col.family}.{col.qualifier}.avro.schema.literal")
            if explicit is None and col.storage is not None:
                continue  # an explicit #b/#s column keeps its storage
            value_type = col.type if col.kind == ColumnKind.CELL else col.type.value
            if explicit is not None:
                schema = load_schema(explicit)
                value_type = avro_to_type(schema)
            else:
                schema = type_to_avro(value_type)
            self._schemas[col.name] = schema
            self._types[col.name] = value_type if col.kind == ColumnKind.CELL else DataType(
                "map", key=col.type.key, value=value_type
            )
        if self.row_cell is not None:
            if not self._doc_columns:
                raise MappingError("avro.row.cell names a cell no column is mapped to", self.row_cell)
            self._record_setup()

    def _record_setup(self) -> None:
        literal = self.properties.get("avro.schema.literal")
        fields = [c.name for c in self._doc_columns]
        if literal is None:
            schema = {
                "type": "record",
                "name": "row",
                "fields": [
                    {"name": c.name, "type": ["null", type_to_avro(c.type)], "default": None} for c in self._doc_columns
                ],
            }
            types = [c.type for c in self._doc_columns]
        else:
            schema = load_schema(literal)
            record_type = avro_to_type(schema)
            if record_type.name != "struct":
                raise MappingError("avro.schema.literal must be a record for avro.row.cell", str(record_type))
            by_name = dict(record_type.fields)
            for name in fields:
                if name not in by_name:
                    raise MappingError("column is not a field of the row record", name)
            types = [by_name[n] for n in fields]
            for name, data_type in zip(fields, types):
                self._types[name] = data_type
        self._record = _AvroRecord(schema, fields, types)

    def column_type(self, name: str) -> DataType:
        return self._types.get(name) or super().column_type(name)

    def _value_codec(self, column: MappedColumn, data_type: DataType, role: str) -> Codec:
        schema = self._schemas.get(column.name)
        if schema is None:
            return super()._value_codec(column, data_type, role)
        value_type = self._types[column.name]
        if column.kind == ColumnKind.FAMILY:
            value_type = value_type.value
        return AvroCodec(value_type, schema, column.name)

    def _document_codec(self):
        return self._record.decode, self._record.encode
