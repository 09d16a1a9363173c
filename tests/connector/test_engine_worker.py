"""The engine worker's socket protocol (connector/java/PROTOCOL.md) against garbage, and its answers.

A real worker process on loopback, as the JVM source starts it.  Every
malformed request gets one error line and the worker keeps serving; plan and
read requests answer what the Python source reads.
"""

from __future__ import annotations

import socket
import struct

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from engine_worker_process import SAMPLE_MAPPING, python_worker, sample_table

import storage
from connector.worker.protocol import MAGIC, read_frame, request_bytes
from connector.worker.read_ops import pack_splits
from connector.splits import TableSplit

SECRET = "s3cret-for-tests"
MAPPING = SAMPLE_MAPPING


@pytest.fixture(scope="module")
def worker():
    with python_worker(SECRET) as (proc, port, line):
        assert line.startswith("regionscan-engine-worker 1 "), line
        yield proc, port


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return sample_table(str(tmp_path_factory.mktemp("worker") / "root"), 100, 50, 2)


def _send(port: int, raw: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(raw)
    sock.shutdown(socket.SHUT_WR)
    return sock


def _ask(port: int, raw: bytes) -> dict:
    with _send(port, raw) as sock:
        return read_frame(sock.makefile("rb"))


def _req(op: str, **fields) -> bytes:
    return request_bytes({"v": 1, "secret": SECRET, "op": op, **fields})


BAD = [
    (b"GET / HTTP/1.1\r\n\r\n", "not a regionscan worker request"),
    (MAGIC + struct.pack(">I", 1 << 30), "over the"),
    (MAGIC + struct.pack(">I", 10) + b"{not json}", "not UTF-8 JSON"),
    (MAGIC + struct.pack(">I", 2) + b"[]", "not a JSON object"),
    (MAGIC + struct.pack(">I", 50), "request ended"),
    (request_bytes({"v": 2, "secret": SECRET, "op": "stats"}), "version 2 is not supported"),
    (request_bytes({"v": 1, "secret": "guess", "op": "stats"}), "wrong or missing worker secret"),
    (request_bytes({"v": 1, "op": "stats"}), "wrong or missing worker secret"),
    (_req("drop_tables"), "unknown op 'drop_tables'"),
    (_req("schema", options={"table": "t"}), "option 'root'"),
    (_req("push", options={}, filters="x"), "option 'root'"),
]


@pytest.mark.parametrize("raw, says", BAD)
def test_garbage_gets_one_line_and_the_worker_stays(worker, raw, says):
    _proc, port = worker
    reply = _ask(port, raw)
    assert reply["ok"] is False and says in reply["error"] and "\n" not in reply["error"]
    assert _ask(port, _req("stats"))["ok"] is True


def _mod_eq(by: int, column: str = "n", cmp: str = "=", value: int = 0) -> dict:
    """The Compare filter the JVM sends for ``column % by <cmp> value``."""
    return {"op": "Compare", "cmp": cmp, "left": {"remainder": {"column": column}, "by": by},
            "right": {"literal": {"t": "int", "v": value}}}


def test_a_remainder_filter_is_evaluated_on_the_decoded_rows(worker, root):
    _proc, port = worker
    options = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    filters = [{"op": "IsNotNull", "column": "n"}, _mod_eq(3)]
    reply = _ask(port, _req("push", options=options, filters=filters))
    assert reply["handled"] == [0, 1] and reply["decoded"] == ["n IS NOT NULL", "(n % 3) = 0"], reply
    off = _ask(port, _req("push", options={**options, "regionscan.pushdown.decoded": "false"}, filters=filters))
    assert off["handled"] == [] and off["decoded"] == [], off
    # a decoded filter is not an answer from the indexes: the count is read by the tasks
    count = _ask(port, _req("count", options=options, filters=filters, aggregates=[{"fn": "count_star"}]))
    assert count["values"] is None and count["per_task"] is True, count


def test_bad_filters_and_splits_are_one_line(worker, root):
    _proc, port = worker
    options = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    for filters, says in [("x", "filters must be a JSON list"), ([{"op": "Nope", "column": "k"}], "unknown filter op"),
                          ([{"op": "EqualTo", "column": "k", "value": {"t": "int", "v": "1"}}], "bad filter literal"),
                          ([_mod_eq(0)], "the divisor must be a non-zero BIGINT"),
                          ([_mod_eq(-(1 << 63))], "the divisor must be a non-zero BIGINT"),
                          ([_mod_eq(1 << 63)], "the divisor must be a non-zero BIGINT"),
                          ([{**_mod_eq(3), "cmp": "=="}], "filter Compare needs cmp, one of"),
                          ([{**_mod_eq(3), "left": {"function": "abs"}}], "bad filter expression"),
                          ([{**_mod_eq(3), "right": {"literal": {"t": "int", "v": "0"}}}], "bad filter literal")]:
        reply = _ask(port, _req("push", options=options, filters=filters))
        assert reply["ok"] is False and says in reply["error"], reply
    reply = _ask(port, _req("read", options=options, columns=["k"], schema='{"type":"struct","fields":[]}',
                            splits=["bm90IGEgcGlja2xl"]))
    assert reply["ok"] is False and "\n" not in reply["error"]


def test_plan_push_count_and_read(worker, root):
    _proc, port = worker
    options = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    key_range = [{"op": "GreaterThanOrEqual", "column": "k", "value": {"t": "int", "v": 40}}]
    assert _ask(port, _req("push", options=options, filters=key_range))["handled"] == [0]
    assert _ask(port, _req("count", options=options, filters=key_range,
                           aggregates=[{"fn": "count_star"}]))["values"] == [60]
    on_n = [{"op": "LessThan", "column": "n", "value": {"t": "int", "v": 10}}]
    assert _ask(port, _req("count", options=options, filters=on_n, aggregates=[{"fn": "count_star"}]))["values"] is None
    # HBase Bytes integer keys sort negatives last: their MIN/MAX is left to Spark
    assert _ask(port, _req("count", options=options, filters=key_range,
                           aggregates=[{"fn": "max", "column": "k"}]))["values"] is None
    reply = _ask(port, _req("count", options=options, filters=[], aggregates=[]))
    assert reply["ok"] is False and reply["error"] == "InvalidArgument: count needs a list of aggregates"
    schema = '{"type":"struct","fields":[{"name":"s","type":"string","nullable":true,"metadata":{}}]}'
    plan = _ask(port, _req("plan", options=options, columns=["s"], filters=on_n, schema=schema, parallelism=1))
    assert plan["ok"] and plan["splits"] == 2  # a value filter narrows no key range: both regions
    assert len(plan["tasks"]) == 1  # two small splits packed into one task (one core)
    one_each = _ask(port, _req("plan", options={**options, "regionscan.pack.splits": "false"}, columns=["s"],
                               filters=on_n, schema=schema, parallelism=2))
    assert [len(t["splits"]) for t in one_each["tasks"]] == [1, 1]
    splits = [s for t in plan["tasks"] for s in t["splits"]]
    with _send(port, _req("read", options=options, columns=["s"], filters=on_n, schema=schema, splits=splits)) as sock:
        f = sock.makefile("rb")
        assert read_frame(f)["ok"] is True
        table = pa.ipc.open_stream(f).read_all()
        trailer = read_frame(f)
    assert trailer == {"ok": True, "rows": 5}
    assert table.schema.names == ["s"] and sorted(table.column("s").to_pylist()) == [f"v{k}" for k in range(5)]


def _read_all(port: int, **fields) -> tuple[pa.Table, dict]:
    with _send(port, _req("read", **fields)) as sock:
        f = sock.makefile("rb")
        head = read_frame(f)
        assert head["ok"] is True, head
        table = pa.ipc.open_stream(f).read_all()
        return table, read_frame(f)


def test_tasks_aggregate_their_rows(worker, root):
    """``per_task`` in every count reply; a read with ``aggregate`` streams one row per group
    (one row in all without groups, also for no rows); bad aggregates are one line."""
    _proc, port = worker
    options = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    on_n = [{"op": "LessThan", "column": "n", "value": {"t": "int", "v": 20}}]  # n = 2k: k < 10
    sums = [{"fn": "sum", "column": "n"}, {"fn": "count_star"}, {"fn": "max", "column": "s"}]
    reply = _ask(port, _req("count", options=options, filters=on_n, aggregates=sums))
    assert reply["values"] is None and reply["per_task"] is True
    assert reply["task_inputs"] == ["n", "s"]  # the columns the JVM prunes a task's scan to
    grouped = _ask(port, _req("count", options=options, filters=[], aggregates=[{"fn": "count_star"}], group_by=["s"]))
    assert grouped["values"] is None and grouped["per_task"] is True
    assert grouped["task_inputs"] == ["s"]
    bare = _ask(port, _req("count", options=options, filters=on_n, aggregates=[{"fn": "count_star"}]))
    assert bare["per_task"] is True and bare["task_inputs"] == []  # COUNT(*) reads no column
    both = [{"fn": "min", "column": "n"}, {"fn": "max", "column": "s"}, {"fn": "count", "column": "n"}]
    assert _ask(port, _req("count", options=options, filters=[], aggregates=both, group_by=["s"]))["task_inputs"] == ["s", "n"]
    for aggs, group in [([{"fn": "sum", "column": "s"}], []), ([{"fn": "count_star"}], ["nope"]),
                        ([{"fn": "median", "column": "n"}], [])]:
        refused = _ask(port, _req("count", options=options, filters=[], aggregates=aggs, group_by=group))
        assert refused["per_task"] is False and "task_inputs" not in refused
    off = {**options, "regionscan.pushdown.aggregates": "false"}
    assert _ask(port, _req("count", options=off, filters=[], aggregates=sums))["per_task"] is False

    aggregate = {"group_by": [], "aggregates": sums}
    out = ('{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}},'
           '{"name":"b","type":"long","nullable":false,"metadata":{}},'
           '{"name":"c","type":"string","nullable":true,"metadata":{}}]}')
    plan = _ask(port, _req("plan", options=options, columns=["n", "s"], filters=on_n, schema=out,
                           aggregate=aggregate, parallelism=2))
    splits = [s for t in plan["tasks"] for s in t["splits"]]
    table, trailer = _read_all(port, options=options, columns=["n", "s"], filters=on_n, schema=out,
                               aggregate=aggregate, splits=splits)
    assert trailer == {"ok": True, "rows": 1}
    assert table.to_pylist() == [{"a": sum(2 * k for k in range(10)), "b": 10, "c": "v9"}]
    # no key range at all (k = 5 AND k = 6): no split, yet one task, whose row says COUNT 0
    beyond = [_cmp("EqualTo", "k", 5), _cmp("EqualTo", "k", 6)]
    empty = _ask(port, _req("plan", options=options, columns=["n", "s"], filters=beyond, schema=out,
                            aggregate=aggregate, parallelism=2))
    assert [t["splits"] for t in empty["tasks"]] == [[]]
    table, _ = _read_all(port, options=options, columns=["n", "s"], filters=beyond, schema=out,
                         aggregate=aggregate, splits=[])
    assert table.to_pylist() == [{"a": None, "b": 0, "c": None}]
    for bad, says in [({"group_by": [], "aggregates": []}, "non-empty list aggregates"),
                      ({"group_by": [], "aggregates": [{"fn": "sum", "column": "s"}]}, "SUM(s) of string"),
                      ({"group_by": ["x"], "aggregates": [{"fn": "count_star"}]}, "group_by column 'x'"),
                      ({"group_by": [{"column": "n", "mod": 0}], "aggregates": [{"fn": "count_star"}]},
                       "mod must be a positive integer"),
                      ({"group_by": [{"column": "s", "mod": 3}], "aggregates": [{"fn": "count_star"}]},
                       "GROUP BY s % 3 (string)"),
                      ("sum", "aggregate must be a JSON object")]:
        reply = _ask(port, _req("read", options=options, columns=["n", "s"], schema=out, aggregate=bad, splits=[]))
        assert reply["ok"] is False and says in reply["error"] and "\n" not in reply["error"], reply
    narrow = '{"type":"struct","fields":[]}'
    reply = _ask(port, _req("read", options=options, columns=["n", "s"], schema=narrow, aggregate=aggregate, splits=[]))
    assert reply["ok"] is False and "schema needs 3 fields" in reply["error"]


def _cmp(op: str, column: str, v: int) -> dict:
    return {"op": op, "column": column, "value": {"t": "int", "v": v}}


def test_or_and_trees_become_key_ranges_and_filter_lists(worker, root):
    _proc, port = worker
    options = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    points = {"op": "Or", "children": [_cmp("EqualTo", "k", 3), _cmp("EqualTo", "k", 70),
                                       {"op": "And", "children": [_cmp("GreaterThan", "k", 10),
                                                                  _cmp("LessThanOrEqual", "k", 12)]}]}
    reply = _ask(port, _req("push", options=options, filters=[points]))
    assert reply["handled"] == [0] and reply["engine_filter"] is None
    assert reply["key_ranges"] == [["\\x00\\x00\\x00\\x03", "\\x00\\x00\\x00\\x03\\x00"],
                                   ["\\x00\\x00\\x00\\x0A\\x00", "\\x00\\x00\\x00\\x0C\\x00"],
                                   ["\\x00\\x00\\x00F", "\\x00\\x00\\x00F\\x00"]]
    assert _ask(port, _req("count", options=options, filters=[points], aggregates=[{"fn": "count_star"}]))["values"] == [4]
    # (a STRING cell: an INT cell's test is compared once decoded, tests/connector/test_right_or_loud.py)
    with_cell = {"op": "Or", "children": [_cmp("EqualTo", "k", 3),
                                          {"op": "EqualTo", "column": "s", "value": {"t": "string", "v": "x"}}]}
    reply = _ask(port, _req("push", options=options, filters=[with_cell]))
    assert reply["handled"] == [0] and reply["key_ranges"] is None
    assert reply["engine_filter"].startswith("MultiRowRangeFilter (") and " OR SingleColumnValueFilter (" in reply["engine_filter"]
    opaque = {"op": "Or", "children": [_cmp("EqualTo", "k", 3), {"op": "Opaque", "text": "upper(s) = 'X'"}]}
    reply = _ask(port, _req("push", options=options, filters=[opaque]))
    assert reply["handled"] == [] and reply["key_ranges"] is None  # a branch only Spark can test: whole table
    schema = '{"type":"struct","fields":[{"name":"s","type":"string","nullable":true,"metadata":{}}]}'
    plan = _ask(port, _req("plan", options=options, columns=["s"], filters=[points], schema=schema, parallelism=1))
    assert plan["splits"] == 2
    plan = _ask(port, _req("plan", options=options, columns=["s"], filters=[points["children"][2]], schema=schema))
    assert plan["splits"] == 1  # the region above 50 is pruned
    for bad, says in [({"op": "Or", "children": [_cmp("EqualTo", "k", 3)]}, "at least 2 children"),
                      ({"op": "And", "children": "x"}, "at least 2 children")]:
        reply = _ask(port, _req("push", options=options, filters=[bad]))
        assert reply["ok"] is False and says in reply["error"] and "\n" not in reply["error"]


def test_save_decides_every_mode_before_any_task(worker, root):
    _proc, port = worker
    options = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    answers = {m: _ask(port, _req("save", options=options, mode=m)) for m in ("Append", "Overwrite", "Ignore")}
    # two regions: the driver samples the keys, so each region's rows are staged by one task
    assert answers["Append"] == {"ok": True, "write": True, "mode": "append", "exists": True,
                                 "sample": {"columns": ["k"], "rows": 2000}}
    assert answers["Overwrite"]["mode"] == "overwrite" and answers["Ignore"]["write"] is False
    reply = _ask(port, _req("save", options=options, mode="ErrorIfExists"))
    assert reply["ok"] is False and f"table t already exists under {root}" in reply["error"]
    absent = {**options, "table": "nope"}
    reply = _ask(port, _req("save", options=absent, mode="Ignore"))
    assert reply["ok"] is False and "table nope does not exist" in reply["error"]
    fresh = _ask(port, _req("save", options={**absent, "newtable": "3"}, mode="ErrorIfExists"))
    assert fresh == {"ok": True, "write": True, "mode": "append", "exists": False,
                     "sample": {"columns": ["k"], "rows": 3000}}  # the keys to sample for the new table's splits
    reply = _ask(port, _req("save", options=options, mode="Sideways"))
    assert reply["ok"] is False and "unknown save mode 'Sideways'" in reply["error"]


def _split(i: int, size: int) -> TableSplit:
    return TableSplit("t", "/r", bytes([i]), bytes([i + 1]), f"r{i}", size, "here", i)


def test_splits_are_packed_by_size_like_spark_files():
    splits = [_split(i, 10 << 20) for i in range(10)]
    tasks = pack_splits(splits, 128 << 20, 4 << 20, 2)
    assert [[s.index for s in t] for t in tasks] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]  # key order
    assert len(pack_splits(splits, 128 << 20, 4 << 20, 10)) == 10  # as many cores as splits: one each
    assert pack_splits([], 128 << 20, 4 << 20, 2) == []


