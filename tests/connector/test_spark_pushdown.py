"""Filter pushdown through Spark: every operator, negative numbers, composite keys.

Each query runs through Spark with pushdown on and is compared with the
same predicate evaluated in Python over the rows written; the plan summary
(connector.explain) must show which filters the engine applied exactly and
which Spark still evaluates.  Each runs through both sources: the JVM source
and the Python source with its pushdown opted in (regionscan.python.pushdown),
which is why every query reads a freshly loaded DataFrame: Spark 4.3 reuses a
Python relation's last pushdown result for later queries (docs/connector.md).
"""

from __future__ import annotations

import datetime as dt
import json
import struct

import pytest

import connector
import storage
from serde import create_serde
from serde_tables import fill_table

pytestmark = pytest.mark.spark

PLAIN = "k INT :key, n INT cf:n, o INT cf:o#o, s STRING cf:s, d DATE cf:d, f DOUBLE cf:f"
ORDERED = "k INT :key#o, n BIGINT cf:n"
COMPOSITE = {
    "table": {"name": "comp"},
    "rowkey": "a:b:c",
    "columns": {
        "a": {"cf": "rowkey", "col": "a", "type": "int", "encoding": "ordered"},
        "b": {"cf": "rowkey", "col": "b", "type": "string", "length": 3},
        "c": {"cf": "rowkey", "col": "c", "type": "string"},
        "v": {"cf": "cf", "col": "v", "type": "int"},
    },
}
DELIMITED = {
    "table": {"name": "delim"},
    "rowkey": "x:y",
    "rowkey_delimiter": "|",
    "columns": {
        "x": {"cf": "rowkey", "col": "x", "type": "string"},
        "y": {"cf": "rowkey", "col": "y", "type": "string"},
        "v": {"cf": "cf", "col": "v", "type": "int"},
    },
}


def _plain_row(k: int) -> dict:
    return {
        "k": k,
        "n": None if k % 9 == 0 else k * 7,
        "o": k * -13,
        "s": None if k % 4 == 0 else f"v{k % 20}",
        "d": dt.date(2000, 1, 1) + dt.timedelta(days=k),
        "f": k / 8,
    }


PLAIN_ROWS = [_plain_row(k) for k in range(-60, 60)]
TWO_FAMILIES = "k INT :key, n INT cf:n, t STRING cf:t, s STRING xf:s"
"""A table of two families (storage/read/family_join.py joins their rows): a filter on one
family's column keeps or drops the whole row."""
FAMS_ROWS = [{"k": k, "n": None if k % 9 == 0 else k * 7, "t": f"t{k % 3}",
              "s": None if k % 4 == 0 else f"v{k % 20}"} for k in range(-60, 60)]
ORDERED_ROWS = [{"k": k, "n": k * 1000} for k in range(-60, 60)]
COMP_ROWS = [
    {"a": a, "b": b, "c": c, "v": a * 100 + i}
    for a in range(-3, 4) for i, (b, c) in enumerate([("aaa", "x"), ("aab", ""), ("bbb", "yy"), ("ccc", "y|z")])
]
DELIM_ROWS = [{"x": x, "y": y, "v": i} for i, (x, y) in enumerate([("a", "1"), ("a", "2"), ("ab", "1"), ("b", ""), ("b", "9")])]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("pushdown") / "root")
    conn = storage.connect(path)
    signed = [struct.pack(">i", v) for v in (20, 40, -40, -20)]  # byte order: positives first
    fill_table(conn, "plain", create_serde("binary", PLAIN), PLAIN_ROWS, sorted(signed))
    ordered = create_serde("binary", ORDERED)
    fill_table(conn, "ordered", ordered, ORDERED_ROWS, [ordered.serialize({"k": v})[0] for v in (-30, 0, 30)])
    comp = create_serde("binary", COMPOSITE)
    fill_table(conn, "comp", comp, COMP_ROWS, [comp.serialize({"a": v, "b": "aaa", "c": ""})[0] for v in (-1, 1)])
    fill_table(conn, "delim", create_serde("binary", DELIMITED), DELIM_ROWS, [b"ab"])
    fill_table(conn, "fams", create_serde("binary", TWO_FAMILIES), FAMS_ROWS, sorted(signed), {"cf": {}, "xf": {}})
    conn.close()
    return path


def _options(root, table):
    if table == "plain":
        return {"root": root, "table": "plain", "hbase.columns.mapping": PLAIN}
    if table == "ordered":
        return {"root": root, "table": "ordered", "hbase.columns.mapping": ORDERED}
    if table == "fams":
        return {"root": root, "table": "fams", "hbase.columns.mapping": TWO_FAMILIES}
    return {"root": root, "catalog": json.dumps(COMPOSITE if table == "comp" else DELIMITED)}


