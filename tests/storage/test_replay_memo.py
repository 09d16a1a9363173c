"""A pinned region's decoded WAL records kept between reads (storage/region/replay_memo.py).

Real tables on disk read through the connector's partition reader, which pins
regions and decodes their WAL as the JVM source's engine worker does: a
repeated read of the same pin that keeps results (``regionscan.scan.cacheresults``)
stops decoding once its cells are kept, and then is served the chunks resolved
against them.  A read without a block cache keeps the decoded WAL in the
process's block cache (one budget) and resolves every chunk; nothing is kept
by a read that does not ask, with that cache sized 0, for a WAL written within
the clock granule, or across a table created again under the same name.
"""

from __future__ import annotations

import glob
import os
import struct
import threading
import time

import pyarrow as pa
import pytest

import storage
from connector import TableInputFormat
from storage.memstore.sorted_cells import SortedCells
from storage.read import row_scan
from storage.region import file_stamps, region_snapshots
from tests.file_settle import settle

SPLITS = [struct.pack(">I", 100), struct.pack(">I", 200)]
REGIONS = 3
WRITER_PAUSE_S = 0.002  # between the puts of the writer that runs beside a flush and reads


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


def _create(conn, name: str = "t"):
    return conn.create_table(name, {"cf": {"block_size": 1024}}, split_keys=SPLITS, settings={"wal_sync": "none"})


def _write(table, tag: bytes) -> None:
    """Rows 0-299 flushed, then a third of them put again and a tenth deleted, unflushed."""
    with table.batch(batch_size=100) as b:
        for i in range(300):
            b.put(_key(i), {b"cf:a": b"base-%d" % i, b"cf:b": b"%d" % (i * 3)})
    table.flush()
    with table.batch(batch_size=100) as b:
        for i in range(0, 300, 3):
            b.put(_key(i), {b"cf:a": tag + b"-%d" % i})
    for i in range(0, 300, 10):
        table.delete(_key(i))


def _settle(root: str) -> None:
    """Wait until every WAL file is older than the clock granule, so a decode of it may be kept."""
    settle(*glob.glob(os.path.join(root, "**", "*.wal"), recursive=True))


@pytest.fixture
def decodes(monkeypatch):
    """Counts of WAL decodes (one per region read that decodes) and of chunk resolutions."""
    counts = {"wal": 0, "resolved": 0}
    decode, resolve = SortedCells.from_payloads.__func__, row_scan.resolve_items

    def counting_decode(cls, *args, **kwargs):
        counts["wal"] += 1
        return decode(cls, *args, **kwargs)

    def counting_resolve(*args, **kwargs):
        counts["resolved"] += 1
        return resolve(*args, **kwargs)

    monkeypatch.setattr(SortedCells, "from_payloads", classmethod(counting_decode))
    monkeypatch.setattr(row_scan, "resolve_items", counting_resolve)
    return counts


def _format(root: str, name: str = "t", cacheblocks: bool = True, cacheresults: bool | None = True,
            **more: str) -> TableInputFormat:
    conf = {
        "regionscan.root": root, "hbase.mapreduce.inputtable": name,
        "hbase.mapreduce.scan.columns": "cf:a cf:b",
        "hbase.mapreduce.scan.cacheblocks": "true" if cacheblocks else "false",
        **more,
    }
    if cacheresults is not None:
        conf["regionscan.scan.cacheresults"] = "true" if cacheresults else "false"
    return TableInputFormat(conf)


def _read(fmt: TableInputFormat, splits) -> pa.Table:
    batches = []
    for split in splits:
        reader = fmt.create_batch_reader(split)
        batches.extend(reader)
        reader.close()
    return pa.Table.from_batches(batches)


def _reads(fmt: TableInputFormat, splits, decodes: dict, times: int) -> tuple[list, list, list]:
    """``times`` reads of the same splits: their tables, and the WAL decodes and
    chunk resolutions each made."""
    tables, wal, resolved = [], [], []
    for _ in range(times):
        decodes["wal"] = decodes["resolved"] = 0
        tables.append(_read(fmt, splits))
        wal.append(decodes["wal"])
        resolved.append(decodes["resolved"])
    return tables, wal, resolved


@pytest.fixture
def live(tmp_path):
    """A root and its connection: table ``t`` with unflushed puts and deletes
    in every region (:func:`_write`), its WAL settled."""
    root = str(tmp_path / "root")
    conn = storage.connect(root)
    _write(_create(conn), b"v1")
    _settle(root)
    yield root, conn
    conn.close()


def _embedded(conn, name: str = "t") -> list:
    return [(k, {c: v for c, v in sorted(d.items())}) for k, d in conn.table(name).scan()]


