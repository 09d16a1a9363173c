"""What a user's own pyspark script sees when the engine fails inside Spark tasks: one Python
exception whose message is the engine's line (reads, counts and writes alike), the worker log it
names holding the stack, and none of Spark's start-up notes, task stacks or progress bars mixed
into the script's output when the session comes from ``connector.spark_session()``.

The script runs as a process of its own, as a user's would: its session is started by
``connector.spark_session()``, not by the suite's fixture.
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import json
import os
import subprocess
import sys
import textwrap

import pytest

import storage
from connector.stored_mapping import remember

pytestmark = pytest.mark.spark

REPO = str(paths.REPO)

# The README's table: cells hold numbers as text, and one cell holds no number at all.
SCRIPT = textwrap.dedent("""
    import json, sys
    import connector

    root = sys.argv[1]
    spark = connector.spark_session("local[2]")
    print("script: the session is ready", flush=True)
    df = (spark.read.format("regionscan").option("root", root).option("table", "t")
          .option("hbase.columns.mapping", "key STRING :key, a INT cf:a, b STRING cf:b")
          .option("serde", "string").load())

    def attempt(op, run):
        try:
            run()
            print(json.dumps({"op": op, "type": None, "text": None}), flush=True)
        except Exception as exc:
            condition = exc.getCondition() if hasattr(exc, "getCondition") else None
            print(json.dumps({"op": op, "type": type(exc).__name__, "text": str(exc), "condition": condition}),
                  flush=True)

    attempt("read", lambda: df.collect())
    attempt("count", lambda: df.where("a > 3").count())
    rows = spark.createDataFrame([("new1", 1, "n"), (None, 2, "no key")], "key STRING, a INT, b STRING")
    attempt("write", lambda: rows.write.format("regionscan").option("root", root).option("table", "t")
            .option("hbase.columns.mapping", "key STRING :key, a INT cf:a, b STRING cf:b")
            .option("serde", "string").mode("append").save())
    spark.conf.set("spark.sql.catalog.rs", "regionscan.spark.RegionScanCatalog")
    spark.conf.set("spark.sql.catalog.rs.root", root)
    attempt("catalog_write", lambda: spark.sql("INSERT INTO rs.t VALUES (CAST(NULL AS STRING), 2, 'no key')").collect())
    print("script: done", flush=True)
""")

# What Spark prints unless told not to, none of which belongs in a script's output.
NOISE = ("NativeCodeLoader", "log4j2-defaults", "setLogLevel", "ERROR Executor", "TaskSetManager", "[Stage ",
         "Py4JJavaError", "\tat ", "Aborting task")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("task_errors") / "root")
    conn = storage.connect(root)
    table = conn.create_table("t", {"cf": {}}, split_keys=[b"g", b"p"])
    with table.batch() as batch:
        for i in range(100):
            batch.put(b"user%03d" % i, {b"cf:a": b"%d" % i, b"cf:b": b"name-%d" % i})
        batch.put(b"zbad", {b"cf:a": b"notanumber", b"cf:b": b"x"})
    conn.close()
    # the catalog (rs.t) reads the table's columns from the mapping stored with it
    remember(root, "t", {"hbase.columns.mapping": "key STRING :key, a INT cf:a, b STRING cf:b", "serde": "string"},
             replace=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    done = subprocess.run([sys.executable, "-c", SCRIPT, root], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path_factory.mktemp("cwd")), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {}
    lines = done.stdout.splitlines()
    for line in lines:
        if line.startswith("{"):
            doc = json.loads(line)
            results[doc["op"]] = doc
    return root, results, lines, done.stderr


def _named_log(text: str) -> str:
    return text.split("its log, with the stack: ", 1)[1].rstrip(")")


@pytest.mark.parametrize("op", ["read", "count"])
def test_a_decode_error_in_a_task_is_one_line_starting_with_the_engines(run, op):
    _, results, _, _ = run
    got = results[op]
    assert got["type"] == "QueryExecutionException" and got["condition"] == "REGIONSCAN_ENGINE_ERROR", got
    text = got["text"]
    assert len(text.splitlines()) == 1, text[:2000]
    assert text.startswith("DecodeError: cannot decode column 'a' of row b'zbad': value b'notanumber'"), text
    log = _named_log(text)
    with open(log, encoding="utf-8") as f:
        stack = f.read()
    assert "Traceback (most recent call last)" in stack and "serde.errors.DecodeError" in stack  # the full stack


def test_a_write_refused_in_a_task_is_one_line_and_leaves_nothing(run):
    root, results, _, _ = run
    got = results["write"]
    assert got["type"] == "QueryExecutionException", got
    text = got["text"]
    assert len(text.splitlines()) == 1, text[:2000]
    assert text.startswith("EncodeError: cannot encode None for column 'key'"), text  # the engine's reason
    with storage.connect(root, read_only=True) as conn:
        assert conn.table("t").row(b"new1") == {}  # nothing of the failed write is in the table
    staging = os.path.join(root, "t", ".staging")
    left = [n for n in os.listdir(staging) if not n.endswith(".aborted")] if os.path.isdir(staging) else []
    assert left == []


def test_a_catalog_write_refused_in_a_task_is_one_line(run):
    root, results, _, stderr = run
    got = results["catalog_write"]
    assert got["type"] == "QueryExecutionException", got
    text = got["text"]
    assert len(text.splitlines()) == 1, text[:2000]
    assert text.startswith("EncodeError: cannot encode None for column 'key'"), text
    # Spark's "ERROR Utils: Aborting task" and its stack are not on the script's stderr
    assert [line for line in stderr.splitlines() if "Aborting task" in line or line.startswith("\tat ")] == [], \
        stderr[-4000:]
    with storage.connect(root, read_only=True) as conn:
        assert conn.table("t").count() == 101  # the README's rows and zbad: nothing of the failed writes


def test_the_scripts_output_is_its_own(run):
    _, _, lines, stderr = run
    assert [line for line in lines if not line.startswith("{")] == ["script: the session is ready", "script: done"]
    noisy = [line for line in stderr.splitlines() if any(n in line for n in NOISE)]
    assert noisy == [], stderr[-4000:]
