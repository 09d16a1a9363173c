"""The jobs and the Spark source on a standalone cluster with tables on an S3-compatible store.

One standalone master and worker on 127.0.0.1 and one local S3 server
(moto's server mode) serve ``spark-submit jobs/row_counter.py``, an export to
S3 and an import from it, all against ``s3://`` roots.  The daemons start
WITHOUT the AWS environment: the executors open the tables themselves from
the root URI and get the credentials only from the job, which forwards the
driver's environment as redacted ``spark.executorEnv`` settings; the secret
appears in no argument, output or log.  Reads and appends through
``spark.read/write.format("regionscan")`` use the suite's shared session.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import storage
from jobs.demo import load_sample_table
from test_jobs_submit import _submit, cluster_environment, standalone_cluster

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SECRET = "k3y-only-the-driver-knows"  # the S3 server accepts any credentials


@pytest.fixture(scope="module")
def s3_cluster(s3_server, tmp_path_factory):
    """A standalone cluster whose daemons have no AWS settings; jobs submitted with ``SECRET``."""
    base = tmp_path_factory.mktemp("standalone-s3")
    env = {k: v for k, v in cluster_environment(base).items() if not k.startswith("AWS_")}
    with standalone_cluster(base, env) as url:
        yield url, {**env, "AWS_ACCESS_KEY_ID": "driver-key", "AWS_SECRET_ACCESS_KEY": SECRET,
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

    counted = _submit(cluster, "row_counter.py", "--root", root, "sample", "--expected-count", "3001")
    assert counted.returncode == 0, counted.stderr[-3000:]
    assert "ROWS=3001" in counted.stdout
    _no_secret(counted, base)

    out_dir = s3_server.root("exported", bucket=root.split("/")[2])
    exported = _submit(cluster, "export.py", "--root", root, "sample", out_dir)
    assert exported.returncode == 0, exported.stdout[-2000:] + exported.stderr[-3000:]
    _no_secret(exported, base)

    imported = _submit(cluster, "import_.py", "--root", root, "--create", "copy", out_dir)
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
    assert "AWS_SECRET" not in plan and "testing@" not in plan
    new = spark.createDataFrame([("carol", "25"), ("nina", "60")], "key string, age string")
    (
        new.write.format("regionscan").option("root", root).option("table", "people")
        .option("hbase.columns.mapping", mapping).mode("append").save()
    )
    with storage.connect(root, read_only=True) as conn:
        rows = {k: v[b"cf:age"] for k, v in conn.table("people").scan()}
    assert rows == {b"alice": b"31", b"bob": b"42", b"carol": b"25", b"nina": b"60", b"zed": b"7"}
