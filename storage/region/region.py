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
import time
from typing import Iterable, Sequence


from .. import kernels
from ..cells import Cell
from ..errors import InvalidArgument, StorageError
from ..vfs.fs import FileSystem
from .load_journal import apply_entry
from .reader_leases import Leases
from ..memstore.write_buffer import MemStore
from ..mvcc import Mvcc
from .pins import pinned_paths, retire
from .manifest import REGION_MANIFEST, RegionInfo, RegionManifest
from ..schema import FamilySettings, TableSettings
from .compaction_rows import cell_sources, chunk_rows, read_parts, write_rows
from .store import Store, StoreFile, StoreView
from ..storefile import BlockCache
from ..wal.format import WalWriter, replay_wal

__all__ = ["Region", "RegionView", "chunk_bounds"]

_WAL_DIR = "wal"
_ROW = itemgetter(0)
_FAMILY = itemgetter(1)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _close_reader(f: StoreFile) -> None:
    f.reader.close()


class RegionView:
    """A consistent read view of a region: its key range and one StoreView per family.

    A view from :meth:`Region.view` holds leases on its store files and its
    memstore views; :meth:`release` gives them back (once; later calls do
    nothing).  Views built by hand (``leases`` None) hold nothing.
    """

    def __init__(self, info: RegionInfo, stores: dict[str, StoreView], table_name: str,
                 leases: Leases | None = None):
        self.info = info
        self.stores = stores
        self.table_name = table_name
        self._leases = leases
        self._released = False

    @property
    def read_point(self) -> int | None:
        """The read point of the view's memstores (None for a view without stores)."""
        for store in self.stores.values():
            return getattr(store.memstore, "read_point", None)
        return None

    def release(self) -> None:
        """Give back the view's file leases and memstore views."""
        if self._released:
            return
        self._released = True
        for store in self.stores.values():
            release = getattr(store.memstore, "release", None)
            if release is not None:
                release()
        if self._leases is not None:
            self._leases.release([f for store in self.stores.values() for f in store.files])

    @property
    def start(self) -> bytes:
        return self.info.start

    @property
    def end(self) -> bytes | None:
        return self.info.end


def chunk_bounds(views: Iterable[StoreView], start: bytes, stop: bytes | None, blocks_per_chunk: int = 16) -> list[bytes]:
    """Row keys that cut [start, stop) into chunks of about ``blocks_per_chunk`` blocks.

    Cuts come from the block index of the largest file, so each chunk reads a
    bounded number of blocks from every source.  Cuts are row keys, so no row
    straddles two chunks (resolution and filters need whole rows).
    """
    largest = None
    for view in views:
        for f in view.files:
            if largest is None or f.reader.block_count > largest.block_count:
                largest = f.reader
    if largest is None or largest.block_count <= blocks_per_chunk:
        return []
    cuts = []
    keys = largest.block_first_keys
    for i in range(blocks_per_chunk, len(keys), blocks_per_chunk):
        row = keys[i][0]
        if row > start and (stop is None or row < stop) and (not cuts or row > cuts[-1]):
            cuts.append(row)
    return cuts


