"""The ``KEYS_DELTA`` key chunk: row keys of one width cut into parts, each part of rows 1 on
stored as narrow deltas from the row before or codes from a base, rebuilt byte for byte as
the ``KEYS_FIXED`` chunk holds them.

The compiled rebuild (``keys_delta``, storage/_native/decode.c) against its NumPy reference
on chunks laid out here from the spec (random widths and splits, deltas up to the widest
code, single rows, one to many parts, bodies with and without spare bytes after the codes);
the writer's split and its choice (taken for composite keys, ``KEYS_FIXED`` kept where the
form cannot narrow); round trips through the real writer and reader (scans, key-only runs,
counts, ``check()``, point reads through a table's ``row()`` and ``rows()``); and damaged
chunks, each a one-line CorruptionError naming the key chunk.  The kernel is called as built,
so these tests also check it when ``REGIONSCAN_NATIVE=0`` turns it off for the engine.
"""

from __future__ import annotations

import importlib
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage
from storage.errors import CorruptionError
from storage.storefile import StoreFileReader, StoreFileWriter
from storage.storefile._block_v3 import decode_key_chunk
from storage.storefile.dense import DenseBlock
from storage.storefile._key_delta import (
    KEY_PART_DELTA, KEY_PART_FRAME, encode_key_delta, key_delta_layout, plan_key_parts, rebuild_key_delta,
    rebuild_key_delta_py,
)
from storage.storefile.format import BLOCK_V3_HEADER_SIZE, BlockHeaderV3, ChunkEncoding
from storage.vfs.fs import FileSystem

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

_HEAD = struct.Struct("<IIII")
_PART = struct.Struct("<BBBBIQ")


def _pad(b: bytes) -> bytes:
    return b + bytes(-len(b) % 8)


def _lay_out(keys: list[bytes], parts: list[tuple[int, int, int]]) -> tuple[bytes, int]:
    """A ``KEYS_DELTA`` body (no qualifier table) laid out from docs/formats/storefile.md:
    ``parts`` as ``(width, kind, code width)``; a frame part's base is its least value over
    rows 1 on.  Returns the body and where its codes end."""
    w = len(keys[0])
    entries, codes, at = [], [], 0
    for width, kind, cw in parts:
        v = [int.from_bytes(k[at : at + width], "big") for k in keys]
        base = min(v[1:]) if kind == KEY_PART_FRAME and len(v) > 1 else 0
        c = [b - a for a, b in zip(v, v[1:])] if kind == KEY_PART_DELTA else [x - base for x in v[1:]]
        entries.append(_PART.pack(width, kind, cw, 0, 0, base))
        if cw:
            codes.append(_pad(b"".join(x.to_bytes(cw, "little") for x in c)))
        at += width
    body = b"".join([_HEAD.pack(w, 0, len(parts), 0), *entries, _pad(keys[0]), *codes])
    return body, len(body)


def _code_width(top: int) -> int:
    return next(c for c in (0, 1, 2, 4, 8) if top < 1 << (8 * c))


@st.composite
def _key_sets(draw):
    """Strictly ascending keys of one width, built part by part, and a split that holds them."""
    widths = draw(st.lists(st.integers(1, 8), min_size=1, max_size=5))
    n = draw(st.sampled_from([1, 2, 3, 17, 200, 700]))
    columns = []
    for width in widths:
        top = (1 << (8 * width)) - 1
        mode = draw(st.sampled_from(["const", "small", "any", "counter", "extreme"]))
        seed = draw(st.integers(0, 2**32))
        rng = np.random.default_rng(seed)
        if mode == "const":
            col = [draw(st.integers(0, top))] * n
        elif mode == "small":
            lo = draw(st.integers(0, top))
            col = [min(top, lo + int(x)) for x in rng.integers(0, 9, n)]
        elif mode == "counter":
            start = draw(st.integers(0, top))
            col = [min(top, start + int(x)) for x in np.cumsum(rng.integers(0, 300, n))]
        elif mode == "extreme":  # the widest steps a part holds: 0 and its maximum
            col = [int(x) * top for x in rng.integers(0, 2, n)]
        else:
            col = [int.from_bytes(rng.bytes(width), "big") for _ in range(n)]
        columns.append(col)
    keys = sorted({b"".join(v.to_bytes(w, "big") for v, w in zip(row, widths)) for row in zip(*columns)})
    return keys, widths


