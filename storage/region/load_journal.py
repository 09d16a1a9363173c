"""Bulk loads into the engine: the commit journal, the one atomic commit point of a
table-wide bulk load (HBase's completebulkload), and its roll-forward.

Loaders (the Spark writer, the import jobs) write store files under the
table's ``.staging/<job>/`` folder, then commit them here.

A region manifest is replaced atomically, but a bulk load touches many
regions.  So the commit first writes one journal document naming every
loaded file of every region (``<table>/bulkload/<job>.commit``, framed and
checksummed by :mod:`storage.region.framing`, replaced atomically); that write is
the commit.  Then each region manifest is updated, and the journal deleted.

A journal still present is a committed load whose manifests may be only
partly updated.  Applying it again is idempotent, so recovery (and any
reader) rolls it forward: :func:`apply_entry` gives the manifest as it is
once the journal is applied.

Payload (``receipt``: optional, true when the job's committer asked for a receipt)::

    {"job": "<job id>", "mode": "append" | "overwrite", "timestamp_ms": int, "receipt": true,
     "regions": {"<region id>": {"files": {"<family>": ["<file>", ...]},
                                  "flushed_seq_id": int,
                                  "moves": [["<family>", "<file>", "<staged path>"], ...]}}}

``overwrite`` replaces each family's file list by the loaded files and
raises ``flushed_seq_id`` past every WAL record, so older unflushed edits
are dropped too; ``append`` adds the files as the newest of each family.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import clock
from ..errors import CorruptionError, InvalidArgument, StorageError
from .framing import decode_document, encode_document
from ..vfs.fs import FileSystem
from .manifest import REGION_MANIFEST, RegionManifest
from .pins import pinned_paths, retire

__all__ = [
    "JOURNAL_DIR",
    "STAGING_DIR",
    "Journal",
    "RegionEntry",
    "read_journals",
    "write_journal",
    "apply_entry",
    "roll_forward",
    "recover",
    "pending_entries",
    "load_region_manifest",
    "MODES",
    "aborted_marker",
    "receipt_path",
    "staging_lock_path",
    "hold_staging",
    "release_staging",
    "drop_free_staging_lock",
    "drop_stale_staging",
]

JOURNAL_DIR = "bulkload"
STAGING_DIR = ".staging"
_KIND = b"RSBULKL1"
_VERSION = 1
_SUFFIX = ".commit"
MODES = ("append", "overwrite")


@dataclass(frozen=True)
class RegionEntry:
    """What one region gains: files per family (in load order), for overwrite a flushed seq id,
    and ``moves``: ``(family, final name, staged path)`` for each file still to move into place."""

    files: dict[str, tuple[str, ...]]
    flushed_seq_id: int = 0
    moves: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class Journal:
    """A committed bulk load."""

    job: str
    mode: str
    regions: dict[str, RegionEntry]
    timestamp_ms: int = 0
    receipt: bool = False  # leave the job's receipt when the journal goes (:func:`roll_forward`)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidArgument(f"bulk-load mode must be one of {MODES}, got {self.mode!r}")

    @property
    def path(self) -> str:
        """The journal's path relative to the table directory."""
        return f"{JOURNAL_DIR}/{self.job}{_SUFFIX}"

    def encode(self) -> bytes:
        """The framed, checksummed journal document."""
        payload: dict[str, Any] = {
            "job": self.job,
            "mode": self.mode,
            "timestamp_ms": self.timestamp_ms,
            "regions": {
                rid: {
                    "files": {f: list(n) for f, n in e.files.items()},
                    "flushed_seq_id": e.flushed_seq_id,
                    "moves": [list(m) for m in e.moves],
                }
                for rid, e in self.regions.items()
            },
        }
        if self.receipt:  # optional: journals without it read as before
            payload["receipt"] = True
        return encode_document(_KIND, _VERSION, payload)

    @classmethod
    def decode(cls, data: bytes, where: str) -> "Journal":
        """Decode a journal; ``CorruptionError`` names ``where`` on damage."""
        doc = decode_document(data, _KIND, where)
        try:
            regions = {
                rid: RegionEntry(
                    {f: tuple(n) for f, n in e["files"].items()},
                    int(e["flushed_seq_id"]),
                    tuple((str(m[0]), str(m[1]), str(m[2])) for m in e.get("moves", [])),
                )
                for rid, e in doc["regions"].items()
            }
            return cls(doc["job"], doc["mode"], regions, int(doc.get("timestamp_ms", 0)), doc.get("receipt") is True)
        except (KeyError, TypeError, AttributeError, ValueError, InvalidArgument) as exc:
            raise CorruptionError(f"bulk-load journal has a bad field ({exc})", where) from None


