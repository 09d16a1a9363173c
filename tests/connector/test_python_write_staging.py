"""The Python Spark source's writes (``format("regionscan_python")``) and their staging lock.

A write's job holds its staging lock from ``writer()`` to its commit or abort, through a keeper
process (:mod:`connector.staging_keeper`): a write that fails in a task aborts and leaves
nothing (no folder, no lock, no keeper); a driver SIGKILLed mid-write, for real, in a script of
its own with its own local session, leaves a folder that the next writer's open deletes, and the
table is exactly its old state.
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import storage
from serde import create_serde
from storage.errors import TableLocked
from storage.vfs.fs import FileSystem
from serde_tables import write_table

pytestmark = pytest.mark.spark

REPO = str(paths.REPO)
MAPPING = "k STRING :key, a INT c:a"
SERDE = create_serde("binary", MAPPING)
OLD = [(f"old{i:03d}", i) for i in range(20)]


def _rows(root: str) -> list[tuple[str, int]]:
    with storage.connect(root, read_only=True) as conn:
        return sorted(tuple(SERDE.deserialize(r)) for r in conn.table("t").scan(columns=SERDE.scan_columns))


def _staging(root: str) -> list[str]:
    """What is under the table's staging folder, abort markers aside."""
    path = os.path.join(root, "t", ".staging")
    return sorted(n for n in os.listdir(path) if not n.endswith(".aborted")) if os.path.isdir(path) else []


def _keepers(root: str) -> list[int]:
    """The pids of keeper processes running for tables under ``root``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"connector.staging_keeper" in args and root.encode() in args:
            found.append(int(pid))
    return found


def _until(check, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_a_write_whose_task_fails_aborts_and_leaves_no_staging_lock_or_keeper(spark, tmp_path):
    root = str(tmp_path / "root")
    write_table(root, "t", SERDE, ({"k": k, "a": a} for k, a in OLD), [b"m"], {"c": {}})
    options = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    good = spark.createDataFrame([("new1", 1), ("zz2", 2)], "k STRING, a INT").repartition(2)
    good.write.format("regionscan_python").options(**options).mode("append").save()
    assert _rows(root) == sorted(OLD + [("new1", 1), ("zz2", 2)])
    assert _staging(root) == []  # committed: the folder and the lock file are gone
    assert _until(lambda: not _keepers(root)), _keepers(root)  # and the keeper with them

    bad = spark.createDataFrame([("new3", 3), (None, 4)], "k STRING, a INT").repartition(2)
    with pytest.raises(Exception, match="cannot encode None for column 'k'"):
        bad.write.format("regionscan_python").options(**options).mode("append").save()
    assert _rows(root) == sorted(OLD + [("new1", 1), ("zz2", 2)])
    assert _staging(root) == []  # aborted: the job's folder, the other task's files and its lock are gone
    assert _until(lambda: not _keepers(root)), _keepers(root)


# A user's script: a local session of its own; a two-partition write whose second partition stalls
# after handing over its rows, so the first partition's files are staged when the driver is killed.
SCRIPT = textwrap.dedent("""
    import os, sys, time
    import connector

    root = sys.argv[1]
    spark = connector.spark_session("local[2]", conf={"spark.regionscan.jvm": "false"})

    def stall_second(part, ids):
        for i in ids:
            yield ("new%05d" % i, i)
        if part == 1:
            time.sleep(600)

    rows = spark.sparkContext.parallelize(range(400), 2).mapPartitionsWithIndex(stall_second)
    df = spark.createDataFrame(rows, "k STRING, a INT")
    print("writing", flush=True)
    (df.write.format("regionscan_python").option("root", root).option("table", "t")
     .option("hbase.columns.mapping", "k STRING :key, a INT c:a").mode("append").save())
    print("written", flush=True)
""")


def _staged_job(root: str) -> str | None:
    """The job whose lock file is there and whose folder holds a staged store file."""
    staging = os.path.join(root, "t", ".staging")
    for name in _staging(root):
        if name.endswith(".lock"):
            job = name[: -len(".lock")]
            for _, _, files in os.walk(os.path.join(staging, job)):
                if any(f.endswith(".sf") for f in files):
                    return job
    return None


def test_a_driver_killed_mid_write_leaves_a_folder_that_the_next_writers_open_deletes(tmp_path):
    root = str(tmp_path / "root")
    write_table(root, "t", SERDE, ({"k": k, "a": a} for k, a in OLD), [b"m"], {"c": {}})
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    driver = subprocess.Popen([sys.executable, "-c", SCRIPT, root], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env, cwd=str(tmp_path), start_new_session=True)
    try:
        job = _until(lambda: _staged_job(root), 120)
        assert job, "the write never staged a file"
        assert driver.poll() is None
        staging = os.path.join(root, "t", ".staging")
        table_fs = FileSystem(root).sub("t")
        # the job's lock is held while its driver lives: the next writer's open keeps its folder
        with storage.connect(root) as conn:
            conn.table("t")
        assert os.path.isdir(os.path.join(staging, job))
        driver.send_signal(signal.SIGKILL)
        driver.wait()

        def lock_free() -> bool:
            try:
                table_fs.lock(f".staging/{job}.lock").acquire().release()
            except TableLocked:
                return False
            return True

        # the driver JVM ends with its Python driver, pyspark's daemon and the keeper with it
        assert _until(lock_free, 30), "the job's staging lock outlived its driver"
        assert os.path.isdir(os.path.join(staging, job))  # left behind by the kill ...
        with storage.connect(root) as conn:
            conn.table("t")  # ... until the next writer's open
        assert _staging(root) == []
        assert _rows(root) == sorted(OLD)  # exactly the old state
        assert _until(lambda: not _keepers(root), 10), _keepers(root)
    finally:
        try:
            os.killpg(driver.pid, signal.SIGKILL)  # whatever of the script's session outlived it
        except ProcessLookupError:
            pass
