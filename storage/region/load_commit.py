"""Committing a bulk load: staged store files made part of a table atomically.

The second half of a bulk load (HBase's ``LoadIncrementalHFiles``); the
writers' tasks stage the files (:mod:`storage.region.load_stage`), this module
commits them, on the driver, holding the table's writer lock, so no writer process may
have the table open:

1. roll forward any earlier committed journal (:func:`recover`);
2. re-cut staged files whose region was split since staging;
3. write the journal naming, per region, each staged file and its final
   name (``<table>/bulkload/<job id>.commit``): the commit point;
4. move each staged file to ``regions/<region>/<family>/<name>`` and save
   each region manifest with the new files (overwrite: only them, and the
   flushed sequence id raised past the WAL so older unflushed edits go too);
5. delete the journal, then the staging directory; release the lock.

A crash after step 3 leaves a journal that :func:`recover` (run by the next
commit, by every open of the table, or by hand) completes; readers that pin
the table apply it too, so they see all of the load or none of it.  The
journal itself is :mod:`storage.region.load_journal`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import pyarrow as pa

from .. import clock
from ..errors import InvalidArgument, StorageError, TableLocked
from ..schema import FamilySettings
from ..storefile import StoreFileReader, StoreFileWriter
from ..vfs.fs import FileSystem
from ..wal.reader import WalReader
from .load_journal import (
    JOURNAL_DIR,
    STAGING_DIR,
    Journal,
    RegionEntry,
    aborted_marker,
    receipt_path,
    drop_free_staging_lock,
    drop_stale_staging,
    hold_staging,
    release_staging,
    load_region_manifest,
    recover,
    roll_forward,
    write_journal,
)
from .manifest import TABLE_LOCK, TableManifest

log = logging.getLogger("storage.bulkload")

__all__ = [
    "RegionBounds",
    "StagedFile",
    "StagingWriter",
    "LoadReport",
    "table_regions",
    "write_store_file",
    "prepare_commit",
    "lock_table",
    "commit_load",
    "abort_load",
    "drop_old_abort_markers",
    "aborted_marker",
    "receipt_path",
    "load_committed",
    "drop_stale_staging",
    "hold_staging",
    "release_staging",
]


@dataclass(frozen=True)
class RegionBounds:
    """A region's id and key range as the load saw it."""

    region_id: str
    start: bytes
    end: bytes | None


@dataclass(frozen=True)
class StagedFile:
    """One staged store file (path relative to the table directory)."""

    region_id: str
    family: str
    path: str
    cells: int
    size: int
    first_row: bytes
    last_row: bytes


@dataclass
class LoadReport:
    """What a commit did."""

    job_id: str
    mode: str
    files: int = 0
    cells: int = 0
    bytes: int = 0
    regions: list[str] = field(default_factory=list)
    recut: int = 0


def table_regions(table_fs: FileSystem) -> tuple[list[RegionBounds], dict[str, FamilySettings]]:
    """The table's regions and family settings from its manifest."""
    manifest = TableManifest.load(table_fs)
    regions = [RegionBounds(r.region_id, r.start, r.end) for r in manifest.regions]
    families = {name: FamilySettings(**opts) for name, opts in manifest.families.items()}
    return regions, families


