"""On-disk constants and fixed-size structures of a store file.

The byte layout is specified in ``docs/formats/storefile.md``; this module is
its executable half.  A store file is::

    | data block 0 | data block 1 | ... | index | bloom (optional) | info | trailer |

Every version 1 data block is ``| header (40 B) | body |`` (version 2 and 3
blocks: see ``_block_v2.py`` and ``_block_v3.py``) and every meta section is
``| section header (28 B) | body |``; the trailer is the last 72 bytes.
All integers are little-endian.  Every byte of the file is covered by one
checksum (a block header, a block body, a section header, a section body or
the trailer).

DO NOT CHANGE the magics, the struct layouts or the enum values below: they
are embedded in files already written.  A new layout needs a new
``FORMAT_VERSION``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

import pyarrow as pa

from ..checksum import crc32
from ..errors import CorruptionError

__all__ = [
    "FORMAT_VERSION",
    "SUPPORTED_VERSIONS",
    "ChecksumType",
    "CompressionType",
    "DATA_BLOCK_MAGIC",
    "INDEX_MAGIC",
    "BLOOM_MAGIC",
    "INFO_MAGIC",
    "TRAILER_MAGIC",
    "BLOCK_HEADER_SIZE",
    "SECTION_HEADER_SIZE",
    "TRAILER_SIZE",
    "INDEX_SCHEMA",
    "INDEX_SCHEMA_V2",
    "INDEX_SCHEMA_V3",
    "CHUNK_TYPE",
    "BLOCK_V2_MAGIC",
    "BLOCK_V3_MAGIC",
    "BLOCK_V3_HEADER_SIZE",
    "BlockHeaderV3",
    "ChunkEncoding",
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_ROW_GROUP_SIZE",
    "BLOCK_V2_HEADER_SIZE",
    "BlockLayout",
    "BlockHeaderV2",
    "align8",
    "BlockHeader",
    "SectionHeader",
    "Trailer",
    "checksum",
]

FORMAT_VERSION = 3
"""Version written into the trailer of every new file."""

SUPPORTED_VERSIONS = frozenset({1, 2, 3})
"""Versions this reader understands; any other is refused with an error naming it."""


class ChecksumType(IntEnum):
    """Checksum algorithm of a block or section.

    DO NOT CHANGE THESE VALUES: they are written into block headers, section
    headers and the trailer.
    """

    CRC32 = 1  # zlib's CRC-32 (the IEEE polynomial), storage.checksum.crc32


class CompressionType(IntEnum):
    """Compression of data block bodies; the codec names live in ``codecs.py``.

    DO NOT CHANGE THESE VALUES: they are written into block headers and the
    trailer.
    """

    NONE = 0
    LZ4 = 1  # LZ4 frame format
    ZSTD = 2
    SNAPPY = 3
    GZIP = 4


class BlockLayout(IntEnum):
    """How a version 2 data block stores its cells.

    DO NOT CHANGE THESE VALUES: they are written into block headers and the index.
    """

    CELLS = 0  # one entry per cell, like version 1 but split into key and value sections
    DENSE = 1  # one entry per row: row keys, then per qualifier timestamps / values


class ChunkEncoding(IntEnum):
    """How a version 3 chunk stores its (uncompressed) bytes.

    DO NOT CHANGE THESE VALUES: they are written into the block index.
    """

    KEYS = 0  # chunk 0: the block's key section, as a version 2 key section
    IPC = 1  # one Arrow IPC encapsulated RecordBatch message of one binary column
    FIXED = 2  # every present value has one width: validity bitmap and the values back to back
    DICT = 3  # a dictionary of the distinct values and one narrow code (u8 or u16) per row
    LENGTHS = 4  # one narrow length (u8 or u16) per row, then the values back to back
    KEYS_FIXED = 5  # chunk 0 of a DENSE block whose row keys have one width: no offsets stored
    FRAME = 6  # big-endian integers of 2, 4 or 8 bytes as narrow codes: base + code x divisor
    KEYS_DELTA = 7  # chunk 0 of a DENSE block of one key width: the keys cut into parts, each as narrow deltas or codes


DEFAULT_BLOCK_SIZE = 65536
"""The target block size of a family that does not set one (HBase's 64 KiB): what point
reads decode, and what blocks of cells are cut at."""

DEFAULT_ROW_GROUP_SIZE = 32 << 20  # measured: docs/decisions/2026-12-05-column-chunks-sweep.md (8 MiB before)
"""The target uncompressed bytes of a row group: a DENSE block written from rows
(``StoreFileWriter.append_rows``: bulk loads, compactions), whose columns are separate
chunks, so a scan of a few columns reads a few chunks.  A writer with the default
``block_size`` uses it; a smaller ``block_size`` (asked for small blocks) caps it."""


DATA_BLOCK_MAGIC = b"RSFDATA*"
BLOCK_V2_MAGIC = b"RSFBLK2*"
BLOCK_V3_MAGIC = b"RSFBLK3*"
INDEX_MAGIC = b"RSFINDEX"
BLOOM_MAGIC = b"RSFBLOOM"
INFO_MAGIC = b"RSFINFO*"
TRAILER_MAGIC = b"RSFTRAIL"

# magic, on-disk body size, uncompressed body size, previous block offset,
# cell count, checksum type, compression, reserved, body checksum | header checksum
_BLOCK_HEADER = struct.Struct("<8sIIqIBBHI")
BLOCK_HEADER_SIZE = _BLOCK_HEADER.size + 4  # 36 + header checksum = 40

# magic, layout, checksum type, compression, reserved, cell count, row count,
# previous block offset, key section stored / raw sizes, value section stored /
# raw sizes, key section checksum, value section checksum | header checksum
_BLOCK_V2_HEADER = struct.Struct("<8sBBBBIIqIIIIII")
BLOCK_V2_HEADER_SIZE = _BLOCK_V2_HEADER.size + 4  # 52 + header checksum = 56

# magic, layout, checksum type, compression, reserved, cell count, row count,
# previous block offset, block length, key end, chunk count, reserved | header checksum
_BLOCK_V3_HEADER = struct.Struct("<8sBBBBIIqIIII")
BLOCK_V3_HEADER_SIZE = _BLOCK_V3_HEADER.size + 4  # 44 + header checksum = 48

# magic, body length, checksum type, 3 reserved bytes, body checksum | header checksum
_SECTION_HEADER = struct.Struct("<8sQB3xI")
SECTION_HEADER_SIZE = _SECTION_HEADER.size + 4  # 24 + header checksum = 28

# magic, checksum type, compression, reserved, block count, index offset,
# index length, bloom offset, bloom length, info offset, info length,
# format version | trailer checksum
_TRAILER = struct.Struct("<8sBBHIQQQQQQI")
TRAILER_SIZE = _TRAILER.size + 4  # 68 + trailer checksum = 72

_U32 = struct.Struct("<I")

INDEX_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),  # file offset of the block header
        pa.field("length", pa.int64(), nullable=False),  # header + on-disk body bytes
        pa.field("cell_count", pa.int64(), nullable=False),
        pa.field("row", pa.binary(), nullable=False),  # first cell of the block
        pa.field("family", pa.binary(), nullable=False),
        pa.field("qualifier", pa.binary(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("type", pa.uint8(), nullable=False),
    ]
)
"""Arrow schema of the block index body (one row per data block).

DO NOT CHANGE: the index body is an Arrow IPC message read with this schema.
"""


INDEX_SCHEMA_V2 = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),  # file offset of the block header
        pa.field("length", pa.int64(), nullable=False),  # header + both padded sections
        pa.field("key_length", pa.int64(), nullable=False),  # header + padded key section
        pa.field("layout", pa.uint8(), nullable=False),  # BlockLayout
        pa.field("cell_count", pa.int64(), nullable=False),
        pa.field("row_count", pa.int64(), nullable=False),  # distinct rows with a cell in the block
        pa.field("row_start", pa.int64(), nullable=False),  # cell index of the first row that begins here
        pa.field("row", pa.binary(), nullable=False),  # first cell of the block (family: once per file)
        pa.field("qualifier", pa.binary(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("type", pa.uint8(), nullable=False),
    ]
)
"""Arrow schema of the version 2 block index body (one row per data block).

``row_start`` is 0 when the block's first row begins in it, else the cell
index where the next row begins (``cell_count`` when the whole block continues
the previous block's last row), so the file's row count is the sum of
``row_count`` less the blocks with ``row_start > 0``.

DO NOT CHANGE: the index body is an Arrow IPC message read with this schema.
"""


CHUNK_TYPE = pa.struct(
    [
        pa.field("offset", pa.uint32(), nullable=False),  # from the block's first byte; 8-aligned
        pa.field("stored", pa.uint32(), nullable=False),  # bytes as stored (compressed), before padding
        pa.field("raw", pa.uint32(), nullable=False),  # bytes uncompressed
        pa.field("checksum", pa.uint32(), nullable=False),  # CRC32 of the stored bytes and their padding
        pa.field("encoding", pa.uint8(), nullable=False),  # ChunkEncoding
        pa.field("count", pa.int64(), nullable=False),  # rows (key chunk) or present values (value chunk)
        pa.field("min", pa.binary()),  # bytewise least value (key chunk: first row key); null: not recorded
        pa.field("max", pa.binary()),  # bytewise greatest value (key chunk: last row key)
    ]
)
"""One entry of a version 3 block's chunk directory (in the block index)."""

INDEX_SCHEMA_V3 = pa.schema(
    [
        *INDEX_SCHEMA_V2,
        pa.field("last_row", pa.binary(), nullable=False),  # the block's last row key
        pa.field("chunks", pa.list_(pa.field("chunk", CHUNK_TYPE, nullable=False)), nullable=False),
    ]
)
"""Arrow schema of the version 3 block index body: version 2's columns (``key_length``
is the header and the padded key chunk), the last row key, and the chunk directory:
chunk 0 is the keys, chunks 1.. the value columns (``DENSE``: qualifier j's values in
chunk j + 1; ``CELLS``: all values in chunk 1).

DO NOT CHANGE: the index body is an Arrow IPC message read with this schema.
"""


def align8(n: int) -> int:
    """``n`` rounded up to a multiple of 8 (sections start 8-byte aligned)."""
    return (n + 7) & ~7


def checksum(data) -> int:
    """CRC32 of ``data`` (bytes, memoryview or ``pyarrow.Buffer``)."""
    return crc32(data) & 0xFFFFFFFF


def _check_header_crc(raw: memoryview, size: int, what: str, path: str, offset: int) -> None:
    stored = _U32.unpack_from(raw, size - 4)[0]
    if checksum(raw[: size - 4]) != stored:
        raise CorruptionError(f"{what} checksum mismatch", path, offset)


def _check_checksum_type(code: int, what: str, path: str, offset: int) -> None:
    if code != ChecksumType.CRC32:
        raise CorruptionError(f"{what} names unknown checksum type {code}", path, offset)


@dataclass(frozen=True, slots=True)
class BlockHeader:
    """The fixed 40-byte header in front of every data block body."""

    on_disk_size: int  # body bytes as stored (compressed)
    uncompressed_size: int  # body bytes after decompression
    prev_offset: int  # file offset of the previous block's header, -1 for the first
    cell_count: int
    compression: int
    body_checksum: int

    def encode(self) -> bytes:
        """The 40 header bytes, header checksum included."""
        head = _BLOCK_HEADER.pack(
            DATA_BLOCK_MAGIC,
            self.on_disk_size,
            self.uncompressed_size,
            self.prev_offset,
            self.cell_count,
            ChecksumType.CRC32,
            self.compression,
            0,
            self.body_checksum,
        )
        return head + _U32.pack(checksum(head))

    @classmethod
    def decode(cls, raw, path: str, offset: int) -> "BlockHeader":
        """Parse and verify a header read at ``offset`` (magic, checksum, sizes)."""
        view = memoryview(raw)
        if len(view) != BLOCK_HEADER_SIZE:
            raise CorruptionError(f"truncated data block header ({len(view)} bytes)", path, offset)
        magic, disk, raw_size, prev, cells, ctype, comp, reserved, body_crc = _BLOCK_HEADER.unpack_from(view, 0)
        if magic != DATA_BLOCK_MAGIC:
            raise CorruptionError(f"bad data block magic {magic!r}", path, offset)
        _check_header_crc(view, BLOCK_HEADER_SIZE, "data block header", path, offset)
        _check_checksum_type(ctype, "data block header", path, offset)
        if reserved != 0 or cells == 0 or prev < -1 or prev >= offset:
            raise CorruptionError("inconsistent data block header", path, offset)
        return cls(disk, raw_size, prev, cells, comp, body_crc)


@dataclass(frozen=True, slots=True)
class BlockHeaderV2:
    """The fixed 56-byte header of a version 2 data block.

    The block is ``| header | key section | value section |``, each section
    padded with zeros to a multiple of 8 bytes and checksummed on its own
    (padding included), so a key-only read fetches and verifies the header
    and the key section and never touches the values.
    """

    layout: int
    compression: int
    cell_count: int
    row_count: int
    prev_offset: int
    key_size: int  # key section bytes as stored (compressed), before padding
    key_raw_size: int
    value_size: int
    value_raw_size: int
    key_checksum: int  # CRC32 of the padded stored key section
    value_checksum: int  # CRC32 of the padded stored value section

    @property
    def key_end(self) -> int:
        """Bytes from the block start to the end of the padded key section."""
        return BLOCK_V2_HEADER_SIZE + align8(self.key_size)

    @property
    def length(self) -> int:
        """Bytes of the whole block: header and both padded sections."""
        return self.key_end + align8(self.value_size)

    def encode(self) -> bytes:
        """The 56 header bytes, header checksum included."""
        head = _BLOCK_V2_HEADER.pack(
            BLOCK_V2_MAGIC,
            self.layout,
            ChecksumType.CRC32,
            self.compression,
            0,
            self.cell_count,
            self.row_count,
            self.prev_offset,
            self.key_size,
            self.key_raw_size,
            self.value_size,
            self.value_raw_size,
            self.key_checksum,
            self.value_checksum,
        )
        return head + _U32.pack(checksum(head))

    @classmethod
    def decode(cls, raw, path: str, offset: int) -> "BlockHeaderV2":
        """Parse and verify a header read at ``offset`` (magic, checksum, fields)."""
        view = memoryview(raw)
        if len(view) != BLOCK_V2_HEADER_SIZE:
            raise CorruptionError(f"truncated data block header ({len(view)} bytes)", path, offset)
        (magic, layout, ctype, comp, reserved, cells, rows, prev, ksize, kraw, vsize, vraw, kcrc, vcrc) = (
            _BLOCK_V2_HEADER.unpack_from(view, 0)
        )
        if magic != BLOCK_V2_MAGIC:
            raise CorruptionError(f"bad data block magic {magic!r}", path, offset)
        _check_header_crc(view, BLOCK_V2_HEADER_SIZE, "data block header", path, offset)
        _check_checksum_type(ctype, "data block header", path, offset)
        if layout not in (BlockLayout.CELLS, BlockLayout.DENSE):
            raise CorruptionError(f"data block names unknown layout {layout}", path, offset)
        if reserved != 0 or cells == 0 or rows == 0 or rows > cells or prev < -1 or prev >= offset:
            raise CorruptionError("inconsistent data block header", path, offset)
        return cls(layout, comp, cells, rows, prev, ksize, kraw, vsize, vraw, kcrc, vcrc)


@dataclass(frozen=True, slots=True)
class BlockHeaderV3:
    """The fixed 48-byte header of a version 3 data block.

    The block is ``| header | chunk 0 (keys) | chunk 1 | ... |``, each chunk
    compressed on its own, padded with zeros to a multiple of 8 bytes; the
    chunks' places, sizes, checksums and statistics are in the block index,
    so a read of some columns fetches and verifies only their chunks.
    """

    layout: int
    compression: int
    cell_count: int
    row_count: int
    prev_offset: int
    length: int  # bytes of the whole block: header and every padded chunk
    key_end: int  # bytes from the block start to the end of the padded key chunk
    chunk_count: int

    def encode(self) -> bytes:
        """The 48 header bytes, header checksum included."""
        head = _BLOCK_V3_HEADER.pack(
            BLOCK_V3_MAGIC, self.layout, ChecksumType.CRC32, self.compression, 0, self.cell_count,
            self.row_count, self.prev_offset, self.length, self.key_end, self.chunk_count, 0,
        )
        return head + _U32.pack(checksum(head))

    @classmethod
    def decode(cls, raw, path: str, offset: int) -> "BlockHeaderV3":
        """Parse and verify a header read at ``offset`` (magic, checksum, fields)."""
        view = memoryview(raw)
        if len(view) != BLOCK_V3_HEADER_SIZE:
            raise CorruptionError(f"truncated data block header ({len(view)} bytes)", path, offset)
        (magic, layout, ctype, comp, reserved, cells, rows, prev, length, key_end, chunks, reserved2) = (
            _BLOCK_V3_HEADER.unpack_from(view, 0)
        )
        if magic != BLOCK_V3_MAGIC:
            raise CorruptionError(f"bad data block magic {magic!r}", path, offset)
        _check_header_crc(view, BLOCK_V3_HEADER_SIZE, "data block header", path, offset)
        _check_checksum_type(ctype, "data block header", path, offset)
        if layout not in (BlockLayout.CELLS, BlockLayout.DENSE):
            raise CorruptionError(f"data block names unknown layout {layout}", path, offset)
        if (
            reserved or reserved2 or cells == 0 or rows == 0 or rows > cells or prev < -1 or prev >= offset
            or chunks < 2 or not BLOCK_V3_HEADER_SIZE < key_end <= length
        ):
            raise CorruptionError("inconsistent data block header", path, offset)
        return cls(layout, comp, cells, rows, prev, length, key_end, chunks)


@dataclass(frozen=True, slots=True)
class SectionHeader:
    """The fixed 28-byte header of a meta section (index, bloom, info)."""

    magic: bytes
    body_length: int
    body_checksum: int

    def encode(self) -> bytes:
        head = _SECTION_HEADER.pack(self.magic, self.body_length, ChecksumType.CRC32, self.body_checksum)
        return head + _U32.pack(checksum(head))

    @classmethod
    def frame(cls, magic: bytes, body: bytes) -> bytes:
        """Header plus body: the section as written to the file."""
        return cls(magic, len(body), checksum(body)).encode() + body

    @classmethod
    def unframe(cls, raw, magic: bytes, path: str, offset: int) -> memoryview:
        """Verify a whole section read at ``offset`` and return its body."""
        view = memoryview(raw)
        what = f"{magic.decode('ascii', 'replace')} section"
        if len(view) < SECTION_HEADER_SIZE:
            raise CorruptionError(f"truncated {what} header", path, offset)
        found, length, ctype, body_crc = _SECTION_HEADER.unpack_from(view, 0)
        if found != magic:
            raise CorruptionError(f"bad {what} magic {found!r}", path, offset)
        _check_header_crc(view[:SECTION_HEADER_SIZE], SECTION_HEADER_SIZE, f"{what} header", path, offset)
        _check_checksum_type(ctype, f"{what} header", path, offset)
        if length != len(view) - SECTION_HEADER_SIZE:
            raise CorruptionError(
                f"{what} body length {length} disagrees with the trailer ({len(view) - SECTION_HEADER_SIZE})",
                path,
                offset,
            )
        body = view[SECTION_HEADER_SIZE:]
        if checksum(body) != body_crc:
            raise CorruptionError(f"{what} body checksum mismatch", path, offset + SECTION_HEADER_SIZE)
        return body


@dataclass(frozen=True, slots=True)
class Trailer:
    """The fixed 72-byte trailer at the end of every store file."""

    compression: int
    block_count: int
    index_offset: int  # also the end of the data blocks
    index_length: int
    bloom_offset: int  # 0 with bloom_length 0 when the file has no bloom filter
    bloom_length: int
    info_offset: int
    info_length: int
    format_version: int = FORMAT_VERSION

    def encode(self) -> bytes:
        head = _TRAILER.pack(
            TRAILER_MAGIC,
            ChecksumType.CRC32,
            self.compression,
            0,
            self.block_count,
            self.index_offset,
            self.index_length,
            self.bloom_offset,
            self.bloom_length,
            self.info_offset,
            self.info_length,
            self.format_version,
        )
        return head + _U32.pack(checksum(head))

    @classmethod
    def decode(cls, raw, path: str, file_size: int) -> "Trailer":
        """Parse and verify the trailer and the section layout it describes."""
        offset = file_size - TRAILER_SIZE
        view = memoryview(raw)
        if len(view) != TRAILER_SIZE:
            raise CorruptionError(f"truncated trailer ({len(view)} bytes)", path, offset)
        (magic, ctype, comp, reserved, blocks, idx_off, idx_len, bl_off, bl_len, inf_off, inf_len, version) = (
            _TRAILER.unpack_from(view, 0)
        )
        if magic != TRAILER_MAGIC:
            raise CorruptionError(f"bad trailer magic {magic!r} (truncated or not a store file)", path, offset)
        _check_header_crc(view, TRAILER_SIZE, "trailer", path, offset)
        _check_checksum_type(ctype, "trailer", path, offset)
        if version not in SUPPORTED_VERSIONS:
            known = ", ".join(str(v) for v in sorted(SUPPORTED_VERSIONS))
            raise CorruptionError(
                f"store file format version {version} is not supported (this reader knows versions {known})",
                path,
                offset,
            )
        # The sections must tile the file exactly: data, index, [bloom], info, trailer.
        after_index = idx_off + idx_len
        if bl_len:
            layout_ok = bl_off == after_index and inf_off == bl_off + bl_len and bl_len >= SECTION_HEADER_SIZE
        else:
            layout_ok = bl_off == 0 and inf_off == after_index
        layout_ok = (
            layout_ok
            and reserved == 0
            and idx_len >= SECTION_HEADER_SIZE
            and inf_len >= SECTION_HEADER_SIZE
            and inf_off + inf_len == offset
        )
        if not layout_ok:
            raise CorruptionError("trailer section offsets do not tile the file", path, offset)
        return cls(comp, blocks, idx_off, idx_len, bl_off, bl_len, inf_off, inf_len, version)
