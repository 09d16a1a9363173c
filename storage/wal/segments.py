"""The write-ahead log on object stores: a sequence of immutable segment objects.

An object cannot be appended to and becomes durable only once it is
complete, so on a filesystem without append (``FileSystem.can_append`` is
false: ``s3://`` roots) a WAL at ``wal/<name>.wal`` is a directory of
segments instead of one file.  Each sync writes one segment object holding
the records appended since the previous sync::

    wal/<name>.wal/<first seq id, 20 digits>-<last seq id, 20 digits>.seg

A segment is laid out exactly like a WAL file (the file header, then
records; docs/formats/wal.md), so the reader and the record format are the
WAL's own.  Names sort in sequence-id order; replay lists the directory and
reads the segments in name order.  A segment is written with one PUT and is
either absent or whole, so a segment that ends in a torn record is corrupt,
never a crash artefact; its name carries its last sequence id, so a segment
cut at a record boundary (records lost, the rest intact) is caught as well.
Names without the last id (``<first>.seg``, written before it was added)
are still read.

When a segment is written depends on the sync policy (what "acknowledged"
means on an object store):

- ``each``: ``append`` returns once a segment holding the record is stored
  (concurrent appenders share one PUT: group commit);
- ``interval`` (N ms): a background thread writes the records gathered over
  N ms as one segment; an acknowledged record may be lost if the process
  dies within N ms;
- ``none``: a segment is written when :data:`NONE_SEGMENT_BYTES` have
  gathered, on ``sync()`` and on ``close()``; a crash loses what was not
  written yet.

Before a segment is written the writer's table lease is checked, so a writer
that lost its lease cannot add records a new writer will not replay.
"""

from __future__ import annotations

import threading
from typing import Sequence

from ..errors import InvalidArgument
from ..vfs.fs import FileSystem
from .format import SyncPolicy, encode_record, file_header_bytes
from .reader import WalReader, segment_name, segment_names
from .writer import WalWriter

__all__ = ["SegmentWalWriter", "NONE_SEGMENT_BYTES"]

NONE_SEGMENT_BYTES = 8 << 20
"""Under policy ``none``, gathered records are written once they reach this size."""


class SegmentWalWriter(WalWriter):
    """Writes a WAL as segment objects; same contract as :class:`WalWriter`.

    :func:`storage.wal.open_writer.open_wal_writer` returns one of these when
    ``fs`` cannot append.  Sequence ids must increase from record to record (segments are
    named and replayed by them); a smaller or equal one raises
    :class:`InvalidArgument`.  ``size`` counts record bytes appended,
    ``synced_size`` those stored in segments; ``sync_count`` counts segments.
    """

    def __init__(self, fs: FileSystem, path: str, sync: "SyncPolicy | str | int" = "each"):
        self._policy = SyncPolicy.parse(sync)
        self._fs = fs
        self.path = path
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._sync_lock = threading.Lock()
        self._closed = False
        self._error: BaseException | None = None
        self._flusher: threading.Thread | None = None
        self.sync_count = 0
        self._pending: list[bytes] = []
        self._pending_first = -1
        self._last_seq = -1
        self._size = self._synced = 0
        existing = segment_names(fs, path)
        # The directory (a marker object on a store) is made with the first segment: a
        # writer that logs nothing leaves no WAL for replay and pinned reads to list.
        self._made = bool(existing)
        if existing:  # reopened: later segments must sort after the ones there
            for record in WalReader(fs.sub(path), existing[-1], decode=False):
                self._last_seq = max(self._last_seq, record.seq_id)
        if self._policy.mode == "interval":
            self._flusher = threading.Thread(target=self._flush_loop, name=f"wal-segments:{path}", daemon=True)
            self._flusher.start()

    def append(self, seq_id: int, cells: Sequence[tuple], defer_sync: bool = False) -> int:
        """Gather one record; durable on return under ``each`` (see the module
        docstring), or with ``defer_sync`` once the caller's ``sync_to`` returns."""
        record = encode_record(seq_id, cells)
        with self._lock:
            self._check_usable()
            if seq_id <= self._last_seq:
                raise InvalidArgument(
                    f"WAL {self._fs.uri(self.path)}: sequence id {seq_id} is not above the last one ({self._last_seq})"
                )
            if not self._pending:
                self._pending_first = seq_id
            self._pending.append(record)
            self._last_seq = seq_id
            self._size += len(record)
            end = self._size
            if self._flusher is not None:
                self._wake.notify()
        mode = self._policy.mode
        if (mode == "each" and not defer_sync) or (mode == "none" and end - self._synced >= NONE_SEGMENT_BYTES):
            self._sync_to(end)
        return len(record)

    def _release(self) -> None:
        """Nothing to give back: every segment is complete once written."""

    def _sync_to(self, end: int) -> None:
        """Write the gathered records as one segment unless ``end`` is already stored."""
        with self._sync_lock:
            if self._synced >= end:
                return
            with self._lock:
                records, first, last = self._pending, self._pending_first, self._last_seq
                self._pending = []
                target = self._size
            if not records:
                return
            data = file_header_bytes() + b"".join(records)
            try:
                if not self._made:
                    self._fs.makedirs(self.path)
                    self._made = True
                self._fs.write_bytes(f"{self.path}/{segment_name(first, last)}", data)
            except BaseException as exc:
                self._error = exc
                raise
            self._synced = target
            self.sync_count += 1
