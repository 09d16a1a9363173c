"""TableInputFormat, TableSplit and the record readers, on real tables in tmp_path (no Spark)."""

from __future__ import annotations

import os
import struct

import pyarrow as pa
import pytest

import storage
from connector import SnapshotLost, TableInputFormat
from storage.engine import BulkLoadTask, abort_load, lock_table, prepare_commit, recover, table_regions
from connector.options import ScanSpec, scan_spec_from_conf, normalize_conf, to_bytes_binary, to_string_binary
from connector.record_reader import TableBatchRecordReader, TableRecordReader, key_progress
from connector.scanning import split_batches
from storage.region.region_snapshots import live_pins
from storage.scanner.metrics import ScanMetrics
from storage.engine import block_cut_keys
from serde import create_serde
from storage.errors import InvalidArgument, TableLocked
from storage.vfs.fs import FileSystem

ROWS = 1200


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


def _fill(table, rows=ROWS, start=0):
    with table.batch(batch_size=500) as b:
        for i in range(start, start + rows):
            b.put(_key(i), {b"cf:a": b"a%05d" % i, b"cf:b": struct.pack(">i", i - 600), b"cf2:x": b"x" * (i % 7)})


@pytest.fixture
def root(tmp_path):
    path = str(tmp_path / "root")
    conn = storage.connect(path)
    table = conn.create_table(
        "t", {"cf": {"block_size": 512, "max_versions": 3}, "cf2": {"block_size": 512}},
        split_keys=[_key(300), _key(600), _key(900)], settings={"wal_sync": "none"},
    )
    _fill(table)
    table.flush()
    conn.close()
    return path


def _conf(root, **extra):
    conf = {"regionscan.root": root, "hbase.mapreduce.inputtable": "t"}
    conf.update(extra)
    return conf


def _embedded_rows(root, **scan):
    conn = storage.connect(root, read_only=True)
    try:
        return list(conn.table("t").scan(**scan))
    finally:
        conn.close()


def _read_all(fmt, splits):
    out = []
    for split in splits:
        reader = fmt.create_record_reader(split)
        while reader.next_key_value():
            out.append((reader.get_current_key(), reader.get_current_value()))
        reader.close()
    return out


# -- configuration ---------------------------------------------------------------
def test_bytes_binary_round_trip():
    raw = b"row\x00\xff\\x"
    assert to_bytes_binary(to_string_binary(raw)) == raw
    assert to_bytes_binary("ab\\x01") == b"ab\x01"


def test_conf_keys_become_the_scan():
    conf = normalize_conf({
        "hbase.mapreduce.scan.row.start": "a\\x00",
        "hbase.mapreduce.scan.row.stop": "m",
        "hbase.mapreduce.scan.columns": "cf:a cf2",
        "hbase.mapreduce.scan.column.family": "cf3",
        "hbase.mapreduce.scan.timerange.start": "10",
        "hbase.mapreduce.scan.timerange.end": "20",
        "hbase.mapreduce.scan.maxversions": "2",
        "hbase.mapreduce.scan.cacheblocks": "true",
        "hbase.mapreduce.scan.cachedrows": "100",
        "hbase.mapreduce.scan.batchsize": "5",
    })
    spec = scan_spec_from_conf(conf)
    assert spec.request.row_start == b"a\x00" and spec.request.row_stop == b"m"
    assert spec.request.columns == (b"cf:a", b"cf2", b"cf3")
    assert spec.request.time_range == (10, 20) and spec.request.max_versions == 2
    assert spec.cache_blocks and spec.caching == 100 and spec.batch == 5


def test_timestamp_key_selects_exactly_that_timestamp_and_spark_aliases_apply():
    spec = scan_spec_from_conf(normalize_conf({"hbase.mapreduce.scan.timestamp": 42}))
    assert spec.request.time_range == (42, 43)
    spec = scan_spec_from_conf(normalize_conf({
        "hbase.spark.query.timerange.start": "5", "hbase.spark.query.timerange.end": "9",
        "hbase.spark.query.maxVersions": "4", "hbase.spark.query.cachedrows": "7",
    }))
    assert spec.request.time_range == (5, 9) and spec.request.max_versions == 4 and spec.caching == 7


