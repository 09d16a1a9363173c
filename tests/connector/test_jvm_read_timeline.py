"""The JVM source's read timeline (``spark.regionscan.debug.timeline``): with the setting naming a
file, each planning request and each task of a ``format("regionscan")`` read appends one JSON
line there, whose counts match the read and whose parts add up to the task's life; unset,
nothing is written."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.spark

SETTING = "spark.regionscan.debug.timeline"
ROWS = 3000


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory) -> dict:
    opts = {"root": str(tmp_path_factory.mktemp("jvm_timeline") / "root"), "table": "t"}
    (spark.createDataFrame([(j, f"v{j}") for j in range(ROWS)], "k BIGINT, v STRING").repartition(2)
     .write.format("regionscan").options(**opts).option("hbase.columns.mapping", "k BIGINT :key, v STRING cf:v")
     .option("newtable", "3").save())
    return opts


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_each_task_and_planning_request_is_one_line(spark, table, tmp_path):
    path = tmp_path / "timeline.jsonl"
    spark.conf.set(SETTING, str(path))
    try:
        got = spark.read.format("regionscan").options(**table).load().where("v != 'x'").collect()
    finally:
        spark.conf.unset(SETTING)
    assert len(got) == ROWS
    lines = _lines(path)
    plans = [x for x in lines if x["kind"] == "plan"]
    tasks = [x for x in lines if x["kind"] == "task"]
    ops = {x["op"] for x in lines if x["kind"] == "rpc"}
    assert ops - {"schema"} == {"push"} and len(plans) == 1, lines  # the push plans a filtered scan (one request)
    assert len(tasks) == plans[0]["tasks"] >= 1
    assert sum(t["splits"] for t in tasks) == plans[0]["splits"]
    assert sum(t["rows"] for t in tasks) == ROWS and all(t["bytes"] > 0 for t in tasks)
    for t in tasks:
        parts = t["open_ms"] + t["wait_ms"] + t["convert_ms"] + t["spark_ms"]
        assert min(t["open_ms"], t["wait_ms"], t["convert_ms"], t["spark_ms"]) >= 0, t
        assert parts <= t["total_ms"] + 0.5, t


def test_nothing_is_written_when_unset(spark, table, tmp_path):
    path = tmp_path / "timeline.jsonl"
    spark.conf.set(SETTING, str(path))
    spark.conf.unset(SETTING)
    assert spark.read.format("regionscan").options(**table).load().count() == ROWS
    assert spark.read.format("regionscan").options(**table).load().where("k > 10").collect()
    assert not path.exists()
