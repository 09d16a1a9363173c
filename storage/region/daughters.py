"""The file side of a region split: a middle key of the region's data, and a
daughter's files written from a view of the parent
(:meth:`storage.region.region.Region.write_daughter`)."""

from __future__ import annotations

from typing import Iterable

from .. import kernels
from .manifest import RegionInfo, RegionManifest
from .store import Store
from .view import RegionView

__all__ = ["midkey", "write_daughter_files"]


def midkey(stores: Iterable[Store], info: RegionInfo) -> bytes | None:
    """A row key near the middle of the data of ``stores`` (the region ``info``'s), for
    splitting: the middle block's first row of the largest file (None: no key inside the range)."""
    largest = None
    for store in stores:
        for f in store.files:
            if largest is None or f.size > largest.size:
                largest = f
    if largest is None:
        return None
    keys = largest.reader.block_first_keys
    if len(keys) >= 2:
        row = keys[len(keys) // 2][0]
    else:
        row = largest.reader.info.last_cell[0] if largest.reader.info.last_cell else None
    if row is None or row <= info.start or (info.end is not None and row >= info.end):
        return None
    return row


def write_daughter_files(view: RegionView, stores: dict[str, Store], manifest: RegionManifest,
                         info: RegionInfo, max_seq_id: int) -> None:
    """Write the cells of ``info``'s range from the parent's ``view`` into the
    daughter's ``stores``, listing each new file in ``manifest`` (the caller saves it).

    Each family's files are merged into one (a minor-compaction merge that
    keeps versions and markers), stamped with ``max_seq_id``.
    """
    for name, sview in view.stores.items():
        sources = [t for t in sview.sources(info.start, info.end) if t.num_rows]
        if not sources:
            continue
        cells = kernels.resolve(kernels.merge_sources(sources), keep_deletes=True)
        if not cells.num_rows:
            continue
        fname = manifest.new_file_name()
        writer = stores[name].new_writer(fname)
        try:
            writer.append_batch(cells)
            writer.finish(max_seq_id=max_seq_id)
        except BaseException:
            writer.abandon()
            raise
        manifest.files[name] = [fname]