def _forms(keys: list[bytes], widths: list[int], draw_kinds: list[int]) -> list[tuple[int, int, int]]:
    """A valid ``(width, kind, code width)`` per part: deltas where the part never falls
    (else codes from a base), each with the narrowest code width that holds it."""
    parts, at = [], 0
    for width, want in zip(widths, draw_kinds):
        v = [int.from_bytes(k[at : at + width], "big") for k in keys]
        rising = all(b >= a for a, b in zip(v, v[1:]))
        kind = KEY_PART_DELTA if want == KEY_PART_DELTA and rising else KEY_PART_FRAME
        if len(v) == 1:
            top = 0
        elif kind == KEY_PART_DELTA:
            top = max(b - a for a, b in zip(v, v[1:]))
        else:
            top = max(v[1:]) - min(v[1:])
        parts.append((width, kind, _code_width(top)))
        at += width
    return parts


def _rebuilds(body: bytes, n: int) -> list[bytes]:
    """The chunk's keys rebuilt by every path: the reference, and the kernel (with the body as
    given and cut right after the codes, which takes its pass without spare bytes)."""
    w, parts, first_at, end = key_delta_layout(body, 0, n)
    got = [rebuild_key_delta_py(body, n, w, first_at, parts).to_pybytes()]
    if BUILT is not None:
        got.append(rebuild_key_delta(body, n, w, first_at, parts, native=BUILT).to_pybytes())
        got.append(rebuild_key_delta(body[:end], n, w, first_at, parts, native=BUILT).to_pybytes())
    return got


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_key_sets(), st.lists(st.sampled_from([KEY_PART_DELTA, KEY_PART_FRAME]), min_size=5, max_size=5))
def test_the_compiled_rebuild_and_the_reference_give_the_keys_back(generated, kinds):
    keys, widths = generated
    body, _ = _lay_out(keys, _forms(keys, widths, kinds))
    body += bytes(16)  # what follows the codes in a chunk (the timestamp message)
    for got in _rebuilds(body, len(keys)):
        assert got == b"".join(keys)
    # the writer's own split and forms give them back too, and no larger than the keys
    matrix = np.frombuffer(b"".join(keys), np.uint8).reshape(len(keys), -1)
    split = plan_key_parts(matrix)
    if len(keys) < 2:
        assert split is None
        return
    if split is not None:
        assert [b - a for a, b in split] and all(0 < b - a <= 8 for a, b in split)
        assert split[0][0] == 0 and split[-1][1] == matrix.shape[1]
        assert all(a[1] == b[0] for a, b in zip(split, split[1:]))
        mine = encode_key_delta(matrix, split)
        if mine is not None:
            assert len(mine) < 8 + len(_pad(b"".join(keys)))
            for got in _rebuilds(mine + bytes(16), len(keys)):
                assert got == b"".join(keys)


def test_maximum_deltas_and_codes_of_eight_bytes_rebuild():
    top = (1 << 64) - 1
    keys = [(0).to_bytes(8, "big") + b"\x00", (top - 1).to_bytes(8, "big") + b"\x01", top.to_bytes(8, "big") + b"\x00"]
    for kinds in ([(8, KEY_PART_DELTA, 8), (1, KEY_PART_FRAME, 1)], [(8, KEY_PART_FRAME, 8), (1, KEY_PART_FRAME, 1)],
                  [(4, KEY_PART_DELTA, 4), (4, KEY_PART_DELTA, 4), (1, KEY_PART_FRAME, 1)]):
        body, _ = _lay_out(keys, kinds)
        for got in _rebuilds(body + bytes(8), 3):
            assert got == b"".join(keys)


