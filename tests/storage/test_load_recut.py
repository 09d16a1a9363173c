"""A bulk-load commit re-cuts a staged file whose region was split since staging.

Dense blocks stay columns through the cut (whole rows, regrouped at the family's row-group size),
so the pieces scan like files staged for their regions; cell blocks (delete markers, several
versions) go as cells.  Every cell survives with its timestamp and type.
"""

from __future__ import annotations

import pyarrow as pa

import storage
from storage.cells import CELL_SCHEMA, CellType
from storage.engine import BulkLoadTask, FileSystem, commit_load, table_regions
from storage.storefile.reader import StoreFileReader

N = 30_000


def _cells(root: str) -> list[tuple]:
    with storage.connect(root, read_only=True) as conn:
        table = conn.table("t")
        return sorted((r["row"], r["family"], r["qualifier"], r["timestamp"], r["type"], r["value"])
                      for b in table.scan_batches(output="cells", raw=True, max_versions=10) for r in b.to_pylist())


def _stage(root: str, regions_after: list[bytes]) -> tuple[FileSystem, list]:
    with storage.connect(root) as conn:
        conn.create_table("t", {"d": {}, "c": {"max_versions": 3}}, num_regions=1)
    fs = FileSystem(root).sub("t")
    regions, families = table_regions(fs)
    task = BulkLoadTask(fs, "job", "p0", regions, families, timestamp=1000)
    keys = pa.array([b"r%06d" % i for i in range(N)], pa.binary())
    task.add(pa.record_batch({"key": keys, "d:a": pa.array([b"%d" % i for i in range(N)], pa.binary()),
                              "d:b": pa.array([None if i % 7 == 0 else b"b%d" % i for i in range(N)], pa.binary())}))
    # family c as cells: two versions of r000100 and a delete marker at r020000
    cells = pa.table({"row": [b"r000100", b"r000100", b"r020000"], "family": [b"c"] * 3, "qualifier": [b"q"] * 3,
                      "timestamp": [7, 5, 9], "type": [int(CellType.PUT), int(CellType.PUT), int(CellType.DELETE_COLUMN)],
                      "value": [b"new", b"old", b""]}).cast(CELL_SCHEMA)
    task.add_cells(cells)
    staged = task.finish()
    with storage.connect(root) as conn:
        for key in regions_after:
            conn.table("t").split(key)
    return fs, staged


def test_a_recut_keeps_every_cell_and_dense_blocks_as_row_groups(tmp_path):
    cuts = [b"r010000", b"r020000"]
    fs, staged = _stage(str(tmp_path / "cut"), cuts)
    report = commit_load(fs, "job", staged)
    assert report.recut == 2 and report.files == 5  # d in three regions, c in two
    whole_fs, whole_staged = _stage(str(tmp_path / "whole"), [])
    commit_load(whole_fs, "job", whole_staged)
    got = _cells(str(tmp_path / "cut"))
    assert got == _cells(str(tmp_path / "whole"))
    assert len(got) == 2 * N - N // 7 - 1 + 3  # every d cell, both versions and the marker in c
    with storage.connect(str(tmp_path / "cut"), read_only=True) as conn:
        table = conn.table("t")
        assert [table.count(row_start=r["start_key"] or None, row_stop=r["end_key"] or None)
                for r in table.regions()] == [10_000, 10_000, 10_000]
        ids = [r["id"] for r in table.regions()]
    for region_id in ids:
        path = f"regions/{region_id}/d"
        for name in fs.listdir(path):
            reader = StoreFileReader(fs, f"{path}/{name}")
            try:
                # 10,000 rows of ~20 bytes: one dense row group, as a file staged for the region
                parts = list(reader.scan_parts())
                assert reader.block_count == 1 and len(parts) == 1 and parts[0].dense is not None
            finally:
                reader.close()