@pytest.mark.parametrize("key, value", [
    ("hbase.mapreduce.scan.maxversions", "zero"),
    ("hbase.mapreduce.scan.maxversions", "0"),
    ("hbase.mapreduce.scan.cacheblocks", "perhaps"),
    ("regionscan.scan.filter", "NoSuchFilter ()"),
])
def test_bad_conf_values_name_the_key(key, value):
    with pytest.raises(InvalidArgument) as err:
        scan_spec_from_conf(normalize_conf({key: value}))
    assert key in str(err.value) or "NoSuchFilter" in str(err.value)


def test_missing_table_or_root_is_reported(root):
    with pytest.raises(InvalidArgument, match="inputtable"):
        TableInputFormat({"regionscan.root": root})
    with pytest.raises(InvalidArgument, match="regionscan.root"):
        TableInputFormat({"hbase.mapreduce.inputtable": "t"})
    with pytest.raises(InvalidArgument, match="no column family"):
        TableInputFormat(_conf(root, **{"hbase.mapreduce.scan.columns": "nope:a"})).get_splits()


# -- splits ----------------------------------------------------------------------
def test_one_split_per_region_in_key_order(root):
    fmt = TableInputFormat(_conf(root))
    splits = fmt.get_splits()
    assert [(s.start, s.end) for s in splits] == [
        (b"", _key(300)), (_key(300), _key(600)), (_key(600), _key(900)), (_key(900), None)]
    assert [s.index for s in splits] == [0, 1, 2, 3]
    assert all(s.size > 0 and s.location and s.region_name.startswith("t,") for s in splits)
    assert splits[3].end_row == b"" and splits[0].length == splits[0].size
    assert _read_all(fmt, splits) == _embedded_rows(root)
    fmt.release()


def test_only_regions_that_intersect_the_scan_get_a_split(root):
    fmt = TableInputFormat(_conf(root, **{
        "hbase.mapreduce.scan.row.start": to_string_binary(_key(350)),
        "hbase.mapreduce.scan.row.stop": to_string_binary(_key(650)),
    }))
    splits = fmt.get_splits()
    assert [(s.start, s.end) for s in splits] == [(_key(350), _key(600)), (_key(600), _key(650))]
    assert _read_all(fmt, splits) == _embedded_rows(root, row_start=_key(350), row_stop=_key(650))
    narrowed = TableInputFormat(_conf(root), key_ranges=[(_key(10), _key(20)), (_key(950), _key(951))])
    splits = narrowed.get_splits()
    assert [s.start for s in splits] == [b"", _key(900)]
    keys = [k for k, _ in _read_all(narrowed, splits)]
    assert keys == [_key(i) for i in range(10, 20)] + [_key(950)]


def test_splits_per_region_cut_at_block_boundaries(root):
    fmt = TableInputFormat(_conf(root, **{"hbase.mapreduce.tableinput.mappers.per.region": "3"}))
    splits = fmt.get_splits()
    assert len(splits) == 12
    table_fs = FileSystem(root).sub("t")
    firsts = set()
    for pin in {p for s in splits for p in s.regions}:
        for fam, names in pin.files:
            for name in names:
                from storage.storefile import StoreFileReader

                with StoreFileReader(table_fs, f"regions/{pin.region_id}/{fam}/{name}") as r:
                    firsts.update(k[0] for k in r.block_first_keys)
    for left, right in zip(splits, splits[1:]):
        assert left.end == right.start
        if right.start not in (b"", _key(300), _key(600), _key(900)):
            assert right.start in firsts
    counts = [sum(b.num_rows for b in fmt.create_batch_reader(s)) for s in splits]
    assert sum(counts) == ROWS and min(counts) >= 60  # roughly even thirds of 300 rows
    assert _read_all(fmt, splits) == _embedded_rows(root)


def test_block_cut_keys_are_inside_the_range(root):
    table_fs = FileSystem(root).sub("t")
    pin = TableInputFormat(_conf(root)).get_splits()[1].regions[0]
    cuts = block_cut_keys(table_fs, pin, _key(300), _key(600), 4)
    assert len(cuts) == 3 and cuts == sorted(cuts)
    assert all(_key(300) < c < _key(600) for c in cuts)


