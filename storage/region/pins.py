"""Pinned files: store files and WAL files that snapshot readers still need.

A reader that fixed its view of a table (the input format's splits, a Spark
job's partitions) registers the files it will read in
``<table>/pins/<expiry ms>-<id>.pin`` (JSON ``{"expires_ms", "files", "wal",
"owner"}``, paths relative to the table directory).  When the engine retires a file
(a compaction's inputs, a split's parent region, a flushed WAL, files an
overwrite bulk load replaces), it moves a pinned one to
``<table>/archive/<same relative path>`` instead of deleting it; readers look
there for a file that has left its region.  Archived files that no live pin
names any more are deleted by :func:`clean_archive`, which writers run on
open and after compactions.  A pin expires at the time in its name, so a
reader that dies without releasing its pin cannot keep files forever.

``owner`` names the process that wrote the pin: ``{"host": <hostname>, "boot":
<the kernel's boot id>, "pidns": <its pid namespace, as /proc/self/ns/pid reads>,
"pid": <pid>, "start": <its start time, clock ticks after boot>}`` (Linux;
elsewhere absent).  A pin whose owner is gone (a killed
engine worker's: such workers never release their shared pins) protects
nothing and is deleted by the next :func:`write_pin` or :func:`release_pin`
in the table, long before it expires.  Only a process on the same host and
boot and in the same pid namespace (containers sharing a folder see other pids)
judges an owner, by ``/proc/<pid>/stat``: the pid must exist, not be a
zombie, and have started at the recorded time, so a reused pid keeps no dead
owner's pin alive and a live owner's pin is never taken for a dead one's.  A
pin without ``owner`` (written before it was recorded, or by another host)
lasts until it expires.
"""

from __future__ import annotations

import errno
import json
import os
import socket
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
    "own_identity",
    "owner_gone",
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
    owner = own_identity()
    if owner is not None:
        doc["owner"] = owner
    try:
        table_fs.makedirs(PINS_DIR)
        # not fsynced: a pin protects files for readers that an OS crash ends too, and a half
        # written pin pins nothing (live_pins); every scan's planning writes one
        table_fs.write_atomic(f"{PINS_DIR}/{pin_id}.pin", json.dumps(doc).encode(), durable=False)
    except OSError as exc:
        if exc.errno in _READ_ONLY:
            return None  # a read-only root: reads still work, only without protection from deletion
        raise  # a failed write on a writable root: the reader must not go on unprotected
    _drop_stale(table_fs)
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
        _drop_stale(table_fs)


def _expired(name: str, now: int) -> bool:
    stem = name.split("-", 1)[0]
    return not name.endswith(".pin") or not stem.isdigit() or int(stem) < now


# -- owners ---------------------------------------------------------------------------------

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_IDENTITY: dict[int, dict | None] = {}  # pid -> this process's owner record (a fork gets its own)
_OWNERS: dict[tuple, dict | None] = {}  # (table root, folder, pin name) -> its owner record, read once
_OWNERS_LOCK = threading.Lock()


def _read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("ascii", "replace")
    except OSError:
        return None


def _process_start(pid: int) -> tuple[str, int] | None:
    """``(state, start time in clock ticks after boot)`` of process ``pid``, or None if no
    such process.  The fields after the command name (which may hold spaces and parentheses)
    are split after its last ``)``: state is field 3, start time field 22 (proc(5))."""
    stat = _read_text(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def own_identity() -> dict | None:
    """This process's owner record (what its pins record), or None where ``/proc`` cannot
    tell (not Linux)."""
    pid = os.getpid()
    if pid not in _IDENTITY:
        boot = _read_text(_BOOT_ID)
        me = _process_start(pid)
        try:
            pidns = os.readlink("/proc/self/ns/pid")
        except OSError:
            pidns = None
        _IDENTITY[pid] = None if boot is None or me is None or pidns is None else {
            "host": socket.gethostname(), "boot": boot.strip(), "pidns": pidns, "pid": pid, "start": me[1]}
    return _IDENTITY[pid]


def owner_gone(owner: object) -> bool:
    """Whether the process an ``owner`` record names has certainly ended: same host, boot and
    pid namespace as this process, and its pid gone, a zombie, or now another process (another start
    time).  Anything not judged here (another host, a malformed record) is not gone."""
    me = own_identity()
    if me is None or not isinstance(owner, dict):
        return False
    if any(owner.get(k) != me[k] for k in ("host", "boot", "pidns")):
        return False
    pid, start = owner.get("pid"), owner.get("start")
    if type(pid) is not int or type(start) is not int or pid <= 0:
        return False
    if pid == me["pid"]:
        return start != me["start"]
    now = _process_start(pid)
    return now is None or now[0] in ("Z", "X") or now[1] != start


def _owner_of(table_fs: FileSystem, name: str) -> dict | None:
    """The owner record of pin ``name`` (read once per process), or None without one."""
    key = (table_fs.root, table_fs.base, name)
    with _OWNERS_LOCK:
        if key in _OWNERS:
            return _OWNERS[key]
    try:
        doc = json.loads(table_fs.read_bytes(f"{PINS_DIR}/{name}"))
    except (OSError, ValueError):
        return None  # released while we listed, or half written: judged at the next look
    owner = doc.get("owner") if isinstance(doc, dict) else None
    with _OWNERS_LOCK:
        _OWNERS[key] = owner
    return owner


def _drop_stale(table_fs: FileSystem) -> None:
    """Delete pin files past their expiry, and those whose owner process is gone (readers
    that never released them).  Housekeeping: a failure leaves the pin for the next look."""
    now = clock.now_ms()
    try:
        names = table_fs.listdir(PINS_DIR)
    except OSError:
        return
    for name in names:
        if _expired(name, now) or owner_gone(_owner_of(table_fs, name)):
            try:
                table_fs.delete(f"{PINS_DIR}/{name}", missing_ok=True)
            except OSError:
                continue
    listed = set(names)
    with _OWNERS_LOCK:  # forget the pins that are gone, so the memo stays as small as the folder
        for key in [k for k in _OWNERS if k[:2] == (table_fs.root, table_fs.base) and k[2] not in listed]:
            del _OWNERS[key]


def live_pins(table_fs: FileSystem) -> list[dict]:
    """The unexpired pin documents of processes not known to be gone (:func:`owner_gone`)."""
    now = clock.now_ms()
    out = []
    for name in table_fs.listdir(PINS_DIR):
        if _expired(name, now):
            continue
        try:
            doc = json.loads(table_fs.read_bytes(f"{PINS_DIR}/{name}"))
        except (OSError, ValueError):
            continue  # released while we listed, or half written: pins nothing
        if isinstance(doc, dict) and owner_gone(doc.get("owner")):
            continue  # its reader was killed: it protects nothing (write_pin deletes it)
        out.append(doc)
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
