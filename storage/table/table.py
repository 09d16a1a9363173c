"""Tables: the happybase-shaped embedded API over an ordered list of regions.

Rows are routed to the region whose [start, end) holds them.  Row data is a
dict of ``b"family:qualifier" -> bytes`` as in happybase.  Writes go through
each region's WAL; a region is flushed past the memstore flush size,
compacted past the compaction threshold and split past max_filesize.

Reads are consistent (see docs/architecture.md, "What a reader sees"): a
scan fixes the table's read point (:mod:`storage.mvcc`) and takes a leased
view of every region its key range covers when it opens, all under the
table's lease lock (:mod:`storage.region.reader_leases`), so later writes, flushes,
compactions and splits change nothing it returns.
"""

from __future__ import annotations

import bisect
import threading
from typing import Sequence

from ..errors import RegionNotFound, StorageError
from ..keys import key_after
from ..mvcc import Mvcc, views_at_read_point
from ..region.load_journal import JOURNAL_DIR, pending_entries, recover
from ..region.manifest import RegionInfo, TableManifest
from ..region.pins import clean_archive, retire_dir
from ..region.reader_leases import Leases
from ..region.region import Region
from ..region.view import RegionView
from ..schema import FamilySettings, TableSettings
from ..vfs.fs import FileSystem
from .counters import TableCounters
from .descriptor import cell_size_limit
from .gets import TableGets
from .scans import TableScans
from .splits import TableSplits
from .writes import TableWrites

__all__ = ["Table"]


