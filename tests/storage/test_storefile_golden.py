"""Golden store files and byte vectors: files written by earlier writers must keep
reading, and the hashes and checksums on disk must keep their exact values.

The files under tests/golden/storefile/ were written once by the writer of
each format version (tests/golden/make_golden.py) and are never regenerated;
each comes with the cells it holds as JSON.
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import json
import os
import random
import struct
import sys

import pyarrow as pa
import pytest

from storage.cells import Cell
from storage.errors import CorruptionError
from storage.vfs.fs import FileSystem
from storage.storefile import StoreFileReader, StoreFileWriter
from storage.storefile.bloom import RowBloomFilter, row_hash_pair, row_hash_pairs
from storage.storefile.format import (
    BLOCK_V2_HEADER_SIZE,
    BLOCK_V3_HEADER_SIZE,
    TRAILER_SIZE,
    BlockHeaderV2,
    BlockHeaderV3,
    BlockLayout,
    Trailer,
    checksum,
)

sys.path.insert(0, str(paths.GOLDEN))
import make_golden  # noqa: E402  (tests/golden/make_golden.py: the generator of the golden store files)
import make_golden_asis  # noqa: E402  (the generator of the files of value chunks stored as is)

GOLDEN = str(paths.GOLDEN / "storefile")
NAMES = sorted(n[:-4] for n in os.listdir(GOLDEN) if n.endswith(".rsf"))


def expected_cells(name: str) -> list[Cell]:
    with open(os.path.join(GOLDEN, name + ".json")) as f:
        raw = json.load(f)
    return [Cell(bytes.fromhex(r), bytes.fromhex(fam), bytes.fromhex(q), ts, kind, bytes.fromhex(v)) for r, fam, q, ts, kind, v in raw]


def all_cells(batches) -> list[Cell]:
    out = []
    for b in batches:
        out.extend(map(Cell._make, zip(*[b.column(k).to_pylist() for k in range(6)])))
    return out


@pytest.fixture
def golden_fs() -> FileSystem:
    return FileSystem(GOLDEN)


def test_every_version_and_both_layouts_are_covered():
    assert {n.split("_")[0] for n in NAMES} == {"v1", "v2", "v3"}
    fs = FileSystem(GOLDEN)
    layouts = {2: set(), 3: set()}
    encodings = set()
    for name in NAMES:
        with StoreFileReader(fs, name + ".rsf") as r:
            assert r.format_version == int(name[1])
            if r.format_version >= 2:
                layouts[r.format_version] |= set(r._index.layouts)
            if r.format_version == 3:
                encodings |= set(r._index.chunks.encoding)
    assert layouts[2] == layouts[3] == {BlockLayout.CELLS, BlockLayout.DENSE}
    # key chunks (with and without offsets, delta-coded), IPC, fixed-width, dictionary, length-coded and frame
    # value chunks
    assert encodings == {0, 1, 2, 3, 4, 5, 6, 7}


@pytest.mark.parametrize("name", ["v3_narrow_zstd", "v3_narrow_plain"])
def test_v3_narrow_golden_files_hold_the_narrow_encodings(golden_fs, name):
    """The files of the narrow encodings keep them: keys without offsets in every block,
    length-coded text with 1- and 2-byte lengths, dictionaries (one of mixed widths, and,
    uncompressed, one of one width with absent rows); each column reads back alone."""
    rows, quals, values, _ = make_golden.narrow_rows()
    with StoreFileReader(golden_fs, name + ".rsf") as r:
        ch = r._index.chunks
        assert r.block_count == 2
        for i in range(r.block_count):
            enc = ch.encoding[ch.starts[i] : ch.starts[i + 1]]
            assert enc[0] == 5 and enc[1] == enc[5] == enc[6] == 4 and enc[4] == 3, enc
            if name.endswith("plain"):
                assert enc[2] == 3
        r.check()
        _each_column_reads_back_alone(r, rows, quals, values)


@pytest.mark.parametrize("name", ["v3_frame_zstd", "v3_frame_plain"])
def test_v3_frame_golden_files_hold_frame_chunks(golden_fs, name):
    """The files of the FRAME encoding keep it: dates, ints with absent rows, sign-flipped
    longs and shorts as narrow codes in every block; the 24-bit longs as 4-byte codes where
    they store no larger (uncompressed: always; zstd: some blocks keep them FIXED); each
    column reads back alone, byte for byte."""
    rows, quals, values, _ = make_golden.frame_rows()
    with StoreFileReader(golden_fs, name + ".rsf") as r:
        ch = r._index.chunks
        assert r.block_count > 1
        wide = set()
        for i in range(r.block_count):
            enc = ch.encoding[ch.starts[i] : ch.starts[i + 1]]
            assert enc[0] == 5 and enc[1] == enc[2] == enc[3] == enc[4] == 6, enc
            wide.add(enc[5])
        assert wide == ({6} if name.endswith("plain") else {2, 6})
        r.check()
        _each_column_reads_back_alone(r, rows, quals, values)


@pytest.mark.parametrize("name", ["v3_keys_zstd", "v3_keys_plain"])
def test_v3_keys_golden_files_hold_delta_coded_key_chunks(golden_fs, name):
    """The files of the KEYS_DELTA key chunk keep it in every block: 12-byte composite keys
    as two parts (1-byte deltas, 1-byte codes), 4-byte deltas, and a block cut into more
    parts; the keys read back byte for byte on a key-only run and on each block alone."""
    rows, quals, values, _ = make_golden.keys_rows()
    with StoreFileReader(golden_fs, name + ".rsf") as r:
        ch = r._index.chunks
        assert r.block_count > 3
        assert all(ch.encoding[ch.starts[i]] == 7 for i in range(r.block_count))
        r.check()
        assert list(dict.fromkeys(k for b in r.scan_batches(keys_only=True) for k in b.column(0).to_pylist())) == rows
        assert r.count_rows() == len(rows)
        assert [k for i in range(r.block_count) for k in r._block(i, False, False).dense.rows.to_pylist()] == rows
        _each_column_reads_back_alone(r, rows, quals, values)


@pytest.mark.parametrize("name", ["v3_asis_zstd", "v3_asis_lz4"])
def test_v3_asis_golden_files_hold_value_chunks_stored_as_is(golden_fs, name):
    """The files of value chunks stored as is keep them: in every block the key chunk is
    compressed, the dates' FRAME codes, the hashes (FIXED) and the noise text as is (stored ==
    raw, not beginning with the codec's magic), the dictionary of modes compressed under zstd
    and as is under lz4 (which does not halve it); each column reads back alone."""
    rows, quals, values, _ = make_golden_asis.asis_rows()
    with StoreFileReader(golden_fs, name + ".rsf") as r:
        magic = r._codec.magic
        assert r.block_count > 1
        for i in range(r.block_count):
            kinds = []
            for e in r._index.chunks.entries(i):
                head = r._read(int(r._index.offsets[i]) + e[0], 4).to_pybytes()
                kinds.append((e[4], e[1] == e[2] and head != magic))
            assert kinds == [(7, False), (6, True), (2, True), (3, name.endswith("lz4")), (4, True)], (i, kinds)
        r.check()
        _each_column_reads_back_alone(r, rows, quals, values)
    with StoreFileReader(golden_fs, "v3_asis_cells_lz4.rsf") as r:
        (e0, e1), = [r._index.chunks.entries(i) for i in range(r.block_count)]
        assert r._index.layouts[0] == BlockLayout.CELLS and e0[1] < e0[2] and e1[1] == e1[2]
        r.check()


@pytest.mark.parametrize("name", NAMES)
def test_golden_file_reads_its_cells_on_every_path(golden_fs, name):
    cells = expected_cells(name)
    with StoreFileReader(golden_fs, name + ".rsf") as r:
        r.check()
        assert r.info.cell_count == len(cells) and r.info.max_seq_id == 42
        assert all_cells(r.scan_batches()) == cells
        assert all_cells(r.read_block(i) for i in range(r.block_count)) == cells
        scanner_cells = []
        s = r.scanner()
        c = s.seek(())
        while c is not None:
            scanner_cells.append(tuple(s.next()))
            c = s.peek()
        assert scanner_cells == [tuple(c) for c in cells]
        by_row: dict[bytes, list] = {}
        for c in cells:
            by_row.setdefault(c.row, []).append(c)
        for row in random.Random(1).sample(sorted(by_row), 10):
            assert r.row_cells(row) == by_row[row]
        reverse = all_cells(r.scan_batches(reverse=True))
        assert sorted(reverse, key=lambda c: c.row) == sorted(cells, key=lambda c: c.row)
        keys_only = all_cells(r.scan_batches(keys_only=True))
        assert keys_only == [c._replace(value=b"") for c in cells]
        assert r.count_rows() == len(by_row) == r.info.row_count


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith("v1_")])
def test_the_version_1_writer_beside_the_generator_writes_the_golden_bytes(tmp_path, name):
    # Version 1 is written only by tests/golden/storefile_v1.py now: from the generator's
    # cells and settings it gives the committed file's blocks, index and bloom filter byte
    # for byte (the file info differs: it gained the row key lengths since).
    make, settings = make_golden.SPECS[name[len("v1_"):]]
    fs = FileSystem(str(tmp_path))
    w = make_golden.writer_of("v1")(fs, "again.rsf", family=make_golden.FAMILY, **settings)
    for cell in make():
        w.append(cell)
    w.finish(max_seq_id=42)
    with open(os.path.join(GOLDEN, name + ".rsf"), "rb") as f:
        golden = f.read()
    again = fs.read_bytes("again.rsf")
    info_at = Trailer.decode(golden[-TRAILER_SIZE:], name, len(golden)).info_offset
    assert again[:info_at] == golden[:info_at]
    with StoreFileReader(fs, "again.rsf") as r:
        assert r.format_version == 1 and all_cells(r.scan_batches()) == expected_cells(name)


@pytest.mark.parametrize("name", [n for n in NAMES if n[:2] in ("v1", "v2")])
def test_golden_files_predate_key_lengths_and_a_rewrite_records_them(golden_fs, tmp_path, name):
    # the file info's min_row_length / max_row_length: absent from the frozen files (read as
    # unknown), written by today's writer for the same cells, cell by cell and row by row
    cells = expected_cells(name)
    with StoreFileReader(golden_fs, name + ".rsf") as r:
        assert r.info.row_lengths is None and r.info.min_row_length == r.info.max_row_length == -1
    with open(os.path.join(GOLDEN, name + ".rsf"), "rb") as f:
        assert b"row_length" not in f.read()  # the info section is plain JSON: no such key
    lengths = [len(c[0]) for c in cells]
    fs = FileSystem(str(tmp_path))
    with StoreFileWriter(fs, "cells.rsf", family=cells[0][1], block_size=256) as w:
        for cell in cells:
            w.append(cell)
        info = w.finish()
    assert info.row_lengths == (min(lengths), max(lengths))
    with StoreFileReader(fs, "cells.rsf") as r:
        assert r.info.row_lengths == (min(lengths), max(lengths))
    puts = {(c[0], c[2]): c for c in cells if c[4] == 4}  # one put per column, row by row
    rows = sorted({row for row, _ in puts})
    quals = sorted({q for _, q in puts})
    with StoreFileWriter(fs, "rows.rsf", family=cells[0][1], block_size=256) as w:
        w.append_rows(pa.array(rows, pa.binary()), quals,
                      [pa.array([puts[(r, q)][5] if (r, q) in puts else None for r in rows], pa.binary()) for q in quals],
                      [pa.array([puts[(r, q)][3] if (r, q) in puts else None for r in rows], pa.int64()) for q in quals])
        w.finish()
    with StoreFileReader(fs, "rows.rsf") as r:
        assert r.info.row_lengths == (min(map(len, rows)), max(map(len, rows)))
    with StoreFileWriter(fs, "empty.rsf", family=cells[0][1]) as w:
        assert w.finish().row_lengths == (0, 0)


@pytest.mark.parametrize("name", NAMES)
def test_golden_file_counts_rows_in_ranges(golden_fs, name):
    rows = sorted({c.row for c in expected_cells(name)})
    rng = random.Random(7)
    with StoreFileReader(golden_fs, name + ".rsf") as r:
        for _ in range(25):
            a, b = sorted(rng.sample(range(len(rows) + 1), 2))
            start = rows[a] if a < len(rows) else rows[-1] + b"\xff"
            stop = rows[b] if b < len(rows) else None
            want = sum(1 for row in rows if row >= start and (stop is None or row < stop))
            assert r.count_rows(start, stop) == want, (start, stop)
        assert r.count_rows(b"", rows[0]) == 0


def _v2_block_regions(data: bytes) -> list[tuple[int, BlockHeaderV2]]:
    """(offset, header) of every block of a version 2 file."""
    tr = Trailer.decode(data[-TRAILER_SIZE:], "f", len(data))
    out, at = [], 0
    while at < tr.index_offset:
        head = BlockHeaderV2.decode(data[at : at + BLOCK_V2_HEADER_SIZE], "f", at)
        out.append((at, head))
        at += head.length
    return out


@pytest.mark.parametrize("name", ["v2_dense_plain", "v2_mixed_plain"])
def test_key_only_reads_never_read_value_sections(tmp_path, name):
    """A value section with a flipped byte breaks full reads but not counts or
    keys-only scans: those never read (or verify) value bytes."""
    data = bytearray(open(os.path.join(GOLDEN, name + ".rsf"), "rb").read())
    blocks = _v2_block_regions(bytes(data))
    for at, head in blocks:
        data[at + head.key_end + 3] ^= 0x40
    (tmp_path / "f.rsf").write_bytes(bytes(data))
    fs = FileSystem(str(tmp_path))
    cells = expected_cells(name)
    with StoreFileReader(fs, "f.rsf") as r:
        assert r.count_rows() == r.info.row_count
        before = r.counters.bytes_read
        keys = all_cells(r.scan_batches(keys_only=True))
        assert keys == [c._replace(value=b"") for c in cells]
        assert r.counters.bytes_read - before == sum(h.key_end for _, h in blocks)
        with pytest.raises(CorruptionError, match="value section checksum"):
            list(r.scan_batches())


@pytest.mark.parametrize("name", ["v2_dense_zstd", "v2_mixed_lz4"])
def test_flipped_key_section_byte_breaks_keys_only_reads(tmp_path, name):
    data = bytearray(open(os.path.join(GOLDEN, name + ".rsf"), "rb").read())
    (at, head), *_ = _v2_block_regions(bytes(data))
    data[at + BLOCK_V2_HEADER_SIZE + head.key_size // 2] ^= 0x01
    (tmp_path / "f.rsf").write_bytes(bytes(data))
    with StoreFileReader(FileSystem(str(tmp_path)), "f.rsf") as r:
        with pytest.raises(CorruptionError, match=r"key section checksum mismatch in .*f\.rsf at offset 56"):
            list(r.scan_batches(keys_only=True))


def test_unknown_block_layout_is_refused(tmp_path):
    data = bytearray(open(os.path.join(GOLDEN, "v2_dense_plain.rsf"), "rb").read())
    data[8] = 7  # the layout byte of block 0
    struct.pack_into("<I", data, BLOCK_V2_HEADER_SIZE - 4, checksum(bytes(data[: BLOCK_V2_HEADER_SIZE - 4])))
    (tmp_path / "f.rsf").write_bytes(bytes(data))
    with StoreFileReader(FileSystem(str(tmp_path)), "f.rsf") as r:
        with pytest.raises(CorruptionError, match="unknown layout 7"):
            r.read_block(0)


def test_unknown_format_version_names_file_and_version(tmp_path):
    data = bytearray(open(os.path.join(GOLDEN, "v2_mixed_plain.rsf"), "rb").read())
    end = len(data) - TRAILER_SIZE
    struct.pack_into("<I", data, end + 64, 4)
    struct.pack_into("<I", data, end + 68, checksum(bytes(data[end : end + 68])))
    (tmp_path / "future.rsf").write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match=r"format version 4 is not supported \(this reader knows versions 1, 2, 3\) in .*future\.rsf"):
        StoreFileReader(FileSystem(str(tmp_path)), "future.rsf")


# -- version 3: column chunks -------------------------------------------------

V3_NAMES = [n for n in NAMES if n.startswith("v3_")]


def _v3_blocks(data: bytes) -> list[tuple[int, BlockHeaderV3]]:
    """(offset, header) of every block of a version 3 file."""
    tr = Trailer.decode(data[-TRAILER_SIZE:], "f", len(data))
    out, at = [], 0
    while at < tr.index_offset:
        head = BlockHeaderV3.decode(data[at : at + BLOCK_V3_HEADER_SIZE], "f", at)
        out.append((at, head))
        at += head.length
    return out


@pytest.mark.parametrize("name", V3_NAMES)
def test_v3_golden_file_reads_each_column_alone(golden_fs, name):
    """A read of one column decodes that column's chunks and no other: each dense
    part holds the asked column's values (equal to the golden cells) and None for
    the others; the bytes read are the key chunks and that column's chunks."""
    cells = expected_cells(name)
    quals = sorted({c.qualifier for c in cells})
    with StoreFileReader(golden_fs, name + ".rsf") as r:
        chunks = r._index.chunks
        dense_blocks = [i for i in range(r.block_count) if r._index.layouts[i] == BlockLayout.DENSE]
        for q in quals:
            want = {c.row: c.value for c in cells if c.qualifier == q and c.type == 4}
            got = {}
            before = r.counters.bytes_read
            for part in r.scan_parts(columns=[q]):
                if part.dense is None:
                    continue
                d = part.dense
                if q not in d.qualifiers:
                    continue
                j = d.qualifiers.index(q)
                assert all(v is None for k, v in enumerate(d.values) if k != j) or d.complete
                got.update((k, v) for k, v in zip(d.rows.to_pylist(), d.value(j).to_pylist()) if v is not None)
            if len(dense_blocks) == r.block_count:
                assert got == want
                # the key chunks and this column's chunks: nothing else was read
                read = r.counters.bytes_read - before
                expected = 0
                for i in dense_blocks:
                    entries = chunks.entries(i)
                    quals_i = r._load_keys(i, False).dense.qualifiers
                    expected += r._index.key_lengths[i]
                    if q in quals_i:
                        e = entries[quals_i.index(q) + 1]
                        expected += (e[1] + 7) & ~7
                assert read == expected


