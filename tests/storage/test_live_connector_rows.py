"""The connector's partition read of a live table, with its log read straight into rows.

A pinned region replays its unflushed edits from the WAL at every read that
keeps no results; a log of puts of one family in cell order (a quarter of the
rows written again) becomes its row form in one compiled call
(:meth:`storage.memstore.sorted_cells.SortedCells.from_payloads`), any other
log (deletes, several families, writes out of order) is decoded into cells as
before.  These read real tables through the connector's batch reader
(``cacheblocks`` and ``cacheresults`` false: nothing kept between reads), with
the kernels on and off, against the embedded scan of the same open table, and
read a WAL with a torn tail alike both ways.  Tables of hashed keys (salted, and
YCSB's of several widths) are read from their pinned splits while they are
split, flushed and compacted.
"""

from __future__ import annotations

import importlib
import os

import pytest

import storage
from connector import TableInputFormat
from jobs.demo import sample_row, split_keys_for
from storage.memstore import row_runs
from storage.read import row_scan
from storage.region.row_resolve import memstore_items
from storage.wal import arrow_decode

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

ROWS = 2_000
_UNFLUSHED = {"wal_sync": "none", "memstore_flush_size": 1 << 40, "compaction_threshold": 1000}
"""Table settings that keep writes in the memstore and WAL until a test flushes them."""


def _input_format(root: str, name: str, columns: str) -> TableInputFormat:
    """The connector's input format over ``columns``, keeping nothing between reads."""
    return TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": name,
                             "hbase.mapreduce.scan.columns": columns,
                             "hbase.mapreduce.scan.cacheblocks": "false",
                             "regionscan.scan.cacheresults": "false"})


def _split_rows(fmt: TableInputFormat, splits: list) -> list:
    """The rows of ``splits``, each read by its own batch reader, as dicts."""
    rows = []
    for split in splits:
        reader = fmt.create_batch_reader(split)
        for batch in reader:
            rows.extend(batch.to_pylist())
        reader.close()
    return rows


def _connector_rows(root: str, name: str, columns: str) -> list:
    fmt = _input_format(root, name, columns)
    return _split_rows(fmt, fmt.get_splits())


def _embedded_rows(table: storage.Table, columns: list) -> list:
    return [r for b in table.scan_batches(columns=columns, cache_results=False) for r in b.to_pylist()]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """Tables of ROWS rows in 3 regions, compacted, then a second write left in the
    memstore and WAL: ``rewrite`` (every fourth row put again), ``delete`` (every
    fourth row deleted), ``families`` (rows put again in two families) and
    ``unordered`` (the rewrite written in descending key order)."""
    root = str(tmp_path_factory.mktemp("live"))
    conn = storage.connect(root)
    for name in ("rewrite", "delete", "families", "unordered"):
        table = conn.create_table(name, {"cf": {}, "f2": {}}, split_keys=split_keys_for(ROWS, 3), settings=_UNFLUSHED)
        with table.batch(timestamp=1000) as batch:
            for i in range(ROWS):
                key, data = sample_row(i, 40)
                batch.put(key, {**data, b"f2:x": b"x%d" % i})
        table.compact(major=True)
        late = [i for i in range(ROWS) if i % 4 == 3]
        if name == "unordered":
            late.reverse()
        with table.batch(timestamp=2000) as batch:
            for i in late:
                key, data = sample_row(i, 40)
                if name == "delete":
                    batch.delete(key)
                    continue
                data = sample_row(i + 7, 40)[1]
                if name == "families":
                    data[b"f2:x"] = b"y%d" % i
                batch.put(key, data)
    yield root, conn
    conn.close()


