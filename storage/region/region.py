"""A region: the cells of one key range [start, end) of a table.

Write path: a group of mutations gets the next sequence id, is appended to
the region's write-ahead log as one record (synced by the table's policy),
then added to the memstores.  A flush writes each family's memstore to a new
store file, then records the files and the flushed sequence id in the region
manifest with one atomic replace, then starts a new WAL and drops the old
ones.  On open, WAL records newer than the flushed sequence id are replayed.

Store files not named in the manifest are leftovers of a flush or compaction
that crashed before its manifest commit; a writer deletes them on open.

Sequence ids come from the table's :class:`storage.mvcc.Mvcc`, so one read
point orders writes across all regions.  A reader's :meth:`Region.view`
leases the store files it will read (:mod:`storage.region.reader_leases`); a compaction
or close retires files, and a retired file is closed and deleted once the
last view holding it is released.
"""

from __future__ import annotations

import threading
from operator import itemgetter
from typing import Sequence

from .. import clock
from ..cells import Cell
from ..errors import CorruptionError, InvalidArgument, StorageError
from ..mvcc import Mvcc, views_at_read_point
from ..schema import FamilySettings, TableSettings, no_such_family
from ..storefile import BlockCache
from ..vfs.fs import FileSystem
from ..wal.open_writer import open_wal_writer
from ..wal.replay import replay_wal
from ..wal.writer import WalWriter
from . import daughters, reads
from .compaction import chosen_files, merge_store_files
from .flush_rows import FLUSH_PART_CELLS, write_snapshot
from .load_journal import apply_entry
from .manifest import REGION_MANIFEST, RegionInfo, RegionManifest
from .pins import pinned_paths, retire
from .read_state import RegionReadState, StoreState
from .reader_leases import Leases
from .store import Store, StoreFile
from .view import RegionView

__all__ = ["Region"]


_WAL_DIR = "wal"


_ROW = itemgetter(0)


_FAMILY = itemgetter(1)


def _close_reader(f: StoreFile) -> None:
    f.reader.close()


