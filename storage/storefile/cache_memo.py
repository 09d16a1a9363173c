"""A scan result kept in the block cache while the objects it was built from live.

The block cache holds decoded blocks; some results built from them are as
costly and as reusable, such as a live table's chunk resolved against the
memstore (:mod:`storage.read.chunk_memo`).  A scan that asks for it
(``cache_results``, see :meth:`~storage.storefile.cache.BlockCache.keeps_results`)
keeps such a result in a :class:`CacheMemo`: one entry of the block cache under a
key that names its sources, charged its bytes in the cache's one budget and
evicted in its LRU order like any block, and counted in the cache's result
counters (``result_hits``, ``result_misses``, ``result_bytes``):

* ``anchors`` are objects whose identity stands for content that never
  changes while they live (a memstore run); the entry holds
  them by weak reference and is served only while they are the very objects
  the caller has (an id in the key could be reused once an object is gone);
* a result is kept on its second build from the same sources: the first
  leaves a small marker (charged what its entry takes), so sources that
  change between every two reads (a table written between scans) fill the
  cache with nothing read again.
"""

from __future__ import annotations

import weakref
from typing import Any, Hashable, Sequence

__all__ = ["CacheMemo"]

_SEEN = object()
# what the cache charges for a first build's marker: about what the entry's key tuple and
# the cache's map node take, so a table written between every two scans cannot fill the
# process with markers the cache counts as nearly free
_SEEN_CHARGE = 512


class CacheMemo:
    """One result's entry in a block cache: :meth:`get` what an earlier read
    built from these sources, :meth:`put` what this one built."""

    __slots__ = ("_cache", "_key", "_anchors")

    def __init__(self, cache, key: Hashable, anchors: Sequence[Any] = ()):
        self._cache = cache
        self._anchors = tuple(anchors)
        self._key = (key, tuple(id(a) for a in self._anchors))

    def get(self) -> Any | None:
        """What an earlier read built from these same sources, or None."""
        entry = self._cache.get_result(self._key, count=False)
        value = None if entry is None or entry is _SEEN else self._valid(entry)
        self._cache.count_result(value is not None)
        return value

    def _valid(self, entry: tuple) -> Any | None:
        refs, value = entry
        if len(refs) != len(self._anchors) or any(r() is not a for r, a in zip(refs, self._anchors)):
            return None
        return value

    def put(self, value: Any, charge: int) -> bool:
        """Keep ``value`` (``charge`` bytes) if these sources were built once
        before; True when it was kept."""
        if self._cache.get_result(self._key, count=False) is not _SEEN:
            self._cache.put_result(self._key, _SEEN, _SEEN_CHARGE)
            return False
        refs = tuple(weakref.ref(a) for a in self._anchors)
        return self._cache.put_result(self._key, (refs, value), charge)