def _damage(keys: list[bytes], parts, mutate) -> bytes:
    body, _ = _lay_out(keys, parts)
    return bytes(mutate(bytearray(body))) + bytes(16)


_KEYS = [(1000 + i // 3).to_bytes(8, "big") + (1 + i % 3).to_bytes(4, "big") for i in range(60)]
_PARTS = [(8, KEY_PART_DELTA, 1), (4, KEY_PART_FRAME, 1)]
_CODES = _HEAD.size + 2 * _PART.size + 16  # the first part's codes


def _set_part(k: int, field: int, value: int):
    def mutate(b: bytearray) -> bytearray:
        at = _HEAD.size + k * _PART.size
        fields = list(_PART.unpack_from(b, at))
        fields[field] = value
        _PART.pack_into(b, at, *fields)
        return b
    return mutate


def _set_code(part_at: int, row: int, value: int):
    def mutate(b: bytearray) -> bytearray:
        b[part_at + row] = value
        return b
    return mutate


@pytest.mark.parametrize("mutate,message", [
    (lambda b: b[:12], "head is truncated"),
    (lambda b: b[:_HEAD.size + 20], "part entries run past"),
    (lambda b: struct.pack_into("<I", b, 0, 13) or b, "widths add up to 12, its key width is 13"),
    (lambda b: struct.pack_into("<I", b, 4, 2) or b, "head is bad"),
    (lambda b: struct.pack_into("<I", b, 8, 0) or b, "head is bad"),
    (_set_part(1, 0, 9), "part 1 is bad"),
    (_set_part(0, 1, 2), "part 0 is bad"),
    (_set_part(0, 2, 3), "part 0 is bad"),
    (_set_part(0, 5, 7), "part 0 is bad"),  # a delta part has no base
    (_set_part(1, 5, 1 << 33), "part 1 is bad"),  # a base past the part's 4 bytes
    (_set_part(1, 2, 8), "codes run past"),  # codes wider than the chunk holds
])
def test_a_damaged_head_is_named_before_any_key_is_built(mutate, message):
    body = _damage(_KEYS, _PARTS, mutate)[:-16]  # the body ends with the codes
    with pytest.raises(ValueError, match=message) as err:
        key_delta_layout(body, 0, len(_KEYS))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("mutate,message", [
    # rows are (order 1000 + i // 3, line 1 + i % 3); codes of row i at index i - 1
    (_set_code(_CODES + 64, 4, 0), "row 5's rebuilt key is not above the one before"),  # line 3 read as 1
    (_set_code(_CODES, 2, 0), "row 3's rebuilt key is not above"),  # an order's step lost
    (_set_code(_CODES + 64, 4, 1), "row 5's rebuilt key is not above"),  # a repeated key
    (_set_code(_CODES + 64, 3, 0xF0), "row 5's rebuilt key is not above"),  # line 241, then line 3
    (_set_code(_CODES, 7, 0xFF), None),  # a larger step: still ascending
])
def test_out_of_order_keys_fail_in_both_rebuilds(mutate, message):
    body = _damage(_KEYS, _PARTS, mutate)
    w, parts, first_at, _ = key_delta_layout(body, 0, len(_KEYS))
    paths = [lambda: rebuild_key_delta_py(body, len(_KEYS), w, first_at, parts)]
    if BUILT is not None:
        paths += [lambda: rebuild_key_delta(body, len(_KEYS), w, first_at, parts, native=BUILT),
                  lambda: rebuild_key_delta(body[:-16], len(_KEYS), w, first_at, parts, native=BUILT)]
    for run in paths:
        if message is None:
            run()
            continue
        with pytest.raises(ValueError, match=message):
            run()


def test_a_value_past_its_part_fails_in_both_rebuilds():
    top4 = (1 << 32) - 1
    keys = [(top4 - 3).to_bytes(4, "big") + b"\x00", (top4 - 2).to_bytes(4, "big") + b"\x00",
            top4.to_bytes(4, "big") + b"\x00"]
    for parts, at, value, kind in [([(4, KEY_PART_DELTA, 1), (1, KEY_PART_FRAME, 0)], 1, 9, "deltas"),
                                   ([(4, KEY_PART_FRAME, 1), (1, KEY_PART_FRAME, 0)], 1, 9, "codes")]:
        body = _damage(keys, parts, _set_code(_HEAD.size + 2 * _PART.size + 8, at, value))
        w, p, first_at, _ = key_delta_layout(body, 0, 3)
        runs = [lambda: rebuild_key_delta_py(body, 3, w, first_at, p)]
        if BUILT is not None:
            runs += [lambda: rebuild_key_delta(body, 3, w, first_at, p, native=BUILT),
                     lambda: rebuild_key_delta(body[:-16], 3, w, first_at, p, native=BUILT)]
        for run in runs:
            with pytest.raises(ValueError, match=f"part 0 \\({kind}\\) runs past its 4 bytes"):
                run()


def test_the_kernel_refuses_bad_arguments_in_one_line():
    if BUILT is None:
        return  # no module to call: nothing to refuse
    body, _ = _lay_out(_KEYS, _PARTS)
    body += bytes(16)
    w, parts, first_at, _ = key_delta_layout(body, 0, len(_KEYS))
    out = bytearray(len(_KEYS) * 12 + 8)
    for args, message in [
        ((body, 0, w, first_at, parts, out), "must be positive"),
        ((body, len(_KEYS), w, first_at, parts, bytearray(10)), "out: 10 bytes"),
        ((body, len(_KEYS), w, first_at, parts[:, :4].copy(), out), "not 1 to 12 rows of five int64"),
        ((body, len(_KEYS), w, len(body) - 4, parts, out), "first key"),
        ((body, len(_KEYS), 13, first_at, parts, bytearray(len(_KEYS) * 13 + 8)), "add up to 12, the key width is 13"),
        ((body, len(_KEYS), w, first_at, "parts", out), "parts must be a contiguous bytes-like buffer"),
        ((body, len(_KEYS), w, first_at, parts, bytes(len(out))), "out must be a writable"),
    ]:
        with pytest.raises(ValueError, match=message) as err:
            BUILT.keys_delta(*args)
        assert "\n" not in str(err.value)
    bad = parts.copy()
    bad[1, 4] = len(body)  # codes past the body
    with pytest.raises(ValueError, match="part 1: 59 codes of 1 bytes"):
        BUILT.keys_delta(body, len(_KEYS), w, first_at, bad, out)


# -- through the real writer and reader ------------------------------------------------------


def _lineitem_keys(orders: int) -> list[bytes]:
    """TPC-H lineitem's row keys: a sign-flipped 8-byte order key, a sign-flipped 4-byte line number."""
    keys, order = [], 1
    for r in range(orders):
        for line in range(1, 2 + (r * 2654435761 >> 9) % 7):
            keys.append((order ^ (1 << 63)).to_bytes(8, "big") + (line ^ (1 << 31)).to_bytes(4, "big"))
        order += 1 + (r * 40503 >> 3) % 25
    return keys


def _write_rows(fs, name: str, keys: list[bytes], compression, **kw) -> list[bytes]:
    values = [b"v%d" % i for i in range(len(keys))]
    w = StoreFileWriter(fs, name, family=b"cf", compression=compression, **kw)
    w.append_rows(pa.array(keys, pa.binary()), [b"a"], [pa.array(values, pa.binary())],
                  [pa.array([9] * len(keys), pa.int64())])
    w.finish()
    return values


def _key_encodings(r) -> list[int]:
    ch = r._index.chunks
    return [int(ch.encoding[ch.starts[i]]) for i in range(r.block_count)]


@pytest.mark.parametrize("compression", ["zstd", None])
def test_composite_keys_round_trip_through_the_writer_and_reader(tmp_path, compression):
    fs = FileSystem(str(tmp_path))
    keys = _lineitem_keys(6000)
    values = _write_rows(fs, "k.sf", keys, compression, row_group_size=200_000)
    with StoreFileReader(fs, "k.sf") as r:
        assert r.block_count > 2 and set(_key_encodings(r)) == {ChunkEncoding.KEYS_DELTA}
        ch = r._index.chunks
        stored = sum(ch.stored[ch.starts[i]] for i in range(r.block_count))
        assert stored < 0.5 * len(keys) if compression else stored < 3 * len(keys)  # 12 raw bytes a row
        r.check()
        got = [(row, v) for b in r.scan_batches() for row, v in zip(b.column(0).to_pylist(), b.column(5).to_pylist())]
        assert got == list(zip(keys, values))
        assert [row for b in r.scan_batches(keys_only=True) for row in b.column(0).to_pylist()] == keys
        assert r.count_rows() == len(keys)
        assert [row for p in r.scan_parts(columns=[b"a"]) for row in p.dense.rows.to_pylist()] == keys
        for i in (0, 1, len(keys) // 2, len(keys) - 1):
            assert [c.value for c in r.row_cells(keys[i])] == [values[i]]
        assert r.row_cells(keys[5][:-1] + b"\xff") == []


def test_the_writer_keeps_fixed_keys_where_the_form_cannot_narrow(tmp_path):
    fs = FileSystem(str(tmp_path))
    rng = np.random.default_rng(3)
    few = sorted({rng.bytes(8) for _ in range(8)})  # every byte spread: no part narrower than its bytes
    wide = [b"%080d" % (i * 7) for i in range(500)]  # wider than the split search takes
    one = [b"only-row"]
    for name, keys in (("f.sf", few), ("w.sf", wide), ("o.sf", one)):
        _write_rows(fs, name, keys, "zstd")
        with StoreFileReader(fs, name) as r:
            assert set(_key_encodings(r)) == {ChunkEncoding.KEYS_FIXED}, name
            assert [row for b in r.scan_batches(keys_only=True) for row in b.column(0).to_pylist()] == keys


@pytest.mark.parametrize("shape", ["spread", "periodic", "lineitem", "text"])
def test_the_chosen_key_chunk_stores_no_larger_than_fixed_keys(tmp_path, shape):
    """Whatever the writer takes, its key chunk stores no more bytes than the ``KEYS_FIXED``
    form of the same block (compressed by the same codec)."""
    from storage.storefile._block_v3 import _encode_keys
    from storage.storefile.codecs import get_codec

    rng = np.random.default_rng(11)
    keys = {
        "spread": lambda: sorted({rng.bytes(8) for _ in range(3000)}),  # sorted random: the top bytes rise slowly
        "periodic": lambda: [(g << 32 | p).to_bytes(8, "big") for g in range(300)
                             for p in sorted({int(x) for x in rng.integers(0, 1 << 32, 16)})],
        "lineitem": lambda: _lineitem_keys(3000),
        "text": lambda: [b"user%08d" % (i * 13) for i in range(4000)],
    }[shape]()
    fs = FileSystem(str(tmp_path))
    _write_rows(fs, "c.sf", keys, "zstd")
    zstd = get_codec("zstd")
    with StoreFileReader(fs, "c.sf") as r:
        ch = r._index.chunks
        for i in range(r.block_count):
            d = r._block(i, False, False).dense
            stamps = [pc.run_end_decode(t) if pa.types.is_run_end_encoded(t.type) else t for t in d.timestamps]
            fixed = _encode_keys(DenseBlock(d.rows, d.qualifiers, stamps, None))[0]  # no codec: KEYS_FIXED
            assert ch.stored[ch.starts[i]] <= zstd.compress(fixed).size
        assert [row for b in r.scan_batches(keys_only=True) for row in b.column(0).to_pylist()] == keys


def test_key_chunks_are_compressed_at_the_key_chunk_level(tmp_path):
    """A key chunk is zstd at KEY_CHUNK_ZSTD_LEVEL (its value chunks at the codec's default):
    rows re-put at a second time and compacted carry a timestamp of runs a few rows long, which
    level 1 stores hundreds of times larger and decompresses several times slower."""
    from storage.storefile.codecs import KEY_CHUNK_ZSTD_LEVEL

    fs = FileSystem(str(tmp_path))
    n = 40_000
    keys = [i.to_bytes(4, "big") for i in range(n)]
    stamps = pa.array([2000 if i % 4 == 3 else 1000 for i in range(n)], pa.int64())
    w = StoreFileWriter(fs, "t.sf", family=b"cf", compression="zstd")
    w.append_rows(pa.array(keys, pa.binary()), [b"a"], [pa.array([b"v%d" % i for i in range(n)], pa.binary())],
                  [stamps])
    w.finish()
    data = (tmp_path / "t.sf").read_bytes()
    with StoreFileReader(fs, "t.sf") as r:
        entry = r._index.chunks.entries(0)[0]
        assert [row for b in r.scan_batches(keys_only=True) for row in b.column(0).to_pylist()] == keys
        assert [t for b in r.scan_batches() for t in b.column(3).to_pylist()] == stamps.to_pylist()
    raw = pa.Codec("zstd").decompress(pa.py_buffer(data[entry[0] : entry[0] + entry[1]]), decompressed_size=entry[2])
    assert entry[1] == pa.Codec("zstd", KEY_CHUNK_ZSTD_LEVEL).compress(raw).size
    assert entry[1] * 20 < pa.Codec("zstd").compress(raw).size


def test_the_split_follows_the_key_fields():
    keys = np.frombuffer(b"".join(_lineitem_keys(3000)), np.uint8).reshape(-1, 12)
    split = plan_key_parts(keys)
    body = encode_key_delta(keys, split)
    _, parts, _, end = key_delta_layout(body, 0, len(keys))
    # two bytes a row: the order key's 1-byte delta, the line number's 1-byte code (its high
    # bytes, constant, may be parts of no codes)
    assert sum(int(p[2]) for p in parts) == 2
    assert end < 2 * len(keys) + 200


def test_a_key_run_mixes_fixed_and_delta_coded_blocks(tmp_path):
    """Blocks of one key width, some delta-coded and some not, read as one key-only run."""
    fs = FileSystem(str(tmp_path))
    rng = np.random.default_rng(5)
    keys = _lineitem_keys(300)
    # then keys spread over every bit, after them: in blocks of about 80 rows no part narrows
    tail = sorted({bytes([0x90 + x[0] % 0x70]) + x[1:] for x in (rng.bytes(12) for _ in range(1500))})
    w = StoreFileWriter(fs, "m.sf", family=b"cf", compression="zstd", row_group_size=3_000)
    for part in (keys, tail):
        w.append_rows(pa.array(part, pa.binary()), [b"a"], [pa.array([b"x"] * len(part), pa.binary())],
                      [pa.array([9] * len(part), pa.int64())])
    w.finish()
    with StoreFileReader(fs, "m.sf") as r:
        assert set(_key_encodings(r)) == {ChunkEncoding.KEYS_DELTA, ChunkEncoding.KEYS_FIXED}
        assert [row for b in r.scan_batches(keys_only=True) for row in b.column(0).to_pylist()] == keys + tail
        assert r.count_rows() == len(keys) + len(tail)


def test_point_reads_on_delta_coded_blocks(tmp_path):
    """``row()`` and ``rows()`` on a table whose store file holds delta-coded key chunks
    (a major compaction writes rows column by column)."""
    conn = storage.connect(str(tmp_path))
    try:
        t = conn.create_table("li", {"cf": {}}, settings={"wal_sync": "none"})
        keys = _lineitem_keys(800)
        with t.batch() as b:
            for i, k in enumerate(keys):
                b.put(k, {b"cf:q": b"%d" % i})
        t.flush()
        t.compact(major=True)
        (region,) = t._map.regions
        (reader,) = region.read_state.stores[0].readers
        assert set(_key_encodings(reader)) == {ChunkEncoding.KEYS_DELTA}
        for i in (0, 7, len(keys) // 3, len(keys) - 1):
            assert t.row(keys[i]) == {b"cf:q": b"%d" % i}
        assert t.row(keys[3] + b"\x00") == {}
        asked = keys[::97] + [b"\x00" * 12]
        assert t.rows(asked) == [(k, {b"cf:q": b"%d" % keys.index(k)}) for k in asked[:-1]]
        t.close()
    finally:
        conn.close()


# -- damaged chunks in a store file ----------------------------------------------------------


def _first_key_chunk(tmp_path):
    """``(header, block bytes to the key chunk's end, its directory entry)`` of an uncompressed
    file's first block of delta-coded keys, and the chunk's raw body."""
    fs = FileSystem(str(tmp_path))
    _write_rows(fs, "d.sf", _lineitem_keys(400), None)
    data = (tmp_path / "d.sf").read_bytes()
    with StoreFileReader(fs, "d.sf") as r:
        entry = r._index.chunks.entries(0)[0]
        key_end = r._index.key_lengths[0]
    assert entry[4] == ChunkEncoding.KEYS_DELTA
    header = BlockHeaderV3.decode(data[:BLOCK_V3_HEADER_SIZE], "d.sf", 0)
    return header, bytearray(data[:key_end]), entry


def _decode(header, block: bytearray, entry):
    """Decode the key chunk as the reader does, its checksum made to match the damaged bytes."""
    from storage.checksum import crc32
    from storage.storefile.codecs import get_codec

    stored = bytes(block[entry[0] : entry[0] + ((entry[1] + 7) & ~7)])
    entry = (entry[0], entry[1], entry[2], crc32(stored) & 0xFFFFFFFF, *entry[4:])
    return decode_key_chunk(header, pa.py_buffer(bytes(block)), 0, entry, get_codec(None), "t/d.sf", 0)


def _row_one_as_row_zero(block: bytearray, entry, body: bytes, table: int, n: int) -> None:
    """Set every part's row-1 code so that row 1 rebuilds as row 0: a repeated key."""
    _, parts, first_at, _ = key_delta_layout(body, table, n)
    a = 0
    for w, kind, cw, base, codes_at in parts.tolist():
        if cw:
            row0 = int.from_bytes(body[first_at + a : first_at + a + w], "big")
            code = 0 if kind == KEY_PART_DELTA else row0 - (base % (1 << 64))
            block[entry[0] + codes_at : entry[0] + codes_at + cw] = code.to_bytes(cw, "little")
        a += w


@pytest.mark.parametrize("damage,message", [
    ("width", "delta-coded keys does not decode: its parts' widths add up to 12, its key width is 99"),
    ("parts", "delta-coded keys does not decode: its head is bad"),
    ("order", "delta-coded keys does not decode: row 1's rebuilt key is not above the one before"),
    ("stats", "disagrees with its statistics in the block index"),  # the last key the index records
])
def test_a_damaged_key_chunk_in_a_file_is_a_corruption_error_naming_it(tmp_path, damage, message):
    from storage.storefile._block_v2 import qualifier_table

    header, block, entry = _first_key_chunk(tmp_path)
    body = bytes(block[entry[0] : entry[0] + entry[2]])
    _, _, table = qualifier_table(pa.py_buffer(body), "d.sf", 0)
    if damage == "width":
        struct.pack_into("<I", block, entry[0] + table, 99)
    elif damage == "parts":
        struct.pack_into("<I", block, entry[0] + table + 8, 0)
    elif damage == "order":
        _row_one_as_row_zero(block, entry, body, table, header.row_count)
    else:
        entry = (*entry[:7], b"\x00" * 12)
    with pytest.raises(CorruptionError) as err:
        _decode(header, block, entry)
    text = str(err.value)
    assert message in text and "data block key chunk" in text and "t/d.sf" in text and "\n" not in text
