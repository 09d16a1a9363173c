"""Reading a WAL back: a stream of checked records from one file or from a
directory of segments, stopping at a torn tail."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from ..checksum import crc32
from ..errors import CorruptionError
from ..vfs.fs import FileSystem
from .format import (
    FILE_HEADER,
    HEADER_BYTES,
    PAYLOAD_HEADER,
    RECORD_HEADER,
    SUPPORTED_VERSIONS,
    ZERO_CHECK_CHUNK,
    FILE_HEADER_SIZE,
    MAX_RECORD_BYTES,
    RECORD_HEADER_SIZE,
    WAL_MAGIC,
    WalRecord,
    decode_payload,
)

__all__ = ["WalReader", "read_wal", "SEGMENT_SUFFIX", "segment_name", "segment_names", "segment_last_seq"]

SEGMENT_SUFFIX = ".seg"
"""A WAL kept as segment objects (storage.wal.segments) is a directory of these."""


def segment_name(first_seq_id: int, last_seq_id: int) -> str:
    """The object name of a segment holding the records ``first_seq_id`` .. ``last_seq_id``.

    The last id lets a reader see a segment cut at a record boundary.
    """
    return f"{first_seq_id:020d}-{last_seq_id:020d}{SEGMENT_SUFFIX}"


def segment_last_seq(name: str) -> int | None:
    """The last sequence id a segment's name promises (None for a ``<first>.seg`` name)."""
    stem = name[: -len(SEGMENT_SUFFIX)]
    first, sep, last = stem.partition("-")
    return int(last) if sep and last.isdigit() else None


def segment_names(fs: FileSystem, path: str) -> list[str]:
    """The segment names of the WAL directory ``path``, in sequence-id order."""
    return [n for n in fs.listdir(path) if n.endswith(SEGMENT_SUFFIX)]


class WalReader:
    """Streams the records of one WAL file in order.

    Iterate it once.  After iteration ends normally, ``valid_length``,
    ``torn_tail_bytes`` and ``file_size`` describe the file (they are None
    before).  Raises :class:`CorruptionError` naming the file and offset for
    a bad header or a bad record that is not the torn tail.  With
    ``decode=False`` records are checked but not decoded (cells are empty);
    with ``decode="payload"`` each record's ``cells`` is its checked,
    undecoded payload, for :func:`payloads_to_table`: a ``pyarrow.Buffer``
    that is a view of the file's memory map where the file is mapped (no
    copy), so whoever keeps it keeps the map: decode it and let it go.
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
        """Records of a WAL kept as segment objects (storage.wal.segments), in order."""
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
            if HEADER_BYTES.startswith(head) or not head.strip(b"\0"):
                return 0  # the crash came while the header was being written
            raise CorruptionError("WAL file is shorter than its header and is not a prefix of one", name, 0)
        head = f.read_at(FILE_HEADER_SIZE, 0)
        magic, version, _flags, crc = FILE_HEADER.unpack(head)
        if magic != WAL_MAGIC:
            if not head.strip(b"\0") and _zero_from(f, FILE_HEADER_SIZE, size):
                return 0  # a zero-filled file: the header never reached the disk
            raise CorruptionError(f"bad WAL magic {magic!r}, expected {WAL_MAGIC!r}", name, 0)
        if crc != crc32(head[:12]):
            raise CorruptionError("WAL file header checksum mismatch", name, 0)
        if version not in SUPPORTED_VERSIONS:
            raise CorruptionError(f"unsupported WAL format version {version}", name, 8)
        pos = FILE_HEADER_SIZE
        while pos < size:
            if size - pos < RECORD_HEADER_SIZE:
                return pos  # torn: the crash cut the record header
            frame = f.read_at(RECORD_HEADER_SIZE, pos)
            length, payload_crc, frame_crc = RECORD_HEADER.unpack(frame)
            body = pos + RECORD_HEADER_SIZE
            if frame_crc != crc32(frame[:8]):
                if _zero_from(f, body, size):
                    return pos  # a garbled or zero-filled last header
                raise CorruptionError("WAL record header checksum mismatch", name, pos)
            if length > MAX_RECORD_BYTES:
                raise CorruptionError(f"WAL record length {length} exceeds {MAX_RECORD_BYTES}", name, pos)
            if body + length > size:
                return pos  # torn: the crash cut the payload
            if self._decode == "payload":
                # a view of the file where it can be one (a memory map, a whole object read
                # at once): the payload is read once, by its checksum and its decode, and
                # never copied (WAL files are appended to or replaced, never cut in place)
                f.seek(body)
                payload = f.read_buffer(length)
            else:
                payload = f.read_at(length, body)
            if crc32(payload) != payload_crc:
                # A complete record whose payload fails its checksum is damage,
                # even the last one: its length and framing were written whole,
                # so dropping it could lose an acknowledged write.  The one
                # exception is a payload of zero bytes with only zeros after
                # it, the page a crash left unwritten behind a header that made
                # it: no bit flip turns a record into zeros.
                if _is_zero(payload) and _zero_from(f, body + length, size):
                    return pos
                raise CorruptionError(
                    f"WAL record checksum mismatch (a complete record of {length} bytes)", name, pos
                )
            if self._decode == "payload" and length >= PAYLOAD_HEADER.size:
                yield WalRecord(PAYLOAD_HEADER.unpack_from(payload, 0)[0], payload)
            elif self._decode and self._decode != "payload":
                yield decode_payload(payload, name, pos)
            elif length < PAYLOAD_HEADER.size:
                raise CorruptionError(f"WAL record payload of {length} bytes is shorter than its header", name, pos)
            else:
                yield WalRecord(PAYLOAD_HEADER.unpack_from(payload, 0)[0], [])
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


def _is_zero(data) -> bool:
    """True when every byte of ``data`` (bytes or a buffer) is zero (a C-level count, no Python loop)."""
    if not isinstance(data, bytes):
        data = memoryview(data).tobytes()  # only a payload that failed its checksum gets here
    return data.count(0) == len(data)


def _zero_from(f: pa.NativeFile, start: int, size: int) -> bool:
    """True when every byte of the file from ``start`` to the end is zero."""
    pos = start
    while pos < size:
        chunk = f.read_at(min(ZERO_CHECK_CHUNK, size - pos), pos)
        if chunk.count(0) != len(chunk):
            return False
        pos += len(chunk)
    return True


def read_wal(fs: FileSystem, path: str) -> Iterator[WalRecord]:
    """Yield the ``(seq_id, cells)`` records of a WAL file in order, dropping a torn tail."""
    return iter(WalReader(fs, path))