def _compacted(conn: storage.Connection, name: str, regions: int) -> storage.Table:
    """A table of one family holding ROWS sample rows at timestamp 1000, major-compacted; what
    is written next stays in its memstore and WAL."""
    table = conn.create_table(name, {"cf": {}}, split_keys=split_keys_for(ROWS, regions), settings=_UNFLUSHED)
    with table.batch(timestamp=1000) as batch:
        for i in range(ROWS):
            batch.put(*sample_row(i, 40))
    table.compact(major=True)
    return table


def _replays_seen(read) -> tuple:
    """``read()``'s result, and for each memstore it read whether it came as the puts' row form
    with the row deletes set aside beside it (``SortedCells.rows_and_markers``)."""
    seen = []

    def spy(memstore, lo, hi):
        both = getattr(memstore, "rows_and_markers", None)
        seen.append(both is not None and both() is not None)
        return memstore_items(memstore, lo, hi)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(row_scan, "memstore_items", spy)
        return read(), seen


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Tables of one family being updated and deleted from, the writes left in the memstore
    and WAL: of every eighth row, one put again and one deleted in one batch at 2000, then a
    second batch at 3000 putting back a deleted row of every sixteen and deleting a rewritten
    one, and a marker for a row that was never written; ``mixed_unordered`` the same written
    in descending key order; ``deleted`` only deletes (every fourth row, and a row never
    written).  Returns the root, the connection and each table's rows as a read sees them."""
    root = str(tmp_path_factory.mktemp("mixed"))
    conn = storage.connect(root)
    for name in ("mixed", "mixed_unordered"):
        table = _compacted(conn, name, 3)
        order = (lambda xs: list(reversed(xs))) if name == "mixed_unordered" else list
        with table.batch(timestamp=2000) as batch:
            for i in order([i for i in range(ROWS) if i % 8 in (3, 7)]):
                key, _ = sample_row(i, 40)
                if i % 8 == 7:
                    batch.delete(key)
                else:
                    batch.put(key, sample_row(i + 7, 40)[1])
        with table.batch(timestamp=3000) as batch:
            for i in order([i for i in range(ROWS) if i % 16 in (3, 7)]):
                key, _ = sample_row(i, 40)
                if i % 16 == 7:
                    batch.put(key, {b"cf:s": b"back-%d" % i})
                else:
                    batch.delete(key)
            batch.delete(b"\xff\xff\xff\xff-never")
    table = _compacted(conn, "deleted", 3)
    with table.batch(timestamp=2000) as batch:
        for i in range(3, ROWS, 4):
            batch.delete(sample_row(i, 40)[0])
        batch.delete(b"\xff\xff\xff\xff-never")
    mixed_rows = {}
    for i in range(ROWS):
        key, data = sample_row(i, 40)
        if i % 16 == 3 or (i % 8 == 7 and i % 16 != 7):
            continue
        if i % 16 == 7:
            mixed_rows[key] = {b"cf:s": b"back-%d" % i}
        elif i % 8 == 3:
            mixed_rows[key] = sample_row(i + 7, 40)[1]
        else:
            mixed_rows[key] = data
    rows = {"mixed": mixed_rows, "mixed_unordered": mixed_rows,
            "deleted": {sample_row(i, 40)[0]: sample_row(i, 40)[1] for i in range(ROWS) if i % 4 != 3}}
    yield root, conn, rows
    conn.close()


@pytest.fixture(params=["compiled", "reference"])
def kernels(request):
    with pytest.MonkeyPatch.context() as patch:
        on = BUILT if request.param == "compiled" else None
        patch.setattr(arrow_decode, "_NATIVE", on)
        patch.setattr(row_runs, "_NATIVE", on)
        yield on


