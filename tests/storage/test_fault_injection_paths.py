"""Faults on reads, and on the paths the workload of test_fault_injection does not take.

Real files under :class:`storage.vfs.faultfs.FaultFileSystem`: a read, open,
listing or stat made to fail by path and count; a read failing in the middle
of each kind of scan (the scan raises one error naming the file, never ends
short as if complete, and once healed every row is there); ``delete_table``,
``abort_load``, pin writes and releases, and the WAL kept as segment objects
(``can_append=False``, an object store's rules) under each failing operation.
"""

from __future__ import annotations

import errno
import threading

import pyarrow as pa
import pytest

import storage
from storage.engine import BulkLoadTask, abort_load, table_regions
from storage.region.load_journal import STAGING_DIR, Journal, write_journal
from storage.errors import StorageError, TableNotFound
from storage.vfs.faultfs import FaultFileSystem, InjectedFault
from storage.vfs.fs import FileSystem
from storage.table.parallel import ParallelScanner
from storage.region.pins import PINS_DIR, live_pins, own_identity, release_pin, write_pin
from storage.wal.reader import WalReader
from storage.wal.segments import SegmentWalWriter

FAMILIES = {"cf": {"block_size": 512}}
ROWS = {b"%s%04d" % (p, i): b"v%05d" % i * 6 for p in (b"a", b"n", b"x") for i in range(0, 400, 2)}


def _table(root: str) -> None:
    """Three regions, each with two store files of many blocks, plus unflushed edits."""
    with storage.connect(root) as conn:
        table = conn.create_table("t", FAMILIES, split_keys=[b"m", b"w"])
        items = sorted(ROWS.items())
        for half in (items[::2], items[1::2]):
            with table.batch() as b:
                for row, value in half:
                    b.put(row, {b"cf:q": value})
            table.flush()


def _rows(table) -> dict[bytes, bytes]:
    return {k: v[b"cf:q"] for k, v in table.scan()}


# -- the injector ------------------------------------------------------------------


def test_reads_fail_by_kind_path_and_count(tmp_path):
    fs = FaultFileSystem(str(tmp_path))
    fs.write_bytes("a.sf", b"A" * 100)
    fs.write_bytes("b.log", b"B" * 100)
    fs.injector.fail("read", 2, path="*.sf")
    assert fs.read_bytes("b.log") and fs.read_bytes("a.sf") and fs.read_bytes("b.log")
    with pytest.raises(InjectedFault) as info:
        fs.read_bytes("a.sf")  # the second read of a .sf, whatever else was read
    assert info.value.filename == fs.local_path("a.sf") and info.value.errno == errno.EIO
    assert fs.read_bytes("a.sf") == b"A" * 100  # only that one failed
    f = fs.open_read("a.sf")  # reads of an opened file count one by one
    fs.injector.fail("read", 2, path="*a.sf", persistent=True)
    assert f.read_at(10, 5) == b"A" * 10
    for _ in range(2):
        with pytest.raises(InjectedFault):
            f.read_at(10, 20)
    f.close()
    fs.injector.disarm()
    for kind, call in (("open", lambda: fs.open_read("b.log")), ("list", lambda: fs.listdir("")),
                       ("stat", lambda: fs.exists("a.sf")), ("stat", lambda: fs.size("b.log"))):
        fs.injector.fail(kind, 1, error=errno.ENOSPC)
        with pytest.raises(InjectedFault) as info:
            call()
        assert info.value.errno == errno.ENOSPC
        fs.injector.disarm()
    assert fs.listdir("") == ["a.sf", "b.log"] and fs.size("b.log") == 100
    with pytest.raises(ValueError, match="kind"):
        fs.injector.fail("peek", 1)


# -- a read failing mid-scan ---------------------------------------------------------


def _scans(table):
    return {
        "batches": lambda: (b.num_rows for b in table.scan_batches(batch_size=40)),
        "cells": lambda: (b.num_rows for b in table.scan_batches(batch_size=40, output="cells")),
        "reverse": lambda: (1 for _ in table.scan(reverse=True)),
        "cell-path": lambda: (1 for _ in table.scan(path="cell")),
        "parallel": lambda: (b.num_rows for b in ParallelScanner(table, threads=2, queue_size=1).scan(batch_size=40)),
    }


