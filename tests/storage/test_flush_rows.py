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


def _versions_snapshot(rng: random.Random, rows: int) -> pa.Table:
    """Sorted cells of family ``f`` with several versions of most columns; some rows also
    hold a marker of one version (``DELETE``, at its column's newest timestamp or at
    another), of a column or of the family."""
    cells = []
    for i in sorted(rng.sample(range(rows * 3), rows)):
        row = _key(i)
        for q in sorted(rng.sample([b"a", b"b", b"c"], rng.randint(1, 3))):
            stamps = sorted(rng.sample(range(1, 40), rng.randint(1, 4)), reverse=True)
            for ts in stamps:
                cells.append((row, b"f", q, ts, int(CellType.PUT), b"%d-%s-%d" % (i, q, ts)))
            if rng.random() < 0.15:
                kind = rng.choice([CellType.DELETE, CellType.DELETE, CellType.DELETE_COLUMN])
                cells.append((row, b"f", q, rng.choice(stamps), int(kind), b""))
        if rng.random() < 0.05:
            cells.append((row, b"f", b"", rng.randint(1, 40), int(CellType.DELETE_FAMILY), b""))
    cells.sort(key=lambda c: (c[0], c[1], c[2], -c[3], -c[4]))
    names = CELL_SCHEMA.names
    return pa.Table.from_pydict({n: [c[k] for c in cells] for k, n in enumerate(names)}, schema=CELL_SCHEMA)


def _newest_versions_model(cells: list[tuple], max_versions: int) -> list[tuple]:
    """Every cell of a row holding a marker; of a row holding none, each column's first
    ``max_versions`` cells (cell order is newest first)."""
    marked = {c[0] for c in cells if c[4] != CellType.PUT}
    out, seen = [], {}
    for c in cells:
        column = c[:3]
        seen[column] = seen.get(column, 0) + 1
        if c[0] in marked or seen[column] <= max_versions:
            out.append(c)
    return out


@pytest.mark.parametrize("seed", range(16))
def test_a_flush_keeps_each_column_s_newest_max_versions_in_rows_without_markers(tmp_path, seed):
    rng = random.Random(seed)
    max_versions = [1, 2, 3][seed % 3]
    cells = _versions_snapshot(rng, rng.choice([5, 60, 400]))
    # parts that cut rows and columns, even between a marker and the version it deletes
    size = rng.choice([1, 2, 5, 33, 1 << 20])
    fs = open_filesystem(str(tmp_path))
    writer = StoreFileWriter(fs, "v.sf", family=b"f", compression=AUTO)
    flush_rows.write_snapshot(writer, _parts(cells, size), max_versions)
    writer.finish(max_seq_id=1)
    reader = StoreFileReader(fs, "v.sf")
    expected = _newest_versions_model([tuple(c.values()) for c in cells.to_pylist()], max_versions)
    assert _cells(reader) == expected
    assert len(expected) < cells.num_rows  # some versions were dropped
    # none given: every version stays (a marker in the store's files)
    writer = StoreFileWriter(fs, "all.sf", family=b"f", compression=AUTO)
    flush_rows.write_snapshot(writer, _parts(cells, size), None)
    writer.finish(max_seq_id=1)
    assert _cells(StoreFileReader(fs, "all.sf")) == [tuple(c.values()) for c in cells.to_pylist()]


def _store_files(table) -> list:
    return [f for region in table._regions for f in region.stores["f"].files]


@pytest.mark.parametrize("max_versions", [1, 2])
def test_rows_put_again_by_later_writes_keep_max_versions(tmp_path, max_versions):
    conn = storage.connect(str(tmp_path / "db"))
    try:
        table = conn.create_table("t", {"f": {"max_versions": max_versions}}, settings={"memstore_flush_size": 1 << 40})
        for ts in (5, 6, 7):  # three writes: the later ones put every third row again
            with table.batch(timestamp=ts) as b:
                for i in range(0, 6000, 1 if ts == 5 else 3):
                    b.put(_key(i), {b"f:a": b"a%d-%d" % (i, ts) * 20, b"f:b": b"%d" % ts})
        before = list(table.scan())
        versions_before = table.cells(_key(300), b"f:a", versions=5, include_timestamp=True)
        assert versions_before == [(b"a300-%d" % ts * 20, ts) for ts in (7, 6, 5)][:max_versions]
        table.flush()
        (f,) = _store_files(table)
        kept = 6000 if max_versions == 1 else 6000 + 2000  # the rows put three times keep two
        assert f.reader.info.cell_count == 2 * kept
        if max_versions == 1:  # clean rows: one row group, as a compaction writes them
            assert f.reader.block_count == 1
            assert BlockLayout(f.reader._index.layouts[0]).name == "DENSE"
        assert list(table.scan()) == before
        assert table.cells(_key(300), b"f:a", versions=5, include_timestamp=True) == versions_before
    finally:
        conn.close()