def test_min_max_of_the_key_honour_a_time_range_and_the_memstore(worker, tmp_path):
    _proc, port = worker
    path = str(tmp_path / "root")
    conn = storage.connect(path)
    table = conn.create_table("ts", {"cf": {}}, split_keys=[b"c"], settings={"wal_sync": "none"})
    for i, key in enumerate([b"a", b"b", b"c", b"d"]):
        table.put(key, {b"cf:n": b"1"}, timestamp=100 + i)
    table.flush()
    table.put(b"e", {b"cf:n": b"1"}, timestamp=200)  # unflushed
    conn.close()
    options = {"root": path, "table": "ts", "hbase.columns.mapping": "k STRING :key, n STRING cf:n"}
    edges = [{"fn": "min", "column": "k"}, {"fn": "max", "column": "k"}, {"fn": "count_star"}]
    got = _ask(port, _req("count", options=options, filters=[], aggregates=edges))
    assert got["values"] == [{"t": "string", "v": "a"}, {"t": "string", "v": "e"}, 5]
    timed = {**options, "hbase.spark.query.timerange.start": "101", "hbase.spark.query.timerange.end": "103"}
    got = _ask(port, _req("count", options=timed, filters=[], aggregates=edges[:2]))
    assert got["values"] == [{"t": "string", "v": "b"}, {"t": "string", "v": "c"}]  # rows with a cell in [101, 103)
    assert _ask(port, _req("count", options=timed, filters=[], aggregates=edges))["values"] is None  # counts need rows


