"""Encoding and verified decoding of version 3 data blocks: column chunks.

A block is ``| BlockHeaderV3 (48 B) | chunk 0 | chunk 1 | ... |``.  Each chunk is
compressed on its own by the file's codec (a value chunk the codec does not halve, in a
zstd or lz4 file, is stored as is: :data:`AS_IS_ABOVE`; so is a narrower encoding of it whose
raw bytes are within :data:`AS_IS_WITHIN` of what the codec keeps), padded with zeros to a multiple
of 8 bytes and checksummed on its own; where each lies, its sizes, checksum, encoding
and statistics are in the block index (:data:`format.INDEX_SCHEMA_V3`), so a
reader fetches, verifies, decompresses and decodes only the chunks it needs.

* Chunk 0 holds the keys, exactly as a version 2 key section
  (:func:`._block_v2.encode_dense_keys` for ``DENSE``, a ``KEY_SCHEMA`` message
  for ``CELLS``), or, for ``DENSE`` rows whose keys have one width,
  :attr:`ChunkEncoding.KEYS_FIXED`: the qualifier table, an 8-byte head (u32 key
  width, u32 flags = 0), the keys back to back (padded to 8 bytes), then the
  timestamp columns alone as one IPC message.  Where it stores smaller,
  :attr:`ChunkEncoding.KEYS_DELTA`: the same, but the keys cut into parts of at most
  8 bytes, each part of rows 1 on stored as narrow deltas from the row before or codes
  from a base (the first key whole); the reader rebuilds the very bytes ``KEYS_FIXED``
  holds (:mod:`._key_delta`), so nothing above it differs.
* ``DENSE``: chunk ``j + 1`` holds qualifier ``j``'s values, one per row, null
  where the row lacks it: an Arrow IPC message of one binary column
  (:attr:`ChunkEncoding.IPC`), or, when every present value has one width ``w``
  (8-byte longs, dates, decimals), :attr:`ChunkEncoding.FIXED`: an 8-byte head
  (u32 ``w``, u32 flags: bit 0 = a validity bitmap follows), the bitmap (Arrow's,
  least significant bit first, padded to 8 bytes) when some row lacks a value,
  then ``rows x w`` bytes (zeros for absent values).  No offsets are stored:
  they are rebuilt (one cached array per row count and width).  Where it stores
  smaller, :attr:`ChunkEncoding.DICT` or :attr:`ChunkEncoding.LENGTHS`, and for
  2-, 4- or 8-byte integers :attr:`ChunkEncoding.FRAME` (:mod:`._chunk_encodings`).
* ``CELLS``: chunk 1 holds every cell's value, a ``VALUE_SCHEMA`` message (version
  2's two sections, as two chunks).

The family is not in the blocks: it is stored once, in the file info.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..checksum import crc32
from ..errors import CorruptionError
from ._block_v2 import (
    VALUE_SCHEMA,
    EncodedBlock,
    cells_with,
    check_presence,
    dense_key_parts,
    encode_dense_keys,
    parse_keys,
    qualifier_table,
    read_batch,
    timestamp_schema,
    unpack_section,
)
from ._chunk_encodings import (ENCODERS, bitmap_part, choose, dict_codes, decode_frame, decode_lengths, encode_frame,
                               fixed_offsets)
from ._key_delta import encode_key_delta, key_delta_layout, plan_key_parts, rebuild_key_delta
from .codecs import CODECS, BlockCodec
from .dense import DenseBlock, dense_from_cells
from .format import BLOCK_V3_HEADER_SIZE, BlockHeaderV3, BlockLayout, ChunkEncoding, align8

__all__ = ["ChunkEntry", "encode_block_v3", "decode_key_chunk", "fixed_keys_layout", "fixed_key_bytes", "fixed_rows",
           "decode_value_chunk", "decode_block_v3", "chunk_runs", "check_chunk_count", "FIXED_KEY_ENCODINGS"]

_PAD = bytes(8)
_FIXED_HEAD = struct.Struct("<II")  # value width, flags
_HAS_VALIDITY = 1
_VALUE_COLUMN = pa.schema([pa.field("v", pa.binary())])
_MAX_FIXED_WIDTH = 1 << 16
_FRAME_SAMPLE_ROWS = 8192
_BINARY = pa.binary()  # made once: the type factory costs more than the decode it serves
AS_IS_ABOVE = 0.5
"""A value chunk is stored as is when its codec's output is more than this fraction of its raw
bytes (files of a codec with a magic: zstd, lz4).  Measured on lineitem at TPC-H SF 1 (zstd):
dates as FRAME codes keep 0.82 of their bytes, quantities 0.73, prices 0.53; the table grows
from 150.6 to 180.9 MiB (Parquet: 220.9) and the value chunks of q06's four columns verify
and decode in 10.2 ns a row instead of 34.4 (docs/decisions/2026-12-06-chunk-codecs.md)."""
AS_IS_WITHIN = 2.0
"""A value chunk is stored as is in a narrower encoding than the one its codec stores smallest
when that form's raw bytes are at most this many times the chosen one's stored bytes (files of
a codec with a frame magic): the trade of :data:`AS_IS_ABOVE` (twice the bytes for no
decompression) across encodings.  At TPC-H SF 1 (zstd) it takes lineitem's part keys and
orders' customer keys as 4-byte FRAME codes (1.45x and 1.48x the 8-byte keys under zstd), no
other column of lineitem, orders, partsupp, part or customer
(docs/decisions/2026-12-06-as-is-encodings.md)."""
_DELTA_KEYS_TAKEN = 4  # delta-coded keys a quarter the raw size of the fixed ones are taken without compressing both

FIXED_KEY_ENCODINGS = (ChunkEncoding.KEYS_FIXED, ChunkEncoding.KEYS_DELTA)
"""Key chunk encodings of row keys of one width, which a reader lays end to end without offsets."""

ChunkEntry = tuple
"""``(offset, stored, raw, checksum, encoding, count, min, max)``: one chunk's directory
entry, as :data:`format.CHUNK_TYPE` (offset from the block's first byte)."""


def _crc(parts: list) -> int:
    crc = 0
    for p in parts:
        crc = crc32(p, crc)
    return crc & 0xFFFFFFFF


def _np(arr) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def _encode_values(values: pa.Array, codec: BlockCodec | None = None) -> tuple:
    """``(raw bytes, encoding, present count, min, max[, stored bytes])`` of one dense value
    column: ``FIXED`` when every present value has one width, else ``IPC``; with a
    ``codec``, a narrower encoding (:mod:`._chunk_encodings`) where it stores smaller,
    then the compressed bytes too.  Bounds are recorded for values of one width."""
    n = len(values)
    present = n - values.null_count
    base = None
    bounds = {"min": None, "max": None}
    if present:
        widths = pc.min_max(pc.binary_length(values)).as_py()
        width = widths["min"]
        if width == widths["max"] and 0 < width <= _MAX_FIXED_WIDTH and n * width < (1 << 31):
            bounds = pc.min_max(values).as_py()  # bytewise: binary compares as unsigned bytes
            data = np.zeros((n, width), dtype=np.uint8)
            valid, bitmap = None, b""
            if values.null_count:
                valid = _np(values.is_valid())
                dense_part = values.filter(pa.array(valid))
                data[valid] = _fixed_bytes(dense_part, width).reshape(-1, width)
                bitmap = bitmap_part(values)
                head = _FIXED_HEAD.pack(width, _HAS_VALIDITY) + bitmap
            else:
                data = _fixed_bytes(values, width)
                head = _FIXED_HEAD.pack(width, 0)
            base = (pa.py_buffer(head + data.tobytes()), int(ChunkEncoding.FIXED))
    if base is None:
        base = (pa.RecordBatch.from_arrays([values], schema=_VALUE_COLUMN).serialize(), int(ChunkEncoding.IPC))
    if codec is None or not present:
        return (*base, present, bounds["min"], bounds["max"])
    fixed = base[1] == ChunkEncoding.FIXED
    encode_dict = dict(ENCODERS).get(ChunkEncoding.DICT)
    narrow = None
    if encode_dict is not None and not (fixed and width == 1):  # one-byte codes for one-byte values never store smaller
        narrow = encode_dict(values)
    if narrow is not None and 4 * narrow.size <= min(base[0].size, _data_bytes(values) + n):
        # codes a quarter the size of every other candidate's raw bytes (a length-coded chunk
        # holds the values and a length each): the dictionary is taken without compressing the
        # others, a third of the writer's CPU on lineitem (there it stored 2-12x smaller each time)
        return narrow, int(ChunkEncoding.DICT), present, bounds["min"], bounds["max"], codec.compress(narrow)
    candidates = [base]
    built = [base]  # every form encoded, cheapest to decode first: for _as_is_instead
    best = None
    frame = None
    frame_may_pay = fixed and _frame_may_pay(data, width, n, codec)
    if fixed and (frame_may_pay or codec.magic is not None):
        # built even where it would store larger compressed: as is it may be worth its bytes
        frame = encode_frame(data.reshape(-1), width, valid, bitmap)
        if frame is not None:
            built.append((frame, int(ChunkEncoding.FRAME)))
    if frame is not None and frame_may_pay:
        # narrow integer codes: taken whenever they store no larger, without the gain the
        # dearer encodings need, as they also leave fewer bytes to decompress (the cost of a
        # read: 2 bytes a row for lineitem's dates against 8)
        stored_base, stored_frame = codec.compress(base[0]), codec.compress(frame)
        best = (frame, int(ChunkEncoding.FRAME), stored_frame) if stored_frame.size <= stored_base.size \
            else (*base, stored_base)
        candidates = []
    for enc, encode in ENCODERS:
        if enc == ChunkEncoding.LENGTHS and fixed:
            continue  # lengths of one width are what FIXED leaves out
        raw = narrow if enc == ChunkEncoding.DICT else encode(values)
        if raw is not None:
            candidates.append((raw, int(enc)))
            built.append((raw, int(enc)))
    raw, enc, stored = choose(candidates, codec, best)
    instead = _as_is_instead(raw, stored, built, codec)
    if instead is not None:
        raw, enc = instead
        stored = raw
    return raw, enc, present, bounds["min"], bounds["max"], stored


def _as_is_instead(raw: pa.Buffer, stored: pa.Buffer, built: list, codec: BlockCodec) -> tuple | None:
    """The ``(raw buffer, encoding)`` among ``built`` (every encoding built for the chunk,
    cheapest to decode first) to store as is instead of the chosen ``raw`` chunk, whose codec
    output is ``stored``; None to keep the choice.  In a file of a codec with a frame magic,
    when the chosen chunk would be stored compressed, the narrowest form is taken, as is, when it
    is another encoding than the chosen one and its raw bytes are at most :data:`AS_IS_WITHIN`
    times the chosen one's stored bytes: a read then does not decompress.  A chosen chunk stored
    as is anyway keeps its encoding (a one-byte DICT against a one-byte FRAME: no decompression
    to save, and the dictionary's gather is the cheaper decode)."""
    if codec.magic is None:
        return None
    if _store_as_is(raw, stored, codec):
        return None  # nothing to decompress already: the encodings' decodes differ too little to weigh
    narrowest = min(built, key=lambda cand: cand[0].size)  # the first of equals: the cheaper decode
    if narrowest[0] is raw or narrowest[0].size > AS_IS_WITHIN * stored.size:
        return None
    return narrowest if _unlike_codec_output(narrowest[0], codec) else None  # always: as above


def _frame_may_pay(data: np.ndarray, width: int, n: int, codec: BlockCodec) -> bool:
    """Whether a ``FRAME`` chunk of these ``FIXED`` value bytes may store no larger: judged on
    the first :data:`_FRAME_SAMPLE_ROWS` rows of a larger chunk (lineitem's part keys as 4-byte
    codes stored 2.5% larger, and encoding and compressing the whole chunk twice cost a
    third more of the writer's CPU on such a column)."""
    if n <= 4 * _FRAME_SAMPLE_ROWS:
        return True
    head = data.reshape(-1)[: _FRAME_SAMPLE_ROWS * width]
    sample = encode_frame(head, width, None, b"")  # absent rows hold zeros: a fair sample all the same
    if sample is None:
        return False
    return codec.compress(sample).size <= codec.compress(pa.py_buffer(head)).size


def _data_bytes(values: pa.Array) -> int:
    """Bytes of the values of a binary array (its offsets' span)."""
    n = len(values)
    if n == 0:
        return 0
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=n + 1, offset=4 * values.offset)
    return int(offsets[-1]) - int(offsets[0])


