"""Reads of a live table: read points, torn rows, scans across flushes, compactions,
splits and table deletion, on real files (and a real server process for the
remote scanners).  Every concurrent test is bounded to a couple of seconds."""

from __future__ import annotations

import os
import random
import struct
import threading
import time

import pyarrow as pa
import pytest

import storage
from connector import TableInputFormat
from storage.errors import StorageError
from storage.read.family_join import FamilyJoin
from storage.read.row_scan import CELLS
from storage.table.parallel import ParallelScanner
from storage.server.process import ServerProcess

ROWS = 400


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


def _fill(table, rows=ROWS, value=b"v"):
    with table.batch() as b:
        for i in range(rows):
            b.put(_key(i), {b"a:x": value + b"%d" % i, b"b:y": value + b"%d" % i})


@pytest.fixture
def conn(tmp_path):
    c = storage.connect(str(tmp_path / "root"), block_cache_size=0)
    yield c
    c.close()


def _table(conn, name="t", **settings):
    return conn.create_table(
        name, {"a": {"block_size": 256}, "b": {"block_size": 256}}, settings={"wal_sync": "none", **settings}
    )


def _batch_rows(it):
    out = {}
    for batch in it:
        for row in batch.to_pylist():
            out[row["key"]] = row
    return out


# -- torn rows ----------------------------------------------------------------------
def test_a_put_to_two_families_is_seen_whole_on_every_path(conn):
    table = _table(conn, memstore_flush_size=64 << 10)
    rows = [_key(i) for i in range(20)]
    _fill(table, 20, b"0-")
    stop = time.monotonic() + 1.5
    errors = []

    def writer():
        n = 0
        while time.monotonic() < stop:
            n += 1
            value = b"%d-" % n
            with table.batch() as b:
                for i, row in enumerate(rows):
                    b.put(row, {b"a:x": value + b"%d" % i, b"b:y": value + b"%d" % i})
            if n % 20 == 0:
                table.flush()

    def check(pairs, how):
        for row, data in pairs:
            if data.get(b"a:x") != data.get(b"b:y"):
                errors.append((how, row, data))

    t = threading.Thread(target=writer)
    t.start()
    scans = 0
    try:
        while time.monotonic() < stop:
            check(table.scan(), "scan")
            check(table.scan(path="cell"), "cell")
            check(table.scan(batch_size=7, reverse=True), "reverse")
            for batch in table.scan_batches(columns=[b"a:x", b"b:y"], batch_size=5):
                check([(r["key"], {b"a:x": r["a:x"], b"b:y": r["b:y"]}) for r in batch.to_pylist()], "batches")
            check([(rows[3], table.row(rows[3]))], "row")
            scans += 1
    finally:
        t.join()
    assert scans > 3
    assert not errors, errors[:3]


# -- read points ----------------------------------------------------------------------
def test_writes_and_flushes_after_a_scan_opens_stay_invisible_to_it(conn):
    table = _table(conn)
    _fill(table)
    table.flush()
    table.split(_key(200))  # two regions: the scan reaches the second one late
    for path in ("batch", "cell"):
        scan = table.scan(batch_size=10, path=path) if path == "cell" else table.scan_batches(columns=[b"a:x", b"b:y"], batch_size=10)
        first = next(iter(scan))
        # after the scan opened: overwrite a row of the second region, add one, flush both
        table.put(_key(300), {b"a:x": b"new", b"b:y": b"new"})
        table.put(_key(ROWS + 5), {b"a:x": b"new", b"b:y": b"new"})
        table.flush()
        if path == "cell":
            seen = dict([first, *scan])
            assert seen[_key(300)] == {b"a:x": b"v300", b"b:y": b"v300"}
        else:
            seen = _batch_rows([first, *scan])
            assert seen[_key(300)]["a:x"] == b"v300"
        assert _key(ROWS + 5) not in seen and len(seen) == ROWS
        table.delete(_key(ROWS + 5))
        table.put(_key(300), {b"a:x": b"v300", b"b:y": b"v300"})


