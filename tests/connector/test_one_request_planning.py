"""A scan with filters is planned by ONE worker request: the ``push`` that decides which filters
the engine applies also plans the scan for every mapped column (PROTOCOL.md, "push" with
``plan``), and each task's ``read`` narrows that plan to Spark's pruned columns
(:meth:`connector.worker.read_plan.ReadPlan.narrowed`), so the JVM sends no ``plan`` request.

* the narrowed plan is, byte for byte, the plan a ``plan`` request makes for those columns;
* tasks of a real worker process read by it the rows of the two-request planning;
* a bad narrowing is refused in one line;
* through Spark, a filtered read sends one ``push`` and no ``plan``; a read of key columns
  alone, or one without filters, still plans with ``plan``.
"""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pytest

from connector.worker import read_ops
from connector.worker.read_plan import ReadPlan
from engine_worker_process import SAMPLE_MAPPING, exchange, python_worker, sample_table
from storage.errors import InvalidArgument

SECRET = "one-request-secret"
TYPES = {"k": "integer", "n": "integer", "s": "string"}
PACKING = {"max_partition_bytes": 128 << 20, "open_cost": 4 << 20, "parallelism": 2}
# k >= 5 AND k < 90 is a key range; n % 2 = 0 and s LIKE '%1%' are evaluated on decoded rows
FILTERS = [
    {"op": "And", "children": [{"op": "GreaterThanOrEqual", "column": "k", "value": {"t": "int", "v": 5}},
                               {"op": "LessThan", "column": "k", "value": {"t": "int", "v": 90}}]},
    {"op": "Compare", "cmp": "=", "left": {"remainder": {"column": "n"}, "by": 2},
     "right": {"literal": {"t": "int", "v": 0}}},
    {"op": "StringContains", "column": "s", "value": {"t": "string", "v": "1"}},
]
READS = [(["s"], None), (["n"], 3), (["s", "k"], None), (["n", "s", "k"], 4), (["k", "n"], None)]


def _schema(names: list[str]) -> str:
    return json.dumps({"type": "struct", "fields": [{"name": n, "type": TYPES[n], "nullable": True, "metadata": {}}
                                                    for n in names]})


@pytest.fixture(scope="module")
def options(tmp_path_factory) -> dict:
    root = sample_table(str(tmp_path_factory.mktemp("one_request") / "root"), 100, 50, 3)
    return {"root": root, "table": "t", "hbase.columns.mapping": SAMPLE_MAPPING, "regionscan.pack.splits": "false"}


def _unpinned(task: dict) -> tuple:
    """A planned task's size, hosts and splits, each split without its pin (every plan pins anew)."""
    splits = read_ops.read_splits({"splits": task["splits"]})
    return task["bytes"], task["hosts"], [dataclasses.replace(s, pin_id=None) for s in splits]


def _push(options: dict) -> dict:
    return read_ops.push({"options": options, "filters": FILTERS,
                          "plan": {"schema": _schema(["k", "n", "s"]), **PACKING}})


def test_the_push_plans_the_scan_and_a_task_narrows_it_to_the_plan_of_its_columns(options):
    reply = _push(options)
    assert reply["handled"] == [0, 1, 2] and reply["decoded"], reply
    planned = reply["plan"]
    assert planned["key_columns"] == ["k"]
    alone = read_ops.plan({"options": options, "filters": FILTERS, "columns": ["s"], "schema": _schema(["s"]),
                           **PACKING})
    assert planned["splits"] == alone["splits"] == 2
    assert [_unpinned(t) for t in planned["tasks"]] == [_unpinned(t) for t in alone["tasks"]]
    full = ReadPlan.from_text(planned["read_plan"])
    assert full.output == ["k", "n", "s"] and full.hidden == ()
    for columns, limit in READS:
        narrowed = full.narrowed(columns, limit)
        req = {"options": options, "filters": FILTERS, "columns": columns, "limit": limit}
        made = ReadPlan.from_request(req, read_ops.read_schema({"schema": _schema(columns)}))
        assert narrowed.to_text() == made.to_text(), columns
        assert narrowed.output == columns and narrowed.limit == limit
    # the columns not decoded are hidden by the engine; those tested by a decoded filter alone are decoded
    s_only = full.narrowed(["s"])
    assert s_only.hidden == () and s_only.filter_only == ["n"]
    assert full.narrowed(["k"]).hidden == () and full.narrowed(["k"]).filter_only == ["n", "s"]