def write_journal(table_fs: FileSystem, journal: Journal) -> None:
    """Write the journal atomically: the commit point of the bulk load."""
    table_fs.makedirs(JOURNAL_DIR)
    table_fs.write_atomic(journal.path, journal.encode())


def read_journals(table_fs: FileSystem) -> list[Journal]:
    """Committed journals still present, oldest job first (job ids sort by time)."""
    out = []
    for name in table_fs.listdir(JOURNAL_DIR):
        if not name.endswith(_SUFFIX):
            continue  # a temporary file of an interrupted atomic write: not committed
        path = f"{JOURNAL_DIR}/{name}"
        try:
            data = table_fs.read_bytes(path)
        except FileNotFoundError:
            continue  # finished and removed while we listed
        out.append(Journal.decode(data, table_fs.uri(path)))
    return sorted(out, key=lambda j: j.job)


def apply_entry(manifest: RegionManifest, mode: str, entry: RegionEntry) -> RegionManifest:
    """The region manifest with ``entry`` applied (a new object; idempotent, nothing saved)."""
    files = {k: list(v) for k, v in manifest.files.items()}
    flushed = manifest.flushed_seq_id
    if mode == "overwrite":
        for family in list(files):
            if family not in entry.files:
                files[family] = []
        for family, names in entry.files.items():
            files[family] = list(names)
        flushed = max(flushed, entry.flushed_seq_id)
    else:
        for family, names in entry.files.items():
            current = files.setdefault(family, [])
            current.extend(n for n in names if n not in current)
    next_id = manifest.next_file_id
    for names in entry.files.values():
        for name in names:
            stem = name.split(".", 1)[0]
            if stem.isdigit():
                next_id = max(next_id, int(stem) + 1)
    return RegionManifest(manifest.region_id, files, flushed, next_id, manifest.generation)


def load_region_manifest(table_fs: FileSystem, region_id: str) -> RegionManifest:
    """A region's manifest, or an empty one for a region that has none yet."""
    rfs = table_fs.sub(f"regions/{region_id}")
    if rfs.exists(REGION_MANIFEST):
        return RegionManifest.load(rfs)
    return RegionManifest(region_id)


def roll_forward(table_fs: FileSystem, journal: Journal) -> None:
    """Apply a committed journal: move staged files into place, save manifests (idempotent).

    The caller holds the table's writer lock.
    """
    for region_id, entry in journal.regions.items():
        rfs = table_fs.sub(f"regions/{region_id}")
        for family, name, staged in entry.moves:
            final = f"regions/{region_id}/{family}/{name}"
            if table_fs.exists(staged):
                table_fs.makedirs(final.rsplit("/", 1)[0])
                table_fs.rename(staged, final)
            elif not table_fs.exists(final):
                raise StorageError(f"bulk load {journal.job}: staged file {table_fs.uri(staged)} is missing "
                                   f"and {table_fs.uri(final)} was never written")
        manifest = load_region_manifest(table_fs, region_id)
        new = apply_entry(manifest, journal.mode, entry)
        if new.files != manifest.files or new.flushed_seq_id != manifest.flushed_seq_id:
            new.save(rfs)
        if journal.mode == "overwrite":
            live = {f"{fam}/{n}" for fam, names in new.files.items() for n in names}
            pinned = pinned_paths(table_fs)
            for fam in list(new.files) + list(manifest.files):
                for name in rfs.listdir(fam):
                    if f"{fam}/{name}" not in live:
                        retire(table_fs, f"regions/{region_id}/{fam}/{name}", pinned)
    if journal.receipt and not table_fs.exists(receipt_path(journal.job)):
        # whoever rolls the load forward (its committer, or the next open after a kill) leaves the
        # receipt before the journal goes: the load stays provably committed
        table_fs.makedirs(STAGING_DIR)
        table_fs.write_bytes(receipt_path(journal.job), str(clock.now_ms()).encode())
    table_fs.delete(journal.path, missing_ok=True)


def recover(table_fs: FileSystem) -> int:
    """Complete every committed bulk load whose manifests were not all updated; returns how many.

    A writer opening a table calls it before anything else (with the writer
    lock held), so a crash between a load's commit and its last manifest
    update is finished on the next open.  Then the staging folders of jobs
    that died before their commit point are deleted (:func:`drop_stale_staging`).
    """
    done = 0
    for journal in read_journals(table_fs):
        roll_forward(table_fs, journal)
        table_fs.delete_dir(f"{STAGING_DIR}/{journal.job}")
        done += 1
    drop_stale_staging(table_fs)
    return done


# -- staging leases and receipts ------------------------------------------------
_LOCK = ".lock"
_RECEIPT = ".committed"
_ABORTED = ".aborted"


