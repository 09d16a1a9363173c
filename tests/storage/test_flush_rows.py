"""A flush writes a memstore snapshot's clean rows as row groups
(storage/region/flush_rows.py): the file holds exactly the cells the snapshot
held, whatever mix of clean rows, versions and markers, and wherever the
parts cut the rows; a clean snapshot becomes one row group, not blocks cut at
the cell-block size."""

from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest

import storage
from storage.cells import CELL_SCHEMA, CellType
from storage.region import flush_rows
from storage.storefile.codecs import AUTO
from storage.storefile.format import BlockLayout
from storage.storefile.reader import StoreFileReader
from storage.storefile.writer import StoreFileWriter
from storage.vfs.fs import open_filesystem


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


def _snapshot(rng: random.Random, rows: int, dirty: float) -> pa.Table:
    """Sorted cells of family ``f``: puts of 1-3 qualifiers per row; with probability
    ``dirty`` a row also gets a second version of a column or a delete marker."""
    cells = []
    for i in sorted(rng.sample(range(rows * 3), rows)):
        row = _key(i)
        quals = sorted(rng.sample([b"a", b"b", b"c"], rng.randint(1, 3)))
        ts = rng.randint(1, 50)
        if rng.random() < dirty:
            what = rng.choice(["family", "column", "version"])
            if what == "family":
                cells.append((row, b"f", b"", ts + 100, int(CellType.DELETE_FAMILY), b""))
            elif what == "column":
                cells.append((row, b"f", quals[0], ts + 100, int(CellType.DELETE_COLUMN), b""))
        for q in quals:
            value = b"v%d-" % i * rng.randint(0, 6)
            cells.append((row, b"f", q, ts, int(CellType.PUT), value))
            if rng.random() < dirty / 3:  # an older version of the column: same row and column
                cells.append((row, b"f", q, ts - 1, int(CellType.PUT), b"old"))
    # cell order: row, family, qualifier ascending, then the type and timestamp order the
    # cell schema's sort gives (markers of a column before its puts of the same timestamp)
    cells.sort(key=lambda c: (c[0], c[1], c[2], -c[3], -c[4]))
    names = CELL_SCHEMA.names
    return pa.Table.from_pydict({n: [c[k] for c in cells] for k, n in enumerate(names)}, schema=CELL_SCHEMA)


def _parts(cells: pa.Table, size: int) -> list[pa.Table]:
    return [cells.slice(s, size) for s in range(0, cells.num_rows, size)]


def _write(tmp_path, name: str, cells: pa.Table, size: int, rows: bool) -> StoreFileReader:
    fs = open_filesystem(str(tmp_path))
    writer = StoreFileWriter(fs, name, family=b"f", compression=AUTO)
    if rows:
        flush_rows.write_snapshot(writer, _parts(cells, size))
    else:  # the flush as it was: every part appended as cells
        for part in _parts(cells, size):
            writer.append_batch(part)
    writer.finish(max_seq_id=1)
    return StoreFileReader(fs, name)


def _cells(reader: StoreFileReader) -> list[tuple]:
    batches = list(reader.scan_batches())
    return [tuple(c.values()) for c in pa.Table.from_batches(batches).to_pylist()] if batches else []


@pytest.mark.parametrize("seed", range(24))
def test_the_file_holds_the_snapshot_cells(tmp_path, seed):
    rng = random.Random(seed)
    dirty = [0.0, 0.0, 0.02, 0.3][seed % 4]
    rows = rng.choice([1, 7, 40, 300, 600])
    cells = _snapshot(rng, rows, dirty)
    # parts that cut rows (a part of one cell, of part of a row), and one part for all
    size = rng.choice([1, 3, 17, 1 << 20] if rows <= 40 else [61, 256, 1 << 20])
    new = _write(tmp_path, "new.sf", cells, size, rows=True)
    old = _write(tmp_path, "old.sf", cells, size, rows=False)
    expected = [tuple(c.values()) for c in cells.to_pylist()]
    assert _cells(new) == expected
    assert _cells(old) == expected
    a, b = new.info, old.info
    assert (a.cell_count, a.row_count, a.delete_count, a.repeated_columns, a.min_timestamp, a.max_timestamp,
            a.first_cell, a.last_cell) == \
           (b.cell_count, b.row_count, b.delete_count, b.repeated_columns, b.min_timestamp, b.max_timestamp,
            b.first_cell, b.last_cell)
    for key in {c[0] for c in expected[:: max(1, len(expected) // 20)]}:  # point reads through the index
        assert sorted(map(tuple, new.row_cells(key))) == sorted(map(tuple, old.row_cells(key)))


def test_a_clean_snapshot_is_one_row_group(tmp_path):
    rng = random.Random(7)
    cells = _snapshot(rng, 20_000, 0.0)  # about 2.4 MB: several 1 MiB blocks cut from cells
    new = _write(tmp_path, "new.sf", cells, 4096, rows=True)
    old = _write(tmp_path, "old.sf", cells, 4096, rows=False)
    assert old.block_count > 1
    assert new.block_count == 1
    assert [BlockLayout(x).name for x in new._index.layouts] == [BlockLayout(old._index.layouts[0]).name]


def test_a_table_flush_writes_rows_and_reads_back(tmp_path):
    conn = storage.connect(str(tmp_path / "db"))
    try:
        table = conn.create_table("t", {"f": {}}, settings={"memstore_flush_size": 1 << 40})
        with table.batch(timestamp=5) as b:
            for i in range(6000):
                b.put(_key(i), {b"f:a": b"x%d" % i * 40, b"f:b": b"%d" % i})
        table.flush()  # clean: one row group
        table.delete(_key(17))
        with table.batch(timestamp=9) as b:
            b.put(_key(18), {b"f:b": b"new"})
        table.flush()  # a marker: written as cells
        files = [f for region in table._regions for f in region.stores["f"].files]
        assert [f.reader.block_count for f in files] == [1, 1]
        assert BlockLayout(files[1].reader._index.layouts[0]) != BlockLayout(files[0].reader._index.layouts[0])
        rows = {k: v for k, v in table.scan()}
        assert len(rows) == 5999 and _key(17) not in rows
        assert rows[_key(4000)] == {b"f:a": b"x4000" * 40, b"f:b": b"4000"}
        assert rows[_key(18)] == {b"f:a": b"x18" * 40, b"f:b": b"new"}
    finally:
        conn.close()


def test_cells_of_another_family_are_refused(tmp_path):
    rng = random.Random(3)
    cells = _snapshot(rng, 50, 0.0)
    fs = open_filesystem(str(tmp_path))
    writer = StoreFileWriter(fs, "x.sf", family=b"g", compression=AUTO)
    with pytest.raises(storage.errors.InvalidArgument, match="family"):
        flush_rows.write_snapshot(writer, _parts(cells, 1 << 20))
    writer.abandon()


def test_a_family_of_small_blocks_is_flushed_as_cells(tmp_path):
    conn = storage.connect(str(tmp_path / "db"))
    try:
        table = conn.create_table("t", {"f": {"block_size": 512}}, settings={"memstore_flush_size": 1 << 40})
        with table.batch(timestamp=5) as b:
            for i in range(100):
                b.put(_key(i), {b"f:a": b"x" * 30, b"f:b": b"y"})
        table.flush()
        (f,) = [f for region in table._regions for f in region.stores["f"].files]
        # blocks of about 512 bytes, a few rows each: cells, as a flush of cells cuts them
        assert f.reader.block_count > 5
        assert {BlockLayout(x).name for x in f.reader._index.layouts} == {"CELLS"}
        assert len(list(table.scan())) == 100
    finally:
        conn.close()
