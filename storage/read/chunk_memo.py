"""Rows of a chunk kept between scans while its sources stay the same.

A scan of a table whose cached blocks hold its rows as written (a compacted
table) slices them and reuses their row batches
(:func:`storage.storefile.dense_rows.dense_rows`).  A live table's chunk is
built each scan instead: the memstore's rows merged into the files' rows, or
resolved against them (a re-put row, a delete marker).  The result depends
only on the chunk's sources and the scan's columns and time range, so it is
kept in the same block cache (:class:`storage.storefile.cache_memo.CacheMemo`)
and served to the next scan of the same chunk:

* the sources are named by the store files' block-cache identities and by
  the memstore's anchors (:meth:`storage.memstore.runs.MemStoreView.anchors`):
  a write to the memstore makes new anchors, a flush or a compaction a new
  file set, so a changed source never matches an entry;
* only scans that cache blocks keep chunks (a reader without a cache, as a
  connector read with ``cacheblocks`` false, keeps nothing; a pinned region's
  decoded WAL is an anchor once it is kept for every read of its pin,
  :mod:`storage.region.replay_memo`, and has none before), and nothing that
  depends on the clock (a TTL) is kept;
* :data:`enabled` false keeps nothing (the live-table benchmark measures what
  a scan after a write pays with it).
"""

from __future__ import annotations

from ..storefile.cache_memo import CacheMemo

__all__ = ["chunk_memo", "enabled"]

enabled = True
"""False: no chunk is kept or served (every scan builds its chunks)."""


def chunk_memo(view, lo: bytes, hi: bytes | None, what: tuple) -> CacheMemo | None:
    """The memo of chunk ``[lo, hi)`` of store ``view`` for a result described
    by ``what`` (hashable: the columns, the time range, the shape asked for);
    None when it cannot be kept (no cache, a memstore without anchors)."""
    if not enabled or not view.files:
        return None
    cache = view.files[0].reader.block_cache
    if cache is None or cache.capacity_bytes == 0:
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
