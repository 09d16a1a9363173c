"""Whole-row documents: several columns stored as one Avro record or JSON object in one cell.

The document is decoded once per row; each mapped column takes the field
of its name.  A document that does not decode makes all of its columns bad
for that row.  Both paths loop per row (a document format has no batch
kernel); the batch path builds one Python list per column and converts each
to Arrow once.
"""

from __future__ import annotations

from abc import abstractmethod

from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from serde._columns import ColumnReader, ColumnWriter, ErrorPolicy, RowFn, batch_column
from serde.base import SerDe
from serde.codecs.binary_arrays import as_binary
from serde.errors import EncodeError, MappingError
from serde.mapping import ColumnKind, MappedColumn

__all__ = ["DocumentReader", "DocumentWriter", "RowDocumentSerDe"]


def _reason(decode: Callable[[bytes], Any], raw: bytes) -> str:
    try:
        decode(raw)
    except Exception as exc:  # the message is what the report needs
        return f"{type(exc).__name__}: {exc}"
    return "document did not decode"


class DocumentReader(ColumnReader):
    """Columns ``names`` read from fields ``fields`` of the document in ``cell``.

    ``decode(raw) -> dict`` decodes and converts a whole document (raising
    on bad bytes or a field of the wrong type).
    """

    def __init__(
        self,
        names: Sequence[str],
        fields: Sequence[str],
        cell: str,
        decode: Callable[[bytes], dict],
        arrow_types: Sequence[pa.DataType],
        policy: ErrorPolicy,
    ):
        self.names = list(names)
        self.fields = list(fields)
        self.cell = cell
        self.sources = (cell,)
        self.qualifier = cell.encode("utf-8")
        self.decode = decode
        self.arrow_types = list(arrow_types)
        self.policy = policy
        self.label = f"{cell} ({', '.join(self.names)})"

    def _bad_row(self, key: bytes, raw: bytes) -> None:
        reason = _reason(self.decode, raw)
        if self.policy.fail:
            self.policy.row(key, self.label, raw, reason)
        for name in self.names:
            self.policy.row(key, name, raw, reason)

    def row_fn(self) -> RowFn:
        q, decode, fields = self.qualifier, self.decode, self.fields
        nones = [None] * len(fields)

        def read(key, cells, ts, out):
            raw = cells.get(q)
            if raw is None:
                out.extend(nones)
                return
            try:
                doc = decode(raw)
            except Exception:  # a document that does not decode is bad for every column
                self._bad_row(key, raw)
                out.extend(nones)
                return
            out.extend([doc.get(f) for f in fields])

        return read

    def read_batch(self, batch, keys):
        raw = as_binary(batch_column(batch, self.cell))
        values = raw.to_pylist()
        columns: list[list] = [[] for _ in self.fields]
        bad_rows = []
        decode, fields = self.decode, self.fields
        for i, item in enumerate(values):
            doc = None
            if item is not None:
                try:
                    doc = decode(item)
                except Exception:  # counted below, once per batch
                    bad_rows.append(i)
            for column, field in zip(columns, fields):
                column.append(None if doc is None else doc.get(field))
        if bad_rows:
            bad = np.zeros(len(values), dtype=bool)
            bad[bad_rows] = True
            explain = lambda v: _reason(decode, v)  # noqa: E731 - a one-line adapter
            if self.policy.fail:
                self.policy.batch(self.label, bad, keys, raw, explain)
            for name in self.names:
                self.policy.batch(name, bad, keys, raw, explain)
        return [pa.array(col, type=t) for col, t in zip(columns, self.arrow_types)]


class DocumentWriter(ColumnWriter):
    """Writes columns at ``positions`` as fields of one document in ``cell``.

    ``encode(doc: dict) -> bytes``; a row whose fields are all null writes no cell.
    """

    def __init__(
        self,
        positions: Sequence[int],
        fields: Sequence[str],
        cell: str,
        encode: Callable[[dict], bytes],
    ):
        self.positions = list(positions)
        self.fields = list(fields)
        self.cell = cell
        self.qualifier = cell.encode("utf-8")
        self.encode = encode

    def _encode(self, doc: dict) -> bytes:
        try:
            return self.encode(doc)
        except (ValueError, TypeError, OverflowError) as exc:
            raise EncodeError(self.cell, doc, str(exc)) from None

    def write_row(self, values, cells):
        doc = {f: values[p] for f, p in zip(self.fields, self.positions)}
        if all(v is None for v in doc.values()):
            return
        cells[self.qualifier] = self._encode(doc)

    def write_batch(self, columns):
        lists = [columns[p].to_pylist() for p in self.positions]
        out = []
        for row in zip(*lists):
            if all(v is None for v in row):
                out.append(None)
            else:
                out.append(self._encode(dict(zip(self.fields, row))))
        return {self.cell: pa.array(out, type=pa.binary())}


class RowDocumentSerDe(SerDe):
    """Base of SerDes that can store a whole row as one document in one cell.

    Subclasses set ``row_cell`` (None for the per-column layout) and
    ``_doc_columns`` in ``_configure`` and provide :meth:`_document_codec`.
    """

    row_cell: str | None = None
    _doc_columns: list = []

    @abstractmethod
    def _document_codec(self) -> tuple[Callable[[bytes], dict], Callable[[dict], bytes]]:
        """``(decode, encode)`` of the row document."""

    def _check_mapping(self) -> None:
        docs = {c.name for c in self._doc_columns}
        seen: dict[str, str] = {}
        for col in self._cell_columns():
            if col.kind == ColumnKind.CELL and col.name not in docs:
                if col.cell in seen or col.cell == self.row_cell:
                    raise MappingError(f"cell mapped by two columns ({seen.get(col.cell)!r} and {col.name!r})", col.cell)
                seen[col.cell] = col.name

    def _split(self, columns: list[MappedColumn]) -> tuple[list[MappedColumn], list[MappedColumn]]:
        docs = {c.name for c in self._doc_columns}
        return [c for c in columns if c.name not in docs], [c for c in columns if c.name in docs]

    def _value_readers(self, columns: list[MappedColumn]) -> list[ColumnReader]:
        plain, docs = self._split(columns)
        readers = super()._value_readers(plain)
        if docs:
            names = [c.name for c in docs]
            types = [self.column_type(n).arrow() for n in names]
            decode, _ = self._document_codec()
            readers.append(DocumentReader(names, names, self.row_cell, decode, types, self._policy))
        return readers

    def _value_writers(self, columns: list[MappedColumn]) -> list[ColumnWriter]:
        plain, docs = self._split(columns)
        writers = super()._value_writers(plain)
        if docs:
            index = {n: i for i, n in enumerate(self.mapping.names)}
            names = [c.name for c in docs]
            _, encode = self._document_codec()
            writers.append(DocumentWriter([index[n] for n in names], names, self.row_cell, encode))
        return writers
