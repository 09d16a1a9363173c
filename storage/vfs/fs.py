"""The one filesystem layer every engine file access goes through.

Tables live under a root that is a local path (the embedded default) or a
URI that ``pyarrow.fs.FileSystem.from_uri`` understands (``s3://``,
``hdfs://``, ``file://``, ``mock://``).  On a local root the layer uses the
operating system directly where pyarrow offers no equivalent: ``fsync`` for
durability, ``mmap`` for zero-copy block reads, ``flock`` for the writer lock.
On other filesystems it uses pyarrow's streams, and a lock object created
exclusively.  On S3-compatible object stores (``s3://``, see
:mod:`storage.vfs.objstore`) objects are written whole and never appended to,
replacements are conditional puts instead of renames, and the writer lock is
a renewed lease (:mod:`storage.vfs.writer_lease`).

Paths passed to methods are relative to the root and use ``/``.
"""

from __future__ import annotations

import errno
import os
import socket
import uuid
from typing import Protocol

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import InvalidArgument, StorageError, StorageIOError, TableLocked
from .objstore import ObjectStore, S3Settings
from .writer_lease import Lease

__all__ = ["FileSystem", "WritableFile", "Lock", "open_filesystem", "TEMP_MARK", "MMAP_ENV", "mmap_enabled"]

MMAP_ENV = "REGIONSCAN_MMAP"
"""Set to ``0`` to read local store files with ``pread`` instead of mapping them.  A mapped
file's pages count in the process's resident size (clean and reclaimable, but a container
monitor that kills on resident size counts them); read, only the blocks a reader keeps
(the block cache's, charged to it) stay in the process.  The engine worker sets it to 0."""


def mmap_enabled() -> bool:
    """Whether local files are mapped for reading (:data:`MMAP_ENV`, default yes)."""
    return os.environ.get(MMAP_ENV, "1").strip().lower() not in ("0", "false", "no", "off")

TEMP_MARK = ".tmp-"
"""Marks the temporary sibling :meth:`FileSystem.write_atomic` writes before its rename."""


class WritableFile(Protocol):
    """A file being written: ``write``, ``sync`` (durable on return), ``close``."""

    def write(self, data: bytes) -> int: ...
    def sync(self) -> None: ...
    def close(self) -> None: ...
    def tell(self) -> int: ...