def test_v3_chunk_statistics_are_bytewise_bounds(golden_fs):
    rows, quals, values, _ = make_golden.wide_rows()
    with StoreFileReader(golden_fs, "v3_rows_plain.rsf") as r:
        assert r.block_count > 3
        starts = [0]
        for i in range(r.block_count):
            starts.append(starts[-1] + int(r._index.row_counts[i]))
        for j, q in enumerate(quals):
            lows, highs = r.chunk_stats(q)
            for i in range(r.block_count):
                present = [v for v in values[j][starts[i] : starts[i + 1]] if v is not None]
                widths = {len(v) for v in present}
                if len(widths) == 1:  # a fixed-width chunk records its bounds
                    assert (lows[i], highs[i]) == (min(present), max(present)), (q, i)
                else:
                    assert lows[i] is None and highs[i] is None, (q, i)
        assert r.chunk_stats(b"absent") == ([None] * r.block_count, [None] * r.block_count)
    with StoreFileReader(golden_fs, "v2_dense_plain.rsf") as r:
        assert r.chunk_stats(b"a") is None


@pytest.mark.parametrize("name", ["v3_dense_plain", "v3_mixed_plain", "v3_rows_plain"])
def test_v3_key_only_reads_never_read_value_chunks(tmp_path, name):
    """A flipped byte in every value chunk breaks full and column reads but not
    counts or keys-only scans: those read and verify the key chunks alone."""
    data = bytearray(open(os.path.join(GOLDEN, name + ".rsf"), "rb").read())
    blocks = _v3_blocks(bytes(data))
    for at, head in blocks:
        for pos in range(head.key_end, head.length, 64):
            data[at + pos + 3] ^= 0x40
    (tmp_path / "f.rsf").write_bytes(bytes(data))
    fs = FileSystem(str(tmp_path))
    cells = expected_cells(name)
    with StoreFileReader(fs, "f.rsf") as r:
        assert r.count_rows() == r.info.row_count
        before = r.counters.bytes_read
        keys = all_cells(r.scan_batches(keys_only=True))
        assert keys == [c._replace(value=b"") for c in cells]
        assert r.counters.bytes_read - before == sum(h.key_end for _, h in blocks)
        with pytest.raises(CorruptionError, match=r"value chunk (checksum mismatch|does not)"):
            list(r.scan_batches())