def test_tasks_of_a_worker_process_read_the_rows_of_the_two_request_planning(options):
    with python_worker(SECRET) as (_proc, port, _line):
        reply, _, _ = exchange(port, SECRET, {"op": "push", "options": options, "filters": FILTERS,
                                              "plan": {"schema": _schema(["k", "n", "s"]), **PACKING}})
        assert reply["ok"] and len(reply["plan"]["tasks"]) == 2, reply
        for columns, limit in READS:
            old_plan, _, _ = exchange(port, SECRET, {"op": "plan", "options": options, "filters": FILTERS,
                                                     "columns": columns, "schema": _schema(columns),
                                                     **({} if limit is None else {"limit": limit}), **PACKING})
            got, expected = [], []
            for task, old_task in zip(reply["plan"]["tasks"], old_plan["tasks"]):
                head, rows, trailer = exchange(port, SECRET, {
                    "op": "read", "read_plan": reply["plan"]["read_plan"], "columns": columns,
                    **({} if limit is None else {"limit": limit}), "splits": task["splits"]})
                assert head == {"ok": True} and trailer["ok"], (head, trailer)
                got.append(rows)
                _, rows, _ = exchange(port, SECRET, {"op": "read", "read_plan": old_plan["read_plan"],
                                                     "splits": old_task["splits"]})
                expected.append(rows)
            got_rows, expected_rows = pa.concat_tables(got), pa.concat_tables(expected)
            assert got_rows.column_names == columns and got_rows.num_rows > 0, columns
            assert got_rows.equals(expected_rows), columns
        stats, _, _ = exchange(port, SECRET, {"op": "stats"})
        assert stats["counters"].get("reads_planned_again", 0) == 0


def test_a_bad_narrowing_is_one_line(options):
    full = ReadPlan.from_text(_push(options)["plan"]["read_plan"])
    pruned = ReadPlan.from_text(read_ops.plan({"options": options, "filters": FILTERS, "columns": ["s"],
                                               "schema": _schema(["s"]), **PACKING})["read_plan"])
    cases = [
        (lambda: full.narrowed(["ss"]), "has no column 'ss' (did you mean s?)"),
        (lambda: full.narrowed("s"), "is narrowed by a list of column names"),
        (lambda: full.narrowed(["s"], -1), "is narrowed with a bad limit -1"),
        (lambda: pruned.narrowed(["s"]), "narrowed to columns must be the plan of every mapped column"),
    ]
    for call, why in cases:
        with pytest.raises(InvalidArgument) as info:
            call()
        message = str(info.value)
        assert why in message and "\n" not in message and message.startswith("a task's read plan "), message


def test_a_mapping_is_parsed_once_per_options(options):
    """A scan's planning asks for its column mapping about ten times (the table name, the SerDe,
    the schema...): parsed once per distinct options, the same immutable mapping each time; a
    mapping that does not parse fails every time, in one line."""
    from connector.source_config import SourceConfig

    first = SourceConfig.from_options(options)
    assert first.mapping() is SourceConfig.from_options(options).mapping() is first.mapping()
    assert first.with_columns(["s"]).mapping() == first.mapping()
    bad = SourceConfig((("hbase.columns.mapping", "k INT :key, n INT"), ("root", options["root"]), ("table", "t")))
    for _ in range(2):
        with pytest.raises(Exception) as info:
            bad.mapping()
        assert "\n" not in str(info.value)


# -- through Spark ---------------------------------------------------------------------------------

TIMELINE = "spark.regionscan.debug.timeline"


@pytest.fixture(scope="module")
def spark_table(spark, tmp_path_factory) -> dict:
    opts = {"root": str(tmp_path_factory.mktemp("one_request_jvm") / "root"), "table": "t"}
    (spark.createDataFrame([(j, j % 7, f"v{j}") for j in range(2000)], "k BIGINT, n INT, s STRING").repartition(2)
     .write.format("regionscan").options(**opts)
     .option("hbase.columns.mapping", "k BIGINT :key, n INT cf:n, s STRING cf:s").option("newtable", "3").save())
    return opts


def _requests(spark, path, query) -> tuple[list, list[str], list[dict]]:
    """The rows of ``query()``, the worker requests its planning sent, and its plan lines."""
    path.unlink(missing_ok=True)
    spark.conf.set(TIMELINE, str(path))
    try:
        rows = query()
    finally:
        spark.conf.unset(TIMELINE)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return rows, [x["op"] for x in lines if x["kind"] == "rpc"], [x for x in lines if x["kind"] == "plan"]


def test_a_filtered_scan_through_spark_is_planned_by_one_request(spark, spark_table, tmp_path):
    df = spark.read.format("regionscan").options(**spark_table).load()
    path = tmp_path / "timeline.jsonl"
    rows, ops, plans = _requests(spark, path, lambda: df.where("k >= 100 AND n = 3").select("s").collect())
    assert sorted(r.s for r in rows) == sorted(f"v{j}" for j in range(100, 2000) if j % 7 == 3)
    assert ops == ["push"] and len(plans) == 1 and plans[0]["with_push"], (ops, plans)
    rows, ops, _ = _requests(spark, path, lambda: df.where("n = 3").select("n", "s").limit(5).collect())
    assert len(rows) == 5 and all(r.n == 3 for r in rows) and ops == ["push"], ops
    # a scan of key columns alone is planned for them (the worker then scans the key alone)
    rows, ops, plans = _requests(spark, path, lambda: df.where("k < 30").select("k").collect())
    assert sorted(r.k for r in rows) == list(range(30)) and ops == ["push", "plan"], ops
    assert not plans[0]["with_push"]
    # without filters there is no push: the plan request alone
    rows, ops, _ = _requests(spark, path, lambda: df.select("n").collect())
    assert len(rows) == 2000 and ops == ["plan"], ops


