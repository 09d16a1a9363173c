"""Splitting a table's regions: a daughter pair written beside the parent and
swapped in under the table lock, with the parent's files retired."""

from __future__ import annotations

import logging

from ..errors import InvalidArgument
from ..region.manifest import RegionInfo, TableManifest
from ..region.pins import retire_dir
from ..region.region import Region
from .arguments import _check_bytes

log = logging.getLogger("storage.table")


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
            index = self._regions.index(region)
            new_infos = list(manifest.regions)
            new_infos[index : index + 1] = [lo, hi]
            new_manifest = TableManifest(
                manifest.name, manifest.families, manifest.settings, new_infos,
                manifest.next_region_id + 2, manifest.generation,
            )
            # The daughters are written and opened (their WALs made) before the
            # commit point, so nothing after it can fail on a full disk and
            # leave the parent taking writes that the committed table lost.
            daughters: list[Region] = []
            try:
                for info in (lo, hi):
                    region.write_daughter(info, self.fs)
                    daughters.append(self._new_region(info).open())
                    if getattr(daughters[-1], "offline", None) is not None:  # its new files did not read back
                        raise daughters[-1].offline_error()
            except BaseException:
                self._drop_daughters(daughters, (lo, hi))
                raise
            try:
                new_manifest.save(self.fs)  # the commit point of the split
            except BaseException as exc:
                committed = self._split_committed(new_infos)
                if committed is False:
                    self._drop_daughters(daughters, (lo, hi))
                    raise
                if committed is None:  # the table on disk cannot be read back: no write may go to either side
                    for daughter in daughters:
                        daughter.close()
                    self.close(f"is closed: the commit of a split of region {region.info.region_id} could not be"
                               f" confirmed ({exc}); open the table again")
                    raise
                # renamed into place, only the directory's fsync failed: committed,
                # but the parent's folder stays until a later open removes it
                self._swap_in(region, index, new_manifest, daughters, retire_parent=False)
                raise
            self._swap_in(region, index, new_manifest, daughters, retire_parent=True)

    def _swap_in(self, region: Region, index: int, manifest: TableManifest, daughters: list[Region],
                 retire_parent: bool) -> None:
        """Put the committed daughters in the parent's place (in memory; nothing here writes)."""
        self._manifest = manifest
        regions = list(self._regions)
        regions[index : index + 1] = daughters
        self._set_regions(regions)
        # scans that took a view of the parent keep reading its files; its
        # directory goes once the last of them ends
        parent_dir = f"regions/{region.info.region_id}"
        try:
            region.close(done=(lambda: retire_dir(self.fs, parent_dir)) if retire_parent else None)
        except Exception as exc:  # its WAL's last sync: every edit of it is in the daughters' files
            log.warning("table %s: closing split region %s failed: %s", self.name, region.info.region_id, exc)

    def _split_committed(self, new_infos: list[RegionInfo]) -> bool | None:
        """Whether the table manifest on disk names the daughters (None: it cannot be read)."""
        try:
            on_disk = TableManifest.load(self.fs).regions
        except Exception:
            return None
        return [r.region_id for r in on_disk] == [r.region_id for r in new_infos]

    def _drop_daughters(self, daughters: list[Region], infos: tuple[RegionInfo, ...]) -> None:
        """Undo a split that did not commit: close the daughters opened and remove
        their folders (best effort: a writer's next open removes what is left)."""
        for daughter in daughters:
            try:
                daughter.close()
            except Exception:
                pass
        for info in infos:
            try:
                self.fs.delete_dir(f"regions/{info.region_id}")
            except OSError:
                pass
