"""The block cache: decoded data blocks shared by every reader of a connection.

An LRU map bounded in bytes: each entry is charged all it holds (a block's
:func:`arrow_footprint`: its Arrow buffers and the C++ and Python objects
behind each array, plus the Python list of row keys a point read attaches
to it, see :meth:`BlockCache.recharge`) and the least recently used entries
are evicted when the total passes the capacity.  So a process's memory
grows with its cache by about the cache's capacity, not a multiple of it.  Keys are ``(file identity, block offset)``.  The cache is
consulted once per block, never per cell, so one lock around an
``OrderedDict`` costs nothing measurable.

The same budget holds the results a scan keeps when asked to (``cache_results``:
a clean file's streamed batches, a live chunk's rows, a pinned region's decoded
WAL; :mod:`storage.storefile.cache_memo`).  They are entries like blocks, charged
their bytes and evicted in the same LRU order, and counted apart
(``result_hits``, ``result_misses``, ``result_bytes``) so that a warm figure
served from kept results is never mistaken for blocks read.  Whether a scan keeps
results is the scan's ``cache_results`` or, when it leaves it unset, the cache's
own :attr:`BlockCache.cache_results` (a connection's ``cache_results=``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache
from typing import Any, Hashable, Iterable

import pyarrow as pa

from ..errors import InvalidArgument

__all__ = ["BlockCache", "arrow_footprint", "check_cache_results", "ARRAY_OVERHEAD", "ALLOCATOR_SLACK"]

ARRAY_OVERHEAD = 512
"""Bytes behind one Arrow array (and each child array of a nested or run-end encoded
one) beyond its buffers: the C++ array, its data and buffer objects, the IPC
metadata the array was decoded with, the Python wrapper, the allocator's padding.
Measured: a cache of 12,808 dense blocks of 229 rows (25 arrays each) held
134 MiB of C heap and 20 MiB of Arrow padding beyond the arrays' ``nbytes``,
12.6 KB a block, 504 bytes an array."""


@lru_cache(maxsize=1024)
def _objects(kind: pa.DataType) -> int:
    """Arrays behind one array of type ``kind``: itself and its children, recursively."""
    return 1 + sum(_objects(kind.field(i).type) for i in range(kind.num_fields))


ALLOCATOR_SLACK = 8
"""The allocator keeps about 1/8 more than the blocks it holds (pages part used,
size classes rounded up): measured, a full 256 MiB cache of such blocks took 278 MiB
more resident memory than the same process with the cache emptied, 9% over."""


def arrow_footprint(arrays: Iterable[pa.Array], later: int = 0) -> int:
    """Memory that ``arrays`` keep alive: their buffers' bytes plus :data:`ARRAY_OVERHEAD`
    per array and child array, plus ``later`` (bytes of forms the holder builds from
    them on demand), plus the allocator's :data:`ALLOCATOR_SLACK` (what the cache
    charges for a decoded block)."""
    total = later
    for array in arrays:
        # the buffers the array holds (a slice keeps its whole buffers alive); Arrow's
        # ``nbytes`` walks the data to measure a slice, 30x the cost, once per array of
        # every block cached
        total += array.get_total_buffer_size() + ARRAY_OVERHEAD * _objects(array.type)
    return total + total // ALLOCATOR_SLACK


def check_cache_results(value: Any, name: str = "cache_results") -> bool:
    """``value`` if it is True or False, else InvalidArgument naming ``name``."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be True or False, got {value!r}")
    return value


