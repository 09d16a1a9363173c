"""Salvaging a damaged WAL: every intact record, and an account of what was lost.

Replay (:mod:`storage.wal.reader`) stops at the first damaged record and
raises :class:`~storage.errors.CorruptionError`: a region never opens with a
gap in its log that nobody was told of.  The repair path (``regionscan wal
check|repair``, :mod:`storage.region.wal_repair`) needs the opposite: read
past the damage, keep every record that still passes its checksums, and say
what could not be kept.  :func:`salvage_wal` does that for one WAL file (or
one segment object, laid out the same way).

After a damaged stretch the next record is found again by its frame: a
position where the 12-byte record header passes its own CRC and the payload
it announces passes the payload CRC.  Candidates are picked out with NumPy
(a length that fits in the file) before any CRC is computed, so a search
costs a few array passes per megabyte, not a Python step per byte.

Torn tails follow the reader's rules exactly (docs/formats/wal.md): a tail
the reader drops quietly is reported as torn, never as damage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..checksum import crc32
from ..errors import CorruptionError
from .format import (
    FILE_HEADER,
    HEADER_BYTES,
    PAYLOAD_HEADER,
    RECORD_HEADER,
    SUPPORTED_VERSIONS,
    FILE_HEADER_SIZE,
    MAX_RECORD_BYTES,
    RECORD_HEADER_SIZE,
    WAL_MAGIC,
    decode_payload,
)

__all__ = ["WalDamage", "WalSalvage", "salvage_wal_bytes", "counted"]

_SEARCH_CHUNK = 1 << 20  # candidate offsets examined per NumPy pass


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``"3 records"``)."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class WalDamage:
    """One damaged stretch of a WAL file: ``length`` bytes from ``offset``.

    ``records`` is how many records the stretch held when its framing still
    says so (1: one record whose payload failed its checks; 0: the file
    header, whose records are checked on their own), else None (the framing
    itself is damaged: at least one record).  ``cells`` and ``rows``
    are read from the damaged payload where it still decodes, else None.
    """

    offset: int
    length: int
    reason: str
    records: int | None = None
    cells: int | None = None
    rows: int | None = None

    def describe(self) -> str:
        """One line: where, how long, why, and what was lost."""
        if self.records is None:
            lost = "at least 1 record (its framing is damaged)"
        else:
            lost = counted(self.records, "record")
            if self.cells is not None:
                lost += f" of {counted(self.cells, 'cell')}"
                if self.rows is not None:
                    lost += f" in {counted(self.rows, 'row')}"
        return f"offset {self.offset}: {self.reason}, {self.length} bytes, {lost} lost"


@dataclass
class WalSalvage:
    """What :func:`salvage_wal_bytes` found in one WAL file.

    ``records`` are the ``(start, end)`` byte ranges of the intact records in
    file order; ``damage`` the damaged stretches; ``torn_tail_bytes`` the
    torn tail a replay would drop quietly; ``header_ok`` whether the file
    header passed.
    """

    size: int
    header_ok: bool
    records: list[tuple[int, int]] = field(default_factory=list)
    damage: list[WalDamage] = field(default_factory=list)
    torn_tail_bytes: int = 0
    seq_ids: list[int] = field(default_factory=list)
    cells: int = 0

    @property
    def damaged(self) -> bool:
        """True when replay would refuse this file."""
        return bool(self.damage) or not self.header_ok

    def salvaged_bytes(self, data: bytes) -> bytes:
        """A WAL file of ``data``'s intact records alone, behind a good file header."""
        return HEADER_BYTES + b"".join(data[a:b] for a, b in self.records)


def _record_at(data: bytes, pos: int, size: int) -> tuple[str, int]:
    """Classify the record starting at ``pos``: ``("good", end)``,
    ``("payload", end)`` (framing good, payload bad), ``("past-end", 0)``
    (framing good, payload runs past the file), ``("too-long", 0)`` (a
    checksummed length over the limit) or ``("frame", 0)`` (header CRC fails)."""
    frame = data[pos : pos + RECORD_HEADER_SIZE]
    if len(frame) < RECORD_HEADER_SIZE:
        return "past-end", 0
    length, payload_crc, frame_crc = RECORD_HEADER.unpack(frame)
    if frame_crc != crc32(frame[:8]):
        return "frame", 0
    if length > MAX_RECORD_BYTES:
        return "too-long", 0
    end = pos + RECORD_HEADER_SIZE + length
    if end > size:
        return "past-end", 0
    if crc32(data[pos + RECORD_HEADER_SIZE : end]) != payload_crc:
        return "payload", end
    return "good", end