def test_autobalance_merges_small_neighbours_and_cuts_large_regions(tmp_path):
    path = str(tmp_path / "root")
    conn = storage.connect(path)
    keys = [_key(i) for i in (100, 200, 300, 400, 500)]
    table = conn.create_table("t", {"cf": {"block_size": 512}, "cf2": {}}, split_keys=keys, settings={"wal_sync": "none"})
    _fill(table, rows=3000)  # regions 0-4 hold 100 rows each; the last holds 2500
    table.flush()
    conn.close()
    fmt = TableInputFormat(_conf(path, **{
        "hbase.mapreduce.tif.input.autobalance": "true",
        "hbase.mapreduce.tif.ave.regionsize": str(int(table_size(path) / 6)),
    }))
    splits = fmt.get_splits()
    merged = [s for s in splits if ";" in s.region_name]
    assert merged, "small neighbouring regions are merged"
    last_region = [s for s in splits if s.start >= keys[-1]]
    assert len(last_region) >= 2, "the large region is cut"
    assert _read_all(fmt, splits) == _embedded_rows(path)


def table_size(path):
    return sum(r["size"] for r in storage.connect(path, read_only=True).table("t").regions())


# -- record readers ----------------------------------------------------------------
def test_record_reader_progress_and_counters(root):
    fmt = TableInputFormat(_conf(root))
    split = fmt.get_splits()[1]
    reader = fmt.create_record_reader(split)
    assert reader.get_progress() == 0.0
    seen = []
    while reader.next_key_value():
        seen.append(reader.get_progress())
    assert seen == sorted(seen) and 0.0 <= seen[0] < 0.1 and seen[-1] > 0.9
    assert reader.get_progress() == 1.0
    counters = reader.get_counters()
    assert counters["NUM_SCANNER_RESTARTS"] == 0 and counters["REGIONS_SCANNED"] == 1
    assert counters["CELLS_SCANNED"] >= 300 * 3
    # rows and bytes returned, and the store file reads, as the embedded scan counts them
    assert counters["ROWS_SCANNED"] == len(seen)
    assert counters["BYTES_IN_RESULTS"] > 0
    assert counters["BLOCK_READ_OPS_COUNT"] + counters["BLOCKS_READ_FROM_BLOCK_CACHE"] > 0
    reader.close()


def test_partition_read_counters_match_the_embedded_scan(root):
    """One definition of the scan metrics: a split's batch reader reports the
    rows, bytes and block reads the embedded scan of the same range reports."""
    fmt = TableInputFormat(_conf(root, **{"hbase.mapreduce.scan.cacheblocks": "false"}))
    split = fmt.get_splits()[1]
    reader = fmt.create_batch_reader(split)
    rows = sum(batch.num_rows for batch in reader)
    got = reader.get_counters()
    reader.close()
    table = storage.connect(root, read_only=True).table("t")
    metrics = ScanMetrics()
    want_rows = sum(b.num_rows for b in table.scan_batches(row_start=split.start, row_stop=split.end or None,
                                                          metrics=metrics))
    want = metrics.to_dict()
    assert rows == want_rows == got["ROWS_SCANNED"] == want["ROWS_SCANNED"] > 0
    assert got["BYTES_IN_RESULTS"] == want["BYTES_IN_RESULTS"] > 0
    # the embedded table keeps a block cache; the split reads with cacheblocks=false
    blocks = ("BLOCK_READ_OPS_COUNT", "BLOCKS_READ_FROM_BLOCK_CACHE")
    assert got["BLOCKS_READ_FROM_BLOCK_CACHE"] == 0
    assert sum(got[k] for k in blocks) == sum(want[k] for k in blocks) > 0
    assert got["REGIONS_SCANNED"] == want["REGIONS_SCANNED"] == 1


def test_key_progress_by_position():
    assert key_progress(b"a", b"c", b"b") == pytest.approx(0.5)
    assert key_progress(b"ab\x00", b"ab\x10", b"ab\x08") == pytest.approx(0.5)
    assert key_progress(b"", None, b"\x80") == pytest.approx(0.5)


