"""Splitting a table's regions: a daughter pair written beside the parent and
swapped in under the table lock, with the parent's files retired."""

from __future__ import annotations

from ..errors import InvalidArgument
from ..region.manifest import RegionInfo, TableManifest
from ..region.pins import retire_dir
from ..region.region import Region
from .arguments import _check_bytes


class TableSplits:
    """Region splits of a :class:`~storage.table.table.Table`."""

    def split(self, split_key: bytes | None = None) -> list[RegionInfo]:
        """Split the region holding ``split_key`` at it, or every region at its midkey."""
        self._check_open()
        # most of the memstores are written out before writes wait for the split
        self.flush()
        with self._mutex:
            if split_key is not None:
                split_key = _check_bytes(split_key, "split_key")
                region = self._region_for(split_key)
                if split_key == region.info.start:
                    raise InvalidArgument(f"split key {split_key!r} is the start of region {region.info.region_id}")
                self._split_region(region, split_key)
            else:
                for region in list(self._regions):
                    region.flush()
                    key = region.midkey()
                    if key is not None:
                        self._split_region(region, key)
            return self.region_infos()

    def _split_region(self, region: Region, key: bytes) -> None:
        # no flush or compaction of the parent runs while its daughters are written
        with region.maintenance():
            region.flush()
            manifest = self._manifest
            lo_id = f"{manifest.next_region_id:08d}"
            hi_id = f"{manifest.next_region_id + 1:08d}"
            lo = RegionInfo(lo_id, region.info.start, key)
            hi = RegionInfo(hi_id, key, region.info.end)
            region.write_daughter(lo, self.fs)
            region.write_daughter(hi, self.fs)
            index = self._regions.index(region)
            new_infos = list(manifest.regions)
            new_infos[index : index + 1] = [lo, hi]
            new_manifest = TableManifest(
                manifest.name, manifest.families, manifest.settings, new_infos,
                manifest.next_region_id + 2, manifest.generation,
            )
            new_manifest.save(self.fs)  # the commit point of the split
            self._manifest = new_manifest
            daughters = [self._new_region(lo).open(), self._new_region(hi).open()]
            regions = list(self._regions)
            regions[index : index + 1] = daughters
            self._set_regions(regions)
            # scans that took a view of the parent keep reading its files; its
            # directory goes once the last of them ends
            parent_dir = f"regions/{region.info.region_id}"
            region.close(done=lambda: retire_dir(self.fs, parent_dir))
