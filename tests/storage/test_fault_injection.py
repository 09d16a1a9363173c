"""Every mutation path under injected I/O faults, on real files.

A workload drives puts (WAL appends), deletes, flushes, compactions, a split
and a bulk load through :class:`storage.vfs.faultfs.FaultFileSystem`, with one
operation made to fail: the Nth create, write, sync, rename or delete, for N
spread over every such operation of a clean run.  The workload stops at the
first error (as a region server aborts), optionally with a power cut that
drops unsynced data.  Then the table is reopened on the plain filesystem and
must hold every acknowledged write and no acknowledged delete; after one
major compaction no file is left that no manifest names.  Reads (open, read,
list, stat) fail the same way and must lose nothing either.  The paths this
workload does not take are in test_fault_injection_paths.py.

The trials of one test (one failure point each, each on a root of its own) spend most of their
time waiting on fsync, so they run side by side in a few threads; each checks what it checked
alone, and the test raises the first failing trial's error.
"""

from __future__ import annotations

import errno
import os
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

import storage
from storage.engine import BulkLoadTask, commit_load, table_regions
from storage.vfs.faultfs import ALL_KINDS, KINDS, READ_KINDS, FaultFileSystem, FaultInjector, InjectedFault
from storage.region.manifest import REGION_MANIFEST, TABLE_MANIFEST, RegionManifest, TableManifest
from storage.vfs.fs import FileSystem

FAMILIES = {"cf": {"block_size": 512}}
TRIALS_PER_KIND = 14  # failure points per kind and mode, spread over the clean run's operations


class Model:
    """What the workload was told succeeded: rows that must be there, rows that must not."""

    def __init__(self) -> None:
        self.acked: dict[bytes, bytes] = {}
        self.maybe: dict[bytes, bytes] = {}  # written, but the call failed: may or may not be there
        self.deleted: set[bytes] = set()
        self.maybe_deleted: set[bytes] = set()

    def check(self, found: dict[bytes, bytes]) -> None:
        for row, value in self.acked.items():
            if row in self.deleted:
                assert row not in found, f"acknowledged delete of {row!r} was undone"
            elif row in self.maybe_deleted:
                assert found.get(row, value) == value
            else:
                assert found.get(row) == value, f"acknowledged write of {row!r} lost"
        for row, value in found.items():
            assert row in self.acked or row in self.maybe, f"row {row!r} was never written"
            assert value == self.acked.get(row, self.maybe.get(row))


def _put_rows(table, model: Model, prefix: bytes, start: int, count: int, batch: bool) -> None:
    rows = {b"%s%04d" % (prefix, i): b"v%04d" % i * 8 for i in range(start, start + count)}
    if batch:
        model.maybe.update(rows)
        with table.batch() as b:
            for row, value in rows.items():
                b.put(row, {b"cf:q": value})
        model.acked.update(rows)
        return
    for row, value in rows.items():
        model.maybe[row] = value
        table.put(row, {b"cf:q": value})
        model.acked[row] = value


def _delete(table, model: Model, row: bytes) -> None:
    model.maybe_deleted.add(row)
    table.delete(row)
    model.deleted.add(row)


def _bulk_load(root: str, fs: FileSystem, model: Model) -> None:
    table_fs = fs.sub("t")
    regions, families = table_regions(table_fs)
    task = BulkLoadTask(table_fs, "job1", "task0", regions, families, timestamp=5)
    keys = [b"b%04d" % i for i in range(30)]
    values = [b"loaded%04d" % i for i in range(30)]
    task.add(pa.record_batch({"key": pa.array(keys, pa.binary()), "cf:q": pa.array(values, pa.binary())}))
    staged = task.finish()
    model.maybe.update(zip(keys, values))
    commit_load(table_fs, "job1", staged)
    model.acked.update(zip(keys, values))


def workload(root: str, fs: FileSystem, model: Model) -> None:
    """Every mutation path once or more; raises at the first failure."""
    with storage.Connection(root, filesystem=fs, block_cache_size=0) as conn:
        table = conn.table("t")
        _put_rows(table, model, b"a", 0, 12, batch=False)
        table.flush()
        _put_rows(table, model, b"a", 12, 40, batch=True)
        _delete(table, model, b"a0003")
        table.flush()
        _put_rows(table, model, b"c", 0, 40, batch=True)
        table.flush()
        table.compact(major=False)  # three files: a minor compaction merges them
        _put_rows(table, model, b"d", 0, 6, batch=False)
        table.split(b"c0010")
        _put_rows(table, model, b"e", 0, 20, batch=True)
        table.compact(major=True)
    _bulk_load(root, fs, model)
    with storage.Connection(root, filesystem=fs, block_cache_size=0) as conn:
        table = conn.table("t")
        _put_rows(table, model, b"f", 0, 5, batch=False)
        _delete(table, model, b"c0001")
        table.flush()


