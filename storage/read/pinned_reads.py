"""Reads of a pinned table snapshot: what a split's reader asks of the engine.

A split carries the regions it reads pinned at planning time
(:class:`~storage.region.region_snapshots.RegionPin`) and the table's families;
its reader hands them here with a :class:`~storage.read.scan_request.ScanRequest`
and the key spans to read.  Each function plans the request once and runs the
region runner (:mod:`storage.read.region_runner`) over the pinned regions, so a
split reads as a table scan does: the same spans, limit, metrics and multi-get.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa

from ..keys import KeyRange
from ..region.region_snapshots import RegionPin, pin_table, shared_block_cache
from ..scanner.metrics import ScanMetrics
from ..schema import FamilySettings
from ..storefile import BlockCache
from ..vfs.fs import FileSystem
from .region_runner import count_regions, pinned_reads, run_regions
from .row_count import first_key_not_of_length
from .scan_request import ScanRequest, plan_batch_scan

__all__ = ["pinned_batches", "pinned_row_count", "pinned_edge_key", "key_not_of_width"]


def _settings(families: Mapping[str, object]) -> dict[str, FamilySettings]:
    """Family settings from a split's families (settings, or their option dicts)."""
    return {name: opts if isinstance(opts, FamilySettings) else FamilySettings(**opts)
            for name, opts in families.items()}


def _cache(cache_blocks: bool) -> BlockCache | None:
    """The process's block cache when the read keeps blocks (HBase's cacheBlocks)."""
    return shared_block_cache() if cache_blocks else None


def pinned_batches(table_fs: FileSystem, table: str, pins: Sequence[RegionPin], families: Mapping[str, object],
                   request: ScanRequest, spans: Sequence[KeyRange], metrics: ScanMetrics | None = None, *,
                   cache_blocks: bool = False, hidden_columns: Sequence[bytes] = ()) -> Iterator[pa.RecordBatch]:
    """The batches of ``request`` over ``spans`` of the pinned regions ``pins`` of
    table ``table`` (``table_fs``: its directory), in key order.

    ``spans`` replace the request's own row bounds (the caller cut them from the
    request, its key ranges and its filter).  ``cache_blocks`` keeps the blocks read
    in the process's block cache; ``hidden_columns`` (of a rows request's
    ``columns``) make rows exist without coming out in the batches
    (:mod:`storage.read.hidden_columns`)."""
    scan, _ = plan_batch_scan(request, hidden_columns=hidden_columns if request.output == "rows" else ())
    reads = pinned_reads(table_fs, table, pins, _settings(families), spans, _cache(cache_blocks),
                         cache_results=request.cache_results)
    return run_regions(scan, reads, metrics)


def pinned_row_count(table_fs: FileSystem, table: str, pins: Sequence[RegionPin], families: Mapping[str, object],
                     spans: Sequence[KeyRange], metrics: ScanMetrics | None = None, *,
                     cache_blocks: bool = False) -> int:
    """The rows of ``spans`` in the pinned regions, as a full scan would see them:
    from the block indexes where they can answer, else by the row-counting scan
    (:func:`storage.read.row_count.count_region_rows`), region by region."""
    return count_regions(pinned_reads(table_fs, table, pins, _settings(families), spans, _cache(cache_blocks)),
                         metrics)


def pinned_edge_key(table_fs: FileSystem, table: str, pins: Sequence[RegionPin], families: Mapping[str, object],
                    request: ScanRequest, spans: Sequence[KeyRange], last: bool = False, *,
                    cache_blocks: bool = False) -> bytes | None:
    """The first row key ``request`` (its filter left out) returns over ``spans`` of
    the pinned regions (``last=True``: the last), or None when it returns no row.

    One row is asked of the regions from the low end forward (or the high end
    reversed, HBase's reversed scan) until one answers: the engine merges the pinned
    WAL records and the store files and drops deleted rows, as a read does, so a
    deleted last row is not the answer."""
    scan, _ = plan_batch_scan(request.replace(filter=None, output="cells" if request.raw else "rows", limit=1))
    scan = dataclasses.replace(scan, reverse=last)  # the spans give the bounds, in reading order
    reads = pinned_reads(table_fs, table, pins, _settings(families), spans, _cache(cache_blocks), reverse=last)
    with contextlib.closing(run_regions(scan, reads)) as batches:
        for batch in batches:
            if batch.num_rows:
                return batch.column(0)[0].as_py()
    return None


def key_not_of_width(table_fs: FileSystem, table: str, width: int, snapshot: Any = None) -> bytes | None:
    """The first row key of the table whose length is not ``width``, or None.

    Every region is checked, pinned now (or in ``snapshot``: the whole table as the caller
    just pinned it, :func:`pin_table`), not only those a key range reaches: a key
    range is a byte seek, so a key of another width may lie outside it whatever value
    a query asks for.  Each pinned region answers from its files' recorded key
    lengths where they can (:func:`~storage.read.row_count.first_key_not_of_length`),
    so a table whose keys fit is checked from file infos alone.
    """
    snapshot = pin_table(table_fs) if snapshot is None else snapshot
    for read in pinned_reads(table_fs, table, snapshot.regions, snapshot.family_settings(), [(b"", None)],
                             shared_block_cache()):
        with read.opened() as view:
            key = first_key_not_of_length(view, width)
        if key is not None:
            return key
    return None
