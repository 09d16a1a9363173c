"""The happybase-shaped embedded API: behaviour, options and error messages."""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import struct
import subprocess
import sys
import time
from collections import OrderedDict
from pathlib import Path

import pyarrow as pa
import pytest

import storage
from storage import InvalidArgument, TableExists, TableLocked, TableNotFound

REPO = paths.REPO


@pytest.fixture
def table(conn):
    t = conn.create_table("t", {"cf": {"max_versions": 3}, "meta": {}}, split_keys=[b"g", b"p"])
    for i, row in enumerate([b"apple", b"banana", b"grape", b"kiwi", b"pear", b"plum", b"zucchini"]):
        t.put(row, {b"cf:n": b"%d" % i, b"cf:name": row, b"meta:len": b"%d" % len(row)}, timestamp=100 + i)
    return t


def test_create_list_and_delete_tables(conn):
    conn.create_table("a", {"cf": {}})
    conn.create_table("b", {"cf": {}}, num_regions=4)
    assert conn.tables() == [b"a", b"b"]
    assert len(conn.table("b").regions()) == 4
    with pytest.raises(TableExists):
        conn.create_table("a", {"cf": {}})
    conn.delete_table("a")
    assert conn.tables() == [b"b"]
    with pytest.raises(TableNotFound, match="nope"):
        conn.table("nope")


