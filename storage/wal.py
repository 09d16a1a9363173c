"""The write-ahead log: one file of checksummed records, each an atomic group of cells.

Layout (byte by byte in ``docs/formats/wal.md``)::

    file    := header record*
    header  := magic "RSCANWAL" (8) | version u16 | flags u16 | header_crc u32      (16 bytes)
    record  := payload_len u32 | payload_crc u32 | frame_crc u32 | payload           (12 + len)
    payload := seq_id i64 | n u32 | reserved u32 | timestamps i64[n]
               | row_len u32[n] | family_len u32[n] | qualifier_len u32[n] | value_len u32[n]
               | types u8[n] | rows | families | qualifiers | values

All integers are little-endian.  Cells are stored column by column, so a
record is encoded with a handful of C-level joins and decoded with one NumPy
prefix sum and one Arrow array instead of a struct call per cell.

Lifecycle: a :class:`WalWriter` appends to one file until ``close()``.
Replay (:func:`replay_wal`, :func:`read_wal`, :class:`WalReader`) returns the
records in file order.  A torn last record, left by a crash in the middle of
an append, is dropped and reported as ``torn_tail_bytes``; damage anywhere
before the tail raises :class:`~storage.errors.CorruptionError`.  The
intended use is that a region replays its old log files, opens a NEW file for
its writes, and deletes old files once the memstore holding their edits is
flushed; :func:`repair_wal` exists for callers that must reuse a file.
"""

from __future__ import annotations

import re
import struct
import sys
import threading
import time
import zlib
from array import array
from dataclasses import dataclass
from functools import partial
from itertools import accumulate
from typing import Iterator, NamedTuple, Sequence

import numpy as np
import pyarrow as pa

from .cells import Cell, CellType
from .errors import CorruptionError, InvalidArgument, StorageError
from .fs import FileSystem, WritableFile

__all__ = [
    "WAL_MAGIC",
    "WAL_FORMAT_VERSION",
    "MAX_RECORD_BYTES",
    "SyncPolicy",
    "WalRecord",
    "WalReplay",
    "WalWriter",
    "WalReader",
    "read_wal",
    "replay_wal",
    "repair_wal",
    "encode_record",
    "file_header_bytes",
    "payloads_to_table",
]

# DO NOT CHANGE these constants: they are embedded in WAL files on disk.
WAL_MAGIC = b"RSCANWAL"
WAL_FORMAT_VERSION = 1
_SUPPORTED_VERSIONS = frozenset({1})
_FILE_HEADER = struct.Struct("<8sHHI")  # magic, version, flags, crc32 of the first 12 bytes
_RECORD_HEADER = struct.Struct("<III")  # payload_len, payload_crc, crc32 of the first 8 bytes
_PAYLOAD_HEADER = struct.Struct("<qII")  # seq_id, n_cells, reserved
FILE_HEADER_SIZE = _FILE_HEADER.size
RECORD_HEADER_SIZE = _RECORD_HEADER.size

MAX_RECORD_BYTES = 1 << 30
"""Largest payload one record may hold; also keeps Arrow's int32 offsets valid."""

_MAX_SEQ_ID = (1 << 63) - 1
_VALID_TYPES = frozenset(int(t) for t in CellType)
_BIG_ENDIAN = sys.byteorder == "big"
_ZERO_CHECK_CHUNK = 1 << 20
_make_cell = partial(tuple.__new__, Cell)  # builds a Cell from a 6-tuple without Python frames


def _file_header() -> bytes:
    head = struct.pack("<8sHH", WAL_MAGIC, WAL_FORMAT_VERSION, 0)
    return head + struct.pack("<I", zlib.crc32(head))


_HEADER_BYTES = _file_header()


def file_header_bytes() -> bytes:
    """The 16-byte header every WAL file (and WAL segment) starts with."""
    return _HEADER_BYTES


# -- sync policy -------------------------------------------------------------


_INTERVAL_RE = re.compile(r"^\s*(\d+)\s*ms\s*$")


