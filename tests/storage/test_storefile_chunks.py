"""Version 3 column chunks: reads of some columns, the block cache, mixed versions.

* a read of some columns reads the key chunk and those value chunks only, and
  leaves the others unread (None), which nothing takes for absent cells;
* the block cache: a cached whole block serves a narrower read with no read, a
  cached narrower block serves the same columns again, and a wider read reads
  only the chunks it lacks;
* a table whose files are of versions 2 and 3 reads as one written in either,
  on the batch, cell and point paths, and compacts into version 3.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import storage
from storage.errors import StorageError
from storage.storefile import BlockCache, StoreFileReader, StoreFileWriter
from storage.storefile.writer import StoreFileWriter as _Writer
from storage.vfs.fs import FileSystem

ROWS = 2000
QUALS = [b"a", b"b", b"c", b"d"]


def _values(j: int) -> list:
    if j == 0:
        return [i.to_bytes(8, "big") for i in range(ROWS)]
    if j == 1:
        return [b"v%d" % (i * 13) for i in range(ROWS)]
    if j == 2:
        return [None if i % 3 else b"%06d" % i for i in range(ROWS)]
    return [b"d" * (i % 11) for i in range(ROWS)]


@pytest.fixture
def chunked(tmp_path):
    fs = FileSystem(str(tmp_path))
    w = StoreFileWriter(fs, "c.sf", family=b"cf", block_size=8192, compression="lz4")
    values = [_values(j) for j in range(len(QUALS))]
    w.append_rows(pa.array([b"r%05d" % i for i in range(ROWS)], pa.binary()), QUALS,
                  [pa.array(v, pa.binary()) for v in values],
                  [pa.array([None if x is None else 7 for x in v], pa.int64()) for v in values])
    w.finish()
    return fs, values


def _column(parts, j: int) -> list:
    out = []
    for p in parts:
        out.extend(p.dense.value(j).to_pylist())
    return out


def _chunk_bytes(reader, qualifiers) -> int:
    """Bytes of the key chunks and of ``qualifiers``' value chunks over every block."""
    total = 0
    for i in range(reader.block_count):
        entries = reader._index.chunks.entries(i)
        total += reader._index.key_lengths[i]
        for q in qualifiers:
            e = entries[QUALS.index(q) + 1]
            total += (e[1] + 7) & ~7
    return total


def test_a_read_of_some_columns_reads_their_chunks_only(chunked):
    fs, values = chunked
    with StoreFileReader(fs, "c.sf") as r:
        assert r.format_version == 3 and r.block_count > 4
        before = r.counters.bytes_read
        parts = list(r.scan_parts(columns=[b"c", b"a"]))
        assert r.counters.bytes_read - before == _chunk_bytes(r, [b"a", b"c"])
        assert _column(parts, 0) == values[0] and _column(parts, 2) == values[2]
        for p in parts:
            assert p.dense.values[1] is None and p.dense.values[3] is None and not p.dense.complete
            with pytest.raises(StorageError, match=r"column b'b' was not read"):
                p.dense.value(1)
            with pytest.raises(StorageError, match="read it whole"):
                p.dense.cells(b"cf")
        # asking for every column is a whole read, whose parts have the cell form
        whole = list(r.scan_parts(columns=QUALS + [b"zz"]))
        assert all(p.dense.complete for p in whole)
        assert [_column(whole, j) for j in range(4)] == values