def test_a_read_of_key_columns_alone_narrows_the_push_plan_when_the_filters_read_other_columns(options):
    """Filters that test a value column make a read of the key alone scan every mapped column
    (the rows are tested on those cells): the push says so, and its plan narrowed to the key (or
    to no column) is, byte for byte, what a ``plan`` request makes for it."""
    reply = _push(options)
    assert reply["plan"]["key_reads_narrow"] is True
    full = ReadPlan.from_text(reply["plan"]["read_plan"])
    for columns in (["k"], []):
        made = ReadPlan.from_request({"options": options, "filters": FILTERS, "columns": columns},
                                     read_ops.read_schema({"schema": _schema(columns)}))
        assert made.scan_columns is None, columns  # every mapped column scanned, as the push planned
        assert full.narrowed(columns).to_text() == made.to_text(), columns
    # key filters alone: a read of the key scans the key alone, so that read is planned for itself
    keys_only = read_ops.push({"options": options, "filters": FILTERS[:1],
                               "plan": {"schema": _schema(["k", "n", "s"]), **PACKING}})
    assert keys_only["plan"]["key_reads_narrow"] is False
    assert ReadPlan.from_request({"options": options, "filters": FILTERS[:1], "columns": ["k"]}).scan_columns == ["k"]


def test_a_plan_saved_again_unchanged_is_not_written_again_unless_another_writer_replaced_it(options, tmp_path):
    """``connector.explain`` reads the latest plan saved per options; the worker saves one per
    planned scan.  The same plan again leaves the file as it is (no write per repeated query);
    once another writer has replaced the file, the plan is written again."""
    from connector.explain import _plan_path, load_plan, save_plan, plan_for
    from connector.source_config import SourceConfig
    import os

    config = SourceConfig.from_options({**options, "regionscan.columns": "k,s"})  # options of this test alone
    plan = plan_for(dict(config.options))
    save_plan(config, plan)
    path = _plan_path(config.fingerprint)
    first = os.stat(path)
    save_plan(config, plan)
    again = os.stat(path)
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    assert load_plan(config) == plan
    other = dataclasses.replace(plan, notes=["written by another process"])
    tmp = tmp_path / "other.json"
    tmp.write_text(other.to_json())
    os.replace(tmp, path)  # as another process saves its plan
    assert load_plan(config) == other
    save_plan(config, plan)
    assert load_plan(config) == plan


def test_a_key_column_read_filtered_on_a_value_is_planned_by_the_push_alone(spark, spark_table, tmp_path):
    df = spark.read.format("regionscan").options(**spark_table).load()
    rows, ops, plans = _requests(spark, tmp_path / "timeline.jsonl",
                                 lambda: df.where("n = 3 AND k < 500").select("k").collect())
    assert sorted(r.k for r in rows) == [j for j in range(500) if j % 7 == 3]
    assert ops == ["push"] and len(plans) == 1 and plans[0]["with_push"], (ops, plans)
    rows, ops, _ = _requests(spark, tmp_path / "timeline.jsonl", lambda: df.where("s = 'v10'").count())
    assert rows == 1, rows


def test_a_query_after_a_write_sees_the_write(spark, tmp_path):
    """Nothing of a table's state outlives a query's planning: a table written between two
    queries of one DataFrame (more rows in its regions, a new store file) is read as it now is,
    by a filtered scan (planned by the push) and an unfiltered one (planned by ``plan``)."""
    opts = {"root": str(tmp_path / "root"), "table": "w",
            "hbase.columns.mapping": "k BIGINT :key, n INT cf:n, s STRING cf:s"}

    def write(first: int, last: int, mode: str) -> None:
        (spark.createDataFrame([(j, j % 7, f"v{j}") for j in range(first, last)], "k BIGINT, n INT, s STRING")
         .write.format("regionscan").options(**opts).option("newtable", "2").mode(mode).save())

    write(0, 300, "overwrite")
    df = spark.read.format("regionscan").options(**opts).load()
    filtered = lambda: sorted(r.k for r in df.where("n = 3").select("k").collect())  # noqa: E731
    assert filtered() == [j for j in range(300) if j % 7 == 3]
    assert df.count() == 300 and df.where("k >= 250").count() == 50
    write(300, 400, "append")
    assert filtered() == [j for j in range(400) if j % 7 == 3]
    assert df.count() == 400 and df.where("k >= 250").count() == 150
    assert sorted(r.s for r in df.where("k >= 395").select("s").collect()) == [f"v{j}" for j in range(395, 400)]
