"""A reader that fixes its read point before a write that replaces a cell, and
opens its views after it, still sees the cell its read point shows.

A write with the same row, column and timestamp as a memstore cell replaces it
in place; the memstore keeps the replaced cell only while a reader is open.
A reader takes the read point and then opens its views, and a write can land
in between: the memstore then says so (``ReadPointTooOld``) and the reader
opens its views again at a newer read point.  Before, it read the memstore at
its old read point, found the replaced cell gone and the new one too new, and
showed the store file's older value (or no row at all).  The chunk-memo
stress test found it under load; these tests place the write in the window.
"""

from __future__ import annotations

import struct
import threading

import pytest

import storage
from storage.memstore.write_buffer import MemStore
from storage.mvcc import Mvcc, ReadPointTooOld, views_at_read_point

TS = 5_000


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


@pytest.fixture
def table(tmp_path):
    conn = storage.connect(str(tmp_path / "root"))
    t = conn.create_table("t", {"cf": {}}, settings={"wal_sync": "none"}, split_keys=[_key(50)])
    with t.batch(timestamp=1_000) as b:
        for i in range(100):
            b.put(_key(i), {b"cf:n": b"file", b"cf:s": b"s"})
    t.flush()
    t.compact(major=True)
    with t.batch(timestamp=TS) as b:  # in the memstore, over the file
        for i in range(0, 100, 4):
            b.put(_key(i), {b"cf:n": b"first"})
    yield t
    conn.close()


def _write_in_the_window(monkeypatch, table, times: int = 1):
    """Make the next ``times`` memstore views of the table run, first, a put
    that replaces row 0's memstore cell (same timestamp), from another thread
    and to completion: the write lands after the reader fixed its read point."""
    original = MemStore.view
    left = [times]

    def view(self, read_point=None):
        if left[0] > 0:
            left[0] -= 1
            writer = threading.Thread(target=lambda: table.put(_key(0), {b"cf:n": b"second"}, timestamp=TS))
            writer.start()
            writer.join(timeout=30)
            assert not writer.is_alive()
        return original(self, read_point)

    monkeypatch.setattr(MemStore, "view", view)


@pytest.mark.parametrize("read", ["scan_batches", "scan", "row", "rows"])
def test_a_write_between_the_read_point_and_the_views_is_not_missed(table, monkeypatch, read):
    _write_in_the_window(monkeypatch, table)
    if read == "scan_batches":
        got = {}
        for batch in table.scan_batches(columns=[b"cf:n"]):
            for row in batch.to_pylist():
                got[row["key"]] = row["cf:n"]
        value = got[_key(0)]
    elif read == "scan":
        value = dict(table.scan(columns=[b"cf:n"]))[_key(0)][b"cf:n"]
    elif read == "row":
        value = table.row(_key(0), columns=[b"cf:n"])[b"cf:n"]
    else:
        value = dict(table.rows([_key(0), _key(4)], columns=[b"cf:n"]))[_key(0)][b"cf:n"]
    # the read point after the retry includes the write: never the file's older value
    assert value == b"second"
    assert table.row(_key(4))[b"cf:n"] == b"first"


def test_a_region_view_without_a_read_point_retries_too(table, monkeypatch):
    _write_in_the_window(monkeypatch, table)
    region = table._region_for(_key(0))
    assert region.get(_key(0), storage.scanner.CellScanSpec())[0][5] == b"second"


def test_a_memstore_names_the_write_a_reader_is_too_old_for():
    memstore = MemStore()
    memstore.add_many([(b"r", b"f", b"q", TS, 4, b"v1")], seq=1)
    memstore.add_many([(b"r", b"f", b"q", TS, 4, b"v2")], seq=2)  # replaces v1: no reader open
    with pytest.raises(ReadPointTooOld) as raised:
        memstore.view(1)
    assert raised.value.seq == 2
    view = memstore.view(2)
    view.release()
    # a replacement while a reader is open keeps the old cell for it: no retry needed
    open_view = memstore.view(2)
    memstore.add_many([(b"r", b"f", b"q", TS, 4, b"v3")], seq=3)
    late = memstore.view(2)
    assert late.to_batch().column("value").to_pylist() == [b"v2"]
    late.release()
    open_view.release()


def test_views_at_read_point_waits_for_the_write_then_opens_again():
    mvcc = Mvcc()
    seq = mvcc.begin()
    lock = threading.RLock()
    seen = []

    def open_views(point: int):
        seen.append(point)
        if point < seq:
            threading.Timer(0.05, mvcc.complete, args=(seq,)).start()
            raise ReadPointTooOld(seq)
        return point

    assert views_at_read_point(lock, mvcc, open_views) == seq
    assert seen == [0, seq]


def test_the_region_view_releases_its_store_views_when_one_raises(table, monkeypatch):
    conn_table = table
    region = conn_table._region_for(_key(0))
    store = next(iter(region.stores.values()))
    opened_before = store.memstore._open_scanners
    _write_in_the_window(monkeypatch, conn_table)
    point = conn_table.mvcc.read_point
    with pytest.raises(ReadPointTooOld):
        region.view(point)
    assert store.memstore._open_scanners == opened_before


def test_a_stream_of_replacing_writes_makes_a_reader_wait_once(table, monkeypatch):
    """A replacing write in the window of every attempt: the memstore that made
    the reader wait keeps what later writes replace, so the second attempt
    opens (at the read point that includes the first write) and no later one
    is needed."""
    original = MemStore.view
    attempts = []

    def view(self, read_point=None):
        attempts.append(read_point)
        value = b"w%d" % len(attempts)
        writer = threading.Thread(target=lambda: table.put(_key(0), {b"cf:n": value}, timestamp=TS))
        writer.start()
        writer.join(timeout=30)
        assert not writer.is_alive()
        return original(self, read_point)

    monkeypatch.setattr(MemStore, "view", view)
    region = table._region_for(_key(0))
    memstore = region.stores["cf"].memstore
    got = table.row(_key(0), columns=[b"cf:n"])[b"cf:n"]
    assert len(attempts) == 2  # too old once, then opened
    assert got == b"w1"  # the write the reader waited for; w2 came after its read point
    assert memstore._readers_waiting == 0 and memstore._open_scanners == 0
    assert not memstore._active.older  # nothing is held once the reader is done