ROWS = {"plain": PLAIN_ROWS, "ordered": ORDERED_ROWS, "comp": COMP_ROWS, "delim": DELIM_ROWS, "fams": FAMS_ROWS}


def _lt(a, b):
    return a is not None and a < b


# (table, SQL predicate, Python predicate, filters Spark must still evaluate besides IS NOT NULL ones,
#  expected number of splits, or None where it is not checked).  Tests of a fixed-width cell (the
#  binary INT n, DATE d ...) are compared once decoded, never on the stored bytes: a cell of another
#  width must fail the read, not be dropped unread (tests/connector/test_right_or_loud.py).
CASES = [
    ("plain", "k = -5", lambda r: r["k"] == -5, set(), 1),
    ("plain", "k < -50", lambda r: r["k"] < -50, set(), 1),
    ("plain", "k > -3 AND k <= 3", lambda r: -3 < r["k"] <= 3, set(), 2),
    ("plain", "k >= 55", lambda r: r["k"] >= 55, set(), 1),
    ("plain", "k IN (-60, 0, 59, 100)", lambda r: r["k"] in (-60, 0, 59), set(), 2),
    ("plain", "n = 14", lambda r: r["n"] == 14, {"n = 14"}, 5),
    ("plain", "n > -20 AND n < 30", lambda r: r["n"] is not None and -20 < r["n"] < 30, {"n > -20", "n < 30"}, None),
    ("plain", "n >= 400 OR n <= -400", lambda r: r["n"] is not None and abs(r["n"]) >= 400, None, None),
    ("plain", "o <= -700", lambda r: r["o"] <= -700, {"o <= -700"}, None),
    ("plain", "o IN (13, -13, 5)", lambda r: r["o"] in (13, -13), {"o IN (13, -13, 5)"}, None),
    ("plain", "s LIKE 'v1%'", lambda r: r["s"] is not None and r["s"].startswith("v1"), set(), None),
    ("plain", "s LIKE '%5'", lambda r: r["s"] is not None and r["s"].endswith("5"), {"s ENDS WITH '5'"}, None),
    ("plain", "n IS NULL", lambda r: r["n"] is None, {"n IS NULL"}, None),
    ("plain", "s IS NOT NULL AND k < 0", lambda r: r["s"] is not None and r["k"] < 0, set(), 3),
    ("plain", "n <> 14", lambda r: r["n"] is not None and r["n"] != 14, {"NOT (n = 14)"}, None),
    ("plain", "d >= DATE'2000-01-25'", lambda r: r["d"] >= dt.date(2000, 1, 25), {"d >= datetime.date(2000, 1, 25)"}, None),
    ("plain", "d < DATE'1999-12-01'", lambda r: r["d"] < dt.date(1999, 12, 1), {"d < datetime.date(1999, 12, 1)"}, None),
    ("plain", "f > 3.5", lambda r: r["f"] > 3.5, {"f > 3.5"}, None),
    ("ordered", "k > -5 AND k <= 5", lambda r: -5 < r["k"] <= 5, set(), 2),
    ("ordered", "k IN (-31, 31)", lambda r: r["k"] in (-31, 31), set(), 2),
    ("ordered", "n < -59000", lambda r: r["n"] < -59000, {"n < -59000"}, 4),
    ("comp", "a = 1 AND b > 'aab'", lambda r: r["a"] == 1 and r["b"] > "aab", set(), 1),
    ("comp", "a IN (-1, 2) AND b = 'bbb' AND c = 'yy'", lambda r: r["a"] in (-1, 2) and (r["b"], r["c"]) == ("bbb", "yy"), set(), 2),
    ("comp", "a >= 2", lambda r: r["a"] >= 2, set(), 1),
    ("comp", "a = -2 AND c LIKE 'y%'", lambda r: r["a"] == -2 and r["c"].startswith("y"), {"c STARTS WITH 'y'"}, 1),
    ("comp", "b = 'ccc'", lambda r: r["b"] == "ccc", {"b = 'ccc'"}, 3),
    ("delim", "x = 'a'", lambda r: r["x"] == "a", set(), 1),
    ("delim", "x = 'b' AND y >= '1'", lambda r: r["x"] == "b" and r["y"] >= "1", set(), 1),
    ("delim", "x > 'a'", lambda r: r["x"] > "a", {"x > 'a'"}, None),
    ("fams", "s = 'v2'", lambda r: r["s"] == "v2", set(), None),
    ("fams", "t = 't1' AND s LIKE 'v1%'", lambda r: r["t"] == "t1" and r["s"] is not None and r["s"].startswith("v1"),
     set(), None),
    ("fams", "s IS NULL AND k > -30", lambda r: r["s"] is None and r["k"] > -30, None, None),
    ("fams", "t <> 't0' OR s = 'v3'", lambda r: r["t"] != "t0" or r["s"] == "v3", None, None),
]