def test_batchsize_splits_wide_rows_into_partial_values(root):
    fmt = TableInputFormat(_conf(root, **{"hbase.mapreduce.scan.batchsize": "2"}))
    values = _read_all(fmt, fmt.get_splits()[:1])
    assert max(len(v) for _, v in values) == 2
    first = [v for k, v in values if k == _key(1)]
    assert len(first) == 2 and set().union(*first) == {b"cf:a", b"cf:b", b"cf2:x"}


def test_batch_reader_equals_scan_batches_and_honours_cachedrows(root):
    fmt = TableInputFormat(_conf(root, **{"hbase.mapreduce.scan.columns": "cf:a cf:b",
                                          "hbase.mapreduce.scan.cachedrows": "64"}))
    batches = [b for s in fmt.get_splits() for b in fmt.create_batch_reader(s)]
    assert max(b.num_rows for b in batches) == 64
    got = pa.Table.from_batches(batches)
    conn = storage.connect(root, read_only=True)
    want = pa.Table.from_batches(list(conn.table("t").scan_batches(columns=[b"cf:a", b"cf:b"])))
    conn.close()
    assert got.equals(want)


def test_max_versions_and_time_range(root):
    conn = storage.connect(root)
    table = conn.table("t")
    table.put(_key(5), {b"cf:a": b"v2"}, timestamp=10)
    table.put(_key(5), {b"cf:a": b"v3"}, timestamp=20)
    conn.close()
    fmt = TableInputFormat(_conf(root, **{
        "hbase.mapreduce.scan.row.start": to_string_binary(_key(5)),
        "hbase.mapreduce.scan.row.stop": to_string_binary(_key(6)),
        "hbase.mapreduce.scan.timerange.start": "0", "hbase.mapreduce.scan.timerange.end": "15",
    }))
    assert _read_all(fmt, fmt.get_splits()) == [(_key(5), {b"cf:a": b"v2"})]
    fmt = TableInputFormat(_conf(root, **{"hbase.mapreduce.scan.timestamp": "20",
                                          "hbase.mapreduce.scan.columns": "cf:a"}))
    assert _read_all(fmt, fmt.get_splits()) == [(_key(5), {b"cf:a": b"v3"})]


class _FailingOnce(TableBatchRecordReader):
    """A reader whose scan stream raises an I/O error once, after the given number of batches."""

    def __init__(self, fail_after, errors=1, **kw):
        super().__init__(**kw)
        self.fail_after = fail_after
        self.errors = errors

    def initialize(self, split, context=None):
        super().initialize(split, context)
        scan = self._scan
        real_open = scan._open
        state = {"batches": 0, "errors": self.errors}

        def flaky():
            for batch in real_open():
                if state["errors"] and state["batches"] == self.fail_after:
                    state["errors"] -= 1
                    raise OSError("injected read error")
                state["batches"] += 1
                yield batch

        scan._open = flaky
        scan._stream = flaky()


def test_reader_restarts_after_the_last_returned_row(root):
    # four key ranges in one region: the split's scan yields (at least) four batches
    ranges = [(_key(i), _key(i + 20)) for i in (610, 650, 700, 800)]
    fmt = TableInputFormat(_conf(root, **{"hbase.mapreduce.scan.cachedrows": "7",
                                          "hbase.mapreduce.scan.columns": "cf:a"}), key_ranges=ranges)
    (split,) = fmt.get_splits()
    clean = pa.Table.from_batches(list(fmt.create_batch_reader(split)))
    reader = _FailingOnce(fail_after=2)
    reader.initialize(split)
    got = pa.Table.from_batches(list(reader))
    assert got.equals(clean)
    assert reader.get_counters()["NUM_SCANNER_RESTARTS"] == 1
    stubborn = _FailingOnce(fail_after=0, errors=5, max_restarts=2)
    stubborn.initialize(split)
    with pytest.raises(OSError, match="injected"):
        list(stubborn)
    assert stubborn.get_counters()["NUM_SCANNER_RESTARTS"] == 2


