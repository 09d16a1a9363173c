"""The bulk-load commit journal: the one atomic commit point of a table-wide bulk load.

A region manifest is replaced atomically, but a bulk load touches many
regions.  So the commit first writes one journal document naming every
loaded file of every region (``<table>/bulkload/<job>.commit``, framed and
checksummed by :mod:`storage.framing`, replaced atomically); that write is
the commit.  Then each region manifest is updated, and the journal deleted.

A journal still present is a committed load whose manifests may be only
partly updated.  Applying it again is idempotent, so recovery (and any
reader) rolls it forward: :func:`apply_entry` gives the manifest as it is
once the journal is applied.

Payload::

    {"job": "<job id>", "mode": "append" | "overwrite", "timestamp_ms": int,
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

from storage.errors import CorruptionError, InvalidArgument
from storage.framing import decode_document, encode_document
from storage.fs import FileSystem
from storage.manifest import RegionManifest

__all__ = ["JOURNAL_DIR", "Journal", "RegionEntry", "read_journals", "write_journal", "apply_entry", "MODES"]

JOURNAL_DIR = "bulkload"
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
            return cls(doc["job"], doc["mode"], regions, int(doc.get("timestamp_ms", 0)))
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