def _fixed_bytes(values: pa.Array, width: int) -> np.ndarray:
    """The bytes of a binary array without nulls whose values all have ``width`` bytes."""
    offsets = values.buffers()[1]
    start = int(np.frombuffer(offsets, dtype=np.int32, count=1, offset=4 * values.offset)[0])
    return np.frombuffer(values.buffers()[2], dtype=np.uint8, count=len(values) * width, offset=start)


def _encode_keys(dense: DenseBlock, codec: BlockCodec | None = None) -> tuple:
    """``(raw key chunk, encoding[, stored bytes])`` of a dense block: ``KEYS_FIXED`` when
    every row key has one width (no 4-byte offset per row: on lineitem's 12-byte keys the
    key chunk stored 4.4 bytes a row with offsets, 1.6 without), else ``KEYS``.  With a
    ``codec``, ``KEYS_DELTA`` replaces ``KEYS_FIXED`` where it stores smaller (then the
    compressed bytes come too): taken without compressing the fixed form when its raw
    bytes are at most a quarter of the keys' (lineitem's keys: 2 bytes a row against 12)."""
    widths = pc.min_max(pc.binary_length(dense.rows)).as_py()
    width = widths["min"]
    n = dense.num_rows
    if width != widths["max"] or not 0 < width <= _MAX_FIXED_WIDTH or n * width >= 1 << 31:
        return pa.py_buffer(encode_dense_keys(dense)), int(ChunkEncoding.KEYS)
    table, encodings, ts_cols = dense_key_parts(dense)
    key_bytes = _fixed_bytes(dense.rows, width)
    keys = key_bytes.tobytes()
    stamps = pa.RecordBatch.from_arrays(ts_cols, schema=timestamp_schema(encodings)).serialize().to_pybytes()
    fixed = pa.py_buffer(b"".join([table, _FIXED_HEAD.pack(width, 0), keys, _PAD[: align8(len(keys)) - len(keys)],
                                   stamps]))
    if codec is None:
        return fixed, int(ChunkEncoding.KEYS_FIXED)
    matrix = key_bytes.reshape(n, width)
    parts = plan_key_parts(matrix)
    delta = encode_key_delta(matrix, parts) if parts is not None else None
    if delta is None:
        return fixed, int(ChunkEncoding.KEYS_FIXED)
    raw = pa.py_buffer(b"".join([table, delta, stamps]))
    stored = codec.compress(raw, keys=True)
    if _DELTA_KEYS_TAKEN * len(delta) <= len(keys):
        return raw, int(ChunkEncoding.KEYS_DELTA), stored
    stored_fixed = codec.compress(fixed, keys=True)
    if stored.size < stored_fixed.size:
        return raw, int(ChunkEncoding.KEYS_DELTA), stored
    return fixed, int(ChunkEncoding.KEYS_FIXED), stored_fixed


