"""The WAL writer over a filesystem that appends: one file of records, group
synced by its policy.  :func:`storage.wal.open_writer.open_wal_writer` picks it or the
segment writer (storage.wal.segments) by the filesystem."""

from __future__ import annotations

import logging
import threading
import time
from typing import Sequence

from ..errors import CorruptionError, StorageError
from ..vfs.fs import FileSystem, WritableFile
from .format import HEADER_BYTES, FILE_HEADER_SIZE, SyncPolicy, encode_record
from .reader import WalReader

__all__ = ["WalWriter"]

log = logging.getLogger("storage.wal")


class WalWriter:
    """Appends records to one WAL file.

    Lifecycle: construct (reopens an existing WAL whose last record is
    intact; a new file is created, with its header, by the first
    ``append``, so a writer that logs nothing leaves no file), ``append`` any number of
    times from any threads, then ``close()`` (syncs and stops the flusher).
    ``sync()`` forces durability now whatever the policy.  An I/O error on a
    write or a background sync poisons the writer: later calls re-raise it,
    since the file may end in a partial record.

    Reopening an existing file whose tail is torn raises
    :class:`CorruptionError`: appending behind a torn record would turn it
    into mid-file corruption.  Prefer a new file per open (see the module
    docstring) or call :func:`repair_wal` first.

    On a filesystem that cannot append (object stores),
    :func:`storage.wal.open_writer.open_wal_writer` gives a
    :class:`storage.wal.segments.SegmentWalWriter` instead, which writes the
    log as immutable segment objects.
    """

    def __init__(self, fs: FileSystem, path: str, sync: "SyncPolicy | str | int" = "each"):
        self._policy = SyncPolicy.parse(sync)
        self._fs = fs
        self.path = path
        self._lock = threading.Lock()  # guards writes and the size
        self._wake = threading.Condition(self._lock)  # the flusher waits on it
        self._sync_lock = threading.Lock()  # one fsync at a time
        self._closed = False
        self._error: BaseException | None = None
        self._flusher: threading.Thread | None = None
        self.sync_count = 0
        """How many times the file was fsynced (a metric, per sync not per record)."""
        # pyarrow streams are not safe to flush while another thread writes;
        # OS file descriptors are, so local files sync outside the write lock.
        self._sync_under_write_lock = not fs.is_local

        self._file: WritableFile | None = None
        self._size = self._synced = 0
        if fs.exists(path) and fs.size(path) > 0:
            reader = WalReader(fs, path, decode=False)
            for _ in reader:
                pass
            if reader.torn_tail_bytes:
                raise CorruptionError(
                    f"WAL ends in a torn record of {reader.torn_tail_bytes} bytes; "
                    "repair it (repair_wal) or start a new file before appending",
                    fs.uri(path),
                    reader.valid_length,
                )
            self._file = fs.open_append(path)
            self._size = reader.file_size
            self._synced = self._size
        # else the file is created by the first append (_create): a writer that
        # never logs a record (a table opened and closed, a flush with no write
        # after it) leaves no file for replay and pinned reads to open
        if self._policy.mode == "interval":
            self._flusher = threading.Thread(
                target=self._flush_loop, name=f"wal-flusher:{path}", daemon=True
            )
            self._flusher.start()

    # -- properties ------------------------------------------------------
    @property
    def policy(self) -> SyncPolicy:
        """The sync policy in force."""
        return self._policy

    @property
    def size(self) -> int:
        """Bytes in the file so far, header included (0 until the first record creates it)."""
        return self._size

    @property
    def synced_size(self) -> int:
        """Bytes known to be durable (fsynced) so far."""
        return self._synced

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def usable(self) -> bool:
        """Whether records can still be appended: open, and no write or sync has failed.

        A region replaces an unusable WAL with a new file (the failed one is
        kept for replay until a flush retires it), so writes resume once the
        cause (a full disk) is gone."""
        return not self._closed and self._error is None

    # -- appending -------------------------------------------------------
    def append(self, seq_id: int, cells: Sequence[tuple], defer_sync: bool = False) -> int:
        """Append one record; return the bytes written.

        With policy ``each`` the record is durable on return (with
        ``defer_sync``, once the caller's :meth:`sync_to` of :attr:`size` as
        it was after this call returns: group commit); with ``interval`` it
        is durable at most N ms later; with ``none`` when the OS writes it back.
        """
        record = encode_record(seq_id, cells)  # outside the lock: pure CPU work
        with self._lock:
            self._check_usable()
            if self._file is None:
                self._create()
            try:
                self._file.write(record)
            except BaseException as exc:
                self._error = exc
                raise
            self._size += len(record)
            end = self._size
            if self._flusher is not None:
                self._wake.notify()
        if self._policy.mode == "each" and not defer_sync:
            self._sync_to(end)
        return len(record)

    def sync_to(self, end: int) -> None:
        """Make the log durable up to byte ``end`` (group commit): returns at once
        when an fsync that started after those bytes were written has ended,
        else fsyncs once for every record written so far, whoever wrote it.
        Safe after :meth:`close`, which synced everything."""
        self._sync_to(end)

    def sync(self) -> None:
        """Make everything appended so far durable before returning."""
        with self._lock:
            self._check_usable()
        self._sync_to(self._size)

    def close(self) -> None:
        """Stop the flusher, sync, and close the file; safe to call twice.

        A WAL whose write or sync failed earlier is closed without raising:
        that failure was raised to the writer it hit, and is logged once more
        here.  A failure of the final sync itself is raised."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._wake.notify_all()
        if self._flusher is not None:
            self._flusher.join()
            self._flusher = None
        failed_before = self._error
        try:
            if failed_before is None:
                self._sync_to(self._size)
        finally:
            self._release()
        if failed_before is not None:
            log.warning("WAL %s closed after an earlier failure: %s", self._fs.uri(self.path), failed_before)

    def __enter__(self) -> "WalWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals -------------------------------------------------------
    def _release(self) -> None:
        """Give back what the writer holds once the last sync is done (the file, if made)."""
        if self._file is not None:
            self._file.close()

    def _create(self) -> None:
        """Create the file with its header, before its first record (the caller holds ``_lock``).

        Unless the policy is ``none``, the directory entry is made durable
        here; the header and the record reach the disk with the record's own
        sync (a crash before it leaves an empty or header-only file, which
        replays as an empty log).  A failure removes the new file (a full disk
        must not collect empty logs) and poisons the writer, so its region
        starts a new one at the next write.
        """
        fs, path = self._fs, self.path
        try:
            f = fs.create(path)
        except BaseException as exc:
            self._error = exc
            raise
        try:
            if self._policy.mode != "none":
                fs.sync_dir(path.rsplit("/", 1)[0] if "/" in path else "")
            f.write(HEADER_BYTES)
        except BaseException as exc:
            self._error = exc
            f.close()
            try:
                fs.delete(path, missing_ok=True)
            except OSError:
                pass
            raise
        self._file = f
        self._size = FILE_HEADER_SIZE

    def _check_usable(self) -> None:
        if self._closed:
            raise StorageError(f"WAL writer for {self._fs.uri(self.path)} is closed")
        if self._error is not None:
            raise StorageError(f"WAL {self._fs.uri(self.path)} failed earlier: {self._error}") from self._error

    def _sync_to(self, end: int) -> None:
        """fsync unless bytes up to ``end`` are already durable (group commit)."""
        with self._sync_lock:
            if self._synced >= end:
                return
            target = self._size  # everything written before the fsync starts is covered
            if self._file is None:
                return  # no record yet, so no file: nothing to make durable
            try:
                if self._sync_under_write_lock:
                    with self._lock:
                        self._file.sync()
                else:
                    self._file.sync()
            except BaseException as exc:
                self._error = exc
                raise
            self._synced = max(self._synced, target)
            self.sync_count += 1

    def _flush_loop(self) -> None:
        interval = self._policy.interval_ms / 1000.0
        while True:
            with self._lock:
                while self._synced >= self._size and not self._closed:
                    self._wake.wait()
                # Let more writes gather for one interval after the first
                # unsynced one, then make them durable with a single fsync.
                deadline = time.monotonic() + interval
                while not self._closed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._wake.wait(left)
                if self._closed:
                    return  # close() does the final sync
            try:
                self._sync_to(self._size)
            except BaseException:  # kept in self._error and re-raised to callers
                return