class StagingWriter:
    """One staged store file of one region and family, written in pieces.

    Contract: pieces arrive in key order, each starting past the previous
    one's last row (cells through :meth:`append_cells`, rows as columns
    through :meth:`append_columns`); then :meth:`finish` (returns the
    :class:`StagedFile`) or :meth:`abandon` (deletes the partial file).
    A bulk-load task keeps one open per region and family while its sorted
    runs follow each other, so a load of sorted rows stages one file per
    region and family, not one per run.
    """

    def __init__(self, table_fs: FileSystem, path: str, region_id: str, family: str, settings: FamilySettings):
        table_fs.makedirs(path.rsplit("/", 1)[0])
        self.path = path
        self.region_id = region_id
        self.family = family
        self.last_row: bytes | None = None
        self._writer = StoreFileWriter(table_fs, path, family=family.encode(), block_size=settings.block_size,
                                       compression=settings.compression, bloom=settings.bloom_filter)

    def append_cells(self, cells: pa.Table) -> None:
        """Add sorted cells (:data:`storage.cells.CELL_SCHEMA`)."""
        self._writer.append_batch(cells)
        if cells.num_rows:
            self.last_row = cells.column("row")[cells.num_rows - 1].as_py()

    def append_columns(self, columns: tuple) -> None:
        """Add sorted rows as ``(keys, qualifiers, values, timestamps)`` (``StoreFileWriter.append_rows``'s
        arguments, as chunked arrays, written chunk by chunk)."""
        keys, qualifiers, values, stamps = columns
        # aligned zero-copy pieces of the chunked columns, one append_rows each
        pieces = pa.Table.from_arrays([keys, *values, *stamps], names=[str(i) for i in range(1 + 2 * len(values))])
        q = len(values)
        for piece in pieces.to_batches():
            if piece.num_rows:
                cols = piece.columns
                self._writer.append_rows(cols[0], qualifiers, cols[1 : 1 + q], cols[1 + q :])
        if len(keys):
            self.last_row = keys[len(keys) - 1].as_py()

    def finish(self) -> StagedFile:
        """Close the file; what was staged."""
        try:
            info = self._writer.finish(max_seq_id=0)
        except BaseException:
            self._writer.abandon()
            raise
        return StagedFile(self.region_id, self.family, self.path, info.cell_count, info.file_size,
                          info.first_cell[0], info.last_cell[0])

    def abandon(self) -> None:
        """Close and delete the partial file."""
        self._writer.abandon()


def write_store_file(table_fs: FileSystem, path: str, region_id: str, family: str,
                     settings: FamilySettings, cells: pa.Table | None, columns: tuple | None = None) -> StagedFile:
    """Write sorted cells of one family, or its sorted rows as ``columns``
    (``(keys, qualifiers, values, timestamps)``, see ``StoreFileWriter.append_rows``),
    into a store file at ``path`` with the family's settings."""
    writer = StagingWriter(table_fs, path, region_id, family, settings)
    try:
        if columns is not None:
            writer.append_columns(columns)
        else:
            writer.append_cells(cells)
    except BaseException:
        writer.abandon()
        raise
    return writer.finish()


def _wal_max_seq(rfs: FileSystem) -> int:
    top = 0
    for name in rfs.listdir("wal"):
        if name.endswith(".wal"):
            for record in WalReader(rfs, f"wal/{name}", decode=False):
                top = max(top, record.seq_id)
    return top


def _recut(table_fs: FileSystem, staged: StagedFile, regions: Sequence[RegionBounds], settings: FamilySettings,
           job_id: str) -> list[StagedFile]:
    """Rewrite a staged file whose region was split into files of the current regions.

    Dense blocks stay columns (whole rows, regrouped at the family's row-group size), so a file
    cut here scans as fast as one staged for its region; other blocks, and rows cut across
    blocks, go as cells."""
    out = []
    reader = StoreFileReader(table_fs, staged.path)
    try:
        for region in regions:
            if region.end is not None and region.end <= staged.first_row:
                continue
            if region.start > staged.last_row:
                break
            stem = staged.path.rsplit(".", 1)[0]
            path = f"{STAGING_DIR}/{job_id}/recut/{region.region_id}/{staged.family}/{stem.replace('/', '_')}.sf"
            writer = None
            try:
                for part in reader.scan_parts(region.start or None, region.end):
                    if writer is None:
                        writer = StagingWriter(table_fs, path, region.region_id, staged.family, settings)
                    dense = part.dense
                    if dense is not None and not (part.continued or part.open):
                        writer.append_columns((dense.rows, list(dense.qualifiers), list(dense.values),
                                               dense.plain_timestamps()))
                    else:
                        writer.append_cells(part.batch())
            except BaseException:
                if writer is not None:
                    writer.abandon()
                raise
            if writer is not None:
                out.append(writer.finish())
    finally:
        reader.close()
    return out


