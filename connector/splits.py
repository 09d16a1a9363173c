"""TableSplit and how the input format cuts a table into splits.

One split per region that intersects the scan, as HBase's
``TableInputFormat``.  Two refinements, both off by default:

* ``splits_per_region = n``: every region is cut into ``n`` splits at
  block-index boundaries (the first row keys of the data blocks of its
  store files), so each split reads about the same number of bytes;
* ``autobalance``: regions larger than the target size are cut the same way
  into ``round(size / target)`` splits, and runs of adjacent small splits
  are merged while their sum stays within the target.  The target is
  ``hbase.mapreduce.tif.ave.regionsize`` or the average region size.

Cuts are row keys, so no row straddles two splits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Sequence

from storage.engine import FileSystem, RegionPin, block_cut_keys
from storage.keys import KeyRange, clip_range, intersect

from .options import ScanSpec

__all__ = ["TableSplit", "plan_splits"]


@dataclass(frozen=True)
class TableSplit:
    """A part of a table scan: rows ``[start, end)`` of one region (or a few merged, or a piece of one).

    ``regions`` are the pinned regions it reads (empty when the rows come
    from a region server); ``size`` estimates the bytes it reads;
    ``location`` names where the data lives (a host, or the server address).
    ``scan`` is the scan the reader runs over the split's rows;
    ``families`` the table's column families and their settings.
    """

    table: str
    root: str
    start: bytes
    end: bytes | None
    region_name: str
    size: int
    location: str
    index: int = 0
    regions: tuple[RegionPin, ...] = ()
    scan: ScanSpec | None = None
    pin_id: str | None = None
    families: dict = field(default_factory=dict, compare=False, hash=False)

    # HBase TableSplit accessors
    @property
    def start_row(self) -> bytes:
        """The first row (inclusive)."""
        return self.start

    @property
    def end_row(self) -> bytes:
        """The end row; ``b""`` for the open end, as HBase reports it."""
        return self.end or b""

    @property
    def length(self) -> int:
        """The size estimate in bytes (Hadoop's ``InputSplit.getLength``)."""
        return self.size

    @property
    def locations(self) -> list[str]:
        """Where the data lives (Hadoop's ``InputSplit.getLocations``)."""
        return [self.location]

    @property
    def encoded_region_name(self) -> str:
        """The region id(s) the split reads."""
        return ",".join(p.region_id for p in self.regions) or self.region_name.rsplit(",", 1)[-1]

    def spans(self) -> list[KeyRange]:
        """The row ranges this split reads: the scan's spans inside ``[start, end)``."""
        spans = self.scan.spans() if self.scan is not None else [(b"", None)]
        return intersect(spans, [(self.start, self.end)])

    def __repr__(self) -> str:
        return (
            f"TableSplit(#{self.index} {self.table} [{self.start!r}, {self.end!r}) "
            f"{self.region_name} {self.size} bytes @ {self.location})"
        )


def _merge(splits: list[TableSplit], target: float) -> list[TableSplit]:
    """Merge runs of adjacent splits while their summed size stays within ``target``."""
    out: list[TableSplit] = []
    for split in splits:
        if out:
            prev = out[-1]
            adjacent = prev.end is not None and prev.end == split.start
            if adjacent and prev.size + split.size <= target:
                regions = prev.regions + tuple(p for p in split.regions if p not in prev.regions)
                names = prev.region_name if split.region_name == prev.region_name else f"{prev.region_name};{split.region_name}"
                out[-1] = replace(prev, end=split.end, size=prev.size + split.size, regions=regions, region_name=names)
                continue
        out.append(split)
    return out


def plan_splits(
    table: str,
    root: str,
    location: str,
    regions: Sequence[tuple[str, RegionPin | None, bytes, bytes | None, int]],
    scan: ScanSpec,
    table_fs: FileSystem | None = None,
    splits_per_region: int = 1,
    autobalance: bool = False,
    target_size: int | None = None,
    families: dict | None = None,
) -> list[TableSplit]:
    """Splits for ``regions`` (``(region name, pin or None, start, end, size)`` in key order).

    A region is left out when none of the scan's spans intersects it.
    Block-boundary cuts need ``table_fs`` and pins; without them a region
    stays one split.
    """
    spans = scan.spans()
    base: list[TableSplit] = []
    for name, pin, r_start, r_end, size in regions:
        clipped = clip_range(r_start, r_end, *scan.bounds)
        if clipped is None or not intersect(spans, [clipped]):
            continue
        pins = (pin,) if pin is not None else ()
        base.append(TableSplit(table, root, clipped[0], clipped[1], name, size, location, 0, pins, scan,
                               families=dict(families or {})))
    if autobalance and base:
        total = sum(s.size for s in base)
        target = float(target_size) if target_size else total / len(base)
    else:
        target = 0.0
    out: list[TableSplit] = []
    for split in base:
        pieces = splits_per_region
        if autobalance and target > 0 and split.size > 2 * target:
            pieces = max(pieces, int(round(split.size / target)))
        if pieces > 1 and table_fs is not None and split.regions:
            cuts = block_cut_keys(table_fs, split.regions[0], split.start, split.end, pieces)
        else:
            cuts = []
        bounds = [split.start] + cuts + [split.end]
        share = split.size / (len(bounds) - 1)
        for lo, hi in zip(bounds, bounds[1:]):
            out.append(replace(split, start=lo, end=hi, size=int(math.ceil(share))))
    if autobalance and target > 0:
        out = _merge(out, target)
    return [replace(s, index=i) for i, s in enumerate(out)]
