"""A pinned region's decoded WAL records, kept between reads of the same pin.

A :class:`~storage.region.region_snapshots.PinnedRegion` reads a region's
unflushed cells from its WAL: it decodes the pinned records
(``flushed_seq_id < seq <= max_seq_id``) and sorts them
(:class:`~storage.memstore.sorted_cells.SortedCells`).  A long-lived process
that reads the same table again and again (the JVM source's engine worker,
serving query after query on a table whose writes are not flushed yet) would
pay that on every read, and then resolve every chunk against cells no
earlier result could be kept under.  So a read that asks for it (its scan's
``cache_results``, else the cache's default:
:meth:`~storage.storefile.cache.BlockCache.keeps_results`) keeps the sorted
cells: in the read's block cache, or for a read that caches no blocks in the
process's block cache (:func:`~storage.region.region_snapshots.shared_block_cache`),
one budget either way:

* **key**: the WAL files' full locations (live or archived, as read) and the
  pinned sequence range.  The cells of that range in those files are the
  same while the files are: WAL files are append-only, and records past the
  range are not read.
* **validation**, on every use, by a stat of each file
  (:mod:`storage.region.file_stamps`): device, inode, size, mtime and ctime
  as when the records were decoded, so a table dropped and created again
  under the same name, whose WAL files have the same names and sequence
  ids, is decoded afresh.  A WAL written within the clock granule before the
  decode (a region still taking writes) is not kept; a file that changes
  while it is decoded neither.
* **what is kept**, and when: only local files, only when asked for and in a
  cache of nonzero size, and only on the second decode of the same key (as
  :class:`~storage.storefile.cache_memo.CacheMemo` does for every kept
  result), so pins that change between every two reads, and a one-off scan
  of a whole table, fill nothing.  The entry is charged twice the cells'
  bytes: the cells, and the row form a scan builds from them once
  (:meth:`~storage.memstore.sorted_cells.SortedCells.kept_bytes`; a log read
  straight to its rows is charged twice its rows, its cells left undecoded).
* **what follows**: the kept cells are the same object for every read of
  the pin, which makes them an anchor for the chunks resolved against them
  (:mod:`storage.read.chunk_memo`), so a repeated read of a live table that
  caches blocks is served its kept chunks as the embedded scan is.  A read
  that caches no blocks keeps no chunk: it resolves every chunk again.

A read with ``cache_results`` false decodes its records afresh (benchmarks time both).
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from ..memstore.sorted_cells import SortedCells
from ..storefile import BlockCache
from ..storefile.cache_memo import CacheMemo
from ..vfs.fs import FileSystem
from .file_stamps import file_stamp, racily_clean, stampable

__all__ = ["kept_replay"]


def kept_replay(
    wal: Sequence[tuple[FileSystem, str]],
    seq_range: tuple[int, int],
    cache: BlockCache | None,
    decode: Callable[[], SortedCells],
    cache_results: bool | None = None,
) -> SortedCells:
    """The cells ``decode()`` gives for the WAL files ``wal`` (each a
    filesystem and a path in it, as the decode reads them) and the pinned
    ``seq_range`` (flushed, max): kept in ``cache`` from an earlier read of
    the same unchanged files when there is one and the read keeps results
    (``cache_results``; None: ``cache``'s default), else decoded now."""
    if cache is None or not cache.keeps_results(cache_results) or not wal or not all(stampable(fs) for fs, _ in wal):
        return decode()
    before = time.time_ns()
    try:
        stamps = tuple(file_stamp(fs, path) for fs, path in wal)
    except FileNotFoundError:
        return decode()  # the decode says which file is gone, as without a cache
    memo = CacheMemo(cache, ("wal-replay", tuple(fs.uri(path) for fs, path in wal), seq_range))
    kept = memo.get()
    if kept is not None and kept[0] == stamps:
        return kept[1]
    cells = decode()
    try:
        after = tuple(file_stamp(fs, path) for fs, path in wal)
    except FileNotFoundError:
        return cells
    if after != stamps or any(racily_clean(s, before) for s in stamps):
        return cells  # changed while decoded, or may still change unseen: not kept
    if memo.put((stamps, cells), cells.kept_bytes()):
        cells.share()  # one object for every read of the pin from now on: an anchor
    return cells
