"""Rows of a chunk kept between scans while its sources stay the same.

A scan of a table whose cached blocks hold its rows as written (a compacted
table) slices them and reuses their row batches
(:func:`storage.storefile.dense_rows.dense_rows`).  A live table's chunk is
built each scan instead: the memstore's rows merged into the files' rows, or
resolved against them (a re-put row, a delete marker).  The result depends
only on the chunk's sources and the scan's columns and time range, so a scan
that asks for it (``cache_results``, else the block cache's default:
:meth:`~storage.storefile.cache.BlockCache.keeps_results`) keeps it in the same
block cache, in its one budget (:class:`storage.storefile.cache_memo.CacheMemo`),
and is served it by the next such scan of the same chunk:

* the sources are named by the store files' block-cache identities and by
  the memstore's anchors (:meth:`storage.memstore.runs.MemStoreView.anchors`):
  a write to the memstore makes new anchors, a flush or a compaction a new
  file set, so a changed source never matches an entry;
* only scans that cache blocks keep chunks (a reader without a cache, as a
  connector read with ``cacheblocks`` false, keeps nothing; a pinned region's
  decoded WAL is an anchor once it is kept for every read of its pin,
  :mod:`storage.region.replay_memo`, and has none before), and nothing that
  depends on the clock (a TTL) is kept;
* a scan with ``cache_results`` false neither keeps nor is served anything
  (the live-table benchmark times what a scan after a write pays with it).
"""

from __future__ import annotations

from ..storefile.cache_memo import CacheMemo

__all__ = ["chunk_memo"]


def chunk_memo(view, lo: bytes, hi: bytes | None, what: tuple, cache_results: bool | None) -> CacheMemo | None:
    """The memo of chunk ``[lo, hi)`` of store ``view`` for a result described
    by ``what`` (hashable: the columns, the time range, the shape asked for);
    None when it is not to be kept (``cache_results``: the scan's option, None
    for the cache's default) or cannot be (no cache, a memstore without anchors)."""
    if cache_results is False or not view.files:
        return None
    cache = view.files[0].reader.block_cache
    if cache is None or not cache.keeps_results(cache_results):
        return None
    memstore = view.memstore
    if memstore.is_empty():
        anchors: tuple | None = ()
    else:
        anchors_of = getattr(memstore, "anchors", None)
        anchors = anchors_of() if anchors_of is not None else None
        if anchors is None:
            return None
    files = tuple(f.reader.file_id for f in view.files)
    return CacheMemo(cache, ("chunk", view.family, files, lo, hi, what), anchors)