def _fresh_table(root: str) -> None:
    with storage.connect(root) as conn:
        conn.create_table("t", FAMILIES, split_keys=[b"b"])


def _table_files(root: str) -> tuple[set[str], set[str]]:
    """(files under the table's regions, files some manifest names or the engine keeps)."""
    fs = FileSystem(root).sub("t")
    manifest = TableManifest.load(fs)
    named, present = set(), set()
    for info in manifest.regions:
        rfs = fs.sub(f"regions/{info.region_id}")
        rm = RegionManifest.load(rfs)
        for family, files in rm.files.items():
            named.update(f"regions/{info.region_id}/{family}/{f}" for f in files)
        named.add(f"regions/{info.region_id}/{REGION_MANIFEST}")
    for dirpath, _dirs, files in os.walk(fs.local_path("")):
        rel = os.path.relpath(dirpath, fs.local_path(""))
        for f in files:
            path = f if rel == "." else f"{rel}/{f}"
            present.add(path)
    return present, named


def verify(root: str, model: Model) -> None:
    """Reopen on the plain filesystem: every acknowledged write is there, nothing leaks."""
    with storage.connect(root) as conn:
        table = conn.table("t")
        table.check()
        found = {k: v[b"cf:q"] for k, v in table.scan()}
        model.check(found)
        assert {k: v[b"cf:q"] for k, v in table.scan(path="cell")} == found
        table.compact(major=True)
        assert {k: v[b"cf:q"] for k, v in table.scan()} == found
        present, named = _table_files(root)
        wal_files = {p for p in present if "/wal/" in p}
        region_ids = {r.region_id for r in table.region_infos()}
        # a WAL file is made by its first record, and flushed ones are retired: at most
        # one per live region, none of a region that is gone
        per_region = [p.split("/")[1] for p in wal_files]
        assert set(per_region) <= region_ids and len(per_region) == len(set(per_region)), \
            f"WAL files left behind: {sorted(wal_files)}"
        # a bulk load whose commit failed is aborted: its marker (kept an hour, for task attempts
        # still running elsewhere) is all it leaves
        markers = {p for p in present if p.startswith(".staging/") and p.endswith(".aborted")}
        leaked = present - named - wal_files - markers - {TABLE_MANIFEST, ".lock"}
        assert not leaked, f"files no manifest names: {sorted(leaked)}"
    with storage.connect(root) as conn:  # and it opens again, with the same rows
        assert {k: v[b"cf:q"] for k, v in conn.table("t").scan()} == found


def _clean_counts(tmp_path) -> dict[str, int]:
    root = str(tmp_path / "clean")
    _fresh_table(root)
    fs = FaultFileSystem(root)
    model = Model()
    workload(root, fs, model)
    verify(root, model)
    return dict(fs.injector.counts)


@pytest.fixture(scope="module")
def clean_counts(tmp_path_factory):
    return _clean_counts(tmp_path_factory.mktemp("clean"))


TRIAL_THREADS = 4
"""Trials of one test run at once: enough to overlap their fsyncs on two cores."""


def _each_at_once(points: list[int], trial) -> list:
    """``trial(n)`` for each failure point, side by side; their results in order, or the error of
    the first point (in order) whose trial raised, once all have ended."""
    with ThreadPoolExecutor(TRIAL_THREADS) as pool:
        futures = [pool.submit(trial, n) for n in points]
    for future in futures:
        future.result()  # raises that trial's error
    return [future.result() for future in futures]


def _points(total: int) -> list[int]:
    """Up to TRIALS_PER_KIND failure points spread over 1..total, first and last included."""
    if total <= TRIALS_PER_KIND:
        return list(range(1, total + 1))
    step = (total - 1) / (TRIALS_PER_KIND - 1)
    return sorted({1 + round(i * step) for i in range(TRIALS_PER_KIND)})


def test_the_clean_run_exercises_every_kind(clean_counts):
    for kind in ALL_KINDS:
        assert clean_counts[kind] > 0, kind