def test_the_cache_serves_narrower_reads_and_completes_wider_ones(chunked):
    fs, values = chunked
    cache = BlockCache(64 << 20)
    with StoreFileReader(fs, "c.sf", cache=cache) as r:
        list(r.scan_parts(columns=[b"a"]))
        before = r.counters.bytes_read
        assert _column(list(r.scan_parts(columns=[b"a"])), 0) == values[0]
        assert r.counters.bytes_read == before  # the narrow blocks were cached
        parts = list(r.scan_parts(columns=[b"a", b"d"]))
        # only the missing chunks were read (the key chunks came with the cached blocks)
        assert r.counters.bytes_read - before == _chunk_bytes(r, [b"d"]) - sum(r._index.key_lengths)
        assert _column(parts, 3) == values[3] and _column(parts, 0) == values[0]
    cache = BlockCache(64 << 20)
    with StoreFileReader(fs, "c.sf", cache=cache) as r:
        list(r.scan_batches())  # whole blocks cached
        before = r.counters.bytes_read
        parts = list(r.scan_parts(columns=[b"b"]))
        assert r.counters.bytes_read == before and _column(parts, 1) == values[1]


def _answers(table) -> tuple:
    rows = pa.Table.from_batches(list(table.scan_batches(columns=[b"cf:a", b"cf:b"])))
    cells = list(table.scan())
    gets = [table.row(b"k%04d" % i) for i in range(0, 600, 37)]
    return rows.to_pylist(), cells, gets, table.count()


def test_a_table_of_version_2_and_3_files_reads_as_either(tmp_path, monkeypatch):
    conn = storage.connect(str(tmp_path / "mixed"))
    table = conn.create_table("t", {"cf": {"max_versions": 1}}, settings={"wal_sync": "none"})
    memory = storage.connect(str(tmp_path / "memory")).create_table("t", {"cf": {"max_versions": 1}})
    batches = [range(0, 600, 2), range(1, 600, 2), range(0, 600, 5)]  # interleaved rows, overwrites
    for k, rows in enumerate(batches):
        defaults = dict(_Writer.__init__.__kwdefaults__)
        if k == 0:
            monkeypatch.setitem(_Writer.__init__.__kwdefaults__, "format_version", 2)
        for t in (table, memory):
            with t.batch() as b:
                for i in rows:
                    b.put(b"k%04d" % i, {b"cf:a": b"%d-%d" % (i, k), b"cf:b": b"x" * (i % 9 + k)})
        table.flush()
        monkeypatch.setattr(_Writer.__init__, "__kwdefaults__", defaults)
    versions = sorted(r.format_version for r in table.store_file_readers())
    assert versions == [2, 3, 3]
    want = _answers(memory)
    assert _answers(table) == want
    table.compact(major=True)
    assert [r.format_version for r in table.store_file_readers()] == [3]
    assert _answers(table) == want


def test_hidden_columns_lend_their_rows_without_their_value_chunks(tmp_path):
    """A rows read whose other columns are hidden (a Spark read keeps the rows whose decoded
    columns are all null) reads those columns' presence from the key chunk: it reads the same
    bytes as a read of the output columns alone, and still keeps the rows only they hold.  A
    filter that tests every column's values (ValueFilter) reads the hidden chunks it needs."""
    from storage import ScanMetrics, ScanRequest
    from storage.engine import BulkLoadTask, commit_load, pin_table, pinned_batches, table_dir, table_regions

    root = str(tmp_path / "data")
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {"compression": "lz4"}})
    table_fs = FileSystem(root).sub(table_dir("t"))
    regions, families = table_regions(table_fs)
    task = BulkLoadTask(table_fs, "j", "p", regions, families, timestamp=5)
    # cf:c is null in 2 rows of 3: those rows exist through the hidden columns alone
    task.add(pa.record_batch({"key": pa.array([b"r%05d" % i for i in range(ROWS)], pa.binary()),
                              **{f"cf:{q.decode()}": pa.array(_values(j), pa.binary()) for j, q in enumerate(QUALS)}}))
    commit_load(table_fs, "j", task.finish())
    snapshot = pin_table(table_fs)

    def read(columns, hidden=(), flt=None):
        metrics = ScanMetrics()
        request = ScanRequest(columns=columns, output="rows", filter=flt)
        got = pa.Table.from_batches(list(pinned_batches(table_fs, "t", snapshot.regions, snapshot.family_settings(),
                                                        request, [(b"", None)], metrics, hidden_columns=hidden)))
        return got, metrics.bytes_read_from_disk

    alone, alone_bytes = read([b"cf:c"])
    hidden, hidden_bytes = read([b"cf:c", b"cf:a", b"cf:b", b"cf:d"], hidden=[b"cf:a", b"cf:b", b"cf:d"])
    whole, whole_bytes = read([b"cf:a", b"cf:b", b"cf:c", b"cf:d"])
    assert alone.num_rows == ROWS // 3 + 1 and hidden.num_rows == ROWS  # no row lost to a null
    assert hidden.column_names == ["key", "cf:c"] and hidden.column("cf:c").to_pylist() == _values(2)
    assert hidden_bytes == alone_bytes < whole_bytes  # the hidden value chunks were never read
    # a ValueFilter tests the hidden columns' values too: a row passes by any of its cells
    flt = "ValueFilter(=, 'binary:v13')"
    filtered, _ = read([b"cf:c", b"cf:a", b"cf:b", b"cf:d"], hidden=[b"cf:a", b"cf:b", b"cf:d"], flt=flt)
    assert filtered.column("key").to_pylist() == [b"r00001"]