@pytest.mark.parametrize(
    "name, families, kwargs, message",
    [
        ("../evil", {"cf": {}}, {}, "invalid table name"),
        ("t", {}, {}, "non-empty dict"),
        ("t", {"c f": {}}, {}, "invalid column family name"),
        ("t", {"cf": {"max_versions": 0}}, {}, "max_versions"),
        ("t", {"cf": {"compression": "snappy"}}, {}, "compression"),
        ("t", {"cf": {"colour": 1}}, {}, "unknown setting 'colour'"),
        # a misspelled setting is named with the closest one
        ("t", {"cf": {"max_version": 3}}, {},
         r"^unknown setting 'max_version' for column family 'cf' \(did you mean max_versions\?\)$"),
        ("t", {"cf": {}}, {"settings": {"wal_synk": "none"}}, r"unknown table setting 'wal_synk' \(did you mean wal_sync\?\)"),
        ("t", {"cf": {}}, {"split_keys": [b"b", b"a"]}, "sorted"),
        ("t", {"cf": {}}, {"split_keys": [b""]}, "non-empty"),
        ("t", {"cf": {}}, {"settings": {"memstore_flush_size": -1}}, "memstore_flush_size"),
    ],
)
def test_bad_create_table_arguments_are_named(conn, name, families, kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        conn.create_table(name, families, **kwargs)
    assert conn.tables() == []


def test_put_row_rows_and_regions(table):
    assert table.row(b"kiwi") == {b"cf:n": b"3", b"cf:name": b"kiwi", b"meta:len": b"4"}
    assert table.row(b"kiwi", columns=[b"meta"]) == {b"meta:len": b"4"}
    assert table.row(b"missing") == {}
    assert [r for r, _ in table.rows([b"plum", b"missing", b"apple"])] == [b"plum", b"apple"]
    regions = table.regions()
    assert [(r["start_key"], r["end_key"]) for r in regions] == [(b"", b"g"), (b"g", b"p"), (b"p", b"")]


def test_scan_options(table):
    keys = lambda it: [k for k, _ in it]  # noqa: E731
    assert keys(table.scan()) == [b"apple", b"banana", b"grape", b"kiwi", b"pear", b"plum", b"zucchini"]
    assert keys(table.scan(row_start=b"b", row_stop=b"pl")) == [b"banana", b"grape", b"kiwi", b"pear"]
    assert keys(table.scan(row_prefix=b"p")) == [b"pear", b"plum"]
    assert keys(table.scan(limit=2)) == [b"apple", b"banana"]
    assert keys(table.scan(reverse=True, limit=3)) == [b"zucchini", b"plum", b"pear"]
    # reversed as HBase: from row_start (inclusive) down to row_stop (exclusive)
    assert keys(table.scan(row_start=b"pear", row_stop=b"banana", reverse=True)) == [b"pear", b"kiwi", b"grape"]
    assert dict(table.scan(columns=[b"cf:n"], row_prefix=b"k")) == {b"kiwi": {b"cf:n": b"3"}}
    (_, data), = table.scan(row_prefix=b"kiwi", include_timestamp=True, columns=[b"cf:n"])
    assert data == {b"cf:n": (b"3", 103)}
    (_, ordered), = table.scan(row_prefix=b"kiwi", sorted_columns=True)
    assert isinstance(ordered, OrderedDict) and list(ordered) == sorted(ordered)
    chunks = list(table.scan(row_prefix=b"kiwi", scan_batching=2))
    assert [len(d) for _, d in chunks] == [2, 1]
    with pytest.raises(InvalidArgument, match="row_prefix"):
        list(table.scan(row_prefix=b"a", row_start=b"a"))
    with pytest.raises(InvalidArgument, match="batch_size"):
        list(table.scan(batch_size=0))
    with pytest.raises(InvalidArgument, match="no column family b'nope'"):
        list(table.scan(columns=[b"nope:x"]))


def test_filters_as_strings_and_objects(table):
    from storage.filters import PrefixFilter

    assert [k for k, _ in table.scan(filter="PrefixFilter ('p')")] == [b"pear", b"plum"]
    assert [k for k, _ in table.scan(filter=PrefixFilter(b"ba"))] == [b"banana"]
    only_keys = list(table.scan(filter="KeyOnlyFilter() AND FirstKeyOnlyFilter()"))
    assert all(len(d) == 1 and list(d.values()) == [b""] for _, d in only_keys)
    assert len(only_keys) == 7
    with pytest.raises(InvalidArgument, match="position"):
        list(table.scan(filter="PrefixFilter ('p'"))


def test_versions_timestamps_and_deletes(conn):
    t = conn.create_table("v", {"cf": {"max_versions": 3}})
    for ts in (1, 2, 3, 4):
        t.put(b"r", {b"cf:q": b"v%d" % ts}, timestamp=ts)
    assert t.cells(b"r", b"cf:q", versions=10) == [b"v4", b"v3", b"v2"]
    assert t.cells(b"r", b"cf:q", versions=2, include_timestamp=True) == [(b"v4", 4), (b"v3", 3)]
    assert t.row(b"r", timestamp=3) == {b"cf:q": b"v2"}  # happybase: strictly older than timestamp
    assert list(t.scan(time_range=(2, 4)))[0][1] == {b"cf:q": b"v3"}
    t.delete_version(b"r", b"cf:q", 4)
    assert t.cells(b"r", b"cf:q", versions=10) == [b"v3", b"v2", b"v1"]
    t.delete(b"r", columns=[b"cf:q"], timestamp=2)
    assert t.cells(b"r", b"cf:q", versions=10) == [b"v3"]
    t.flush()
    t.compact()
    assert t.cells(b"r", b"cf:q", versions=10) == [b"v3"]
    t.delete(b"r")
    assert t.row(b"r") == {}


def test_ttl_expires_cells_on_read_and_compaction(conn):
    t = conn.create_table("ttl", {"cf": {"ttl": 60}})
    now = int(time.time() * 1000)
    t.put(b"old", {b"cf:q": b"x"}, timestamp=now - 120_000)
    t.put(b"new", {b"cf:q": b"y"}, timestamp=now)
    assert [k for k, _ in t.scan()] == [b"new"]
    t.flush()
    t.compact()
    region = t._regions[0]
    (sf,) = region.stores["cf"].files
    assert sf.reader.info.cell_count == 1  # the expired cell is gone from disk


def test_counters_and_batches(conn):
    t = conn.create_table("c", {"cf": {}})
    assert t.counter_get(b"r", b"cf:hits") == 0
    assert t.counter_inc(b"r", b"cf:hits") == 1
    assert t.counter_inc(b"r", b"cf:hits", 10) == 11
    assert t.counter_dec(b"r", b"cf:hits", 2) == 9
    assert t.row(b"r")[b"cf:hits"] == struct.pack(">q", 9)
    t.put(b"s", {b"cf:x": b"abc"})
    with pytest.raises(InvalidArgument, match="not an 8-byte counter"):
        t.counter_get(b"s", b"cf:x")
    with pytest.raises(RuntimeError):
        with t.batch(transaction=True) as b:
            b.put(b"tx", {b"cf:x": b"1"})
            raise RuntimeError("abort")
    assert t.row(b"tx") == {}
    with t.batch(batch_size=2) as b:
        for i in range(5):
            b.put(b"k%d" % i, {b"cf:x": b"%d" % i})
        b.delete(b"k0")
    assert [k for k, _ in t.scan(row_prefix=b"k")] == [b"k1", b"k2", b"k3", b"k4"]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda t: t.put("str-row", {b"cf:x": b"1"}), "row key must be bytes"),
        (lambda t: t.put(b"", {b"cf:x": b"1"}), "must not be empty"),
        (lambda t: t.put(b"r", {b"cf": b"1"}), "needs a qualifier"),
        (lambda t: t.put(b"r", {b"zz:x": b"1"}), "no column family b'zz'"),
        (lambda t: t.put(b"r", {b"cf:x": 5}), "value of b'cf:x' must be bytes"),
        (lambda t: t.put(b"r", {b"cf:x": b"1"}, timestamp=-1), "timestamp"),
        (lambda t: t.put(b"r", [b"cf:x"]), "must be a dict"),
        (lambda t: t.cells(b"r", b"cf:x", versions=0), "versions"),
    ],
)
def test_bad_input_is_named_and_stores_nothing(conn, call, message):
    t = conn.create_table("bad", {"cf": {}})
    t.put(b"keep", {b"cf:x": b"1"})
    with pytest.raises(InvalidArgument, match=message):
        call(t)
    assert list(t.scan()) == [(b"keep", {b"cf:x": b"1"})]


