"""A region's batch scan with its metrics charged: one definition for every caller.

The embedded ``Table.scan_batches`` and the connector's partition reads both
run :func:`storage.read.batch_scan.scan_region_batches` over a region view.
:func:`counted_region_batches` charges a :class:`ScanMetrics` the way HBase's
region scanner does: ``ROWS_SCANNED`` and ``BYTES_IN_RESULTS`` per batch
returned, and what the region's store file readers read meanwhile (blocks from
disk and cache, bytes, read calls, seeks) once the region is done, also when
the caller stops early.

``BYTES_IN_RESULTS`` has one definition on every path (:func:`result_bytes`):
the cells a batch holds, sized as the cell path sizes a row's cells
(:func:`storage.scanner.region_scanner.result_size`).  It is a figure of what
was returned, not of how it is laid out: a batch sliced from a kept one, or
built with or without validity buffers, counts the same.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import kernels
from ..kernels.cell_columns import coded_bytes, data_span, value_offsets
from ..scanner.metrics import ScanMetrics
from ..scanner.region_scanner import CELL_FIXED_BYTES
from .batch_scan import scan_region_batches
from .region_plan import RegionReadPlan

__all__ = ["counted_region_batches", "batch_row_count", "result_bytes"]


def counted_region_batches(view, scan: RegionReadPlan, metrics: ScanMetrics | None) -> Iterator[tuple[pa.RecordBatch, int]]:
    """``scan_region_batches(view, scan, metrics)`` as ``(batch, rows)`` pairs,
    with ``metrics`` (None: nothing counted) charged for them."""
    before = _read_counters(view) if metrics is not None else None
    try:
        for batch in scan_region_batches(view, scan, metrics):
            rows = batch_row_count(batch, scan.output)
            if metrics is not None:
                metrics.rows_scanned += rows
                metrics.bytes_in_results += result_bytes(batch)
            yield batch, rows
    finally:
        if metrics is not None:
            _add_read_counters(metrics, before, _read_counters(view))


def batch_row_count(batch: pa.RecordBatch, output: str) -> int:
    """Rows in a scan's batch: its length for row batches, its row starts for cell batches."""
    as_rows = output == "rows" or batch.schema.names[0] == "key"  # row_dicts row batches
    return batch.num_rows if as_rows else len(kernels.row_boundaries(batch))


def result_bytes(batch: pa.RecordBatch) -> int:
    """``BYTES_IN_RESULTS`` of one batch a scan returns: per cell it holds,
    its row key, family, qualifier and value bytes and
    :data:`~storage.scanner.region_scanner.CELL_FIXED_BYTES` (timestamp, type,
    length prefixes).  A cell batch holds a cell per entry; a row batch
    (``key``, then a ``family:qualifier`` value per column, with ``@ts``
    timestamp columns beside them, or a ``family`` map of qualifier to value
    per family) a cell per present value or map entry."""
    if batch.num_rows == 0:
        return 0
    names = batch.schema.names
    if names[0] != "key":  # cells: row, family, qualifier, timestamp, type, value
        return batch.num_rows * CELL_FIXED_BYTES + sum(
            _value_bytes(batch.column(name)) for name in ("row", "family", "qualifier", "value"))
    columns = batch.columns
    keys = columns[0]
    key_span = data_span(keys)
    key_lengths = None  # per row: needed only where a column lacks some rows
    total = 0
    n = len(keys)
    for j, name, fixed in _row_plan(names):
        column = columns[j]
        nulls = column.null_count
        if nulls == 0 and fixed and not pa.types.is_map(column.type):
            # the usual column: a value in every row (a family:qualifier name holds both but for the colon)
            total += n * fixed + key_span + _value_bytes(column)
            continue
        if nulls == n:
            continue
        is_map = pa.types.is_map(column.type)
        if key_lengths is None and (is_map or column.null_count):
            key_lengths = np.diff(value_offsets(keys))
        if is_map:
            total += _map_bytes(column, len(name.encode()), key_lengths)
            continue
        present = len(column) - column.null_count
        if column.null_count == 0:
            row_bytes = key_span
        else:
            row_bytes = int(key_lengths[np.asarray(column.is_valid())].sum())
        # a ``family:qualifier`` name holds both but for the colon
        total += present * (CELL_FIXED_BYTES + len(name.encode()) - 1) + row_bytes + _value_bytes(column)
    return total


