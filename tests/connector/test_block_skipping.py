"""Spark's typed comparisons skip the row groups whose value bounds rule them out.

A comparison on a fixed-width column (a binary SerDe's DATE, TIMESTAMP, SMALLINT, INT, BIGINT) is
tested on the decoded values, but it also travels to the engine as byte ranges (``PushdownResult.prune_filter``)
that only skip blocks.  The block bounds compare unsigned bytes while the binary SerDe's numbers
are signed big-endian, so a range across zero is two byte ranges: every value here is judged
against the pushed ranges as a one-value block would be, and must be kept exactly when Spark's
predicate holds.  A table of rows sorted by date then reads through ``format("regionscan")``
with the same answers as Spark's own evaluation, with row groups skipped.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import connector
import storage
from connector.pushdown import push_filters
from connector.worker.read_plan import (EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan,
                                        LessThanOrEqual)
from serde import create_serde
from serde_tables import fill_table
from storage import ScanMetrics
from storage.read.block_pruning import block_mask

MAPPING = "k BIGINT :key, d DATE cf:d, n INT cf:n, b BIGINT cf:b, t TIMESTAMP cf:t, h SMALLINT cf:h"
SERDE = create_serde("binary", MAPPING)
EPOCH = dt.date(1970, 1, 1)
N = 4000


def _row(k: int) -> dict:
    # rows sorted by date, half of them before 1970 (negative day numbers)
    return {"k": k, "d": EPOCH + dt.timedelta(days=k - N // 2), "n": k - N // 2, "b": (k - N // 2) * 10 ** 11}


def _cell(column: str, value) -> bytes:
    return SERDE.serialize({"k": 0, column: value})[1][b"cf:" + column.encode()]


OPS = {"=": EqualTo, "<": LessThan, "<=": LessThanOrEqual, ">": GreaterThan, ">=": GreaterThanOrEqual}
HOLDS = {"=": lambda a, b: a == b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
         ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


@pytest.mark.parametrize("column, values, literals", [
    ("n", [-(2 ** 31), -70000, -1, 0, 1, 255, 256, 70000, 2 ** 31 - 1], [-1, 0, 256, -70000]),
    ("b", [-(2 ** 63), -(2 ** 40), -1, 0, 1, 2 ** 40, 2 ** 63 - 1], [-1, 0, 2 ** 40]),
    ("d", [EPOCH - dt.timedelta(days=400), EPOCH - dt.timedelta(days=1), EPOCH, EPOCH + dt.timedelta(days=1),
           dt.date(2024, 2, 29)], [EPOCH, EPOCH - dt.timedelta(days=1), dt.date(1999, 1, 1)]),
    ("t", [dt.datetime(1960, 5, 1, 12), dt.datetime(1969, 12, 31, 23, 59, 59), dt.datetime(1970, 1, 1),
           dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(2030, 1, 1)],
     [dt.datetime(1970, 1, 1), dt.datetime(1965, 1, 1)]),
    ("h", [-(2 ** 15), -1, 0, 1, 2 ** 15 - 1], [-1, 0, 1]),
])
def test_signed_values_become_byte_ranges_that_judge_blocks_right(column, values, literals):
    """A one-value block of each value may match the pushed byte ranges exactly when the typed
    comparison holds for the value: the sign bit is accounted for, in both directions."""
    for literal in literals:
        cases = [(OPS[op]((column,), literal), lambda v, op=op: HOLDS[op](v, literal)) for op in OPS]
        cases.append((In((column,), [literal, values[0]]), lambda v: v in (literal, values[0])))
        for spark_filter, holds in cases:
            result = push_filters([spark_filter], SERDE)
            assert result.prune_filter is not None and not result.handled, result.notes
            assert any("row groups" in note for note in result.notes)
            for v in values:
                raw = _cell(column, v)
                stats = lambda q: ([raw], [raw]) if q == column.encode() else None  # noqa: E731
                mask = block_mask(result.prune_filter, b"cf", 1, stats)
                assert bool(mask[0]) == holds(v), (spark_filter, v)


def test_cells_of_another_width_are_never_skipped():
    """A chunk of values of another width than the column's (bytes of another encoding) is read,
    so that decoding it fails the read as it would without the skipping."""
    result = push_filters([GreaterThan(("n",), 5)], SERDE)
    mask = block_mask(result.prune_filter, b"cf", 1, lambda q: ([b"\x00\x00"], [b"\x00\x00"]))
    assert mask is None or mask.tolist() == [True]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("skipping") / "root")
    with storage.connect(path) as conn:
        table = fill_table(conn, "t", SERDE, (_row(k) for k in range(N)), families={"cf": {"block_size": 4096}})
        table.compact(major=True)
    return path


def test_the_prune_filter_skips_groups_of_a_sorted_table(root):
    """The engine scan with the pushed byte ranges as its prune filter skips most row groups and
    keeps every row the comparison keeps (the rows of the groups it reads come as they are)."""
    lo, hi = dt.date(1970, 3, 1), dt.date(1970, 4, 1)
    result = push_filters([GreaterThanOrEqual(("d",), lo), LessThan(("d",), hi)], SERDE)
    with storage.connect(root) as conn:
        metrics = ScanMetrics()
        rows = pa.Table.from_batches(list(conn.table("t").scan_batches(
            columns=[b"cf:d"], prune_filter=result.prune_filter, metrics=metrics)))
    keys = set(rows.column("key").to_pylist())
    want = {SERDE.serialize({"k": k})[0] for k in range(N) if lo <= _row(k)["d"] < hi}
    assert len(want) == 31 and want <= keys and len(keys) < N // 4
    assert metrics.row_groups_pruned > 0


def test_the_worker_plan_carries_the_byte_ranges_to_every_split(root):
    """The JVM source's plan (made by the engine worker) gives each split's scan the prune filter,
    and a task's read answers the comparison."""
    import json

    from connector.splits import TableSplit
    from connector.worker import protocol, read_ops
    from connector.worker.read_plan import filter_doc

    schema = json.dumps({"type": "struct", "fields": [{"name": "k", "type": "long", "nullable": True, "metadata": {}}]})
    options = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING, "serde": "binary",
               "regionscan.pin.register": "false"}
    filters = [filter_doc(GreaterThanOrEqual(("d",), dt.date(1970, 3, 1))),
               filter_doc(LessThan(("d",), dt.date(1970, 4, 1)))]
    req = {"options": options, "columns": ["k"], "schema": schema, "parallelism": 1, "filters": filters}
    plan = read_ops.plan(req)
    keys = []
    for task in plan["tasks"]:
        for packed in task["splits"]:
            split = protocol.unpack_object(packed, TableSplit, "split")
            assert "SingleColumnValueFilter ('cf', 'd', >=" in split.scan.request.prune_filter
        read = {**req, "splits": task["splits"], "read_plan": plan["read_plan"]}
        for batch in read_ops.read_batches(read, read_ops.read_schema(read), {}):
            keys.extend(batch.column(0).to_pylist())
    assert sorted(keys) == [k for k in range(N) if dt.date(1970, 3, 1) <= _row(k)["d"] < dt.date(1970, 4, 1)]


