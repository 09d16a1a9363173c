"""Open store-file readers kept between pinned reads, checked against the file on every use.

A :class:`~storage.region.region_snapshots.PinnedRegion` opens a
:class:`~storage.storefile.StoreFileReader` for every file it pins: map the
file, decode and verify its trailer, file info, block index and bloom
filter.  A long-lived process that reads the same files again and again (the
JVM source's engine worker, serving task after task) would pay that on every
read, so readers are checked out of one process-wide LRU cache instead and
given back when the region closes:

* **key**: the file's full location (``fs.uri(path)``) and the identity of
  the block cache the reader was opened with (a reader loads into the cache
  it was opened with, so readers without one are a key of their own).  The
  entry's reader holds that block cache, so its ``id`` cannot be reused
  while the entry exists.
* **validation**, on every checkout, by one ``os.stat`` of the path (the same
  ``FileSystem.size_and_version`` the reader names its file by): device, inode, size,
  mtime and ctime must be those seen when the reader was opened
  (:mod:`storage.region.file_stamps`).  A file
  deleted and recreated, or replaced by a rename (bulk-load overwrite,
  ``write_atomic``), has another inode: the cached reader keeps the old file
  mapped, so its inode cannot be reused meanwhile.  A file rewritten in place
  changes its mtime; because the kernel stamps files from a coarse clock, a
  reader opened less than one clock granule after the file's mtime is not
  cached at all (git's "racily clean" rule), so a rewrite within the same
  granule can never look unchanged.  A path that no longer exists fails its
  stat: the entry is dropped and ``FileNotFoundError`` raised, so
  ``PinnedRegion`` goes on to its next candidate (staged path, archive) as before.
* **what is not cached**: files of non-local roots (object stores, ``mock://``,
  HDFS): the only cheap check there is a HEAD for the size, and a same-size
  replacement with the same layout has the same trailer (its checksum covers
  the layout only), so a stale reader could not be told apart; each read
  opens them afresh as before.  Filesystems of a subclass of
  :class:`~storage.vfs.fs.FileSystem` (the fault-injecting one of the tests)
  are not cached either: their readers read through that instance's hooks,
  which a reader opened through another instance would bypass.
* **reference counts**: a checkout counts one holder; :func:`release` ends it.
  A reader leaves the map when it is evicted (more than :attr:`ReaderCache.capacity`
  entries: the least recently used idle one goes first, a held one only if
  every entry is held), found stale, closed, or released with ``discard``
  (its read raised), or idle for longer than :attr:`ReaderCache.idle_seconds`
  (300 s: an open reader keeps its file's disk space after a compaction or a
  dropped table deletes it; swept at checkouts); it is closed once its last
  holder releases it, never while a region still reads it.  A reader that is
  closed or was discarded is never handed out again.
* **locking**: one lock around the map, never held while a file is opened or
  stat'ed (opening can be slow); two threads opening the same file at once
  both open it and the second keeps the first's reader.  A release that runs
  inside the locked section on the same thread (a generator's ``with
  PinnedRegion`` finalized by the garbage collector) is deferred until the
  section ends instead of deadlocking.

Shared readers keep per-reader state between reads: ``counters``
(:class:`~storage.storefile.ReadCounters`) add up over every read of the
reader, so a consumer wanting one read's figures takes deltas
(:mod:`storage.read.scan_counting` does, for the embedded scans and the
connector's pinned reads alike; two reads of one file at once both see the
other's blocks in their deltas).  The prefetched
next-block header and ``point_first_rows`` describe the unchanged file and
are valid for any read.

A cache of :attr:`ReaderCache.capacity` 0 keeps nothing: every checkout opens a
reader afresh and its release closes it (benchmarks time reads with and without
it by setting ``shared_reader_cache().capacity``); :func:`clear` closes the
idle readers (tests, a process that wants its file handles back).  It caches open files, never results: a reader serves
the same bytes a fresh one would.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from contextlib import contextmanager
from typing import Hashable, Iterator

from .. import clock
from ..errors import InvalidArgument
from ..storefile import BlockCache, StoreFileReader
from ..vfs.fs import FileSystem
from .file_stamps import FileStamp, file_stamp, racily_clean, stampable

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_IDLE_SECONDS",
    "ReaderCache",
    "shared_reader_cache",
    "checkout",
    "release",
    "clear",
]

DEFAULT_CAPACITY = 256
"""Readers the process-wide cache keeps (idle and held) before it evicts."""

DEFAULT_IDLE_SECONDS = 300.0
"""How long a reader no read holds stays open: a file deleted meanwhile (compacted away,
its table dropped) keeps its disk space until its reader closes."""


class _Entry:
    """One cached reader: its key, the stat it was opened at, its holders."""

    __slots__ = ("key", "reader", "stamp", "refs", "listed", "idle_since")

    def __init__(self, key: Hashable, reader: StoreFileReader, stamp: FileStamp):
        self.key = key
        self.reader = reader
        self.stamp = stamp
        self.refs = 0
        self.listed = True  # in the LRU map (False: evicted or stale, closed at the last release)
        self.idle_since = 0.0  # clock.monotonic() at its last release, while refs == 0


class ReaderCache:
    """A thread-safe LRU cache of open store-file readers with reference counts.

    ``hits``, ``misses`` (a fresh open on a cacheable filesystem), ``stale``
    (entries found changed, gone or closed at checkout) and ``evictions``
    count over the cache's life.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, idle_seconds: float = DEFAULT_IDLE_SECONDS):
        self._capacity = self._checked(capacity)
        if not isinstance(idle_seconds, (int, float)) or isinstance(idle_seconds, bool) or not idle_seconds >= 0:
            raise InvalidArgument(f"reader cache idle_seconds must be a non-negative number, got {idle_seconds!r}")
        self.idle_seconds = float(idle_seconds)
        """An idle reader older than this is closed at the next checkout (see :meth:`_expire`)."""
        self._next_sweep = 0.0
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._out: dict[int, _Entry] = {}  # id(reader) -> entry, while the reader has holders
        # reentrant so that a release run by the garbage collector on this thread
        # between the section's end and the lock's release cannot deadlock
        self._lock = threading.RLock()
        self._owner: int | None = None  # the thread in the locked section
        self._deferred: deque[tuple[StoreFileReader, bool]] = deque()
        self._to_close: list[StoreFileReader] = []  # closed once the lock is let go
        self.hits = 0
        self.misses = 0
        self.stale = 0
        self.evictions = 0
        self.expired = 0

    @staticmethod
    def _checked(capacity: int) -> int:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 0:
            raise InvalidArgument(f"reader cache capacity must be a non-negative int, got {capacity!r}")
        return capacity

    # -- the locked section -----------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the lock; at the end run the releases deferred meanwhile, let the
        lock go, then close the readers that became due (closing needs no lock)."""
        self._lock.acquire()
        self._owner = threading.get_ident()
        try:
            yield
        finally:
            try:
                while self._deferred:
                    self._release_locked(*self._deferred.popleft())
            finally:
                due, self._to_close = self._to_close, []
                self._owner = None
                self._lock.release()
            for reader in due:
                reader.close()

    def _unlist(self, entry: _Entry) -> None:
        """Take ``entry`` out of the map; its reader closes now if idle, else at its last release."""
        if entry.listed:
            entry.listed = False
            if self._entries.get(entry.key) is entry:
                del self._entries[entry.key]
        if entry.refs == 0:
            self._to_close.append(entry.reader)

    def _hand_out(self, entry: _Entry) -> StoreFileReader:
        entry.refs += 1
        self._out[id(entry.reader)] = entry
        self._entries.move_to_end(entry.key)
        return entry.reader

    def _expire(self) -> None:
        """Close the readers idle for longer than :attr:`idle_seconds`.  A cached reader
        keeps its file open and mapped, so a file that a compaction or a dropped table
        deleted would keep its disk space for as long as the reader sits in the cache; a
        long-lived process (the engine worker) gives them back this way.  Swept at most
        once a second, at a checkout."""
        now = clock.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + min(1.0, self.idle_seconds)
        for entry in list(self._entries.values()):
            if entry.refs == 0 and now - entry.idle_since > self.idle_seconds:
                self.expired += 1
                self._unlist(entry)

    def _trim(self) -> None:
        while len(self._entries) > self._capacity:
            # the least recently used idle reader; a held one only when all are held
            victim = next((e for e in self._entries.values() if e.refs == 0), None)
            if victim is None:
                victim = next(iter(self._entries.values()))
            self.evictions += 1
            self._unlist(victim)

    # -- checkout and release ---------------------------------------------
    def checkout(self, fs: FileSystem, path: str, cache: BlockCache | None = None) -> StoreFileReader:
        """An open reader of ``path`` under ``fs`` loading into ``cache``; give it back with :meth:`release`.

        A cached reader is served only if the file is the one it was opened
        on; else the file is opened.  Raises ``FileNotFoundError`` if ``path``
        does not exist (a cached reader of it is dropped).
        """
        if not stampable(fs):
            return StoreFileReader(fs, path, cache=cache)  # closed at its release: the cache does not hold it
        if self._capacity == 0:
            with self._locked():
                self.misses += 1  # a fresh open of a file it could have kept
            return StoreFileReader(fs, path, cache=cache)
        key = (fs.uri(path), id(cache))
        before = time.time_ns()
        try:
            stamp = file_stamp(fs, path)
        except FileNotFoundError:
            self._drop(key)
            raise
        with self._locked():
            self._expire()
            entry = self._entries.get(key)
            if entry is not None:
                if entry.stamp == stamp and not entry.reader.closed:
                    self.hits += 1
                    return self._hand_out(entry)
                self.stale += 1
                self._unlist(entry)
            self.misses += 1
        reader = StoreFileReader(fs, path, cache=cache)  # no lock held: opening may be slow
        try:
            after = file_stamp(fs, path)
        except FileNotFoundError:
            after = None
        if after != stamp or reader.file_id[1] != stamp.size or racily_clean(stamp, before):
            return reader  # the file changed while opened, or may still change unseen: not kept
        return self._insert(key, reader, stamp)

    def _insert(self, key: Hashable, reader: StoreFileReader, stamp: FileStamp) -> StoreFileReader:
        with self._locked():
            entry = self._entries.get(key)
            if entry is not None:
                if entry.stamp == stamp and not entry.reader.closed:
                    # another thread opened the same file meanwhile: keep its reader
                    self._to_close.append(reader)
                    return self._hand_out(entry)
                self._unlist(entry)
            entry = _Entry(key, reader, stamp)
            self._entries[key] = entry
            out = self._hand_out(entry)
            self._trim()
            return out

    def _drop(self, key: Hashable) -> None:
        """Forget the entry of a path found gone."""
        with self._locked():
            entry = self._entries.get(key)
            if entry is not None:
                self.stale += 1
                self._unlist(entry)

    def release(self, reader: StoreFileReader, discard: bool = False) -> None:
        """End one checkout of ``reader``.  ``discard``: the read that held it
        failed, so it is not served again (closed once no one holds it).  A
        reader this cache does not hold (opened while disabled, of an
        uncached filesystem) is closed."""
        if self._owner == threading.get_ident():
            # called from inside the locked section (a finalizer run by the
            # garbage collector): the section runs it before it ends
            self._deferred.append((reader, discard))
            return
        with self._locked():
            self._release_locked(reader, discard)

    def _release_locked(self, reader: StoreFileReader, discard: bool) -> None:
        entry = self._out.get(id(reader))
        if entry is None or entry.reader is not reader:
            self._to_close.append(reader)
            return
        entry.refs -= 1
        if entry.refs == 0:
            del self._out[id(reader)]
            entry.idle_since = clock.monotonic()
        if discard or reader.closed:
            self._unlist(entry)  # closes it if that was the last holder
        elif entry.refs == 0 and not entry.listed:
            self._to_close.append(reader)  # evicted or stale while held: its last holder is gone

    # -- management ---------------------------------------------------------
    @property
    def capacity(self) -> int:
        """Readers kept before the least recently used are evicted."""
        return self._capacity

    @capacity.setter
    def capacity(self, value: int) -> None:
        with self._locked():
            self._capacity = self._checked(value)
            self._trim()

    def clear(self) -> int:
        """Close every idle reader now and forget the held ones (each closes at
        its last release); returns how many were closed now."""
        with self._locked():
            idle = 0
            for entry in list(self._entries.values()):
                idle += entry.refs == 0
                self._unlist(entry)
            return idle

    def holders(self, reader: StoreFileReader) -> int:
        """How many checkouts of ``reader`` are not released yet (0 for a reader it does not hold)."""
        with self._locked():
            entry = self._out.get(id(reader))
            return entry.refs if entry is not None and entry.reader is reader else 0

    def cached(self, reader: StoreFileReader) -> bool:
        """True while ``reader`` is in the map (a later checkout of its file may get it)."""
        with self._locked():
            return any(e.reader is reader for e in self._entries.values())

    def stats(self) -> dict[str, int]:
        """The counts, the entries in the map and the readers checked out."""
        with self._locked():
            return {"hits": self.hits, "misses": self.misses, "stale": self.stale, "evictions": self.evictions,
                    "expired": self.expired,
                    "entries": len(self._entries), "held": len(self._out)}

    def __len__(self) -> int:
        return len(self._entries)


_shared = ReaderCache()


def shared_reader_cache() -> ReaderCache:
    """The process-wide reader cache that :class:`PinnedRegion` checks readers out of."""
    return _shared


def checkout(fs: FileSystem, path: str, cache: BlockCache | None = None) -> StoreFileReader:
    """:meth:`ReaderCache.checkout` of the process-wide cache."""
    return _shared.checkout(fs, path, cache)


def release(reader: StoreFileReader, discard: bool = False) -> None:
    """:meth:`ReaderCache.release` of the process-wide cache."""
    _shared.release(reader, discard)


def clear() -> int:
    """:meth:`ReaderCache.clear` of the process-wide cache."""
    return _shared.clear()
