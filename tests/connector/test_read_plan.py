"""A read is planned once: the ``plan`` reply's ``read_plan`` (connector/worker/read_plan.py,
connector/java/PROTOCOL.md "The read plan") is what every task's ``read`` carries.

* the serialized form is frozen by tests/golden/formats/read_plan/v1.txt;
* a task reads by it in a worker that cannot import pyspark (the planning worker
  can), with the rows of a read planned the old way, per task;
* a corrupted, truncated or mismatched plan is refused in one line.

Run this file as a script (from the repository root) to write the golden file of a
new plan version; the committed file is never rewritten.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pytest

import storage

from connector.source_config import SourceConfig
from connector.worker.read_plan import PLAN_VERSION, ReadPlan, decode_filters, filter_doc, plan_digest
from engine_worker_process import SAMPLE_MAPPING, exchange, python_worker, sample_table
from suite_paths import GOLDEN, REPO
from storage.errors import InvalidArgument

SECRET = "plan-once-secret"
GOLDEN_PLAN = GOLDEN / "formats" / "read_plan" / f"v{PLAN_VERSION}.txt"

#: every filter form, every tagged literal kind (PROTOCOL.md, "Filters")
FILTER_DOCS = [
    {"op": "Compare", "cmp": "=", "left": {"remainder": {"column": "n"}, "by": 3},
     "right": {"literal": {"t": "int", "v": 0}}},
    {"op": "StringContains", "column": "s", "value": {"t": "string", "v": "5"}},
    {"op": "Or", "children": [{"op": "IsNull", "column": "n"},
                              {"op": "Not", "child": {"op": "EqualNullSafe", "column": "n", "value": {"t": "int", "v": 7}}},
                              {"op": "Opaque", "text": "upper(s) = 'A'"}]},
    {"op": "In", "column": "k", "values": [{"t": "null"}, {"t": "int", "v": -5}, {"t": "float", "v": 1.5},
                                           {"t": "bool", "v": True}, {"t": "date", "v": 19000},
                                           {"t": "timestamp", "v": 1_700_000_000_123_456},
                                           {"t": "timestamp_ntz", "v": -86_400_000_001},
                                           {"t": "decimal", "v": "12.340"}, {"t": "binary", "v": "AP8="}]},
    {"op": "And", "children": [{"op": "GreaterThanOrEqual", "column": "k", "value": {"t": "int", "v": 1}},
                               {"op": "LessThan", "column": "k", "value": {"t": "int", "v": 90}}]},
    {"op": "IsNotNull", "column": "s"},
    {"op": "StringStartsWith", "column": "s", "value": {"t": "string", "v": "v1"}},
]


def golden_plan() -> ReadPlan:
    """The plan the golden file holds: fixed options, columns, filters, aggregate and schema."""
    base = SourceConfig((("hbase.columns.mapping", SAMPLE_MAPPING), ("root", "/data/tables"), ("table", "t")))
    target = pa.schema([pa.field("s", pa.string()), pa.field("k", pa.int32()),
                        pa.field("at", pa.timestamp("us", tz="UTC"))])
    return ReadPlan(base, ["s", "k"], ["k", "s"], (b"cf:n",), decode_filters(FILTER_DOCS), ["n"], target,
                    aggregate={"group_by": ["s"], "aggregates": [{"fn": "count_star"}]}, limit=10)


def test_golden_plan_is_frozen():
    """The form of version 1 does not change: the plan serializes to the committed bytes, and the
    committed bytes read back as that plan."""
    text = GOLDEN_PLAN.read_text(encoding="utf-8")
    assert golden_plan().to_text() == text
    plan = ReadPlan.from_text(text)
    assert plan.base.options == golden_plan().base.options
    assert (plan.output, plan.scan_columns, plan.hidden, plan.filter_only, plan.limit) == (
        ["s", "k"], ["k", "s"], (b"cf:n",), ["n"], 10)
    assert plan.config.conf["regionscan.columns"] == "k,s"
    assert plan.target == golden_plan().target
    assert plan.aggregate == {"group_by": ["s"], "aggregates": [{"fn": "count_star"}]}
    assert [filter_doc(f) for f in plan.decoded_filter.filters] == FILTER_DOCS
    assert not plan.raw and plan.table == "t"
    doc = json.loads(text)
    assert (doc["format"], doc["v"]) == ("regionscan-read-plan", 1)


def test_filter_nodes_round_trip_every_literal():
    """Filters decode into the plan's own nodes and encode back to the same JSON, literal for literal."""
    nodes = decode_filters(FILTER_DOCS)
    assert [filter_doc(f) for f in nodes] == FILTER_DOCS
    values = nodes[3].value
    assert values[4] == dt.date(2022, 1, 8) and values[7] == Decimal("12.340") and values[8] == b"\x00\xff"
    assert values[5].tzinfo is not None and values[6].tzinfo is None