@dataclass(frozen=True)
class SyncPolicy:
    """When appended records are made durable.

    ``mode`` is ``"each"`` (fsync before ``append`` returns), ``"none"``
    (never fsync; the OS writes back when it likes) or ``"interval"`` (a
    background thread fsyncs at most ``interval_ms`` after a write; ``append``
    does not wait).  Build one with :meth:`parse` from ``"each"``, ``"none"``,
    ``"100ms"`` or an int of milliseconds.
    """

    mode: str
    interval_ms: int = 0

    def __post_init__(self) -> None:
        if self.mode not in ("each", "none", "interval"):
            raise InvalidArgument(f"sync policy mode must be 'each', 'none' or 'interval', got {self.mode!r}")
        if self.mode == "interval":
            if isinstance(self.interval_ms, bool) or not isinstance(self.interval_ms, int) or self.interval_ms <= 0:
                raise InvalidArgument(f"sync interval must be a positive int of ms, got {self.interval_ms!r}")

    @classmethod
    def parse(cls, value: "SyncPolicy | str | int") -> "SyncPolicy":
        """Read a policy from ``"each"``, ``"none"``, ``"<N>ms"``, an int of ms, or a policy."""
        if isinstance(value, SyncPolicy):
            return value
        if isinstance(value, bool):
            raise InvalidArgument(f"sync policy must be 'each', 'none', '<N>ms' or an int of ms, got {value!r}")
        if isinstance(value, int):
            if value <= 0:
                raise InvalidArgument(f"sync interval must be a positive number of ms, got {value!r}")
            return cls("interval", value)
        if isinstance(value, str):
            text = value.strip().lower()
            if text in ("each", "none"):
                return cls(text)
            match = _INTERVAL_RE.match(text)
            if match and int(match.group(1)) > 0:
                return cls("interval", int(match.group(1)))
        raise InvalidArgument(f"sync policy must be 'each', 'none', '<N>ms' or an int of ms, got {value!r}")

    def __str__(self) -> str:
        return f"{self.interval_ms}ms" if self.mode == "interval" else self.mode


# -- record encoding ---------------------------------------------------------


def _u32_lengths(columns: Sequence[Sequence[bytes]]) -> bytes:
    lengths = array("I")
    for column in columns:
        lengths.extend(map(len, column))
    if _BIG_ENDIAN:
        lengths.byteswap()
    return lengths.tobytes()


def encode_record(seq_id: int, cells: Sequence[tuple]) -> bytes:
    """Encode one record (frame header + payload) for ``seq_id`` and ``cells``.

    Raises :class:`InvalidArgument` naming the first problem found: a bad
    sequence id, a tuple that is not a 6-field cell, a non-bytes field, a
    timestamp outside int64, an unknown cell type, or a record larger than
    :data:`MAX_RECORD_BYTES`.
    """
    if isinstance(seq_id, bool) or not isinstance(seq_id, int) or not 0 <= seq_id <= _MAX_SEQ_ID:
        raise InvalidArgument(f"seq_id must be an int in [0, 2**63), got {seq_id!r}")
    n = len(cells)
    if n:
        try:
            # strict zip: every cell must have as many fields as the first one
            columns = tuple(zip(*cells, strict=True))
        except (TypeError, ValueError):
            raise InvalidArgument(
                "cells must all be 6-field tuples (row, family, qualifier, timestamp, type, value)"
            ) from None
        if len(columns) != 6:
            raise InvalidArgument(f"cells must be 6-field tuples, got {len(columns)} fields")
        rows, families, qualifiers, timestamps, types, values = columns
        try:
            ts = array("q", timestamps)
        except (TypeError, OverflowError) as exc:
            raise InvalidArgument(f"cell timestamps must be ints in int64 range ({exc})") from None
        if _BIG_ENDIAN:
            ts.byteswap()
        try:
            type_bytes = bytes(types)  # rejects non-ints and values over 255
        except (TypeError, ValueError):
            type_bytes = b""
        if len(type_bytes) != n or not _VALID_TYPES.issuperset(type_bytes):
            bad = next(t for t in types if not (isinstance(t, (int, np.integer)) and t in _VALID_TYPES))
            raise InvalidArgument(f"cell type must be one of {sorted(_VALID_TYPES)}, got {bad!r}")
        try:
            parts = [
                _PAYLOAD_HEADER.pack(seq_id, n, 0),
                ts.tobytes(),
                _u32_lengths((rows, families, qualifiers, values)),
                type_bytes,
                b"".join(rows),
                b"".join(families),
                b"".join(qualifiers),
                b"".join(values),
            ]
        except TypeError as exc:
            raise InvalidArgument(f"cell row, family, qualifier and value must be bytes ({exc})") from None
        payload = b"".join(parts)
    else:
        payload = _PAYLOAD_HEADER.pack(seq_id, 0, 0)
    if len(payload) > MAX_RECORD_BYTES:
        raise InvalidArgument(f"record of {len(payload)} bytes exceeds the limit of {MAX_RECORD_BYTES} bytes")
    head = struct.pack("<II", len(payload), zlib.crc32(payload))
    return head + struct.pack("<I", zlib.crc32(head)) + payload