class BlockCache:
    """A thread-safe LRU cache of blocks bounded by ``capacity_bytes``.

    ``hits``, ``misses`` and ``evictions`` count lookups and removals over the
    cache's life; ``used_bytes`` is the current total charge.  Kept scan
    results (:meth:`get_result`, :meth:`put_result`) share the bound and the
    LRU order and have counters of their own: ``result_hits``,
    ``result_misses``, ``result_evictions`` and ``result_bytes`` (their part of
    ``used_bytes``).  ``cache_results`` is whether scans that do not say keep
    their results here (default False: results are kept only when asked for).
    """

    def __init__(self, capacity_bytes: int, cache_results: bool = False):
        if not isinstance(capacity_bytes, int) or isinstance(capacity_bytes, bool) or capacity_bytes < 0:
            raise InvalidArgument(f"capacity_bytes must be a non-negative int, got {capacity_bytes!r}")
        self.capacity_bytes = capacity_bytes
        self.cache_results = check_cache_results(cache_results, "cache_results")
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._results: set[Hashable] = set()  # keys of the entries that are kept results
        self._lock = threading.Lock()
        self.used_bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.result_bytes = 0
        self.result_hits = 0
        self.result_misses = 0
        self.result_evictions = 0

    def keeps_results(self, asked: bool | None) -> bool:
        """Whether a scan that asked ``asked`` (its ``cache_results``; None: not
        said) keeps and is served results here: what it asked, else this
        cache's default, and never in a cache of no capacity."""
        wanted = self.cache_results if asked is None else asked
        return bool(wanted) and self.capacity_bytes > 0

    def get(self, key: Hashable, count_miss: bool = True) -> Any | None:
        """The cached value for ``key`` (now most recently used), or None
        (counted as a miss unless ``count_miss`` is false: a probe whose
        caller reads the block through :meth:`get` next if it is absent)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                if count_miss:
                    self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def peek(self, key: Hashable) -> Any | None:
        """The cached value for ``key`` or None, neither counted nor made most recently used
        (for a holder that recharges its entry: :meth:`recharge`)."""
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else entry[0]

    def get_result(self, key: Hashable, count: bool = True) -> Any | None:
        """A kept result for ``key`` (now most recently used), or None; counted
        in ``result_hits`` / ``result_misses`` (unless ``count`` is false: the
        keeper's own look before it stores), never in the block counters."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.result_misses += count
                return None
            self._entries.move_to_end(key)
            self.result_hits += count
            return entry[0]

    def count_result(self, hit: bool) -> None:
        """Count one lookup of a kept result that :meth:`get_result` made
        uncounted (its keeper tells a usable entry from a stale one)."""
        with self._lock:
            if hit:
                self.result_hits += 1
            else:
                self.result_misses += 1

    def put(self, key: Hashable, value: Any, charge: int) -> bool:
        """Insert or replace ``key``; returns False if ``charge`` exceeds the capacity.

        An entry larger than the whole cache is not stored: it would only
        evict everything else and then itself.
        """
        return self._put(key, value, charge, False)

    def put_result(self, key: Hashable, value: Any, charge: int) -> bool:
        """:meth:`put` for a kept scan result: charged ``charge`` in the same
        budget and LRU order as blocks, and counted in ``result_bytes``."""
        return self._put(key, value, charge, True)

    def _put(self, key: Hashable, value: Any, charge: int, result: bool) -> bool:
        if charge < 0:
            raise InvalidArgument(f"charge must be non-negative, got {charge!r}")
        with self._lock:
            if key in self._entries:
                self._drop(key)
            if charge > self.capacity_bytes:
                return False
            self._entries[key] = (value, charge)
            self.used_bytes += charge
            if result:
                self._results.add(key)
                self.result_bytes += charge
            self._evict_over_capacity()
            return True

    def _drop(self, key: Hashable) -> int:
        """Remove ``key`` (held lock; it must be present); its charge."""
        charge = self._entries.pop(key)[1]
        self.used_bytes -= charge
        if key in self._results:
            self._results.discard(key)
            self.result_bytes -= charge
        return charge

    def _evict_over_capacity(self) -> None:
        """Evict least recently used entries, blocks and results alike, until within the capacity."""
        while self.used_bytes > self.capacity_bytes and self._entries:
            key = next(iter(self._entries))
            if key in self._results:
                self.result_evictions += 1
            self._drop(key)
            self.evictions += 1

    def recharge(self, key: Hashable, value: Any, charge: int) -> None:
        """Charge ``charge`` for ``key`` from now on, if it still holds ``value``.

        For an entry that grew after it was cached (a block whose row keys a
        point read turned into a Python list): the total stays within the
        capacity, evicting least recently used entries as :meth:`put` does.
        """
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] is not value:
                return
            self.used_bytes += charge - entry[1]
            if key in self._results:
                self.result_bytes += charge - entry[1]
            self._entries[key] = (value, charge)
            self._entries.move_to_end(key)
            self._evict_over_capacity()

    def discard(self, key: Hashable) -> bool:
        """Drop ``key`` if it is cached (an entry another one now holds all of); whether it was."""
        with self._lock:
            if key not in self._entries:
                return False
            self._drop(key)
            return True

    def evict_file(self, file_id: Hashable) -> int:
        """Drop every block of one file (keys ``(file_id, offset)``); returns how many."""
        with self._lock:
            doomed = [k for k in self._entries if isinstance(k, tuple) and k and k[0] == file_id]
            for key in doomed:
                self._drop(key)
            return len(doomed)

    def clear(self) -> None:
        """Drop every entry (the counters are kept)."""
        with self._lock:
            self._entries.clear()
            self._results.clear()
            self.used_bytes = 0
            self.result_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def stats(self) -> dict[str, int]:
        """A snapshot of the counters and the current size."""
        with self._lock:
            return {
                "capacity_bytes": self.capacity_bytes,
                "used_bytes": self.used_bytes,
                "entries": len(self._entries),
                "hits": self.hits,
                "misses": self.misses,
                "evictions": self.evictions,
                "result_bytes": self.result_bytes,
                "result_entries": len(self._results),
                "result_hits": self.result_hits,
                "result_misses": self.result_misses,
                "result_evictions": self.result_evictions,
            }