def _as_rows(table: pa.Table) -> list:
    out = []
    for row in table.to_pylist():
        key = row.pop("key")
        out.append((key, {c.encode(): v for c, v in sorted(row.items()) if v is not None}))
    return out


def test_a_repeated_read_of_a_pin_stops_decoding_its_wal_and_resolving(live, decodes):
    root, conn = live
    fmt = _format(root)
    tables, wal, resolved = _reads(fmt, fmt.get_splits(), decodes, 5)
    # the first decode leaves a marker, the second is kept, the third on are served;
    # the chunks resolved against the kept cells are kept in turn (on their second build)
    assert wal == [REGIONS, REGIONS, 0, 0, 0]
    assert resolved[0] > 0 and resolved[-1] == 0, resolved
    expected = _embedded(conn)
    assert all(_as_rows(t) == expected for t in tables)
    assert any(v[b"cf:a"].startswith(b"v1-") for _, v in expected)  # the unflushed puts are read
    fmt.release()


@pytest.fixture
def fresh_caches(monkeypatch):
    """The process's block cache built afresh (from the environment) for one test."""
    monkeypatch.setattr(region_snapshots, "_caches", {})


def test_a_read_without_a_block_cache_keeps_the_decoded_wal_and_resolves_every_chunk(live, decodes, fresh_caches):
    """``cacheblocks`` false: the decoded WAL is kept, in the process's block cache
    (one budget for blocks and kept results), but no chunk resolved against it is."""
    root, conn = live
    fmt = _format(root, cacheblocks=False)
    tables, wal, resolved = _reads(fmt, fmt.get_splits(), decodes, 4)
    assert wal == [REGIONS, REGIONS, 0, 0]
    assert all(r > 0 for r in resolved) and len(set(resolved)) == 1, resolved
    cache = region_snapshots.shared_block_cache()
    assert cache.result_bytes > 0 and cache.used_bytes == cache.result_bytes  # no block kept, results only
    assert all(_as_rows(t) == _embedded(conn) for t in tables)
    fmt.release()


@pytest.mark.parametrize("how", ["a read that does not ask", "a read that says false", "block cache of 0 bytes",
                                 "within the clock granule"])
def test_what_keeps_nothing(live, decodes, monkeypatch, fresh_caches, how):
    """A read that does not keep results (the default, or said), no cache to keep the
    cells in, or a WAL written within the clock granule before the decode (a 10 s
    granule here, whatever the machine's load): every read decodes."""
    root, conn = live
    cacheresults = {"a read that does not ask": None, "a read that says false": False}.get(how, True)
    if how == "block cache of 0 bytes":
        monkeypatch.setenv(region_snapshots.BLOCK_CACHE_SIZE_ENV, "0")
    if how == "within the clock granule":
        monkeypatch.setattr(file_stamps, "RACY_NS", 10_000_000_000)
        monkeypatch.setattr(file_stamps, "COARSE_RACY_NS", 10_000_000_000)
    fmt = _format(root, cacheblocks=how != "block cache of 0 bytes", cacheresults=cacheresults)
    tables, wal, resolved = _reads(fmt, fmt.get_splits(), decodes, 3)
    assert wal == [REGIONS] * 3 and all(r > 0 for r in resolved)
    assert all(_as_rows(t) == _embedded(conn) for t in tables)
    assert region_snapshots.shared_block_cache().result_bytes == 0
    fmt.release()


def test_the_option_switches_keeping_per_read(live, decodes, fresh_caches):
    """Reads of one pin that keep results beside reads that do not: the latter decode
    every time and are never served what the former kept."""
    root, _conn = live
    keeping, plain = _format(root), _format(root, cacheresults=False)
    splits = keeping.get_splits()
    _tables, wal, _resolved = _reads(keeping, splits, decodes, 3)
    assert wal == [REGIONS, REGIONS, 0]
    plain_splits = plain.get_splits()  # a split carries its read's options
    assert _pins(plain_splits) == _pins(splits)
    _tables, wal, _resolved = _reads(plain, plain_splits, decodes, 2)
    assert wal == [REGIONS, REGIONS]
    _tables, wal, _resolved = _reads(keeping, splits, decodes, 1)
    assert wal == [0]
    keeping.release()
    plain.release()


def _pins(splits) -> list:
    return [(p.region_id, p.wal_files, p.flushed_seq_id, p.max_seq_id) for s in splits for p in s.regions]