def fixed_keys_layout(body, table_size: int, rows: int) -> tuple[int, int] | None:
    """``(key width, offset of the timestamp message)`` in a ``KEYS_FIXED`` key chunk's
    (decompressed) ``body`` of ``rows`` rows whose qualifier table takes ``table_size``
    bytes; None when the head is bad or the keys run past the body."""
    try:
        width, flags = _FIXED_HEAD.unpack_from(memoryview(body), table_size)
    except struct.error:
        return None
    at = table_size + _FIXED_HEAD.size + align8(rows * width)
    if width == 0 or flags != 0 or at > len(memoryview(body)):
        return None
    return width, at


def fixed_key_bytes(body, table_size: int, rows: int, encoding: int, what: str, path: str,
                    at: int) -> tuple[int, object, int]:
    """``(key width, the rows' keys back to back, offset of the timestamp message)`` of a
    ``KEYS_FIXED`` or ``KEYS_DELTA`` key chunk's (decompressed) ``body`` of ``rows`` rows
    whose qualifier table takes ``table_size`` bytes: a slice of the body, or the keys
    rebuilt from their parts.  A bad head or a bad part is a CorruptionError naming the chunk."""
    if encoding == ChunkEncoding.KEYS_DELTA:
        try:
            width, parts, first_at, msg_at = key_delta_layout(body, table_size, rows)
            keys = rebuild_key_delta(body, rows, width, first_at, parts)
        except ValueError as exc:
            raise CorruptionError(f"{what} of delta-coded keys does not decode: {exc}", path, at) from None
        return width, keys, msg_at
    layout = fixed_keys_layout(body, table_size, rows)
    if layout is None:
        raise CorruptionError(f"{what} has a bad fixed-width key head", path, at)
    width, msg_at = layout
    start = table_size + _FIXED_HEAD.size
    keys = body.slice(start, rows * width) if isinstance(body, pa.Buffer) else body[start : start + rows * width]
    return width, keys, msg_at


