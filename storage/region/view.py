"""A region view: a region's stores as one read point sees them, leased
until released, and the chunk bounds a batch scan cuts it into."""

from __future__ import annotations

from typing import Iterable

from .manifest import RegionInfo
from .reader_leases import Leases
from .store import StoreView

__all__ = ["RegionView", "chunk_bounds"]


class RegionView:
    """A consistent read view of a region: its key range and one StoreView per family.

    A view from :meth:`Region.view` holds leases on its store files and its
    memstore views; :meth:`release` gives them back (once; later calls do
    nothing).  Views built by hand (``leases`` None) hold nothing.
    """

    def __init__(self, info: RegionInfo, stores: dict[str, StoreView], table_name: str,
                 leases: Leases | None = None):
        self.info = info
        self.stores = stores
        self.table_name = table_name
        self._leases = leases
        self._released = False

    @property
    def read_point(self) -> int | None:
        """The read point of the view's memstores (None for a view without stores)."""
        for store in self.stores.values():
            return getattr(store.memstore, "read_point", None)
        return None

    def release(self) -> None:
        """Give back the view's file leases and memstore views."""
        if self._released:
            return
        self._released = True
        for store in self.stores.values():
            release = getattr(store.memstore, "release", None)
            if release is not None:
                release()
        if self._leases is not None:
            self._leases.release([f for store in self.stores.values() for f in store.files])

    @property
    def start(self) -> bytes:
        return self.info.start

    @property
    def end(self) -> bytes | None:
        return self.info.end


def chunk_bounds(views: Iterable[StoreView], start: bytes, stop: bytes | None, blocks_per_chunk: int = 16) -> list[bytes]:
    """Row keys that cut [start, stop) into chunks of about ``blocks_per_chunk`` blocks.

    Cuts come from the block index of the largest file, so each chunk reads a
    bounded number of blocks from every source.  Cuts are row keys, so no row
    straddles two chunks (resolution and filters need whole rows).
    """
    largest = None
    for view in views:
        for f in view.files:
            if largest is None or f.reader.block_count > largest.block_count:
                largest = f.reader
    if largest is None or largest.block_count <= blocks_per_chunk:
        return []
    cuts = []
    keys = largest.block_first_keys
    for i in range(blocks_per_chunk, len(keys), blocks_per_chunk):
        row = keys[i][0]
        if row > start and (stop is None or row < stop) and (not cuts or row > cuts[-1]):
            cuts.append(row)
    return cuts
