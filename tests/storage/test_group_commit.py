"""Group commit: concurrent writers share WAL syncs, and every put is durable when it returns.

Threads doing single ``put()`` calls on one region with the ``each`` sync
policy: a writer appends its record under the region's lock and syncs after
releasing it, so an fsync started by one writer covers the records the
others appended meanwhile.  Counted with the WAL's own sync counter.
"""

from __future__ import annotations

import threading

import storage


def _threads(table, threads: int, puts: int, before, after) -> None:
    start = threading.Barrier(threads)
    errors = []

    def work(t: int) -> None:
        try:
            start.wait()
            for i in range(puts):
                row = b"t%02d-%05d" % (t, i)
                mark = before()
                table.put(row, {b"cf:v": b"x" * 64})
                after(mark)
        except BaseException as exc:  # reported below: a failed put must fail the test
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors[:1]


def test_concurrent_puts_share_wal_syncs(tmp_path):
    conn = storage.connect(str(tmp_path))
    table = conn.create_table("g", {"cf": {}}, settings={"wal_sync": "each"})
    region = table._regions[0]
    synced = []

    def size() -> int:
        return region._wal.size

    def check(size_before: int) -> None:
        # durable on return: the put's record lies past what the log held before the
        # call, and the synced part of the log reaches past that
        synced.append(region._wal.synced_size > size_before)

    before = table.wal_sync_count()
    threads, puts = 8, 40
    _threads(table, threads, puts, size, check)
    syncs = table.wal_sync_count() - before
    assert all(synced)
    assert 0 < syncs < threads * puts, f"{syncs} syncs for {threads * puts} puts: no sync was shared"
    # each put is visible once it returned, and all of them are there
    assert sum(1 for _ in table.scan()) == threads * puts
    conn.close()
    reopened = storage.connect(str(tmp_path)).table("g")
    assert sum(1 for _ in reopened.scan()) == threads * puts


def test_one_writer_syncs_once_per_put(tmp_path):
    conn = storage.connect(str(tmp_path))
    table = conn.create_table("g", {"cf": {}}, settings={"wal_sync": "each"})
    before = table.wal_sync_count()
    for i in range(20):
        table.put(b"r%02d" % i, {b"cf:v": b"v"})
        assert table._regions[0]._wal.synced_size == table._regions[0]._wal.size  # durable on return
    assert table.wal_sync_count() - before == 20
    with table.batch() as b:
        for i in range(500):
            b.put(b"b%04d" % i, {b"cf:v": b"v"})
    assert table.wal_sync_count() - before == 21  # a batch: one record, one sync
    conn.close()


def test_a_write_is_invisible_until_its_sync_ends(tmp_path):
    conn = storage.connect(str(tmp_path))
    table = conn.create_table("g", {"cf": {}}, settings={"wal_sync": "each"})
    region = table._regions[0]
    ticket = region.mutate_begin([(b"row", b"cf", b"q", 5, 4, b"v")])
    assert table.row(b"row") == {}  # logged and in the memstore, not yet durable: not seen
    region.mutate_finish(ticket)
    assert table.row(b"row") == {b"cf:q": b"v"}
    conn.close()


def test_each_writer_reads_its_own_write_at_once(tmp_path):
    """Syncs end in any order; a put returns only once the read point covers it."""
    conn = storage.connect(str(tmp_path))
    table = conn.create_table("g", {"cf": {}}, settings={"wal_sync": "each"})
    missing = []
    start = threading.Barrier(6)

    def work(t: int) -> None:
        start.wait()
        for i in range(30):
            row = b"w%d-%03d" % (t, i)
            table.put(row, {b"cf:a": b"%d" % i})
            if table.row(row) != {b"cf:a": b"%d" % i}:
                missing.append(row)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not missing, missing[:3]
    conn.close()