def test_the_python_source_sends_the_byte_ranges_with_its_splits(root):
    """The Python source gives the comparisons back to Spark and its splits the prune filter."""
    from connector.python_source import RegionScanReader
    from connector.source_config import SourceConfig

    config = SourceConfig.from_options({"root": root, "table": "t", "hbase.columns.mapping": MAPPING,
                                        "serde": "binary", "regionscan.pin.register": "false"})
    reader = RegionScanReader(config)
    given = [GreaterThanOrEqual(("d",), dt.date(1970, 3, 1)), LessThan(("d",), dt.date(1970, 4, 1))]
    assert list(reader.pushFilters(given)) == given  # Spark tests them
    partitions = reader.partitions()
    assert partitions and all("SingleColumnValueFilter ('cf', 'd', >=" in p.split.scan.request.prune_filter
                              for p in partitions)


@pytest.mark.spark
def test_a_date_range_through_spark_skips_groups_with_spark_s_answer(spark, root):
    """``format("regionscan")`` with a date range on rows sorted by date: the same rows as Spark's own
    evaluation, whether the worker or Spark tests the comparison; explain says groups are skipped."""
    reference = spark.createDataFrame([tuple(_row(k).values()) for k in range(N)], "k BIGINT, d DATE, n INT, b BIGINT")
    base = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING, "serde": "binary"}
    cases = [("d >= DATE'1970-03-01' AND d < DATE'1970-04-01'", {}),
             ("d BETWEEN DATE'1969-12-25' AND DATE'1970-01-05'", {"regionscan.pushdown.decoded.maxkept": "0"}),
             ("n > 1990", {})]
    for where, extra in cases:  # extra: the comparison left to Spark, the groups still skipped
        want = sorted(r.k for r in reference.where(where).select("k").collect())
        df = spark.read.format("regionscan").options(**base, **extra).load().where(where)
        assert sorted(r.k for r in df.select("k").collect()) == want and want, (where, extra)
    plan = connector.explain(df)
    assert any("row groups" in note for note in plan.notes), str(plan)