@pytest.mark.parametrize("name", ["v3_dense_zstd", "v3_mixed_lz4", "v3_rows_zstd"])
def test_v3_flipped_key_chunk_byte_breaks_keys_only_reads(tmp_path, name):
    data = bytearray(open(os.path.join(GOLDEN, name + ".rsf"), "rb").read())
    (at, head), *_ = _v3_blocks(bytes(data))
    data[at + BLOCK_V3_HEADER_SIZE + (head.key_end - BLOCK_V3_HEADER_SIZE) // 2] ^= 0x01
    (tmp_path / "f.rsf").write_bytes(bytes(data))
    with StoreFileReader(FileSystem(str(tmp_path)), "f.rsf") as r:
        with pytest.raises(CorruptionError, match=r"key chunk checksum mismatch in .*f\.rsf at offset 48"):
            list(r.scan_batches(keys_only=True))


# -- byte vectors ------------------------------------------------------------

ROW_HASH_VECTORS = [
    (b"", 0x9CA066F1A4AB2EEA, 0x8FF0EEFE01C6837D),
    (b"a", 0x848A613D6EC315DE, 0x9B6885129900C539),
    (b"12345678", 0x4C6AC8CB76349760, 0x48C57CBD329135A1),
    (b"123456789", 0x0444FD542908D3A7, 0xBF2073694F27C58F),
    (b"row-00001", 0x2BD308766E3DB828, 0x2E297F803DB35B94),
    (bytes(range(20)), 0x2AD76D6844BCFD80, 0x99EBDFA76CAFCE4B),
]


@pytest.mark.parametrize("key,h1,h2", ROW_HASH_VECTORS)
def test_row_hash_vectors(key, h1, h2):
    assert row_hash_pair(key) == (h1, h2)
    v1, v2 = row_hash_pairs(pa.array([key], pa.binary()))
    assert (int(v1[0]), int(v2[0])) == (h1, h2)


def test_bloom_section_bytes():
    h1, h2 = row_hash_pairs(pa.array([b"a", b"b", b"row-1"], pa.binary()))
    body = RowBloomFilter.build(h1, h2).encode()
    assert body.hex() == (
        "0f" + b"rs-row-bloom-v1".hex() + "07000000" + "4000000000000000" + "0300000000000000" + "0602a7402402142a"
    )


def test_checksum_vectors():
    assert checksum(b"123456789") == 0xCBF43926  # the CRC-32/ISO-HDLC check value
    assert checksum(b"") == 0
    assert checksum(bytes(32)) == 0x190A55AD
    assert checksum(pa.py_buffer(b"123456789")) == checksum(memoryview(b"123456789")) == 0xCBF43926


def test_block_header_v2_bytes():
    head = BlockHeaderV2(1, 2, 10, 5, -1, 100, 200, 300, 400, 0x11223344, 0x55667788)
    raw = head.encode()
    assert raw.hex() == (
        "525346424c4b322a010102000a00000005000000ffffffffffffffff64000000c80000002c010000"
        "9001000044332211887766557ff00816"
    )
    assert BlockHeaderV2.decode(raw, "f", 0) == head
    assert head.key_end == 56 + 104 and head.length == 56 + 104 + 304


def test_block_header_v3_bytes():
    head = BlockHeaderV3(1, 2, 10, 5, -1, 464, 160, 3)
    raw = head.encode()
    assert raw.hex() == (
        "525346424c4b332a010102000a00000005000000ffffffffffffffffd0010000a000000003000000"
        "00000000" + raw[-4:].hex()
    )
    assert len(raw) == BLOCK_V3_HEADER_SIZE == 48
    assert struct.unpack("<I", raw[-4:])[0] == checksum(raw[:-4])
    assert BlockHeaderV3.decode(raw, "f", 0) == head


def test_trailer_bytes():
    raw = Trailer(0, 3, 1000, 50, 0, 0, 1050, 80, 2).encode()
    assert raw.hex() == (
        "525346545241494c0100000003000000e8030000000000003200000000000000000000000000000000000000"
        "000000001a04000000000000500000000000000002000000ac186505"
    )


def _each_column_reads_back_alone(reader, rows, quals, values) -> None:
    """Each column read alone gives every row's value as written."""
    for j, q in enumerate(quals):
        got = {}
        for part in reader.scan_parts(columns=[q]):
            d = part.dense
            got.update(zip(d.rows.to_pylist(), d.value(d.qualifiers.index(q)).to_pylist()))
        assert got == dict(zip(rows, values[j])), q
