"""df.write.format("regionscan"): bulk load round trips, append and overwrite, abort and the writer lock."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import pytest

import storage
from serde import create_serde

pytestmark = pytest.mark.spark

MAPPING = "k INT :key#o, n BIGINT cf:n, s STRING cf:s, dec DECIMAL(8,3) cf:dec, day DATE cf:day, m MAP<STRING,INT> x:"
DDL = "k INT, n BIGINT, s STRING, dec DECIMAL(8,3), day DATE, m MAP<STRING,INT>"


def _rows(keys, tag):
    return [
        (k, None if k % 7 == 0 else k * 1000, f"{tag}-{k}", Decimal(k) / 8, dt.date(2020, 1, 1) + dt.timedelta(days=k),
         {f"q{k % 3}": k} if k % 2 else None)
        for k in keys
    ]


def _new_table(root, name="t"):
    serde = create_serde("binary", MAPPING)
    conn = storage.connect(root)
    splits = [serde.serialize({"k": v})[0] for v in (-50, 0, 50)]
    conn.create_table(name, {"cf": {}, "x": {}}, split_keys=splits, settings={"wal_sync": "none"})
    conn.close()


def _options(root, name="t"):
    return {"root": root, "table": name, "hbase.columns.mapping": MAPPING}


def _read(spark, root, name="t"):
    return sorted(tuple(r) for r in spark.read.format("regionscan").options(**_options(root, name)).load().collect())


def _leftovers(root, name="t"):
    table_dir = os.path.join(root, name)
    staged = []
    for base, _, files in os.walk(os.path.join(table_dir, ".staging")):
        # an abort leaves a small marker naming the job, so late task attempts discard their files
        staged.extend(os.path.join(base, f) for f in files if not f.endswith(".aborted"))
    journals = os.listdir(os.path.join(table_dir, "bulkload")) if os.path.isdir(os.path.join(table_dir, "bulkload")) else []
    return staged + journals


def test_append_round_trip_and_newer_values_win(spark, tmp_path):
    root = str(tmp_path / "root")
    _new_table(root)
    first = _rows(range(-80, 80), "one")
    spark.createDataFrame(first, DDL).repartition(3).write.format("regionscan").options(**_options(root)).mode("append").save()
    assert _read(spark, root) == sorted(first)
    assert not _leftovers(root)
    second = _rows(range(60, 100), "two")
    spark.createDataFrame(second, DDL).write.format("regionscan").options(**_options(root)).mode("append").save()
    expected = {r[0]: r for r in first}
    for r in second:  # a bulk load is a put: null values write nothing, so older cells show through
        old = expected.get(r[0])
        expected[r[0]] = tuple(new if new is not None or old is None else old[i] for i, new in enumerate(r))
    assert _read(spark, root) == sorted(expected.values())
    # the embedded API sees the same rows, decoded row by row
    serde = create_serde("binary", MAPPING)
    conn = storage.connect(root, read_only=True)
    embedded = sorted(serde.deserialize(r) for r in conn.table("t").scan(columns=serde.scan_columns))
    conn.close()
    assert embedded == sorted(expected.values())


def test_overwrite_replaces_files_and_unflushed_edits(spark, tmp_path):
    root = str(tmp_path / "root")
    _new_table(root)
    spark.createDataFrame(_rows(range(-60, 60), "old"), DDL).write.format("regionscan").options(**_options(root)).mode("append").save()
    conn = storage.connect(root)
    serde = create_serde("binary", MAPPING)
    key, cells = serde.serialize({"k": 999, "s": "in the WAL only"})
    conn.table("t").put(key, cells)
    conn.close()  # not flushed: the edit lives in the WAL
    fresh = _rows(range(-5, 5), "new")
    spark.createDataFrame(fresh, DDL).write.format("regionscan").options(**_options(root)).mode("overwrite").save()
    assert _read(spark, root) == sorted(fresh)
    conn = storage.connect(root)  # a writer reopening the table agrees, WAL replay included
    assert len(list(conn.table("t").scan())) == len(fresh)
    conn.close()
    assert not _leftovers(root)


def test_failed_job_aborts_and_leaves_nothing(spark, tmp_path):
    from pyspark.sql import functions as F

    root = str(tmp_path / "root")
    _new_table(root)
    before = _rows(range(0, 10), "keep")
    spark.createDataFrame(before, DDL).write.format("regionscan").options(**_options(root)).mode("append").save()

    @F.udf("bigint", useArrow=False)
    def explode_on_13(n):
        if n == 13_000:
            raise ValueError("bad row 13")
        return n

    bad = spark.createDataFrame(_rows(range(-40, 40), "bad"), DDL).repartition(4).withColumn("n", explode_on_13("n"))
    with pytest.raises(Exception, match="bad row 13"):
        bad.write.format("regionscan").options(**_options(root)).mode("append").save()
    assert not _leftovers(root)
    assert _read(spark, root) == sorted(before)


def test_commit_needs_the_writer_lock_and_newtable_creates(spark, tmp_path):
    root = str(tmp_path / "root")
    _new_table(root)
    writer = storage.connect(root)
    writer.table("t")  # a writer process has the table open
    df = spark.createDataFrame(_rows(range(3), "x"), DDL)
    with pytest.raises(Exception, match="writer lock"):
        df.write.format("regionscan").options(**_options(root)).mode("append").save()
    writer.close()
    assert not _leftovers(root) and _read(spark, root) == []
    df.write.format("regionscan").options(**_options(root, "fresh"), newtable="4").mode("append").save()
    conn = storage.connect(root, read_only=True)
    assert len(conn.table("fresh").regions()) == 4
    conn.close()
    assert _read(spark, root, "fresh") == sorted(_rows(range(3), "x"))


def test_commit_recuts_files_of_a_region_split_since_staging(tmp_path):
    import pyarrow as pa

    from storage.engine import BulkLoadTask, commit_load, table_regions
    from storage.vfs.fs import FileSystem

    root = str(tmp_path / "root")
    _new_table(root)
    serde = create_serde("binary", MAPPING)
    table_fs = FileSystem(root).sub("t")
    regions, families = table_regions(table_fs)
    task = BulkLoadTask(table_fs, "job", "p0", regions, families, timestamp=1000)
    rows = _rows(range(-20, 20), "r")
    task.add(serde.serialize_batch(pa.RecordBatch.from_pylist(
        [dict(zip(["k", "n", "s", "dec", "day", "m"], r)) for r in rows], schema=serde.arrow_schema)))
    staged = task.finish()
    conn = storage.connect(root)
    conn.table("t").split(serde.serialize({"k": 10})[0])  # the staged file of [0, 50) now spans two regions
    conn.close()
    report = commit_load(table_fs, "job", staged)
    assert report.recut == 2 and len(report.regions) == 3  # both families of the split region
    conn = storage.connect(root, read_only=True)
    got = sorted(serde.deserialize(r) for r in conn.table("t").scan(columns=serde.scan_columns))
    conn.close()
    assert got == sorted(rows)
    assert not _leftovers(root)


def test_hbase_spark_timestamp_option_stamps_written_cells(spark, tmp_path):
    root = str(tmp_path / "root")
    _new_table(root)
    rows = _rows(range(1, 4), "stamped")
    (spark.createDataFrame(rows, DDL).write.format("regionscan").options(**_options(root))
     .option("hbase.spark.query.timestamp", "1234").mode("append").save())
    serde = create_serde("binary", MAPPING)
    with storage.connect(root, read_only=True) as conn:
        key = serde.serialize({"k": 2})[0]
        stamps = {ts for _, ts in conn.table("t").cells(key, b"cf:s", versions=3, include_timestamp=True)}
    assert stamps == {1234}