def fixed_rows(keys: pa.Buffer, rows: int, width: int) -> pa.Array:
    """``rows`` row keys of ``width`` bytes each, back to back in ``keys``, as a binary array."""
    return pa.Array.from_buffers(_BINARY, rows, [None, fixed_offsets(rows, width), keys])


def _parse_fixed_keys(header: BlockHeaderV3, body: pa.Buffer, what: str, path: str, at: int,
                      encoding: int = ChunkEncoding.KEYS_FIXED) -> DenseBlock:
    """The keys-only :class:`DenseBlock` of a ``KEYS_FIXED`` or ``KEYS_DELTA`` key chunk
    (``parse_keys``'s checks)."""
    qualifiers, encodings, table_size = qualifier_table(body, path, at)
    n = header.row_count
    width, keys, msg_at = fixed_key_bytes(body, table_size, n, encoding, what, path, at)
    stamps = read_batch(body.slice(msg_at), timestamp_schema(encodings), what, path, at)
    if stamps.num_rows != n:
        raise CorruptionError(f"{what} holds {stamps.num_rows} rows, its header says {n}", path, at)
    rows = fixed_rows(keys, n, width)
    dense = DenseBlock(rows, qualifiers, list(stamps.columns), None)
    if dense.cell_count() != header.cell_count:
        raise CorruptionError(f"{what} holds {dense.cell_count()} cells, its header says {header.cell_count}", path, at)
    return dense