class Region:
    """One region of a table; see the module docstring for its life cycle.

    Its collaborators: :mod:`~storage.region.reads` reads a view of it,
    :mod:`~storage.region.compaction` chooses and merges store files,
    :mod:`~storage.region.daughters` writes a split's daughter files.
    """

    cell_scanner_of = staticmethod(reads.cell_scanner_of)
    get_of = staticmethod(reads.get_of)
    rows_of = staticmethod(reads.rows_of)

    def __init__(
        self,
        table_fs: FileSystem,
        table_name: str,
        info: RegionInfo,
        families: dict[str, FamilySettings],
        settings: TableSettings,
        cache: BlockCache | None,
        read_only: bool = False,
        mvcc: Mvcc | None = None,
        leases: Leases | None = None,
    ):
        self.table_name = table_name
        self.info = info
        self.families = families
        self.settings = settings
        self.read_only = read_only
        self._table_fs = table_fs
        self.fs = table_fs.sub(f"regions/{info.region_id}")
        self.stores = {name: Store(self.fs, name, fam, cache) for name, fam in families.items()}
        self._lock = threading.RLock()
        self._maintenance = threading.RLock()  # taken before _lock, never after it
        self.mvcc = mvcc if mvcc is not None else Mvcc()
        self.leases = leases if leases is not None else Leases()
        self._wal: WalWriter | None = None
        self._wal_name: str | None = None
        self._next_seq = 1
        self.manifest = RegionManifest(info.region_id)
        self.closed = False
        self._old_wal_syncs = 0  # fsyncs of the WAL files this region rolled away from
        self.replayed_records = 0
        self.pending_loads: list = []  # (mode, RegionEntry) of committed bulk loads not yet rolled forward
        self.offline: CorruptionError | None = None  # why the region did not open (see open())
        # what point reads read (storage/region/read_state.py): replaced, never changed, by
        # _publish; None while the region is not open for reads
        self.read_state: RegionReadState | None = None

    # -- life cycle ------------------------------------------------------
    def open(self) -> "Region":
        """Open the region: its manifest, store files and WAL replay.

        Damage found on the way (:class:`CorruptionError`: a WAL record that
        fails its checks, a damaged region manifest, a store file whose
        trailer, index or bloom filter does not decode) does not escape: the
        region stays offline (:attr:`offline`), so the rest of its table opens
        and reads.  Reads and writes of an offline region raise the error;
        nothing of it is changed, deleted or rolled, so the damaged file is
        there to check and repair (``regionscan wal check|repair``).
        """
        try:
            return self._open()
        except CorruptionError as exc:
            self._go_offline(exc)
            return self

    def _go_offline(self, exc: CorruptionError) -> None:
        """Keep the region closed to reads and writes with ``exc`` as the reason."""
        self.read_state = None
        for store in self.stores.values():
            for f in store.files:
                f.reader.close()
            store.replace_files(())
            store.memstore = type(store.memstore)()
        if self._wal is not None:  # the WAL is rolled last, after every check: none open yet, in practice
            self._wal.close()
            self._wal = None
        in_wal = "/wal/" in (exc.path or "") or ".wal/" in (exc.path or "")
        hint = ""
        if in_wal:
            hint = " (`regionscan wal check` reports it, `regionscan wal repair` keeps the intact records)"
        self.offline = CorruptionError(
            f"region {self.info.region_id} of table {self.table_name} is offline: {exc}{hint}"
        )
        self.offline.path, self.offline.offset = exc.path, exc.offset

    def offline_error(self) -> CorruptionError:
        """A fresh copy of the reason the region is offline (each raise gets its own traceback)."""
        error = CorruptionError(str(self.offline))
        error.path, error.offset = self.offline.path, self.offline.offset
        return error

    def _open(self) -> "Region":
        if not self.read_only:
            self.fs.makedirs(_WAL_DIR)
        if self.fs.exists(REGION_MANIFEST):
            self.manifest = RegionManifest.load(self.fs)
        elif not self.read_only:
            self.manifest.save(self.fs)
        locations: dict[tuple[str, str], tuple[FileSystem, str]] = {}
        for mode, entry in self.pending_loads:
            # read-only: see the committed load as it will be once rolled forward
            self.manifest = apply_entry(self.manifest, mode, entry)
            for family, name, staged in entry.moves:
                if not self.fs.exists(f"{family}/{name}"):
                    locations[(family, name)] = (self._table_fs, staged)
        for name, store in self.stores.items():
            store.open_files(self.manifest.files.get(name, []), locations)
        if not self.read_only:
            self._delete_orphan_files()
        self._replay()
        if not self.read_only:
            # Old WALs are needed until their replayed edits are flushed; with
            # nothing replayed they are dead, and each open would add one more.
            replayed = any(s.memstore.cell_count for s in self.stores.values())
            self._roll_wal(delete_old=not replayed)
        with self._lock, self.leases.lock:
            self._publish()
        return self

    def _publish(self) -> None:
        """Make :attr:`read_state` the region's stores as they are now.  The caller
        holds ``_lock`` (no write changes a memstore meanwhile) and ``leases.lock``
        (no file swap does), and calls it after every change of files and before
        a write that fills an empty memstore completes."""
        self.read_state = RegionReadState(self.info, tuple(
            StoreState(name, store.settings, store.files, store.memstore.cell_count == 0)
            for name, store in sorted(self.stores.items())
        ))

    def _delete_orphan_files(self) -> None:
        for name, store in self.stores.items():
            live = set(self.manifest.files.get(name, []))
            for entry in self.fs.listdir(name):
                if entry not in live:
                    self.fs.delete(f"{name}/{entry}", missing_ok=True)
        self.fs.remove_temporaries("")

    def _wal_files(self) -> list[str]:
        return [n for n in self.fs.listdir(_WAL_DIR) if n.endswith(".wal")]

    def _replay(self) -> None:
        max_seq = self.manifest.flushed_seq_id
        for name in self._wal_files():
            replay = replay_wal(self.fs, f"{_WAL_DIR}/{name}")
            for seq_id, cells in replay.records:
                if seq_id <= self.manifest.flushed_seq_id:
                    continue
                self._apply_to_memstores(cells, seq_id)
                self.replayed_records += 1
                max_seq = max(max_seq, seq_id)
        self._next_seq = max_seq + 1
        if self.mvcc.last_seq < max_seq:
            self.mvcc.advance_to(max_seq)

    def _roll_wal(self, delete_old: bool) -> list[str]:
        """Start a new WAL file; the older ones are retired now with
        ``delete_old``, else returned for :meth:`_retire_wals` once their
        edits are in store files."""
        old = self._wal_files()
        if self._wal is not None and not self._wal.closed:  # closed: an earlier roll failed after closing it
            self._wal.close()
            self._old_wal_syncs += self._wal.sync_count
        name = f"{self._next_seq:020d}.wal"
        if name in old:  # never append to a file that may end in a torn record
            stamp, attempt = clock.now_ms(), 0
            name = f"{self._next_seq:020d}-{stamp}.wal"
            # An open within the same millisecond as a failed one finds that
            # one's (possibly torn) file under the same name.
            while name in old:
                attempt += 1
                name = f"{self._next_seq:020d}-{stamp}-{attempt}.wal"
        self._wal = open_wal_writer(self.fs, f"{_WAL_DIR}/{name}", sync=self.settings.wal_sync)
        self._wal_name = name
        # No directory sync here: the new file does not exist until its first record, and the
        # writer's _create syncs the directory then (unless the policy is "none"), before that
        # record can be acknowledged.  A sync here made nothing durable and cost an fsync a roll.
        stale = [entry for entry in old if entry != name]
        if not delete_old:
            return stale
        self._retire_wals(stale)
        return []

    def _retire_wals(self, names: list[str]) -> None:
        pinned = pinned_paths(self._table_fs) if names else set()
        for entry in names:
            retire(self._table_fs, self._table_path(f"{_WAL_DIR}/{entry}"), pinned)

    def close(self, done=None) -> None:
        """Close the region: its WAL now, each store file once no view leases it.

        ``done`` (optional) runs once every store file is closed.  An error
        closing the WAL (one that failed earlier) is raised after the files
        are retired: a failed region still lets its files go.
        """
        files, error = self.detach()
        self.leases.retire(files, _close_reader, done)
        if error is not None:
            raise error

    def detach(self) -> tuple[list[StoreFile], Exception | None]:
        """Mark the region closed, close its WAL and hand over its store files
        (the caller retires them through :attr:`leases`), with the error the
        WAL's close raised, if any."""
        with self._maintenance, self._lock:
            if self.closed:
                return [], None
            self.closed = True
            wal, self._wal = self._wal, None
            with self.leases.lock:
                self.read_state = None
                files = [f for store in self.stores.values() for f in store.files]
                for store in self.stores.values():
                    store.replace_files(())
        error = None
        if wal is not None:
            try:
                wal.close()  # raises if the WAL failed earlier: the files go all the same
            except Exception as exc:
                error = exc
        return files, error

    def _table_path(self, path: str) -> str:
        """``path`` (relative to the region) relative to the table directory, as pins name files."""
        return f"regions/{self.info.region_id}/{path}"

    # -- writes ----------------------------------------------------------
    def _check_writable(self) -> None:
        if self.offline is not None:
            raise self.offline_error()
        if self.read_only:
            raise StorageError(f"region {self.info.region_id} of {self.table_name} is open read-only")
        if self.closed:
            raise StorageError(f"region {self.info.region_id} of {self.table_name} is closed")

    def _apply_to_memstores(self, cells: Sequence[Cell], seq: int) -> None:
        families = set(map(_FAMILY, cells))
        if len(families) == 1 and isinstance(cells, list):
            by_family = {families.pop(): cells}  # one family (most writes): no grouping pass per cell
        else:
            by_family = {}
            for cell in cells:
                by_family.setdefault(cell[1], []).append(cell)
        state = self.read_state
        try:
            for family, group in by_family.items():
                store = self.stores.get(family.decode("ascii", "replace"))
                if store is None:
                    raise no_such_family(self.table_name, family, self.stores)
                store.memstore.add_many(group, trusted=True, seq=seq)
        finally:
            if state is not None and not state.empty_families.isdisjoint(by_family):
                # the first cells of an empty memstore: point reads must see them from
                # now on, before this write is acknowledged
                with self.leases.lock:
                    self._publish()

    def mutate(self, cells: Sequence[Cell]) -> int:
        """Log and apply one atomic group of cells; returns its sequence id."""
        pending = self.mutate_begin(cells)
        self.mutate_finish(pending)
        return pending[0]

    def mutate_begin(self, cells: Sequence[Cell]) -> tuple:
        """Log and apply one atomic group of cells without waiting for the log's
        sync; returns a ticket for :meth:`mutate_finish`, which the caller must
        call (it makes the group durable and visible).

        The sync comes after the region's lock is released, so writers of
        several threads share one fsync (group commit, as HBase's WAL sync);
        the group stays invisible to readers until it is durable, because its
        sequence id completes only after the sync.
        """
        with self._lock:
            self._check_writable()
            rows = list(map(_ROW, cells))
            low, high = min(rows), max(rows)
            if not (self.info.contains(low) and self.info.contains(high)):
                bad = low if not self.info.contains(low) else high
                raise InvalidArgument(f"row {bad!r} is outside region {self.info.region_id}")
            for family in set(map(_FAMILY, cells)):
                if family.decode("ascii", "replace") not in self.stores:
                    raise no_such_family(self.table_name, family, self.stores)
            wal = self._wal
            if not wal.usable:
                # A write or sync of this WAL failed (a full disk): start a new
                # file, so writes resume once the cause is gone; the old one
                # keeps its records for replay until a flush retires it.  If
                # the new file cannot be made either, this write fails here,
                # before anything of it is logged or applied.
                self._roll_wal(delete_old=False)
                wal = self._wal
            seq = self.mvcc.begin()
            try:
                wal.append(seq, cells, defer_sync=True)
                end = wal.size
                self._next_seq = seq + 1
                self._apply_to_memstores(cells, seq)
            except BaseException:
                self.mvcc.complete(seq)
                raise
            return seq, wal, end

    def mutate_finish(self, ticket: tuple) -> None:
        """Make a group from :meth:`mutate_begin` durable (under the ``each``
        policy: one fsync may cover other writers' groups too) and visible."""
        seq, wal, end = ticket
        try:
            if wal.policy.mode == "each":
                wal.sync_to(end)
        except BaseException:
            self.mvcc.complete(seq)  # a failed sync: the read point must not stall behind it
            raise
        # readers opened from now on see the whole group, this writer included
        self.mvcc.complete_and_wait(seq)

    @property
    def wal_sync_count(self) -> int:
        """How many times this region's WAL files were fsynced since it opened."""
        return self._old_wal_syncs + (self._wal.sync_count if self._wal is not None else 0)

    @property
    def memstore_size(self) -> int:
        return sum(s.memstore.heap_size for s in self.stores.values())

    @property
    def snapshot_size(self) -> int:
        """Bytes held by the memstore snapshots a flush is writing out."""
        return sum(s.memstore.snapshot_heap_size for s in self.stores.values())

    @property
    def size(self) -> int:
        """Bytes of the region's store files."""
        return sum(s.size for s in self.stores.values())

    def needs_flush(self) -> bool:
        return self.memstore_size >= self.settings.memstore_flush_size

    def needs_compaction(self) -> bool:
        return any(len(s.files) >= self.settings.compaction_threshold for s in self.stores.values())

    def needs_split(self) -> bool:
        return self.size >= self.settings.max_filesize

    def maintenance(self) -> threading.RLock:
        """The lock that flushes, compactions, splits and close take in turn;
        writes never wait for it (only for the short swap steps of a flush)."""
        return self._maintenance

    def flush(self) -> bool:
        """Write every non-empty memstore to a store file; True if anything was written.

        An offline region holds nothing in memory: nothing to write."""
        if self.offline is not None:
            return False
        with self._maintenance:
            return self._flush()

    def flush_if_due(self, wait: bool) -> bool:
        """The flush a write triggers: none on a closed region or below the
        threshold; with ``wait`` False, none while another thread flushes or
        compacts this region (that one's flush takes the cells written meanwhile
        soon after, as HBase's flusher queue does)."""
        if not self._maintenance.acquire(blocking=wait):
            return False
        try:
            if self.closed or not self.needs_flush():
                return False
            return self._flush()
        finally:
            self._maintenance.release()

    def _flush(self) -> bool:
        # Writes wait only while the memstores are snapshotted and the WAL
        # rolled; the store files are written with the region open for writes
        # (into the new active maps and the new WAL).
        with self._lock:
            self._check_writable()
            dirty = [s for s in self.stores.values() if s.memstore.cell_count]
            if not dirty:
                return False
            flushed_seq = self._next_seq - 1
            for store in dirty:
                store.memstore.snapshot()
            try:
                retired_wals = self._roll_wal(delete_old=False)
            except BaseException:
                for store in dirty:
                    store.memstore.restore_snapshot()
                raise
        new_manifest = RegionManifest(
            self.manifest.region_id,
            {k: list(v) for k, v in self.manifest.files.items()},
            flushed_seq,
            self.manifest.next_file_id,
            self.manifest.generation,
        )
        written: list[tuple[Store, StoreFile]] = []
        try:
            for store in dirty:
                name = new_manifest.new_file_name()
                writer = store.new_writer(name)
                try:
                    # in parts: no copy of the whole snapshot at once; clean rows go in as rows
                    # (row groups, as a compaction writes them), the rest as cells
                    write_snapshot(writer, store.memstore.snapshot_batches(FLUSH_PART_CELLS), store.flush_max_versions())
                    writer.finish(max_seq_id=flushed_seq)
                except BaseException:
                    writer.abandon()
                    raise
                new_manifest.files.setdefault(store.family, []).append(name)
                written.append((store, store.open_reader(name)))
            new_manifest.save(self.fs)
        except BaseException:
            # the rolled-away WALs stay: they still hold the snapshot's edits
            for store in dirty:
                store.memstore.restore_snapshot()
            raise
        # a view sees the snapshot or the new file, never both; the write lock keeps
        # writes out while the read state records which memstores are empty
        with self._lock, self.leases.lock:
            self.manifest = new_manifest
            for store, sf in written:
                store.replace_files((sf,) + store.files)
                store.memstore.clear_snapshot()
            if not self.closed:
                self._publish()
        self._retire_wals(retired_wals)
        return True

    def check(self) -> None:
        """Verify the region's invariants: manifest files exist and pass their checks
        (an offline region raises why it is offline)."""
        if self.offline is not None:
            raise self.offline_error()
        for store in self.stores.values():
            for f in store.files:
                f.reader.check()

    # -- reads -----------------------------------------------------------
    def view(self, read_point: int | None = None) -> RegionView:
        """A read view at ``read_point`` (default: the table's read point now)
        that later writes, flushes, compactions and splits do not change.

        The view leases its store files; call :meth:`RegionView.release`.
        At a given ``read_point`` it may raise
        :class:`~storage.mvcc.ReadPointTooOld` (see
        :func:`~storage.mvcc.views_at_read_point`, which callers use).
        A caller capturing views of several regions at one read point holds
        ``leases.lock`` around the calls (see :mod:`storage.region.reader_leases`).
        """
        if self.offline is not None:  # it did not open: see Region.open
            raise self.offline_error()
        if read_point is None:
            return views_at_read_point(self.leases.lock, self.mvcc, self.view)
        with self.leases.lock:
            if self.closed:
                raise StorageError(f"region {self.info.region_id} of {self.table_name} is closed")
            point = read_point
            stores = {}
            try:
                for name, store in self.stores.items():
                    stores[name] = store.view(point)
            except BaseException:
                for opened in stores.values():
                    opened.memstore.release()
                raise
            self.leases.acquire([f for v in stores.values() for f in v.files])
        return RegionView(self.info, stores, self.table_name, self.leases)

    def get(self, row: bytes, spec) -> list[Cell]:
        """The visible cells of one row (a point read), in cell order: :func:`~storage.region.reads.get_of`
        of a view taken now."""
        view = self.view()
        try:
            return reads.get_of(view, row, spec)
        finally:
            view.release()

    # -- compaction ------------------------------------------------------
    def compact(self, major: bool = True, families: Sequence[str] | None = None) -> int:
        """Merge store files; returns how many files were merged away.

        Minor (major=False): merge the newest ``compaction_max_files`` files of
        each store that has at least ``compaction_threshold`` of them, keeping
        every version and delete marker.  Major: merge all files of each store,
        dropping deleted cells, the markers, cells past the TTL and versions
        past max_versions; a family with ``keep_deleted_cells`` keeps deleted
        cells and markers (see :func:`storage.kernels.resolve`).
        """
        if self.offline is not None:
            return 0  # it did not open (Region.open): its files stay as they are
        # writes go on meanwhile: a compaction reads only store files
        with self._maintenance:
            self._check_writable()
            merged = 0
            for name in families or list(self.stores):
                store = self.stores[name]
                chosen = chosen_files(store.files, major, self.settings)
                if chosen:
                    merged += self._compact_store(store, chosen, major)
            return merged

    def compact_if_due(self) -> int:
        """The minor compaction a flush triggers: none while another thread
        flushes or compacts the region, or once it is closed."""
        if not self._maintenance.acquire(blocking=False):
            return 0
        try:
            if self.closed or not self.needs_compaction():
                return 0
            return self.compact(major=False)
        finally:
            self._maintenance.release()

    def _compact_store(self, store: Store, chosen: tuple[StoreFile, ...], major: bool) -> int:
        merged = merge_store_files(store, chosen, major, self.manifest)
        merged.manifest.save(self.fs)
        new_reader = store.open_reader(merged.name) if merged.cell_count else None
        newest_first = []
        for n in reversed(merged.manifest.files[store.family]):
            if n == merged.name:
                newest_first.append(new_reader)
            else:
                newest_first.append(next(f for f in store.files if f.name == n))
        with self._lock, self.leases.lock:
            self.manifest = merged.manifest
            store.replace_files(tuple(newest_first))
            if not self.closed:
                self._publish()
        if not merged.cell_count:
            self.fs.delete(store.path(merged.name), missing_ok=True)
        # Scans opened before the swap keep reading the merged files; each is
        # closed and deleted (or archived, if pinned) when the last one ends.
        self.leases.retire(chosen, lambda f: self._retire_file(store, f))
        return len(chosen)

    def _retire_file(self, store: Store, f: StoreFile) -> None:
        f.reader.close()
        retire(self._table_fs, self._table_path(store.path(f.name)))

    # -- splits ----------------------------------------------------------
    def midkey(self) -> bytes | None:
        """A row key near the middle of the region's data, for splitting."""
        return daughters.midkey(self.stores.values(), self.info)

    def write_daughter(self, info: RegionInfo, table_fs: FileSystem) -> None:
        """Write the cells of ``info``'s range into a new region directory.

        Each family's files are merged into one (a minor-compaction merge that
        keeps versions and markers).  The daughter's manifest carries the
        parent's flushed sequence id, so its sequence ids keep increasing.
        """
        if self.offline is not None:  # its data could not be read: a split would drop it
            raise self.offline_error()
        daughter = Region(table_fs, self.table_name, info, self.families, self.settings, None)
        daughter.fs.makedirs("")
        manifest = RegionManifest(info.region_id, {}, self.manifest.flushed_seq_id, 1)
        view = self.view()
        try:
            daughters.write_daughter_files(view, daughter.stores, manifest, info, self.manifest.flushed_seq_id)
        finally:
            view.release()
        manifest.save(daughter.fs)
