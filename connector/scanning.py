"""The scan behind a record reader: a split's rows as Arrow batches, resumable after a row.

Files mode (a path or pyarrow URI root): the split's scan request and spans
(row ranges) go to the engine's pinned reads (:func:`storage.engine.pinned_batches`),
which run the region runner over the split's pinned regions, each opened
read-only from exactly its pinned files and WAL records.  Server mode (``grpc://``
root): the same spans go to the region server's streaming scan through
``storage.connect(root)``.

``resume_after`` restarts the scan just after a row that was already
handed out, which is how readers recover from a read error.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import pyarrow as pa

from storage import ScanMetrics
from storage.engine import (
    ROW_COUNT_FILTER,
    FileSystem,
    pinned_batches,
    pinned_edge_key,
    pinned_row_count,
    table_dir,
)
from storage.filters import register_filter_specs
from storage.keys import KeyRange, intersect, key_after

from .options import ScanSpec
from .splits import TableSplit

__all__ = ["is_remote_root", "split_batches", "split_row_count", "split_edge_key", "edge_key_known", "last_row_of"]

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


def _table_fs(split: TableSplit) -> FileSystem:
    return FileSystem(split.root).sub(table_dir(split.table))


def _file_batches(split: TableSplit, scan: ScanSpec, spans: list[KeyRange], output: str,
                  metrics: ScanMetrics) -> Iterator[pa.RecordBatch]:
    """The split's pinned regions read by the engine's region runner over ``spans``."""
    register_filter_specs(scan.filter_classes)
    return pinned_batches(_table_fs(split), split.table, split.regions, split.families, scan.read_request(output),
                          spans, metrics, cache_blocks=scan.cache_blocks, hidden_columns=scan.hidden_columns)


def split_row_count(
    split: TableSplit, metrics: ScanMetrics | None = None, remote_options: dict[str, Any] | None = None
) -> int | None:
    """The split's row count through the engine's row counts (block indexes
    where they can answer; on a region server, one ``count`` call per span,
    which runs the same there), or None when the split's scan has columns, a
    filter other than the row-counting one or a time range: then rows must be
    scanned.  ``remote_options`` go to ``storage.connect`` in server mode."""
    request = (split.scan or ScanSpec()).request
    counting = request.filter is None or request.filter == ROW_COUNT_FILTER
    if request.columns or not counting or request.time_range is not None:
        return None
    if is_remote_root(split.root):
        import storage

        with storage.connect(split.root, **dict(remote_options or {})) as conn:
            table = conn.table(split.table)
            return sum(table.count(row_start=lo or None, row_stop=hi) for lo, hi in _spans(split, None))
    return pinned_row_count(_table_fs(split), split.table, split.regions, split.families, _spans(split, None),
                            metrics, cache_blocks=(split.scan or ScanSpec()).cache_blocks)


def edge_key_known(split: TableSplit) -> bool:
    """True when :func:`split_edge_key` can answer for ``split`` (a filesystem root, and
    no filter but the row-counting one)."""
    request = (split.scan or ScanSpec()).request
    return not is_remote_root(split.root) and request.filter in (None, ROW_COUNT_FILTER)


def split_edge_key(split: TableSplit, last: bool = False) -> bytes | None:
    """The first row key the split's scan returns (``last=True``: the last), or None
    when it returns no row (:func:`storage.engine.pinned_edge_key`: one row asked of
    the pinned regions from the split's low end forward, or its high end reversed,
    merged and resolved as a read is, so a deleted last row is not the answer).
    Only for splits of a filesystem root with no filter but the row-counting one;
    None otherwise too (then rows must be read).
    """
    if not edge_key_known(split):
        return None
    scan = split.scan or ScanSpec()
    return pinned_edge_key(_table_fs(split), split.table, split.regions, split.families, scan.read_request("rows"),
                           _spans(split, None), last, cache_blocks=scan.cache_blocks)


def _remote_batches(split: TableSplit, scan: ScanSpec, spans: list[KeyRange], output: str,
                    metrics: ScanMetrics, options: dict) -> Iterator[pa.RecordBatch]:
    import storage

    conn = storage.connect(split.root, **options)
    try:
        table = conn.table(split.table)
        for span in spans:
            batches = table.run_scan(scan.read_request(output, span), metrics)
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
    if scan.request.filter:
        plain = dataclasses.replace(split, scan=dataclasses.replace(scan, keys_only=False))
        for rows in split_batches(plain, "rows", resume_after, metrics, remote_options):
            yield pa.RecordBatch.from_arrays([rows.column(0)], names=["key"])
        return
    one_cell = dataclasses.replace(scan.with_request(filter="FirstKeyOnlyFilter () AND KeyOnlyFilter ()"),
                                   keys_only=False)
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
    batches = _file_batches(split, scan, spans, output, metrics)  # the runner times the read
    try:
        yield from batches
    finally:
        batches.close()
