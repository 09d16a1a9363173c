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
