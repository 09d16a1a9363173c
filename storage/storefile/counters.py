"""Read counters of a store file reader, shared by all its threads and scanners.

They are bumped once per block read or positioning, never per cell, so a
lock per update is cheap; they are what benchmarks and tests use to prove
that a scan reads sequentially (one read per block, no extra header reads)
and that reverse scans seek once per row.
"""

from __future__ import annotations

import threading

__all__ = ["ReadCounters"]


class ReadCounters:
    """Counts of what a reader did.

    ``blocks_read``        data blocks read from the file (cache hits excluded)
    ``bytes_read``         bytes read from the file, every read included
    ``reads``              read calls on the file, every read included (on an
                           object store each is one ranged GET request)
    ``extra_header_reads`` sequential block reads that had to read the block
                           header separately because no prefetched header
                           matched
    ``cache_hits`` / ``cache_misses``  block cache lookups (with a cache only)
    ``seeks``              scanner positionings that search the block index
                           and a block from its start
    """

    FIELDS = ("blocks_read", "bytes_read", "reads", "extra_header_reads", "cache_hits", "cache_misses", "seeks")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.blocks_read = 0
        self.bytes_read = 0
        self.reads = 0
        self.extra_header_reads = 0
        self.cache_hits = 0
        self.cache_misses = 0
        self.seeks = 0

    def add(self, field: str, amount: int = 1) -> None:
        """Add ``amount`` to one counter (thread-safe)."""
        with self._lock:
            setattr(self, field, getattr(self, field) + amount)

    def add_seek(self, cache_hit: bool) -> None:
        """Count one positioning and, if ``cache_hit``, its block found in the cache
        (a point read's two counts under one lock)."""
        with self._lock:
            self.seeks += 1
            if cache_hit:
                self.cache_hits += 1

    def add_seeks(self, seeks: int, cache_hits: int) -> None:
        """Count ``seeks`` positionings, ``cache_hits`` of them served by the cache (a multi-get's counts)."""
        with self._lock:
            self.seeks += seeks
            self.cache_hits += cache_hits

    def add_read(self, nbytes: int, block: bool) -> None:
        """Record one read of ``nbytes`` (a data block read if ``block``)."""
        with self._lock:
            self.bytes_read += nbytes
            self.reads += 1
            if block:
                self.blocks_read += 1

    def add_reads(self, nbytes: int, reads: int, blocks: int) -> None:
        """Record ``reads`` reads of ``nbytes`` in all, ``blocks`` of them data
        block reads (a run of blocks read as one unit)."""
        with self._lock:
            self.bytes_read += nbytes
            self.reads += reads
            self.blocks_read += blocks

    def snapshot(self) -> dict[str, int]:
        """The counters as a dict, read consistently."""
        with self._lock:
            return {f: getattr(self, f) for f in self.FIELDS}

    def reset(self) -> None:
        """Zero every counter (benchmarks call it between runs)."""
        with self._lock:
            for f in self.FIELDS:
                setattr(self, f, 0)

    def __repr__(self) -> str:
        return f"ReadCounters({self.snapshot()})"
