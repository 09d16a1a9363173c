"""A store: one column family of one region (memstore plus store files).

The store knows its sources in age order, newest first: the memstore, then
its store files from the newest to the oldest.  Scans and compactions take a
:class:`StoreView` (an immutable list of open readers plus a
:class:`storage.memstore.write_buffer.MemStoreView` fixed at a read point), so a flush or
compaction that swaps files does not disturb a scan under way; the region
leases the view's files (:mod:`storage.region.reader_leases`) so they stay open until the
scan ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa

from ..cells import CELL_SCHEMA, EMPTY_CELLS
from ..storefile.dense_rows import first_cells_of_parts
from ..vfs.fs import FileSystem
from ..memstore.write_buffer import MemStore
from ..memstore.runs import MemStoreView
from ..schema import FamilySettings
from ..storefile import BlockCache, StoreFileReader, StoreFileWriter
from ..storefile.dense import empty_binary
from ..kernels.cell_columns import one_array
from ..kernels.order import row_starts
from ..kernels.resolve import resolve

__all__ = ["Store", "StoreView"]


@dataclass(frozen=True)
class StoreFile:
    """A live store file of a store: its name in the manifest and its open reader."""

    name: str
    reader: StoreFileReader

    @property
    def size(self) -> int:
        return self.reader.info.file_size


@dataclass(frozen=True)
class StoreView:
    """What one scan of a store reads: the memstore as of the scan's read
    point and the files, newest first.  ``memstore`` is any object with
    :class:`storage.memstore.write_buffer.MemStoreView`'s read methods (``is_empty``,
    ``to_batch``, ``row_cells``, ``scanner``)."""

    family: str
    settings: FamilySettings
    memstore: MemStoreView
    files: tuple[StoreFile, ...]  # newest first

    def memstore_batch(self, start_row: bytes, stop_row: bytes | None) -> pa.Table:
        """Memstore cells with start_row <= row < stop_row, in cell order."""
        if self.memstore.is_empty():
            return EMPTY_CELLS
        return self.memstore.to_batch(start_row, stop_row)

    def memstore_holds(self, start_row: bytes, stop_row: bytes | None) -> bool:
        """Whether the memstore has a cell with start_row <= row < stop_row: told from its
        rows where it has them (a replayed log read as rows builds no cells for this)."""
        if self.memstore.is_empty():  # no empty cell table built to say so (0.2 ms a region)
            return False
        holds = getattr(self.memstore, "holds_rows", None)
        if holds is not None:
            return holds(start_row, stop_row)
        return self.memstore_batch(start_row, stop_row).num_rows > 0

    def file_batches(self, start_row: bytes, stop_row: bytes | None, keys_only: bool = False) -> list[pa.Table]:
        """Each file's cells in the range as one table, newest file first
        (``keys_only``: empty values, and no value section is read)."""
        out = []
        for f in self.files:
            batches = list(f.reader.scan_batches(start_row, stop_row, keys_only=keys_only))
            out.append(pa.Table.from_batches(batches, schema=CELL_SCHEMA) if batches else EMPTY_CELLS)
        return out

    def sources(self, start_row: bytes, stop_row: bytes | None) -> list[pa.Table]:
        """All sources' cells in the range, newest first; empty sources left out."""
        return self.sources_checked(start_row, stop_row)[0]

    def sources_checked(
        self, start_row: bytes, stop_row: bytes | None, keys_only: bool = False, first_cells: bool = False,
        flushed_cutoff: int | None = None,
    ) -> tuple[list[pa.Table], list[bool]]:
        """The range's non-empty sources, newest first, and for each whether it
        needs no version or delete resolution on its own.  ``keys_only``:
        every value is empty (files are read for their key sections only).
        ``first_cells`` (with ``keys_only``, for a scan that keeps only the
        first cell of each row and has no TTL or time range to apply): when
        every source is clean, each is cut to the first cell of each of its
        rows, which still resolve to the first cell of every row.

        ``flushed_cutoff`` (a TTL cutoff, for a family with ``min_versions``):
        each store file comes without its puts older than it past their
        column's newest ``min_versions`` puts in the file, as HBase's flush or
        compaction writing the file would have dropped them
        (:mod:`storage.scanner.flushed`; the range holds whole rows, so a
        column's puts in a file are all there)."""
        tables: list[pa.Table] = []
        clean: list[bool] = []
        firsts = (
            first_cells and keys_only and (self.memstore.is_empty() or self.memstore.is_clean())
            and not any(f.reader.info.needs_resolution for f in self.files)
        )
        if not self.memstore.is_empty():
            mem = self.memstore_batch(start_row, stop_row)
            if mem.num_rows:
                if firsts:
                    mem = mem.take(pa.array(row_starts(one_array(mem.column(0)))))
                if keys_only:  # merging would copy the values only to drop them
                    mem = mem.set_column(5, CELL_SCHEMA.field(5), pa.chunked_array([empty_binary(mem.num_rows)]))
                tables.append(mem)
                clean.append(self.memstore.is_clean())
        if firsts:
            family = self.family.encode()
            for f in self.files:
                table = first_cells_of_parts(f.reader.scan_parts(start_row, stop_row, keys_only=True), family)
                if table.num_rows:
                    tables.append(table)
                    clean.append(True)
            return tables, clean
        retain = flushed_cutoff is not None and self.settings.min_versions > 0
        for f, table in zip(self.files, self.file_batches(start_row, stop_row, keys_only)):
            if retain and table.num_rows:
                # what HBase's flush (or compaction) writing this file would have kept
                table = resolve(table, keep_deletes=True, ttl_cutoff=flushed_cutoff,
                                min_versions=self.settings.min_versions)
            if table.num_rows:
                tables.append(table)
                clean.append(not f.reader.info.needs_resolution)
        return tables, clean

    def scanners(self, metrics=None) -> list:
        """Cell scanners over every source, newest first (the heap's rank order)."""
        return [self.memstore.scanner(metrics)] + [f.reader.scanner() for f in self.files]


