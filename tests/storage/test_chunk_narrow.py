"""The ``FRAME`` value chunk: big-endian integers of 2, 4 or 8 bytes stored as narrow
codes (``base + code x divisor``), rebuilt byte for byte as their ``FIXED`` form.

Round trips by the encoding's own functions and through store files (any values:
negatives, extremes, one value, all equal, no common divisor, absent rows), the
writer's choice (taken for dates and small ranges where it stores no larger, never
for values spread over every bit), the chunk statistics (the same bytewise bounds as
``FIXED``), and damaged chunks: each fails with a one-line error naming the chunk.
"""

from __future__ import annotations

import importlib
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.errors import CorruptionError
from storage.storefile import StoreFileReader, StoreFileWriter
from storage.storefile._chunk_encodings import decode_frame, encode_frame
from storage.storefile.format import INDEX_SCHEMA_V3, SECTION_HEADER_SIZE, TRAILER_SIZE, ChunkEncoding, Trailer
from storage.storefile.index import BlockIndex
from storage.vfs.fs import FileSystem

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: the reference alone
    BUILT = None
PATHS = [None] + ([BUILT] if BUILT is not None else [])
"""The reference (NumPy's whole-array steps) and, where built, the compiled ``frame_values``."""

WHAT = "data block value chunk"
DAY_MS = 86_400_000


def _fixed_bytes(values: list, width: int) -> tuple[np.ndarray, np.ndarray | None, bytes]:
    """``(rows x width bytes, zeros under absent rows; the present mask or None; the padded
    validity bitmap)`` of ``values`` (signed ints, None where absent), as the writer builds them."""
    data = b"".join(bytes(width) if v is None else v.to_bytes(width, "big", signed=True) for v in values)
    arr = pa.array([None if v is None else v.to_bytes(width, "big", signed=True) for v in values], pa.binary())
    if not arr.null_count:
        return np.frombuffer(data, np.uint8), None, b""
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    bits = np.packbits(valid, bitorder="little").tobytes()
    return np.frombuffer(data, np.uint8), valid, bits + bytes(-len(bits) % 8)