@pytest.mark.parametrize("power_cut", [False, True], ids=["error", "power-cut"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_operation_loses_no_acknowledged_write(tmp_path, clean_counts, kind, power_cut):
    def trial(n: int) -> int:
        root = str(tmp_path / f"{kind}-{n}")
        _fresh_table(root)
        fs = FaultFileSystem(root)
        fs.injector.fail(kind, n, error=errno.ENOSPC if n % 2 else errno.EIO)
        model = Model()
        failed = 0
        try:
            workload(root, fs, model)
        except (OSError, storage.errors.StorageError):
            failed = 1
        assert fs.injector.failures >= 1, f"{kind} #{n} was never reached"
        if power_cut:
            fs.injector.power_cut()
        verify(root, model)
        return failed

    assert sum(_each_at_once(_points(clean_counts[kind]), trial)) >= 1


@pytest.mark.parametrize("kind", READ_KINDS)
def test_a_failed_read_loses_no_acknowledged_write(tmp_path, clean_counts, kind):
    """A read failing anywhere in the workload (a flush, a compaction, a split, a bulk load, an open)."""
    def trial(n: int) -> int:
        root = str(tmp_path / f"{kind}-{n}")
        _fresh_table(root)
        fs = FaultFileSystem(root)
        fs.injector.fail(kind, n)
        model = Model()
        failed = 0
        try:
            workload(root, fs, model)
        except (OSError, storage.errors.StorageError) as exc:
            failed = 1
            assert root in str(exc), f"the error does not name the file: {exc!r}"
        assert fs.injector.failures >= 1, f"{kind} #{n} was never reached"
        verify(root, model)
        return failed

    assert sum(_each_at_once(_points(clean_counts[kind])[::3], trial)) >= 1


def test_a_full_disk_that_stays_full(tmp_path, clean_counts):
    """Every write from some point on fails (ENOSPC), as on a full disk."""
    def trial(n: int) -> None:
        root = str(tmp_path / f"full-{n}")
        _fresh_table(root)
        fs = FaultFileSystem(root)
        fs.injector.fail("write", n, error=errno.ENOSPC, persistent=True)
        model = Model()
        with pytest.raises((OSError, storage.errors.StorageError)):
            workload(root, fs, model)
        verify(root, model)

    _each_at_once(_points(clean_counts["write"])[1::3], trial)


def test_power_cut_drops_only_what_was_not_synced(tmp_path):
    root = str(tmp_path / "r")
    fs = FaultFileSystem(root)
    fs.makedirs("d")
    fs.makedirs("e")
    f = fs.create("d/a")
    f.write(b"durable")
    f.sync()
    h = fs.create("d/c")
    h.write(b"kept")
    h.sync()
    fs.sync_dir("d")
    f.write(b"-volatile")  # after a's last fsync
    g = fs.create("d/b")  # synced, but its directory entry never was
    g.write(b"gone")
    g.sync()
    for w in (f, g, h):
        w.close()
    fs.rename("d/c", "e/c2")  # durable on return (fsyncs e, not d)
    assert fs.injector.power_cut() == {"truncated": 1, "removed": 1}
    plain = FileSystem(root)
    assert plain.read_bytes("d/a") == b"durable"
    assert not plain.exists("d/b")
    assert plain.read_bytes("e/c2") == b"kept"
    with pytest.raises(InjectedFault):
        fs.create("d/x")


def test_injector_counts_and_fails_the_nth(tmp_path):
    injector = FaultInjector()
    fs = FaultFileSystem(str(tmp_path), injector)
    sub = fs.sub("x")
    sub.makedirs("")
    injector.fail("write", 2)
    f = sub.create("f")
    f.write(b"1234")
    with pytest.raises(InjectedFault) as info:
        f.write(b"abcd")
    f.close()
    assert info.value.errno == errno.EIO
    assert FileSystem(str(tmp_path)).read_bytes("x/f") == b"1234ab"  # the torn half
    f = sub.create("g")
    f.write(b"ok")  # only the second write failed
    f.close()
    assert injector.counts["write"] == 3 and injector.counts["create"] == 2 and injector.failures == 1


def test_a_failed_create_table_leaves_the_name_usable(tmp_path):
    """create_table under each failing operation: afterwards the table works or is absent."""
    for kind in ("create", "write", "sync", "rename"):
        for n in (1, 2, 3):  # a create renames three manifests into place
            root = str(tmp_path / f"{kind}-{n}")
            fs = FaultFileSystem(root)
            fs.injector.fail(kind, n)
            conn = storage.Connection(root, filesystem=fs)
            try:
                conn.create_table("t", FAMILIES, split_keys=[b"m"])
            except (OSError, storage.errors.StorageError):
                pass
            try:
                conn.close()
            except (OSError, storage.errors.StorageError):
                pass
            assert fs.injector.failures == 1, f"{kind} #{n} was never reached"
            with storage.connect(root) as plain:
                if b"t" in plain.tables():
                    table = plain.table("t")
                    table.put(b"r", {b"cf:q": b"v"})
                    assert table.row(b"r") == {b"cf:q": b"v"}
                if plain.fs.exists("t"):  # half-created: delete_table still removes it
                    plain.delete_table("t")
                assert not plain.fs.exists("t")
                plain.create_table("t", FAMILIES).put(b"r", {b"cf:q": b"v"})
                assert plain.tables() == [b"t"]