def test_split_on_request_and_automatically(conn):
    t = conn.create_table("s", {"cf": {"block_size": 1024}}, settings={"max_filesize": 40_000, "memstore_flush_size": 30_000})
    expected = {}
    for i in range(3000):
        key = struct.pack(">I", i * 7919 % 3001)
        expected[key] = {b"cf:v": b"x" * 20 + key}
        t.put(key, expected[key])
    assert len(t.regions()) > 1  # split automatically past max_filesize
    before = len(t.regions())
    t.split(struct.pack(">I", 1500) + b"!")
    assert len(t.regions()) == before + 1 or len(t.regions()) == before  # already split there is fine
    t.split()
    assert len(t.regions()) > before
    assert dict(t.scan()) == expected
    t.check()


def test_reopen_replays_the_wal(tmp_path):
    root = str(tmp_path / "root")
    with storage.connect(root) as c:
        t = c.create_table("w", {"cf": {}}, split_keys=[b"m"])
        t.put(b"a", {b"cf:x": b"1"})
        t.flush()
        t.put(b"z", {b"cf:x": b"2"})  # only in the WAL and memstore
    with storage.connect(root) as c:
        assert dict(c.table("w").scan()) == {b"a": {b"cf:x": b"1"}, b"z": {b"cf:x": b"2"}}


