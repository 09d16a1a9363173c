"""Encoding and verified decoding of version 2 data blocks.

A block is ``| BlockHeaderV2 (56 B) | key section | value section |``; each
section is compressed on its own by the file's codec, padded with zeros to a
multiple of 8 bytes and checksummed on its own.  The layout byte of the
header says what the sections hold (see ``docs/formats/storefile.md``):

* ``CELLS``: the key section is an Arrow IPC record batch message of
  :data:`KEY_SCHEMA` (row, qualifier, timestamp, type), the value section one
  of :data:`VALUE_SCHEMA` (value); one entry per cell.
* ``DENSE``: the key section is a qualifier table followed by an IPC record
  batch message of the row keys and one timestamp column per qualifier (plain
  int64 or run-end encoded), the value section an IPC message with one binary
  value column per qualifier; one entry per row, nulls where a row lacks a
  qualifier.

The family is not in the blocks: it is stored once, in the file info.
"""

from __future__ import annotations

import struct
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CELL_SCHEMA
from ..checksum import crc32
from ..errors import CorruptionError, StorageError
from .dense import DenseBlock, constant_binary, dense_from_cells
from .codecs import BlockCodec
from .format import BLOCK_V2_HEADER_SIZE, BlockHeaderV2, BlockLayout, align8, checksum

__all__ = [
    "KEY_SCHEMA", "VALUE_SCHEMA", "EncodedBlock", "encode_block_v2", "decode_keys", "decode_values", "qualifier_table",
    "dense_key_schema", "encode_dense_keys", "dense_key_parts", "timestamp_schema", "parse_keys", "read_batch", "unpack_section", "check_presence",
]

