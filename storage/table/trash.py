"""Dropped tables that scans still read: moved aside, deleted when the last scan ends.

``delete_table`` on a local root renames the table's folder to a trash folder
at the root (``.deleted-<path>-<id>``) so the name is free at once, and
deletes it when the last scan leasing its files ends.  The writer lock file
moves with the folder and stays held until then, so a trash folder whose lock
can be taken belongs to no live process: its deleting process died (killed,
power cut) before the last scan ended.  Such folders are deleted by the next
writable connection to the root (:func:`clean_trash`).
"""

from __future__ import annotations

import uuid

from ..errors import TableLocked
from ..region.manifest import TABLE_LOCK
from ..vfs.fs import FileSystem

__all__ = ["TRASH_PREFIX", "trash_name", "clean_trash"]

TRASH_PREFIX = ".deleted-"
"""Names of trash folders at a root start with this (never a namespace or table name)."""


def trash_name(table_path: str) -> str:
    """A new trash folder name for the table folder ``table_path``."""
    return f"{TRASH_PREFIX}{table_path.replace('/', '-')}-{uuid.uuid4().hex[:12]}"


def clean_trash(fs: FileSystem) -> int:
    """Delete the trash folders no live process holds; returns how many went.

    A folder whose lock another process (or this one) holds is left alone:
    its scans still read from it and its owner deletes it when they end.
    """
    removed = 0
    for name in fs.listdir(""):
        if not name.startswith(TRASH_PREFIX) or not fs.is_dir(name):
            continue
        lock = fs.sub(name).lock(TABLE_LOCK)
        try:
            lock.acquire()
        except TableLocked:
            continue
        try:
            fs.delete_dir(name)
        finally:
            lock.release()
        removed += 1
    return removed