# -- scans across compaction -----------------------------------------------------------------
@pytest.mark.parametrize("path", ["batch", "cell"])
def test_a_scan_opened_before_a_major_compaction_returns_what_it_would_have(conn, path):
    table = _table(conn)
    for round_ in range(3):  # three files per family, with overwritten versions
        _fill(table, value=b"r%d-" % round_)
        table.flush()
    table.delete(_key(7))
    expected = list(table.scan())
    region_dir = os.path.join(conn.root, "t", "regions", table.regions()[0]["id"], "a")
    before = set(os.listdir(region_dir))
    scan = table.scan(batch_size=16, path=path)
    got = [next(scan)]
    table.compact()
    after = set(os.listdir(region_dir))
    assert before <= after and len(after) == len(before) + 1  # merged files wait for the scan
    got += list(scan)
    assert got == expected
    assert len(os.listdir(region_dir)) == 1  # the scan ended: its retired files are gone
    assert list(table.scan()) == expected


def test_a_scan_survives_delete_table_and_the_name_is_free_at_once(conn):
    table = _table(conn)
    _fill(table)
    table.flush()
    scan = table.scan_batches(columns=[b"a:x", b"b:y"], batch_size=16)
    first = next(scan)
    conn.delete_table("t")
    assert b"t" not in conn.tables()
    again = _table(conn)  # the name is reusable while the old scan still reads
    assert list(again.scan()) == []
    seen = _batch_rows([first, *scan])
    assert len(seen) == ROWS
    assert not [n for n in os.listdir(conn.root) if n.startswith(".deleted-")]


# -- scans across splits -----------------------------------------------------------------
@pytest.mark.parametrize("path", ["batch", "cell", "batches"])
def test_a_scan_under_way_sees_every_row_of_a_region_split_ahead_of_it(conn, path):
    table = _table(conn)
    _fill(table)
    table.flush()
    for i in range(0, ROWS, 3):  # a third of the rows unflushed, overwritten
        table.put(_key(i), {b"a:x": b"u%d" % i, b"b:y": b"u%d" % i})
    expected = list(table.scan())
    parent = os.path.join(conn.root, "t", "regions", table.regions()[0]["id"])
    if path == "batches":
        scan = table.scan_batches(columns=[b"a:x", b"b:y"], batch_size=10)
        first = next(scan)
    else:
        scan = table.scan(batch_size=10, path=path)
        first = next(scan)
    table.split(_key(250))
    table.split(_key(320))
    assert len(table.regions()) == 3 and os.path.isdir(parent)
    if path == "batches":
        seen = _batch_rows([first, *scan])
        assert sorted(seen) == [k for k, _ in expected]
        assert [seen[k]["a:x"] for k, _ in expected] == [d[b"a:x"] for _, d in expected]
    else:
        assert [first, *scan] == expected
    assert not os.path.exists(parent)  # the split's parent went when the scan ended


def test_parallel_scanner_sees_every_row_when_regions_split_during_the_scan(conn):
    table = _table(conn)
    _fill(table)
    table.flush()
    table.split(_key(100))
    scanner = ParallelScanner(table, threads=2)
    it = scanner.scan(columns=[b"a:x", b"b:y"], batch_size=8, output="rows")
    first = next(it)
    table.put(_key(ROWS + 1), {b"a:x": b"late", b"b:y": b"late"})  # after the read point
    table.put(_key(350), {b"a:x": b"late", b"b:y": b"late"})
    table.split(_key(200))
    table.split(_key(300))
    seen = _batch_rows([first, *it])
    assert sorted(seen) == [_key(i) for i in range(ROWS)]
    assert seen[_key(350)]["a:x"] == b"v350"


# -- closed means closed -----------------------------------------------------------------
def test_calls_on_a_deleted_table_or_a_closed_connection_raise_one_line(tmp_path):
    conn = storage.connect(str(tmp_path / "root"))
    table = _table(conn)
    _fill(table, 5)
    conn.delete_table("t")
    calls = [
        lambda t: t.row(_key(1)), lambda t: list(t.scan()), lambda t: list(t.scan(path="cell")),
        lambda t: list(t.scan_batches()), lambda t: t.put(_key(1), {b"a:x": b"1"}), lambda t: t.regions(),
        lambda t: t.rows([_key(1)]), lambda t: t.cells(_key(1), b"a:x"), lambda t: t.families(),
        lambda t: t.flush(), lambda t: t.scanner(),
    ]
    for call in calls:
        with pytest.raises(StorageError, match=r"^table t was deleted$"):
            call(table)
    other = _table(conn, "u")
    conn.close()
    for call in calls:
        with pytest.raises(StorageError, match=r"^table u is closed \(its connection to .* was closed\)$"):
            call(other)