@pytest.mark.parametrize("scan", ["batches", "cells", "reverse", "cell-path", "parallel"])
def test_a_read_failing_mid_scan_raises_and_loses_nothing(tmp_path, scan):
    root = str(tmp_path / "r")
    _table(root)
    fs = FaultFileSystem(root)
    with storage.Connection(root, filesystem=fs, block_cache_size=0) as conn:
        table = conn.table("t")
        before = fs.injector.counts["read"]
        assert sum(_scans(table)[scan]()) == len(ROWS)
        reads = fs.injector.counts["read"] - before  # store file reads of one clean scan
        fs.injector.fail("read", max(2, reads // 2), path="*.sf")  # half way through them
        stream = _scans(table)[scan]()
        got = 0
        outcome: list = []

        def drain() -> None:
            nonlocal got
            try:
                for n in stream:
                    got += n
                outcome.append("complete")
            except Exception as exc:  # noqa: BLE001 - the test looks at what came out
                outcome.append(exc)

        worker = threading.Thread(target=drain, daemon=True)
        worker.start()
        worker.join(60)
        assert not worker.is_alive(), "the scan hung after a failed read"
        error = outcome[0]
        assert isinstance(error, OSError) and ".sf" in str(error), repr(error)  # one error, naming the file
        assert got < len(ROWS) and fs.injector.failures == 1
        fs.injector.disarm()
        assert _rows(table) == ROWS  # healed: the same connection reads every row
        assert sum(_scans(table)[scan]()) == len(ROWS)
        table.check()
    with storage.connect(root) as plain:
        assert _rows(plain.table("t")) == ROWS


@pytest.mark.parametrize("kind", ["open", "read", "list", "stat"])
def test_a_failed_read_while_opening_is_one_error_and_the_table_reopens_whole(tmp_path, kind):
    root = str(tmp_path / "r")
    _table(root)
    for n in (1, 2, 3, 5, 8):
        fs = FaultFileSystem(root)
        fs.injector.fail(kind, n)
        try:
            with storage.Connection(root, filesystem=fs, block_cache_size=0) as conn:
                assert _rows(conn.table("t")) == ROWS  # no failure reached, or it cost nothing
        except (OSError, StorageError) as exc:
            assert root in str(exc) or getattr(exc, "filename", None), repr(exc)
        with storage.connect(root) as plain:
            assert _rows(plain.table("t")) == ROWS


# -- delete_table ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["rename", "sync", "delete", "stat", "list"])
def test_a_failed_delete_table_leaves_the_table_whole_or_gone(tmp_path, kind):
    for n in (1, 2, 3):
        root = str(tmp_path / f"{kind}-{n}")
        _table(root)
        fs = FaultFileSystem(root)
        conn = storage.Connection(root, filesystem=fs, block_cache_size=0)
        assert _rows(conn.table("t")) == ROWS  # opened: deleting it moves it aside first
        fs.injector.fail(kind, n)
        try:
            conn.delete_table("t")
        except (OSError, StorageError):
            fs.injector.disarm()
            if b"t" in conn.tables():  # refused: the table is whole and still works
                table = conn.table("t")
                assert _rows(table) == ROWS
                table.put(b"after", {b"cf:q": b"1"})
                assert table.row(b"after") == {b"cf:q": b"1"}
        fs.injector.disarm()
        try:
            conn.delete_table("t")
        except TableNotFound:
            pass
        conn.close()
        with storage.connect(root) as plain:
            assert plain.tables() == []
            plain.create_table("t", FAMILIES).put(b"r", {b"cf:q": b"v"})
            assert _rows(plain.table("t")) == {b"r": b"v"}


# -- abort_load ---------------------------------------------------------------------------


def _stage(table_fs: FileSystem, job: str) -> list:
    regions, families = table_regions(table_fs)
    task = BulkLoadTask(table_fs, job, "task0", regions, families, timestamp=5)
    keys = [b"b%04d" % i for i in range(30)]
    task.add(pa.record_batch({"key": pa.array(keys, pa.binary()), "cf:q": pa.array(keys, pa.binary())}))
    return task.finish()


@pytest.mark.parametrize("kind", ["create", "write", "sync", "delete", "stat", "list"])
def test_a_failed_abort_load_keeps_the_table_and_can_be_retried(tmp_path, kind):
    for n in (1, 2):
        root = str(tmp_path / f"{kind}-{n}")
        _table(root)
        fs = FaultFileSystem(root)
        table_fs = fs.sub("t")
        _stage(table_fs, "job1")
        fs.injector.fail(kind, n)
        try:
            assert abort_load(table_fs, "job1") is True
        except (OSError, StorageError):
            pass
        fs.injector.disarm()
        assert abort_load(table_fs, "job1") is True  # a retry finishes the abort
        assert not table_fs.exists(f"{STAGING_DIR}/job1")
        with storage.connect(root) as plain:
            assert _rows(plain.table("t")) == ROWS  # nothing of the aborted job, nothing lost


def test_abort_load_of_a_committed_job_is_refused_even_when_a_stat_fails(tmp_path):
    root = str(tmp_path / "r")
    _table(root)
    fs = FaultFileSystem(root)
    table_fs = fs.sub("t")
    _stage(table_fs, "job1")
    write_journal(table_fs, Journal("job1", "append", {}))  # committed, not yet rolled forward
    fs.injector.fail("stat", 1, path="*.commit")
    with pytest.raises(InjectedFault):  # an unanswered question is not a "no journal"
        abort_load(table_fs, "job1")
    fs.injector.disarm()
    assert abort_load(table_fs, "job1") is False
    assert table_fs.listdir(f"{STAGING_DIR}/job1") == ["task0"]  # what recovery will move into place


# -- pins ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["create", "write", "sync", "rename", "list", "delete"])
def test_a_pin_write_either_pins_whole_or_raises(tmp_path, kind):
    for n in (1, 2):
        fs = FaultFileSystem(str(tmp_path / f"{kind}-{n}"))
        table_fs = fs.sub("t")
        table_fs.makedirs(PINS_DIR)
        table_fs.write_bytes(f"{PINS_DIR}/0000000000001-old.pin", b"{}")  # expired: write_pin drops it
        fs.injector.fail(kind, n)
        try:
            pin = write_pin(table_fs, ["regions/r/cf/1.sf"], ["regions/r/wal/1.wal"], ttl_seconds=60)
        except (OSError, StorageError):
            pin = None
        fs.injector.disarm()
        pins = live_pins(table_fs)
        if pin is not None:  # written: named and whole
            assert pins == [{"expires_ms": int(pin.split("-")[0]), "files": ["regions/r/cf/1.sf"],
                             "wal": ["regions/r/wal/1.wal"], "owner": own_identity()}]
        else:  # failed: an error, and at most a whole pin left (it only keeps files longer)
            assert all(p["files"] == ["regions/r/cf/1.sf"] for p in pins)
        assert not [n for n in table_fs.listdir(PINS_DIR) if not n.endswith(".pin")]  # no half-written pin


def test_a_failed_pin_release_keeps_the_pin_until_a_release_succeeds(tmp_path):
    fs = FaultFileSystem(str(tmp_path))
    table_fs = fs.sub("t")
    pin = write_pin(table_fs, ["regions/r/cf/1.sf"], [], ttl_seconds=60)
    fs.injector.fail("delete", 1, path="*.pin")
    release_pin(table_fs, pin)  # best effort: the pin expires on its own
    assert [p["files"] for p in live_pins(table_fs)] == [["regions/r/cf/1.sf"]]
    release_pin(table_fs, pin)
    assert live_pins(table_fs) == []


def test_a_failed_pin_write_on_a_writable_root_is_an_error_not_a_silent_no_pin(tmp_path):
    fs = FaultFileSystem(str(tmp_path))
    fs.injector.fail("rename", 1)
    with pytest.raises(InjectedFault):
        write_pin(fs.sub("t"), ["regions/r/cf/1.sf"], [], ttl_seconds=60)


# -- the WAL kept as segment objects ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["create", "write", "list", "stat"])
@pytest.mark.parametrize("policy", ["each", "none"])
def test_a_failed_segment_write_loses_no_acknowledged_record(tmp_path, kind, policy):
    for n in (1, 2, 4, 7):
        fs = FaultFileSystem(str(tmp_path / f"{kind}-{policy}-{n}"), can_append=False)
        fs.injector.fail(kind, n)
        acked: list[int] = []
        writer = None
        try:
            writer = SegmentWalWriter(fs, "wal/1.wal", policy)
            for seq in range(1, 12):
                writer.append(seq, [(b"r%d" % seq, b"cf", b"q", seq, 4, b"v")])
                if policy == "none" and seq % 3 == 0:
                    writer.sync()
                    acked = list(range(1, seq + 1))
                elif policy == "each":
                    acked.append(seq)
            writer.close()
            acked = list(range(1, 12))
        except (OSError, StorageError):
            if writer is not None:
                with pytest.raises((OSError, StorageError)):  # poisoned: no record after the failure
                    writer.append(99, [(b"z", b"cf", b"q", 1, 4, b"v")])
        fs.injector.disarm()
        if not fs.exists("wal/1.wal"):
            assert acked == []
            continue
        replayed = [r.seq_id for r in WalReader(fs, "wal/1.wal")]
        assert replayed[: len(acked)] == acked and replayed == sorted(replayed)
        assert set(replayed) <= set(range(1, 12))


def test_a_table_with_a_segmented_wal_survives_failed_writes(tmp_path):
    for kind in ("create", "write", "rename", "delete"):
        for n in (3, 9, 20):
            root = str(tmp_path / f"{kind}-{n}")
            with storage.Connection(root, filesystem=FaultFileSystem(root, can_append=False)) as conn:
                conn.create_table("t", FAMILIES, split_keys=[b"m"])
            fs = FaultFileSystem(root, can_append=False)
            fs.injector.fail(kind, n)
            acked: dict[bytes, bytes] = {}
            try:
                with storage.Connection(root, filesystem=fs, block_cache_size=0) as conn:
                    table = conn.table("t")
                    for i in range(30):
                        row = b"%s%03d" % (b"az"[i % 2:i % 2 + 1], i)
                        table.put(row, {b"cf:q": b"v%d" % i})
                        acked[row] = b"v%d" % i
                        if i == 14:
                            table.flush()
            except (OSError, StorageError):
                pass
            healed = FaultFileSystem(root, can_append=False)
            with storage.Connection(root, filesystem=healed, block_cache_size=0) as conn:
                found = _rows(conn.table("t"))
            assert all(found.get(row) == value for row, value in acked.items()), (kind, n)