@pytest.mark.parametrize("name", ["rewrite", "delete", "families", "unordered"])
def test_a_live_table_reads_through_the_connector_as_embedded(live, kernels, name):
    root, conn = live
    table = conn.table(name)
    for columns in (["cf:n", "cf:s"], ["cf:s", "f2:x"]):
        expected = _embedded_rows(table, columns)
        got = _connector_rows(root, name, " ".join(columns))
        assert len(got) == len(expected) == (ROWS * 3 // 4 if name == "delete" else ROWS)
        assert got == expected
    if name != "delete":
        got = {r["key"]: r for r in _connector_rows(root, name, "cf:s")}
        key, data = sample_row(7, 40)
        assert got[key]["cf:s"] == sample_row(14, 40)[1][b"cf:s"]  # the rewrite is what reads


@pytest.mark.parametrize("name", ["mixed", "mixed_unordered", "deleted"])
def test_puts_among_row_deletes_read_through_the_connector_as_embedded(mixed, kernels, name):
    """The log of a table being updated and deleted from (or only deleted from): the puts' row
    form with the row deletes set aside beside it (compiled), or its cells (reference); both
    read as the embedded scan and as the writes say, every column and one."""
    root, conn, tables = mixed
    rows = tables[name]
    table = conn.table(name)
    for columns in (["cf:n", "cf:s"], ["cf:s"]):
        expected = _embedded_rows(table, columns)
        got = _connector_rows(root, name, " ".join(columns))
        assert got == expected
        wanted = [(k, d) for k, d in sorted(rows.items()) if any(c.encode() in d for c in columns)]
        assert [r["key"] for r in got] == [k for k, _ in wanted]
        assert all(r[c] == d.get(c.encode()) for r, (_, d) in zip(got, wanted) for c in columns)
    # how each region's replayed log was read: compiled, as the puts' row form and its markers
    # beside it; the reference decodes its cells, and so does a log of row deletes alone (its
    # cells' decode measured as fast as setting the markers aside)
    got, seen = _replays_seen(lambda: _connector_rows(root, name, "cf:s"))
    assert got == _embedded_rows(table, ["cf:s"])
    assert len(seen) >= 3 and all(s == (kernels is not None and name != "deleted") for s in seen)


def test_pinned_puts_among_row_deletes_read_alike_after_writes_a_flush_a_split_and_a_compaction(tmp_path, kernels):
    """Splits pinned over a log of puts among row deletes, read after the table went on: more
    puts and deletes, a flush, a region split and a major compaction.  The pinned read sees the
    log it pinned (its puts' row form and markers, compiled), as the embedded scan saw it then."""
    conn = storage.connect(str(tmp_path))
    table = _compacted(conn, "t", 2)
    with table.batch(timestamp=2000) as batch:
        for i in range(1, ROWS, 6):
            key, _ = sample_row(i, 40)
            if i % 4 == 1:
                batch.delete(key)
            else:
                batch.put(key, sample_row(i + 3, 40)[1])
    expected = _embedded_rows(table, ["cf:n", "cf:s"])
    fmt = _input_format(str(tmp_path), "t", "cf:n cf:s")
    splits = fmt.get_splits()
    with table.batch(timestamp=3000) as batch:
        for i in range(0, ROWS, 5):
            key, _ = sample_row(i, 40)
            if i % 2:
                batch.delete(key)
            else:
                batch.put(key, {b"cf:s": b"later"})
    table.flush()
    table.split(sample_row(ROWS // 4, 40)[0])
    table.compact(major=True)
    got, seen = _replays_seen(lambda: _split_rows(fmt, splits))
    assert got == expected and len(got) < ROWS
    assert seen and all(s == (kernels is not None) for s in seen)  # the pinned log's puts and markers apart
    assert _embedded_rows(table, ["cf:n", "cf:s"]) != expected  # the table did go on
    conn.close()


def test_a_torn_wal_tail_reads_alike_both_ways(live, tmp_path):
    root, conn = live
    table = conn.table("rewrite")
    expected = _embedded_rows(table, ["cf:n", "cf:s"])
    wal_dir = os.path.join(root, "rewrite", "regions")
    logs = [os.path.join(d, f) for d, _, files in os.walk(wal_dir) for f in files
            if f.endswith(".wal") and os.path.getsize(os.path.join(d, f)) > 16]
    assert logs
    for log in logs:
        with open(log, "ab") as f:
            f.write(b"\x07\x00\x00")  # a crash cut the next record's header: a torn tail
    for on in (BUILT, None):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(arrow_decode, "_NATIVE", on)
            patch.setattr(row_runs, "_NATIVE", on)
            assert _connector_rows(root, "rewrite", "cf:n cf:s") == expected


def _hashed_key(i: int, shape: str) -> bytes:
    """Keys written in no key order: ``salted`` (4 bytes of MD5 before the digits, one width)
    or ``ycsb`` (``user`` and the decimal of a hash: several widths)."""
    import hashlib

    digest = hashlib.md5(b"%d" % i).digest()
    return digest[:4] + b"%08d" % i if shape == "salted" else b"user%d" % int.from_bytes(digest[:8], "big")


@pytest.mark.parametrize("shape", ["salted", "ycsb"])
def test_hashed_keys_read_through_the_connector_while_flushed_and_compacted(tmp_path, kernels, shape):
    """A live table of hashed keys (re-puts and deletes unflushed, written in no key order)
    pinned by ``get_splits``, then flushed and compacted, once before its splits are read
    and then split at every region's midkey, flushed and compacted again and again while
    they are: every read gives the rows the table held when it was pinned, as the embedded
    scan gave them then."""
    import threading

    root = str(tmp_path)
    conn = storage.connect(root)
    splits = [b"\x55", b"\xaa"] if shape == "salted" else [b"user4", b"user7"]
    table = conn.create_table("t", {"cf": {}}, split_keys=splits, settings=_UNFLUSHED)
    with table.batch(timestamp=1000) as batch:
        for i in range(ROWS):
            batch.put(_hashed_key(i, shape), sample_row(i, 40)[1])
    table.compact(major=True)
    with table.batch(timestamp=2000) as batch:
        for i in range(ROWS):
            if i % 4 == 3:
                batch.put(_hashed_key(i, shape), sample_row(i + 7, 40)[1])
            elif i % 4 == 1:
                batch.delete(_hashed_key(i, shape))
    expected = _embedded_rows(table, ["cf:n", "cf:s"])
    assert len(expected) == ROWS * 3 // 4
    assert [r["key"] for r in expected] == sorted(_hashed_key(i, shape) for i in range(ROWS) if i % 4 != 1)

    fmt = _input_format(root, "t", "cf:n cf:s")
    pinned = fmt.get_splits()

    def read_pinned() -> list:
        return _split_rows(fmt, pinned)

    table.flush()
    table.compact(major=True)  # the pinned files are archived, the pinned WAL records flushed
    assert read_pinned() == expected
    with table.batch(timestamp=3000) as batch:  # more writes after the pin: not in its reads
        for i in range(0, ROWS, 5):
            batch.put(_hashed_key(i, shape), {b"cf:s": b"after the pin"})
    stop, failures, rounds = threading.Event(), [], [0]

    regions_before = len(table.region_infos())

    def maintain():
        try:
            while not stop.is_set():
                if rounds[0] == 0:
                    table.split()  # every region at its midkey, while the pinned splits are read
                table.flush()
                table.compact(major=True)
                rounds[0] += 1
        except Exception as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)

    worker = threading.Thread(target=maintain)
    worker.start()
    try:
        reads = 0
        while reads < 3 or (rounds[0] < 2 and reads < 50):
            assert read_pinned() == expected
            reads += 1
    finally:
        stop.set()
        worker.join()
    assert not failures and rounds[0] >= 1
    assert len(table.region_infos()) == 2 * regions_before
    latest = _connector_rows(root, "t", "cf:n cf:s")  # a new pin reads the later writes
    assert latest == _embedded_rows(table, ["cf:n", "cf:s"])
    assert len(latest) == len(expected) + len(range(0, ROWS, 5)) // 4  # rows deleted, then put again
    conn.close()