def encode_block_v3(
    batch: pa.RecordBatch | None,
    prev_offset: int,
    codec: BlockCodec,
    row_count: int,
    dense: DenseBlock | None = None,
    cell_count: int | None = None,
) -> EncodedBlock:
    """Encode a block of cells (``CELL_SCHEMA``, sort order) with ``row_count``
    distinct rows, dense when the cells qualify (as :func:`._block_v2.encode_block_v2`).
    The result's ``chunks`` is the block's chunk directory and ``last_row`` its last row key."""
    if dense is None:
        dense = dense_from_cells(batch)
    chunks_raw = []  # (raw buffer, encoding, count, min, max)
    if dense is not None:
        layout = BlockLayout.DENSE
        first_row, last_row = dense.rows[0].as_py(), dense.rows[len(dense.rows) - 1].as_py()
        raw, enc, *stored = _encode_keys(dense, codec)
        chunks_raw.append((raw, enc, dense.num_rows, first_row, last_row, *stored))
        for v in dense.values:
            chunks_raw.append(_encode_values(v.cast(pa.binary()) if v.type != pa.binary() else v, codec))
    else:
        layout = BlockLayout.CELLS
        rows = batch.column(0)
        first_row, last_row = rows[0].as_py(), rows[len(rows) - 1].as_py()
        chunks_raw.append((batch.select([0, 2, 3, 4]).serialize(), int(ChunkEncoding.KEYS), batch.num_rows,
                           first_row, last_row))
        chunks_raw.append((batch.select([5]).serialize(), int(ChunkEncoding.IPC), batch.num_rows, None, None))
    parts: list = []
    entries: list[ChunkEntry] = []
    at = BLOCK_V3_HEADER_SIZE
    raw_total = 0
    for k, (raw, enc, count, lo, hi, *done) in enumerate(chunks_raw):
        stored = done[0] if done else codec.compress(raw, keys=k == 0)  # the key chunk is first
        if k and _store_as_is(raw, stored, codec):
            stored = raw
        pad = align8(stored.size) - stored.size
        piece = [stored, _PAD[:pad]] if pad else [stored]
        entries.append((at, stored.size, raw.size, _crc(piece), enc, count, lo, hi))
        parts.extend(piece)
        at += stored.size + pad
        raw_total += raw.size
    key_end = entries[0][0] + align8(entries[0][1])
    header = BlockHeaderV3(
        layout=layout,
        compression=codec.code,
        cell_count=cell_count if cell_count is not None else batch.num_rows,
        row_count=row_count,
        prev_offset=prev_offset,
        length=at,
        key_end=key_end,
        chunk_count=len(entries),
    )
    enc = EncodedBlock([header.encode(), *parts], at, key_end, int(layout), row_count, raw_total)
    enc.chunks = entries
    enc.last_row = last_row
    return enc


