"""A fresh engine worker's first query runs without first-use costs: the worker imports at its
start, in a thread beside its serving, what a read would otherwise import on first use.

A real worker process on loopback, as the JVM source starts it, and a real table with the
column types of the TPC-H tables (BIGINT, INT, DECIMAL, DATE, STRING; binary SerDe).
"""

from __future__ import annotations

import datetime
import decimal
import json
import time

import pyarrow as pa
from engine_worker_process import exchange, python_worker

import storage
from serde import create_serde

SECRET = "warm-up-secret"
MAPPING = "k BIGINT :key, i INT cf:i, q DECIMAL(15,2) cf:q, d DATE cf:d, s STRING cf:s"
SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "q", "type": "decimal(15,2)", "nullable": True, "metadata": {}},
    {"name": "d", "type": "date", "nullable": True, "metadata": {}},
    {"name": "s", "type": "string", "nullable": True, "metadata": {}}]})


def _table(root: str, rows: int) -> None:
    serde = create_serde("binary", MAPPING)
    with storage.connect(root) as conn:
        table = conn.create_table("t", {"cf": {}}, settings={"wal_sync": "none"})
        with table.batch() as b:
            for k in range(rows):
                key, cells = serde.serialize({"k": k, "i": k % 7, "q": decimal.Decimal(k) / 100,
                                              "d": datetime.date(1994, 1, 1) + datetime.timedelta(days=k),
                                              "s": f"v{k}"})
                b.put(key, cells)
        table.flush()


def _ask(port: int, doc: dict) -> tuple[dict, pa.Table | None, dict | None]:
    """One request: its reply, and for a read the rows and the trailer."""
    return exchange(port, SECRET, doc)


def _warmed(port: int) -> dict:
    """The worker's stats once its start-up warm-up has finished."""
    deadline = time.monotonic() + 60
    while True:
        stats, _, _ = _ask(port, {"op": "stats"})
        if stats["warm_up_s"] is not None or time.monotonic() > deadline:
            return stats
        time.sleep(0.05)


def test_a_fresh_workers_first_plan_and_read_import_nothing(tmp_path):
    root = str(tmp_path / "root")
    _table(root, 200)
    options = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    with python_worker(SECRET) as (_proc, port, _line):
        before = _warmed(port)
        assert isinstance(before["warm_up_s"], float) and before["warm_up_s"] >= 0, before
        assert before["counters"].get("plan", 0) == 0 and before["counters"].get("read", 0) == 0
        filters = [{"op": "GreaterThanOrEqual", "column": "k", "value": {"t": "int", "v": 150}}]
        plan, _, _ = _ask(port, {"op": "plan", "options": options, "columns": ["q", "d", "s"], "filters": filters,
                                 "schema": SCHEMA, "parallelism": 1})
        assert plan["ok"], plan
        splits = [s for t in plan["tasks"] for s in t["splits"]]
        # a plan reply's read_plan is read as it is (columns are sent only to narrow a push's plan)
        reply, rows, trailer = _ask(port, {"op": "read", "options": options, "filters": filters, "schema": SCHEMA,
                                           "splits": splits, "read_plan": plan["read_plan"]})
        assert reply["ok"] and trailer == {"ok": True, "rows": 50}, (reply, trailer)
        assert rows.column("q").to_pylist()[0] == decimal.Decimal("1.50")
        assert rows.column("d").to_pylist()[0] == datetime.date(1994, 1, 1) + datetime.timedelta(days=150)
        after, _, _ = _ask(port, {"op": "stats"})
    # the first plan and read found every module they use already imported at the start
    assert after["modules"] == before["modules"], (
        f"the first plan and read imported {after['modules'] - before['modules']} modules "
        f"(connector.worker.server.FIRST_USE_MODULES misses them)")