# Below this many cells, struct and bytes slicing beat the fixed cost of
# building NumPy and Arrow arrays (measured: 3 us against 10 us for one cell,
# break-even near 32 cells).
_SMALL_RECORD_CELLS = 32


def _split_small(payload: bytes, n: int, pos: int) -> tuple | None:
    """Split a payload's columns with struct; None if the lengths do not fit."""
    timestamps = struct.unpack_from(f"<{n}q", payload, pos)
    pos += 8 * n
    lengths = struct.unpack_from(f"<{4 * n}I", payload, pos)
    pos += 16 * n
    types = payload[pos : pos + n]
    bounds = list(accumulate(lengths, initial=pos + n))
    if bounds[-1] != len(payload):
        return None
    return timestamps, types, [payload[a:b] for a, b in zip(bounds, bounds[1:])]


def _split_large(payload: bytes, n: int, pos: int) -> tuple | None:
    """Split a payload's columns with one prefix sum and one Arrow binary array."""
    timestamps = np.frombuffer(payload, "<i8", n, pos).tolist()
    pos += 8 * n
    lengths = np.frombuffer(payload, "<u4", 4 * n, pos)
    pos += 16 * n
    types = payload[pos : pos + n]
    pos += n
    offsets = np.zeros(4 * n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if pos + int(offsets[-1]) != len(payload):
        return None
    # the payload is at most MAX_RECORD_BYTES, so int32 offsets cannot overflow
    pieces = pa.Array.from_buffers(
        pa.binary(),
        4 * n,
        [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(payload).slice(pos)],
    ).to_pylist()
    return timestamps, types, pieces


def _decode_payload(payload: bytes, path: str, offset: int) -> "WalRecord":
    """Decode a payload whose checksum already passed; structural errors are corruption."""
    size = len(payload)
    if size < _PAYLOAD_HEADER.size:
        raise CorruptionError(f"WAL record payload of {size} bytes is shorter than its header", path, offset)
    seq_id, n, _reserved = _PAYLOAD_HEADER.unpack_from(payload, 0)
    pos = _PAYLOAD_HEADER.size
    fixed = pos + 25 * n  # 8 (timestamp) + 4 * 4 (lengths) + 1 (type) per cell
    if seq_id < 0 or fixed > size:
        raise CorruptionError(f"WAL record claims {n} cells with seq_id {seq_id} in {size} bytes", path, offset)
    if n == 0:
        if size != pos:
            raise CorruptionError("WAL record has bytes after its last cell", path, offset)
        return WalRecord(seq_id, [])
    if n < _SMALL_RECORD_CELLS:
        fields = _split_small(payload, n, pos)
    else:
        fields = _split_large(payload, n, pos)
    if fields is None:
        raise CorruptionError("WAL record cell lengths do not add up to its size", path, offset)
    timestamps, types, pieces = fields
    if not _VALID_TYPES.issuperset(types):
        raise CorruptionError("WAL record holds an unknown cell type", path, offset)
    cells = list(
        map(
            _make_cell,
            zip(pieces[:n], pieces[n : 2 * n], pieces[2 * n : 3 * n], timestamps, types, pieces[3 * n :]),
        )
    )
    return WalRecord(seq_id, cells)


# -- writer ------------------------------------------------------------------


class WalWriter:
    """Appends records to one WAL file.

    Lifecycle: construct (creates the file with its header, or reopens an
    existing WAL whose last record is intact), ``append`` any number of
    times from any threads, then ``close()`` (syncs and stops the flusher).
    ``sync()`` forces durability now whatever the policy.  An I/O error on a
    write or a background sync poisons the writer: later calls re-raise it,
    since the file may end in a partial record.

    Reopening an existing file whose tail is torn raises
    :class:`CorruptionError`: appending behind a torn record would turn it
    into mid-file corruption.  Prefer a new file per open (see the module
    docstring) or call :func:`repair_wal` first.

    On a filesystem that cannot append (object stores), constructing a
    ``WalWriter`` gives a :class:`storage.wal_segments.SegmentWalWriter`,
    which writes the log as immutable segment objects.
    """

    def __new__(cls, fs: FileSystem, path: str, sync: "SyncPolicy | str | int" = "each"):
        if cls is WalWriter and not fs.can_append:
            from .wal_segments import SegmentWalWriter

            cls = SegmentWalWriter
        return super().__new__(cls)

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
            self._file: WritableFile = fs.open_append(path)
            self._size = reader.file_size
            self._synced = self._size
        else:
            self._file = fs.create(path)
            self._size = self._synced = 0
            try:
                self._file.write(_HEADER_BYTES)
                self._size = FILE_HEADER_SIZE
                if self._policy.mode != "none":
                    # a new file is only durable once its directory entry is
                    self._sync_to(self._size)
                    fs.sync_dir(path.rsplit("/", 1)[0] if "/" in path else "")
            except BaseException:
                self._file.close()
                raise
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
        """Bytes in the file so far, header included."""
        return self._size

    @property
    def synced_size(self) -> int:
        """Bytes known to be durable (fsynced) so far."""
        return self._synced

    @property
    def closed(self) -> bool:
        return self._closed

    # -- appending -------------------------------------------------------
    def append(self, seq_id: int, cells: Sequence[tuple]) -> int:
        """Append one record; return the bytes written.

        With policy ``each`` the record is durable on return; with
        ``interval`` it is durable at most N ms later; with ``none`` when the
        OS writes it back.
        """
        record = encode_record(seq_id, cells)  # outside the lock: pure CPU work
        with self._lock:
            self._check_usable()
            try:
                self._file.write(record)
            except BaseException as exc:
                self._error = exc
                raise
            self._size += len(record)
            end = self._size
            if self._flusher is not None:
                self._wake.notify()
        if self._policy.mode == "each":
            self._sync_to(end)
        return len(record)

    def sync(self) -> None:
        """Make everything appended so far durable before returning."""
        with self._lock:
            self._check_usable()
        self._sync_to(self._size)

    def close(self) -> None:
        """Stop the flusher, sync, and close the file; safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._wake.notify_all()
        if self._flusher is not None:
            self._flusher.join()
            self._flusher = None
        try:
            if self._error is None:
                self._sync_to(self._size)
        finally:
            self._release()
        if self._error is not None:
            raise StorageError(f"WAL {self._fs.uri(self.path)} failed earlier: {self._error}") from self._error

    def __enter__(self) -> "WalWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals -------------------------------------------------------
    def _release(self) -> None:
        """Give back what the writer holds once the last sync is done (the file)."""
        self._file.close()

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


# -- reader ------------------------------------------------------------------


class WalRecord(NamedTuple):
    """One replayed record: its sequence id and its cells in append order."""

    seq_id: int
    cells: list[Cell]


@dataclass
class WalReplay:
    """The outcome of replaying one WAL file.

    ``valid_length`` is the length of the intact prefix (the offset where a
    torn tail starts); ``torn_tail_bytes`` how many bytes after it were
    dropped (0 when the file ends cleanly).
    """

    records: list[WalRecord]
    valid_length: int
    torn_tail_bytes: int
    file_size: int

    @property
    def last_seq_id(self) -> int | None:
        """The largest sequence id replayed, or None for an empty log."""
        return max((r.seq_id for r in self.records), default=None)


class WalReader:
    """Streams the records of one WAL file in order.

    Iterate it once.  After iteration ends normally, ``valid_length``,
    ``torn_tail_bytes`` and ``file_size`` describe the file (they are None
    before).  Raises :class:`CorruptionError` naming the file and offset for
    a bad header or a bad record that is not the torn tail.  With
    ``decode=False`` records are checked but not decoded (cells are empty);
    with ``decode="payload"`` each record's ``cells`` is its checked,
    undecoded payload (bytes), for :func:`payloads_to_table`.
    """

    def __init__(self, fs: FileSystem, path: str, decode: bool = True):
        self._fs = fs
        self.path = path
        self._decode = decode
        self.valid_length: int | None = None
        self.torn_tail_bytes: int | None = None
        self.file_size: int | None = None

    def __iter__(self) -> Iterator[WalRecord]:
        if not self._fs.can_append and self._fs.is_dir(self.path):
            yield from self._segments()
            return
        name = self._fs.uri(self.path)
        if self._fs.is_local:
            f = self._fs.open_read(self.path)
        else:  # one GET for the whole log instead of ranged reads per record
            f = pa.BufferReader(self._fs.read_bytes(self.path))
        try:
            size = f.size()
            end = yield from self._records(f, size, name)
        finally:
            f.close()
        self.file_size = size
        self.valid_length = end
        self.torn_tail_bytes = size - end

    def _segments(self) -> Iterator[WalRecord]:
        """Records of a WAL kept as segment objects (storage.wal_segments), in order."""
        from .wal_segments import segment_last_seq, segment_names

        total = 0
        for seg in segment_names(self._fs, self.path):
            path = f"{self.path}/{seg}"
            name = self._fs.uri(path)
            f = pa.BufferReader(self._fs.read_bytes(path))
            size = f.size()
            last: list[int] = []
            end = yield from _noting_last(self._records(f, size, name), last)
            if end != size or size < FILE_HEADER_SIZE:
                raise CorruptionError("WAL segment is incomplete (segments are written whole)", name, end)
            promised = segment_last_seq(seg)
            if promised is not None and last != [promised]:
                raise CorruptionError(
                    f"WAL segment ends at sequence id {last[0] if last else 'none'}, its name promises {promised}"
                    " (records are missing)", name, end)
            total += size
        self.file_size = self.valid_length = total
        self.torn_tail_bytes = 0

    def _records(self, f: pa.NativeFile, size: int, name: str) -> Iterator[WalRecord]:
        """Yield records; return the end offset of the intact prefix."""
        if size < FILE_HEADER_SIZE:
            head = f.read_at(size, 0) if size else b""
            if _HEADER_BYTES.startswith(head) or not head.strip(b"\0"):
                return 0  # the crash came while the header was being written
            raise CorruptionError("WAL file is shorter than its header and is not a prefix of one", name, 0)
        head = f.read_at(FILE_HEADER_SIZE, 0)
        magic, version, _flags, crc = _FILE_HEADER.unpack(head)
        if magic != WAL_MAGIC:
            if not head.strip(b"\0") and _zero_from(f, FILE_HEADER_SIZE, size):
                return 0  # a zero-filled file: the header never reached the disk
            raise CorruptionError(f"bad WAL magic {magic!r}, expected {WAL_MAGIC!r}", name, 0)
        if crc != zlib.crc32(head[:12]):
            raise CorruptionError("WAL file header checksum mismatch", name, 0)
        if version not in _SUPPORTED_VERSIONS:
            raise CorruptionError(f"unsupported WAL format version {version}", name, 8)
        pos = FILE_HEADER_SIZE
        while pos < size:
            if size - pos < RECORD_HEADER_SIZE:
                return pos  # torn: the crash cut the record header
            frame = f.read_at(RECORD_HEADER_SIZE, pos)
            length, payload_crc, frame_crc = _RECORD_HEADER.unpack(frame)
            body = pos + RECORD_HEADER_SIZE
            if frame_crc != zlib.crc32(frame[:8]):
                if _zero_from(f, body, size):
                    return pos  # a garbled or zero-filled last header
                raise CorruptionError("WAL record header checksum mismatch", name, pos)
            if length > MAX_RECORD_BYTES:
                raise CorruptionError(f"WAL record length {length} exceeds {MAX_RECORD_BYTES}", name, pos)
            if body + length > size:
                return pos  # torn: the crash cut the payload
            payload = f.read_at(length, body)
            if zlib.crc32(payload) != payload_crc:
                if _zero_from(f, body + length, size):
                    return pos  # the last record reaching end of file (or zero fill) is torn
                raise CorruptionError("WAL record checksum mismatch", name, pos)
            if self._decode == "payload" and length >= _PAYLOAD_HEADER.size:
                yield WalRecord(_PAYLOAD_HEADER.unpack_from(payload, 0)[0], payload)
            elif self._decode and self._decode != "payload":
                yield _decode_payload(payload, name, pos)
            elif length < _PAYLOAD_HEADER.size:
                raise CorruptionError(f"WAL record payload of {length} bytes is shorter than its header", name, pos)
            else:
                yield WalRecord(_PAYLOAD_HEADER.unpack_from(payload, 0)[0], [])
            pos = body + length
        return pos


def _noting_last(records: Iterator[WalRecord], last: list[int]) -> Iterator[WalRecord]:
    """Pass ``records`` through, keeping the last sequence id in ``last``; return their return value."""
    while True:
        try:
            record = next(records)
        except StopIteration as stop:
            return stop.value
        last[:] = [record.seq_id]
        yield record


def _zero_from(f: pa.NativeFile, start: int, size: int) -> bool:
    """True when every byte of the file from ``start`` to the end is zero."""
    pos = start
    while pos < size:
        chunk = f.read_at(min(_ZERO_CHECK_CHUNK, size - pos), pos)
        if chunk.count(0) != len(chunk):
            return False
        pos += len(chunk)
    return True


def read_wal(fs: FileSystem, path: str) -> Iterator[WalRecord]:
    """Yield the ``(seq_id, cells)`` records of a WAL file in order, dropping a torn tail."""
    return iter(WalReader(fs, path))


def replay_wal(fs: FileSystem, path: str) -> WalReplay:
    """Read a whole WAL file: its records plus where the intact prefix ends."""
    reader = WalReader(fs, path)
    records = list(reader)
    return WalReplay(records, reader.valid_length, reader.torn_tail_bytes, reader.file_size)


def repair_wal(fs: FileSystem, path: str) -> int:
    """Cut a torn tail off a WAL file so it can be appended to; return the bytes cut.

    The intact prefix is rewritten with ``fs.write_atomic`` (the filesystem
    layer has no truncate that works on object stores), so a crash during the
    repair leaves the old or the repaired file.  A file without a complete
    header becomes an empty log (header only).  Raises
    :class:`CorruptionError` when the damage is not a torn tail.
    """
    reader = WalReader(fs, path, decode=False)
    for _ in reader:
        pass
    if not reader.torn_tail_bytes and reader.valid_length >= FILE_HEADER_SIZE:
        return 0
    if reader.valid_length < FILE_HEADER_SIZE:
        data = _HEADER_BYTES
    else:
        f = fs.open_read(path)
        try:
            data = f.read_at(reader.valid_length, 0)
        finally:
            f.close()
    fs.write_atomic(path, data)
    return reader.file_size - reader.valid_length


def payloads_to_table(payloads: Sequence[bytes], where: str = "WAL") -> pa.Table:
    """Decode checked record payloads (in log order) straight into one cell
    table in log order, with NumPy over all records at once: no Python runs
    per cell.  The payloads' checksums have passed; only the structure
    (lengths adding up, known cell types) is checked, as a whole.
    """
    from .cells import CELL_SCHEMA

    counted = [(p, _PAYLOAD_HEADER.unpack_from(p, 0)[1]) for p in payloads]
    payloads = [p for p, n in counted if n]
    if not payloads:
        return CELL_SCHEMA.empty_table()
    if sum(n for _, n in counted) >= _BIG_RECORDS * len(payloads):
        return _big_payloads_to_table(payloads, where)
    sizes = np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))
    starts = np.zeros(len(payloads), dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    raw = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    counts = _gather_le(raw, starts + 8, "<u4").astype(np.int64)
    if (_PAYLOAD_HEADER.size + 25 * counts > sizes).any():
        raise CorruptionError("WAL record claims more cells than its size holds", where, 0)
    total = int(counts.sum())
    record = np.repeat(np.arange(len(payloads)), counts)
    first = np.zeros(len(payloads), dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    j = np.arange(total) - first[record]  # index of each cell within its record
    base, n = starts[record], counts[record]
    timestamps = _gather_le(raw, base + _PAYLOAD_HEADER.size + 8 * j, "<i8")
    lengths = [
        _gather_le(raw, base + _PAYLOAD_HEADER.size + 8 * n + 4 * (k * n + j), "<u4").astype(np.int64)
        for k in range(4)
    ]
    types = raw[base + _PAYLOAD_HEADER.size + 24 * n + j]
    # Each record holds its rows, families, qualifiers and values as four
    # contiguous blocks: label every byte of the log with its block kind once,
    # then each column's bytes are one boolean selection, in cell order.
    sums = np.stack([np.add.reduceat(lengths[k], first) for k in range(4)], axis=1)
    fixed = _PAYLOAD_HEADER.size + 25 * counts
    if not np.array_equal(fixed + sums.sum(axis=1), sizes):
        raise CorruptionError("WAL record cell lengths do not add up to its size", where, 0)
    if not np.isin(types, np.fromiter(_VALID_TYPES, dtype=np.uint8)).all():
        raise CorruptionError("WAL record holds an unknown cell type", where, 0)
    segments = np.concatenate([fixed[:, None], sums], axis=1).ravel()
    kinds = np.tile(np.array([4, 0, 1, 2, 3], dtype=np.uint8), len(payloads))
    label = np.repeat(kinds, segments)
    columns = [_binary(raw[label == k], lengths[k]) for k in range(4)]
    rows, families, qualifiers, values = columns
    return pa.Table.from_arrays(
        [rows, families, qualifiers, pa.array(timestamps), pa.array(types), values], schema=CELL_SCHEMA
    )


_BIG_RECORDS = 64  # cells per record from which records are decoded one by one


def _big_payloads_to_table(payloads: list[bytes], where: str) -> pa.Table:
    """:func:`payloads_to_table` for records of many cells: a few NumPy views
    and four contiguous slices per record, no copy of the log as a whole."""
    from .cells import CELL_SCHEMA

    head = _PAYLOAD_HEADER.size
    stamps, lengths, types = [], [], []
    blocks: list[list[memoryview]] = [[], [], [], []]
    for payload in payloads:
        n = _PAYLOAD_HEADER.unpack_from(payload, 0)[1]
        if head + 25 * n > len(payload):
            raise CorruptionError("WAL record claims more cells than its size holds", where, 0)
        stamps.append(np.frombuffer(payload, "<i8", n, head))
        lens = np.frombuffer(payload, "<u4", 4 * n, head + 8 * n).reshape(4, n)
        lengths.append(lens)
        types.append(np.frombuffer(payload, np.uint8, n, head + 24 * n))
        view = memoryview(payload)
        pos = head + 25 * n
        for k in range(4):
            end = pos + int(lens[k].sum(dtype=np.int64))
            blocks[k].append(view[pos:end])
            pos = end
        if pos != len(payload):
            raise CorruptionError("WAL record cell lengths do not add up to its size", where, 0)
    all_types = np.concatenate(types)
    if not np.isin(all_types, np.fromiter(_VALID_TYPES, dtype=np.uint8)).all():
        raise CorruptionError("WAL record holds an unknown cell type", where, 0)
    all_lengths = np.concatenate(lengths, axis=1).astype(np.int64)
    columns = [_binary(np.frombuffer(b"".join(blocks[k]), np.uint8), all_lengths[k]) for k in range(4)]
    rows, families, qualifiers, values = columns
    return pa.Table.from_arrays(
        [rows, families, qualifiers, pa.array(np.concatenate(stamps)), pa.array(all_types), values],
        schema=CELL_SCHEMA,
    )


def _gather_le(raw: np.ndarray, positions: np.ndarray, dtype: str) -> np.ndarray:
    """Little-endian integers of ``dtype`` starting at each byte position."""
    width = np.dtype(dtype).itemsize
    return raw[positions[:, None] + np.arange(width)].view(dtype).ravel()


def _binary(data: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of consecutive values of the given lengths in ``data``."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        raise InvalidArgument("WAL cells too large for one Arrow binary array")
    return pa.Array.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )
