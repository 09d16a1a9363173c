"""A job on separate executor processes (Spark's local-cluster master) reads one partition per region.

The job runs as its own Python process, the way spark-submit runs a job:
it never imports ``connector`` or registers anything, so it also shows
that ``format("regionscan")`` is found through ``pyspark_regionscan``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import storage
from conftest import spark_environment
from jobs.demo import load_sample_table

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = textwrap.dedent(
    """
    import json, os, sys
    from pyspark.sql import SparkSession

    root, out = sys.argv[1], sys.argv[2]
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
             .config("spark.executor.memory", "512m")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .getOrCreate())
    df = (spark.read.format("regionscan")
          .option("root", root).option("table", "sample")
          .option("hbase.columns.mapping", "k INT :key, n INT cf:n, s STRING cf:s")
          .load())

    def describe(index, rows):
        keys = [r.k for r in rows]
        with open(f"/proc/{os.getppid()}/stat") as f:  # the worker daemon's parent: the executor JVM
            executor = int(f.read().split()[3])
        yield (index, len(keys), min(keys) if keys else None, max(keys) if keys else None, executor)

    parts = df.rdd.mapPartitionsWithIndex(describe).collect()
    total = df.where("n > 0").count()
    json.dump({"parts": parts, "partitions": df.rdd.getNumPartitions(), "positive": total}, open(out, "w"))
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
    done = subprocess.run([sys.executable, str(script), root, str(out)], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["partitions"] == len(regions) == 4
    bounds = [(int.from_bytes(r["start_key"] or b"\0\0\0\0", "big"), int.from_bytes(r["end_key"], "big") if r["end_key"] else 1 << 32)
              for r in regions]
    for index, count, low, high, _ in result["parts"]:
        lo, hi = bounds[index]
        assert count == 1000 and lo <= low and high < hi  # partition i holds exactly region i's rows
    assert len({p[4] for p in result["parts"]}) == 2, "tasks ran in two executor processes"
    assert result["positive"] == sum(1 for i in range(4000) if i * 7 - 1000 > 0)


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
    from connector.jvm_source import jvm_source_problem

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