COLUMN_FILTERS = [
    "ColumnPrefixFilter ('c')",
    "ColumnPrefixFilter ('a') OR QualifierFilter (=, 'binary:d')",
    # b is tested, not kept: its chunk is read for the test alone
    "ColumnRangeFilter ('c', true, 'd', true) AND SingleColumnValueFilter ('cf', 'b', =, 'binary:v13')",
]


@pytest.mark.parametrize("live", [False, True], ids=["compacted", "live"])
def test_a_column_filter_reads_the_chunks_of_the_columns_it_keeps(tmp_path, live):
    """A scan of every column whose filter drops columns by their qualifier reads only the
    value chunks of the columns it can keep or test, through the stream (a compacted file) and
    the row merge (a live table), forward and reverse; the rows are the cell path's."""
    from storage import ScanMetrics

    with storage.connect(str(tmp_path / "data")) as conn:
        table = conn.create_table("t", {"cf": {"compression": "lz4"}}, settings={"wal_sync": "none"})
        with table.batch(timestamp=5) as b:
            for i in range(ROWS):
                b.put(b"r%05d" % i, {b"cf:" + q: v for q, v in zip(QUALS, (_values(j)[i] for j in range(4))) if v})
        table.compact(major=True)
        if live:
            with table.batch(timestamp=9) as b:
                for i in range(0, ROWS, 7):
                    b.put(b"r%05d" % i, {b"cf:c": b"new", b"cf:a": b"x"})
                for i in range(3, ROWS, 11):
                    b.delete(b"r%05d" % i)

        def bytes_read(**options) -> int:
            metrics = ScanMetrics()
            conn.block_cache.clear()
            list(table.scan_batches(metrics=metrics, cache_results=False, **options))
            return metrics.bytes_read_from_disk

        whole = bytes_read()
        for flt in COLUMN_FILTERS:
            for reverse in (False, True):
                want = list(table.scan(path="cell", filter=flt, reverse=reverse))
                assert want and list(table.scan(filter=flt, reverse=reverse)) == want, (flt, reverse)
                rows = [(r["key"], dict(r["cf"])) for b in table.scan_batches(filter=flt, reverse=reverse)
                        for r in b.to_pylist()]
                assert rows == [(k, {c[3:]: v for c, v in d.items()}) for k, d in want]
            kept = {"ColumnPrefixFilter ('c')": [b"cf:c"]}.get(flt, [b"cf:a", b"cf:d"] if "OR" in flt else
                                                               [b"cf:b", b"cf:c", b"cf:d"])
            # the same chunks as a rows scan of the columns kept or tested, fewer than all
            assert bytes_read(filter=flt) == bytes_read(columns=kept) < whole, flt