def receipt_path(job_id: str) -> str:
    """The job's commit receipt (beside its staging folder): left by the roll-forward of a
    journal written with ``receipt`` (``commit_load(receipt=True)``); its reader deletes it."""
    return f"{STAGING_DIR}/{job_id}{_RECEIPT}"


def aborted_marker(job_id: str) -> str:
    """The file (beside the job's staging folder) that says the job was aborted."""
    return f"{STAGING_DIR}/{job_id}{_ABORTED}"


def staging_lock_path(job_id: str) -> str:
    """The lock a bulk-load job holds while it may still commit (beside its staging folder)."""
    return f"{STAGING_DIR}/{job_id}{_LOCK}"


def hold_staging(table_fs: FileSystem, job_id: str):
    """Take job ``job_id``'s staging lock (the table writer lock's kind: ``flock`` on local roots,
    a renewed lease on object stores) and return it; :func:`release_staging` gives it back.

    A job that holds it keeps its staging folder; once its holder is gone (it ended, was killed,
    or its lease ran out) and no journal names the job, the folder is stale and the next writer
    to open the table, or the next commit, deletes it.  Raises ``TableLocked`` if another process
    holds it.
    """
    table_fs.makedirs(STAGING_DIR)
    return table_fs.lock(staging_lock_path(job_id)).acquire()


def release_staging(table_fs: FileSystem, job_id: str, lock) -> None:
    """Give back what :func:`hold_staging` took (after the job's commit or abort), lock file and all.

    Released first: an object store's lease deletes its own object (deleting it under a lease
    that is still renewed would mark the lease lost).  A sweep that takes the lock in between
    finds a job already committed or aborted, and deletes nothing of it.
    """
    lock.release()
    table_fs.delete(staging_lock_path(job_id), missing_ok=True)


def drop_free_staging_lock(table_fs: FileSystem, job_id: str) -> bool:
    """Delete job ``job_id``'s staging lock file if no process holds it (its holder died after the
    job's commit or abort was decided elsewhere); True if it did."""
    from ..errors import TableLocked

    path = staging_lock_path(job_id)
    if not table_fs.exists(path):
        return False
    try:
        lock = table_fs.lock(path).acquire()
    except TableLocked:
        return False  # held: its holder gives it back
    try:
        table_fs.delete(path, missing_ok=True)
    finally:
        lock.release()
    return True


def drop_stale_staging(table_fs: FileSystem) -> int:
    """Delete the staging folders of jobs whose staging lock nobody holds; returns how many.

    Only jobs that took a staging lock (:func:`hold_staging`) are judged: a
    folder whose lock can be taken belongs to a job that died before its
    commit point (a committed job's journal was rolled forward first, by
    :func:`recover`).  An abort marker is left, as an abort leaves it, so a
    task attempt of that job still running elsewhere discards its files.
    Folders of jobs that hold no lock are left to their job, unless the job
    was aborted (its abort marker is there): a task attempt of another
    process that outlived the abort may have made its folder again, and an
    aborted job keeps nothing.
    """
    from ..errors import TableLocked

    dropped = 0
    names = table_fs.listdir(STAGING_DIR)
    present = set(names)
    for name in names:
        job = name[: -len(_ABORTED)]
        if name.endswith(_ABORTED) and job in present and not table_fs.exists(f"{JOURNAL_DIR}/{job}{_SUFFIX}"):
            table_fs.delete_dir(f"{STAGING_DIR}/{job}")
    for name in names:
        if not name.endswith(_LOCK):
            continue
        job = name[: -len(_LOCK)]
        try:
            lock = table_fs.lock(staging_lock_path(job)).acquire()
        except TableLocked:
            continue  # its job is alive
        try:
            if table_fs.exists(f"{JOURNAL_DIR}/{job}{_SUFFIX}"):
                continue  # committed: its staged files are what the roll-forward moves
            table_fs.write_bytes(aborted_marker(job), str(clock.now_ms()).encode())
            table_fs.delete_dir(f"{STAGING_DIR}/{job}")
            table_fs.delete(staging_lock_path(job), missing_ok=True)
            dropped += 1
        finally:
            lock.release()
    return dropped


def pending_entries(table_fs: FileSystem) -> dict[str, list[tuple[str, RegionEntry]]]:
    """Committed but not yet rolled-forward loads per region id, as (mode, entry), oldest first.

    A read-only open applies them in memory (it may not write), so a reader
    sees a committed load whole even while its commit is still moving files.
    """
    out: dict[str, list[tuple[str, RegionEntry]]] = {}
    for journal in read_journals(table_fs):
        for region_id, entry in journal.regions.items():
            out.setdefault(region_id, []).append((journal.mode, entry))
    return out
