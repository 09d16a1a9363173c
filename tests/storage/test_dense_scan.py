"""Dense blocks (format version 2) read straight into rows agree with the cell path.

Two tables hold the same rows: one flushed and compacted into version 2 files
(whose clean blocks are dense, so scans take ``storage.storefile.dense_rows``), one left
in the memstore (every scan goes through the cell kernels).  Every scan shape
the dense path serves must give the same batches on both.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage
from storage.storefile.dense_rows import dense_filter, first_cells
from storage.filters import (
    BinaryComparator,
    BinaryPrefixComparator,
    ColumnValueFilter,
    CompareOperator,
    FilterList,
    FilterListOperator,
    InclusiveStopFilter,
    MultiRowRangeFilter,
    PrefixFilter,
    RegexStringComparator,
    RowFilter,
    RowRange,
    SingleColumnValueExcludeFilter,
    SingleColumnValueFilter,
    SubstringComparator,
    ValueFilter,
)
from storage.storefile.dense import dense_from_cells
from storage.cells import cells_to_batch
from storage.vfs.fs import FileSystem
from storage.storefile import StoreFileReader

FILTERS = [
    None,
    "SingleColumnValueFilter ('cf', 'a', >, 'binary:v5')",
    "SingleColumnValueFilter ('cf', 'c', =, 'binary:v3', true, true)",
    "SingleColumnValueFilter ('cf', 'zz', =, 'binary:v3', true, true)",
    "SingleColumnValueFilter ('cf', 'zz', =, 'binary:v3')",
    "SingleColumnValueFilter ('cf', 'b', <=, 'binaryprefix:v2')",
    "ValueFilter (=, 'substring:7')",
    "ValueFilter (!=, 'regexstring:.*1$')",
    "ColumnValueFilter ('cf', 'b', >, 'binary:v5')",
    "ColumnValueFilter ('cf', 'c', =, 'substring:3')",
    "ColumnValueFilter ('other', 'c', =, 'substring:3')",
    "SingleColumnValueExcludeFilter ('cf', 'a', <, 'binary:v5', true, true)",
    "ColumnValueFilter ('cf', 'a', <, 'binary:v3') OR SingleColumnValueFilter ('cf', 'c', =, 'binaryprefix:v7', true, true)",
]
COLUMNS = [[b"cf:a", b"cf:b"], [b"cf:c"], [b"cf:b", b"cf:a", b"cf:c"], [b"cf:c", b"cf:zz"]]


def _tables(tmp_path, seed: int):
    rng = random.Random(seed)
    out = []
    for name in ("flushed", "memory"):
        conn = storage.connect(str(tmp_path / f"{name}{seed}"))
        table = conn.create_table("t", {"cf": {}}, settings={"wal_sync": "none"})
        out.append(table)
    for r in range(400):
        row = b"r%05d" % r
        data = {b"cf:a": b"v%d" % rng.randrange(10)}
        if rng.random() < 0.8:
            data[b"cf:b"] = b"v%d" % rng.randrange(10) * rng.randrange(1, 30)
        if rng.random() < 0.3:
            data[b"cf:c"] = b"v%d" % rng.randrange(10)
        ts = 1000 + r % 3
        for table in out:
            table.put(row, data, timestamp=ts)
    flushed, memory = out
    flushed.flush()
    flushed.compact()
    return flushed, memory


def _rows(table, **kw) -> pa.Table:
    batches = list(table.scan_batches(**kw))
    return pa.Table.from_batches(batches).combine_chunks() if batches else None


@pytest.mark.parametrize("seed", [1, 2])
def test_dense_rows_equal_the_cell_path(tmp_path, seed):
    flushed, memory = _tables(tmp_path, seed)
    readers = flushed.store_file_readers()
    assert readers and all(r.format_version >= 2 for r in readers)  # dense blocks: version 2 or 3
    assert all(set(r._index.layouts) == {1} for r in readers)  # every block is dense
    for columns in COLUMNS:
        for flt in FILTERS:
            for include_timestamp in (False, True):
                kw = dict(columns=columns, filter=flt, include_timestamp=include_timestamp)
                assert _rows(flushed, **kw) == _rows(memory, **kw), kw
        for limit in (1, 57):
            assert _rows(flushed, columns=columns, limit=limit) == _rows(memory, columns=columns, limit=limit)
        rng = (b"r00100", b"r00250")
        assert _rows(flushed, columns=columns, row_start=rng[0], row_stop=rng[1]) == _rows(
            memory, columns=columns, row_start=rng[0], row_stop=rng[1]
        )


# Random value filters over the dense path: every comparator and operator, and
# lists of them, on random column choices; the memstore table is the reference.
_values = st.sampled_from([b"v%d" % i for i in range(10)] + [b"", b"v3v3", b"v"])
_comparators = st.one_of(
    _values.map(BinaryComparator),
    _values.map(BinaryPrefixComparator),
    _values.map(lambda v: SubstringComparator(v[-2:])),
    st.sampled_from([rb"^v[1-3]", rb"5$", rb"(v2)+v2", rb"^$", rb"(?i)V9"]).map(RegexStringComparator),
)
_ops = st.sampled_from(list(CompareOperator))
_qualifiers = st.sampled_from([b"a", b"b", b"c", b"zz"])
_leaves = st.one_of(
    st.builds(SingleColumnValueFilter, st.just(b"cf"), _qualifiers, _ops, _comparators, st.booleans(), st.booleans()),
    st.builds(SingleColumnValueExcludeFilter, st.just(b"cf"), _qualifiers, _ops, _comparators, st.booleans()),
    st.builds(ColumnValueFilter, st.sampled_from([b"cf", b"cf", b"other"]), _qualifiers, _ops, _comparators),
    st.builds(ValueFilter, _ops, _comparators),
    st.builds(RowFilter, _ops, st.sampled_from([b"r00100", b"r0015", b"r003"]).map(BinaryComparator)),
    st.sampled_from([b"r001", b"r0003", b"x"]).map(PrefixFilter),
    st.sampled_from([b"r00050", b"r00399"]).map(InclusiveStopFilter),
    st.just(MultiRowRangeFilter([RowRange(b"r00010", True, b"r00020", False), RowRange(b"r00300", False, b"", False)])),
)
_value_filters = st.recursive(
    _leaves,
    lambda children: st.builds(FilterList, st.sampled_from(list(FilterListOperator)), st.lists(children, max_size=3)),
    max_leaves=4,
)


@pytest.fixture(scope="module")
def dense_pair(tmp_path_factory):
    return _tables(tmp_path_factory.mktemp("pair"), 4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_value_filters, st.sampled_from(COLUMNS), st.booleans())
def test_value_filters_on_dense_blocks_equal_the_cell_kernels(dense_pair, flt, columns, include_timestamp):
    flushed, memory = dense_pair
    assert dense_filter(flt, b"cf") is not None  # the dense path serves this filter
    kw = dict(columns=columns, filter=flt, include_timestamp=include_timestamp)
    assert _rows(flushed, **kw) == _rows(memory, **kw)


def test_row_count_filter_on_dense_blocks(tmp_path):
    flushed, memory = _tables(tmp_path, 3)
    kw = dict(filter="FirstKeyOnlyFilter() AND KeyOnlyFilter()", output="cells")
    got, want = _rows(flushed, **kw), _rows(memory, **kw)
    assert got == want and got.num_rows == 400
    assert _rows(flushed, row_start=b"r00017", limit=5, **kw) == _rows(memory, row_start=b"r00017", limit=5, **kw)


def test_first_cells_pick_each_rows_first_present_qualifier():
    # rows lack "a" or "b" in turn, so the first cell of a row is "a", "b" or "c"
    cells = []
    for i in range(12):
        row = b"r%02d" % i
        if i % 3 != 1:
            cells.append((row, b"cf", b"a", 10 + i, 4, b"a%d" % i))
        if i % 3 != 2:
            cells.append((row, b"cf", b"b", 30 + i, 4, b"b%d" % i))
        cells.append((row, b"cf", b"c", 50 + i, 4, b"c%d" % i))
    dense = dense_from_cells(cells_to_batch(cells))
    assert dense is not None and dense.qualifiers == (b"a", b"b", b"c")
    out = first_cells([dense, dense.slice(1, 2)], b"cf")
    firsts = [next(c for c in cells if c[0] == b"r%02d" % i) for i in range(12)]
    assert out.column("row").to_pylist() == [c[0] for c in firsts] + [b"r01"]
    assert out.column("qualifier").to_pylist() == [c[2] for c in firsts] + [b"b"]
    assert out.column("timestamp").to_pylist() == [c[3] for c in firsts] + [31]
    assert out.column("value").to_pylist() == [b""] * 13
    assert dense.cells(b"cf").to_pylist() == cells_to_batch(cells).to_pylist()
    full = dense_from_cells(cells_to_batch([
        (b"r%02d" % i, b"cf", q, 5, 4, b"v") for i in range(10) for q in (b"x", b"y")]))
    assert full.cells(b"cf").num_rows == 20  # the whole-grid fast path
    assert dense_from_cells(cells_to_batch(cells[:6])) is None  # too few rows: the cell layout


def test_blocks_with_versions_or_markers_keep_the_cell_layout():
    versions = [(b"r1", b"cf", b"a", 6, 4, b"y"), (b"r1", b"cf", b"a", 5, 4, b"x")]
    marker = [(b"r1", b"cf", b"a", 6, 8, b""), (b"r1", b"cf", b"b", 5, 4, b"x")]
    assert dense_from_cells(cells_to_batch(versions)) is None
    assert dense_from_cells(cells_to_batch(marker)) is None


def _count_by_scan(table, **kw) -> int:
    return sum(b.num_rows for b in table.scan_batches(filter="FirstKeyOnlyFilter() AND KeyOnlyFilter()", output="cells", **kw))


def test_table_count_from_the_index_and_by_scan(tmp_path):
    conn = storage.connect(str(tmp_path / "c"))
    table = conn.create_table("t", {"cf": {}, "other": {}}, split_keys=[b"r00100", b"r00300"],
                              settings={"wal_sync": "none", "compaction_threshold": 100})
    for r in range(0, 400, 2):
        table.put(b"r%05d" % r, {b"cf:a": b"x", b"cf:b": b"y" * (r % 7)})
    table.flush()
    table.compact()
    ranges = [{}, {"row_start": b"r00050"}, {"row_stop": b"r00251"}, {"row_start": b"r00099", "row_stop": b"r00302"},
              {"row_prefix": b"r001"}, {"row_start": b"r00500"}]
    table.read_counters(reset=True)
    assert table.count() == 200
    assert table.read_counters()["blocks_read"] == 0  # the index alone answered
    for kw in ranges:
        assert table.count(**kw) == _count_by_scan(table, **kw), kw
    # unflushed rows, a second file overlapping the first, a delete marker, another family
    table.put(b"r00001", {b"cf:a": b"new"})
    table.put(b"r00003", {b"other:z": b"new"})
    table.delete(b"r00002")
    for kw in ranges:
        assert table.count(**kw) == _count_by_scan(table, **kw), kw
    table.flush()
    for kw in ranges:
        assert table.count(**kw) == _count_by_scan(table, **kw), kw
    assert table.count() == 201
    table.compact()
    assert table.count() == 201


def _staged_cells(fs, staged) -> list:
    out = []
    for sf in sorted(staged, key=lambda s: (s.region_id, s.family)):
        with StoreFileReader(fs, sf.path) as r:
            r.check()
            for b in r.scan_batches():
                out.extend(zip(*[b.column(k).to_pylist() for k in range(6)]))
    return sorted(out)


def test_bulk_load_writes_column_batches_as_dense_blocks(tmp_path):
    """Unsorted row batches of cf:q columns (with nulls, a timestamp column and
    two families) stage the same cells through the dense writer as through
    the cell path, and their blocks are dense."""
    from storage.engine import BulkLoadTask, table_regions, row_batch_to_cells

    conn = storage.connect(str(tmp_path / "b"))
    conn.create_table("t", {"cf": {"block_size": 512}, "g": {}}, split_keys=[b"k050"])
    conn.close()
    fs = FileSystem(str(tmp_path / "b")).sub("t")
    regions, families = table_regions(fs)
    rng = random.Random(5)
    order = list(range(100))
    rng.shuffle(order)
    batches = []
    for part in (order[:60], order[60:]):
        batches.append(pa.RecordBatch.from_pydict({
            "key": pa.array([b"k%03d" % i for i in part]),
            "cf:b": pa.array([b"b%d" % i if i % 4 else None for i in part]),
            "cf:a": pa.array([b"a" * (i % 9) for i in part]),
            "cf:a@ts": pa.array([None if i % 2 else 10 + i for i in part], pa.int64()),
            "g:z": pa.array([b"z" if i % 10 == 0 else None for i in part]),
        }))
    dense_task = BulkLoadTask(fs, "j1", "p0", regions, families, timestamp=7)
    for b in batches:
        dense_task.add(b)
    dense_staged = dense_task.finish()
    cell_task = BulkLoadTask(fs, "j2", "p0", regions, families, timestamp=7)
    for b in batches:
        for cells in row_batch_to_cells(b, 7).values():
            cell_task.add_cells(cells)
    cell_staged = cell_task.finish()
    assert _staged_cells(fs, dense_staged) == _staged_cells(fs, cell_staged)
    assert len(dense_staged) == 4  # both families in both regions
    for sf in dense_staged:
        with StoreFileReader(fs, sf.path) as r:
            assert set(r._index.layouts) == {1}
    # a repeated key takes the cell path, which merges the two rows column by column
    task = BulkLoadTask(fs, "j3", "p0", regions, families, timestamp=7)
    task.add(pa.RecordBatch.from_pydict({"key": [b"k001", b"k001"], "cf:a": [b"x", None], "cf:b": [None, b"y"]}))
    merged = _staged_cells(fs, task.finish())
    assert [(c[0], c[2], c[5]) for c in merged] == [(b"k001", b"a", b"x"), (b"k001", b"b", b"y")]


def test_bulk_load_keeps_a_marker_beside_the_put_it_hides(tmp_path):
    """Cells staged with add_cells are de-duplicated on their whole key, the
    type included: a Delete marker and a put of the same column and
    timestamp both stay (the marker first, as a store file orders them);
    only a repeat of the very same cell keeps just its last write."""
    from storage.engine import BulkLoadTask, table_regions

    conn = storage.connect(str(tmp_path / "m"))
    conn.create_table("t", {"cf": {}})
    conn.close()
    fs = FileSystem(str(tmp_path / "m")).sub("t")
    regions, families = table_regions(fs)
    cells = cells_to_batch([
        (b"r1", b"cf", b"a", 5, 4, b"first"),
        (b"r1", b"cf", b"a", 5, 8, b""),  # Delete of exactly that version
        (b"r1", b"cf", b"a", 5, 4, b"second"),  # the same put again: the last write wins
        (b"r1", b"cf", b"", 3, 14, b""),  # DeleteFamily
        (b"r2", b"cf", b"a", 5, 4, b"kept"),
    ])
    task = BulkLoadTask(fs, "j", "p0", regions, families, timestamp=9)
    task.add_cells(cells)
    staged = _staged_cells(fs, task.finish())
    assert staged == sorted([
        (b"r1", b"cf", b"", 3, 14, b""),
        (b"r1", b"cf", b"a", 5, 8, b""),
        (b"r1", b"cf", b"a", 5, 4, b"second"),
        (b"r2", b"cf", b"a", 5, 4, b"kept"),
    ])


def test_a_block_keeps_its_unfiltered_row_batches_only():
    """A cached block answers the same column choice again with the batch it built
    (its own arrays); a masked call, or one that drops rows, never reads or fills the memo."""
    import numpy as np

    from storage.storefile.dense_rows import dense_rows

    cells = [(b"r%02d" % i, b"cf", q, 7, 4, b"%s%d" % (q, i)) for i in range(12) for q in (b"a", b"b")
             if not (q == b"b" and i % 4 == 0)]
    dense = dense_from_cells(cells_to_batch(cells))
    assert dense is not None
    both = dense_rows(dense, ["cf:a", "cf:b"], [b"a", b"b"], False)
    assert dense_rows(dense, ["cf:a", "cf:b"], [b"a", b"b"], False) is both
    assert both.num_rows == 12 and both.column(2).null_count == 3
    mask = np.arange(12) % 2 == 0
    masked = dense_rows(dense, ["cf:a", "cf:b"], [b"a", b"b"], False, mask=mask)
    assert masked.column(0).to_pylist() == [b"r%02d" % i for i in range(0, 12, 2)]
    only_b = dense_rows(dense, ["cf:b"], [b"b"], True)  # rows without b are dropped: a copy, not kept
    assert only_b.num_rows == 9 and ("cf:b",) not in {k[0] for k in dense.row_batches}
    assert dense_rows(dense, ["cf:a", "cf:b"], [b"a", b"b"], False) is both
    assert dense_rows(dense, ["cf:b"], [b"b"], True).equals(only_b)
