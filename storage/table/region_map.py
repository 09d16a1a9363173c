"""A table's regions in key order, and the routing of rows and keys to them.

The table replaces the whole list (:meth:`RegionMap.set`) under its lease
lock when it opens and when a split commits; its writer and its point reads
route through the same map, so they always agree on which region holds a row.
"""

from __future__ import annotations

import bisect
from typing import Sequence

from ..errors import RegionNotFound
from ..region.region import Region

__all__ = ["RegionMap"]


class RegionMap:
    """The regions of table ``table_name``, ordered by start key."""

    def __init__(self, table_name: str):
        self.table_name = table_name
        self.regions: list[Region] = []
        self.starts: list[bytes] = []  # each region's start key, for bisect
        # both lists as one object, replaced in one store: what lock-free point reads route by
        self.routing: tuple[list[bytes], list[Region]] = ([], [])

    def set(self, regions: list[Region]) -> None:
        """Replace the regions (the caller holds the table's lease lock)."""
        self.regions = regions
        self.starts = [r.info.start for r in regions]
        self.routing = (self.starts, regions)

    def region_for(self, row: bytes) -> Region:
        """The region whose key range holds ``row``."""
        i = bisect.bisect_right(self.starts, row) - 1
        if i < 0:
            raise RegionNotFound(f"no region of {self.table_name} holds row {row!r}")
        return self.regions[i]

    def regions_for_range(self, low: bytes, high: bytes | None) -> list[Region]:
        """The regions that hold part of ``[low, high)``, in key order."""
        out = []
        for r in self.regions:
            if high is not None and r.info.start >= high:
                break
            if r.info.end is not None and r.info.end <= low:
                continue
            out.append(r)
        return out

    def cells_by_region(self, cells: Sequence) -> dict[int, list]:
        """``cells`` grouped by the index of the region holding their rows."""
        if len(self.regions) == 1:
            return {0: cells if isinstance(cells, list) else list(cells)}
        by_region: dict[int, list] = {}
        starts = self.starts
        for cell in cells:
            i = bisect.bisect_right(starts, cell[0]) - 1
            by_region.setdefault(i, []).append(cell)
        return by_region

    def keys_by_region(self, keys: list[bytes]) -> list[tuple[Region, list[bytes]]]:
        """Sorted distinct ``keys`` cut into one run per region that holds them, in key order."""
        starts, regions = self.routing
        groups: list[tuple[Region, list[bytes]]] = []
        i = 0
        while i < len(keys):
            r = bisect.bisect_right(starts, keys[i]) - 1
            if r < 0:
                raise RegionNotFound(f"no region of {self.table_name} holds row {keys[i]!r}")
            # the keys below the next region's start belong to this one
            j = len(keys) if r + 1 >= len(starts) else bisect.bisect_left(keys, starts[r + 1], i)
            groups.append((regions[r], keys[i:j]))
            i = j
        return groups