# -- snapshots ----------------------------------------------------------------------
def test_splits_read_the_snapshot_of_get_splits(root):
    conn = storage.connect(root)
    table = conn.table("t")
    table.put(_key(10), {b"cf:a": b"before"})  # unflushed: in the WAL when the splits pin it
    fmt = TableInputFormat(_conf(root))
    splits = fmt.get_splits()
    table.put(_key(11), {b"cf:a": b"after"})
    table.put(_key(5000), {b"cf:a": b"after"})
    rows = dict(_read_all(fmt, splits))
    conn.close()
    assert rows[_key(10)][b"cf:a"] == b"before"
    assert rows[_key(11)][b"cf:a"] == b"a00011" and _key(5000) not in rows


def test_pinned_files_survive_compaction_in_the_archive_until_released(root):
    fmt = TableInputFormat(_conf(root))
    splits = fmt.get_splits()
    before = _read_all(fmt, splits[:1])
    pin = splits[0].regions[0]
    old = pin.file_paths()
    table_dir = os.path.join(root, "t")
    (registered,) = live_pins(FileSystem(root).sub("t"))  # get_splits registers its pins
    assert set(old) <= set(registered["files"]) and registered["expires_ms"] > 0
    conn = storage.connect(root)
    table = conn.table("t")
    _fill(table, rows=50)
    table.compact()  # flush + major compaction retires the pinned files...
    conn.close()
    gone = [p for p in old if not os.path.exists(os.path.join(table_dir, p))]
    assert gone
    # ...into the archive, where the split's reader finds them: the same rows as before
    assert all(os.path.exists(os.path.join(table_dir, "archive", p)) for p in gone)
    assert _read_all(fmt, splits[:1]) == before
    fmt.release()
    assert not os.listdir(os.path.join(table_dir, "pins"))
    with storage.connect(root) as conn:  # a writer's open cleans what no pin names any more
        conn.table("t")
    assert not any(os.path.exists(os.path.join(table_dir, "archive", p)) for p in gone)


def test_plans_that_never_release_share_one_pin_per_table_state(root):
    """regionscan.pin.shared (what a Spark read sets: it never releases its pins): plans of the
    same files share one pin file, which release() leaves to expire (another plan may rely
    on it); once a compaction changes the files, the next plan pins the new ones."""
    from connector.options import PIN_SHARED

    pins = os.path.join(root, "t", "pins")
    fmts = [TableInputFormat(_conf(root, **{PIN_SHARED: "true"})) for _ in range(4)]
    ids = {s.pin_id for fmt in fmts for s in fmt.get_splits()}
    assert len(ids) == 1 and len(os.listdir(pins)) == 1
    for fmt in fmts:
        fmt.release()
    assert len(os.listdir(pins)) == 1  # a shared pin expires, it is never released
    with storage.connect(root) as conn:
        table = conn.table("t")
        _fill(table, rows=50)
        table.compact()
    (new,) = {s.pin_id for s in TableInputFormat(_conf(root, **{PIN_SHARED: "true"})).get_splits()}
    assert new not in ids and len(os.listdir(pins)) == 2
    own = TableInputFormat(_conf(root))  # not shared: a pin of its own, released by release()
    own.get_splits()
    assert len(os.listdir(pins)) == 3
    own.release()
    assert len(os.listdir(pins)) == 2


def test_files_of_an_unregistered_snapshot_fail_clearly_once_compacted(root):
    fmt = TableInputFormat(_conf(root))
    splits = fmt.get_splits()
    fmt.release()  # the pin is gone: nothing protects the files any more
    old = splits[0].regions[0].file_paths()
    with storage.connect(root) as conn:
        table = conn.table("t")
        _fill(table, rows=50)
        table.compact()
    gone = [p for p in old if not os.path.exists(os.path.join(root, "t", p))]
    assert gone
    with pytest.raises(SnapshotLost) as err:
        _read_all(fmt, splits[:1])
    assert "pinned" in str(err.value) and any(os.path.basename(p) in str(err.value) for p in gone)


def test_a_flush_after_pinning_keeps_the_pinned_wal_readable(root):
    conn = storage.connect(root)
    table = conn.table("t")
    table.put(_key(1), {b"cf:a": b"unflushed"})
    fmt = TableInputFormat(_conf(root))
    splits = fmt.get_splits()
    table.put(_key(1), {b"cf:a": b"after the splits"})
    table.flush()  # the pinned WAL is retired into the archive, not deleted
    conn.close()
    rows = dict(_read_all(fmt, splits[:1]))
    assert rows[_key(1)][b"cf:a"] == b"unflushed"  # the snapshot as of get_splits()
    fmt.release()