def _stored(buf: pa.Buffer, base: int, entry: ChunkEntry) -> pa.Buffer:
    """Chunk ``entry``'s padded stored bytes in ``buf``, which starts ``base`` bytes into the block."""
    return buf.slice(entry[0] - base, align8(entry[1]))


def _store_as_is(raw: pa.Buffer, stored: pa.Buffer, codec: BlockCodec) -> bool:
    """Whether a value chunk whose ``codec`` output is ``stored`` is written as its ``raw``
    bytes instead: in a file of a codec with a frame magic (zstd, lz4), when the codec does not
    at least halve the chunk (:data:`AS_IS_ABOVE`).  Every read of a compressed chunk pays its
    decompression (big scans do not cache blocks): zstd on lineitem's chunks cost 0.7-1.7 ns a
    raw byte, reading the bytes as they are a few tenths, so a chunk that compresses little costs a
    read more than its bytes save (docs/decisions/2026-12-06-chunk-codecs.md)."""
    if codec.magic is None or stored.size <= AS_IS_ABOVE * raw.size:
        return False
    return _unlike_codec_output(raw, codec)  # always: the encodings' heads rule the magic out


def _unlike_codec_output(data: pa.Buffer, codec: BlockCodec) -> bool:
    """Whether chunk bytes ``data`` can lie as is in a file of ``codec``: the codec has a frame
    magic, which everything it writes begins with, and ``data`` does not begin with it (what
    tells a reader an as-is chunk from a compressed one of the same size)."""
    magic = codec.magic
    return magic is not None and bytes(memoryview(data)[: len(magic)]) != magic


def _as_is(stored: pa.Buffer, entry: ChunkEntry, codec: BlockCodec) -> bool:
    """Whether value chunk ``entry`` (its padded ``stored`` bytes) is stored as is: its stored
    size is its raw size and it does not begin with the codec's magic."""
    return entry[1] == entry[2] and _unlike_codec_output(stored, codec)


def _unpack(buf: pa.Buffer, base: int, entry: ChunkEntry, codec: BlockCodec, what: str, path: str,
            offset: int, values: bool = True) -> pa.Buffer:
    """Chunk ``entry``'s bytes, verified and decompressed; a value chunk (``values``) stored as
    is (:func:`_as_is`) is verified and returned as it lies in ``buf``."""
    stored = _stored(buf, base, entry)
    if values and _as_is(stored, entry, codec):
        codec = CODECS["none"]
    return unpack_section(stored, entry[1], entry[2], entry[3], codec, what, path, offset + entry[0])


def decode_key_chunk(header: BlockHeaderV3, buf: pa.Buffer, base: int, entry: ChunkEntry, codec: BlockCodec,
                     path: str, offset: int):
    """The key chunk (``entry``; ``buf`` starts ``base`` bytes into the block at
    ``offset``) verified and decoded: a ``KEY_SCHEMA`` batch for ``CELLS``, a
    keys-only :class:`DenseBlock` for ``DENSE``.  Its statistics (first and last
    row key, row or cell count) are checked against what it holds."""
    what = "data block key chunk"
    at = offset + entry[0]
    body = _unpack(buf, base, entry, codec, what, path, offset, values=False)
    if entry[4] in FIXED_KEY_ENCODINGS and header.layout == BlockLayout.DENSE:
        keys = _parse_fixed_keys(header, body, what, path, at, entry[4])
    elif entry[4] == ChunkEncoding.KEYS:
        keys = parse_keys(header, body, what, path, at)
    else:
        raise CorruptionError(f"{what} names unknown encoding {entry[4]}", path, at)
    rows = keys.rows if isinstance(keys, DenseBlock) else keys.column(0)
    count = keys.num_rows
    if count != entry[5] or rows[0].as_py() != entry[6] or rows[count - 1].as_py() != entry[7]:
        raise CorruptionError(f"{what} disagrees with its statistics in the block index", path, at)
    return keys


