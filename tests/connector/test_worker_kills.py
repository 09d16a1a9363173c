"""The engine worker SIGKILLed for real in the middle of a read, of a write (every SaveMode) and at
a bulk load's commit point; and a bulk load's process killed before its journal.

Each test checks two things: every acknowledged write is there (the table is exactly its old
state or its new one, never half a write, and nothing staged is left behind), and what the user
saw was one line.  The commit-point kill is retried up to ``REGIONSCAN_KILL_TRIALS`` times
(default 3) until it lands between the journal and the answer.
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import storage
from serde_tables import KAB_SERDE, kab_options, write_kab_table

pytestmark = pytest.mark.spark

DDL = "k STRING, a STRING, b INT"
SERDE = KAB_SERDE
OLD = [(f"old{i:03d}", "x", i) for i in range(20)]
TRIALS = max(1, int(os.environ.get("REGIONSCAN_KILL_TRIALS", "3")))


@pytest.fixture(scope="module")
def jvm(spark):
    from connector.session import jvm_source_loaded

    assert jvm_source_loaded(spark), "the suite's session must carry the JVM source (javac is on this machine)"
    return spark._jvm.regionscan.spark


def _embedded(root, name="t"):
    """The table's rows as the engine reads them (None: there is no such table)."""
    conn = storage.connect(root, read_only=True)
    try:
        if not conn.is_table_available(name):
            return None
        return sorted(tuple(SERDE.deserialize(r)) for r in conn.table(name).scan(columns=SERDE.scan_columns))
    finally:
        conn.close()


def _leftovers(root, name="t"):
    """Staged files, staging locks and commit receipts left under the table (abort markers are
    expected: they tell late task attempts of an aborted job to discard their files)."""
    out = []
    for base, _, files in os.walk(os.path.join(root, name, ".staging")):
        out.extend(os.path.join(base, f) for f in files if not f.endswith(".aborted"))
    journals = os.path.join(root, name, "bulkload")
    out.extend(os.listdir(journals) if os.path.isdir(journals) else [])
    return out


def _live_worker(spark, jvm, root, name="t"):
    """The pid of this JVM's engine worker, started by a small read."""
    spark.read.format("regionscan").options(**kab_options(root, name)).load().where("k < 'a'").count()
    pid = jvm.WorkerProcess.currentPid()
    assert pid > 0
    return pid


def _one_line(err) -> str:
    text = str(err.value)
    assert len(text.strip().splitlines()) == 1, text[:3000]
    assert "Traceback" not in text and "\tat " not in text
    return text


def _killing_rows(pid: int, at: int):
    """Rows ``new<i>``; the partition holding row ``at`` SIGKILLs process ``pid`` once it has
    handed on ``at`` rows (the write's stream to the worker is open by then), then goes on."""

    def gen(part):
        import os as _os
        import signal as _signal
        import time as _time

        for i in part:
            if i == at:
                _time.sleep(2)  # the task takes in what is buffered: its stream to the worker is open
                _os.kill(pid, _signal.SIGKILL)
                _time.sleep(1)  # the worker is gone before the task sends its next batch
            yield (f"new{i:05d}", "n" * 200, i)

    return gen


def _killed_mid_write(spark, pid, total=20_000):
    rdd = spark.sparkContext.parallelize(range(total), 2).mapPartitions(_killing_rows(pid, 6_000))
    return spark.createDataFrame(rdd, DDL)


def _written(before, mode, total=20_000):
    """The table after the write of :func:`_killed_mid_write` succeeded (its tasks went to a new worker)."""
    new = [(f"new{i:05d}", "n" * 200, i) for i in range(total)]
    return sorted(new if mode == "overwrite" or before is None else before + new)


@pytest.mark.parametrize("mode, exists", [("append", True), ("overwrite", True), ("errorifexists", False),
                                           ("ignore", False)])
