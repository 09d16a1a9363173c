"""The jobs and the Spark source on a standalone cluster with tables on an S3-compatible store.

One standalone master and worker on 127.0.0.1 (the jobs tests' shared ``standalone``
fixture, tests/jobs/conftest.py) and one local S3 server
(moto's server mode) serve ``spark-submit jobs/row_counter.py``, an export to
S3 and an import from it, and a ``format("regionscan")`` read through the
JVM source (``--jars``: each executor JVM reads through an engine worker of
its own, which inherits the executor's environment), all against ``s3://``
roots.  The daemons start
WITHOUT the AWS environment: the executors open the tables themselves from
the root URI and get the credentials only from the job, which forwards the
driver's environment as redacted ``spark.executorEnv`` settings; the secret
appears in no argument, output or log.  Reads and appends through
``spark.read/write.format("regionscan")`` use the suite's shared session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import storage
from jobs.demo import load_sample_table
from connector.worker import build as jvm_build
from standalone_spark import REPO, spark_home, submit_job

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SECRET = "k3y-only-the-driver-knows"  # the S3 server accepts any credentials


@pytest.fixture(scope="module")
def s3_cluster(s3_server, standalone):
    """The suite's standalone cluster, whose daemons have no AWS settings; jobs submitted with ``SECRET``."""
    url, env, base = standalone
    return url, {**env, "AWS_ACCESS_KEY_ID": "driver-key", "AWS_SECRET_ACCESS_KEY": SECRET,
                 "AWS_DEFAULT_REGION": "us-east-1"}, base


def _no_secret(result, base: Path) -> None:
    assert SECRET not in result.stdout + result.stderr
    for folder, _dirs, files in os.walk(base):
        for name in files:
            with open(os.path.join(folder, name), errors="replace") as f:
                assert SECRET not in f.read(), f"the secret leaked into {name}"


def test_row_counter_export_and_import_on_s3_through_spark_submit(s3_server, s3_cluster):
    url, env, base = s3_cluster
    cluster = (url, env)
    root = s3_server.root("tables")
    with storage.connect(root) as conn:
        table = load_sample_table(conn, "sample", 3000, 3)
        table.flush()
        table.put(b"\xff-unflushed", {b"cf:a": b"1"})  # only in a WAL segment: executors replay it

    counted = submit_job(cluster, "row_counter.py", "--root", root, "sample", "--expected-count", "3001")
    assert counted.returncode == 0, counted.stderr[-3000:]
    assert "ROWS=3001" in counted.stdout
    _no_secret(counted, base)

    out_dir = s3_server.root("exported", bucket=root.split("/")[2])
    exported = submit_job(cluster, "export.py", "--root", root, "sample", out_dir)
    assert exported.returncode == 0, exported.stdout[-2000:] + exported.stderr[-3000:]
    _no_secret(exported, base)

    imported = submit_job(cluster, "import_.py", "--root", root, "--create", "copy", out_dir)
    assert imported.returncode == 0, imported.stdout[-2000:] + imported.stderr[-3000:]
    _no_secret(imported, base)
    with storage.connect(root, read_only=True) as conn:
        source = {k: v for k, v in conn.table("sample").scan()}
        copy = {k: v for k, v in conn.table("copy").scan()}
    assert len(source) == 3001 and copy == source


def test_spark_read_and_append_with_an_s3_root(s3_server, spark):
    root = s3_server.root("spark")
    with storage.connect(root) as conn:
        table = conn.create_table("people", {"cf": {}}, split_keys=[b"m"])
        for name, age in [(b"alice", b"31"), (b"bob", b"42"), (b"zed", b"7")]:
            table.put(name, {b"cf:age": age})
    mapping = "key STRING :key, age STRING cf:age"
    df = (
        spark.read.format("regionscan").option("root", root).option("table", "people")
        .option("hbase.columns.mapping", mapping).load()
    )
    assert sorted(tuple(r) for r in df.collect()) == [("alice", "31"), ("bob", "42"), ("zed", "7")]
    assert df.rdd.getNumPartitions() == 2  # one partition per region, opened by the executors
    plan = df._jdf.queryExecution().toString()
    assert "BatchScan regionscan people" in plan  # the suite's session reads through the JVM source
    assert "AWS_SECRET" not in plan and "testing@" not in plan
    new = spark.createDataFrame([("carol", "25"), ("nina", "60")], "key string, age string")
    (
        new.write.format("regionscan").option("root", root).option("table", "people")
        .option("hbase.columns.mapping", mapping).mode("append").save()
    )
    with storage.connect(root, read_only=True) as conn:
        rows = {k: v[b"cf:age"] for k, v in conn.table("people").scan()}
    assert rows == {b"alice": b"31", b"bob": b"42", b"carol": b"25", b"nina": b"60", b"zed": b"7"}


JVM_READ = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    from connector.session import forwarded_environment

    root, out = sys.argv[1], sys.argv[2]
    builder = SparkSession.builder.config("spark.sql.python.filterPushdown.enabled", "true")
    for key, value in forwarded_environment({}).items():  # the credentials, as the jobs hand them on
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    df = (spark.read.format("regionscan").option("root", root).option("table", "people")
          .option("hbase.columns.mapping", "key STRING :key, age STRING cf:age")
          .option("regionscan.pack.splits", "false").load())
    older = df.where("key >= 'm'")  # a key range: the second region only
    json.dump({"rows": sorted(tuple(r) for r in df.collect()), "older": sorted(r.key for r in older.collect()),
               "count": df.count(), "partitions": df.rdd.getNumPartitions(),
               "plan": older._jdf.queryExecution().executedPlan().toString()}, open(out, "w"))
    spark.stop()
    """
)


def test_jvm_source_reads_an_s3_root_on_the_standalone_cluster(s3_server, s3_cluster, tmp_path):
    url, env, base = s3_cluster
    root = s3_server.root("jvm")
    with storage.connect(root) as conn:
        table = conn.create_table("people", {"cf": {}}, split_keys=[b"m"])
        for name, age in [(b"alice", b"31"), (b"bob", b"42"), (b"zed", b"7")]:
            table.put(name, {b"cf:age": age})
        table.flush()
        table.put(b"nina", {b"cf:age": b"60"})  # only in a WAL segment: the executor's worker replays it
        table.delete(b"bob")
    script, out = tmp_path / "jvm_read.py", tmp_path / "out.json"
    script.write_text(JVM_READ)
    submit = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", url,
              "--jars", str(jvm_build.build_jar()), "--conf", f"spark.regionscan.python={sys.executable}",
              "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false", str(script), root, str(out)]
    done = subprocess.run(submit, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    _no_secret(done, base)
    result = json.loads(out.read_text())
    assert "BatchScan regionscan people" in result["plan"]  # the JVM source, not the Python one
    assert [tuple(r) for r in result["rows"]] == [("alice", "31"), ("nina", "60"), ("zed", "7")]
    assert result["older"] == ["nina", "zed"] and result["count"] == 3
    assert "KeyRanges: 1 [[m, (open))]" in result["plan"]
    assert result["partitions"] == 2  # one task per region, read by the executors
