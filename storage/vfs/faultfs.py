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

Reads are not counted and never fail.  The injector is shared by every
``sub()`` filesystem, so one injector sees a whole root.
"""

from __future__ import annotations

import errno
import os
import posixpath
import threading

from .fs import FileSystem, WritableFile

__all__ = ["FaultInjector", "FaultFileSystem", "InjectedFault", "KINDS"]

KINDS = ("create", "write", "sync", "rename", "delete")
"""The kinds of operation an injector counts and can fail."""


class InjectedFault(OSError):
    """An I/O error raised on purpose by a :class:`FaultInjector`."""


class FaultInjector:
    """Counts operations by kind, fails the chosen one, and simulates a power cut."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(KINDS, 0)
        self.failures = 0
        self._lock = threading.Lock()
        self._armed: dict[str, tuple[int, int, bool]] = {}  # kind -> (count that fails, errno, persistent)
        self._off = False
        self._synced: dict[str, int] = {}  # absolute path -> bytes known durable
        self._unsynced_entries: dict[str, set[str]] = {}  # absolute dir -> files created since its last fsync

    # -- arming -------------------------------------------------------------
    def fail(self, kind: str, nth: int, error: int = errno.EIO, persistent: bool = False) -> None:
        """Make the ``nth`` ``kind`` operation from now fail (and every later one if ``persistent``)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if not isinstance(nth, int) or nth < 1:
            raise ValueError(f"nth must be a positive int, got {nth!r}")
        with self._lock:
            self._armed[kind] = (self.counts[kind] + nth, error, persistent)

    def disarm(self) -> None:
        """Stop failing anything (counting goes on)."""
        with self._lock:
            self._armed.clear()

    def check(self, kind: str, path: str) -> bool:
        """Count one ``kind`` operation on ``path``; raise if it is the one to fail.

        Returns True when the operation must fail *after* a partial effect (a
        torn write): the caller does the partial part, then calls :meth:`raise_for`.
        """
        with self._lock:
            if self._off:
                raise InjectedFault(errno.EIO, "injected: the power is off", path)
            self.counts[kind] += 1
            armed = self._armed.get(kind)
            if armed is None:
                return False
            at, code, persistent = armed
            if self.counts[kind] < at or (self.counts[kind] > at and not persistent):
                return False
            self.failures += 1
        if kind == "write":
            return True
        raise InjectedFault(code, f"injected {kind} failure", path)

    def raise_for(self, kind: str, path: str) -> None:
        code = self._armed.get(kind, (0, errno.EIO, False))[1]
        raise InjectedFault(code, f"injected {kind} failure", path)

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
        if self._injector.check("write", self._full):
            self._inner.write(bytes(memoryview(data)[: len(data) // 2]))  # a torn write
            self._injector.raise_for("write", self._full)
        return self._inner.write(data)

    def tell(self) -> int:
        return self._inner.tell()

    def sync(self) -> None:
        self._injector.check("sync", self._full)
        self._inner.sync()
        self._injector.synced(self._full, self._inner.tell())

    def close(self) -> None:
        self._inner.close()  # closing is never refused: it must not leak descriptors


class FaultFileSystem(FileSystem):
    """A local :class:`~storage.vfs.fs.FileSystem` whose mutations go through a :class:`FaultInjector`."""

    def __init__(self, root: str, injector: FaultInjector | None = None):
        super().__init__(root)
        if not self.is_local:
            raise ValueError("FaultFileSystem wraps a local directory")
        self.injector = injector or FaultInjector()

    def create(self, path: str) -> WritableFile:
        full = self._full(path)
        self.injector.check("create", full)
        inner = super().create(path)
        self.injector.opened(full, 0, created=True)
        return _FaultWritable(inner, self.injector, full)

    def open_append(self, path: str) -> WritableFile:
        full = self._full(path)
        existed = os.path.exists(full)
        self.injector.check("create", full)
        inner = super().open_append(path)
        self.injector.opened(full, inner.tell(), created=not existed)
        return _FaultWritable(inner, self.injector, full)

    def rename(self, src: str, dst: str) -> None:
        full_src, full_dst = self._full(src), self._full(dst)
        self.injector.check("rename", full_dst)
        try:
            super().rename(src, dst)  # also fsyncs the directory, through sync_dir below
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
