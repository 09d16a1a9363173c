"""spark.read.format("regionscan") returns what an embedded scan decodes, for every type and mapping form.

Each test runs through both sources (the JVM source and ``regionscan_python``).
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

import storage
from serde import create_serde
from serde_tables import fill_table

pytestmark = pytest.mark.spark

SPARK_FORM = (
    "key STRING :key, ti TINYINT cf:ti, si SMALLINT cf:si, i INT cf:i, bi BIGINT cf:bi, "
    "f FLOAT cf:f, d DOUBLE cf:d, b BOOLEAN cf:b, dec DECIMAL(10,2) cf:dec, dt DATE cf:dt, "
    "ts TIMESTAMP cf:ts, raw BINARY cf:raw, s STRING cf:s, io INT cf:io#o, m MAP<STRING,INT> m:"
)
FAMILIES = {"cf": {"max_versions": 3}, "m": {}}


def _row(i: int) -> dict:
    if i % 5 == 4:  # nulls but the key and one string (a row needs a cell to exist)
        return {"key": f"r{i:03d}", "s": f"only-{i}"}
    return {
        "key": f"r{i:03d}", "ti": i % 100 - 50, "si": i * 300 - 9000, "i": i * 100_003 - 5_000_000,
        "bi": (i - 10) * 10**12, "f": i / 4 - 3.0, "d": i * 1.5e-3 - 0.1, "b": i % 2 == 0,
        "dec": Decimal(i * 37 - 400) / 100, "dt": dt.date(1969, 12, 1) + dt.timedelta(days=i * 11),
        "ts": dt.datetime(1969, 12, 31, 23, 0) + dt.timedelta(hours=i * 7, milliseconds=i * 3),
        "raw": bytes([i % 256, 0, 255]), "s": f"text-{i}-é", "io": i * 1000 - 20_000,
        "m": {f"q{j}": i + j for j in range(i % 3)} or None,
    }


ROWS = [_row(i) for i in range(40)]


def _expect(*names):
    """The rows a scan of these columns returns (rows holding none of their cells do not exist)."""
    return [tuple(r.get(n) for n in names) for r in ROWS if any(r.get(n) is not None for n in names[1:])]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("spark_read") / "root")
    conn = storage.connect(path)
    binary = create_serde("binary", SPARK_FORM)
    fill_table(conn, "types", binary, ROWS, [b"r010", b"r020", b"r030"], FAMILIES)
    text = create_serde("string", ":key,cf:i,cf:d,cf:dt,cf:ts,cf:s,cf:dec",
                        {"columns": "key,i,d,dt,ts,s,dec", "columns.types": "string,int,double,date,timestamp,string,decimal(10,2)"})
    text_rows = [{k: r.get(k) for k in ("key", "i", "d", "dt", "ts", "s", "dec")} for r in ROWS]
    fill_table(conn, "text", text, text_rows, [b"r020"], FAMILIES)
    conn.close()
    return path


def _embedded(root, table, serde):
    """The rows an embedded scan decodes row by row (the SerDe's row-wise path)."""
    conn = storage.connect(root, read_only=True)
    try:
        return [serde.deserialize(r) for r in conn.table(table).scan(columns=serde.scan_columns or None)]
    finally:
        conn.close()


def _read(spark, fmt, **options):
    return spark.read.format(fmt).options(**options).load()


def test_every_binary_type_reads_like_the_embedded_scan(spark, source_format, root):
    df = _read(spark, source_format, root=root, table="types", **{"hbase.columns.mapping": SPARK_FORM})
    serde = create_serde("binary", SPARK_FORM)
    assert df.columns == serde.column_names
    # one per region; the JVM source packs the four small splits into tasks as Spark packs files
    assert df.rdd.getNumPartitions() == (4 if source_format == "regionscan_python" else 2)
    got = [tuple(r) for r in df.collect()]
    want = _embedded(root, "types", serde)
    assert got == want
    assert got[4] == ("r004",) + (None,) * 11 + ("only-4", None, None)
    assert got[1][10] == dt.datetime(1969, 12, 31, 23, 0) + dt.timedelta(hours=7, milliseconds=3)


def test_json_catalog_and_hive_mapping_read_the_same_rows(spark, source_format, root):
    catalog = {
        "table": {"namespace": "default", "name": "types"},
        "rowkey": "key",
        "columns": {
            "key": {"cf": "rowkey", "col": "key", "type": "string"},
            "i": {"cf": "cf", "col": "i", "type": "int"},
            "dec": {"cf": "cf", "col": "dec", "type": "decimal(10,2)"},
            "m": {"cf": "m", "col": "", "type": "map<string,int>"},
        },
    }
    df = _read(spark, source_format, root=root, catalog=json.dumps(catalog))  # the table name comes from the catalog
    assert [tuple(r) for r in df.collect()] == _expect("key", "i", "dec", "m")
    text_opts = {"hbase.columns.mapping": ":key,cf:i,cf:d,cf:dt,cf:ts,cf:s,cf:dec",
                 "columns": "key,i,d,dt,ts,s,dec", "columns.types": "string,int,double,date,timestamp,string,decimal(10,2)"}
    df = _read(spark, source_format, root=root, table="text", **text_opts)
    serde = create_serde("string", text_opts["hbase.columns.mapping"], text_opts)
    assert [tuple(r) for r in df.collect()] == _embedded(root, "text", serde)


def test_column_pruning_and_user_schema(spark, source_format, root):
    df = _read(spark, source_format, root=root, table="types", columns="s, i", **{"hbase.columns.mapping": SPARK_FORM})
    assert df.columns == ["i", "s"]  # mapping order
    assert [tuple(r) for r in df.collect()] == [(r.get("i"), r.get("s")) for r in ROWS]  # every row has s
    only_key = _read(spark, source_format, root=root, table="types", columns="key", **{"hbase.columns.mapping": SPARK_FORM})
    assert [r.key for r in only_key.collect()] == [r["key"] for r in ROWS]
    typed = (spark.read.format(source_format).schema("key STRING, bi BIGINT")
             .options(root=root, table="types", **{"hbase.columns.mapping": SPARK_FORM}).load())
    assert [tuple(r) for r in typed.collect()] == _expect("key", "bi")


def test_versions_and_time_range_options(spark, source_format, tmp_path):
    path = str(tmp_path / "root")
    conn = storage.connect(path)
    table = conn.create_table("v", {"cf": {"max_versions": 5}}, settings={"wal_sync": "none"})
    for ts in (10, 20, 30):
        table.put(b"a", {b"cf:n": ts.to_bytes(4, "big")}, timestamp=ts)
    conn.close()
    base = dict(root=path, table="v", **{"hbase.columns.mapping": "k STRING :key, n INT cf:n, t BIGINT :timestamp"})
    assert [tuple(r) for r in _read(spark, source_format, **base).collect()] == [("a", 30, 30)]
    old = _read(spark, source_format, **base, **{"hbase.spark.query.timerange.start": "0", "hbase.spark.query.timerange.end": "25"})
    assert [tuple(r) for r in old.collect()] == [("a", 20, 20)]
    exact = _read(spark, source_format, **base, **{"hbase.spark.query.timestamp": "10"})
    assert [tuple(r) for r in exact.collect()] == [("a", 10, 10)]


def test_sql_view_and_missing_options(spark, source_format, root):
    import connector

    assert connector.register(spark)  # explicit registration works beside the automatic one
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW rs_types USING {source_format} OPTIONS (root '{root}', table 'types', "
        f"`hbase.columns.mapping` 'key STRING :key, i INT cf:i')"
    )
    assert spark.sql("SELECT count(*) AS n, max(i) AS top FROM rs_types").collect()[0].asDict() == {
        "n": len(_expect("key", "i")), "top": max(r["i"] for r in ROWS if "i" in r)}
    with pytest.raises(Exception, match="hbase.columns.mapping"):
        _read(spark, source_format, root=root, table="types").collect()