def prepare_commit(table_fs: FileSystem, job_id: str, staged: Iterable[StagedFile], mode: str = "append",
                   receipt: bool = False) -> tuple[Journal, LoadReport]:
    """Steps 2-3 of a commit: re-cut what a split moved, name the files, write the journal.

    The caller holds the table's writer lock.  Once this returns the load
    is committed; :func:`roll_forward` makes the manifests show it (and,
    with ``receipt``, leaves the job's receipt as the journal goes).
    """
    if mode not in ("append", "overwrite"):
        raise InvalidArgument(f"bulk-load mode must be 'append' or 'overwrite', got {mode!r}")
    regions, families = table_regions(table_fs)
    by_id = {r.region_id: r for r in regions}
    report = LoadReport(job_id, mode)
    placed: list[StagedFile] = []
    for sf in staged:
        if sf.family not in families:
            raise InvalidArgument(f"staged file {sf.path} is for family {sf.family!r}, which the table lacks")
        current = by_id.get(sf.region_id)
        inside = current is not None and current.start <= sf.first_row and (
            current.end is None or sf.last_row < current.end)
        if inside:
            placed.append(sf)
        else:
            placed.extend(_recut(table_fs, sf, regions, families[sf.family], job_id))
            report.recut += 1
    targets = [r.region_id for r in regions] if mode == "overwrite" else sorted({sf.region_id for sf in placed})
    manifests = {rid: load_region_manifest(table_fs, rid) for rid in targets}
    next_ids = {rid: m.next_file_id for rid, m in manifests.items()}
    entries: dict[str, dict[str, list[str]]] = {rid: {} for rid in targets}
    moves: dict[str, list[tuple[str, str, str]]] = {}
    for sf in sorted(placed, key=lambda s: (s.region_id, s.family, s.path)):
        name = f"{next_ids[sf.region_id]:012d}.sf"
        next_ids[sf.region_id] += 1
        entries[sf.region_id].setdefault(sf.family, []).append(name)
        moves.setdefault(sf.region_id, []).append((sf.family, name, sf.path))
        report.files += 1
        report.cells += sf.cells
        report.bytes += sf.size
    region_entries = {}
    for rid in targets:
        flushed = 0
        if mode == "overwrite":
            # past every WAL record, so unflushed edits from before the load are dropped too
            flushed = max(manifests[rid].flushed_seq_id, _wal_max_seq(table_fs.sub(f"regions/{rid}")))
        region_entries[rid] = RegionEntry(
            {f: tuple(n) for f, n in entries[rid].items()}, flushed, tuple(moves.get(rid, ())))
    journal = Journal(job_id, mode, region_entries, clock.now_ms(), receipt)
    write_journal(table_fs, journal)  # the commit point
    report.regions = targets
    return journal, report


def lock_table(table_fs: FileSystem, job_id: str):
    """Take the table's writer lock for a bulk-load commit, with an error that says why it is needed."""
    try:
        return table_fs.lock(TABLE_LOCK).acquire()
    except TableLocked as exc:
        raise TableLocked(f"bulk load {job_id} cannot commit: {exc}; a bulk load needs the table's writer "
                          "lock, so close the writer processes of this table first") from None


def commit_load(table_fs: FileSystem, job_id: str, staged: Iterable[StagedFile], mode: str = "append",
                receipt: bool = False) -> LoadReport:
    """Make every staged file of a job part of the table, atomically (see the module docstring).

    Raises :class:`TableLocked` if a writer process has the table open:
    a bulk load requires that no other writer runs during its commit.
    ``receipt``: the journal asks for the job's receipt (:func:`receipt_path`),
    which its roll-forward leaves as the journal goes, whoever completes it;
    so a caller whose committer died before answering can still learn that
    the load is in (:func:`load_committed`), and that caller deletes it.
    """
    staged = list(staged)
    lock = lock_table(table_fs, job_id)
    try:
        recover(table_fs)  # also drops the staging folders of jobs that died before their commit point
        drop_old_abort_markers(table_fs)
        missing = [sf.path for sf in staged if not table_fs.exists(sf.path)]
        if missing:  # checked before the commit point: a journal must never name a file that is gone
            raise StorageError(f"bulk load {job_id} cannot commit: {len(missing)} staged file(s) are gone, "
                               f"e.g. {table_fs.uri(missing[0])}; nothing was committed")
        try:
            journal, report = prepare_commit(table_fs, job_id, staged, mode, receipt)
        except BaseException:
            _abort_uncommitted(table_fs, job_id)
            raise
        roll_forward(table_fs, journal)
        table_fs.delete_dir(f"{STAGING_DIR}/{job_id}")
        return report
    finally:
        lock.release()