def _resigned(doc: dict) -> str:
    """``doc`` with a digest that matches its (altered) content."""
    body = {k: v for k, v in doc.items() if k != "digest"}
    return json.dumps({**body, "digest": plan_digest(body)}, sort_keys=True, separators=(",", ":"))


BAD_PLANS = {
    "tampered": (lambda text, doc: text.replace('"limit":10', '"limit":11'),
                 "is corrupted: its digest does not match its content"),
    "truncated": (lambda text, doc: text[: len(text) // 2], "is not JSON"),
    "version 2": (lambda text, doc: _resigned({**doc, "v": 2}), "has version 2; this worker reads version 1"),
    "another format": (lambda text, doc: _resigned({**doc, "format": "regionscan-split"}),
                       "is not a regionscan-read-plan"),
    "bad schema": (lambda text, doc: _resigned({**doc, "arrow_schema": "bm90IGFuIGFycm93IHNjaGVtYQ=="}),
                   "has no Arrow schema"),
    "bad options": (lambda text, doc: _resigned({**doc, "options": {"root": "/x"}}), "has no options"),
    "bad kind": (lambda text, doc: _resigned({**doc, "kind": "cells"}), "has kind 'cells'"),
    "not text": (lambda text, doc: doc, "must be the text the plan reply gave, got dict"),
    "no table": (lambda text, doc: _resigned({k: v for k, v in doc.items() if k != "table"}), "names no table"),
}


@pytest.mark.parametrize("case", sorted(BAD_PLANS))
def test_bad_plan_is_one_line(case):
    text = GOLDEN_PLAN.read_text(encoding="utf-8")
    alter, why = BAD_PLANS[case]
    with pytest.raises(InvalidArgument) as info:
        ReadPlan.from_text(alter(text, json.loads(text)))
    message = str(info.value)
    assert why in message and "\n" not in message
    assert message.startswith("a task's read plan ") and message.endswith(
        "plan the query again (connector/java/PROTOCOL.md, \"The read plan\")")


# -- through real worker processes -----------------------------------------------------------------


@contextlib.contextmanager
def _worker_without_pyspark() -> Iterator[int]:
    """A worker process in which ``import pyspark`` fails, as on a host without it."""
    code = ("import runpy, sys; sys.modules['pyspark'] = None; "
            "runpy.run_module('connector.engine_worker', run_name='__main__')")
    env = {**os.environ, "REGIONSCAN_WORKER_SECRET": SECRET}
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=str(REPO))
    try:
        line = proc.stdout.readline().decode()
        assert "port=" in line, (line, proc.stderr.read())
        yield int(line.split("port=")[1].split()[0])
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


def _exchange(port: int, doc: dict) -> tuple[dict, pa.Table | None, dict | None]:
    """One request; its reply frame, and for a read that began, its rows and trailer."""
    return exchange(port, SECRET, doc)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    path = sample_table(str(tmp_path_factory.mktemp("plan_once") / "root"), 100, 50, 3)
    with storage.connect(path) as conn:  # another table, whose splits no plan of t reads
        conn.create_table("u", {"cf": {}})
    return path


def _schema(*fields: tuple[str, str]) -> str:
    return json.dumps({"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}}
                                                    for n, t in fields]})


