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

A table holds two collaborators beside its regions (:mod:`storage.table.region_map`):
its writer (:mod:`storage.table.writes`: mutations checked, routed and logged, and
the upkeep they trigger), its point reads (:mod:`storage.table.gets`) and its scans
(:mod:`storage.table.scans`: views leased at one read point, the region runner's
batches, cell scanners, snapshots, counts).  The happybase scan arguments are
checked once for every front end (:class:`~storage.table.scan_api.ScanCalls`).
Splits and counters are the table's own.
"""

from __future__ import annotations

import logging
import struct
import threading
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa

from ..columns import parse_column
from ..errors import InvalidArgument, StorageError, check_bytes, clip
from ..mvcc import Mvcc
from ..region.load_journal import JOURNAL_DIR, pending_entries, recover
from ..read.scan_request import ScanRequest
from ..read.snapshot import ReadSnapshot
from ..region.manifest import RegionInfo, TableManifest
from ..region.pins import clean_archive, retire_dir
from ..region.reader_leases import Leases
from ..region.region import Region
from ..read.region_runner import TableScanner
from ..scanner.metrics import ScanMetrics
from ..schema import FamilySettings, TableSettings
from ..vfs.fs import FileSystem
from .arguments import INT64_MAX, INT64_MIN, check_counter
from .gets import PointReads
from .mutation_batch import Batch
from .region_map import RegionMap
from .scan_api import ScanCalls, request_of
from .scans import TableScans
from .writes import TableWriter

__all__ = ["Table"]

log = logging.getLogger("storage.table")


class Table(ScanCalls):
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
        self._map = RegionMap(name)
        self.closed = False
        self._closed_why = "is closed"
        self.mvcc = Mvcc()
        self.leases = Leases()
        self._writer = TableWriter(name, self.families_settings, self.settings, self._map, self._mutex,
                                   self._check_open, self._split_region)
        self._scans = TableScans(self, self._map, self.mvcc, self.leases, self._check_readable, self._check_family)
        self._point_reads = PointReads(self._map, self.mvcc, self.leases, self._check_readable,
                                       self._scans.check_columns)
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
            self._map.set(regions)

    @property
    def _regions(self) -> list[Region]:
        return self._map.regions

    def _region_for(self, row: bytes) -> Region:
        return self._map.region_for(row)

    def _regions_for_range(self, low: bytes, high: bytes | None) -> list[Region]:
        return self._map.regions_for_range(low, high)

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

    # -- checks ----------------------------------------------------------
    def _check_readable(self) -> None:
        if self.closed:
            raise StorageError(f"table {self.name} {self._closed_why}")

    def _check_open(self) -> None:
        self._check_readable()
        if self.read_only:
            raise StorageError(f"table {self.name} is open read-only")

    # -- writes (storage.table.writes) -------------------------------------
    def put(self, row: bytes, data: dict, timestamp: int | None = None, wal: bool = True) -> None:
        """Store ``data`` (``{b"cf:q": value}``) in ``row``, at ``timestamp`` (ms; now by default)."""
        self._writer.put(row, data, timestamp)

    def delete(self, row: bytes, columns: Iterable | None = None, timestamp: int | None = None, wal: bool = True) -> None:
        """Delete a whole row, or the given columns (``b"cf:q"``: all versions; ``b"cf"``: the family).

        With ``timestamp``, only versions at or before it are deleted.
        """
        self._writer.delete(row, columns, timestamp)

    def delete_version(self, row: bytes, column: bytes, timestamp: int) -> None:
        """Delete exactly one version of a column (HBase ``Delete.addColumn(f, q, ts)``)."""
        self._writer.delete_version(row, column, timestamp)

    def batch(self, timestamp: int | None = None, batch_size: int | None = None, transaction: bool = False, wal: bool = True) -> Batch:
        """A happybase-style batch: mutations are sent together (one WAL record per region)."""
        return Batch(self._writer, timestamp, batch_size, transaction)

    @property
    def maintenance_errors(self) -> int:
        """How many flushes, compactions or splits that writes triggered have failed
        (the writes themselves were acknowledged)."""
        return self._writer.maintenance_errors

    @property
    def last_maintenance_error(self) -> Exception | None:
        """The latest of those failures (None if there was none)."""
        return self._writer.last_maintenance_error

    def _check_family(self, family: bytes) -> None:
        self._writer.check_family(family)

    # -- counters ----------------------------------------------------------
    def counter_get(self, row: bytes, column: bytes) -> int:
        """The 8-byte big-endian counter in ``column`` (0 if unset), as HBase stores it."""
        value = self.row(row, columns=[column]).get(column)
        if value is None:
            return 0
        if len(value) != 8:
            raise InvalidArgument(f"column {column!r} of row {row!r} holds {len(value)} bytes, not an 8-byte counter")
        return struct.unpack(">q", value)[0]

    def counter_set(self, row: bytes, column: bytes, value: int = 0) -> None:
        """Store ``value`` as the 8-byte big-endian counter in ``column``."""
        self.put(row, {column: struct.pack(">q", check_counter(value, "counter value"))})

    def counter_inc(self, row: bytes, column: bytes, value: int = 1) -> int:
        """Atomically add ``value`` to the counter and return the new value.

        A result outside the signed 64-bit range HBase counters hold raises
        InvalidArgument and leaves the counter as it was.
        """
        check_counter(value, "counter increment")
        with self._mutex:
            current = self.counter_get(row, column)
            new = current + value
            if not INT64_MIN <= new <= INT64_MAX:
                raise InvalidArgument(
                    f"counter {clip(repr(column), 60)} of row {clip(repr(row), 60)} would overflow a signed 64-bit"
                    f" integer ({current} + {value})"
                )
            self.counter_set(row, column, new)
            return new

    def counter_dec(self, row: bytes, column: bytes, value: int = 1) -> int:
        """Atomically subtract ``value`` from the counter and return the new value."""
        return self.counter_inc(row, column, -value)

    # -- reads: rows (storage.table.gets), one cell's versions --
    def row(self, row: bytes, columns: Sequence[bytes] | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> dict:
        """One row as ``{b"cf:q": value}`` ({} if absent); a point read (:meth:`PointReads.row`)."""
        return self._point_reads.row(row, columns, timestamp, include_timestamp)

    def rows(self, rows: Sequence[bytes], columns: Sequence[bytes] | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> list[tuple[bytes, dict]]:
        """Several rows, as ``[(row, data)]`` for the rows that exist, in the order asked;
        a multi-get (:meth:`PointReads.rows`)."""
        return self._point_reads.rows(rows, columns, timestamp, include_timestamp)

    # -- scans (storage.table.scans) ---------------------------------------
    def run_scan(self, request: ScanRequest, metrics: ScanMetrics | None = None, *,
                 snapshot: ReadSnapshot | None = None) -> Iterator[pa.RecordBatch]:
        """The batches of a checked request (what ``scan_batches`` returns).

        The scan fixes its read point and leases its region views here, when
        called; ``snapshot`` (from :meth:`snapshot`) makes it read that
        snapshot's views instead, so several scans share one read point.
        """
        return self._scans.run_scan(request, metrics, snapshot=snapshot)

    def _scan_rows(self, request: ScanRequest, batch_size: int | None, *,
                   path: str = "batch") -> Iterator[tuple[bytes, dict]]:
        """``scan()``'s rows of a checked request: the batch kernels, or ``path="cell"``
        the cell-at-a-time scanners (same results)."""
        return self._scans.scan_rows(request, batch_size, path=path)

    def snapshot(self, row_start: bytes | None = None, row_stop: bytes | None = None) -> ReadSnapshot:
        """Leased views of the regions of ``[row_start, row_stop)`` at one read
        point, for several scans to share (``scan_batches(snapshot=...)``);
        close it when they are done."""
        return self._scans.snapshot(row_start, row_stop)

    def scanner(
        self,
        row_start: bytes | None = None,
        row_stop: bytes | None = None,
        row_prefix: bytes | None = None,
        columns: Sequence[bytes] | None = None,
        filter: Any = None,
        timestamp: int | None = None,
        time_range: tuple[int, int] | None = None,
        max_versions: int = 1,
        limit: int | None = None,
        reverse: bool = False,
        batch: int | None = None,
        caching: int = 100,
        max_result_size: int | None = None,
        metrics: ScanMetrics | None = None,
    ) -> TableScanner:
        """The cell-at-a-time scan: a :class:`storage.read.region_runner.TableScanner` whose
        ``next_rows(n)`` returns up to ``n`` results, each a list of one row's cells.

        This is the path of point reads, RPC-style scanners and callers that
        want cells as Python objects; ``scan_batches`` is the vectorized path.
        """
        request = request_of(locals())  # the arguments above that are request fields
        return self._scans.cell_scanner(request, batch, caching, max_result_size, metrics)

    def cell_scanner(self, request: ScanRequest, batch: int | None = None, caching: int = 100,
                     max_result_size: int | None = None, metrics: ScanMetrics | None = None) -> TableScanner:
        """The :class:`storage.read.region_runner.TableScanner` of a checked request (what :meth:`scanner` returns)."""
        return self._scans.cell_scanner(request, batch, caching, max_result_size, metrics)

    def count(self, row_start: bytes | None = None, row_stop: bytes | None = None, row_prefix: bytes | None = None) -> int:
        """The number of rows in ``[row_start, row_stop)`` (or with ``row_prefix``),
        as a full scan would see them.

        Where a region's store files are clean (no delete markers), its families
        have no TTL, its memstore holds nothing for the range and the files'
        row ranges do not overlap, the count comes from the version 2 block
        indexes without reading data blocks (see :mod:`storage.read.row_count`);
        otherwise the region is scanned with the row-counting filter.
        """
        return self._scans.count(row_start, row_stop, row_prefix)

    def cells(self, row: bytes, column: bytes, versions: int | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> list:
        """The versions of one cell, newest first (values, or (value, ts) pairs)."""
        family, qualifier = parse_column(column)
        if qualifier is None:
            raise InvalidArgument(f"column {column!r} needs a qualifier")
        if versions is not None and (not isinstance(versions, int) or versions < 1):
            raise InvalidArgument(f"versions must be a positive int, got {versions!r}")
        row = check_bytes(row, "row key")
        out = []
        for batch in self.scan_batches(
            row_start=row, row_stop=row + b"\x00", columns=[column], timestamp=timestamp,
            max_versions=versions or (1 << 31), output="cells",
        ):
            values = batch.column("value").to_pylist()
            stamps = batch.column("timestamp").to_pylist()
            out.extend(zip(values, stamps) if include_timestamp else values)
        return out

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

    # -- splits ----------------------------------------------------------
    def split(self, split_key: bytes | None = None) -> list[RegionInfo]:
        """Split the region holding ``split_key`` at it, or every region at its midkey."""
        self._check_open()
        # most of the memstores are written out before writes wait for the split
        self.flush()
        with self._mutex:
            if split_key is not None:
                split_key = check_bytes(split_key, "split_key")
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
            self._writer.configure(self.settings)
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
