"""Reading on any session: Python filter pushdown off, registration, the session helper."""

from __future__ import annotations

import pytest

import storage

pytestmark = pytest.mark.spark

MAPPING = "key STRING :key, a INT cf:a"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("session") / "root")
    conn = storage.connect(path)
    table = conn.create_table("t", {"cf": {}}, split_keys=[b"k10", b"k20"])
    with table.batch() as b:
        for i in range(30):
            b.put(b"k%02d" % i, {b"cf:a": b"%d" % i})
    table.flush()
    conn.close()
    return path


def _reader(spark, root):
    return (spark.read.format("regionscan").option("root", root).option("table", "t")
            .option("hbase.columns.mapping", MAPPING).option("serde", "string"))


def _read(spark, root):
    return _reader(spark, root).load()


def test_filters_give_the_right_rows_with_pushdown_off(spark, root):
    from connector.session import PUSHDOWN_CONF

    spark.conf.set(PUSHDOWN_CONF, "false")
    try:
        rows = _read(spark, root).where("key >= 'k15' AND a % 2 = 1 AND a < 25").orderBy("key").collect()
    finally:
        spark.conf.set(PUSHDOWN_CONF, "true")
    assert [r["a"] for r in rows] == [15, 17, 19, 21, 23]


def test_register_turns_pushdown_on_and_spark_session_returns_the_running_session(spark, root):
    import connector
    from connector.session import PUSHDOWN_CONF

    spark.conf.set(PUSHDOWN_CONF, "false")
    assert connector.register(spark) is True
    assert spark.conf.get(PUSHDOWN_CONF) == "true"
    assert connector.spark_session() is spark
    plan = connector.explain(_read(spark, root).where("key >= 'k25'"))
    assert plan.key_ranges == [("k25", None)]


def test_register_works_on_every_session_of_the_context_and_twice(spark, root):
    import connector
    from connector.session import PUSHDOWN_CONF

    other = spark.newSession()  # its own conf, the context's registry of Python sources
    other.conf.set(PUSHDOWN_CONF, "false")
    assert connector.register(other) is True
    assert connector.register(other) is True
    assert other.conf.get(PUSHDOWN_CONF) == "true"
    for fmt in ("regionscan", "regionscan_python"):
        rows = (other.read.format(fmt).option("root", root).option("table", "t")
                .option("hbase.columns.mapping", MAPPING).option("serde", "string").load()
                .where("key >= 'k27'").orderBy("key").collect())
        assert [r["a"] for r in rows] == [27, 28, 29]


@pytest.mark.parametrize("options, message", [
    ({"hbase.spark.query.batchsiz": "3"}, "unknown option 'hbase.spark.query.batchsiz'; did you mean 'hbase.spark.query.batchsize'?"),
    ({"serde.on.eror": "null"}, "unknown option 'serde.on.eror'; did you mean 'serde.on.error'?"),
    ({"table": "nope"}, "table nope does not exist"),
])
def test_errors_of_the_source_are_one_first_line(spark, root, options, message):
    import connector

    connector.register(spark)
    reader = _reader(spark, root)
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception) as info:
        reader.load().count()
    first = str(info.value).splitlines()[0]
    assert message in first
    assert "Traceback" not in str(info.value)


def test_a_worker_that_cannot_import_the_project_is_named_in_one_line(spark):
    import functools
    import importlib

    from jobs._spark import JobFailed, run_tasks

    task = functools.partial(importlib.import_module, "connector.no_such_module")
    with pytest.raises(JobFailed) as info:
        run_tasks(spark, task, [None])
    message = str(info.value)
    assert message.startswith("Spark job failed: Spark's Python workers cannot import regionscan "
                              "(No module named 'connector.no_such_module')")
    assert "PYSPARK_PYTHON" in message and "\n" not in message