def test_tasks_read_by_the_plan_without_pyspark(root):
    """The planning worker (with pyspark) plans once; a worker that cannot import pyspark reads
    every task by the plan, with the rows of the old per-task planning, for rows, a task
    aggregate and a raw read.  A read without the plan needs pyspark there: one line."""
    options = {"root": root, "table": "t", "hbase.columns.mapping": SAMPLE_MAPPING, "regionscan.pack.splits": "false"}
    # n % 2 = 0 and s LIKE '%1%' are evaluated on decoded rows; k >= 5 is a key range
    filters = FILTER_DOCS[4:5] + [
        {"op": "Compare", "cmp": "=", "left": {"remainder": {"column": "n"}, "by": 2},
         "right": {"literal": {"t": "int", "v": 0}}},
        {"op": "StringContains", "column": "s", "value": {"t": "string", "v": "1"}}]
    reads = [
        {"columns": ["s"], "filters": filters, "schema": _schema(("s", "string"))},
        {"columns": ["k", "n"], "filters": [], "schema": _schema(("k", "integer"), ("n", "integer")), "limit": 7},
        {"columns": ["s"], "filters": filters[:1], "schema": _schema(("s", "string"), ("c", "long")),
         "aggregate": {"group_by": ["s"], "aggregates": [{"fn": "count_star"}]}},
        {"options": {**options, "hbase.spark.query.raw": "true"}, "columns": ["qualifier", "value"],
         "schema": _schema(("qualifier", "string"), ("value", "binary"))},
    ]
    with python_worker(SECRET) as (_proc, planner, _line), _worker_without_pyspark() as reader:
        for fields in reads:
            req = {"options": options, **fields}
            plan, _, _ = _exchange(planner, {"op": "plan", **req, "parallelism": 2})
            assert plan["ok"] and len(plan["tasks"]) >= 2 and isinstance(plan["read_plan"], str), plan
            by_plan, old = [], []
            for task in plan["tasks"]:
                head, rows, trailer = _exchange(reader, {"op": "read", "read_plan": plan["read_plan"],
                                                         "splits": task["splits"]})
                assert head == {"ok": True} and trailer["ok"], (head, trailer)
                by_plan.append(rows)
                _, rows, _ = _exchange(planner, {"op": "read", **req, "splits": task["splits"]})
                old.append(rows)
            got, expected = pa.concat_tables(by_plan), pa.concat_tables(old)
            assert got.num_rows > 0 and got.equals(expected), fields
        head, _, _ = _exchange(reader, {"op": "read", **{"options": options, **reads[0]}, "splits": []})
        assert head["ok"] is False and "pyspark" in head["error"] and "\n" not in head["error"]
        # a corrupted plan, and a plan sent with another table's split, are one line
        bad = plan["read_plan"].replace('"kind":"raw"', '"kind":"rows"')
        head, _, _ = _exchange(reader, {"op": "read", "read_plan": bad, "splits": []})
        assert head == {"ok": False, "error": "InvalidArgument: a task's read plan is corrupted: its digest does "
                        "not match its content; plan the query again (connector/java/PROTOCOL.md, \"The read plan\")"}
        other = _exchange(planner, {"op": "plan", "options": {**options, "table": "u"}, "columns": ["s"],
                                    "schema": _schema(("s", "string"))})[0]
        head, _, _ = _exchange(reader, {"op": "read", "read_plan": plan["read_plan"],
                                        "splits": other["tasks"][0]["splits"]})
        assert head["ok"] is False and "is for table t, not for the split of table u sent with it" in head["error"]


def write_golden() -> Path:
    """Write the golden file of this plan version (once per version; never over a committed one)."""
    if GOLDEN_PLAN.exists():
        raise SystemExit(f"{GOLDEN_PLAN} exists: a committed golden file is never rewritten")
    GOLDEN_PLAN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN_PLAN.write_text(golden_plan().to_text(), encoding="utf-8")
    return GOLDEN_PLAN


if __name__ == "__main__":
    print(write_golden())
