"""The defaults a family gets when it names none: zstd chunks in 32 MiB row groups, lz4 blocks of cells.

The values were chosen by measurement (docs/decisions/2026-12-05-column-chunks-sweep.md);
these tests hold what a user sees of them: a new table compresses, a bulk load writes row
groups of the default size, and a table created with other settings keeps them.
"""

from __future__ import annotations

import pyarrow as pa

import storage
from storage.engine import BulkLoadTask, commit_load, table_regions
from storage.storefile.format import DEFAULT_ROW_GROUP_SIZE
from storage.vfs.fs import FileSystem


def _rows(n: int, value: bytes) -> pa.RecordBatch:
    keys = pa.array([b"%08d" % i for i in range(n)], pa.binary())
    return pa.RecordBatch.from_arrays([keys, pa.array([value] * n, pa.binary())], names=["key", "cf:v"])


def _bulk_load(root: str, table: str, rows: pa.RecordBatch) -> None:
    fs = FileSystem(root).sub(table)
    regions, families = table_regions(fs)
    task = BulkLoadTask(fs, "job", "p0", regions, families, timestamp=1)
    task.add(rows)
    commit_load(fs, "job", task.finish())


def test_a_family_without_settings_compresses_row_groups_with_zstd_and_cells_with_lz4(tmp_path):
    root = str(tmp_path)
    with storage.connect(root) as conn:
        assert conn.create_table("t", {"cf": {}}).families()[b"cf"]["compression"] == "auto"
    rows = _rows(5_000, b"a value that repeats and so compresses well")
    _bulk_load(root, "t", rows)
    with storage.connect(root) as conn:
        table = conn.table("t")
        table.put(b"zz", {b"cf:v": b"flushed"})
        table.flush()
        readers = table.store_file_readers()
        # the bulk load's row groups take zstd; the flush of one cell is a block of cells: lz4
        assert sorted(r.info.compression for r in readers) == ["lz4", "zstd"]
        # compressed: far fewer bytes than the values alone
        assert sum(r.info.file_size for r in readers) < rows.column(1).nbytes // 4
        got = pa.Table.from_batches(list(table.scan_batches(columns=[b"cf:v"])))
        assert got.num_rows == 5_001 and got.column("cf:v")[4_999].as_py() == rows.column(1)[4_999].as_py()


def test_a_table_created_uncompressed_stays_uncompressed(tmp_path):
    root = str(tmp_path)
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {"compression": "NONE"}})
    _bulk_load(root, "t", _rows(1_000, b"x" * 40))
    with storage.connect(root) as conn:  # the setting is stored with the table
        table = conn.table("t")
        assert table.families()[b"cf"]["compression"] is None
        assert [r.info.compression for r in table.store_file_readers()] == [None]


def test_a_bulk_load_writes_row_groups_of_the_default_size(tmp_path):
    """Rows far past one 64 KiB block land in row groups of the default size, not blocks of 64 KiB."""
    root = str(tmp_path)
    # about 2.5 row groups of row, qualifier and value bytes: hundreds of blocks of 64 KiB
    rows = _rows(DEFAULT_ROW_GROUP_SIZE * 5 // 2 // 2_000, b"v" * 2_000)
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {}})
    _bulk_load(root, "t", rows)
    with storage.connect(root) as conn:
        table = conn.table("t")
        (reader,) = table.store_file_readers()
        cells = rows.num_rows * (8 + 1 + 2_000)  # row, qualifier and value bytes at least
        assert cells > DEFAULT_ROW_GROUP_SIZE
        # more than one group, and about cells / DEFAULT_ROW_GROUP_SIZE of them (the writer's estimate
        # of a cell's size counts a little more than these bytes)
        assert 2 <= reader.info.block_count <= -(-cells * 2 // DEFAULT_ROW_GROUP_SIZE), reader.info.block_count
        assert sum(b.num_rows for b in table.scan_batches(columns=[b"cf:v"])) == rows.num_rows