class Table(TableWrites, TableCounters, TableScans, TableGets, TableSplits):
    """A table of a :class:`storage.table.connection.Connection`; get one from ``connection.table(name)``."""

    def __init__(self, name: str, fs: FileSystem, manifest: TableManifest, cache, read_only: bool, lock=None):
        self.name = name
        self.fs = fs
        self.read_only = read_only
        self._manifest = manifest
        self._cache = cache
        self._lock = lock
        self._mutex = threading.RLock()
        self.families_settings = {
            name: FamilySettings(**opts) for name, opts in manifest.families.items()
        }
        self.settings = TableSettings(**{k: v for k, v in manifest.settings.items()})
        self._max_cell_size = cell_size_limit(self.settings.extra)  # hbase.server.keyvalue.maxsize
        self._regions: list[Region] = []
        self._starts: list[bytes] = []
        self._columns: dict[bytes, tuple[bytes, bytes]] = {}
        self._point_specs: dict = {}  # (columns, timestamp) -> ScanSpec of point reads
        self._refused_until: dict = {}  # region id -> (until when, the error) after a blocked write's flush failed
        self._maintain_after: dict = {}  # region id -> when writes may trigger upkeep again after a failure
        self._blocked: set = set()  # regions past the blocking limit whose flush failed: writes flush them first
        self.closed = False
        self._closed_why = "is closed"
        self.mvcc = Mvcc()
        self.leases = Leases()
        self._open_regions()

    # -- regions ---------------------------------------------------------
    def _open_regions(self) -> None:
        # A committed bulk load whose commit was cut short is finished first
        # (by a writer) or applied in memory (by a reader), before regions
        # decide which files are orphans.
        pending = {}
        if self.read_only:
            pending = pending_entries(self.fs)
        else:
            recover(self.fs)
        regions = []
        for info in self._manifest.regions:
            region = self._new_region(info)
            region.pending_loads = pending.get(info.region_id, [])
            regions.append(region.open())
        self._set_regions(regions)
        if not self.read_only:
            for folder in ("", JOURNAL_DIR):  # leftovers of failed atomic writes (pins clean their own)
                self.fs.remove_temporaries(folder)
            live = {r.region_id for r in self._manifest.regions}
            for entry in self.fs.listdir("regions"):
                if entry not in live:  # a split that crashed before or after its commit
                    retire_dir(self.fs, f"regions/{entry}")
            clean_archive(self.fs)

    def _new_region(self, info: RegionInfo) -> Region:
        return Region(
            self.fs, self.name, info, self.families_settings, self.settings, self._cache, self.read_only,
            self.mvcc, self.leases,
        )

    def _set_regions(self, regions: list[Region]) -> None:
        with self.leases.lock:
            self._regions = regions
            self._starts = [r.info.start for r in regions]

    def _views(self, spans: Sequence[tuple[bytes, bytes | None]]) -> list[tuple[RegionView, bytes, bytes | None]]:
        """Leased views, at one read point, of the regions each span covers, in key order.

        Taken together under the lease lock, so the region list, each
        region's files and memstores and the read point belong to one moment.
        """
        def open_views(point: int) -> list:
            self._check_readable()
            views: dict[str, RegionView] = {}
            plan = []
            try:
                for lo, hi in spans:
                    regions = [self._region_for(lo)] if hi == key_after(lo) else self._regions_for_range(lo, hi)
                    for region in regions:
                        view = views.get(region.info.region_id)
                        if view is None:
                            view = views[region.info.region_id] = region.view(point)
                        plan.append((view, lo, hi))
            except BaseException:
                for view in views.values():
                    view.release()
                raise
            return plan

        return views_at_read_point(self.leases.lock, self.mvcc, open_views)

    def _region_for(self, row: bytes) -> Region:
        i = bisect.bisect_right(self._starts, row) - 1
        if i < 0:
            raise RegionNotFound(f"no region of {self.name} holds row {row!r}")
        return self._regions[i]

    def _regions_for_range(self, low: bytes, high: bytes | None) -> list[Region]:
        regions = self._regions
        out = []
        for r in regions:
            if high is not None and r.info.start >= high:
                break
            if r.info.end is not None and r.info.end <= low:
                continue
            out.append(r)
        return out

    def regions(self) -> list[dict]:
        """The table's regions in key order, as happybase's ``Table.regions()``."""
        self._check_readable()
        return [
            {
                "name": f"{self.name},{r.info.name}".encode(),
                "id": r.info.region_id,
                "start_key": r.info.start,
                "end_key": r.info.end or b"",
                "version": 1,
                "size": r.size,
                "memstore_size": r.memstore_size,
                "store_files": sum(len(s.files) for s in r.stores.values()),
            }
            for r in self._regions
        ]

    def offline_regions(self) -> dict[str, str]:
        """Region id -> why, for each region that did not open (damage found
        while opening it: see :meth:`storage.region.region.Region.open`)."""
        self._check_readable()
        return {r.info.region_id: str(r.offline) for r in self._regions if r.offline is not None}

    def region_infos(self) -> list[RegionInfo]:
        """The regions' ids and key ranges, in key order."""
        self._check_readable()
        return [r.info for r in self._regions]

    def families(self) -> dict[bytes, dict]:
        """Column families and their settings, as happybase's ``Table.families()``."""
        self._check_readable()
        return {name.encode(): s.to_dict() for name, s in self.families_settings.items()}

    # -- writes ----------------------------------------------------------
    def _check_readable(self) -> None:
        if self.closed:
            raise StorageError(f"table {self.name} {self._closed_why}")

    def _check_open(self) -> None:
        self._check_readable()
        if self.read_only:
            raise StorageError(f"table {self.name} is open read-only")

    # -- maintenance -----------------------------------------------------
    def flush(self) -> None:
        """Flush every region's memstore to store files (writes go on meanwhile)."""
        self._check_open()
        for r in self._region_list():
            with r.maintenance():
                if not r.closed:  # a split flushed and retired it meanwhile
                    r.flush()

    def compact(self, major: bool = True) -> None:
        """Compact every region (major by default, as ``major_compact`` in the
        HBase shell); writes go on meanwhile."""
        self._check_open()
        for r in self._region_list():
            with r.maintenance():
                if not r.closed:  # a split retired it meanwhile: its daughters are new files
                    r.flush()
                    r.compact(major=major)
        with self._mutex:
            clean_archive(self.fs)

    def _region_list(self) -> list[Region]:
        with self._mutex:
            return list(self._regions)

    def store_file_readers(self) -> list:
        """The open :class:`storage.storefile.StoreFileReader` of every live store file."""
        return [f.reader for r in self._regions for s in r.stores.values() for f in s.files]

    def wal_sync_count(self) -> int:
        """WAL fsyncs of the table's open regions since they opened (concurrent
        writers share them: group commit)."""
        return sum(r.wal_sync_count for r in self._regions)

    def read_counters(self, reset: bool = False) -> dict[str, int]:
        """Block read counters summed over the table's store files (blocks and
        bytes read, extra header reads, cache hits and misses, seeks)."""
        from ..storefile.counters import ReadCounters

        total = dict.fromkeys(ReadCounters.FIELDS, 0)
        for reader in self.store_file_readers():
            for name, value in reader.counters.snapshot().items():
                total[name] = total.get(name, 0) + value
            if reset:
                reader.counters.reset()
        return total

    # -- descriptor values (storage.table.descriptor) ----------------------
    def values(self) -> dict:
        """The table's descriptor values (its settings' ``extra``), a copy."""
        return dict(self.settings.extra)

    def set_values(self, updates: dict) -> dict:
        """Set (None: remove) descriptor values; the manifest is rewritten atomically.

        Needs the writer lock this table holds (a read-only table refuses);
        returns the new values.
        """
        from .descriptor import updated_manifest

        self._check_open()  # refuses a read-only table
        with self._mutex:
            manifest = updated_manifest(self._manifest, updates)
            manifest.save(self.fs)
            self._manifest = manifest
            self.settings = TableSettings(**manifest.settings)
            self._max_cell_size = cell_size_limit(self.settings.extra)
            return dict(self.settings.extra)

    def check(self) -> None:
        """Verify every invariant of the table's manifests and store files."""
        self._manifest.check()
        for r in self._regions:
            r.check()

    def close(self, why: str = "is closed", done=None) -> None:
        """Close the table: later calls raise ``StorageError("table <name> <why>")``.

        Scans already open finish on the files they leased; each file is
        closed when the last of them ends, and ``done`` (optional) runs then;
        the writer lock is released after ``done`` (at once without one).
        """
        with self.leases.lock:
            if self.closed:
                return
            self.closed = True
            self._closed_why = why
        # Every region closes and the lock is released even when one region
        # fails (a WAL that failed earlier): a failed table must not stay locked.
        files, errors = [], []
        for r in self._regions:
            got, error = r.detach()
            files += got
            if error is not None:
                errors.append(error)
        lock, self._lock = self._lock, None
        if lock is not None and done is not None:
            # The lock stays held until ``done`` has run: a dropped table's
            # trash folder (storage/table/trash.py) is known live by its lock.
            def done_then_release(done=done) -> None:
                try:
                    done()
                finally:
                    lock.release()

            done = done_then_release
        elif lock is not None:
            lock.release()
        self.leases.retire(files, lambda f: f.reader.close(), done)
        if errors:
            raise errors[0]

    def __repr__(self) -> str:
        return f"<Table {self.name!r} regions={len(self._regions)}>"