def test_a_worker_killed_mid_write_fails_in_one_line_and_leaves_the_table_as_it_was(spark, jvm, tmp_path, mode,
                                                                                    exists):
    root = str(tmp_path / "root")
    write_kab_table(root, "seed", OLD)  # a table to start the worker with
    if exists:
        write_kab_table(root, "t", OLD)
    before = _embedded(root)
    pid = _live_worker(spark, jvm, root, "seed")
    df = _killed_mid_write(spark, pid)
    try:
        # one region: a newtable of more samples the DataFrame's keys first, a pass of its own that
        # would run the killing rows before the write does
        df.write.format("regionscan").options(**kab_options(root, newtable="1")).mode(mode).save()
    except Exception as exc:  # noqa: BLE001 - what the user sees is checked below
        failure = exc
    else:
        # the kill came before a task opened its stream: the task went to a new worker, and the
        # write is whole (Spark may run a task again; the table is its new state, nothing less)
        assert _embedded(root) == _written(before, mode) and _leftovers(root) == []
        return
    err = pytest.ExceptionInfo.from_exception(failure)
    text = _one_line(err)
    assert type(err.value).__name__ == "QueryExecutionException", text
    assert f"regionscan engine worker (pid {pid}) died (exit" in text and "during the write of task" in text
    assert _embedded(root) == before  # the old rows, or (created by this write) no table at all
    assert _leftovers(root) == []
    assert jvm.WorkerProcess.currentPid() not in (-1, pid)  # the abort went to a new worker


def _kill_at_commit_point(table_dir: str, pid: int, stop: threading.Event, hit: list) -> None:
    """SIGKILL ``pid`` the moment a journal (the commit point) appears under ``table_dir``."""
    journals = os.path.join(table_dir, "bulkload")
    while not stop.is_set():
        try:
            names = os.listdir(journals)
        except FileNotFoundError:
            names = []
        if any(n.endswith(".commit") for n in names):
            os.kill(pid, signal.SIGKILL)
            hit.append(time.monotonic())
            return
        time.sleep(0.0005)


def test_a_worker_killed_at_the_commit_point_reports_the_committed_load(spark, jvm, tmp_path):
    """Killed after the journal, before its answer: the load is in, so the write succeeds (a
    failure here made users re-run appends that were already applied)."""
    rows = [(f"k{i:04d}", f"v{i}", i) for i in range(4000)]
    splits = [f"k{i:04d}".encode() for i in range(100, 4000, 100)]  # 40 regions: a long roll-forward
    for trial in range(TRIALS):
        root = str(tmp_path / f"root{trial}")
        write_kab_table(root, "t", OLD, splits)
        pid = _live_worker(spark, jvm, root)
        decided = jvm.RegionScanBatchWrite.decidedAfterDeath()
        stop, hit = threading.Event(), []
        killer = threading.Thread(target=_kill_at_commit_point, args=(os.path.join(root, "t"), pid, stop, hit))
        killer.start()
        try:
            spark.createDataFrame(rows, DDL).repartition(2).write.format("regionscan").options(
                **kab_options(root)).mode("append").save()  # no exception: the commit is reported as it is
        finally:
            stop.set()
            killer.join()
        assert _embedded(root) == sorted(OLD + rows)  # every row, once, with the journal applied by readers
        with storage.connect(root) as conn:  # a writer's open rolls a journal left mid-way forward
            conn.table("t")
        assert _embedded(root) == sorted(OLD + rows)
        assert _leftovers(root) == []
        if hit and jvm.RegionScanBatchWrite.decidedAfterDeath() > decided:
            return  # the kill landed between the commit point and the answer
    pytest.fail(f"in {TRIALS} trials no kill landed between the commit point and its answer")


def test_a_worker_killed_mid_read_fails_in_one_line_naming_its_pid_and_log(spark, jvm, tmp_path):
    from pyspark.sql import functions as F

    root = str(tmp_path / "root")
    conn = storage.connect(root)
    table = conn.create_table("big", {"c": {}}, settings={"wal_sync": "none"})
    with table.batch() as b:
        for i in range(2000):
            key, cells = SERDE.serialize({"k": f"r{i:05d}", "a": "x" * 20_000, "b": i})
            b.put(key, cells)
    table.flush()
    conn.close()
    # batches of 10 rows of 20 KB: the worker is still sending when the task stops reading and is killed
    df = (spark.read.format("regionscan")
          .options(**kab_options(root, "big"), **{"hbase.spark.query.cachedrows": "10"}).load())
    pid = _live_worker(spark, jvm, root, "big")

    def slow_then_kill(rows):
        import os as _os
        import signal as _signal
        import time as _time

        for i, row in enumerate(rows):
            if i == 0:
                _time.sleep(1)  # the sockets fill: the worker blocks mid-stream
                _os.kill(pid, _signal.SIGKILL)
            yield row.k

    with pytest.raises(Exception) as err:
        df.select("k", "a").rdd.mapPartitions(slow_then_kill).collect()
    text = _one_line(err)
    assert f"regionscan engine worker (pid {pid}) died (exit" in text and "during a read" in text
    log = text.split("(log: ", 1)[1].split(",", 1)[0]
    assert os.path.basename(log).startswith("regionscan-engine-worker-") and os.path.exists(log)
    got = df.select("k", F.length("a").alias("n")).collect()  # a new worker reads every row
    assert sorted((r.k, r.n) for r in got) == [(f"r{i:05d}", 20_000) for i in range(2000)]