def _ints(width: int):
    lo, hi = -(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1
    return st.integers(lo, hi)


@st.composite
def _columns(draw):
    """A width and values of it: anywhere in range, or a frame plus multiples of a step."""
    width = draw(st.sampled_from([2, 4, 8]))
    n = draw(st.integers(1, 300))
    if draw(st.booleans()):
        values = draw(st.lists(_ints(width), min_size=n, max_size=n))
    else:
        lo, hi = -(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1
        base = draw(_ints(width))
        step = draw(st.sampled_from([1, 7, DAY_MS % (1 << (8 * width - 2)) or 1, 1000]))
        spread = draw(st.sampled_from([0, 1, 200, 60_000, 1 << 20]))
        values = [min(hi, max(lo, base + step * draw(st.integers(0, spread)))) for _ in range(n)]
    if draw(st.booleans()):
        absent = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        values = [None if a else v for a, v in zip(absent, values)]
    return width, values


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_columns())
def test_a_frame_chunk_rebuilds_exactly_the_fixed_bytes(column):
    width, values = column
    data, valid, bitmap = _fixed_bytes(values, width)
    frame = encode_frame(data, width, valid, bitmap)
    present = [v for v in values if v is not None]
    if not present:
        assert frame is None
        return
    span = min(max(present) - min(present),
               max(v % (1 << (8 * width)) for v in present) - min(v % (1 << (8 * width)) for v in present))
    if span < 1 << (4 * width) and len(values) >= 32:  # codes of half the width hold such a range
        assert frame is not None
    if frame is None:
        return
    assert frame.size < len(data) + 8 + len(bitmap)  # narrower than the FIXED chunk, heads included
    for path in PATHS:
        got = decode_frame(frame, len(values), WHAT, "f.sf", 0, native=path)
        got.validate(full=True)
        assert got.null_count == values.count(None)
        assert got.to_pylist() == [None if v is None else v.to_bytes(width, "big", signed=True) for v in values]
        # the buffer itself: zeros under absent rows, as a FIXED chunk holds
        assert got.buffers()[2].to_pybytes()[: len(data)] == data.tobytes()


@pytest.mark.parametrize("width,values,code", [
    (8, [-(1 << 63), (1 << 63) - 1] * 20, 1),  # the extremes: 1 apart when read unsigned
    (8, [-(1 << 63), 0, (1 << 63) - 1] * 20, None),  # spread over every bit either way
    (8, [0] * 50, 1),  # all equal: codes of 0
    (4, [-5] * 40, 1),  # one value
    (2, [-32768, 32767, 0] * 20, None),  # a 2-byte span needs 2-byte codes: not narrower
    (8, [3, 10, 17, 1 << 33] * 20, None),  # no common divisor beyond 1, a 34-bit span
    (8, [3, 10, 17, (1 << 31) + 3] * 20, 4),  # a 31-bit span: 4-byte codes
    (8, [-3 * DAY_MS, 0, 700 * DAY_MS, 20_000 * DAY_MS] * 20, 2),  # dates: a divisor of a day
])
def test_extremes_one_value_and_spans_that_do_not_narrow(width, values, code):
    data, valid, bitmap = _fixed_bytes(values, width)
    frame = encode_frame(data, width, valid, bitmap)
    if code is None:
        assert frame is None
        return
    assert struct.unpack_from("<III", frame.to_pybytes())[2] == code
    for path in PATHS:
        got = decode_frame(frame, len(values), WHAT, "f.sf", 0, native=path)
        assert got.to_pylist() == [v.to_bytes(width, "big", signed=True) for v in values]


def _write(fs, name: str, columns: dict, compression, n: int) -> None:
    w = StoreFileWriter(fs, name, family=b"cf", compression=compression)
    quals = sorted(columns)
    w.append_rows(pa.array([b"r%07d" % i for i in range(n)], pa.binary()), quals,
                  [pa.array(columns[q], pa.binary()) for q in quals],
                  [pa.array([None if v is None else 7 for v in columns[q]], pa.int64()) for q in quals])
    w.finish()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(_columns())
def test_store_files_read_back_every_integer_column(tmp_path, column):
    width, values = column
    if all(v is None for v in values):
        return
    fs = FileSystem(str(tmp_path))
    cells = [None if v is None else v.to_bytes(width, "big", signed=True) for v in values]
    _write(fs, "h.sf", {b"k": [b"x"] * len(values), b"v": cells}, None, len(values))
    with StoreFileReader(fs, "h.sf") as r:
        r.check()  # recomputes the chunk's bounds from the rebuilt values
        got = [v for part in r.scan_parts() for v in part.dense.value(1).to_pylist()]
        assert got == cells
        row = len(values) // 2
        want = cells[row]
        assert [c.value for c in r.row_cells(b"r%07d" % row)][1:] == ([] if want is None else [want])
    fs.delete("h.sf")


def test_the_writer_takes_frame_for_dates_and_keeps_fixed_for_values_over_every_bit(tmp_path):
    fs = FileSystem(str(tmp_path))
    n = 40_000  # past the rows the writer samples before it tries FRAME on a whole chunk
    mix = [(i * 2654435761 >> 7) % 10007 for i in range(n)]
    dates = [((8000 + m % 2526) * DAY_MS).to_bytes(8, "big", signed=True) for m in mix]  # binary SerDe DATE
    spread = [(m * 0x9E3779B97F4A7C15 % (1 << 64)).to_bytes(8, "big") for m in mix]
    _write(fs, "d.sf", {b"d": dates, b"s": spread}, "zstd", n)
    with StoreFileReader(fs, "d.sf") as r:
        ch = r._index.chunks
        assert [list(ch.encoding[ch.starts[i] + 1: ch.starts[i + 1]]) for i in range(r.block_count)] == \
            [[ChunkEncoding.FRAME, ChunkEncoding.FIXED]] * r.block_count
        # statistics: the bytewise bounds a FIXED chunk records
        assert r.chunk_stats(b"d") == ([min(dates)] * r.block_count, [max(dates)] * r.block_count)
        frame_stored = sum(ch.stored[ch.starts[i] + 1] for i in range(r.block_count))
        frame_raw = sum(ch.raw[ch.starts[i] + 1] for i in range(r.block_count))
        got = [v for part in r.scan_parts(columns=[b"d"]) for v in part.dense.value(0).to_pylist()]
        assert got == dates
    # 2-byte codes, and fewer bytes stored than the 8-byte values compress to
    stored_fixed = pa.Codec("zstd").compress(b"".join(dates), asbytes=True)
    assert frame_raw < n * 2 + 64 * r.block_count and frame_stored < len(stored_fixed)


def _damaged(mutate) -> pa.Buffer:
    values = [((100 + i % 37) * DAY_MS) for i in range(64)]
    data, valid, bitmap = _fixed_bytes(values, 8)
    head = bytearray(encode_frame(data, 8, valid, bitmap).to_pybytes())
    return pa.py_buffer(bytes(mutate(head)))


def _set(head: bytearray, field: int, value: int) -> bytearray:
    fmt = "<IIIIQQ"
    fields = list(struct.unpack_from(fmt, head, 0))
    fields[field] = value
    struct.pack_into(fmt, head, 0, *fields)
    return head


@pytest.mark.parametrize("mutate,message", [
    (lambda h: h[:20], "is truncated"),
    (lambda h: h[:-3], "holds"),  # a truncated payload: codes missing
    (lambda h: _set(h, 5, 0), "has a divisor of 0"),
    (lambda h: _set(h, 2, 8), "codes of 8 bytes for values of 8"),  # a code width that does not match
    (lambda h: _set(h, 2, 3), "codes of 3 bytes"),
    (lambda h: _set(h, 0, 3), "bad frame head"),  # a value width FRAME does not have
    (lambda h: _set(h, 1, 6), "bad frame head"),  # unknown flags
    (lambda h: _set(h, 5, 1 << 62), "past the range of 8-byte values"),  # codes x divisor overflow
    (lambda h: _set(_set(h, 0, 4), 4, 1 << 40), "out of range of 4-byte values"),
    (lambda h: _set(h, 5, (1 << 64) // 30), "past the range of 8-byte values"),  # codes past 29 overflow
])
@pytest.mark.parametrize("path", PATHS, ids=lambda p: "reference" if p is None else "compiled")
def test_a_damaged_frame_chunk_fails_with_one_line_naming_it(mutate, message, path):
    with pytest.raises(CorruptionError) as err:
        decode_frame(_damaged(mutate), 64, WHAT, "t/f.sf", 4096, native=path)
    text = str(err.value)
    assert message in text and WHAT in text and "t/f.sf" in text and "\n" not in text


def test_the_compiled_frame_decode_refuses_bad_arguments_in_one_line():
    if BUILT is None:  # no compiler at install: the engine runs the reference, nothing to refuse
        return
    codes = np.array([1, 2, 250], np.uint8)
    alloc = pa.allocate_buffer
    with pytest.raises(ValueError, match="codes: row 2 has code 250, times the divisor 33554432 past 4-byte values"):
        BUILT.frame_values(codes, 1, 3, 4, 0, 1 << 25, None, alloc)
    with pytest.raises(ValueError, match="base 0 and divisor 4294967296 must lie within 4-byte values"):
        BUILT.frame_values(codes, 1, 3, 4, 0, 1 << 32, None, alloc)
    with pytest.raises(ValueError, match="code_width must be 1, 2 or 4, got 3"):
        BUILT.frame_values(codes, 3, 1, 4, 0, 1, None, alloc)
    with pytest.raises(ValueError, match="width must be 2, 4 or 8, got 3"):
        BUILT.frame_values(codes, 1, 3, 3, 0, 1, None, alloc)
    with pytest.raises(ValueError, match="codes: 3 bytes, 2 rows of 2 bytes need 4"):
        BUILT.frame_values(codes, 2, 2, 4, 0, 1, None, alloc)
    with pytest.raises(ValueError, match="validity: 1 bytes, 9 rows need 2"):
        BUILT.frame_values(np.zeros(9, np.uint8), 1, 9, 4, 0, 1, b"\xff", alloc)
    # the largest code at the frame's edge is taken: (2 ** 32 - 1) as the last 4-byte value
    got = BUILT.frame_values(np.array([0, 255], np.uint8), 1, 2, 4, 2 ** 32 - 256, 1, None, alloc)
    assert got.to_pybytes() == (2 ** 32 - 256).to_bytes(4, "big") + (2 ** 32 - 1).to_bytes(4, "big")


def test_an_unknown_chunk_encoding_is_named_when_the_file_opens(tmp_path):
    """A chunk encoding this reader does not know (a newer writer's) is refused at open,
    by its code, before any block is read."""
    fs = FileSystem(str(tmp_path))
    _write(fs, "u.sf", {b"d": [(i * DAY_MS).to_bytes(8, "big") for i in range(100)]}, "zstd", 100)
    raw = (tmp_path / "u.sf").read_bytes()
    trailer = Trailer.decode(raw[-TRAILER_SIZE:], "u.sf", len(raw))
    body = raw[trailer.index_offset + SECTION_HEADER_SIZE: trailer.index_offset + trailer.index_length]
    batch = pa.ipc.read_record_batch(pa.py_buffer(body), INDEX_SCHEMA_V3)
    chunks = batch.column("chunks")
    flat = chunks.flatten()
    enc = flat.field("encoding").to_numpy().copy()
    enc[1] = 9
    fields = [pa.array(enc, pa.uint8()) if f.name == "encoding" else flat.field(f.name) for f in flat.type]
    new_flat = pa.StructArray.from_arrays(fields, fields=list(flat.type))
    new_chunks = pa.ListArray.from_arrays(chunks.offsets, new_flat, type=chunks.type)
    cols = [new_chunks if name == "chunks" else batch.column(name) for name in batch.schema.names]
    changed = pa.RecordBatch.from_arrays(cols, schema=batch.schema).serialize().to_pybytes()
    with pytest.raises(CorruptionError, match="unknown chunk encoding 9 \\(this reader knows .*6 FRAME.*\\)"):
        BlockIndex.decode(changed, "u.sf", 0, trailer.index_offset, trailer.block_count, 3, b"cf")
