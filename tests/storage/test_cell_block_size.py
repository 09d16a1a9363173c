"""The codec and block size each kind of block gets, by default and when a family names a codec.

A table keeping several versions of a row is written as blocks of cells, not row groups.
A scan that does not cache blocks (a MapReduce or Spark partition read) and a cold point read
decompress such blocks whole: zstd on 64 KiB blocks cost a scan twice the time of 1 MiB ones,
and lz4 decompresses about 4x faster than zstd (docs/decisions/2026-12-05-benchmark-regressions.md).
A family that names no codec is ``auto``: a file whose first block is dense (row groups, a
single-version flush) takes zstd, one whose first block is of cells takes lz4, cut at
``LZ4_CELL_BLOCK_SIZE``.  A family that names a codec gets it in every file: zstd cuts blocks of
cells of at least 1 MiB, lz4 of at least ``LZ4_CELL_BLOCK_SIZE``, none keeps HBase's 64 KiB.
Every read returns the same cells whichever codec and size a file took.
"""

from __future__ import annotations

import zlib

import pyarrow as pa
import pytest

import storage
from storage.cells import cells_to_batch
from storage.errors import CorruptionError, InvalidArgument
from storage.storefile.block_cells import cell_sizes
from storage.storefile.format import DEFAULT_BLOCK_SIZE, BlockLayout
from storage.storefile.reader import StoreFileReader
from storage.storefile.writer import COMPRESSED_CELL_BLOCK_SIZE, LZ4_CELL_BLOCK_SIZE, StoreFileWriter
from storage.vfs.fs import FileSystem

ROWS = 6_000
VERSIONS = 3


def _key(i: int) -> bytes:
    return b"row%06d" % i


def _value(i: int, ts: int) -> bytes:
    return (b"%06d-%d-" % (i, ts)) * 12  # about 100 bytes


def _versions_table(conn: storage.Connection, name: str, family: dict) -> storage.Table:
    """``ROWS`` rows of one qualifier written ``VERSIONS`` times, flushed and major-compacted:
    one file of blocks of cells (every row holds three cells of one column)."""
    table = conn.create_table(name, {"cf": {"max_versions": VERSIONS, **family}},
                              settings={"wal_sync": "none", "compaction_threshold": 1000})
    for ts in range(1, VERSIONS + 1):
        with table.batch(timestamp=ts) as batch:
            for i in range(ROWS):
                batch.put(_key(i), {b"cf:v": _value(i, ts)})
        table.flush()
    table.compact(major=True)
    return table


def _block_bytes(table: storage.Table) -> list[int]:
    """Uncompressed bytes of every block of the table's one store file."""
    (reader,) = table.store_file_readers()
    return [int(cell_sizes(reader.read_block(i)).sum()) for i in range(reader.block_count)]


def _cut_at(sizes: list[int], target: int) -> bool:
    """Every block but the last reaches ``target`` and none runs far past it."""
    return all(target <= s < target + 4096 for s in sizes[:-1])


def _codecs(table: storage.Table) -> list:
    return [r.info.compression for r in table.store_file_readers()]