def test_edge_values_are_tagged_as_filter_literals():
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    from connector.worker.aggregates import edge_literal

    moment = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc)
    cases = [
        (pa.array(["k1"]), {"t": "string", "v": "k1"}),
        (pa.array([b"\x00\xff"]), {"t": "binary", "v": "AP8="}),
        (pa.array([-7], pa.int16()), {"t": "int", "v": -7}),
        (pa.array([dt.date(1970, 1, 11)]), {"t": "date", "v": 10}),
        (pa.array([moment], pa.timestamp("ms", "UTC")), {"t": "timestamp", "v": 1714979289123000}),
        (pa.array([moment.replace(tzinfo=None)], pa.timestamp("us")), {"t": "timestamp_ntz", "v": 1714979289123456}),
        (pa.array([Decimal("-1.50")], pa.decimal128(5, 2)), {"t": "decimal", "v": "-1.50"}),
    ]
    for array, literal in cases:
        assert edge_literal(array) == literal
    assert edge_literal(pa.array([None], pa.string())) is None  # a null key: Spark computes the MIN/MAX
    assert edge_literal(pa.array([1.5])) is None  # no tag the JVM side takes


@given(values=st.lists(st.one_of(st.none(), st.integers(-128, 127)), max_size=30), k=st.integers(1, 300),
       wide=st.booleans())
def test_group_by_remainder_is_javas(values, k, wide):
    """``col % k`` of a task's GROUP BY: the sign of the dividend, as Java and Spark compute it,
    at the type's edges (-128 % 128 == 0 for a TINYINT) and with k wider than the type."""
    from connector.worker.task_aggregates import remainder

    kind = pa.int64() if wide else pa.int8()
    got = remainder(pa.array(values, kind), k)
    assert got.type == kind
    assert got.to_pylist() == [None if v is None else (abs(v) % k) * (1 if v >= 0 else -1) for v in values]
