"""The file side of a region split: the middle key and the daughter regions
written from a view of the parent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import kernels
from ..vfs.fs import FileSystem
from .manifest import RegionInfo, RegionManifest
from .view import RegionView

if TYPE_CHECKING:
    from .region import Region


class RegionDaughters:
    """Split points and daughter files of a :class:`~storage.region.region.Region`."""

    def midkey(self) -> bytes | None:
        """A row key near the middle of the region's data, for splitting."""
        largest = None
        for store in self.stores.values():
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
        if row is None or row <= self.info.start or (self.info.end is not None and row >= self.info.end):
            return None
        return row

    def write_daughter(self, info: RegionInfo, table_fs: FileSystem) -> None:
        """Write the cells of ``info``'s range into a new region directory.

        Each family's files are merged into one (a minor-compaction merge that
        keeps versions and markers).  The daughter's manifest carries the
        parent's flushed sequence id, so its sequence ids keep increasing.
        """
        if self.offline is not None:  # its data could not be read: a split would drop it
            raise self.offline_error()
        daughter = type(self)(table_fs, self.table_name, info, self.families, self.settings, None)
        daughter.fs.makedirs("")
        manifest = RegionManifest(info.region_id, {}, self.manifest.flushed_seq_id, 1)
        view = self.view()
        try:
            self._write_daughter_files(daughter, manifest, info, view)
        finally:
            view.release()
        manifest.save(daughter.fs)

    def _write_daughter_files(self, daughter: "Region", manifest: RegionManifest, info: RegionInfo, view: RegionView) -> None:
        for name, sview in view.stores.items():
            sources = [t for t in sview.sources(info.start, info.end) if t.num_rows]
            if not sources:
                continue
            cells = kernels.resolve(kernels.merge_sources(sources), keep_deletes=True)
            if not cells.num_rows:
                continue
            fname = manifest.new_file_name()
            writer = daughter.stores[name].new_writer(fname)
            try:
                writer.append_batch(cells)
                writer.finish(max_seq_id=self.manifest.flushed_seq_id)
            except BaseException:
                writer.abandon()
                raise
            manifest.files[name] = [fname]