def test_a_table_created_again_under_the_same_name_is_not_served_the_old_cells(live, decodes):
    root, conn = live
    fmt = _format(root)
    old_splits = fmt.get_splits()
    _tables, wal, _resolved = _reads(fmt, old_splits, decodes, 3)
    assert wal[-1] == 0  # kept
    fmt.release()
    conn.delete_table("t", disable=True)
    _write(_create(conn), b"new")  # the same writes: the same WAL names and sequence ids
    _settle(root)
    fmt = _format(root)
    splits = fmt.get_splits()
    assert _pins(splits) == _pins(old_splits)
    tables, wal, _resolved = _reads(fmt, splits, decodes, 3)
    assert wal[0] == REGIONS  # the kept cells of the old files are not served
    expected = _embedded(conn)
    assert any(v[b"cf:a"].startswith(b"new-") for _, v in expected)
    assert all(_as_rows(t) == expected for t in tables)
    fmt.release()


def test_writes_after_the_pin_are_read_by_a_new_pin_only(live, decodes):
    root, conn = live
    first = _format(root)
    first_splits = first.get_splits()
    _tables, wal, _resolved = _reads(first, first_splits, decodes, 3)
    assert wal[-1] == 0
    expected_before = _embedded(conn)
    table = conn.table("t")
    table.put(_key(7), {b"cf:a": b"later"})
    table.delete(_key(8))
    _settle(root)
    # the old pin still reads its snapshot (its region's WAL grew: a new stamp, so it decodes again)
    again, wal, _resolved = _reads(first, first_splits, decodes, 1)
    assert wal == [1] and _as_rows(again[0]) == expected_before
    second = _format(root)
    after, wal, _resolved = _reads(second, second.get_splits(), decodes, 3)
    assert wal[0] >= 1 and wal[-1] == 0
    expected_after = _embedded(conn)
    assert dict(expected_after)[_key(7)][b"cf:a"] == b"later" and _key(8) not in dict(expected_after)
    assert all(_as_rows(t) == expected_after for t in after)
    first.release()
    second.release()


def test_versions_a_flush_and_a_writer_meanwhile_read_as_without_the_memo(tmp_path, decodes):
    """Three versions per column and column deletes unflushed, read with all versions; then a
    flush archives the pinned WAL while a writer keeps putting: the old pin's kept reads stay
    equal to a read that decodes afresh, before and after."""
    root = str(tmp_path / "root")
    conn = storage.connect(root)
    table = conn.create_table("t", {"cf": {"block_size": 1024, "max_versions": 3}}, split_keys=SPLITS,
                              settings={"wal_sync": "none"})
    _write(table, b"v1")
    for version in (b"v2", b"v3"):
        with table.batch(batch_size=100) as b:
            for i in range(0, 300, 3):
                b.put(_key(i), {b"cf:a": version + b"-%d" % i, b"cf:b": version})
    for i in range(1, 300, 7):
        table.delete(_key(i), columns=[b"cf:b"])
    _settle(root)
    fmt = _format(root, **{"hbase.mapreduce.scan.maxversions": "3"})
    fresh = _format(root, cacheresults=False, **{"hbase.mapreduce.scan.maxversions": "3"})
    splits = fmt.get_splits()
    fresh_splits = fresh.get_splits()  # the same pins; a split carries its read's options

    def afresh() -> pa.Table:
        return _read(fresh, fresh_splits)

    expected = afresh()
    # (a put in the same millisecond as its row's delete marker stays hidden, as in HBase)
    assert expected.num_rows == len(_embedded(conn)) > 250
    tables, wal, _resolved = _reads(fmt, splits, decodes, 3)
    assert wal[-1] == 0 and all(t.equals(expected) for t in tables)

    # The writer puts at a bounded rate: one that never pauses holds the GIL against the
    # reads, so both the reads' wait and its number of puts grow with the machine's load.
    stop, started = threading.Event(), threading.Event()
    puts = [0]

    def writer() -> None:
        i = 1000
        while not stop.is_set():
            table.put(_key(i % 300), {b"cf:a": b"writer-%d" % i})
            i += 1
            puts[0] += 1
            started.set()
            time.sleep(WRITER_PAUSE_S)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert started.wait(30), "the writer put nothing"
        before = puts[0]
        table.flush()  # the pinned WAL files move to the archive
        during, _wal, _resolved = _reads(fmt, splits, decodes, 3)
        after_reads = puts[0]
        # one more put after the reads ended: the writer's loop spanned the flush and the reads
        while puts[0] == after_reads and thread.is_alive():
            time.sleep(WRITER_PAUSE_S)
    finally:
        stop.set()
        thread.join()
    # puts before the flush, between its start and the reads' end, and after them
    assert 1 <= before < after_reads < puts[0], (before, after_reads, puts[0])
    assert all(t.equals(expected) for t in during)
    _settle(root)
    after, wal, _resolved = _reads(fmt, splits, decodes, 3)
    assert wal[-1] == 0 and all(t.equals(expected) for t in after)
    assert afresh().equals(expected)
    fmt.release()
    fresh.release()
    conn.close()
