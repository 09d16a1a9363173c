"""An error-injecting filesystem for testing the engine's failure paths.

Shaped like Pebble's ``vfs/errorfs`` and LevelDB's fault-injection test
environment: :class:`FaultFileSystem` is the engine's own
:class:`~storage.vfs.fs.FileSystem` over a real local directory, with every
mutating call counted by a shared :class:`FaultInjector`:

* ``create`` (a file opened for writing), ``write`` (one write call),
  ``sync`` (fsync of a file or a directory), ``rename`` and ``delete``
  (a file, or a directory tree).  ``injector.fail("sync", 3)`` makes the
  third sync from now raise ``OSError`` (EIO by default; ENOSPC stands for
  a full disk).  A failing write first writes half its bytes, as a torn
  write on a real disk would.  ``persistent=True`` keeps failing every later
  call of that kind, as a full disk does.
* ``injector.power_cut()`` loses what a power cut loses: file data written
  after the file's last fsync, and files created since their directory's last
  fsync.  Renames are durable on return (the filesystem layer fsyncs the
  directory after each), so they are kept.  After the cut every call fails:
  the machine is off until the test reopens the root with a plain filesystem.

Reads are counted and fail the same way: ``open`` (a file opened for
reading), ``read`` (one read of an opened file, or a whole-file read),
``list`` (a directory listing) and ``stat`` (``exists``, ``is_dir``,
``size``).  ``injector.fail("read", 2, path="*.sf")`` counts only the
operations whose full path matches the ``fnmatch`` pattern, so the second
read of a store file fails whatever else is read meanwhile.  The injector is
shared by every ``sub()`` filesystem, so one injector sees a whole root.

``FaultFileSystem(root, can_append=False)`` refuses appends, as an object
store does, so the engine takes its object-store paths (the WAL kept as
segment objects) over the same local directory.
"""

from __future__ import annotations

import errno
import fnmatch
import io
import os
import posixpath
import threading

import pyarrow as pa

from ..errors import StorageError, StorageIOError
from .fs import FileSystem, WritableFile

__all__ = ["FaultInjector", "FaultFileSystem", "InjectedFault", "KINDS", "READ_KINDS", "ALL_KINDS"]

KINDS = ("create", "write", "sync", "rename", "delete")
"""The kinds of mutating operation an injector counts and can fail."""

READ_KINDS = ("open", "read", "list", "stat")
"""The kinds of reading operation an injector counts and can fail."""

ALL_KINDS = KINDS + READ_KINDS


_ACTIONS = {
    "create": "creating", "write": "writing", "sync": "syncing", "rename": "renaming to", "delete": "deleting",
    "open": "opening", "read": "reading", "list": "listing", "stat": "checking",
}


class InjectedFault(StorageIOError):
    """An I/O error raised on purpose by a :class:`FaultInjector`: one line as a
    real one reads (``no space left on device writing <path> (injected)``)."""

    def __init__(self, code: int, action: str, path: str):
        reason = os.strerror(code)
        super().__init__(f"{reason[:1].lower()}{reason[1:]} {action} {path} (injected)", code, path)


