"""Compacting a region's stores: choosing the files, rewriting them row-wise
into one, swapping them in and retiring the inputs behind their readers."""

from __future__ import annotations

import time
from typing import Sequence

from .. import kernels
from ..memstore.write_buffer import MemStore
from .compaction_rows import cell_sources, chunk_rows, read_parts, write_rows
from .row_resolve import compaction_rows, write_resolved
from .manifest import RegionManifest
from .pins import retire
from .store import Store, StoreFile, StoreView
from .view import chunk_bounds


def _now_ms() -> int:
    return int(time.time() * 1000)


class RegionCompaction:
    """Minor and major compactions of a :class:`~storage.region.region.Region`."""

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
            # a major compaction keeping one version writes each row's newest visible cells
            keeping = store.settings.keep_deleted_cells != "FALSE"
            # (a family keeping deleted cells keeps markers and deleted versions: the cell path)
            resolve_rows = major and writer.format_version >= 2 and store.settings.max_versions == 1 and not keeping
            for lo, hi in zip(bounds, bounds[1:]):
                parts = read_parts(chosen, lo, hi)
                rows = chunk_rows(parts) if as_rows else None
                if rows is not None:
                    write_rows(writer, *rows)
                    continue
                if resolve_rows:
                    # files sharing rows or holding markers: resolved as rows (storage/region/row_resolve.py)
                    # one version kept: with min_versions the newest one outlives the TTL
                    resolved = compaction_rows(parts, None if store.settings.min_versions else ttl_cutoff)
                    if resolved is not None:
                        write_resolved(writer, *resolved)
                        continue
                sources = [t for t in cell_sources(parts) if t.num_rows]
                if not sources:
                    continue
                cells = kernels.merge_sources(sources)
                if major:
                    cells = kernels.resolve(
                        cells, max_versions=store.settings.max_versions, ttl_cutoff=ttl_cutoff,
                        min_versions=store.settings.min_versions,
                        keep_deleted_cells=store.settings.keep_deleted_cells, compaction=True,
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
