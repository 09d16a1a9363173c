"""Compacting a region's stores: choosing the files and rewriting them row-wise
into one (the region swaps the new file in and retires the inputs behind their
readers: :meth:`storage.region.region.Region.compact`)."""

from __future__ import annotations

from typing import NamedTuple

from .. import clock, kernels
from ..memstore.write_buffer import MemStore
from ..schema import TableSettings
from .compaction_rows import cell_sources, chunk_rows, read_parts, write_rows
from .row_resolve import compaction_rows, write_resolved
from .manifest import RegionManifest
from .store import Store, StoreFile, StoreView
from .view import chunk_bounds

__all__ = ["MergedFile", "chosen_files", "merge_store_files"]


def chosen_files(files: tuple[StoreFile, ...], major: bool, settings: TableSettings) -> tuple[StoreFile, ...]:
    """The files of one store (newest first) a compaction merges; none: nothing to do.

    Minor: the newest ``compaction_max_files`` once the store has at least
    ``compaction_threshold`` files.  Major: all of them."""
    if major:
        return files
    if len(files) < settings.compaction_threshold:
        return ()
    return files[: settings.compaction_max_files]


class MergedFile(NamedTuple):
    """A store's chosen files rewritten as one new file."""

    manifest: RegionManifest
    """The region manifest listing the new file in place of the merged ones (not saved yet)."""
    name: str
    """The new file's name in the store's folder."""
    cell_count: int
    """Its cells: 0 when nothing survived (the empty file is not listed and can go)."""


def merge_store_files(store: Store, chosen: tuple[StoreFile, ...], major: bool,
                      manifest: RegionManifest) -> MergedFile:
    """Rewrite ``chosen`` files of ``store`` into one new file.

    Minor (``major`` False) keeps every version and delete marker.  Major
    drops deleted cells, the markers, cells past the TTL and versions past
    max_versions; a family with ``keep_deleted_cells`` keeps deleted cells
    and markers (see :func:`storage.kernels.resolve`).  ``manifest`` is the
    region's current one; nothing of it or of the store changes here.
    """
    view = StoreView(store.family, store.settings, MemStore().view(), chosen)
    new_manifest = RegionManifest(
        manifest.region_id,
        {k: list(v) for k, v in manifest.files.items()},
        manifest.flushed_seq_id,
        manifest.next_file_id,
        manifest.generation,
    )
    name = new_manifest.new_file_name()
    writer = store.new_writer(name)
    ttl_cutoff = None
    if major and store.settings.ttl is not None:
        ttl_cutoff = clock.now_ms() - store.settings.ttl * 1000
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
    return MergedFile(new_manifest, name, info.cell_count)