# -- everything at once ---------------------------------------------------------------------
def test_concurrent_writers_readers_flushes_compactions_and_splits(conn, monkeypatch):
    """Writers, flushes, compactions and splits under readers of both families: every path
    (the cells, scan()'s dicts, named columns and a filter on one family's column, the last
    three joining the families' row merges: storage/read/family_join.py) sees every row
    acknowledged before it opened, whole.  A third writer puts and deletes rows of its own
    over and over, so memstores and flushed files hold puts among delete markers."""
    joined = []
    chunk = FamilyJoin.chunk

    def counted(self, lo, hi, reverse):
        out = chunk(self, lo, hi, reverse)
        if out is not CELLS:
            joined.append(self.plan is not None)
        return out

    monkeypatch.setattr(FamilyJoin, "chunk", counted)
    table = _table(conn, memstore_flush_size=32 << 10, compaction_threshold=3)
    acked: set[bytes] = set()
    acked_lock = threading.Lock()
    stop = time.monotonic() + 2.5
    errors: list = []

    def writer(w: int):
        n = 0
        while time.monotonic() < stop:
            row = struct.pack(">HI", (n * 7919 + w * 104729) % 65536, w * 1_000_000 + n)
            table.put(row, {b"a:x": b"%d" % n, b"b:y": b"%d" % n})
            with acked_lock:
                acked.add(row)
            n += 1

    churned: dict[bytes, bytes | None] = {}  # the churning writer's rows: last value put, None: deleted

    def churner():
        n = 0
        # at least a put, a second put and a delete even if the thread starts late or waits out a
        # split (one CI run saw a single put in the 2.5 s, and the check below had nothing to check)
        while time.monotonic() < stop or n < 3:
            row = struct.pack(">HI", (n % 50) * 1301 % 65536, 9_000_000 + n % 50)
            ts = (1 << 50) + n  # its own increasing timestamps: a put after a delete is newer
            if n % 3 == 2:
                table.delete(row, timestamp=ts)
                churned[row] = None
            else:
                table.put(row, {b"a:x": b"%d" % n, b"b:y": b"%d" % n}, timestamp=ts)
                churned[row] = b"%d" % n
            n += 1

    def maintainer():
        step = 0
        while time.monotonic() < stop:
            step += 1
            if step % 3 == 0:
                table.compact()
            elif step % 3 == 1:
                table.split()
            else:
                table.flush()
            time.sleep(0.05)

    def reader(path: str):
        while time.monotonic() < stop:
            with acked_lock:
                before = set(acked)
            seen = set()
            if path in ("batches", "filtered"):
                # the filter keeps every row (the values are digits), testing family b's column
                flt = "SingleColumnValueFilter ('b', 'y', !=, 'binary:none')" if path == "filtered" else None
                for batch in table.scan_batches(columns=[b"a:x", b"b:y"], batch_size=100, filter=flt):
                    for r in batch.to_pylist():
                        if r["a:x"] != r["b:y"]:
                            errors.append(("torn", path, r))
                        seen.add(r["key"])
            else:
                for row, data in table.scan(path=path, batch_size=100):
                    if data.get(b"a:x") != data.get(b"b:y"):
                        errors.append(("torn", path, row, data))
                    seen.add(row)
            missed = before - seen
            if missed:
                errors.append(("missed", path, len(missed)))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    threads += [threading.Thread(target=maintainer), threading.Thread(target=churner)]
    threads += [threading.Thread(target=reader, args=(p,)) for p in ("batch", "cell", "batches", "filtered")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    assert joined.count(True) > 3 and joined.count(False) > 3, (joined.count(True), joined.count(False))
    assert len(table.regions()) > 1 and len(acked) > 100
    present = {row: value for row, value in churned.items() if value is not None}
    assert present and len(present) < len(churned)
    assert {row for row, _ in table.scan()} == acked | set(present)
    for row, data in table.scan(columns=[b"a:x", b"b:y"]):
        if row in churned:
            assert data == {b"a:x": present[row], b"b:y": present[row]}


# -- remote scanners and the record reader over a server ---------------------------------------------
@pytest.fixture
def server_root(tmp_path):
    root = str(tmp_path / "srv")
    with storage.connect(root) as c:
        table = _table(c)
        _fill(table)
        table.flush()
    return root


@pytest.mark.parametrize("mode", ["stream", "rpc"])
def test_remote_scanners_see_every_row_across_a_split(server_root, mode):
    with ServerProcess(server_root) as server, storage.connect(server.location) as remote:
        table = remote.table("t")
        for i in range(0, ROWS, 4):
            table.put(_key(i), {b"a:x": b"u%d" % i, b"b:y": b"u%d" % i})
        scan = table.scan_batches(columns=[b"a:x", b"b:y"], batch_size=10, mode=mode, caching=10)
        first = next(scan)
        table.split(_key(150))
        table.split(_key(300))
        table.put(_key(ROWS + 1), {b"a:x": b"late", b"b:y": b"late"})
        seen = _batch_rows([first, *scan])
        assert sorted(seen) == [_key(i) for i in range(ROWS)]
        assert all(seen[_key(i)]["a:x"] == (b"u%d" % i if i % 4 == 0 else b"v%d" % i) for i in range(ROWS))


def test_remote_tables_of_a_deleted_table_or_a_closed_connection_raise_one_line(server_root):
    with ServerProcess(server_root) as server:
        remote = storage.connect(server.location)
        table = remote.table("t")
        assert table.row(_key(1)) == {b"a:x": b"v1", b"b:y": b"v1"}
        remote.delete_table("t")
        with pytest.raises(storage.TableNotFound, match=r"^table t does not exist"):
            table.row(_key(1))
        with pytest.raises(storage.TableNotFound, match=r"^table t does not exist"):
            list(table.scan())
        remote.close()
        for call in (lambda: table.row(_key(1)), lambda: list(table.scan_batches()), lambda: remote.tables()):
            with pytest.raises(StorageError, match=r"^connection (to \S+ )?is closed$"):
                call()


def test_record_reader_over_a_server_sees_every_row_across_a_split(server_root):
    with ServerProcess(server_root) as server, storage.connect(server.location) as remote:
        fmt = TableInputFormat({"regionscan.root": server.location, "hbase.mapreduce.inputtable": "t",
                                "hbase.mapreduce.scan.cachedrows": "10"})
        (split,) = fmt.get_splits()
        reader = fmt.create_record_reader(split)
        assert reader.next_key_value()
        keys = [reader.get_current_key()]
        remote.table("t").split(_key(200))
        while reader.next_key_value():
            keys.append(reader.get_current_key())
        reader.close()
        assert keys == [_key(i) for i in range(ROWS)]


# -- the memstore read side gives what the files give ---------------------------------------
@pytest.mark.parametrize("options", [
    {"output": "rows"},
    {"output": "rows", "columns": [b"a:x", b"b"], "include_timestamp": True},
    {"output": "rows", "columns": [b"a"], "reverse": True},
    {"output": "cells", "max_versions": 3},
    {"output": "cells", "reverse": True, "time_range": (0, 150)},
    {"output": "rows", "columns": [b"a:x"], "limit": 37},
])
def test_unflushed_cells_scan_like_the_same_cells_flushed(conn, options):
    live, flushed = _table(conn, "live"), _table(conn, "flushed")
    rng = random.Random(7)
    writes = []
    for i in range(600):
        row = _key(rng.randrange(300))
        data = {b"a:x": b"x%d" % i, b"b:%d" % (i % 3): b"y" * (i % 50)}
        writes.append((row, data, 100 + i % 90))
    for n, (row, data, ts) in enumerate(writes):
        for t in (live, flushed):
            t.put(row, data, timestamp=ts)
            if n % 7 == 0:
                t.delete(row, [b"b:1"], timestamp=ts)
        if n == 300:
            live.flush()  # half the writes in a file, half in the memstore
    flushed.flush()  # every cell in one file (a flush, unlike a compaction, drops no version)
    got = list(live.scan_batches(batch_size=50, **options))
    want = list(flushed.scan_batches(batch_size=50, **options))
    assert pa.Table.from_batches(got).to_pylist() == pa.Table.from_batches(want).to_pylist()
    assert sum(b.num_rows for b in got) > 0


# -- memstore rows merged as rows into dense file rows --------------------------------------
@pytest.mark.parametrize("layout", ["interleaved", "tail", "flushed"])
def test_memstore_rows_merged_into_file_rows_give_the_flushed_rows(tmp_path, monkeypatch, layout):
    from storage.kernels.resolve_rows import merges_natively
    from storage.read.row_scan import CELLS, RowMerge

    chunks = []  # what each row-merge chunk gave: rows, or CELLS (sent to the cell path)
    chunk = RowMerge.chunk

    def recorded(self, *args):
        chunks.append(chunk(self, *args))
        return chunks[-1]

    monkeypatch.setattr(RowMerge, "chunk", recorded)
    resolved = []  # chunks sent to the row resolution
    resolve = RowMerge._resolved

    def resolving(self, *args):
        resolved.append(args[:2])
        return resolve(self, *args)

    monkeypatch.setattr(RowMerge, "_resolved", resolving)
    rows = 3000
    late = {"interleaved": lambda i: i % 4 == 3, "tail": lambda i: i >= rows * 3 // 4, "flushed": lambda i: False}[layout]
    splits = [_key(1000), _key(2000)]
    with storage.connect(str(tmp_path / "root")) as conn:
        tables = {}
        for name in ("live", "flushed"):
            table = conn.create_table(name, {"cf": {}}, split_keys=splits, settings={"wal_sync": "none"})
            with table.batch(timestamp=5) as b:
                for i in range(rows):
                    if name == "flushed" or not late(i):
                        b.put(_key(i), {b"cf:n": b"%d" % i, b"cf:s": b"s" * (i % 40)})
            table.compact(major=True)
            tables[name] = table
        with tables["live"].batch(timestamp=5) as b:
            for i in range(rows):
                if late(i):
                    b.put(_key(i), {b"cf:n": b"%d" % i, b"cf:s": b"s" * (i % 40)})
        for options in [
            {"columns": [b"cf:n", b"cf:s"]},
            {"columns": [b"cf:s"], "include_timestamp": True, "reverse": True},
            {"columns": [b"cf:n"], "row_start": _key(1500), "row_stop": _key(2700), "limit": 333},
            {"columns": [b"cf:n", b"cf:s"], "filter": "SingleColumnValueFilter ('cf', 'n', =, 'binary:2999')"},
        ]:
            want = pa.Table.from_batches(list(tables["flushed"].scan_batches(batch_size=700, **options)))
            got = pa.Table.from_batches(list(tables["live"].scan_batches(batch_size=700, **options)))
            assert got.to_pylist() == want.to_pylist()
            assert got.num_rows > 0
        fmt = TableInputFormat({"regionscan.root": str(tmp_path / "root"), "hbase.mapreduce.inputtable": "live",
                                "hbase.mapreduce.scan.columns": "cf:n cf:s", "regionscan.pin.register": "false"})
        keys = []
        for split in fmt.get_splits():
            with fmt.create_batch_reader(split) as reader:
                keys.extend(k for batch in reader for k in batch.column("key").to_pylist())
        assert keys == [_key(i) for i in range(rows)]
    if layout != "flushed":  # a flushed table streams its one file; the live ones merge rows
        assert chunks and all(c is not CELLS for c in chunks)
    # rows of a memstore between a file's go to the compiled merge where it is built; a
    # memstore of keys past the file's is laid after it as slices, never resolved
    assert bool(resolved) == (layout == "interleaved" and merges_natively(2))


# -- re-puts and deletes in one source: its puts pivoted for the columns asked for -------------
@pytest.mark.parametrize("variant", ["memstore", "file"])
def test_re_puts_and_deletes_in_one_source_read_as_the_table_compacted(tmp_path, monkeypatch, variant):
    from storage.region import row_pieces

    pivoted = []  # the columns each source of puts among markers was pivoted for
    dense_puts = row_pieces.dense_puts

    def recorded(cells, at, qualifiers=None):
        pivoted.append(tuple(qualifiers or ()))
        return dense_puts(cells, at, qualifiers)

    monkeypatch.setattr(row_pieces, "dense_puts", recorded)
    rows = 2000
    with storage.connect(str(tmp_path / "root")) as conn:
        tables = {}
        for name in ("live", "compacted"):
            # small blocks: a flush of the re-puts and deletes writes several cell blocks a region
            table = conn.create_table(name, {"cf": {"block_size": 4096}}, split_keys=[_key(700)],
                                      settings={"wal_sync": "none"})
            with table.batch(timestamp=5) as b:
                for i in range(rows):
                    b.put(_key(i), {b"cf:a": b"a%d" % i, b"cf:b": b"b" * (i % 30), b"cf:c": b"c%d" % i})
            table.compact(major=True)
            tables[name] = table
            with table.batch(timestamp=7) as b:
                for i in range(1, rows, 16):  # deleted, then column b put again after the delete (below)
                    b.delete(_key(i))
            with table.batch(timestamp=9) as b:
                for i in range(rows):
                    if i % 8 == 3:  # put again: all columns
                        b.put(_key(i), {b"cf:a": b"A%d" % i, b"cf:b": b"B", b"cf:c": b"C%d" % i})
                    elif i % 8 == 5:  # put again: only column c
                        b.put(_key(i), {b"cf:c": b"only-c%d" % i})
                    elif i % 8 == 7:  # deleted
                        b.delete(_key(i))
                    elif i % 16 == 1:
                        b.put(_key(i), {b"cf:b": b"after%d" % i})
            if name == "compacted":
                table.compact(major=True)
            elif variant == "file":
                table.flush()
        for options in [
            {"columns": [b"cf:a", b"cf:b", b"cf:c"]},
            {"columns": [b"cf:a"]},  # the rows whose new puts are all of cf:c keep their old cf:a
            {"columns": [b"cf:b"], "include_timestamp": True, "reverse": True},
            {"columns": [b"cf:a", b"cf:c"], "row_start": _key(500), "row_stop": _key(1500), "limit": 300},
            {"columns": [b"cf:a"], "filter": "SingleColumnValueFilter ('cf', 'c', =, 'binary:only-c5')"},
            {},  # the whole family
        ]:
            want = pa.Table.from_batches(list(tables["compacted"].scan_batches(batch_size=300, **options)))
            got = pa.Table.from_batches(list(tables["live"].scan_batches(batch_size=300, **options)))
            assert got.to_pylist() == want.to_pylist(), options
            assert got.num_rows > 0
        assert list(tables["live"].scan(columns=[b"cf:a", b"cf:c"])) == list(tables["compacted"].scan(columns=[b"cf:a", b"cf:c"]))
        a_only = {k: v for k, v in tables["live"].scan(columns=[b"cf:a"])}
        assert a_only[_key(5)] == {b"cf:a": b"a5"} and _key(7) not in a_only and _key(1) not in a_only
        assert tables["live"].row(_key(1)) == {b"cf:b": b"after1"}
    # every source of puts among markers pivoted, a read of one column for that column alone
    assert {(b"a", b"b", b"c"), (b"a",), (b"b",), (b"a", b"c")} <= set(pivoted)


# -- rows scans under a writer take the row-run path at their read point ----------------------
def test_a_rows_scan_under_a_writer_sees_its_read_point_through_the_row_run_path(tmp_path, monkeypatch):
    from storage.memstore.runs import MemStoreView

    taken = []  # per memstore row form asked for: (given, built from cells filtered to the read point)
    row_run = MemStoreView.row_run

    def recorded(self):
        out = row_run(self)
        taken.append((out is not None, any(run.seqs is None for run in self._live())))
        return out

    monkeypatch.setattr(MemStoreView, "row_run", recorded)
    with storage.connect(str(tmp_path / "root")) as conn:
        table = conn.create_table("w", {"cf": {}}, split_keys=[_key(600)], settings={"wal_sync": "none"})
        with table.batch() as b:
            for i in range(0, 1200, 2):
                b.put(_key(i), {b"cf:n": b"%d" % i})
        table.flush()
        with table.batch() as b:
            for i in range(1, 1200, 4):
                b.put(_key(i), {b"cf:n": b"%d" % i})  # unflushed rows between the file's
        base = {_key(i) for i in range(0, 1200, 2)} | {_key(i) for i in range(1, 1200, 4)}
        acked = [0]  # writer rows put so far: rows 3, 7, 11, ... in that order
        stop = threading.Event()

        def writer():
            n = 0
            while not stop.is_set() and n < 300:
                table.put(_key(3 + 4 * n), {b"cf:n": b"w%d" % n})
                n += 1
                acked[0] = n

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            deadline = time.monotonic() + 2.0
            scans = 0
            while time.monotonic() < deadline and (scans < 5 or thread.is_alive()):
                before = acked[0]
                rows = _batch_rows(table.scan_batches(columns=[b"cf:n"], batch_size=97))
                after = acked[0]
                written = sorted((int.from_bytes(k, "big") - 3) // 4 for k in set(rows) - base)
                # a read point shows a prefix of the writer's rows: every one acknowledged before the scan
                assert written == list(range(len(written))) and before <= len(written) <= after + 1
                assert base <= set(rows) and all(rows[_key(3 + 4 * n)]["cf:n"] == b"w%d" % n for n in written)
                scans += 1
        finally:
            stop.set()
            thread.join()
        assert scans >= 5 and all(given for given, _ in taken)
        # for certain: writes into the second region once the scan is under way in the first
        taken.clear()
        scan = iter(table.scan_batches(columns=[b"cf:n"], batch_size=97))
        first = next(scan)
        table.put(_key(1101), {b"cf:n": b"changed"})
        table.put(_key(5000), {b"cf:n": b"new"})
        rows = _batch_rows([first, *scan])
        assert rows[_key(1101)]["cf:n"] == b"1101" and _key(5000) not in rows and base <= set(rows)
    assert taken and all(given for given, _ in taken) and taken[-1][1]  # rows built at the read point


def test_a_rows_scan_merging_memstore_rows_survives_a_flush_a_compaction_and_a_split(tmp_path, monkeypatch):
    """The row-merge path (memstore rows merged into dense file rows) with a
    flush, a major compaction and a split between its batches returns the rows
    of its read point: the chunks after them still read the leased files and
    the memstore maps the scan opened with."""
    from storage.read.row_scan import CELLS, RowMerge

    chunks = []
    chunk = RowMerge.chunk

    def recorded(self, *args):
        chunks.append(chunk(self, *args))
        return chunks[-1]

    monkeypatch.setattr(RowMerge, "chunk", recorded)
    with storage.connect(str(tmp_path / "root")) as conn:
        table = conn.create_table("m", {"cf": {}}, split_keys=[_key(1500)], settings={"wal_sync": "none"})
        with table.batch() as b:
            for i in range(0, 3000, 2):
                b.put(_key(i), {b"cf:n": b"%d" % i})
        table.compact(major=True)
        with table.batch() as b:
            for i in range(1, 3000, 2):
                b.put(_key(i), {b"cf:n": b"%d" % i})  # unflushed rows between the files' rows
        want = {_key(i): b"%d" % i for i in range(3000)}
        scan = table.scan_batches(columns=[b"cf:n"], batch_size=100)
        first = next(scan)
        opened = len(chunks)  # chunks merged before the flush, compaction and split
        for i in range(0, 3000, 3):  # after the read point: overwrites and new rows
            table.put(_key(i), {b"cf:n": b"late"})
        table.put(_key(5000), {b"cf:n": b"late"})
        table.flush()
        table.compact(major=True)
        table.split(_key(700))
        table.split(_key(2200))
        got = _batch_rows([first, *scan])
    assert {k: v["cf:n"] for k, v in got.items()} == want
    assert len(chunks) > opened >= 1 and all(c is not CELLS for c in chunks)
    assert all(chunks[opened:])  # the chunks read after them merged rows too