class Region:
    """One region of a table; see the module docstring for its life cycle."""

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
        self.mvcc = mvcc if mvcc is not None else Mvcc()
        self.leases = leases if leases is not None else Leases()
        self._wal: WalWriter | None = None
        self._wal_name: str | None = None
        self._next_seq = 1
        self.manifest = RegionManifest(info.region_id)
        self.closed = False
        self.replayed_records = 0
        self.pending_loads: list = []  # (mode, RegionEntry) of committed bulk loads not yet rolled forward

    # -- life cycle ------------------------------------------------------
    def open(self) -> "Region":
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
        return self

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

    def _roll_wal(self, delete_old: bool) -> None:
        old = self._wal_files()
        if self._wal is not None:
            self._wal.close()
        name = f"{self._next_seq:020d}.wal"
        if name in old:  # never append to a file that may end in a torn record
            stamp, attempt = _now_ms(), 0
            name = f"{self._next_seq:020d}-{stamp}.wal"
            # An open within the same millisecond as a failed one finds that
            # one's (possibly torn) file under the same name.
            while name in old:
                attempt += 1
                name = f"{self._next_seq:020d}-{stamp}-{attempt}.wal"
        self._wal = WalWriter(self.fs, f"{_WAL_DIR}/{name}", sync=self.settings.wal_sync)
        self._wal_name = name
        self.fs.sync_dir(_WAL_DIR)
        if delete_old:
            stale = [entry for entry in old if entry != name]
            pinned = pinned_paths(self._table_fs) if stale else set()
            for entry in stale:
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
        with self._lock:
            if self.closed:
                return [], None
            self.closed = True
            wal, self._wal = self._wal, None
            with self.leases.lock:
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
        if self.read_only:
            raise StorageError(f"region {self.info.region_id} of {self.table_name} is open read-only")
        if self.closed:
            raise StorageError(f"region {self.info.region_id} of {self.table_name} is closed")

    def _apply_to_memstores(self, cells: Sequence[Cell], seq: int) -> None:
        by_family: dict[bytes, list] = {}
        for cell in cells:
            by_family.setdefault(cell[1], []).append(cell)
        for family, group in by_family.items():
            store = self.stores.get(family.decode("ascii", "replace"))
            if store is None:
                raise InvalidArgument(f"table {self.table_name} has no column family {family!r}")
            store.memstore.add_many(group, trusted=True, seq=seq)

    def mutate(self, cells: Sequence[Cell]) -> int:
        """Log and apply one atomic group of cells; returns its sequence id."""
        with self._lock:
            self._check_writable()
            rows = list(map(_ROW, cells))
            low, high = min(rows), max(rows)
            if not (self.info.contains(low) and self.info.contains(high)):
                bad = low if not self.info.contains(low) else high
                raise InvalidArgument(f"row {bad!r} is outside region {self.info.region_id}")
            for family in set(map(_FAMILY, cells)):
                if family.decode("ascii", "replace") not in self.stores:
                    raise InvalidArgument(f"table {self.table_name} has no column family {family!r}")
            seq = self.mvcc.begin()
            try:
                self._wal.append(seq, cells)
                self._next_seq = seq + 1
                self._apply_to_memstores(cells, seq)
            finally:
                self.mvcc.complete(seq)  # readers opened from now on see the whole group
            return seq

    @property
    def memstore_size(self) -> int:
        return sum(s.memstore.heap_size for s in self.stores.values())

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

    def flush(self) -> bool:
        """Write every non-empty memstore to a store file; True if anything was written."""
        with self._lock:
            self._check_writable()
            dirty = [s for s in self.stores.values() if s.memstore.cell_count]
            if not dirty:
                return False
            flushed_seq = self._next_seq - 1
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
                    store.memstore.snapshot()
                    batch = store.memstore.snapshot_batch()
                    name = new_manifest.new_file_name()
                    writer = store.new_writer(name)
                    try:
                        writer.append_batch(batch)
                        writer.finish(max_seq_id=flushed_seq)
                    except BaseException:
                        writer.abandon()
                        raise
                    new_manifest.files.setdefault(store.family, []).append(name)
                    written.append((store, store.open_reader(name)))
                new_manifest.save(self.fs)
            except BaseException:
                for store in dirty:
                    store.memstore.restore_snapshot()
                raise
            with self.leases.lock:  # a view sees the snapshot or the new file, never both
                self.manifest = new_manifest
                for store, sf in written:
                    store.replace_files((sf,) + store.files)
                    store.memstore.clear_snapshot()
            self._roll_wal(delete_old=True)
            return True

    # -- compaction ------------------------------------------------------
    def compact(self, major: bool = True, families: Sequence[str] | None = None) -> int:
        """Merge store files; returns how many files were merged away.

        Minor (major=False): merge the newest ``compaction_max_files`` files of
        each store that has at least ``compaction_threshold`` of them, keeping
        every version and delete marker.  Major: merge all files of each store,
        dropping deleted cells, the markers, cells past the TTL and versions
        past max_versions.
        """
        with self._lock:
            self._check_writable()
            merged = 0
            for name in families or list(self.stores):
                store = self.stores[name]
                files = store.files
                if major:
                    chosen = files
                    if not chosen:
                        continue
                else:
                    if len(files) < self.settings.compaction_threshold:
                        continue
                    chosen = files[: self.settings.compaction_max_files]
                merged += self._compact_store(store, chosen, major)
            return merged

    def _compact_store(self, store: Store, chosen: tuple[StoreFile, ...], major: bool) -> int:
        view = StoreView(store.family, store.settings, MemStore().view(), chosen)
        new_manifest = RegionManifest(
            self.manifest.region_id,
            {k: list(v) for k, v in self.manifest.files.items()},
            self.manifest.flushed_seq_id,
            self.manifest.next_file_id,
            self.manifest.generation,
        )
        name = new_manifest.new_file_name()
        writer = store.new_writer(name)
        ttl_cutoff = None
        if major and store.settings.ttl is not None:
            ttl_cutoff = _now_ms() - store.settings.ttl * 1000
        try:
            max_seq = max(f.reader.info.max_seq_id for f in chosen)
            cuts = chunk_bounds([view], b"", None)
            bounds = [b""] + cuts + [None]
            # dense files with nothing to resolve are merged as rows (storage/region/compaction_rows.py)
            as_rows = ttl_cutoff is None and writer.format_version >= 2
            for lo, hi in zip(bounds, bounds[1:]):
                parts = read_parts(chosen, lo, hi)
                rows = chunk_rows(parts) if as_rows else None
                if rows is not None:
                    write_rows(writer, *rows)
                    continue
                sources = [t for t in cell_sources(parts) if t.num_rows]
                if not sources:
                    continue
                cells = kernels.merge_sources(sources)
                if major:
                    cells = kernels.resolve(
                        cells, max_versions=store.settings.max_versions, ttl_cutoff=ttl_cutoff
                    )
                else:
                    cells = kernels.resolve(cells, keep_deletes=True)
                if cells.num_rows:
                    writer.append_batch(cells)
            info = writer.finish(max_seq_id=max_seq)
        except BaseException:
            writer.abandon()
            raise
        chosen_names = {f.name for f in chosen}
        old = new_manifest.files.get(store.family, [])
        # Files are listed oldest first; the merged file takes the place of the
        # newest merged file so age order among the rest is kept.
        positions = [i for i, n in enumerate(old) if n in chosen_names]
        keep = [n for n in old if n not in chosen_names]
        insert_at = positions[-1] - (len(positions) - 1)
        if info.cell_count:
            keep.insert(insert_at, name)
        new_manifest.files[store.family] = keep
        new_manifest.save(self.fs)
        new_reader = store.open_reader(name) if info.cell_count else None
        newest_first = []
        for n in reversed(keep):
            if n == name:
                newest_first.append(new_reader)
            else:
                newest_first.append(next(f for f in store.files if f.name == n))
        with self.leases.lock:
            self.manifest = new_manifest
            store.replace_files(tuple(newest_first))
        if not info.cell_count:
            self.fs.delete(store.path(name), missing_ok=True)
        # Scans opened before the swap keep reading the merged files; each is
        # closed and deleted (or archived, if pinned) when the last one ends.
        self.leases.retire(chosen, lambda f: self._retire_file(store, f))
        return len(chosen)

    def _retire_file(self, store: Store, f: StoreFile) -> None:
        f.reader.close()
        retire(self._table_fs, self._table_path(store.path(f.name)))

    # -- reads -----------------------------------------------------------
    def view(self, read_point: int | None = None) -> RegionView:
        """A read view at ``read_point`` (default: the table's read point now)
        that later writes, flushes, compactions and splits do not change.

        The view leases its store files; call :meth:`RegionView.release`.
        A caller capturing views of several regions at one read point holds
        ``leases.lock`` around the calls (see :mod:`storage.region.reader_leases`).
        """
        with self.leases.lock:
            if self.closed:
                raise StorageError(f"region {self.info.region_id} of {self.table_name} is closed")
            point = self.mvcc.read_point if read_point is None else read_point
            stores = {n: s.view(point) for n, s in self.stores.items()}
            self.leases.acquire([f for v in stores.values() for f in v.files])
        return RegionView(self.info, stores, self.table_name, self.leases)

    @staticmethod
    def cell_scanner_of(view: RegionView, spec, metrics=None, low: bytes = b"", high: bytes | None = None):
        """A cell-at-a-time :class:`storage.scanner.RegionScanner` over ``[low, high)``
        of a region view (the caller releases the view after the scanner)."""
        from ..scanner import RegionScanner, StoreScanner

        read_spec = spec.with_filter_columns()
        wanted = read_spec.families()
        stores = []
        for name, sview in view.stores.items():
            family = name.encode()
            if wanted is not None and family not in wanted:
                continue
            stores.append(
                StoreScanner(
                    sview.scanners(metrics),
                    family,
                    read_spec,
                    max_versions=sview.settings.max_versions,
                    ttl=sview.settings.ttl,
                    metrics=metrics,
                )
            )
        start = max(low, view.info.start)
        end = view.info.end
        if high is not None and (end is None or high < end):
            end = high
        return RegionScanner(stores, spec, start_row=start, end_row=end, metrics=metrics, shared_filter=True)

    def get(self, row: bytes, spec) -> list[Cell]:
        """The visible cells of one row (a point read), in cell order.

        Each source hands over the row's cells directly (memstore lookup;
        bloom filter, index bisect and block bisect in store files).  A row
        found in one store file that holds one version per column and no
        delete markers needs no resolution; anything else goes through the
        same :class:`StoreScanner` rules as scans.
        """
        view = self.view()
        try:
            return self.get_of(view, row, spec)
        finally:
            view.release()

    @staticmethod
    def get_of(view: RegionView, row: bytes, spec) -> list[Cell]:
        """The visible cells of ``row`` in a region view (see :meth:`get`)."""
        from ..scanner import ListScanner, StoreScanner

        wanted = spec.families()
        out: list[Cell] = []
        for name in sorted(view.stores):
            family = name.encode()
            if wanted is not None and family not in wanted:
                continue
            sview = view.stores[name]
            settings = sview.settings
            mem = sview.memstore.row_cells(row)
            found = [(f, f.reader.row_cells(row)) for f in sview.files]
            hits = [(f, cells) for f, cells in found if cells]
            if not mem and not hits:
                continue
            if not mem and len(hits) == 1 and not hits[0][0].reader.info.needs_resolution and settings.ttl is None:
                qualifiers = spec.qualifiers(family)
                lo, hi = spec.min_timestamp, spec.max_timestamp
                out.extend(
                    c for c in hits[0][1] if (qualifiers is None or c[2] in qualifiers) and lo <= c[3] < hi
                )
                continue
            sources = [ListScanner(mem)] + [ListScanner(cells) for _, cells in found]
            store = StoreScanner(sources, family, spec, max_versions=settings.max_versions, ttl=settings.ttl)
            out.extend(store.read_row() or ())
            store.close()
        return out

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
        daughter = Region(table_fs, self.table_name, info, self.families, self.settings, None)
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

    def check(self) -> None:
        """Verify the region's invariants: manifest files exist and pass their checks."""
        for store in self.stores.values():
            for f in store.files:
                f.reader.check()