def decode_value_chunk(keys: DenseBlock, j: int, buf: pa.Buffer, base: int, entry: ChunkEntry,
                       codec: BlockCodec, path: str, offset: int) -> pa.Array:
    """Qualifier ``j``'s value column from its chunk (``entry``), verified against
    the chunk's checksum, its directory entry and the key chunk's presence."""
    what = "data block value chunk"
    at = offset + entry[0]
    body = _unpack(buf, base, entry, codec, what, path, offset)
    n = keys.num_rows
    if entry[4] == ChunkEncoding.FIXED:
        values = _decode_fixed(body, n, what, path, at)
    elif entry[4] == ChunkEncoding.IPC:
        values = read_batch(body, _VALUE_COLUMN, what, path, at).column(0)
    elif entry[4] == ChunkEncoding.LENGTHS:
        values = decode_lengths(body, n, what, path, at)
    elif entry[4] == ChunkEncoding.DICT:
        values = dict_codes(body, n, what, path, at)  # expanded where first needed (DenseBlock)
    elif entry[4] == ChunkEncoding.FRAME:
        values = decode_frame(body, n, what, path, at)
    else:
        raise CorruptionError(f"{what} names unknown encoding {entry[4]}", path, at)
    if len(values) != n or n - values.null_count != entry[5]:
        raise CorruptionError(f"{what} holds {len(values)} rows for {n} keys", path, at)
    check_presence(keys, j, values, what, path, at)
    return values


def _decode_fixed(body: pa.Buffer, n: int, what: str, path: str, at: int) -> pa.Array:
    try:
        width, flags = _FIXED_HEAD.unpack_from(memoryview(body), 0)
    except struct.error:
        raise CorruptionError(f"{what} is truncated", path, at) from None
    pos = _FIXED_HEAD.size
    validity = None
    if flags & ~_HAS_VALIDITY or width == 0:
        raise CorruptionError(f"{what} has a bad fixed-width head", path, at)
    if flags & _HAS_VALIDITY:
        size = (n + 7) // 8
        validity = body.slice(pos, size)
        pos += align8(size)
    if body.size != pos + n * width:
        raise CorruptionError(f"{what} holds {body.size - pos} value bytes, {n} values of {width} need {n * width}",
                              path, at)
    nulls = -1 if validity is not None else 0
    return pa.Array.from_buffers(_BINARY, n, [validity, fixed_offsets(n, width), body.slice(pos)], nulls)


def decode_block_v3(header: BlockHeaderV3, entries: list, buf: pa.Buffer, base: int, codec: BlockCodec,
                    family: bytes, path: str, offset: int):
    """Every chunk of a block (``buf`` starts ``base`` bytes into it): a ``CELL_SCHEMA``
    batch for ``CELLS``, a full :class:`DenseBlock` for ``DENSE``."""
    keys = decode_key_chunk(header, buf, base, entries[0], codec, path, offset)
    check_chunk_count(header, keys, path, offset)
    if header.layout == BlockLayout.CELLS:
        what = "data block value chunk"
        at = offset + entries[1][0]
        values = read_batch(_unpack(buf, base, entries[1], codec, what, path, offset), VALUE_SCHEMA, what, path, at)
        if values.num_rows != keys.num_rows:
            raise CorruptionError(f"{what} holds {values.num_rows} values for {keys.num_rows} cells", path, at)
        return cells_with(keys, values.column(0), family)
    cols = [decode_value_chunk(keys, j, buf, base, entries[j + 1], codec, path, offset)
            for j in range(len(keys.qualifiers))]
    return DenseBlock(keys.rows, keys.qualifiers, keys.timestamps, cols, keys.cell_count())


def chunk_runs(entries: list, wanted: list[int]) -> list[tuple[int, int]]:
    """The chunks ``wanted`` (ascending indices) grouped into runs of adjacent chunks:
    ``(first, last)`` pairs, each one read."""
    runs: list[tuple[int, int]] = []
    for k in wanted:
        if runs and runs[-1][1] == k - 1:
            runs[-1] = (runs[-1][0], k)
        else:
            runs.append((k, k))
    return runs


def check_chunk_count(header: BlockHeaderV3, keys, path: str, offset: int) -> None:
    """A ``DENSE`` block has one value chunk per qualifier, a ``CELLS`` one one value chunk."""
    want = 1 + (len(keys.qualifiers) if isinstance(keys, DenseBlock) else 1)
    if header.chunk_count != want:
        raise CorruptionError(f"data block has {header.chunk_count} chunks, its keys need {want}", path, offset)