class Store:
    """One family of one region.  The region serializes writes, flushes and compactions."""

    def __init__(self, fs: FileSystem, family: str, settings: FamilySettings, cache: BlockCache | None):
        self.fs = fs  # the region's filesystem; files live under <family>/
        self.family = family
        self.family_bytes = family.encode()
        self.settings = settings
        self.cache = cache
        self.memstore = MemStore()
        self._files: tuple[StoreFile, ...] = ()  # newest first

    # -- files -----------------------------------------------------------
    def path(self, name: str) -> str:
        return f"{self.family}/{name}"

    def open_files(self, names_oldest_first: Sequence[str], locations: dict | None = None) -> None:
        """Open the manifest's files (replacing any open set).

        ``locations`` maps (family, name) to (filesystem, path) for a file not
        yet at its place (a committed bulk load still being moved in).
        """
        locations = locations or {}
        files = []
        try:
            for name in reversed(list(names_oldest_first)):
                fs, path = locations.get((self.family, name), (self.fs, self.path(name)))
                files.append(StoreFile(name, StoreFileReader(fs, path, cache=self.cache)))
        except BaseException:
            for opened in files:  # a damaged file further down: the ones opened are not kept
                opened.reader.close()
            raise
        self._files = tuple(files)

    @property
    def files(self) -> tuple[StoreFile, ...]:
        return self._files

    def replace_files(self, new_files_newest_first: tuple[StoreFile, ...]) -> None:
        self._files = new_files_newest_first

    def flush_max_versions(self) -> int | None:
        """How many versions of a column a flush keeps (``write_snapshot``): the family's
        ``max_versions``, or None (every version) while a file of the store holds a delete
        marker or may hold one (a file written before its markers were counted): a marker
        deleting a newer version uncovers an older one, which the reads must still find."""
        if any(f.reader.info.delete_count != 0 for f in self._files):
            return None
        return self.settings.max_versions

    def view(self, read_point: int | None = None) -> StoreView:
        """The store as a reader at ``read_point`` sees it (release its memstore view when done)."""
        return StoreView(self.family, self.settings, self.memstore.view(read_point), self._files)

    @property
    def size(self) -> int:
        """Bytes on disk of the live store files."""
        return sum(f.size for f in self._files)

    def new_writer(self, name: str) -> StoreFileWriter:
        self.fs.makedirs(self.family)
        return StoreFileWriter(
            self.fs,
            self.path(name),
            family=self.family_bytes,
            block_size=self.settings.block_size,
            compression=self.settings.compression,
            bloom=self.settings.bloom_filter,
        )

    def open_reader(self, name: str) -> StoreFile:
        return StoreFile(name, StoreFileReader(self.fs, self.path(name), cache=self.cache))
