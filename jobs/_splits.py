"""A table's splits for a job, and the scan of one split inside a Spark task.

The driver asks :class:`connector.input_format.TableInputFormat` for one
split per region (pinned, so the job reads one consistent snapshot even if
the table is flushed or compacted meanwhile); each Spark task scans its
split with the engine's batch path (:func:`connector.scanning.split_batches`)
and never sees another region.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import pyarrow as pa

from connector.input_format import TableInputFormat
from connector.options import ScanSpec as ConnectorScanSpec
from connector.options import (
    INPUT_TABLE,
    ROOT,
    SCAN_COLUMNS,
    SCAN_FILTER,
    SCAN_INCLUDE_TIMESTAMP,
    SCAN_MAXVERSIONS,
    SCAN_ROW_START,
    SCAN_ROW_STOP,
    SCAN_TIMERANGE_END,
    SCAN_TIMERANGE_START,
)
from connector.scanning import is_remote_root, split_batches
from connector.splits import TableSplit
from storage import ScanMetrics, ScanRequest
from storage.keys import KeyRange

__all__ = ["SplitRequest", "require_table", "table_splits", "scan_split", "scan_split_raw", "scanned_bytes",
           "column_list"]


@dataclass(frozen=True)
class SplitRequest:
    """What a job reads: a table (``root``, ``table``), the engine's
    :class:`~storage.ScanRequest` of it (row bounds, columns, filter, time range,
    versions, ``include_timestamp``) and ``key_ranges`` that further restrict the
    rows (sorted ``[start, stop)`` ranges; None: no restriction).  Its splits are
    what :func:`table_splits` plans, one per region."""

    root: str
    table: str
    scan: ScanRequest = ScanRequest()
    key_ranges: tuple[KeyRange, ...] | None = None

    def conf(self) -> dict[str, Any]:
        """The input format's configuration (HBase key names)."""
        scan = self.scan
        conf: dict[str, Any] = {ROOT: self.root, INPUT_TABLE: self.table}
        if scan.max_versions is not None:
            conf[SCAN_MAXVERSIONS] = scan.max_versions
        if scan.columns:
            conf[SCAN_COLUMNS] = list(scan.columns)
        if scan.filter:
            conf[SCAN_FILTER] = scan.filter
        min_ts, max_ts = scan.time_bounds()
        if scan.time_range is not None or scan.timestamp is not None:
            conf[SCAN_TIMERANGE_START] = min_ts
            conf[SCAN_TIMERANGE_END] = max_ts
        low, high = scan.bounds()
        if low:
            conf[SCAN_ROW_START] = low
        if high:
            conf[SCAN_ROW_STOP] = high
        if scan.include_timestamp:
            conf[SCAN_INCLUDE_TIMESTAMP] = True
        return conf


def require_table(root: str, table: str) -> None:
    """Fail now, before Spark starts, when the root or the table does not exist.

    (A region server root is asked when the splits are planned.)
    """
    if is_remote_root(root):
        return
    import storage
    from storage import TableNotFound

    conn = storage.connect(root, read_only=True)
    try:
        if not conn.is_table_available(table):
            raise TableNotFound(conn.missing_table(table))
    finally:
        conn.close()


def column_list(columns: Sequence[str] | None) -> tuple[str, ...] | None:
    """Columns as given on a command line (``cf:q`` or ``cf``, also comma-separated) -> tuple."""
    out: list[str] = []
    for item in columns or ():
        out.extend(part for part in str(item).split(",") if part)
    return tuple(out) or None


@contextlib.contextmanager
def table_splits(request: SplitRequest) -> Iterator[list[TableSplit]]:
    """The splits of a scan (one per region); their pins are released when the block ends."""
    fmt = TableInputFormat(request.conf(), key_ranges=request.key_ranges)
    splits = fmt.get_splits()
    try:
        yield splits
    finally:
        fmt.release()


def scanned_bytes(metrics: ScanMetrics, split: TableSplit | None = None) -> int:
    """Bytes the scan read: store-file blocks (disk or cache) and memstore cells.

    Where the scan path kept no byte counters, the split's size estimate
    (its store-file bytes) stands in.
    """
    read = metrics.bytes_read_from_disk + metrics.bytes_read_from_cache + metrics.bytes_read_from_memstore
    if not read and split is not None:
        return int(split.size or 0)
    return read


def scan_split(split: TableSplit, output: str = "cells",
               metrics: ScanMetrics | None = None) -> Iterator[pa.RecordBatch]:
    """The split's cells (``output="cells"``) or rows (``"rows"``) as Arrow batches of whole rows."""
    return split_batches(split, output, metrics=metrics)


def scan_split_raw(split: TableSplit, metrics: ScanMetrics | None = None,
                   max_versions: int | None = None) -> Iterator[pa.RecordBatch]:
    """The split's cells as a raw scan sees them (HBase's ``Scan.setRaw(true)``:
    delete markers and deleted cells, every version unless ``max_versions``
    puts per column are asked for; see :mod:`storage.read.raw`), in batches of
    whole rows.  The split's time range, columns (qualifiers too) and filter
    apply.  It is the split's scan made raw (:func:`connector.scanning.split_batches`):
    a directory root is read from the split's pinned regions, a region server
    root (``grpc://``) through the server's raw scan."""
    spec = split.scan or ConnectorScanSpec()
    scan = dataclasses.replace(spec.with_request(raw=True, max_versions=max_versions, output="cells"), keys_only=False)
    return split_batches(dataclasses.replace(split, scan=scan), "cells", metrics=metrics)