def test_a_marker_in_a_store_file_keeps_every_version_a_flush_holds(tmp_path):
    # a Delete of one version, flushed before the puts: it hides the newer put (whatever the order
    # of writing), so the older one is the row's; a flush that dropped it would lose the row
    conn = storage.connect(str(tmp_path / "db"))
    try:
        table = conn.create_table("t", {"f": {"max_versions": 1}}, settings={"memstore_flush_size": 1 << 40})
        table.delete_version(b"r", b"f:a", 9)
        table.flush()
        table.put(b"r", {b"f:a": b"old"}, timestamp=5)
        table.put(b"r", {b"f:a": b"new"}, timestamp=9)
        assert table.row(b"r") == {b"f:a": b"old"}
        table.flush()
        assert table.row(b"r") == {b"f:a": b"old"}
        assert _store_files(table)[0].reader.info.cell_count == 2
        table.compact(major=True)
        assert table.row(b"r") == {b"f:a": b"old"}
    finally:
        conn.close()


def test_a_marker_in_the_snapshot_keeps_its_row_s_versions(tmp_path):
    conn = storage.connect(str(tmp_path / "db"))
    try:
        table = conn.create_table("t", {"f": {"max_versions": 1}}, settings={"memstore_flush_size": 1 << 40})
        for row in (b"p", b"r"):
            table.put(row, {b"f:a": b"old"}, timestamp=5)
            table.put(row, {b"f:a": b"new"}, timestamp=9)
        table.delete_version(b"r", b"f:a", 9)
        table.flush()
        assert table.row(b"r") == {b"f:a": b"old"}
        assert table.row(b"p") == {b"f:a": b"new"}
        # row p holds no marker: its older version went; row r keeps both and its marker
        assert _store_files(table)[0].reader.info.cell_count == 1 + 3
    finally:
        conn.close()


def test_versions_past_max_versions_are_gone_after_a_flush_as_after_a_major_compaction(tmp_path):
    # what a flush changes: a time range, or a later Delete of the newest version, could still find
    # a version past max_versions in the memstore; after the flush (as in HBase) it is gone, as it is
    # after a major compaction of the same writes
    conn = storage.connect(str(tmp_path / "db"))
    try:
        spec = {"f": {"max_versions": 1}}
        flushed = conn.create_table("a", spec, settings={"memstore_flush_size": 1 << 40})
        compacted = conn.create_table("b", spec, settings={"memstore_flush_size": 1 << 40})
        for table in (flushed, compacted):
            table.put(b"r", {b"f:a": b"old"}, timestamp=5)
            if table is compacted:
                table.flush()  # each version flushed alone: both stay in the files until the compaction
            table.put(b"r", {b"f:a": b"new"}, timestamp=9)
            assert table.row(b"r", timestamp=9) == {b"f:a": b"old"}  # the time range [0, 9)
            raw = pa.Table.from_batches(list(table.scan_batches(output="cells", raw=True)))
            assert raw.column("value").to_pylist() == [b"new", b"old"]
        flushed.flush()
        compacted.flush()
        assert len(_store_files(compacted)) == 2
        assert compacted.row(b"r", timestamp=9) == {b"f:a": b"old"}  # two files: the old version kept
        compacted.compact(major=True)
        for table in (flushed, compacted):
            assert table.row(b"r") == {b"f:a": b"new"}
            assert table.row(b"r", timestamp=9) == {}
            raw = pa.Table.from_batches(list(table.scan_batches(output="cells", raw=True)))
            assert raw.column("value").to_pylist() == [b"new"]
            table.delete_version(b"r", b"f:a", 9)
            assert table.row(b"r") == {}
    finally:
        conn.close()


@pytest.mark.parametrize("size", [700, 4096, 1 << 20])
def test_a_one_column_snapshot_is_written_as_its_column(tmp_path, size):
    # one qualifier in every row: the dense block takes the cells' value column as it is (no take);
    # parts that are slices of the snapshot (values at an offset) must write the same bytes
    cells = []
    for i in range(5000):
        cells.append((_key(i), b"f", b"a", 7, int(CellType.PUT), b"v%d-" % i * (i % 9)))
    names = CELL_SCHEMA.names
    table = pa.Table.from_pydict({n: [c[k] for c in cells] for k, n in enumerate(names)}, schema=CELL_SCHEMA)
    new = _write(tmp_path, "new.sf", table, size, rows=True)
    assert _cells(new) == cells
    assert {BlockLayout(x).name for x in new._index.layouts} == {"DENSE"}
    for i in (0, 1, 2499, 4999):
        assert [tuple(c) for c in new.row_cells(_key(i))] == [cells[i]]
