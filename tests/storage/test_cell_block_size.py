"""Blocks cut from cells in a compressed file are at least 1 MiB (``COMPRESSED_CELL_BLOCK_SIZE``).

A table keeping several versions of a row is written as blocks of cells, not row groups.
A scan that does not cache blocks (a MapReduce or Spark partition read) decompresses every
block, and zstd on 64 KiB blocks cost it twice the time of 1 MiB ones
(docs/decisions/2026-12-05-benchmark-regressions.md).  These tests hold what a table shows
of the rule: a compressed family with the default block size gets blocks of cells of about
1 MiB, an uncompressed one and a family asking for small blocks keep their size, and every
read returns the same cells either way.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import storage
from storage.errors import InvalidArgument
from storage.storefile.block_cells import cell_sizes
from storage.storefile.format import DEFAULT_BLOCK_SIZE
from storage.storefile.writer import COMPRESSED_CELL_BLOCK_SIZE, StoreFileWriter
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


def test_a_compressed_family_writes_blocks_of_cells_of_about_1_mib(tmp_path):
    with storage.connect(str(tmp_path)) as conn:
        zstd = _versions_table(conn, "zstd", {})
        plain = _versions_table(conn, "plain", {"compression": "NONE"})
        total = sum(_block_bytes(plain))
        assert total > 2 * COMPRESSED_CELL_BLOCK_SIZE  # enough cells for several large blocks
        sizes = _block_bytes(zstd)
        assert sum(sizes) == total
        # every block but the last reaches the size, and none runs far past it
        assert all(COMPRESSED_CELL_BLOCK_SIZE <= s < COMPRESSED_CELL_BLOCK_SIZE + 4096 for s in sizes[:-1])
        assert len(sizes) == -(-total // COMPRESSED_CELL_BLOCK_SIZE)
        # the uncompressed family keeps HBase's 64 KiB blocks
        assert all(DEFAULT_BLOCK_SIZE <= s < DEFAULT_BLOCK_SIZE + 4096 for s in _block_bytes(plain)[:-1])
        # the family's setting is what the file info records
        assert {r.info.block_size for r in zstd.store_file_readers()} == {DEFAULT_BLOCK_SIZE}


def test_a_family_asking_for_small_blocks_keeps_them_when_compressed(tmp_path):
    with storage.connect(str(tmp_path)) as conn:
        small = _versions_table(conn, "small", {"block_size": 8192, "compression": "zstd"})
        sizes = _block_bytes(small)
        assert len(sizes) > 100
        assert all(8192 <= s < 8192 + 4096 for s in sizes[:-1])


def test_large_blocks_of_cells_read_the_same_cells(tmp_path):
    with storage.connect(str(tmp_path)) as conn:
        zstd = _versions_table(conn, "zstd", {})
        plain = _versions_table(conn, "plain", {"compression": "NONE"})
        assert len(_block_bytes(zstd)) < len(_block_bytes(plain)) // 8
        keys = [_key(i) for i in range(0, ROWS, 7)]
        for table in (zstd, plain):
            for i in (0, 1, ROWS // 2, ROWS - 1):  # point reads: first, inner and last blocks
                assert table.row(_key(i)) == {b"cf:v": _value(i, VERSIONS)}
                assert table.cells(_key(i), b"cf:v", versions=VERSIONS, include_timestamp=True) == [
                    (_value(i, ts), ts) for ts in range(VERSIONS, 0, -1)]
            assert table.rows(keys) == [(k, {b"cf:v": _value(int(k[3:]), VERSIONS)}) for k in keys]
        scans = [pa.Table.from_batches(list(t.scan_batches(columns=[b"cf:v"], max_versions=VERSIONS)))
                 for t in (zstd, plain)]
        assert scans[0].equals(scans[1]) and scans[0].num_rows > 0
        reverse = [list(t.scan(reverse=True)) for t in (zstd, plain)]
        assert reverse[0] == reverse[1] == [(_key(i), {b"cf:v": _value(i, VERSIONS)}) for i in range(ROWS - 1, -1, -1)]


def test_a_bad_cell_block_size_is_refused_in_one_line(tmp_path):
    fs = FileSystem(str(tmp_path))
    with pytest.raises(InvalidArgument) as err:
        StoreFileWriter(fs, "f.sf", family=b"cf", compression="zstd", cell_block_size=0)
    assert "cell_block_size" in str(err.value) and "\n" not in str(err.value)
    assert not fs.exists("f.sf")