def test_a_second_writer_process_is_locked_out(tmp_path):
    root = str(tmp_path / "root")
    with storage.connect(root) as c:
        c.create_table("l", {"cf": {}})
        code = (
            "import storage, sys\n"
            f"c = storage.connect({root!r})\n"
            "try:\n    c.table('l')\nexcept storage.TableLocked as e:\n    print('LOCKED', e); sys.exit(3)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
        assert out.returncode == 3, out.stderr
        assert "locked by another writer" in out.stdout
        # a read-only connection takes no lock
        code_ro = (
            "import storage\n"
            f"c = storage.connect({root!r}, read_only=True)\n"
            "print(len(list(c.table('l').scan())))\n"
        )
        out = subprocess.run([sys.executable, "-c", code_ro], capture_output=True, text=True, cwd=REPO)
        assert out.returncode == 0 and out.stdout.strip() == "0", out.stderr
    with storage.connect(root) as c:
        c.table("l")  # free again once the first writer closed


def test_the_same_process_cannot_open_a_table_twice_for_writing(tmp_path):
    root = str(tmp_path / "root")
    c1 = storage.connect(root)
    c1.create_table("l", {"cf": {}})
    c2 = storage.connect(root)
    with pytest.raises(TableLocked):
        c2.table("l")
    c1.close()
    c2.table("l")
    c2.close()


def test_tables_on_a_non_local_pyarrow_filesystem():
    c = storage.connect("mock:///root")
    t = c.create_table("m", {"cf": {"compression": "zstd"}}, split_keys=[b"m"])
    t.put(b"a", {b"cf:x": b"1"})
    t.put(b"z", {b"cf:x": b"2"})
    t.flush()
    t.put(b"b", {b"cf:x": b"3"})
    t.compact()
    t.split(b"c")
    assert dict(t.scan()) == {b"a": {b"cf:x": b"1"}, b"b": {b"cf:x": b"3"}, b"z": {b"cf:x": b"2"}}
    assert len(t.regions()) == 3


def test_scan_batches_rows_and_cells(table):
    rows = pa.Table.from_batches(list(table.scan_batches(columns=[b"cf:n", b"meta:len"])))
    assert rows.column_names == ["key", "cf:n", "meta:len"]
    assert rows.column("key").to_pylist()[:2] == [b"apple", b"banana"]
    cells = pa.Table.from_batches(list(table.scan_batches(output="cells", row_prefix=b"kiwi")))
    assert cells.schema == storage.CELL_SCHEMA
    assert cells.num_rows == 3
    with pytest.raises(InvalidArgument, match="output"):
        list(table.scan_batches(output="tuples"))


def test_limit_counts_rows_that_have_the_requested_columns(conn):
    t = conn.create_table("lim", {"cf": {}})
    for i in range(10):
        t.put(b"r%d" % i, {b"cf:a" if i % 2 else b"cf:b": b"%d" % i})
    for reverse in (False, True):
        rows = pa.Table.from_batches(list(t.scan_batches(columns=[b"cf:a"], limit=3, reverse=reverse)))
        expected = [b"r1", b"r3", b"r5"] if not reverse else [b"r9", b"r7", b"r5"]
        assert rows.column("key").to_pylist() == expected


def test_scan_batches_honours_batch_size_without_splitting_rows(table):
    rows = list(table.scan_batches(columns=[b"cf:n"], batch_size=2))
    assert all(b.num_rows <= 2 for b in rows) and sum(b.num_rows for b in rows) == 7
    cells = list(table.scan_batches(output="cells", batch_size=4))
    keys = [b.column(0).to_pylist() for b in cells]
    # each row's three cells stay in one batch even though 3 + 3 > 4
    assert all(len(set(k)) == len(k) // 3 for k in keys)
    assert sum(len(k) for k in keys) == 21
    counters = table.read_counters()
    assert set(counters) >= {"blocks_read", "cache_hits", "extra_header_reads"}
    with pytest.raises(InvalidArgument, match="batch_size"):
        list(table.scan_batches(batch_size=0))


def test_scan_metrics_count_rows_cells_blocks_and_cache(conn):
    from storage.scanner import ScanMetrics

    t = conn.create_table("met", {"cf": {"block_size": 512}}, split_keys=[b"r5"])
    for i in range(100):
        t.put(b"r%02d" % i, {b"cf:a": b"x" * 30, b"cf:b": b"y"})
    t.flush()
    m = ScanMetrics()
    rows = sum(b.num_rows for b in t.scan_batches(columns=[b"cf:a"], metrics=m))
    assert rows == 100
    assert (m.rows_scanned, m.cells_scanned, m.regions_scanned) == (100, 200, 2)
    assert m.blocks_read_from_disk > 2 and m.bytes_read_from_disk > 100 * 30
    again = ScanMetrics()
    list(t.scan_batches(columns=[b"cf:a"], metrics=again))
    assert again.blocks_read_from_disk == 0 and again.blocks_read_from_cache == m.blocks_read_from_disk
    filtered = ScanMetrics()
    list(t.scan_batches(filter="PrefixFilter ('r1') AND ValueFilter (=, 'binary:nope')", metrics=filtered, output="cells"))
    assert filtered.rows_filtered == 10 and filtered.rows_scanned == 0
    assert filtered.to_dict()["ROWS_FILTERED"] == 10