class _LocalWritable:
    """An OS file descriptor opened for writing or appending."""

    def __init__(self, path: str, append: bool):
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        try:
            self._fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageIOError.of(exc, "creating", path) from exc
        self._pos = os.lseek(self._fd, 0, os.SEEK_END)
        self.path = path

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError as exc:
            # os.write names no file: a full disk must say which file it stopped
            self._pos += len(data) - len(view)
            raise StorageIOError.of(exc, "writing", self.path) from exc
        self._pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self._pos

    def sync(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise StorageIOError.of(exc, "syncing", self.path) from exc

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class _ArrowWritable:
    """A pyarrow output stream; ``sync`` flushes (the store decides durability)."""

    def __init__(self, stream: pa.NativeFile, path: str):
        self._stream = stream
        self.path = path

    def write(self, data: bytes) -> int:
        return self._stream.write(data)

    def tell(self) -> int:
        return self._stream.tell()

    def sync(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        if not self._stream.closed:
            self._stream.close()


class Lock:
    """A writer lock on a directory; release with :meth:`release` or ``with``."""

    def __init__(self, fs: "FileSystem", path: str):
        self._fs = fs
        self._path = path
        self._fd: int | None = None
        self._token: bytes | None = None
        self._lease = None

    def acquire(self) -> "Lock":
        """Take the lock or raise :class:`TableLocked` naming the holder."""
        owner = f"{socket.gethostname()}:{os.getpid()}".encode()
        if self._fs.is_local:
            import fcntl

            full = self._fs.local_path(self._path)
            fd = os.open(full, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = os.pread(fd, 256, 0).decode(errors="replace")
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    raise TableLocked(f"{full} is locked by another writer ({holder or 'unknown'})") from None
                raise
            os.ftruncate(fd, 0)
            os.pwrite(fd, owner, 0)
            self._fd = fd
        elif self._fs.object_store is not None:
            store = self._fs.object_store
            self._lease = Lease(store, self._fs._full(self._path), store.settings.lease_seconds).acquire()
        else:
            # Other non-local filesystems have no advisory locks: an
            # exclusively created marker object is the best they offer.
            if self._fs.exists(self._path):
                holder = self._fs.read_bytes(self._path).decode(errors="replace")
                raise TableLocked(f"{self._fs.uri(self._path)} is locked by another writer ({holder})")
            self._token = owner + b" " + uuid.uuid4().hex.encode()
            self._fs.write_bytes(self._path, self._token)
        return self

    def release(self) -> None:
        """Give the lock back; safe to call twice."""
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None
        elif self._lease is not None:
            self._lease.release()
            self._lease = None
        elif self._token is not None:
            self._fs.delete(self._path, missing_ok=True)
            self._token = None

    def __enter__(self) -> "Lock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


class FileSystem:
    """A root directory on a pyarrow filesystem, with the calls the engine needs."""

    def __init__(self, root: str):
        if not isinstance(root, (str, os.PathLike)) or not str(root):
            raise InvalidArgument(f"root must be a non-empty path or URI, got {root!r}")
        root = os.fspath(root)
        self.object_store: ObjectStore | None = None
        """The S3-compatible store behind an ``s3://`` root (None elsewhere)."""
        if root.startswith("s3://"):
            settings, base = S3Settings.from_uri(root)
            self.object_store = ObjectStore(settings)
            fs = self.object_store.arrow
        elif "://" in root:
            fs, base = pafs.FileSystem.from_uri(root)
        else:
            fs, base = pafs.LocalFileSystem(), os.path.abspath(root)
        self._fs = fs
        self.is_local = isinstance(fs, pafs.LocalFileSystem)
        self.base = base.rstrip("/") if base != "/" else base
        self.root = root

    # -- paths ---------------------------------------------------------
    def _full(self, path: str) -> str:
        if not path:
            return self.base
        if path.startswith("/") or ".." in path.split("/"):
            raise InvalidArgument(f"path {path!r} must be relative to the root and stay inside it")
        return f"{self.base}/{path}"

    def local_path(self, path: str) -> str:
        """The OS path of ``path`` (local roots only)."""
        return self._full(path)

    def uri(self, path: str = "") -> str:
        """A printable location of ``path`` for messages (never with credentials)."""
        if self.object_store is not None:
            return f"s3://{self._full(path)}"
        return self._full(path)

    @property
    def can_append(self) -> bool:
        """Whether files can be appended to (object stores cannot: objects are written whole)."""
        return self.object_store is None

    @staticmethod
    def join(*parts: str) -> str:
        """Join relative path parts with ``/``."""
        return "/".join(p.strip("/") for p in parts if p)

    # -- queries -------------------------------------------------------
    def exists(self, path: str) -> bool:
        if self.is_local:
            return os.path.exists(self._full(path))
        return self._fs.get_file_info(self._full(path)).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        if self.is_local:
            return os.path.isdir(self._full(path))
        return self._fs.get_file_info(self._full(path)).type == pafs.FileType.Directory

    def size(self, path: str) -> int:
        if self.is_local:
            return os.path.getsize(self._full(path))
        return self._fs.get_file_info(self._full(path)).size

    def size_and_version(self, path: str) -> tuple[int, tuple]:
        """The size of ``path`` and what tells this file from another one written at the same
        path: device, inode, modification and change times on a local root (a file deleted and
        written again gets a new change time even where its inode number is reused), the
        modification time elsewhere (an object store's, to the second).  One stat, or one HEAD."""
        full = self._full(path)
        if self.is_local:
            st = os.stat(full)
            return st.st_size, (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        info = self._fs.get_file_info(full)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(full)
        return info.size, (info.mtime_ns,)

    def listdir(self, path: str) -> list[str]:
        """Names (not paths) of the entries of a directory, sorted; [] if missing."""
        full = self._full(path)
        if self.is_local:
            try:
                return sorted(os.listdir(full))
            except FileNotFoundError:
                return []
        infos = self._fs.get_file_info(pafs.FileSelector(full, allow_not_found=True))
        return sorted(i.base_name for i in infos)

    # -- reading -------------------------------------------------------
    def open_read(self, path: str) -> pa.NativeFile:
        """A random-access file; ``read_at`` on it is safe from many threads."""
        full = self._full(path)
        try:
            if self.is_local:
                if os.path.getsize(full) == 0:
                    return pa.BufferReader(b"")
                return pa.memory_map(full, "r") if mmap_enabled() else pa.OSFile(full, "rb")
            return self._fs.open_input_file(full)
        except FileNotFoundError:
            raise
        except OSError as exc:
            if not self.exists(path):
                raise FileNotFoundError(full) from exc
            raise StorageError(f"cannot open {full}: {exc}") from exc

    def read_bytes(self, path: str) -> bytes:
        full = self._full(path)
        if self.object_store is not None:
            return self.object_store.get(full)  # also remembers the ETag for a later commit
        if self.is_local:
            with open(full, "rb") as f:
                return f.read()
        with self._fs.open_input_stream(full) as f:
            return f.read()

    # -- writing -------------------------------------------------------
    def makedirs(self, path: str) -> None:
        full = self._full(path)
        if self.is_local:
            try:
                os.makedirs(full, exist_ok=True)
            except FileExistsError:
                raise
            except OSError as exc:
                raise StorageIOError.of(exc, "creating directory", full) from exc
        else:
            self._fs.create_dir(full, recursive=True)

    def create(self, path: str) -> WritableFile:
        """Open a new file for writing (truncating any old one)."""
        full = self._full(path)
        if self.is_local:
            return _LocalWritable(full, append=False)
        if self.object_store is not None:
            return self.object_store.writer(full)
        return _ArrowWritable(self._fs.open_output_stream(full), full)

    def open_append(self, path: str) -> WritableFile:
        """Open a file for appending, creating it if needed."""
        full = self._full(path)
        if self.is_local:
            return _LocalWritable(full, append=True)
        if self.object_store is not None:
            raise StorageError(f"cannot append to {self.uri(path)}: object stores write whole objects")
        return _ArrowWritable(self._fs.open_append_stream(full), full)

    def write_bytes(self, path: str, data: bytes) -> None:
        if self.object_store is not None:
            full = self._full(path)
            self.object_store.check_leases(full)
            self.object_store.put(full, data)
            return
        f = self.create(path)
        try:
            f.write(data)
            f.sync()
        finally:
            f.close()

    def write_atomic(self, path: str, data: bytes, durable: bool = True) -> None:
        """Replace ``path`` with ``data`` so a crash leaves the old or the new file.

        Write a temporary sibling, fsync it, rename it over the target, fsync
        the directory (local roots) so the rename itself is durable.  With
        ``durable`` false a local root skips both fsyncs: other processes still
        see the old or the whole new file, but an operating-system crash may
        leave neither (for files no process needs after such a crash, as a
        reader's pins: two fsyncs cost 8-60 ms on a busy disk).

        On object stores there is no rename (it is a copy and a delete, not
        atomic): the object is replaced by one conditional PUT, which is
        atomic, and only if it is still the version this process last read
        or wrote (absent if never seen).  A stale writer therefore fails
        with :class:`~storage.vfs.objstore.PreconditionFailed` instead of
        overwriting a newer commit, and a writer whose lease is lost or
        expiring fails with :class:`TableLocked` before it writes.
        """
        if self.object_store is not None:
            full = self._full(path)
            self.object_store.check_leases(full)
            self.object_store.put_cas(full, data)
            return
        tmp = f"{path}{TEMP_MARK}{uuid.uuid4().hex[:8]}"
        try:
            if durable or not self.is_local:
                self.write_bytes(tmp, data)
                self.rename(tmp, path)
            else:
                f = self.create(tmp)
                try:
                    f.write(data)
                finally:
                    f.close()
                self.rename(tmp, path, durable=False)
        except BaseException:
            try:  # best effort: a failed disk may refuse this too; remove_temporaries catches it later
                self.delete(tmp, missing_ok=True)
            except OSError:
                pass
            raise

    def remove_temporaries(self, path: str = "") -> int:
        """Delete the temporary files that failed :meth:`write_atomic` calls left in directory ``path``.

        Only a writer that holds the lock may call it (another writer's
        temporary file may be in flight otherwise).  Returns how many it deleted.
        """
        doomed = [name for name in self.listdir(path) if TEMP_MARK in name]
        for name in doomed:
            self.delete(self.join(path, name), missing_ok=True)
        return len(doomed)

    def rename(self, src: str, dst: str, durable: bool = True) -> None:
        """Rename atomically (replacing ``dst``), durable on return on local roots (unless
        ``durable`` is false: the directory is not fsynced, see :meth:`write_atomic`)."""
        full_src, full_dst = self._full(src), self._full(dst)
        if self.is_local:
            try:
                os.replace(full_src, full_dst)
            except FileNotFoundError:
                raise
            except OSError as exc:
                raise StorageIOError.of(exc, f"renaming {full_src} to", full_dst) from exc
            if durable:
                self.sync_dir(os.path.dirname(dst))
        else:
            self._fs.move(full_src, full_dst)
            if self.object_store is not None:
                self.object_store.forget(full_src)
                self.object_store.forget(full_dst)

    def sync_dir(self, path: str) -> None:
        """fsync a directory so entries created or renamed in it survive a crash."""
        if not self.is_local:
            return
        fd = os.open(self._full(path), os.O_RDONLY)
        try:
            os.fsync(fd)
        except OSError as exc:
            raise StorageIOError.of(exc, "syncing directory", self._full(path)) from exc
        finally:
            os.close(fd)

    def delete(self, path: str, missing_ok: bool = False) -> None:
        full = self._full(path)
        try:
            if self.is_local:
                os.remove(full)
            else:
                self._fs.delete_file(full)
                if self.object_store is not None:
                    self.object_store.forget(full)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def delete_dir(self, path: str) -> None:
        """Remove a directory and everything under it; no error if missing."""
        full = self._full(path)
        if self.is_local:
            import shutil

            shutil.rmtree(full, ignore_errors=True)
        elif self.exists(path):
            self._fs.delete_dir(full)
            if self.object_store is not None:
                self.object_store.forget(full, prefix=True)

    def lock(self, path: str) -> Lock:
        """A :class:`Lock` on ``path`` (call ``acquire`` or use ``with``)."""
        return Lock(self, path)

    def sub(self, path: str) -> "FileSystem":
        """A FileSystem rooted at ``path`` under this root."""
        child = object.__new__(type(self))  # a wrapping subclass (storage.vfs.faultfs) wraps its children too
        child.__dict__.update(self.__dict__)  # the pyarrow filesystem and object store are shared
        child.base = self._full(path)
        child.root = self.root.rstrip("/") + "/" + path
        return child


def open_filesystem(root: str) -> FileSystem:
    """Open the filesystem layer for a root path or URI."""
    return FileSystem(root)
