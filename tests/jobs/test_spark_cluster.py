"""A job on separate executor processes (Spark's local-cluster master) reads one partition per region
through the JVM source.

The job runs as its own Python process, the way spark-submit runs a job:
it never imports ``connector`` or registers anything; it gets the JVM
source's jar as ``spark.jars`` (what ``spark-submit --jars`` does) and the
Python of its engine workers as ``spark.regionscan.python``.  It checks that
``format("regionscan")`` is the JVM source (a ``BatchScan`` in the plan, not
the Python source) and that each executor JVM read its partitions through
an engine worker of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import storage
from spark_environment import spark_environment
from connector.worker import build as jvm_build
from jobs.demo import load_sample_table

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = textwrap.dedent(
    """
    import json, os, sys
    from pyspark.sql import SparkSession

    root, out, jar = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
             .config("spark.executor.memory", "512m")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .config("spark.jars", jar)
             .config("spark.regionscan.python", sys.executable)
             .getOrCreate())
    df = (spark.read.format("regionscan")
          .option("root", root).option("table", "sample")
          .option("hbase.columns.mapping", "k INT :key, n INT cf:n, s STRING cf:s")
          .option("regionscan.pack.splits", "false")  # one task per region split, not packed by size
          .load())

    def engine_workers(parent):
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if ppid == parent and b"connector.engine_worker" in cmd:
                found.append(int(pid))
        return found

    def describe(index, rows):
        keys = [r.k for r in rows]
        with open(f"/proc/{os.getppid()}/stat") as f:  # the worker daemon's parent: the executor JVM
            executor = int(f.read().split()[3])
        yield (index, len(keys), min(keys) if keys else None, max(keys) if keys else None, executor,
               engine_workers(executor))

    parts = df.rdd.mapPartitionsWithIndex(describe).collect()
    positive = df.where("n > 20000")  # a quarter of the rows: selective enough to be pushed
    json.dump({"parts": parts, "partitions": df.rdd.getNumPartitions(), "positive": positive.count(),
               "plan": positive._jdf.queryExecution().executedPlan().toString()}, open(out, "w"))
    spark.stop()
    """
)


def test_one_partition_per_region_on_separate_executors(tmp_path):
    root = str(tmp_path / "root")
    conn = storage.connect(root)
    table = load_sample_table(conn, "sample", 4000, 4, value_size=20)
    table.flush()
    regions = table.regions()
    conn.close()
    script = tmp_path / "job.py"
    script.write_text(JOB)
    out = tmp_path / "out.json"
    env = dict(os.environ, **spark_environment())
    jar = str(jvm_build.build_jar())
    done = subprocess.run([sys.executable, str(script), root, str(out), jar], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["partitions"] == len(regions) == 4
    bounds = [(int.from_bytes(r["start_key"] or b"\0\0\0\0", "big"), int.from_bytes(r["end_key"], "big") if r["end_key"] else 1 << 32)
              for r in regions]
    for index, count, low, high, _, _ in result["parts"]:
        lo, hi = bounds[index]
        assert count == 1000 and lo <= low and high < hi  # partition i holds exactly region i's rows
    assert len({p[4] for p in result["parts"]}) == 2, "tasks ran in two executor processes"
    for _, _, _, _, executor, workers in result["parts"]:
        assert len(workers) == 1, f"executor {executor} read through one engine worker of its own: {workers}"
    assert len({w for p in result["parts"] for w in p[5]}) == 2
    assert "BatchScan regionscan sample" in result["plan"] and "n > 20000" in result["plan"]  # the JVM source
    assert result["positive"] == sum(1 for i in range(4000) if i * 7 - 1000 > 20000)


WRITE_JOB = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    from connector.session import jvm_source_conf

    root, out = sys.argv[1], sys.argv[2]
    builder = (SparkSession.builder.master("local-cluster[2,1,1024]")
               .config("spark.executor.memory", "512m").config("spark.ui.enabled", "false"))
    for key, value in jvm_source_conf().items():  # the JVM source's jar: native writes
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    df = spark.range(5000).selectExpr("format_string('k%05d', id) AS k", "CAST(id AS INT) AS n").repartition(4)
    (df.write.format("regionscan").option("root", root).option("table", "w")
     .option("hbase.columns.mapping", "k STRING :key, n INT cf:n").option("newtable", "3").save())
    spark.conf.set("spark.sql.catalog.rs", "regionscan.spark.RegionScanCatalog")
    spark.conf.set("spark.sql.catalog.rs.root", root)
    spark.sql("INSERT INTO rs.w VALUES ('zzz', 1)")
    json.dump({"count": spark.table("rs.w").count(), "sum": spark.sql("SELECT sum(n) FROM rs.w").collect()[0][0]},
              open(out, "w"))
    spark.stop()
    """
)


def test_native_writes_stage_through_each_executors_worker(tmp_path):
    """The JVM source's write tasks run in two executor JVMs, each staging through its own engine worker."""
    from connector.worker import jvm_source_problem

    assert jvm_source_problem() is None, "this machine has a JDK (the suite needs one)"
    root = str(tmp_path / "root")
    script = tmp_path / "write_job.py"
    script.write_text(WRITE_JOB)
    out = tmp_path / "out.json"
    env = dict(os.environ, **spark_environment())
    done = subprocess.run([sys.executable, str(script), root, str(out)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(out.read_text()) == {"count": 5001, "sum": sum(range(5000)) + 1}
    with storage.connect(root, read_only=True) as conn:
        assert len(conn.table("w").regions()) == 3
