"""Through real Spark, the engine worker streams a table several times larger than its cache.

A pyspark script of its own (its session from ``connector.spark_session()``, the worker's
cache set small with ``spark.regionscan.worker.blockCacheSize``) reads a small table, then
a table about four times the cache three times, then the small table again.  The big reads
skip the block cache (HBase's big scans do): they evict nothing, the small table's blocks
are found again after them, and the worker's peak resident memory (VmHWM in /proc, the
interpreter and libraries included) stays within its cache plus
:data:`connector.worker.server.MEMORY_MARGIN`.  Each run's time and worker CPU seconds are
printed for the record; the memory is what is asserted.
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import storage
from connector.worker.server import MEMORY_MARGIN
from storage.engine import BulkLoadTask, commit_load, table_regions
from storage.vfs.fs import FileSystem

pytestmark = pytest.mark.spark

CACHE = 32 << 20
BIG_ROWS = int(os.environ.get("REGIONSCAN_BIG_TABLE_ROWS", "400000"))  # 6 columns of 64 bytes: ~150 MB
SMALL_ROWS = 2_000
COLUMNS = [f"c{j}" for j in range(6)]

SCRIPT = textwrap.dedent("""
    import json, sys, time
    import connector

    root, cache = sys.argv[1], sys.argv[2]
    spark = connector.spark_session("local[2]", conf={"spark.regionscan.worker.blockCacheSize": cache,
                                                      "spark.sql.shuffle.partitions": "2"})
    worker = spark._jvm.regionscan.spark.WorkerProcess
    mapping = "k BINARY :key, " + ", ".join(f"c{j} BINARY cf:c{j}" for j in range(6))

    def table(name):
        return (spark.read.format("regionscan").option("root", root).option("table", name)
                .option("hbase.columns.mapping", mapping).load())

    def stats():
        doc = json.loads(worker.statsJson(sys.executable, ""))
        with open(f"/proc/{doc['pid']}/status") as f:
            doc["memory"] = {k: int(v.split()[0]) * 1024 for k, _, v in (line.partition(":") for line in f)
                             if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile")}
        return doc

    def run(step, name, query):
        started = time.time()
        answer = query(table(name)).collect()[0]
        doc = stats()
        print(json.dumps({"step": step, "answer": [v.hex() if isinstance(v, (bytes, bytearray)) else v
                                                   for v in answer],
                          "wall_s": round(time.time() - started, 3), "worker_cpu_s": doc["cpu_s"],
                          "cache": doc["block_cache"], "memory": doc["memory"]}), flush=True)

    small = lambda df: df.selectExpr("count(*)", "max(c0)")
    big = lambda df: df.selectExpr("count(*)", "max(c1)", "min(c4)")
    run("small", "small", small)
    for i in range(3):
        run(f"big{i}", "big", big)
    run("small again", "small", small)
""")


def _load(root: str, name: str, rows: int, seed: int) -> tuple[bytes, bytes, bytes]:
    """Bulk-load ``rows`` rows of six incompressible 64-byte columns into a new four-region
    table; returns the answers the queries expect (max c0, max c1, min c4)."""
    with storage.connect(root) as conn:
        conn.create_table(name, {"cf": {}}, split_keys=[b"r%09d" % (rows * i // 4) for i in range(1, 4)])
    fs = FileSystem(root).sub(name)
    regions, families = table_regions(fs)
    task = BulkLoadTask(fs, "load", "p0", regions, families, timestamp=1)
    rng = np.random.default_rng(seed)
    best = {"c0": b"", "c1": b"", "c4": None}
    for start in range(0, rows, 100_000):
        n = min(100_000, rows - start)
        digits = pc.utf8_lpad(pc.cast(pa.array(np.arange(start, start + n)), pa.string()), 9, "0")
        keys = pc.cast(pc.binary_join_element_wise(pa.array(["r"] * n), digits, ""), pa.binary())
        offsets = pa.py_buffer(np.arange(0, (n + 1) * 64, 64, dtype=np.int32))
        values = {c: pa.BinaryArray.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(rng.bytes(n * 64))])
                  for c in COLUMNS}
        best["c0"] = max(best["c0"], pc.max(values["c0"]).as_py())
        best["c1"] = max(best["c1"], pc.max(values["c1"]).as_py())
        low = pc.min(values["c4"]).as_py()
        best["c4"] = low if best["c4"] is None else min(best["c4"], low)
        task.add(pa.RecordBatch.from_pydict({"key": keys, **{f"cf:{c}": v for c, v in values.items()}}))
    commit_load(fs, "load", task.finish())
    return best["c0"], best["c1"], best["c4"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("big_tables") / "root")
    small = _load(root, "small", SMALL_ROWS, 1)
    big = _load(root, "big", BIG_ROWS, 2)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    paths_now = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(paths.REPO)] + paths_now)
    done = subprocess.run([sys.executable, "-c", SCRIPT, root, str(CACHE)], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path_factory.mktemp("cwd")), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = {doc["step"]: doc for doc in map(json.loads, (l for l in done.stdout.splitlines() if l.startswith("{")))}
    for name, doc in steps.items():
        print(f"{name}: {doc['wall_s']} s, worker CPU {doc['worker_cpu_s']} s, VmHWM "
              f"{doc['memory']['VmHWM'] >> 20} MiB, cache {doc['cache']['used_bytes'] >> 20} MiB")
    return steps, small, big


def test_big_reads_answer_and_keep_the_worker_within_its_cache_plus_the_margin(runs):
    steps, small, big = runs
    assert steps["small"]["answer"] == [SMALL_ROWS, small[0].hex()]
    for i in range(3):
        assert steps[f"big{i}"]["answer"] == [BIG_ROWS, big[1].hex(), big[2].hex()]
    table_bytes = BIG_ROWS * len(COLUMNS) * 64
    assert table_bytes > 4 * CACHE  # the table is several times the cache
    peak = max(doc["memory"]["VmHWM"] for doc in steps.values())
    assert peak <= CACHE + MEMORY_MARGIN, (
        f"the worker's VmHWM reached {peak >> 20} MiB, over its {CACHE >> 20} MiB cache plus the "
        f"{MEMORY_MARGIN >> 20} MiB margin")


def test_big_reads_leave_the_cache_to_the_working_set(runs):
    steps, _, _ = runs
    kept = steps["small"]["cache"]
    assert kept["entries"] > 0 and kept["evictions"] == 0, kept
    for i in range(3):
        cache = steps[f"big{i}"]["cache"]
        assert (cache["entries"], cache["used_bytes"], cache["evictions"]) == \
            (kept["entries"], kept["used_bytes"], 0), cache
    again = steps["small again"]["cache"]
    assert again["hits"] - steps["big2"]["cache"]["hits"] >= kept["entries"] and again["evictions"] == 0, again
