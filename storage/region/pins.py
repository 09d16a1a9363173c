"""Pinned files: store files and WAL files that snapshot readers still need.

A reader that fixed its view of a table (the input format's splits, a Spark
job's partitions) registers the files it will read in
``<table>/pins/<expiry ms>-<id>.pin`` (JSON ``{"expires_ms", "files", "wal"}``,
paths relative to the table directory).  When the engine retires a file
(a compaction's inputs, a split's parent region, a flushed WAL, files an
overwrite bulk load replaces), it moves a pinned one to
``<table>/archive/<same relative path>`` instead of deleting it; readers look
there for a file that has left its region.  Archived files that no live pin
names any more are deleted by :func:`clean_archive`, which writers run on
open and after compactions.  A pin expires at the time in its name, so a
reader that dies without releasing its pin cannot keep files forever.
"""

from __future__ import annotations

import errno
import json
import threading
import uuid
from typing import Iterable

from .. import clock
from ..vfs.fs import FileSystem

__all__ = [
    "PINS_DIR",
    "ARCHIVE_DIR",
    "write_pin",
    "release_pin",
    "live_pins",
    "pinned_paths",
    "retire",
    "retire_dir",
    "clean_archive",
]

PINS_DIR = "pins"
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)
ARCHIVE_DIR = "archive"


# Pins this process wrote with ``shared=True``, by (table folder, files, WAL files): the pin id
# and its expiry (ms).  A reader that never releases its pin (a Spark read: no hook ends it)
# plans again and again over an unchanged table; each plan reusing the pin of the same files
# keeps one pin file per table state instead of one per query, so listing, reading and
# archiving under pins stay small.
_SHARED: dict[tuple, tuple[str, int]] = {}
_SHARED_LOCK = threading.Lock()
SHARED_REUSE_SHARE = 0.9
"""A shared pin is reused while at least this share of a new pin's time to live is left on it."""


def write_pin(table_fs: FileSystem, files: Iterable[str], wal: Iterable[str], ttl_seconds: int,
              shared: bool = False) -> str | None:
    """Register pinned files; returns the pin id, or None if the root is not writable.

    The expiry leads the file name, so expired pins are found by listing names alone.
    ``shared``: the caller never releases the pin, so this process's earlier shared pin of the
    same files is returned while at least :data:`SHARED_REUSE_SHARE` of ``ttl_seconds`` is left
    on it and its file is still there (a dropped table's pins go with it).
    """
    files, wal = list(files), list(wal)
    now = clock.now_ms()
    ttl_ms = int(ttl_seconds * 1000)
    key = (table_fs.root, tuple(files), tuple(wal))
    if shared:
        with _SHARED_LOCK:
            hit = _SHARED.get(key)
        if hit is not None and hit[1] - now >= SHARED_REUSE_SHARE * ttl_ms and \
                table_fs.exists(f"{PINS_DIR}/{hit[0]}.pin"):
            return hit[0]
    expires = now + ttl_ms
    pin_id = f"{expires:013d}-{uuid.uuid4().hex[:12]}"
    doc = {"expires_ms": expires, "files": files, "wal": wal}
    try:
        table_fs.makedirs(PINS_DIR)
        # not fsynced: a pin protects files for readers that an OS crash ends too, and a half
        # written pin pins nothing (live_pins); every scan's planning writes one
        table_fs.write_atomic(f"{PINS_DIR}/{pin_id}.pin", json.dumps(doc).encode(), durable=False)
    except OSError as exc:
        if exc.errno in _READ_ONLY:
            return None  # a read-only root: reads still work, only without protection from deletion
        raise  # a failed write on a writable root: the reader must not go on unprotected
    _drop_expired(table_fs)
    if shared:
        with _SHARED_LOCK:
            for old in [k for k, (_, until) in _SHARED.items() if until <= now]:
                del _SHARED[old]  # expired: never returned again
            _SHARED[key] = (pin_id, expires)
    return pin_id


def release_pin(table_fs: FileSystem, pin_id: str | None) -> None:
    """Drop a pin registered by :func:`write_pin` (no error if it is gone)."""
    if pin_id:
        try:
            table_fs.delete(f"{PINS_DIR}/{pin_id}.pin", missing_ok=True)
        except OSError:
            pass


def _expired(name: str, now: int) -> bool:
    stem = name.split("-", 1)[0]
    return not name.endswith(".pin") or not stem.isdigit() or int(stem) < now


def _drop_expired(table_fs: FileSystem) -> None:
    """Delete pin files past their expiry (readers that never released them)."""
    now = clock.now_ms()
    for name in table_fs.listdir(PINS_DIR):
        if _expired(name, now):
            table_fs.delete(f"{PINS_DIR}/{name}", missing_ok=True)


def live_pins(table_fs: FileSystem) -> list[dict]:
    """The unexpired pin documents."""
    now = clock.now_ms()
    out = []
    for name in table_fs.listdir(PINS_DIR):
        if _expired(name, now):
            continue
        try:
            out.append(json.loads(table_fs.read_bytes(f"{PINS_DIR}/{name}")))
        except (OSError, ValueError):
            continue  # released while we listed, or half written: pins nothing
    return out


def pinned_paths(table_fs: FileSystem) -> set[str]:
    """Every table-relative path a live pin names."""
    paths: set[str] = set()
    for doc in live_pins(table_fs):
        paths.update(doc.get("files", ()))
        paths.update(doc.get("wal", ()))
    return paths


def retire(table_fs: FileSystem, path: str, pinned: set[str] | None = None) -> None:
    """Delete a file the table no longer uses, or archive it if a live pin names it."""
    if pinned is None:
        pinned = pinned_paths(table_fs)
    if not table_fs.can_append and table_fs.is_dir(path):
        # a WAL kept as segment objects (storage.wal.segments): a directory
        if path in pinned:
            for name in table_fs.listdir(path):
                target = f"{ARCHIVE_DIR}/{path}/{name}"
                table_fs.makedirs(target.rsplit("/", 1)[0])
                table_fs.rename(f"{path}/{name}", target)
        table_fs.delete_dir(path)
        return
    if path in pinned and table_fs.exists(path):
        target = f"{ARCHIVE_DIR}/{path}"
        table_fs.makedirs(target.rsplit("/", 1)[0])
        table_fs.rename(path, target)
    else:
        table_fs.delete(path, missing_ok=True)


def retire_dir(table_fs: FileSystem, path: str) -> None:
    """Delete a directory (a split's parent region), archiving its pinned files first."""
    pinned = {p for p in pinned_paths(table_fs) if p.startswith(path.rstrip("/") + "/")}
    for p in sorted(pinned):
        retire(table_fs, p, pinned)
    table_fs.delete_dir(path)


def clean_archive(table_fs: FileSystem) -> int:
    """Delete archived files that no live pin names; returns how many."""
    if not table_fs.exists(ARCHIVE_DIR):
        return 0
    pinned = pinned_paths(table_fs)
    removed = 0
    stack = [ARCHIVE_DIR]
    while stack:
        folder = stack.pop()
        for name in table_fs.listdir(folder):
            path = f"{folder}/{name}"
            if table_fs.is_dir(path):
                if path[len(ARCHIVE_DIR) + 1:] not in pinned:  # a pinned WAL of segments stays whole
                    stack.append(path)
            elif path[len(ARCHIVE_DIR) + 1:] not in pinned:
                table_fs.delete(path, missing_ok=True)
                removed += 1
    return removed