_STAGE_AND_WAIT = textwrap.dedent("""
    import sys, time
    from storage.engine import BulkLoadTask, hold_staging, table_regions
    from storage.vfs.fs import FileSystem
    import pyarrow as pa

    table_fs = FileSystem(sys.argv[1]).sub("t")
    job = sys.argv[2]
    hold_staging(table_fs, job)  # held until this process ends
    regions, families = table_regions(table_fs)
    task = BulkLoadTask(table_fs, job, "p0", regions, families, timestamp=1)
    task.add(pa.record_batch([pa.array([b"z1", b"z2"]), pa.array([b"1", b"2"])], names=["key", "c:a"]))
    task.finish()
    print("staged", flush=True)
    time.sleep(600)  # killed here: after staging, before any commit
""")


def _staging_process(root, job):
    proc = subprocess.Popen([sys.executable, "-c", _STAGE_AND_WAIT, root, job],
                            stdout=subprocess.PIPE, text=True, cwd=str(paths.REPO))
    assert proc.stdout.readline().strip() == "staged"
    return proc


def test_a_bulk_load_killed_before_its_journal_leaves_nothing_after_the_next_open(tmp_path):
    """No Spark: an embedded bulk load holding its staging lock is SIGKILLed after staging; the next
    writer's open deletes its folder, but not the folder of a load whose holder still runs."""
    root = str(tmp_path / "root")
    write_kab_table(root, "t", OLD)
    killed = _staging_process(root, "job-killed")
    alive = _staging_process(root, "job-alive")
    try:
        staging = os.path.join(root, "t", ".staging")
        assert os.path.isdir(os.path.join(staging, "job-killed", "p0"))
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        with storage.connect(root) as conn:
            conn.table("t")  # a writer's open
        assert not os.path.exists(os.path.join(staging, "job-killed"))
        assert not os.path.exists(os.path.join(staging, "job-killed.lock"))
        assert os.path.isdir(os.path.join(staging, "job-alive", "p0"))  # its holder runs: kept
    finally:
        alive.kill()
        alive.wait()
    with storage.connect(root) as conn:
        conn.table("t")
    assert not os.path.exists(os.path.join(staging, "job-alive"))
    assert _embedded(root) == sorted(OLD)  # nothing of either load is in the table


def test_a_commit_cut_short_after_its_journal_stays_provably_committed(tmp_path):
    """No Spark: a committer that stops right after its commit point (the journal, as a kill there
    leaves it) and whose journal the next open rolls forward still reads as committed, from the
    receipt that roll-forward leaves; a job that never reached its journal does not."""
    from storage.engine import BulkLoadTask, load_committed, lock_table, prepare_commit, table_regions
    from storage.region.load_journal import receipt_path
    from storage.vfs.fs import FileSystem
    import pyarrow as pa

    root = str(tmp_path / "root")
    write_kab_table(root, "t", OLD)
    table_fs = FileSystem(root).sub("t")
    regions, families = table_regions(table_fs)

    def staged(job):
        task = BulkLoadTask(table_fs, job, "p0", regions, families, timestamp=1)
        key, cells = SERDE.serialize({"k": f"{job}-row", "a": "v", "b": 1})
        task.add(pa.record_batch([pa.array([key]), pa.array([cells[b"c:a"]])], names=["key", "c:a"]))
        return task.finish()

    files = staged("job-cut")
    staged("job-unborn")
    lock = lock_table(table_fs, "job-cut")
    prepare_commit(table_fs, "job-cut", files, "append", receipt=True)  # the commit point, then "killed"
    lock.release()
    assert load_committed(table_fs, "job-cut") and not load_committed(table_fs, "job-unborn")
    with storage.connect(root) as conn:  # the next writer's open rolls the journal forward
        assert conn.table("t").row(SERDE.serialize({"k": "job-cut-row"})[0]) != {}
    assert not os.listdir(os.path.join(root, "t", "bulkload"))  # the journal is gone ...
    assert load_committed(table_fs, "job-cut", forget=True)  # ... and the receipt says it committed
    assert not table_fs.exists(receipt_path("job-cut")) and not load_committed(table_fs, "job-cut")
