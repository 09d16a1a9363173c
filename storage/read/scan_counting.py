"""A region's batch scan with its metrics charged: one definition for every caller.

The embedded ``Table.scan_batches`` and the connector's partition reads both
run :func:`storage.read.batch_scan.scan_region_batches` over a region view.
:func:`counted_region_batches` charges a :class:`ScanMetrics` the way HBase's
region scanner does: ``ROWS_SCANNED`` and ``BYTES_IN_RESULTS`` per batch
returned, and what the region's store file readers read meanwhile (blocks from
disk and cache, bytes, read calls, seeks) once the region is done, also when
the caller stops early.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from .. import kernels
from ..scanner.metrics import ScanMetrics
from .batch_scan import BatchScan, scan_region_batches

__all__ = ["counted_region_batches", "batch_row_count"]


def counted_region_batches(view, scan: BatchScan, metrics: ScanMetrics | None) -> Iterator[tuple[pa.RecordBatch, int]]:
    """``scan_region_batches(view, scan, metrics)`` as ``(batch, rows)`` pairs,
    with ``metrics`` (None: nothing counted) charged for them."""
    before = _read_counters(view) if metrics is not None else None
    try:
        for batch in scan_region_batches(view, scan, metrics):
            rows = batch_row_count(batch, scan.output)
            if metrics is not None:
                metrics.rows_scanned += rows
                metrics.bytes_in_results += batch.nbytes
            yield batch, rows
    finally:
        if metrics is not None:
            _add_read_counters(metrics, before, _read_counters(view))


def batch_row_count(batch: pa.RecordBatch, output: str) -> int:
    """Rows in a scan's batch: its length for row batches, its row starts for cell batches."""
    as_rows = output == "rows" or batch.schema.names[0] == "key"  # row_dicts row batches
    return batch.num_rows if as_rows else len(kernels.row_boundaries(batch))


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