_ROW_PLANS: dict[tuple, list] = {}  # column names -> their plan (a scan's batches share a few)


def _row_plan(names: list[str]) -> list[tuple[int, str, int]]:
    """Per column of a row batch but the key and the ``@ts`` columns (a value's
    timestamp is counted in its cell's fixed bytes): ``(index, name, fixed)``,
    ``fixed`` the bytes each present value's cell adds beside its row key and
    value (0 for a family map column, counted entry by entry)."""
    key = tuple(names)
    plan = _ROW_PLANS.get(key)
    if plan is None:
        plan = [(j, name, CELL_FIXED_BYTES + len(name.encode()) - 1 if ":" in name else 0)
                for j, name in enumerate(names) if j and not name.endswith("@ts")]
        if len(_ROW_PLANS) >= 1024:
            _ROW_PLANS.clear()
        _ROW_PLANS[key] = plan
    return plan


def _map_bytes(column: pa.MapArray, family_bytes: int, key_lengths: np.ndarray) -> int:
    """The cells of a family's map column (qualifier to value per row)."""
    offsets = value_offsets(column)
    counts = np.diff(offsets)
    entries = column.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    if column.null_count:
        valid = np.asarray(column.is_valid())
        entries = entries.filter(pa.array(np.repeat(valid, counts)))  # a null map's entries are none
        counts = np.where(valid, counts, 0)
    cells = int(counts.sum())
    qualifiers, values = entries.field(0), entries.field(1)
    return (cells * (CELL_FIXED_BYTES + family_bytes) + int(np.dot(key_lengths, counts))
            + _value_bytes(qualifiers) + _value_bytes(values))


def _value_bytes(column: pa.Array) -> int:
    """Bytes of the non-null values of a binary array (of the slice only); of a dictionary
    array of binary entries, the bytes its expanded values would hold."""
    if isinstance(column, pa.DictionaryArray):
        lengths = np.diff(value_offsets(column.dictionary))
        if len(lengths) and lengths.min() == lengths.max():
            # entries of one width (a fixed-width encoding's values): no per-row lookup
            return int(lengths[0]) * (len(column) - column.null_count)
        codes = column.indices.to_numpy(zero_copy_only=False) if column.null_count == 0 else \
            column.indices.drop_null().to_numpy(zero_copy_only=False)
        return coded_bytes(codes, lengths)
    if column.null_count == 0:
        return data_span(column)
    return int(pc.sum(pc.binary_length(column)).as_py() or 0)


def _read_counters(view) -> dict[str, int]:
    """Summed read counters of the store files a region view reads."""
    total: dict[str, int] = {}
    for store in view.stores.values():
        for f in store.files:
            for name, value in f.reader.counters.snapshot().items():
                total[name] = total.get(name, 0) + value
    return total


def _add_read_counters(metrics: ScanMetrics, before: dict[str, int], after: dict[str, int]) -> None:
    """Charge a scan with what its region's readers read meanwhile, once per region.

    Readers are shared, so a concurrent scan of the same files is counted
    here too; the counters are exact for a scan that runs alone.
    """
    delta = {k: v - before.get(k, 0) for k, v in after.items()}
    metrics.blocks_read_from_disk += delta.get("blocks_read", 0)
    metrics.bytes_read_from_disk += delta.get("bytes_read", 0)
    metrics.read_requests += delta.get("reads", 0)
    metrics.blocks_read_from_cache += delta.get("cache_hits", 0)
    metrics.seeks += delta.get("seeks", 0)
