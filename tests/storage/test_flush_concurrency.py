"""Flushes and compactions run beside writes: a write waits for neither, only
for a flush of its region once the memstore holds BLOCKING_MULTIPLIER times
the flush size (HBase's ``hbase.hregion.memstore.block.multiplier``)."""

import threading

import pytest

import storage
from storage.region.store import Store
from storage.table.writes import BLOCKING_MULTIPLIER


@pytest.fixture
def table(tmp_path):
    conn = storage.connect(str(tmp_path / "root"), block_cache_size=0)
    t = conn.create_table("t", {"cf": {}}, settings={"wal_sync": "none", "memstore_flush_size": 8 << 10})
    yield t
    conn.close()


@pytest.fixture
def held_flush(monkeypatch):
    """Store file writers that wait for ``release`` before writing: a flush
    or compaction stays in progress until the test lets it go."""
    entered, release = threading.Event(), threading.Event()
    original = Store.new_writer

    def new_writer(self, name):
        entered.set()
        assert release.wait(60), "the test never released the held flush"
        return original(self, name)

    monkeypatch.setattr(Store, "new_writer", new_writer)
    yield entered, release
    release.set()


def _put_rows(table, start, count):
    for n in range(start, start + count):
        table.put(b"row%06d" % n, {b"cf:q": b"v" * 64})


def test_writes_and_reads_go_on_while_a_flush_writes_its_file(table, held_flush):
    entered, release = held_flush
    _put_rows(table, 0, 10)
    flusher = threading.Thread(target=table.flush)
    flusher.start()
    assert entered.wait(30)
    # the flush holds its snapshot: these writes land in the new active map and WAL
    writer = threading.Thread(target=_put_rows, args=(table, 10, 10))
    writer.start()
    writer.join(30)
    assert not writer.is_alive(), "writes waited for a flush below the blocking size"
    assert flusher.is_alive()
    assert [r for r, _ in table.scan()] == [b"row%06d" % n for n in range(20)]
    assert table.row(b"row000015") == {b"cf:q": b"v" * 64}
    release.set()
    flusher.join(30)
    assert not flusher.is_alive()
    assert [r for r, _ in table.scan()] == [b"row%06d" % n for n in range(20)]


def test_a_write_past_the_blocking_size_waits_for_the_flush(table, held_flush):
    entered, release = held_flush
    region = table._regions[0]
    flusher = threading.Thread(target=_put_rows, args=(table, 0, 40))  # past the flush size: a flush starts
    flusher.start()
    assert entered.wait(30)
    blocking = BLOCKING_MULTIPLIER * table.settings.memstore_flush_size
    done = threading.Event()

    def writer():
        # far more than the blocking size; it must stop at the write that crosses it
        _put_rows(table, 1000, 4 * blocking // 64)
        done.set()

    w = threading.Thread(target=writer)
    w.start()
    assert not done.wait(1.0), "writes past the blocking size returned while the flush was held"
    assert region.memstore_size + region.snapshot_size >= blocking  # it stopped there, not before
    release.set()
    w.join(60)
    flusher.join(60)
    assert done.is_set()
    table.flush()
    assert region.memstore_size == 0


def test_a_failed_flush_keeps_the_edits_and_a_reopen_replays_them(tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    conn = storage.connect(root, block_cache_size=0)
    t = conn.create_table("t", {"cf": {}}, settings={"wal_sync": "none"})
    _put_rows(t, 0, 5)

    def broken(self, name):
        raise OSError("disk full (test)")

    monkeypatch.setattr(Store, "new_writer", broken)
    with pytest.raises(OSError, match="disk full"):
        t.flush()
    _put_rows(t, 5, 5)  # written into the WAL rolled before the failed flush
    assert len([r for r, _ in t.scan()]) == 10
    monkeypatch.undo()
    conn.close()
    again = storage.connect(root, block_cache_size=0)
    assert [r for r, _ in again.table("t").scan()] == [b"row%06d" % n for n in range(10)]
    again.close()
