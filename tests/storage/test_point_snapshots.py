"""Point reads from a region's read state (storage/region/read_state.py).

``row()`` and ``rows()`` read the one immutable state object a region
publishes when its files or the emptiness of a memstore change, and take no
view, lock or lease; they check afterwards that the region still holds that
object.  These tests hold them to every acknowledged write while flushes,
compactions and first writes into empty memstores replace the state under
them, with real threads, and place a compaction that closes a file inside a
read.
"""

from __future__ import annotations

import os
import struct
import threading
import time

import pytest

import storage
from storage.storefile.reader import StoreFileReader

ROWS = 200
# how long the threaded test runs its writers, flushes and compactions (seconds)
SECONDS = float(os.environ.get("REGIONSCAN_POINT_RACE_SECONDS", "2.0"))


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


def _value(v: int) -> bytes:
    return struct.pack(">Q", v)


@pytest.fixture
def conn(tmp_path):
    c = storage.connect(str(tmp_path / "root"))
    yield c
    c.close()


def _flushed_table(conn, name: str = "t", **settings):
    t = conn.create_table(name, {"cf": {}, "other": {}}, settings={"wal_sync": "none", **settings},
                          split_keys=[_key(ROWS // 2)])
    with t.batch(timestamp=1_000) as b:
        for i in range(ROWS):
            b.put(_key(i), {b"cf:v": _value(0), b"cf:s": b"s%d" % i})
    t.flush()
    t.compact(major=True)
    return t


def test_the_state_follows_writes_flushes_and_compactions(conn):
    t = _flushed_table(conn)
    region = t._map.region_for(_key(1))
    clean = region.read_state
    assert clean is not None and clean.empty_families == {b"cf", b"other"}
    # a write into an empty memstore publishes a state that sends reads to the memstore
    t.put(_key(1), {b"cf:v": _value(7)})
    dirty = region.read_state
    assert dirty is not clean and b"cf" not in dirty.empty_families
    assert t.row(_key(1))[b"cf:v"] == _value(7)
    # later writes into the same memstore publish nothing
    t.put(_key(2), {b"cf:v": _value(8)})
    assert region.read_state is dirty
    # a flush publishes the new file with the memstore empty again
    t.flush()
    flushed = region.read_state
    assert flushed is not dirty and flushed.empty_families == {b"cf", b"other"}
    assert len(flushed.stores[0].files) == 2
    assert t.row(_key(1))[b"cf:v"] == _value(7) and t.row(_key(2))[b"cf:v"] == _value(8)
    t.compact(major=True)
    assert len(region.read_state.stores[0].files) == 1
    assert t.rows([_key(2), _key(1), _key(ROWS + 5)]) == [
        (_key(2), {b"cf:v": _value(8), b"cf:s": b"s2"}), (_key(1), {b"cf:v": _value(7), b"cf:s": b"s1"})]


def test_a_closed_region_publishes_no_state(conn):
    t = _flushed_table(conn)
    regions = list(t._map.regions)
    t.split(_key(ROWS // 4))
    assert regions[0].read_state is None  # the parent: closed by the split
    assert all(r.read_state is not None for r in t._map.regions)
    assert t.row(_key(3))[b"cf:s"] == b"s3"
    t.close()
    with pytest.raises(storage.StorageError, match="closed"):
        t.row(_key(3))


@pytest.mark.parametrize("read", ["row", "rows"])
def test_a_compaction_that_closes_the_file_inside_a_read_is_read_again(tmp_path, read):
    # no block cache: the read goes to the file, which the compaction has closed
    c = storage.connect(str(tmp_path / "root"), block_cache_size=0)
    try:
        t = _flushed_table(c)
        t.put(_key(3), {b"cf:v": _value(5)})
        t.flush()  # two files: a major compaction replaces and closes both
        original = StoreFileReader.row_cells if read == "row" else StoreFileReader.rows_cells
        compacted = []

        def compact_first(self, *args):
            if not compacted:
                compacted.append(True)
                worker = threading.Thread(target=t.compact, kwargs={"major": True})
                worker.start()
                worker.join(timeout=60)
                assert not worker.is_alive() and self.closed  # retired under this read
            return original(self, *args)

        attr = "row_cells" if read == "row" else "rows_cells"
        setattr(StoreFileReader, attr, compact_first)
        try:
            if read == "row":
                got = t.row(_key(3))
            else:
                got = dict(t.rows([_key(3)]))[_key(3)]
        finally:
            setattr(StoreFileReader, attr, original)
        assert compacted and got == {b"cf:v": _value(5), b"cf:s": b"s3"}
    finally:
        c.close()


def test_gets_during_flushes_and_compactions_see_every_acknowledged_write(conn):
    t = _flushed_table(conn)
    acked = [0] * ROWS  # per row, the newest value whose write returned
    stop = threading.Event()
    errors: list[BaseException] = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                stop.set()
        return run

    def writer():
        v = 0
        while not stop.is_set():
            v += 1
            i = (v * 37) % ROWS
            t.put(_key(i), {b"cf:v": _value(v)})
            acked[i] = v  # only after the put returned

    def maintenance():
        n = 0
        while not stop.is_set():
            n += 1
            t.flush()
            if n % 3 == 0:
                t.compact(major=n % 6 == 0)

    checked = [0]

    def reader():
        n = 0
        while not stop.is_set():
            n += 1
            i = (n * 11) % ROWS
            want = acked[i]  # read before the get starts
            got = t.row(_key(i))
            seen = struct.unpack(">Q", got[b"cf:v"])[0]
            assert seen >= want, f"row {i}: read value {seen} after value {want} was acknowledged"
            assert got[b"cf:s"] == b"s%d" % i
            keys = [_key((i + k * 7) % ROWS) for k in range(5)]
            wants = [acked[(i + k * 7) % ROWS] for k in range(5)]
            rows = dict(t.rows(keys))
            for key, w in zip(keys, wants):
                seen = struct.unpack(">Q", rows[key][b"cf:v"])[0]
                assert seen >= w, f"rows(): {key!r} read value {seen} after {w} was acknowledged"
            checked[0] += 6

    threads = [threading.Thread(target=guard(f)) for f in (writer, maintenance, reader, reader)]
    for th in threads:
        th.start()
    time.sleep(SECONDS)
    stop.set()
    for th in threads:
        th.join(timeout=60)
    if errors:
        raise errors[0]
    assert checked[0] > 100 and max(acked) > 100
