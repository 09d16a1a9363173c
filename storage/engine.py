"""The engine's API for the connector and the jobs: what they need of a table besides the embedded API.

``connector/`` and ``jobs/`` import the engine through four public modules
and nothing deeper (``tests/test_floor_plan.py`` holds them to it):

* ``storage`` -- the embedded, happybase-shaped API (``connect``, ``Connection``,
  ``Table``, ``ScanRequest``, ``KeyRange``, ``ScanMetrics``, cells, the errors);
* ``storage.keys`` -- row keys and key ranges (``key_after``, ``intersect`` ...);
* ``storage.filters`` -- the filter language (HBase's filter classes, the
  filter-string parser, the registry of user filters);
* ``storage.engine`` -- this module: what a reader or writer outside the engine
  needs of a table's files.

What this module offers, by need:

* filesystem layer: :class:`FileSystem` over ``pyarrow.fs`` (local, object
  store, HDFS by URI), :func:`redact_uri` for messages, :data:`MMAP_ENV`;
* table-name rules and table files: :func:`validate_table_name`,
  :func:`validate_family_name`, :func:`canonical_table_name`,
  :func:`table_dir`, :func:`table_files`, :func:`missing_table` (the one-line error for an absent
  table), :func:`no_such_family`, :func:`table_exists`, :func:`table_values`,
  :func:`set_table_values`, :func:`table_families`,
  :func:`parse_column`, :func:`nearest_name` / :func:`check_known_names`;
* pinned table snapshots: :func:`pin_table` (a table's regions as
  :class:`RegionPin`\\ s), :func:`write_pin_file` / :func:`release_pin_file` so
  compaction keeps the pinned files, :func:`shared_block_cache`, :func:`scan_keeps_blocks`
  (whether a scan of so many bytes should cache its blocks), :class:`SnapshotLost`;
* reads of pinned regions, run by the engine's region runner: :func:`pinned_batches`
  (a split's batches of a :class:`~storage.ScanRequest` over its spans),
  :func:`pinned_row_count`, :func:`pinned_edge_key` (a split's first or last row key);
* split planning by region and block index: :func:`block_cut_keys`;
* row counts and key checks: :data:`ROW_COUNT_FILTER` (HBase RowCounter's filter: a
  scan with no other filter may be counted by :func:`pinned_row_count` instead),
  :func:`key_not_of_width`;
* raw reads and cell batches: :data:`CELL_TYPE_NAMES`, :func:`raw_dicts`,
  :func:`row_boundaries` (where each row starts in a batch of cells),
  :func:`cells_to_dicts` (a cell batch as happybase's ``(row, {column: value})`` pairs);
* bulk load: :class:`BulkLoadTask` stages store files cut at region
  boundaries, :func:`commit_load` / :func:`abort_load` / :func:`recover` and
  the staging lock (:func:`hold_staging`, :func:`release_staging`,
  :func:`drop_free_staging_lock`);
* write-ahead logs of a closed table: :func:`check_table_wals`,
  :func:`repair_table_wals`;
* the compiled kernels: :func:`native_status` (``on`` or why they are off, see docs/native.md).
"""

from __future__ import annotations

from .columns import parse_column
from .kernels import row_boundaries
from .names import check_known_names, nearest_name
from .native import status as native_status
from .namespaces import canonical_table_name, table_dir
from .read.raw import TYPE_NAMES as CELL_TYPE_NAMES
from .read.python_rows import cells_to_dicts
from .read.raw import raw_dicts
from .read.row_count import ROW_COUNT_FILTER
from .read.pinned_reads import key_not_of_width, pinned_batches, pinned_edge_key, pinned_row_count
from .region.load_commit import (
    LoadReport,
    RegionBounds,
    StagedFile,
    abort_load,
    commit_load,
    load_committed,
    lock_table,
    prepare_commit,
    table_regions,
)
from .region.load_journal import (STAGING_DIR, drop_free_staging_lock, hold_staging, recover, release_staging,
                                  staging_lock_path)
from .region.load_stage import BulkLoadTask, row_batch_to_cells
from .region.manifest import TABLE_LOCK, TABLE_MANIFEST
from .region.block_cuts import block_cut_keys
from .region.region_snapshots import (
    BLOCK_CACHE_SIZE_ENV,
    CACHE_RESULTS_ENV,
    RegionPin,
    SnapshotLost,
    pin_table,
    release_pin_file,
    scan_keeps_blocks,
    shared_block_cache,
    write_pin_file,
)
from .region.wal_repair import check_table_wals, repair_table_wals
from .schema import no_such_family, validate_family_name, validate_table_name
from .table.descriptor import set_table_values, table_families, table_values
from .table.missing import missing_table
from .vfs.fs import MMAP_ENV, FileSystem, Lock
from .vfs.objstore import redact_uri

__all__ = [
    # filesystem layer
    "FileSystem",
    "MMAP_ENV",
    "redact_uri",
    # table names and table files
    "validate_table_name",
    "validate_family_name",
    "canonical_table_name",
    "table_dir",
    "table_files",
    "table_exists",
    "missing_table",
    "no_such_family",
    "table_values",
    "set_table_values",
    "table_families",
    "parse_column",
    "nearest_name",
    "check_known_names",
    "table_writer_lock",
    # pinned reads of a table snapshot
    "pin_table",
    "RegionPin",
    "write_pin_file",
    "release_pin_file",
    "shared_block_cache",
    "scan_keeps_blocks",
    "BLOCK_CACHE_SIZE_ENV",
    "CACHE_RESULTS_ENV",
    "SnapshotLost",
    "pinned_batches",
    "pinned_row_count",
    "pinned_edge_key",
    # split planning, row counts, key checks
    "block_cut_keys",
    "ROW_COUNT_FILTER",
    "key_not_of_width",
    # the compiled kernels in use (regionscan --version)
    "native_status",
    # raw reads and cell batches
    "row_boundaries",
    "cells_to_dicts",
    "CELL_TYPE_NAMES",
    "raw_dicts",
    # bulk load
    "BulkLoadTask",
    "row_batch_to_cells",
    "RegionBounds",
    "StagedFile",
    "LoadReport",
    "STAGING_DIR",
    "table_regions",
    "prepare_commit",
    "commit_load",
    "abort_load",
    "load_committed",
    "lock_table",
    "recover",
    "hold_staging",
    "release_staging",
    "staging_lock_path",
    "drop_free_staging_lock",
    # write-ahead logs
    "check_table_wals",
    "repair_table_wals",
]


def table_files(root: str | FileSystem, name: str | bytes) -> FileSystem:
    """The filesystem of table ``name``'s directory under ``root`` (a path, a URI or a
    :class:`FileSystem`): what the functions here that take ``table_fs`` want."""
    fs = root if isinstance(root, FileSystem) else FileSystem(root)
    return fs.sub(table_dir(name))


def table_exists(table_fs: FileSystem) -> bool:
    """True when ``table_fs`` (a table's directory: :func:`table_files`) holds a table."""
    return table_fs.exists(TABLE_MANIFEST)


def table_writer_lock(table_fs: FileSystem) -> Lock:
    """The table's writer lock (``with table_writer_lock(tfs):``): held by the one process that
    writes the table, so nothing appends to its logs or changes its regions meanwhile."""
    return table_fs.lock(TABLE_LOCK)