def test_an_unpinned_flushed_wal_is_reported(root):
    conn = storage.connect(root)
    table = conn.table("t")
    table.put(_key(1), {b"cf:a": b"unflushed"})
    fmt = TableInputFormat(_conf(root))
    splits = fmt.get_splits()
    fmt.release()
    table.flush()  # nothing pins the WAL now: it is deleted
    conn.close()
    with pytest.raises(SnapshotLost, match="WAL"):
        _read_all(fmt, splits[:1])


def test_committed_bulk_load_is_seen_whole_before_and_after_roll_forward(root):
    table_fs = FileSystem(root).sub("t")
    regions, families = table_regions(table_fs)
    serde = create_serde("binary", "k INT :key, a STRING cf:a")
    task = BulkLoadTask(table_fs, "job1", "p0", regions, families, timestamp=1 << 50)
    task.add(serde.serialize_batch(pa.RecordBatch.from_pydict(
        {"k": pa.array([5, 305, 2000], pa.int32()), "a": ["L5", "L305", "L2000"]})))
    staged = task.finish()
    assert len(staged) == 3
    assert _embedded_rows(root, row_start=_key(5), row_stop=_key(6))[0][1][b"cf:a"] == b"a00005"
    lock = lock_table(table_fs, "job1")
    with pytest.raises(TableLocked, match="bulk load"):
        lock_table(table_fs, "job2")
    prepare_commit(table_fs, "job1", staged)  # committed, manifests not yet updated: a crash here
    lock.release()
    assert abort_load(table_fs, "job1") is False  # a committed job keeps its staged files
    fmt = TableInputFormat(_conf(root, **{"hbase.mapreduce.scan.columns": "cf:a"}))
    rows = dict(_read_all(fmt, fmt.get_splits()))
    assert rows[_key(5)] == {b"cf:a": b"L5"} and rows[_key(305)] == {b"cf:a": b"L305"}
    assert rows[_key(2000)] == {b"cf:a": b"L2000"}
    lock = lock_table(table_fs, "recovery")
    assert recover(table_fs) == 1
    lock.release()
    assert not os.listdir(os.path.join(root, "t", "bulkload"))
    assert not os.path.exists(os.path.join(root, "t", ".staging", "job1"))
    assert dict(_embedded_rows(root, columns=[b"cf:a"])) == rows


def test_keys_only_batches_hold_every_row_key(root):
    fmt = TableInputFormat(_conf(root, **{"regionscan.scan.keys.only": "true"}))
    batches = [b for s in fmt.get_splits() for b in fmt.create_batch_reader(s)]
    assert all(b.schema.names == ["key"] for b in batches)
    assert pa.Table.from_batches(batches).column("key").to_pylist() == [_key(i) for i in range(ROWS)]
    filtered = TableInputFormat(_conf(root, **{"regionscan.scan.keys.only": "true",
                                               "regionscan.scan.filter": "SingleColumnValueFilter ('cf', 'a', =, 'binary:a00007')"}))
    keys = [b.column(0).to_pylist() for s in filtered.get_splits() for b in filtered.create_batch_reader(s)]
    assert sum(keys, []) == [_key(7)]


def test_split_batches_resume_after_a_row(root):
    fmt = TableInputFormat(_conf(root, **{"hbase.mapreduce.scan.columns": "cf:a"}))
    split = fmt.get_splits()[0]
    rest = pa.Table.from_batches(list(split_batches(split, resume_after=_key(100))))
    assert rest.column("key").to_pylist() == [_key(i) for i in range(101, 300)]
    assert isinstance(split.scan, ScanSpec)


