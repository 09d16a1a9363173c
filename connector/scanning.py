"""The scan behind a record reader: a split's rows as Arrow batches, resumable after a row.

Files mode (a path or pyarrow URI root): each pinned region of the split
is opened read-only from exactly its pinned files and WAL records
(:class:`~storage.region.region_snapshots.PinnedRegion`) and scanned with the engine's
batch path, one span (row range) at a time.  Server mode (``grpc://``
root): the same spans go to the region server's streaming scan through
``storage.connect(root)``.

``resume_after`` restarts the scan just after a row that was already
handed out, which is how readers recover from a read error.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Iterator

import pyarrow as pa

from storage import kernels
from storage.filters import register_filter_specs
from storage.read.batch_scan import BatchScan, scan_region_batches
from storage.cells import cells_to_batch
from storage.keys import KeyRange, intersect, key_after
from storage.namespaces import table_dir
from storage.vfs.fs import FileSystem
from storage.read.row_count import ROW_COUNT_FILTER, count_region_rows, first_key_not_of_length
from storage.read.scan_counting import counted_region_batches, result_bytes
from storage.read.scan_request import plan_batch_scan
from storage.region.region import Region
from storage.region.view import RegionView
from storage.schema import FamilySettings
from storage.scanner import ScanSpec as CellScanSpec
from storage.scanner.metrics import ScanMetrics

from .options import ScanSpec
from storage.region.region_snapshots import PinnedRegion, pin_table, shared_block_cache
from .splits import TableSplit

__all__ = ["is_remote_root", "split_batches", "split_row_count", "split_edge_key", "edge_key_known", "last_row_of",
           "key_not_of_width"]

_REMOTE_PREFIXES = ("grpc://", "grpc+tcp://", "grpc+tls://")


def is_remote_root(root: str) -> bool:
    """True when ``root`` names a region server rather than a filesystem."""
    return isinstance(root, str) and root.startswith(_REMOTE_PREFIXES)


def last_row_of(batch: pa.RecordBatch) -> bytes | None:
    """The row key of the last row of a row or cell batch."""
    if batch.num_rows == 0:
        return None
    return batch.column(0)[batch.num_rows - 1].as_py()


def _spans(split: TableSplit, resume_after: bytes | None) -> list[KeyRange]:
    spans = split.spans()
    if resume_after is not None:
        spans = intersect(spans, [(key_after(resume_after), None)])
    return spans


def _file_batches(split: TableSplit, scan: ScanSpec, spans: list[KeyRange], output: str,
                  metrics: ScanMetrics) -> Iterator[pa.RecordBatch]:
    table_fs = FileSystem(split.root).sub(table_dir(split.table))
    families = {name: FamilySettings(**opts) for name, opts in split.families.items()}
    cache = shared_block_cache() if scan.cache_blocks else None
    register_filter_specs(scan.filter_classes)
    base, _ = plan_batch_scan(scan.request(output))  # the split's own spans, not the request's
    if scan.hidden_columns and output == "rows":
        base = dataclasses.replace(base, hidden_columns=tuple(scan.hidden_columns))
    flt = base.filter
    for pin in split.regions:
        region_spans = intersect(spans, [(pin.start, pin.end)])
        if not region_spans:
            continue
        with PinnedRegion(table_fs, split.table, pin, families, cache) as region:
            metrics.regions_scanned += 1
            points = [lo for lo, hi in region_spans if hi == lo + b"\x00"]
            if flt is None and not base.raw and len(points) > 1 and len(points) == len(region_spans):
                # the pushdown's point gets (an equality or IN on the key): one multi-get
                yield from _multi_get(region.view, points, base, metrics)
                continue
            for lo, hi in region_spans:
                region_scan = dataclasses.replace(base, low=lo, high=hi)
                for batch, _ in counted_region_batches(region.view, region_scan, metrics):
                    yield batch
                if flt is not None and flt.filter_all_remaining():
                    return


def _multi_get(view: RegionView, keys: list[bytes], base: BatchScan, metrics: ScanMetrics) -> Iterator[pa.RecordBatch]:
    """The rows of ``keys`` (ascending) in a pinned region as the batch scan would
    give them: the engine's multi-get (each store file looks every key up in one
    pass over its blocks), then the found cells as one cell or row batch."""
    spec = CellScanSpec(columns=base.columns, min_timestamp=base.min_timestamp,
                        max_timestamp=base.max_timestamp, max_versions=base.max_versions)
    found = Region.rows_of(view, keys, spec)
    if not found:
        return
    cells = cells_to_batch([c for key in sorted(found) for c in found[key]])
    metrics.rows_scanned += len(found)
    metrics.cells_scanned += cells.num_rows
    if base.output == "rows":
        columns = list(base.columns) if base.columns else [name.encode() for name in view.stores]
        out = kernels.cells_to_rows(cells, columns, include_timestamp=base.include_timestamp)
    else:
        out = cells
    metrics.bytes_in_results += result_bytes(out)
    for offset in range(0, out.num_rows, base.batch_cells):
        yield out.slice(offset, base.batch_cells)


def split_row_count(
    split: TableSplit, metrics: ScanMetrics | None = None, remote_options: dict[str, Any] | None = None
) -> int | None:
    """The split's row count through :func:`storage.read.row_count.count_region_rows`
    (block indexes where they can answer; on a region server, one ``count``
    call per span, which runs the same there), or None when the split's scan
    has columns, a filter other than the row-counting one or a time range:
    then rows must be scanned.  ``remote_options`` go to ``storage.connect``
    in server mode."""
    scan = split.scan or ScanSpec()
    counting = scan.filter is None or scan.filter == ROW_COUNT_FILTER
    if scan.columns or not counting or scan.time_range is not None:
        return None
    if is_remote_root(split.root):
        import storage

        with storage.connect(split.root, **dict(remote_options or {})) as conn:
            table = conn.table(split.table)
            return sum(table.count(row_start=lo or None, row_stop=hi) for lo, hi in _spans(split, None))
    table_fs = FileSystem(split.root).sub(table_dir(split.table))
    families = {name: FamilySettings(**opts) for name, opts in split.families.items()}
    cache = shared_block_cache() if scan.cache_blocks else None
    total = 0
    spans = _spans(split, None)
    for pin in split.regions:
        region_spans = intersect(spans, [(pin.start, pin.end)])
        if not region_spans:
            continue
        with PinnedRegion(table_fs, split.table, pin, families, cache) as region:
            if metrics is not None:
                metrics.regions_scanned += 1
            total += sum(count_region_rows(region.view, lo, hi) for lo, hi in region_spans)
    return total


def key_not_of_width(root: str, table: str, width: int) -> bytes | None:
    """The first row key of the table whose length is not ``width``, or None.

    Every region is checked, not only those a key range reaches: a key range is a byte
    seek, so a key of another width may lie outside it (in a region the read never opens)
    whatever value the query asks for.  Each region answers from its files' recorded key
    lengths where they can (:func:`storage.read.row_count.first_key_not_of_length`), so a
    table whose keys fit is checked from file infos alone.  A region server root pins no
    files and is not checked (None).
    """
    if is_remote_root(root):
        return None
    table_fs = FileSystem(root).sub(table_dir(table))
    snapshot = pin_table(table_fs)
    families = {name: FamilySettings(**opts) for name, opts in snapshot.families.items()}
    for pin in snapshot.regions:
        with PinnedRegion(table_fs, table, pin, families, shared_block_cache()) as region:
            key = first_key_not_of_length(region.view, width)
        if key is not None:
            return key
    return None


def edge_key_known(split: TableSplit) -> bool:
    """True when :func:`split_edge_key` can answer for ``split`` (a filesystem root, and
    no filter but the row-counting one)."""
    scan = split.scan or ScanSpec()
    return not is_remote_root(split.root) and scan.filter in (None, ROW_COUNT_FILTER)


def split_edge_key(split: TableSplit, last: bool = False) -> bytes | None:
    """The first row key the split's scan returns (``last=True``: the last), or None
    when it returns no row.

    One row is asked of each span, from the split's low end forward (or its high end
    reversed, HBase's reversed scan), in the pinned regions in key order until one
    answers: the engine merges the memstore (the WAL records of the pin) and the store
    files and drops deleted rows, as a read does, so a deleted last row is not the
    answer.  Only for splits of a filesystem root with no filter but the row-counting
    one; None otherwise too (then rows must be read).
    """
    scan = split.scan or ScanSpec()
    if not edge_key_known(split):
        return None
    table_fs = FileSystem(split.root).sub(table_dir(split.table))
    families = {name: FamilySettings(**opts) for name, opts in split.families.items()}
    cache = shared_block_cache() if scan.cache_blocks else None
    base, _ = plan_batch_scan(dataclasses.replace(scan, filter=None).request("rows"))
    base = dataclasses.replace(base, reverse=last, limit=1, filter=None)
    spans = _spans(split, None)
    pins = list(split.regions)
    for pin in reversed(pins) if last else pins:
        region_spans = intersect(spans, [(pin.start, pin.end)])
        if not region_spans:
            continue
        with PinnedRegion(table_fs, split.table, pin, families, cache) as region:
            for lo, hi in reversed(region_spans) if last else region_spans:
                one = dataclasses.replace(base, low=lo, high=hi)
                for batch in scan_region_batches(region.view, one):
                    if batch.num_rows:
                        return batch.column(0)[0].as_py()
    return None


def _remote_batches(split: TableSplit, scan: ScanSpec, spans: list[KeyRange], output: str,
                    metrics: ScanMetrics, options: dict) -> Iterator[pa.RecordBatch]:
    import storage

    conn = storage.connect(split.root, **options)
    try:
        table = conn.table(split.table)
        for span in spans:
            batches = table.run_scan(scan.request(output, span), metrics)
            try:
                yield from batches
            finally:
                batches.close()
    finally:
        conn.close()


def _keys_only(split: TableSplit, spans, resume_after, metrics, remote_options) -> Iterator[pa.RecordBatch]:
    """Row batches of the key alone.

    Without a filter: the first cell of each row, value dropped, as cells (no
    pivot to rows).  A filter may need every cell of a row, so then the rows
    are scanned whole and only their keys kept.
    """
    scan = split.scan
    if scan.filter:
        plain = dataclasses.replace(split, scan=dataclasses.replace(scan, keys_only=False))
        for rows in split_batches(plain, "rows", resume_after, metrics, remote_options):
            yield pa.RecordBatch.from_arrays([rows.column(0)], names=["key"])
        return
    one_cell = dataclasses.replace(scan, keys_only=False, filter="FirstKeyOnlyFilter () AND KeyOnlyFilter ()")
    for cells in split_batches(dataclasses.replace(split, scan=one_cell), "cells", resume_after, metrics, remote_options):
        yield pa.RecordBatch.from_arrays([cells.column(0)], names=["key"])


def split_batches(
    split: TableSplit,
    output: str = "rows",
    resume_after: bytes | None = None,
    metrics: ScanMetrics | None = None,
    remote_options: dict[str, Any] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield the split's rows (``output="rows"``) or cells (``"cells"``) as Arrow batches.

    Batches hold whole rows.  ``remote_options`` go to ``storage.connect``
    in server mode (e.g. ``token``).
    """
    scan = split.scan or ScanSpec()
    metrics = metrics if metrics is not None else ScanMetrics()
    spans = _spans(split, resume_after)
    if not spans:
        return
    if scan.keys_only and output == "rows":
        yield from _keys_only(split, spans, resume_after, metrics, remote_options)
        return
    if is_remote_root(split.root):
        # the client times its own calls into the metrics
        yield from _remote_batches(split, scan, spans, output, metrics, dict(remote_options or {}))
        return
    started = time.perf_counter()
    try:
        yield from _file_batches(split, scan, spans, output, metrics)
    finally:
        metrics.time_ms += (time.perf_counter() - started) * 1000