class FaultInjector:
    """Counts operations by kind, fails the chosen one, and simulates a power cut."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(ALL_KINDS, 0)
        self.failures = 0
        self._lock = threading.Lock()
        # (kind, path pattern or None) -> [matching operations seen, the one that fails, errno, persistent]
        self._armed: dict[tuple[str, str | None], list] = {}
        self._off = False
        self._synced: dict[str, int] = {}  # absolute path -> bytes known durable
        self._unsynced_entries: dict[str, set[str]] = {}  # absolute dir -> files created since its last fsync

    # -- arming -------------------------------------------------------------
    def fail(self, kind: str, nth: int, error: int = errno.EIO, persistent: bool = False,
             path: str | None = None) -> None:
        """Make the ``nth`` ``kind`` operation from now fail (and every later one if ``persistent``).

        With ``path`` (an ``fnmatch`` pattern over the full path) only the
        operations on matching paths are counted towards ``nth`` and failed.
        Arming the same kind and pattern again replaces the earlier arming.
        """
        if kind not in ALL_KINDS:
            raise ValueError(f"kind must be one of {ALL_KINDS}, got {kind!r}")
        if not isinstance(nth, int) or nth < 1:
            raise ValueError(f"nth must be a positive int, got {nth!r}")
        if path is not None and (not isinstance(path, str) or not path):
            raise ValueError(f"path must be a non-empty fnmatch pattern, got {path!r}")
        with self._lock:
            self._armed[(kind, path)] = [0, nth, error, persistent]

    def disarm(self) -> None:
        """Stop failing anything (counting goes on)."""
        with self._lock:
            self._armed.clear()

    def check(self, kind: str, path: str) -> int:
        """Count one ``kind`` operation on ``path``; raise if it is the one to fail.

        Returns the error code when the operation must fail *after* a partial
        effect (a torn write): the caller does the partial part, then raises
        :class:`InjectedFault` with it.  Returns 0 otherwise.
        """
        with self._lock:
            if self._off:
                raise InjectedFault(errno.EIO, "with the power off:", path)
            self.counts[kind] += 1
            code = 0
            for (armed_kind, pattern), rule in self._armed.items():
                if armed_kind != kind or (pattern is not None and not fnmatch.fnmatchcase(path, pattern)):
                    continue
                rule[0] += 1
                seen, nth, error, persistent = rule
                if seen == nth or (seen > nth and persistent):
                    code = error
            if not code:
                return 0
            self.failures += 1
        if kind == "write":
            return code
        raise InjectedFault(code, _ACTIONS[kind], path)

    # -- durability model --------------------------------------------------------
    def opened(self, full: str, size: int, created: bool) -> None:
        with self._lock:
            self._synced[full] = size if not created else 0
            if created:
                self._unsynced_entries.setdefault(posixpath.dirname(full), set()).add(full)

    def synced(self, full: str, size: int) -> None:
        with self._lock:
            self._synced[full] = size

    def dir_synced(self, full_dir: str) -> None:
        with self._lock:
            self._unsynced_entries.pop(full_dir.rstrip("/"), None)

    def renamed(self, full_src: str, full_dst: str) -> None:
        with self._lock:
            if full_src in self._synced:
                self._synced[full_dst] = self._synced.pop(full_src)
            for entries in self._unsynced_entries.values():
                entries.discard(full_src)

    def deleted(self, full: str) -> None:
        with self._lock:
            self._synced.pop(full, None)
            for entries in self._unsynced_entries.values():
                entries.discard(full)

    def power_cut(self) -> dict[str, int]:
        """Drop unsynced data and unsynced new files, then fail every later call.

        Returns what was lost: ``{"truncated": files cut back, "removed": files lost}``.
        """
        with self._lock:
            self._off = True
            truncated = removed = 0
            lost = {p for entries in self._unsynced_entries.values() for p in entries}
            for path in lost:
                if os.path.exists(path):
                    os.remove(path)
                    removed += 1
            for path, size in self._synced.items():
                if path not in lost and os.path.exists(path) and os.path.getsize(path) > size:
                    os.truncate(path, size)
                    truncated += 1
            self._synced.clear()
            self._unsynced_entries.clear()
            return {"truncated": truncated, "removed": removed}


class _FaultWritable:
    """A writable file whose writes and syncs go through the injector."""

    def __init__(self, inner: WritableFile, injector: FaultInjector, full: str):
        self._inner = inner
        self._injector = injector
        self._full = full
        self.path = full

    def write(self, data: bytes) -> int:
        code = self._injector.check("write", self._full)
        if code:
            self._inner.write(bytes(memoryview(data)[: len(data) // 2]))  # a torn write
            raise InjectedFault(code, "writing", self._full)
        return self._inner.write(data)

    def tell(self) -> int:
        return self._inner.tell()

    def sync(self) -> None:
        self._injector.check("sync", self._full)
        self._inner.sync()
        self._injector.synced(self._full, self._inner.tell())

    def close(self) -> None:
        self._inner.close()  # closing is never refused: it must not leak descriptors


class _FaultReadable(io.RawIOBase):
    """A file opened for reading whose every read goes through the injector.

    Wrapped in ``pa.PythonFile``, so callers get the ``NativeFile`` they
    expect (``read_at`` from several threads included: Arrow serialises the
    seek and the read).
    """

    def __init__(self, inner: pa.NativeFile, injector: FaultInjector, full: str):
        super().__init__()
        self._inner = inner
        self._injector = injector
        self._full = full
        self._size = inner.size()
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int = -1) -> bytes:
        self._injector.check("read", self._full)
        left = max(0, self._size - self._pos)
        n = left if size is None or size < 0 else min(size, left)
        data = self._inner.read_at(n, self._pos) if n else b""
        self._pos += len(data)
        return data

    def close(self) -> None:
        self._inner.close()
        super().close()


class FaultFileSystem(FileSystem):
    """A local :class:`~storage.vfs.fs.FileSystem` whose calls go through a :class:`FaultInjector`.

    ``can_append=False`` makes it refuse appends as an object store does.
    """

    def __init__(self, root: str, injector: FaultInjector | None = None, can_append: bool = True):
        super().__init__(root)
        if not self.is_local:
            raise ValueError("FaultFileSystem wraps a local directory")
        self.injector = injector or FaultInjector()
        self._append = can_append

    @property
    def can_append(self) -> bool:
        """Whether appends are allowed (False: behave as an object store)."""
        return self._append

    # -- reads ----------------------------------------------------------------
    def exists(self, path: str) -> bool:
        self.injector.check("stat", self._full(path))
        return super().exists(path)

    def is_dir(self, path: str) -> bool:
        self.injector.check("stat", self._full(path))
        return super().is_dir(path)

    def size(self, path: str) -> int:
        self.injector.check("stat", self._full(path))
        return super().size(path)

    def size_and_version(self, path: str) -> tuple[int, tuple]:
        self.injector.check("stat", self._full(path))
        return super().size_and_version(path)

    def listdir(self, path: str) -> list[str]:
        self.injector.check("list", self._full(path))
        return super().listdir(path)

    def open_read(self, path: str) -> pa.NativeFile:
        full = self._full(path)
        self.injector.check("open", full)
        return pa.PythonFile(_FaultReadable(super().open_read(path), self.injector, full), mode="r")

    def read_bytes(self, path: str) -> bytes:
        full = self._full(path)
        self.injector.check("open", full)
        self.injector.check("read", full)
        return super().read_bytes(path)

    # -- writes ---------------------------------------------------------------
    def write_bytes(self, path: str, data: bytes) -> None:
        if self._append:
            super().write_bytes(path, data)
            return
        # As an object store's PUT: the object is whole or absent, never torn,
        # and durable once the call returns.
        full = self._full(path)
        self.injector.check("create", full)
        code = self.injector.check("write", full)
        if code:
            raise InjectedFault(code, "writing", full)
        staged = f"{full}.put-{threading.get_ident()}"
        with open(staged, "wb") as f:
            f.write(data)
        os.replace(staged, full)
        self.injector.deleted(full)  # nothing of it is left to lose in a power cut


    def create(self, path: str) -> WritableFile:
        full = self._full(path)
        self.injector.check("create", full)
        inner = super().create(path)
        self.injector.opened(full, 0, created=True)
        return _FaultWritable(inner, self.injector, full)

    def open_append(self, path: str) -> WritableFile:
        full = self._full(path)
        if not self._append:
            raise StorageError(f"cannot append to {full}: this filesystem writes whole files only")
        existed = os.path.exists(full)
        self.injector.check("create", full)
        inner = super().open_append(path)
        self.injector.opened(full, inner.tell(), created=not existed)
        return _FaultWritable(inner, self.injector, full)

    def rename(self, src: str, dst: str, durable: bool = True) -> None:
        full_src, full_dst = self._full(src), self._full(dst)
        self.injector.check("rename", full_dst)
        try:
            super().rename(src, dst, durable)  # durable: also fsyncs the directory, through sync_dir below
        finally:
            # the directory fsync may fail after the rename itself happened
            if not os.path.exists(full_src) and os.path.exists(full_dst):
                self.injector.renamed(full_src, full_dst)

    def sync_dir(self, path: str) -> None:
        full = self._full(path)
        self.injector.check("sync", full)
        super().sync_dir(path)
        self.injector.dir_synced(full)

    def delete(self, path: str, missing_ok: bool = False) -> None:
        full = self._full(path)
        self.injector.check("delete", full)
        super().delete(path, missing_ok)
        self.injector.deleted(full)

    def delete_dir(self, path: str) -> None:
        full = self._full(path)
        self.injector.check("delete", full)
        super().delete_dir(path)
