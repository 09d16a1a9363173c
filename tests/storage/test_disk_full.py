"""A full disk, for real: an ext4 image loop-mounted by the test (tests/small_disk.py)
and filled with a ballast file, then the engine written to until it refuses.

Each probe checks the two things that matter: every acknowledged write is
there (and a write that raised is not: a client that retries must not count
twice), and what the caller saw was one line naming the space and the file.
Then the ballast goes, and writes, flushes and compactions resume on the same
connection.  The same disk full injected through the fault filesystem, at
every point of a workload, is in tests/storage/test_faults_writes.py.
"""

from __future__ import annotations

import os
import struct

import pyarrow as pa
import pytest

import storage
from storage.engine import BulkLoadTask, commit_load, table_regions
from storage.server.process import ServerProcess
from storage.vfs.fs import FileSystem
from small_disk import fill, small_disk

SETTINGS = {"wal_sync": "each", "memstore_flush_size": 64 << 10, "compaction_threshold": 3}
FAMILIES = {"cf": {"compression": "none"}}


def _one_line_naming_the_space(exc: BaseException, where) -> str:
    text = str(exc)
    assert "\n" not in text, f"more than one line: {text!r}"
    assert "no space left on device" in text.lower(), text
    assert str(where) in text, f"the error does not name the file: {text}"
    return text


def _value(i: int) -> bytes:
    return os.urandom(1500) + b"%08d" % i  # incompressible: the disk fills at a known pace


def _fill_table_until_refused(table, where, failures_wanted: int = 25, limit: int = 20_000):
    """Puts and counter increments until the disk has refused ``failures_wanted`` of them."""
    acked, refused, incs = {}, [], 0
    errors: list[str] = []
    for i in range(limit):
        row, value = b"r%06d" % i, _value(i)
        try:
            table.put(row, {b"cf:v": value})
            acked[row] = value
        except OSError as exc:
            errors.append(_one_line_naming_the_space(exc, where))
            refused.append(row)
        try:
            table.counter_inc(b"counter", b"cf:n")
            incs += 1
        except OSError as exc:
            errors.append(_one_line_naming_the_space(exc, where))
        if len(errors) >= failures_wanted:
            break
    assert len(errors) >= failures_wanted, f"the disk never filled ({len(acked)} rows written)"
    return acked, refused, incs, errors


def _check(table, acked: dict, refused: list, incs: int) -> None:
    stored = {k: v[b"cf:v"] for k, v in table.scan(row_prefix=b"r")}
    lost = [r for r in acked if stored.get(r) != acked[r]]
    assert not lost, f"{len(lost)} acknowledged rows lost, e.g. {lost[:3]}"
    applied = [r for r in refused if r in stored]
    assert not applied, f"{len(applied)} of {len(refused)} refused puts were applied anyway, e.g. {applied[:3]}"
    assert table.counter_get(b"counter", b"cf:n") == incs, "refused counter increments were applied"


def test_a_full_disk_refuses_writes_in_one_line_applies_none_of_them_and_recovers(tmp_path):
    with small_disk(tmp_path, 32) as mount:
        root = mount / "root"
        conn = storage.connect(str(root))
        table = conn.create_table("t", FAMILIES, settings=SETTINGS)
        for i in range(40):  # some store files first, so compactions have work
            table.put(b"a%04d" % i, {b"cf:v": _value(i)})
        table.flush()
        ballast = fill(mount, leave=1 << 20)
        acked, refused, incs, errors = _fill_table_until_refused(table, mount)
        _check(table, acked, refused, incs)  # still readable, on the same connection
        assert table.regions()[0]["memstore_size"] > 0  # edits the full disk keeps from being flushed
        with pytest.raises(OSError) as info:  # asked for explicitly: its own one-line error
            table.flush()
        _one_line_naming_the_space(info.value, mount)
        with pytest.raises(OSError) as info:  # a major compaction flushes first, then rewrites every file
            table.compact()
        _one_line_naming_the_space(info.value, mount)
        _check(table, acked, refused, incs)

        ballast.unlink()  # space freed: the same connection writes again
        for i in range(100):
            table.put(b"s%04d" % i, {b"cf:v": b"after"})
        assert table.counter_inc(b"counter", b"cf:n") == incs + 1
        table.flush()
        table.compact()
        assert sum(1 for _ in table.scan(row_prefix=b"s")) == 100
        conn.close()  # never raises for a WAL that failed earlier

        with storage.connect(str(root)) as again:
            t = again.table("t")
            t.check()
            _check(t, acked, refused, incs + 1)
            leftovers = [p for p, _, files in os.walk(root) for f in files if ".tmp-" in f]
            assert not leftovers


def test_a_bulk_load_on_a_full_disk_fails_in_one_line_and_commits_later(tmp_path):
    with small_disk(tmp_path, 24) as mount:
        root = mount / "root"
        with storage.connect(str(root)) as conn:
            conn.create_table("t", FAMILIES, split_keys=[b"m"]).put(b"keep", {b"cf:v": b"1"})
        table_fs = FileSystem(str(root)).sub("t")
        regions, families = table_regions(table_fs)
        keys = [b"k%06d" % i for i in range(3000)]
        values = [_value(i) for i in range(3000)]
        batch = pa.record_batch({"key": pa.array(keys, pa.binary()), "cf:v": pa.array(values, pa.binary())})
        ballast = fill(mount, leave=1 << 20)
        task = BulkLoadTask(table_fs, "full", "t0", regions, families, timestamp=5)
        with pytest.raises(OSError) as info:
            task.add(batch)
            staged = task.finish()
            commit_load(table_fs, "full", staged)
        _one_line_naming_the_space(info.value, mount)
        with storage.connect(str(root)) as conn:  # the table opens and reads, without the load
            assert dict(conn.table("t").scan()) == {b"keep": {b"cf:v": b"1"}}
        ballast.unlink()
        task = BulkLoadTask(table_fs, "again", "t0", regions, families, timestamp=5)
        task.add(batch)
        commit_load(table_fs, "again", task.finish())
        with storage.connect(str(root)) as conn:
            rows = dict(conn.table("t").scan())
            assert len(rows) == 3001 and rows[keys[-1]] == {b"cf:v": values[-1]}


def test_the_region_server_on_a_full_disk_refuses_puts_in_one_line_and_keeps_serving_reads(tmp_path):
    with small_disk(tmp_path, 32) as mount:
        root = mount / "root"
        with storage.connect(str(root)) as conn:
            conn.create_table("t", FAMILIES, settings=SETTINGS).put(b"first", {b"cf:v": b"1"})
        server = ServerProcess(str(root))
        try:
            with storage.connect(server.location) as remote:
                table = remote.table("t")
                ballast = fill(mount, leave=1 << 20)
                acked, refused, incs, errors = _fill_table_until_refused(table, mount, failures_wanted=10)
                assert table.row(b"first") == {b"cf:v": b"1"}  # reads are served meanwhile
                _check(table, acked, refused, incs)
                ballast.unlink()
                table.put(b"later", {b"cf:v": b"2"})
                assert table.row(b"later") == {b"cf:v": b"2"}
        finally:
            server.stop()
        with storage.connect(str(root)) as conn:
            _check(conn.table("t"), acked, refused, incs)
            assert struct.unpack(">q", conn.table("t").row(b"counter")[b"cf:n"])[0] == incs
