"""Opening a WAL for writes: the writer that suits the filesystem.

A filesystem that appends gets one file of records (:class:`WalWriter`); one
that cannot (object stores) gets a directory of immutable segment objects
(:class:`SegmentWalWriter`).  Both keep the same contract, so a region opens
its log here and never names either class.
"""

from __future__ import annotations

from ..vfs.fs import FileSystem
from .format import SyncPolicy
from .segments import SegmentWalWriter
from .writer import WalWriter

__all__ = ["open_wal_writer"]


def open_wal_writer(fs: FileSystem, path: str, sync: "SyncPolicy | str | int" = "each") -> WalWriter:
    """Open (create, or reopen intact) the WAL at ``path`` with sync policy ``sync``."""
    if fs.can_append:
        return WalWriter(fs, path, sync)
    return SegmentWalWriter(fs, path, sync)