def _abort_uncommitted(table_fs: FileSystem, job_id: str) -> None:
    """After a commit failed before its commit point, drop what the job staged.

    The caller gets the commit's error and nothing of the load is in the table, so its staged
    files would otherwise be left for nobody (a job that took no staging lock is never judged
    dead).  A journal that did get written (the failure came after its rename) makes the load
    committed: its files are what recovery moves into place, and :func:`abort_load` keeps them.
    Best effort: a disk that refuses the cleanup too leaves the folder to the next commit's
    recovery, and the commit's own error is the one raised.
    """
    try:
        abort_load(table_fs, job_id)
    except OSError as exc:
        log.warning("bulk load %s: dropping its staged files after a failed commit failed: %s", job_id, exc)


def abort_load(table_fs: FileSystem, job_id: str) -> bool:
    """Delete everything a job staged (every task attempt, finished or not); True if it did.

    A job whose journal was written is committed: its staged files are what
    :func:`recover` moves into place, so they are kept and False returned.
    """
    if table_fs.exists(f"{JOURNAL_DIR}/{job_id}.commit"):
        return False
    # the marker first: a task attempt still running sees it once its files are written
    table_fs.makedirs(STAGING_DIR)
    table_fs.write_bytes(aborted_marker(job_id), str(clock.now_ms()).encode())
    table_fs.delete_dir(f"{STAGING_DIR}/{job_id}")
    drop_free_staging_lock(table_fs, job_id)  # a holder that died (a killed engine worker) left it
    return True


def drop_old_abort_markers(table_fs: FileSystem, older_than_s: float = 3600.0) -> int:
    """Delete abort markers older than any task attempt can run, and commit receipts as old
    (their caller asked long ago); returns how many."""
    cutoff = clock.now_ms() - older_than_s * 1000
    dropped = 0
    for name in table_fs.listdir(STAGING_DIR):
        if not name.endswith((".aborted", ".committed")):
            continue
        path = f"{STAGING_DIR}/{name}"
        try:
            stamp = int(table_fs.read_bytes(path) or b"0")
        except (OSError, ValueError):
            stamp = 0  # unreadable: treat as old
        if stamp < cutoff:
            table_fs.delete(path, missing_ok=True)
            dropped += 1
    return dropped


def load_committed(table_fs: FileSystem, job_id: str, forget: bool = False) -> bool:
    """Whether job ``job_id``'s load is committed: its journal (committed, maybe not yet rolled
    forward: the next writer's open or commit completes it, and readers apply it) or its receipt
    (committed and rolled forward) is there.  ``forget`` deletes the receipt.

    Sound only once no committer of the job can still run (its process has ended), for a commit
    made with ``receipt=True``: the journal is written atomically and asks for the receipt, which
    every roll-forward of it leaves before deleting it, so one of them is there exactly when the
    committer passed the commit point.
    """
    journal = table_fs.exists(f"{JOURNAL_DIR}/{job_id}.commit")
    committed = journal or table_fs.exists(receipt_path(job_id))
    if forget:
        if journal:
            # complete the load now, where no writer holds the table (its roll-forward leaves the
            # receipt, deleted next); a writer that holds it completed it when it opened
            try:
                lock = table_fs.lock(TABLE_LOCK).acquire()
            except TableLocked:
                lock = None
            if lock is not None:
                try:
                    recover(table_fs)
                finally:
                    lock.release()
        table_fs.delete(receipt_path(job_id), missing_ok=True)
        if committed:
            drop_free_staging_lock(table_fs, job_id)  # the dead committer held it
    return committed
