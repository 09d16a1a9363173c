"""A clean store file's (or sorted run's) streamed batches kept between scans.

The streaming path (:mod:`storage.read.batch_stream`) turns one clean file's
(or a sorted run of files') dense blocks into row batches: column slices of
each block, joined into groups.  A table scanned again and again while it does not change (a
compacted table under a Spark job's queries, the engine worker of the JVM
source serving one query after another) builds the same batches every time.
They depend only on the file and on what the scan asks for, so a scan that
asks for it (``cache_results``, else the block cache's default:
:meth:`~storage.storefile.cache.BlockCache.keeps_results`) keeps them in the
block cache that holds the file's blocks, in its one budget
(:class:`storage.storefile.cache_memo.CacheMemo`), and is served them by the
next such scan of the same key range:

* the files are named by their block-cache identities (path, size, trailer, the
  file's stat and a checksum of its index and info), so a rewritten file
  never matches; the memstore must hold nothing
  in the range (the stream path's own condition);
* what the scan asks for is the key: range, columns, hidden columns, shape,
  time range, versions and batch size; scans with a filter or a row limit,
  or of a family with a TTL (the answer depends on the clock), keep
  nothing, and neither do scans without a block cache;
* a result is kept on its second build only (:class:`CacheMemo`), and only
  when the scan ran to its end (a consumer that stopped early leaves no
  partial answer);
* the scan metrics a build counted (cells and rows scanned, rows filtered)
  are counted again on a hit; the block counters are not, as no block is read
  (the cache counts the hit in ``result_hits``);
* a scan with ``cache_results`` false neither keeps nor is served anything
  (what benchmarks time as a first read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pyarrow as pa

from ..storefile.cache_memo import CacheMemo

if TYPE_CHECKING:
    from .batch_resolve import BatchProcessor
    from .batch_stream import SortedRun

__all__ = ["stream_memo", "memoized"]

# the counters the processor adds to while it builds batches; replayed on a hit
_REPLAYED = ("rows_scanned", "rows_filtered", "cells_scanned", "bytes_in_results", "row_groups_pruned")


def stream_memo(run: SortedRun, low: bytes, high: bytes | None, proc: BatchProcessor) -> CacheMemo | None:
    """The memo of streaming ``run``'s files over ``[low, high)`` for
    ``proc``'s scan, or None when that result cannot be kept."""
    view = run.view
    scan = proc.scan
    if scan.cache_results is False or scan.filter is not None or proc.rows_left is not None or scan.raw:
        return None
    if proc.ttl_cutoff[view.family] is not None:
        return None
    if not run.files:
        return None
    cache = run.files[0].reader.block_cache
    if cache is None or not cache.keeps_results(scan.cache_results):
        return None
    stamps = None if scan.timestamps is None else tuple(scan.timestamps)
    what = (
        low, high, tuple(proc.output_columns), tuple(scan.hidden_columns), scan.output, scan.row_dicts,
        scan.include_timestamp, scan.min_timestamp, scan.max_timestamp, stamps, scan.max_versions,
        scan.batch_size, view.settings,
        # a build without metrics counts nothing, so its result could not replay a
        # build's figures to a scan that has metrics: the two keep their own entries
        proc.metrics is not None,
        # a prune filter leaves out the rows of the blocks it skips (storage/read/block_pruning.py)
        None if scan.prune is None else repr(scan.prune),
        # batches of dictionary codes serve only a scan that takes them
        scan.dictionary_values,
    )
    ids = tuple(f.reader.file_id for f in run.files)
    return CacheMemo(cache, ("stream", ids[0] if len(ids) == 1 else ids, what))


def memoized(memo: CacheMemo | None, build: Iterator[pa.RecordBatch], metrics) -> Iterator[pa.RecordBatch]:
    """``build``'s batches, or what an earlier scan kept in ``memo``; a build
    that runs to its end is offered to ``memo``."""
    if memo is None:
        yield from build
        return
    kept = memo.get()
    if kept is not None:
        batches, counted = kept
        if metrics is not None:
            for name, value in zip(_REPLAYED, counted):
                setattr(metrics, name, getattr(metrics, name) + value)
        yield from batches
        return
    # Only what the build itself counts is replayed, so the counters are read around
    # each step of the build and not across the yields: while this generator waits at
    # its yield the consumer counts its own figures into the same metrics
    # (storage/read/scan_counting.py adds rows_scanned and bytes_in_results per batch), and it
    # counts them again for the batches of a hit (replaying them doubled both).
    counted = [0] * len(_REPLAYED)
    out: list[pa.RecordBatch] = []
    mark = _counters(metrics)
    for batch in build:
        counted = [c + a - b for c, a, b in zip(counted, _counters(metrics), mark)]
        out.append(batch)
        yield batch
        mark = _counters(metrics)
    counted = [c + a - b for c, a, b in zip(counted, _counters(metrics), mark)]
    memo.put((out, tuple(counted)), sum(b.nbytes for b in out) + 64 * len(out))


def _counters(metrics) -> tuple[int, ...]:
    if metrics is None:
        return (0,) * len(_REPLAYED)
    return tuple(getattr(metrics, name) for name in _REPLAYED)
