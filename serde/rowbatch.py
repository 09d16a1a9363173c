"""Row batches and rows: conversions, and an in-memory row source.

The row-batch form is the engine's (``docs/architecture.md``, "Batch
path"): a ``key`` binary column, then one binary column per requested
``"family:qualifier"`` (null where the row lacks it), a
``map<binary, binary>`` column per requested whole family ``"family"``, and
with timestamps an int64 ``"family:qualifier@ts"`` column after its cell
column.

:class:`InMemoryRowSource` serves rows with the two scan methods the SerDe
profiler and tests use (``scan`` like happybase, ``scan_batches`` like the
engine's batch path), so SerDes can be exercised without a table on disk.
These functions loop in Python: they build fixtures and reference rows, they
are not a hot path.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa

from storage.columns import parse_column

__all__ = [
    "rows_to_batch",
    "batch_to_rows",
    "record_batch_rows",
    "InMemoryRowSource",
]

FAMILY_MAP = pa.map_(pa.binary(), pa.binary())


def _column_bytes(column: str | bytes) -> bytes:
    return column.encode("utf-8") if isinstance(column, str) else bytes(column)


def rows_to_batch(
    rows: Iterable[Sequence[Any]],
    columns: Sequence[str | bytes],
    include_timestamp: bool = False,
) -> pa.RecordBatch:
    """Build a row batch from rows ``(key, {b"cf:q": value}[, {b"cf:q": ts}])``.

    ``columns`` lists ``"cf:q"`` cells and ``"cf"`` families, as a scan's
    ``columns=``.  With ``include_timestamp`` each cell column is followed by
    its ``"cf:q@ts"`` column (rows without a timestamp dict get nulls).
    """
    rows = list(rows)
    names = ["key"]
    arrays = [pa.array([bytes(r[0]) for r in rows], pa.binary())]
    for column in columns:
        raw = _column_bytes(column)
        spec = parse_column(raw)
        name = spec.name
        if spec.qualifier is not None:  # b"cf:q", or b"cf:" for the empty qualifier
            names.append(name)
            arrays.append(pa.array([r[1].get(raw) for r in rows], pa.binary()))
            if include_timestamp:
                names.append(f"{name}@ts")
                arrays.append(
                    pa.array([(r[2].get(raw) if len(r) > 2 and r[2] else None) for r in rows], pa.int64())
                )
        else:
            prefix = raw + b":"
            size = len(prefix)
            maps = []
            for r in rows:
                items = [(k[size:], v) for k, v in r[1].items() if k.startswith(prefix)]
                maps.append(items or None)
            names.append(name)
            arrays.append(pa.array(maps, FAMILY_MAP))
    return pa.RecordBatch.from_arrays(arrays, names=names)


def batch_to_rows(batch: pa.RecordBatch) -> list[tuple]:
    """Turn a row batch back into happybase-style rows.

    Each row is ``(key, {b"cf:q": value})``, or ``(key, cells, {b"cf:q": ts})``
    when the batch has ``@ts`` columns; null cells and null map items are left out.
    """
    keys = batch.column(batch.schema.get_field_index("key")).to_pylist()
    cell_columns = []
    ts_columns = []
    for i, field in enumerate(batch.schema):
        if field.name == "key":
            continue
        values = batch.column(i).to_pylist()
        if field.name.endswith("@ts"):
            ts_columns.append((field.name[:-3].encode("utf-8"), values))
        else:
            cell_columns.append((field.name.encode("utf-8"), pa.types.is_map(field.type), values))
    rows = []
    for i, key in enumerate(keys):
        cells = {}
        for name, is_family, values in cell_columns:
            value = values[i]
            if value is None:
                continue
            if is_family:
                for qualifier, item in value:
                    if item is not None:
                        cells[name + b":" + qualifier] = item
            else:
                cells[name] = value
        if ts_columns:
            stamps = {name: values[i] for name, values in ts_columns if values[i] is not None}
            rows.append((key, cells, stamps))
        else:
            rows.append((key, cells))
    return rows


def _python_value(value: Any, arrow_type: pa.DataType) -> Any:
    """Arrow's ``to_pylist`` value in the row-wise form: maps as dicts, recursively."""
    if value is None:
        return None
    if pa.types.is_map(arrow_type):
        return {k: _python_value(v, arrow_type.item_type) for k, v in value}
    if pa.types.is_list(arrow_type):
        return [_python_value(v, arrow_type.value_type) for v in value]
    if pa.types.is_struct(arrow_type):
        return {f.name: _python_value(value[f.name], f.type) for f in arrow_type}
    return value


def record_batch_rows(batch: pa.RecordBatch) -> list[tuple]:
    """A decoded record batch as tuples, in the form ``SerDe.deserialize`` returns."""
    columns = []
    for field, column in zip(batch.schema, batch.columns):
        values = column.to_pylist()
        if pa.types.is_map(field.type) or pa.types.is_list(field.type) or pa.types.is_struct(field.type):
            values = [_python_value(v, field.type) for v in values]
        columns.append(values)
    return list(zip(*columns)) if columns else [() for _ in range(batch.num_rows)]


class InMemoryRowSource:
    """Rows held in memory, served through ``scan`` and ``scan_batches`` like a table.

    ``rows`` are ``(key, {b"cf:q": value}[, {b"cf:q": ts}])``; they are kept
    sorted by key.  Row batches are built once per ``(columns, batch_size,
    include_timestamp)`` and reused, so a scan's fetch cost is that of
    handing over ready batches.
    """

    def __init__(self, rows: Iterable[Sequence[Any]]):
        self.rows = sorted((tuple(r) for r in rows), key=lambda r: r[0])
        self._cache: dict[tuple, list[pa.RecordBatch]] = {}

    def _columns(self, columns: Sequence[str | bytes] | None) -> list[str]:
        if columns is not None:
            return [_column_bytes(c).decode("utf-8") for c in columns]
        seen: dict[str, None] = {}
        for row in self.rows:
            for k in row[1]:
                seen.setdefault(k.decode("utf-8"), None)
        return sorted(seen)

    def scan_batches(
        self,
        columns: Sequence[str | bytes] | None = None,
        include_timestamp: bool = False,
        batch_size: int = 65536,
        **_: Any,
    ) -> Iterator[pa.RecordBatch]:
        """Yield row batches of at most ``batch_size`` rows."""
        names = tuple(self._columns(columns))
        cache_key = (names, batch_size, include_timestamp)
        if cache_key not in self._cache:
            self._cache[cache_key] = [
                rows_to_batch(self.rows[i : i + batch_size], names, include_timestamp)
                for i in range(0, len(self.rows), batch_size)
            ]
        yield from self._cache[cache_key]

    def scan(
        self,
        columns: Sequence[str | bytes] | None = None,
        include_timestamp: bool = False,
        **_: Any,
    ) -> Iterator[tuple[bytes, dict]]:
        """Yield ``(key, {b"cf:q": value})`` (values ``(value, ts)`` with ``include_timestamp``)."""
        specs = None if columns is None else [parse_column(_column_bytes(c)) for c in columns]
        families = set() if specs is None else {s.family for s in specs if s.qualifier is None}
        exact = set() if specs is None else {s.family + b":" + s.qualifier for s in specs if s.qualifier is not None}
        for row in self.rows:
            cells = row[1]
            if specs is not None:
                cells = {k: v for k, v in cells.items() if k in exact or parse_column(k).family in families}
            if include_timestamp:
                stamps = row[2] if len(row) > 2 and row[2] else {}
                cells = {k: (v, stamps.get(k)) for k, v in cells.items()}
            yield row[0], cells
