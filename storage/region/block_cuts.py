"""Cut keys for splitting a pinned region into parts of similar size, from its store files' block indexes.

The input format's ``splits_per_region`` and ``autobalance`` cut a region at
the first row keys of data blocks (no row straddles two parts), weighting
each block by its share of its file's data bytes; only the block indexes
are read, no data block.
"""

from __future__ import annotations

from ..storefile import StoreFileReader
from ..vfs.fs import FileSystem
from .pins import ARCHIVE_DIR
from .region_snapshots import RegionPin

__all__ = ["block_cut_keys"]


def block_cut_keys(table_fs: FileSystem, pin: RegionPin, start: bytes, end: bytes | None, pieces: int) -> list[bytes]:
    """Row keys cutting ``[start, end)`` of a pinned region into ``pieces`` parts of similar bytes.

    Every data block of every pinned store file counts its share of the
    file's data bytes at its first row key; the cuts are the block first
    rows where the running total crosses each ``k / pieces`` of the whole.
    """
    if pieces <= 1:
        return []
    marks: list[tuple[bytes, float]] = []
    for family, names in pin.files:
        for name in names:
            path = f"regions/{pin.region_id}/{family}/{name}"
            try:
                reader = StoreFileReader(table_fs, path)
            except FileNotFoundError:
                try:
                    reader = StoreFileReader(table_fs, f"{ARCHIVE_DIR}/{path}")
                except FileNotFoundError:
                    continue  # the reader will report it; cutting just gets coarser
            with reader:
                count = reader.block_count
                if not count:
                    continue
                per_block = reader.info.data_size / count
                for key in reader.block_first_keys:
                    row = key[0]
                    if row >= start and (end is None or row < end):
                        marks.append((row, per_block))
    if not marks:
        return []
    marks.sort(key=lambda m: m[0])
    total = sum(m[1] for m in marks)
    cuts: list[bytes] = []
    running = 0.0
    step = total / pieces
    goal = step
    for row, weight in marks:
        if running >= goal - 1e-9 and row > start and (not cuts or row > cuts[-1]):
            cuts.append(row)
            while goal <= running + 1e-9:
                goal += step
            if len(cuts) == pieces - 1:
                break
        running += weight
    return cuts
