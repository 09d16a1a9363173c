"""Checks, before a job starts its work, that the places it will write can be written.

A job that finds out after minutes of work that its ``--json`` file or its
output folder cannot be written loses the work; these checks run first and
raise :class:`InvalidArgument` naming the path.  They probe by creating
(and removing) a file in the nearest existing folder, since permission bits
say little for root or for special filesystems such as ``/proc``.  URIs
(``s3://``...) are left to the filesystem: probing them costs requests.
"""

from __future__ import annotations

import os
import tempfile

from storage import InvalidArgument

__all__ = ["check_writable_file", "check_writable_folder"]


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _local(path: str) -> str:
    return os.path.abspath(path[len("file://"):] if path.startswith("file://") else path)


def _probe(folder: str, what: str, path: str) -> None:
    """Create and delete a file in the existing folder ``folder``."""
    if not os.path.isdir(folder):
        raise InvalidArgument(f"cannot write {what} {path}: {folder} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InvalidArgument(f"cannot write {what} {path}: {folder} is not writable ({exc.strerror or exc})") from None


def _nearest_existing(path: str) -> str:
    current = path
    while not os.path.exists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def check_writable_folder(path: str, what: str) -> None:
    """``path`` is a folder that exists or can be created, and files can be written in it."""
    if not path or _is_uri(path):
        return
    local = _local(path)
    if os.path.exists(local) and not os.path.isdir(local):
        raise InvalidArgument(f"cannot write {what} {path}: it is a file, not a folder")
    _probe(_nearest_existing(local), what, path)


def check_writable_file(path: str | None, what: str) -> None:
    """``path`` can be created or replaced as a file (its folder exists and is writable)."""
    if not path or _is_uri(path):
        return
    local = _local(path)
    if os.path.isdir(local):
        raise InvalidArgument(f"cannot write {what} {path}: it is a folder")
    folder = os.path.dirname(local)
    if not os.path.isdir(folder):
        raise InvalidArgument(f"cannot write {what} {path}: the folder {folder} does not exist")
    if os.path.exists(local) and not os.access(local, os.W_OK):
        raise InvalidArgument(f"cannot write {what} {path}: the file is read-only")
    _probe(folder, what, path)
