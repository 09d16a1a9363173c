"""Every flat column type read through the JVM source (``format("regionscan")``), whose column
vectors read the Arrow batch's buffers at their addresses (``StreamColumnVector``): values,
nulls, empty and multi-byte strings, extremes, in batches with nulls and batches without, one
task reading several batches (each batch's buffers are taken again). The rows Spark collects
and the aggregates its generated code computes from the batches equal Spark's own over the same
rows."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

pytestmark = pytest.mark.spark

DDL = ("k BIGINT, t TINYINT, h SMALLINT, i INT, l BIGINT, f FLOAT, d DOUBLE, dt DATE, ts TIMESTAMP, "
       "s STRING, b BINARY, m DECIMAL(15,2), w DECIMAL(38,10), z BOOLEAN")
MAPPING = ("k BIGINT :key, t TINYINT cf:t, h SMALLINT cf:h, i INT cf:i, l BIGINT cf:l, f FLOAT cf:f, "
           "d DOUBLE cf:d, dt DATE cf:dt, ts TIMESTAMP cf:ts, s STRING cf:s, b BINARY cf:b, m DECIMAL(15,2) cf:m, "
           "w DECIMAL(38,10) cf:w, z BOOLEAN cf:z")
ROWS_PER_WRITE = 4000
WRITES = 3  # each write is a store file of its own: a task reads several batches
NULL_FREE_FROM = 6000  # rows from here on have no null: their batches carry no validity bits
EPOCH = dt.datetime(1970, 1, 1)


def _row(j: int) -> tuple:
    values = (
        [-128, 127, 0][j % 3] if j < 30 else (j % 251) - 125,
        [-32768, 32767][j % 2] if j < 30 else (j * 37) % 65536 - 32768,
        [-2**31, 2**31 - 1][j % 2] if j < 30 else (j * 7919) % 2**20 - 2**19,
        [-2**63, 2**63 - 1][j % 2] if j < 30 else j * 1_000_000_007 - 2**40,
        [float("inf"), -1.5, 0.0][j % 3] if j < 30 else j / 8.0,
        [float("-inf"), 1e308, -0.5][j % 3] if j < 30 else j * 0.001 - 3.0,
        dt.date(1992, 1, 1) + dt.timedelta(days=j % 2500) if j > 1 else [dt.date(1, 1, 1), dt.date(9999, 12, 31)][j],
        EPOCH + dt.timedelta(milliseconds=j * 1_234_567_891 - 10**12),  # the SerDe keeps milliseconds
        ["", "é€𝄞", "a" * 300][j % 3] if j < 30 else f"s{j}" + "x" * (j % 17),
        [b"", b"\x00\xff" * 50][j % 2] if j < 30 else j.to_bytes(4, "big") * (j % 5),
        Decimal(f"{(j * 104729) % 10**13 - 5 * 10**12}.{j % 100:02d}"),
        Decimal(f"-{j}.{j:010d}") if j % 2 else Decimal(f"{j * 10**20}.5000000001"),
        j % 2 == 0,
    )
    if j < NULL_FREE_FROM:
        # nulls in every column, each at its own rows (a null's slot holds whatever the worker wrote)
        values = tuple(None if (j + c) % (3 + c % 4) == 0 else v for c, v in enumerate(values))
    return (j, *values)


ROWS = [_row(j) for j in range(ROWS_PER_WRITE * WRITES)]


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory) -> dict:
    opts = {"root": str(tmp_path_factory.mktemp("jvm_stream_columns") / "root"), "table": "c"}
    for n in range(WRITES):
        part = ROWS[n * ROWS_PER_WRITE:(n + 1) * ROWS_PER_WRITE]
        writer = (spark.createDataFrame(part, DDL).coalesce(1).write.format("regionscan").options(**opts)
                  .option("hbase.columns.mapping", MAPPING))
        (writer.option("newtable", "2") if n == 0 else writer.mode("append")).save()
    return opts


def _read(spark, opts):
    # Spark aggregates here itself: the batches' values are what it reads
    return (spark.read.format("regionscan").options(**opts)
            .option("regionscan.pushdown.aggregates", "false").load())


def test_every_value_and_null_reads_back(spark, table, tmp_path):
    path = tmp_path / "timeline.jsonl"
    spark.conf.set("spark.regionscan.debug.timeline", str(path))
    try:
        got = sorted((tuple(r) for r in _read(spark, table).collect()), key=lambda r: r[0])
    finally:
        spark.conf.unset("spark.regionscan.debug.timeline")
    wrong = [(c, g[c], e[c]) for g, e in zip(got, ROWS) for c in range(len(e)) if g[c] != e[c]]
    assert len(got) == len(ROWS) and not wrong, wrong[:5]
    tasks = [json.loads(x) for x in path.read_text().splitlines() if json.loads(x)["kind"] == "task"]
    assert max(t["batches"] for t in tasks) >= 2, tasks  # a task's later batches are read too


def test_generated_code_computes_what_spark_computes(spark, table):
    """Aggregates and expressions over every column, through Spark's generated code over the
    batches, equal the same query over the same rows held by Spark."""
    def query(df):
        return df.agg(
            F.count("t"), F.sum("t"), F.sum("h"), F.sum("i"), F.sum(F.col("l") % 1000), F.max("l"), F.min("l"),
            F.sum("f"), F.max("d"), F.min("d"), F.max("dt"), F.min("dt"), F.max("ts"), F.min("ts"),
            F.sum(F.length("s")), F.max("s"), F.min("s"), F.sum(F.length("b")), F.max("b"),
            F.sum("m"), F.sum("w"), F.sum(F.col("z").cast("int")), F.count("z"),
            F.sum(F.when(F.col("s").startswith("s1"), F.col("m") * F.col("i")))).collect()[0]

    expected = query(spark.createDataFrame(ROWS, DDL))
    assert query(_read(spark, table)) == expected


def test_filters_left_to_spark_see_the_same_nulls(spark, table):
    """A condition Spark tests on the batch's rows (pushdown off) keeps the rows it keeps on its own."""
    cond = "(i > 0 OR s IS NULL) AND (d < 5.0 OR b IS NOT NULL) AND m IS NOT NULL"
    df = (spark.read.format("regionscan").options(**table).option("hbase.spark.pushdown.columnfilter", "false")
          .option("regionscan.pushdown.decoded", "false").load().where(cond))
    expected = sorted(r.k for r in spark.createDataFrame(ROWS, DDL).where(cond).select("k").collect())
    assert expected and sorted(r.k for r in df.select("k").collect()) == expected