def test_server_root_reads_through_the_region_server(root):
    from storage.server.process import ServerProcess

    expected = _embedded_rows(root)
    conn = storage.connect(root)
    one = conn.create_table("one", {"cf": {"block_size": 512}}, split_keys=[_key(300)], settings={"wal_sync": "none"})
    with one.batch() as b:
        for i in range(700):
            b.put(_key(i), {b"cf:a": b"a%05d" % i})
    one.flush()
    conn.close()
    with ServerProcess(root) as server:
        fmt = TableInputFormat({"regionscan.root": server.location, "hbase.mapreduce.inputtable": "t",
                                "hbase.mapreduce.tableinput.mappers.per.region": "3"})
        splits = fmt.get_splits()
        assert len(splits) == 4 and all(not s.regions for s in splits)  # one per region, nothing pinned
        assert splits[0].location == server.location.split("://", 1)[1]
        assert _read_all(fmt, splits) == expected
        narrowed = TableInputFormat({"regionscan.root": server.location, "hbase.mapreduce.inputtable": "t"},
                                    key_ranges=[(_key(295), _key(305))])
        batches = [b for s in narrowed.get_splits() for b in narrowed.create_batch_reader(s)]
        assert pa.Table.from_batches(batches).column("key").to_pylist() == [_key(i) for i in range(295, 305)]
        # count_rows() asks the server's count: the rows of each split, not read
        expected_counts = [len(_read_all(fmt, [s])) for s in splits]
        assert _counts(fmt, TableBatchRecordReader) == expected_counts and sum(expected_counts) == ROWS
        assert _counts(narrowed, TableRecordReader) == [5, 5]  # the range spans two regions
        # one family of clean files: the server's block indexes answer, no block is read or looked up
        one = TableInputFormat({"regionscan.root": server.location, "hbase.mapreduce.inputtable": "one"})
        with storage.connect(server.location) as remote:
            remote.read_counters("one", reset=True)
            assert _counts(one, TableRecordReader) == [300, 400]
            counters = remote.read_counters("one")["counters"]
            assert counters["blocks_read"] == counters["cache_hits"] == 0


def test_a_task_finishing_after_the_abort_discards_its_files(root):
    from storage.region.load_commit import aborted_marker, drop_old_abort_markers

    table_fs = FileSystem(root).sub("t")
    regions, families = table_regions(table_fs)
    serde = create_serde("binary", "k INT :key, a STRING cf:a")
    late = BulkLoadTask(table_fs, "job-late", "p0", regions, families, timestamp=1 << 50)
    late.add(serde.serialize_batch(pa.RecordBatch.from_pydict({"k": pa.array([5], pa.int32()), "a": ["x"]})))
    assert abort_load(table_fs, "job-late")  # another task failed: the driver aborts first
    with pytest.raises(InvalidArgument, match="aborted"):
        late.finish()  # this attempt was still running; it writes, sees the marker, cleans up
    assert table_fs.listdir(".staging/job-late") == []  # only the emptied folder is left
    assert table_fs.exists(aborted_marker("job-late"))
    assert drop_old_abort_markers(table_fs, older_than_s=-1) == 1
    assert not table_fs.exists(aborted_marker("job-late"))


def _counts(fmt, reader_type) -> list[int]:
    """count_rows() of a fresh reader per split."""
    counts = []
    for s in fmt.get_splits():
        reader = reader_type()
        reader.initialize(s)
        counts.append(reader.count_rows())
        assert reader.get_progress() == 1.0
        reader.close()
    return counts


def test_record_readers_count_rows_from_the_index_or_by_reading(root):
    fmt = TableInputFormat(_conf(root))
    expected = [len(list(_read_all(fmt, [s]))) for s in fmt.get_splits()]
    for reader_type in (TableRecordReader, TableBatchRecordReader):
        counts = _counts(fmt, reader_type)
        assert counts == expected and sum(counts) == ROWS
    # unflushed deletes: the indexes cannot answer, the rows are read
    conn = storage.connect(root)
    conn.table("t").delete(_key(5))
    conn.table("t").delete(_key(700))
    conn.close()
    assert sum(_counts(TableInputFormat(_conf(root)), TableBatchRecordReader)) == ROWS - 2
    # with columns the rows are read too, and only rows holding them count
    fmt = TableInputFormat(_conf(root, **{"hbase.mapreduce.scan.columns": "cf2:x"}))
    assert sum(_counts(fmt, TableRecordReader)) == len(_embedded_rows(root, columns=[b"cf2:x"]))
