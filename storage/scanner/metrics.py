"""Scan metrics, named after HBase's ``ScanMetrics`` / ``ServerSideScanMetrics``.

Counters are plain integers bumped once per row, block, window or call,
never once per cell (a per-cell counter is the kind of overhead the scan
path must not pay).  One :class:`ScanMetrics` belongs to one scan; it is not
locked, so a scan shared by threads must hand it from thread to thread (as
sequential ``next`` calls do) rather than update it concurrently.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["ScanMetrics", "HBASE_NAMES"]

HBASE_NAMES: dict[str, str] = {
    "rows_scanned": "ROWS_SCANNED",
    "rows_filtered": "ROWS_FILTERED",
    "cells_scanned": "CELLS_SCANNED",
    "bytes_in_results": "BYTES_IN_RESULTS",
    "blocks_read_from_disk": "BLOCK_READ_OPS_COUNT",
    "bytes_read_from_disk": "BYTES_READ_FROM_FS",
    "read_requests": "READ_REQUESTS_TO_FS",
    "blocks_read_from_cache": "BLOCKS_READ_FROM_BLOCK_CACHE",
    "bytes_read_from_cache": "BYTES_READ_FROM_BLOCK_CACHE",
    "bytes_read_from_memstore": "BYTES_READ_FROM_MEMSTORE",
    "seeks": "SEEKS",
    "files_unmerged": "STORE_FILES_UNMERGED",
    "files_merged": "STORE_FILES_MERGED",
    "row_groups_pruned": "ROW_GROUPS_PRUNED",
    "regions_scanned": "REGIONS_SCANNED",
    "rpc_calls": "RPC_CALLS",
    "time_ms": "SCAN_TIME_MS",
}
"""Attribute name -> the name :meth:`ScanMetrics.to_dict` reports.  HBase's
own key where HBase has one (``ROWS_SCANNED``, ``BYTES_IN_RESULTS``,
``REGIONS_SCANNED``, ``RPC_CALLS``, ``BYTES_READ_FROM_FS``,
``BYTES_READ_FROM_BLOCK_CACHE``, ``BYTES_READ_FROM_MEMSTORE``,
``BLOCK_READ_OPS_COUNT``), a name in the same style otherwise."""


@dataclass
class ScanMetrics:
    """Counters of one scan.

    ``rows_scanned`` counts every row the region scanner stepped onto
    (including rows a filter dropped or whose cells were all deleted),
    ``rows_filtered`` the rows a filter dropped, ``cells_scanned`` the
    visible cells of scanned rows before filtering, ``bytes_in_results`` the
    approximate size of the cells returned.  Block and byte counters are
    filled by the store file and memstore scanners (``read_requests`` counts
    read calls on store files: one ranged GET each on an object store); ``seeks`` counts the
    seek calls the merging heaps issue to their sources; ``rpc_calls`` is
    filled by the region server; ``time_ms`` is wall time spent inside
    ``next_rows``.  ``files_unmerged`` counts the store files a batch scan's span read
    one after another in key order, as one sorted run with no merge (files whose row
    ranges do not overlap), ``files_merged`` those a span merged; one file alone is in
    neither.  ``row_groups_pruned`` counts the blocks (row groups) of such a sorted run left
    unread because their value bounds show that no row of them passes the filter
    (:mod:`storage.read.block_pruning`).
    """

    rows_scanned: int = 0
    rows_filtered: int = 0
    cells_scanned: int = 0
    bytes_in_results: int = 0
    blocks_read_from_disk: int = 0
    bytes_read_from_disk: int = 0
    read_requests: int = 0
    blocks_read_from_cache: int = 0
    bytes_read_from_cache: int = 0
    bytes_read_from_memstore: int = 0
    seeks: int = 0
    files_unmerged: int = 0
    files_merged: int = 0
    row_groups_pruned: int = 0
    regions_scanned: int = 0
    rpc_calls: int = 0
    time_ms: float = 0.0

    def to_dict(self, hbase_names: bool = True) -> dict[str, int | float]:
        """The counters by HBase-style name (``"ROWS_SCANNED"``...), or by
        attribute name when ``hbase_names`` is false."""
        if hbase_names:
            return {HBASE_NAMES[f.name]: getattr(self, f.name) for f in fields(self)}
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def add_cells(self, cells) -> None:
        """Count a batch of cells as scanned (an Arrow table or batch, or a
        list of cells); one call per batch, never per cell."""
        count = getattr(cells, "num_rows", None)
        self.cells_scanned += len(cells) if count is None else count

    def merge(self, other: "ScanMetrics") -> None:
        """Add every counter of ``other`` into this one."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def reset(self) -> None:
        """Set every counter back to zero."""
        for f in fields(self):
            setattr(self, f.name, type(getattr(self, f.name))(0))