def _key_of(table):
    return {"plain": ("k",), "ordered": ("k",), "comp": ("a", "b", "c"), "delim": ("x", "y"), "fams": ("k", "n", "t", "s")}[table]


def _opt_in(source_format):
    """The Python source pushes filters only when asked to (regionscan.python.pushdown)."""
    return {"regionscan.python.pushdown": "true"} if source_format == "regionscan_python" else {}


def _not_on_bytes(plan) -> list[str]:
    """The filters the stored bytes do not answer: left for Spark, or (the JVM source) evaluated
    by its worker on the decoded rows (tests/connector/test_decoded_filters.py)."""
    return list(plan.residual) + list(plan.decoded or [])


@pytest.mark.parametrize("table, where, predicate, residual, splits", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_pushdown_returns_what_spark_would(spark, source_format, root, table, where, predicate, residual, splits):
    options = {**_options(root, table), **_opt_in(source_format)}
    df = spark.read.format(source_format).options(**options).load().where(where)
    key = _key_of(table)
    got = sorted(tuple(r[c] for c in key) for r in df.collect())
    want = sorted(tuple(r[c] for c in key) for r in ROWS[table] if predicate(r))
    assert want and got == want
    plan = connector.explain(df)
    if residual is not None:
        assert {f for f in _not_on_bytes(plan) if not f.endswith("IS NOT NULL")} == residual, str(plan)
    if splits is not None:
        assert plan.splits == splits, str(plan)


def test_explain_reports_ranges_gets_and_filters(spark, source_format, root):
    options = {**_options(root, "plain"), **_opt_in(source_format)}
    df = spark.read.format(source_format).options(**options).load()
    plan = connector.explain(df.where("k IN (1, 2, 3) AND s = 'v2' AND n > 0 AND f < 2.0"))
    assert plan.point_gets == 3 and len(plan.key_ranges) == 3
    assert "k IN (1, 2, 3)" in plan.pushed and "s = 'v2'" in plan.pushed and "f < 2.0" in plan.residual
    assert "n > 0" in _not_on_bytes(plan)  # a fixed-width cell: compared once decoded
    assert "SingleColumnValueFilter ('cf', 's'" in plan.engine_filter and "'f'" not in plan.engine_filter
    assert "'n'" not in plan.engine_filter
    text = str(plan)
    assert "3 point gets" in text and "left for Spark: " in text and "f < 2.0" in text
    same = connector.explain(_options(root, "plain"))  # options alone: no filters, the whole table
    assert same.key_ranges is None and same.splits == 5 and same.pushed == []


def test_superset_filters_narrow_and_spark_rechecks(spark, source_format, root):
    options = dict(_options(root, "plain"), **{"regionscan.pushdown.superset": "true"}, **_opt_in(source_format))
    df = spark.read.format(source_format).options(**options).load().where("s LIKE '%V5'")
    assert df.collect() == []  # the engine's substring test ignores case; Spark's LIKE does not
    plan = connector.explain(df)
    assert "substring:v5" in plan.engine_filter.lower() and "s ENDS WITH 'V5'" in _not_on_bytes(plan)


def test_column_filters_can_be_kept_in_spark(spark, source_format, root):
    options = dict(_options(root, "plain"), **{"hbase.spark.pushdown.columnfilter": "false"}, **_opt_in(source_format))
    df = spark.read.format(source_format).options(**options).load().where("k < -50 AND n < 0")
    assert sorted(r.k for r in df.collect()) == [k for k in range(-60, -50) if k % 9]
    plan = connector.explain(df)
    assert "k < -50" in plan.pushed and "n < 0" in _not_on_bytes(plan) and plan.engine_filter is None


@pytest.mark.parametrize("columns, where, predicate", [
    (("k", "n"), "s = 'v2'", lambda r: r["s"] == "v2"),
    (("k", "s"), "t = 't1'", lambda r: r["t"] == "t1"),
    (("k", "n"), "k > 40", lambda r: r["k"] > 40),
], ids=["filter on the other family", "filter on the pruned family", "key range"])
def test_a_two_family_table_reads_pruned_columns(spark, source_format, root, columns, where, predicate):
    """Queries selecting some columns of a table of two families (the JVM source hides the
    others: every row with a mapped cell, storage/read/hidden_columns.py), with a filter on
    either family's column: the rows and values Spark would have."""
    options = {**_options(root, "fams"), **_opt_in(source_format)}
    df = spark.read.format(source_format).options(**options).load().where(where).select(*columns)
    got = sorted(tuple(r) for r in df.collect())
    want = sorted(tuple(r[c] for c in columns) for r in FAMS_ROWS if predicate(r))
    assert want and got == want
