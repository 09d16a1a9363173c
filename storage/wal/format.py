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
an append (its length runs past the end of the file, or its header or payload
never reached the disk), is dropped and reported as ``torn_tail_bytes``; any
other damage, a complete last record whose checksum fails included, raises
:class:`~storage.errors.CorruptionError` (:mod:`storage.wal.salvage` reads past
it for the repair path).  The
intended use is that a region replays its old log files, opens a NEW file for
its writes, and deletes old files once the memstore holding their edits is
flushed; :func:`repair_wal` exists for callers that must reuse a file.
"""

from __future__ import annotations

import re
import struct
import sys
from array import array
from dataclasses import dataclass
from functools import partial
from itertools import accumulate
from typing import NamedTuple, Sequence

import numpy as np
import pyarrow as pa

from ..cells import Cell, CellType
from ..checksum import crc32
from ..errors import CorruptionError, InvalidArgument
from ..native import NATIVE as _NATIVE

__all__ = ["WAL_MAGIC", "WAL_FORMAT_VERSION", "MAX_RECORD_BYTES", "SyncPolicy", "WalRecord", "encode_record", "encode_record_py",
           "file_header_bytes"]


# DO NOT CHANGE these constants: they are embedded in WAL files on disk.
WAL_MAGIC = b"RSCANWAL"
WAL_FORMAT_VERSION = 1
SUPPORTED_VERSIONS = frozenset({1})
FILE_HEADER = struct.Struct("<8sHHI")  # magic, version, flags, crc32 of the first 12 bytes
RECORD_HEADER = struct.Struct("<III")  # payload_len, payload_crc, crc32 of the first 8 bytes
PAYLOAD_HEADER = struct.Struct("<qII")  # seq_id, n_cells, reserved
FILE_HEADER_SIZE = FILE_HEADER.size
RECORD_HEADER_SIZE = RECORD_HEADER.size

MAX_RECORD_BYTES = 1 << 30
"""Largest payload one record may hold; also keeps Arrow's int32 offsets valid."""

_MAX_SEQ_ID = (1 << 63) - 1
VALID_TYPES = frozenset(int(t) for t in CellType)
_BIG_ENDIAN = sys.byteorder == "big"
ZERO_CHECK_CHUNK = 1 << 20
_make_cell = partial(tuple.__new__, Cell)  # builds a Cell from a 6-tuple without Python frames
# the compiled record builder's view of VALID_TYPES: byte t is 1 when t is a cell type
_VALID_TYPE_MASK = bytes(int(t in VALID_TYPES) for t in range(256))
VALID_TYPE_MASK = _VALID_TYPE_MASK
"""256 bytes, byte ``t`` 1 when ``t`` is a cell type: the compiled kernels' view of :data:`VALID_TYPES`."""


def _file_header() -> bytes:
    head = struct.pack("<8sHH", WAL_MAGIC, WAL_FORMAT_VERSION, 0)
    return head + struct.pack("<I", crc32(head))


HEADER_BYTES = _file_header()


def file_header_bytes() -> bytes:
    """The 16-byte header every WAL file (and WAL segment) starts with."""
    return HEADER_BYTES


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

    A list of cells goes through the compiled ``wal_record`` kernel
    (``storage/_native/wal.c``: each field copied once, no Python step per
    cell) when it is built and on; anything it does not take as it is (a
    field to convert or refuse, a record over the limit) and every other
    sequence go to :func:`encode_record_py`, the reference, which gives the
    same bytes and raises the errors below.
    """
    if _NATIVE is not None and type(cells) is list and type(seq_id) is int and 0 <= seq_id <= _MAX_SEQ_ID:
        record = _NATIVE.wal_record(seq_id, cells, _VALID_TYPE_MASK, MAX_RECORD_BYTES, crc32)
        if record is not None:
            return record
    return encode_record_py(seq_id, cells)


def encode_record_py(seq_id: int, cells: Sequence[tuple]) -> bytes:
    """Encode one record (frame header + payload) for ``seq_id`` and ``cells``:
    the reference of the compiled ``wal_record`` kernel.

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
        if len(type_bytes) != n or not VALID_TYPES.issuperset(type_bytes):
            bad = next(t for t in types if not (isinstance(t, (int, np.integer)) and t in VALID_TYPES))
            raise InvalidArgument(f"cell type must be one of {sorted(VALID_TYPES)}, got {bad!r}")
        try:
            parts = [
                PAYLOAD_HEADER.pack(seq_id, n, 0),
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
        payload = PAYLOAD_HEADER.pack(seq_id, 0, 0)
    if len(payload) > MAX_RECORD_BYTES:
        raise InvalidArgument(f"record of {len(payload)} bytes exceeds the limit of {MAX_RECORD_BYTES} bytes")
    head = struct.pack("<II", len(payload), crc32(payload))
    return head + struct.pack("<I", crc32(head)) + payload


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


def decode_payload(payload: bytes, path: str, offset: int) -> "WalRecord":
    """Decode a payload whose checksum already passed; structural errors are corruption."""
    size = len(payload)
    if size < PAYLOAD_HEADER.size:
        raise CorruptionError(f"WAL record payload of {size} bytes is shorter than its header", path, offset)
    seq_id, n, _reserved = PAYLOAD_HEADER.unpack_from(payload, 0)
    pos = PAYLOAD_HEADER.size
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
    if not VALID_TYPES.issuperset(types):
        raise CorruptionError("WAL record holds an unknown cell type", path, offset)
    cells = list(
        map(
            _make_cell,
            zip(pieces[:n], pieces[n : 2 * n], pieces[2 * n : 3 * n], timestamps, types, pieces[3 * n :]),
        )
    )
    return WalRecord(seq_id, cells)


class WalRecord(NamedTuple):
    """One replayed record: its sequence id and its cells in append order."""

    seq_id: int
    cells: list[Cell]