def _next_record(data: bytes, start: int, size: int) -> int | None:
    """The first offset at or after ``start`` where an intact record begins."""
    view = np.frombuffer(data, np.uint8)
    pos = start
    while pos + RECORD_HEADER_SIZE <= size:
        stop = min(pos + _SEARCH_CHUNK, size - RECORD_HEADER_SIZE + 1)
        n = stop - pos
        b = [view[pos + k : pos + k + n].astype(np.uint64) for k in range(4)]
        lengths = b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)
        offsets = np.arange(pos, stop, dtype=np.uint64)
        # a payload holds at least its 16-byte header: runs of zeros are no candidates
        fits = (lengths >= PAYLOAD_HEADER.size) & (lengths <= MAX_RECORD_BYTES)
        fits &= offsets + RECORD_HEADER_SIZE + lengths <= size
        for candidate in np.flatnonzero(fits):
            at = pos + int(candidate)
            if _record_at(data, at, size)[0] == "good":
                return at
        pos = stop
    return None


def _damage_of_payload(payload: bytes, offset: int, length: int, reason: str) -> WalDamage:
    """A one-record damage entry, with the cells and rows its payload still shows."""
    cells = rows = None
    try:
        record = decode_payload(payload, None, offset)
        cells, rows = len(record.cells), len({c[0] for c in record.cells})
    except CorruptionError:
        if len(payload) >= PAYLOAD_HEADER.size:
            seq_id, n, _ = PAYLOAD_HEADER.unpack_from(payload, 0)
            if 0 <= seq_id and PAYLOAD_HEADER.size + 25 * n <= len(payload):
                cells = n  # the cell count still fits the payload: probably right
    return WalDamage(offset, length, reason, 1, cells, rows)


def salvage_wal_bytes(data: bytes) -> WalSalvage:
    """Find the intact records, the damage and the torn tail of one WAL file's bytes."""
    size = len(data)
    if size < FILE_HEADER_SIZE:
        out = WalSalvage(size, header_ok=True)
        if HEADER_BYTES.startswith(data) or not data.strip(b"\0"):
            out.torn_tail_bytes = size  # a crash while the header was written: the reader drops it
        else:
            out.header_ok = False
            out.damage.append(WalDamage(0, size, "file shorter than its header and not a prefix of one", 0))
        return out
    magic, version, _flags, crc = FILE_HEADER.unpack_from(data, 0)
    out = WalSalvage(size, magic == WAL_MAGIC and crc == crc32(data[:12]) and version in SUPPORTED_VERSIONS)
    if not out.header_ok:
        if not data.strip(b"\0"):  # an all-zero file: the header never reached the disk
            out.header_ok, out.torn_tail_bytes = True, size
            return out
        out.damage.append(WalDamage(0, FILE_HEADER_SIZE, "bad file header", 0))  # records are checked on their own
    pos = FILE_HEADER_SIZE
    while pos < size:
        kind, end = _record_at(data, pos, size)
        if kind == "good":
            payload = data[pos + RECORD_HEADER_SIZE : end]
            try:
                record = decode_payload(payload, None, pos)
            except CorruptionError as exc:  # no path given: the message is the reason alone
                reason = str(exc)
                out.damage.append(_damage_of_payload(payload, pos, end - pos, reason))
            else:
                out.records.append((pos, end))
                out.seq_ids.append(record.seq_id)
                out.cells += len(record.cells)
            pos = end
            continue
        # the reader's torn-tail rules, so check and replay agree on what is damage
        if kind == "past-end" or (kind == "frame" and not data[pos + RECORD_HEADER_SIZE :].strip(b"\0")):
            out.torn_tail_bytes = size - pos
            break
        if kind == "payload":
            payload = data[pos + RECORD_HEADER_SIZE : end]
            if not payload.strip(b"\0") and not data[end:].strip(b"\0"):
                out.torn_tail_bytes = size - pos
                break
            out.damage.append(_damage_of_payload(payload, pos, end - pos, "record checksum mismatch"))
            pos = end
            continue
        nxt = _next_record(data, pos + 1, size)
        stop = size if nxt is None else nxt
        reason = "record header checksum mismatch" if kind == "frame" else "record length over the limit"
        out.damage.append(WalDamage(pos, stop - pos, reason))
        pos = stop
    return out
