"""Replaying and repairing a WAL: its records plus where the intact prefix ends,
and cutting a torn tail off a file that must be appended to again."""

from __future__ import annotations

from dataclasses import dataclass

from ..vfs.fs import FileSystem
from .format import HEADER_BYTES, FILE_HEADER_SIZE, WalRecord
from .reader import WalReader

__all__ = ["WalReplay", "replay_wal", "repair_wal"]


@dataclass
class WalReplay:
    """The outcome of replaying one WAL file.

    ``valid_length`` is the length of the intact prefix (the offset where a
    torn tail starts); ``torn_tail_bytes`` how many bytes after it were
    dropped (0 when the file ends cleanly).
    """

    records: list[WalRecord]
    valid_length: int
    torn_tail_bytes: int
    file_size: int

    @property
    def last_seq_id(self) -> int | None:
        """The largest sequence id replayed, or None for an empty log."""
        return max((r.seq_id for r in self.records), default=None)


def replay_wal(fs: FileSystem, path: str) -> WalReplay:
    """Read a whole WAL file: its records plus where the intact prefix ends."""
    reader = WalReader(fs, path)
    records = list(reader)
    return WalReplay(records, reader.valid_length, reader.torn_tail_bytes, reader.file_size)


def repair_wal(fs: FileSystem, path: str) -> int:
    """Cut a torn tail off a WAL file so it can be appended to; return the bytes cut.

    The intact prefix is rewritten with ``fs.write_atomic`` (the filesystem
    layer has no truncate that works on object stores), so a crash during the
    repair leaves the old or the repaired file.  A file without a complete
    header becomes an empty log (header only).  Raises
    :class:`CorruptionError` when the damage is not a torn tail.
    """
    reader = WalReader(fs, path, decode=False)
    for _ in reader:
        pass
    if not reader.torn_tail_bytes and reader.valid_length >= FILE_HEADER_SIZE:
        return 0
    if reader.valid_length < FILE_HEADER_SIZE:
        data = HEADER_BYTES
    else:
        f = fs.open_read(path)
        try:
            data = f.read_at(reader.valid_length, 0)
        finally:
            f.close()
    fs.write_atomic(path, data)
    return reader.file_size - reader.valid_length