def test_a_family_without_a_codec_writes_blocks_of_cells_with_lz4(tmp_path):
    with storage.connect(str(tmp_path)) as conn:
        auto = _versions_table(conn, "auto", {})
        plain = _versions_table(conn, "plain", {"compression": "NONE"})
        assert auto.families()[b"cf"]["compression"] == "auto"
        assert _codecs(auto) == ["lz4"] and _codecs(plain) == [None]
        (reader,) = auto.store_file_readers()
        assert set(reader._index.layouts) == {BlockLayout.CELLS}
        total = sum(_block_bytes(plain))
        sizes = _block_bytes(auto)
        assert sum(sizes) == total and total > 4 * LZ4_CELL_BLOCK_SIZE
        assert _cut_at(sizes, LZ4_CELL_BLOCK_SIZE) and len(sizes) == -(-total // LZ4_CELL_BLOCK_SIZE)
        # the uncompressed family keeps HBase's 64 KiB blocks
        assert _cut_at(_block_bytes(plain), DEFAULT_BLOCK_SIZE)
        # the family's setting is what the file info records
        assert reader.info.block_size == DEFAULT_BLOCK_SIZE


@pytest.mark.parametrize("codec, target", [("zstd", COMPRESSED_CELL_BLOCK_SIZE), ("lz4", LZ4_CELL_BLOCK_SIZE)])
def test_a_codec_the_family_names_applies_to_blocks_of_cells(tmp_path, codec, target):
    with storage.connect(str(tmp_path)) as conn:
        table = _versions_table(conn, codec, {"compression": codec.upper()})
        assert table.families()[b"cf"]["compression"] == codec
        assert _codecs(table) == [codec]
        sizes = _block_bytes(table)
        assert len(sizes) > 1 and _cut_at(sizes, target)


def test_a_family_asking_for_small_blocks_keeps_them_when_compressed(tmp_path):
    with storage.connect(str(tmp_path)) as conn:
        for name, family in (("small", {"block_size": 8192, "compression": "zstd"}), ("small_auto", {"block_size": 8192})):
            sizes = _block_bytes(_versions_table(conn, name, family))
            assert len(sizes) > 100 and _cut_at(sizes, 8192)


def test_large_blocks_of_cells_read_the_same_cells(tmp_path):
    with storage.connect(str(tmp_path)) as conn:
        tables = [_versions_table(conn, name, family) for name, family in
                  (("auto", {}), ("zstd", {"compression": "zstd"}), ("plain", {"compression": "NONE"}))]
        assert [_codecs(t) for t in tables] == [["lz4"], ["zstd"], [None]]
        keys = [_key(i) for i in range(0, ROWS, 7)]
        for table in tables:
            for i in (0, 1, ROWS // 2, ROWS - 1):  # point reads: first, inner and last blocks
                assert table.row(_key(i)) == {b"cf:v": _value(i, VERSIONS)}
                assert table.cells(_key(i), b"cf:v", versions=VERSIONS, include_timestamp=True) == [
                    (_value(i, ts), ts) for ts in range(VERSIONS, 0, -1)]
            assert table.rows(keys) == [(k, {b"cf:v": _value(int(k[3:]), VERSIONS)}) for k in keys]
        scans = [pa.Table.from_batches(list(t.scan_batches(columns=[b"cf:v"], max_versions=VERSIONS)))
                 for t in tables]
        assert scans[0].num_rows > 0 and all(s.equals(scans[0]) for s in scans[1:])
        reverse = [list(t.scan(reverse=True)) for t in tables]
        assert all(r == [(_key(i), {b"cf:v": _value(i, VERSIONS)}) for i in range(ROWS - 1, -1, -1)] for r in reverse)


def _dense_cells(rows: int, start: int = 0) -> pa.RecordBatch:
    """Cells of ``rows`` single-version rows of two qualifiers, in sort order (dense blocks)."""
    cells = [(_key(i), b"cf", q, 1, 4, _value(i, 1)) for i in range(start, start + rows) for q in (b"a", b"b")]
    return cells_to_batch(cells)


def _write(fs: FileSystem, name: str, batches: list, **options) -> StoreFileReader:
    writer = StoreFileWriter(fs, name, family=b"cf", **options)
    for batch in batches:
        writer.append_batch(batch)
    writer.finish()
    return StoreFileReader(fs, name)


def test_an_auto_file_takes_its_codec_from_its_first_block(tmp_path):
    fs = FileSystem(str(tmp_path))
    # a flush of single-version rows: dense blocks from cells, so zstd; the first block is cut
    # at the lz4 size, before the codec is known, the later ones at zstd's
    dense = _write(fs, "dense.sf", [_dense_cells(12_000)], compression="AUTO")
    assert dense.info.compression == "zstd"
    layouts = set(dense._index.layouts)
    assert layouts == {BlockLayout.DENSE}
    sizes = [int(cell_sizes(dense.read_block(i)).sum()) for i in range(dense.block_count)]
    assert LZ4_CELL_BLOCK_SIZE <= sizes[0] < LZ4_CELL_BLOCK_SIZE + 4096
    assert len(sizes) > 2 and _cut_at(sizes[1:], COMPRESSED_CELL_BLOCK_SIZE)
    # rows appended as columns (a bulk load) are row groups: zstd
    keys = pa.array([_key(i) for i in range(100)], pa.binary())
    writer = StoreFileWriter(fs, "rows.sf", family=b"cf", compression="auto")
    writer.append_rows(keys, [b"a"], [pa.array([b"x" * 20] * 100, pa.binary())], [pa.array([1] * 100, pa.int64())])
    writer.finish()
    assert StoreFileReader(fs, "rows.sf").info.compression == "zstd"
    # a first block with two versions of a cell is a block of cells: lz4 for the whole file,
    # dense blocks after it included
    two = cells_to_batch([(_key(0), b"cf", b"a", 2, 4, b"new"), (_key(0), b"cf", b"a", 1, 4, b"old")])
    mixed = _write(fs, "mixed.sf", [two, _dense_cells(12_000, start=1)], compression="auto")
    assert mixed.info.compression == "lz4"
    assert mixed._index.layouts[0] == BlockLayout.CELLS and mixed._index.layouts[-1] == BlockLayout.DENSE
    assert mixed.read_block(0).num_rows > 2 and sum(mixed.read_block(i).num_rows for i in range(mixed.block_count)) == 24_002
    # a file without cells still names a codec
    assert _write(fs, "empty.sf", [], compression="auto").info.compression == "zstd"


def test_a_bad_codec_or_cell_block_size_is_refused_in_one_line(tmp_path):
    fs = FileSystem(str(tmp_path))
    with pytest.raises(InvalidArgument) as err:
        StoreFileWriter(fs, "f.sf", family=b"cf", compression="zstd", cell_block_size=0)
    assert "cell_block_size" in str(err.value) and "\n" not in str(err.value)
    assert not fs.exists("f.sf")
    with storage.connect(str(tmp_path / "db")) as conn:
        with pytest.raises(InvalidArgument) as err:
            conn.create_table("t", {"cf": {"compression": "autoo"}})
    assert "AUTO" in str(err.value) and "'autoo'" in str(err.value) and "\n" not in str(err.value)


def test_a_block_naming_another_codec_than_its_file_is_corruption(tmp_path):
    """Every block of a file has the file's codec: an lz4 file's block header that names zstd
    (its header checksum made right, so only the codec is wrong) is refused, naming the file."""
    fs = FileSystem(str(tmp_path))
    cells = [(_key(i), b"cf", b"a", ts, 4, _value(i, ts)) for i in range(6_000) for ts in (2, 1)]
    reader = _write(fs, "cells.sf", [cells_to_batch(cells)], compression="auto")
    assert reader.info.compression == "lz4" and reader.block_count > 2
    offset = reader._index.offsets[1]
    path = tmp_path / "cells.sf"
    data = bytearray(path.read_bytes())
    assert data[offset + 10] == 1  # lz4's code, in the block's header
    data[offset + 10] = 2  # zstd's
    data[offset + 44:offset + 48] = zlib.crc32(bytes(data[offset:offset + 44])).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    damaged = StoreFileReader(fs, "cells.sf")
    assert damaged.read_block(0).num_rows > 0  # the other blocks still read
    with pytest.raises(CorruptionError) as err:
        damaged.read_block(1)
    assert "compression code 2" in str(err.value) and "cells.sf" in str(err.value)