KEY_SCHEMA = pa.schema(
    [
        pa.field("row", pa.binary(), nullable=False),
        pa.field("qualifier", pa.binary(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("type", pa.uint8(), nullable=False),
    ]
)
"""Key section of a ``CELLS`` block.  DO NOT CHANGE: read with this schema."""

VALUE_SCHEMA = pa.schema([pa.field("value", pa.binary(), nullable=False)])
"""Value section of a ``CELLS`` block.  DO NOT CHANGE: read with this schema."""

TS_PLAIN = 0
TS_RUN_LENGTH = 1
_REE_TYPE = pa.run_end_encoded(pa.int32(), pa.int64())
_QUAL_HEAD = struct.Struct("<BI")  # timestamp encoding, qualifier length
_U32 = struct.Struct("<I")
_PAD = bytes(8)


@lru_cache(maxsize=1024)
def dense_key_schema(encodings: tuple) -> pa.Schema:
    """Schema of the IPC message in a ``DENSE`` key section with these
    timestamp encodings: the row keys, then a timestamp column per qualifier."""
    fields = [pa.field("row", pa.binary(), nullable=False)]
    for j, enc in enumerate(encodings):
        fields.append(pa.field(f"t{j}", _REE_TYPE if enc == TS_RUN_LENGTH else pa.int64()))
    return pa.schema(fields)


@lru_cache(maxsize=256)
def _dense_value_schema(q: int) -> pa.Schema:
    return pa.schema([pa.field(f"v{j}", pa.binary()) for j in range(q)])


class EncodedBlock:
    """A block ready to be written, with what the index needs about it."""

    __slots__ = ("parts", "length", "key_length", "layout", "row_count", "raw_size", "chunks", "last_row")

    def __init__(self, parts: list, length: int, key_length: int, layout: int, row_count: int, raw_size: int):
        self.chunks: list | None = None  # version 3: the chunk directory entries
        self.last_row: bytes | None = None  # version 3: the block's last row key
        self.parts = parts  # bytes-like pieces in file order
        self.length = length
        self.key_length = key_length
        self.layout = layout
        self.row_count = row_count
        self.raw_size = raw_size  # uncompressed bytes of both sections


def _padded(stored: pa.Buffer) -> list:
    pad = align8(stored.size) - stored.size
    return [stored, _PAD[:pad]] if pad else [stored]


def _crc(parts: list) -> int:
    crc = 0
    for p in parts:
        crc = crc32(p, crc)
    return crc & 0xFFFFFFFF


def _ts_column(ts: pa.Array) -> tuple[int, pa.Array]:
    """Run-length encoding when it saves at least three quarters of the entries."""
    ree = pc.run_end_encode(ts, run_end_type=pa.int32())
    if len(ree.values) * 4 <= len(ts):
        return TS_RUN_LENGTH, ree
    return TS_PLAIN, ts


def encode_dense(dense: DenseBlock) -> tuple[bytes, pa.Buffer]:
    """Uncompressed key and value sections of a dense block."""
    values = pa.RecordBatch.from_arrays(dense.values, schema=_dense_value_schema(len(dense.qualifiers)))
    return encode_dense_keys(dense), values.serialize()


@lru_cache(maxsize=1024)
def timestamp_schema(encodings: tuple) -> pa.Schema:
    """:func:`dense_key_schema` without the row keys: the timestamp message of a
    version 3 ``KEYS_FIXED`` key chunk, whose row keys are stored without offsets."""
    fields = dense_key_schema(encodings)
    return pa.schema([fields.field(k) for k in range(1, len(fields))])


def dense_key_parts(dense: DenseBlock) -> tuple[bytes, tuple, list]:
    """``(padded qualifier table, timestamp encodings, timestamp columns)`` of a dense block."""
    encodings, ts_cols = [], []
    head = [_U32.pack(len(dense.qualifiers))]
    for q, ts in zip(dense.qualifiers, dense.timestamps):
        enc, col = _ts_column(ts)
        encodings.append(enc)
        ts_cols.append(col)
        head.append(_QUAL_HEAD.pack(enc, len(q)) + q)
    table = b"".join(head)
    return table + _PAD[: align8(len(table)) - len(table)], tuple(encodings), ts_cols


def encode_dense_keys(dense: DenseBlock) -> bytes:
    """The uncompressed key section of a dense block: the qualifier table, then the
    row keys and timestamp columns as one IPC message (version 3's key chunk too)."""
    table, encodings, ts_cols = dense_key_parts(dense)
    keys = pa.RecordBatch.from_arrays([dense.rows, *ts_cols], schema=dense_key_schema(encodings))
    return table + keys.serialize().to_pybytes()


def encode_block_v2(
    batch: pa.RecordBatch,
    prev_offset: int,
    codec: BlockCodec,
    row_count: int,
    dense: DenseBlock | None = None,
    cell_count: int | None = None,
) -> EncodedBlock:
    """Encode a block of cells (``CELL_SCHEMA``, sort order) with ``row_count``
    distinct rows; dense when the cells qualify.  A writer that has the rows
    as columns already passes ``dense`` and its ``cell_count`` (``batch`` is
    then not encoded)."""
    if dense is None:
        dense = dense_from_cells(batch)
    if dense is not None:
        layout = BlockLayout.DENSE
        key_raw, value_raw = encode_dense(dense)
    else:
        layout = BlockLayout.CELLS
        key_raw = batch.select([0, 2, 3, 4]).serialize()
        value_raw = batch.select([5]).serialize()
    key_raw = pa.py_buffer(key_raw) if isinstance(key_raw, bytes) else key_raw
    key_stored = codec.compress(key_raw)
    value_stored = codec.compress(value_raw)
    key_parts, value_parts = _padded(key_stored), _padded(value_stored)
    header = BlockHeaderV2(
        layout=layout,
        compression=codec.code,
        cell_count=cell_count if cell_count is not None else batch.num_rows,
        row_count=row_count,
        prev_offset=prev_offset,
        key_size=key_stored.size,
        key_raw_size=key_raw.size,
        value_size=value_stored.size,
        value_raw_size=value_raw.size,
        key_checksum=_crc(key_parts),
        value_checksum=_crc(value_parts),
    )
    return EncodedBlock(
        [header.encode(), *key_parts, *value_parts],
        header.length,
        header.key_end,
        int(layout),
        row_count,
        key_raw.size + value_raw.size,
    )


def unpack_section(
    stored: pa.Buffer, size: int, raw_size: int, crc: int, codec: BlockCodec, what: str, path: str, offset: int
) -> pa.Buffer:
    """Verify a padded stored section read at ``offset`` and decompress it."""
    if stored.size != align8(size):
        raise CorruptionError(f"truncated {what} ({stored.size} of {align8(size)} bytes)", path, offset)
    if checksum(stored) != crc:
        raise CorruptionError(f"{what} checksum mismatch", path, offset)
    try:
        body = codec.decompress(stored.slice(0, size), raw_size)
    except StorageError:
        raise
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise CorruptionError(f"{what} does not decompress ({exc})", path, offset) from None
    if body.size != raw_size:
        raise CorruptionError(f"{what} decompressed to the wrong size", path, offset)
    return body


def read_batch(body: pa.Buffer, schema: pa.Schema, what: str, path: str, offset: int) -> pa.RecordBatch:
    try:
        batch = pa.ipc.read_record_batch(body, schema)
        batch.validate()
    except (pa.ArrowException, ValueError) as exc:
        raise CorruptionError(f"{what} is not a valid batch ({exc})", path, offset) from None
    return batch


def qualifier_table(body, path: str, at: int) -> tuple[tuple, tuple, int]:
    """``(qualifiers, timestamp encodings, padded size)`` of the qualifier table
    that opens the (decompressed) key section of a ``DENSE`` block at ``at``."""
    what = "data block key section"
    view = memoryview(body)
    try:
        (q,) = _U32.unpack_from(view, 0)
        pos = 4
        qualifiers, encodings = [], []
        for _ in range(q):
            enc, length = _QUAL_HEAD.unpack_from(view, pos)
            pos += _QUAL_HEAD.size
            if enc not in (TS_PLAIN, TS_RUN_LENGTH) or pos + length > len(view):
                raise ValueError("bad qualifier table entry")
            qualifiers.append(bytes(view[pos : pos + length]))
            encodings.append(enc)
            pos += length
    except (struct.error, ValueError) as exc:
        raise CorruptionError(f"{what} has a bad qualifier table ({exc})", path, at) from None
    if q == 0 or any(a >= b for a, b in zip(qualifiers, qualifiers[1:])):
        raise CorruptionError(f"{what} qualifiers are missing or out of order", path, at)
    return tuple(qualifiers), tuple(encodings), align8(pos)


def decode_keys(header: BlockHeaderV2, stored: pa.Buffer, codec: BlockCodec, path: str, offset: int):
    """The key section of the block at ``offset``: a ``KEY_SCHEMA`` batch for a
    ``CELLS`` block, a keys-only :class:`DenseBlock` for a ``DENSE`` one."""
    at = offset + BLOCK_V2_HEADER_SIZE
    what = "data block key section"
    body = unpack_section(stored, header.key_size, header.key_raw_size, header.key_checksum, codec, what, path, at)
    return parse_keys(header, body, what, path, at)


def parse_keys(header, body: pa.Buffer, what: str, path: str, at: int):
    """The decompressed key section (version 3: key chunk) ``body`` of a block whose
    header is ``header`` (its layout, cell and row counts), read at ``at``: a
    ``KEY_SCHEMA`` batch for a ``CELLS`` block, a keys-only :class:`DenseBlock` for a
    ``DENSE`` one."""
    if header.layout == BlockLayout.CELLS:
        keys = read_batch(body, KEY_SCHEMA, what, path, at)
        if keys.num_rows != header.cell_count:
            raise CorruptionError(f"{what} holds {keys.num_rows} cells, its header says {header.cell_count}", path, at)
        return keys
    qualifiers, encodings, table_size = qualifier_table(body, path, at)
    keys = read_batch(body.slice(table_size), dense_key_schema(encodings), what, path, at)
    if keys.num_rows != header.row_count:
        raise CorruptionError(f"{what} holds {keys.num_rows} rows, its header says {header.row_count}", path, at)
    dense = DenseBlock(keys.column(0), qualifiers, list(keys.columns[1:]), None)
    if dense.cell_count() != header.cell_count:
        raise CorruptionError(f"{what} holds {dense.cell_count()} cells, its header says {header.cell_count}", path, at)
    return dense


def decode_values(header: BlockHeaderV2, keys, stored: pa.Buffer, codec: BlockCodec, family: bytes, path: str, offset: int):
    """Add the value section (read after ``keys``) of the block at ``offset``:
    a ``CELL_SCHEMA`` batch for a ``CELLS`` block, a full :class:`DenseBlock`
    for a ``DENSE`` one."""
    at = offset + header.key_end
    what = "data block value section"
    body = unpack_section(stored, header.value_size, header.value_raw_size, header.value_checksum, codec, what, path, at)
    if header.layout == BlockLayout.CELLS:
        values = read_batch(body, VALUE_SCHEMA, what, path, at)
        if values.num_rows != keys.num_rows:
            raise CorruptionError(f"{what} holds {values.num_rows} values for {keys.num_rows} cells", path, at)
        return cells_with(keys, values.column(0), family)
    values = read_batch(body, _dense_value_schema(len(keys.qualifiers)), what, path, at)
    if values.num_rows != keys.num_rows:
        raise CorruptionError(f"{what} holds {values.num_rows} rows for {keys.num_rows} keys", path, at)
    cols = list(values.columns)
    for j, v in enumerate(cols):
        check_presence(keys, j, v, what, path, at)
    return DenseBlock(keys.rows, keys.qualifiers, keys.timestamps, cols, keys.cell_count())


def check_presence(keys: DenseBlock, j: int, values: pa.Array, what: str, path: str, at: int) -> None:
    """CorruptionError unless qualifier ``j``'s ``values`` are null exactly where the
    key section says the rows lack it (one vectorized comparison)."""
    has = keys.presence(j)  # None: every row has the qualifier (no decoding needed to know)
    if (values.null_count != 0) if has is None else not pc.all(pc.equal(pc.is_valid(values), has)).as_py():
        raise CorruptionError(f"{what} validity disagrees with the key section", path, at)


def cells_with(keys: pa.RecordBatch, values: pa.Array | None, family: bytes) -> pa.RecordBatch:
    """A ``CELL_SCHEMA`` batch from a ``CELLS`` key batch, the family and the values
    (empty values when None: a keys-only read)."""
    n = keys.num_rows
    if values is None:
        values = constant_binary(b"", n)
    return pa.RecordBatch.from_arrays(
        [keys.column(0), constant_binary(family, n), keys.column(1), keys.column(2), keys.column(3), values],
        schema=CELL_SCHEMA,
    )
