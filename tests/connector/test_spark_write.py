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


KEYED = "k BIGINT :key#o, v BIGINT cf:v, w STRING cf:w"


def _regions_rows_files(root, name):
    """Per region in key order: its rows and its store files."""
    with storage.connect(root, read_only=True) as conn:
        table = conn.table(name)
        return [(table.count(row_start=r["start_key"] or None, row_stop=r["end_key"] or None), r["store_files"])
                for r in table.regions()]


def test_newtable_splits_at_the_quantiles_of_the_keys_not_their_first_byte(spark, tmp_path):
    """Every positive BIGINT's ordered encoding starts with 0x80: a uniform split of the first byte
    put all of them in one region; the split at the sampled keys' quantiles gives each about 1/4."""
    root = str(tmp_path / "root")
    n = 20000
    # squares: keys far from uniform in value, so a split by value ranges would be uneven too
    df = spark.range(0, n, 1, 3).selectExpr("id * id + 1 AS k", "id AS v", "cast(id AS STRING) AS w")
    (df.write.format("regionscan").options(root=root, table="big", newtable="4", **{"hbase.columns.mapping": KEYED})
     .mode("append").save())
    regions = _regions_rows_files(root, "big")
    counts = [rows for rows, _ in regions]
    assert len(counts) == 4 and sum(counts) == n
    assert all(0.15 * n <= c <= 0.35 * n for c in counts), counts
    # three input tasks, each spanning every region: the write sent each region's rows to one task
    assert [files for _, files in regions] == [1, 1, 1, 1]
    got = spark.read.format("regionscan").options(root=root, table="big", **{"hbase.columns.mapping": KEYED}).load()
    assert got.selectExpr("sum(v)", "count(*)", "sum(k)").first() == df.selectExpr("sum(v)", "count(*)", "sum(k)").first()


def test_a_load_into_an_existing_table_stages_about_one_file_per_region_not_one_per_task(spark, tmp_path):
    """Three input tasks each span all four regions of an existing table: the load regroups the rows
    by region first, so each region gets one file, or two (the rows from its start to its first
    sampled key come from the task before), not three."""
    root = str(tmp_path / "root")
    opts = dict(root=root, table="t", **{"hbase.columns.mapping": KEYED})
    first = spark.range(0, 20000, 1, 3).selectExpr("id * 2 AS k", "id AS v", "cast(id AS STRING) AS w")
    first.write.format("regionscan").options(newtable="4", **opts).mode("append").save()
    assert [files for _, files in _regions_rows_files(root, "t")] == [1, 1, 1, 1]
    # odd keys, interleaved with the table's: every region gets rows, from every input partition
    more = spark.range(0, 20000, 1, 3).selectExpr("id * 2 + 1 AS k", "id AS v", "cast(id AS STRING) AS w").repartition(3)
    more.write.format("regionscan").options(**opts).mode("append").save()
    loaded = [files - 1 for _, files in _regions_rows_files(root, "t")]
    assert all(1 <= n <= 2 for n in loaded) and sum(loaded) < 12, loaded
    got = spark.read.format("regionscan").options(**opts).load()
    assert got.selectExpr("count(*)", "sum(k)", "sum(v)").first() == \
        first.union(more).selectExpr("count(*)", "sum(k)", "sum(v)").first()


def test_sample_split_keys_weigh_each_sampled_key_by_its_partition():
    import pyarrow as pa

    from connector.write_splits import sample_split_keys

    # partition A: keys a000..a099, 100 rows sampled of 100; partition B: b000..b099 sampled of 900
    keys = pa.array([b"a%03d" % i for i in range(100)] + [b"b%03d" % i for i in range(100)])
    weights = [1.0] * 100 + [9.0] * 100
    cuts, rows = sample_split_keys(keys, weights, 4)
    assert cuts == [b"b017", b"b045", b"b073"] and [keys[r].as_py() for r in rows] == cuts  # A's rows: 10% of all
    assert sample_split_keys(pa.array([b"x", b"x", b"y"]), [1.0, 1.0, 1.0], 4) is None  # too few distinct keys


def test_no_attempt_of_an_aborted_job_leaves_a_staging_folder(tmp_path):
    """Spark aborts a write at its first failed task while others still run: an attempt that
    finishes after the abort deletes the job's folder it made again, one that starts after it
    stages nothing, and a folder of an aborted job found later goes with the next open."""
    import pyarrow as pa

    from storage import InvalidArgument
    from storage.engine import BulkLoadTask, abort_load, table_regions
    from storage.vfs.fs import FileSystem

    root = str(tmp_path / "root")
    _new_table(root)
    table_fs = FileSystem(root).sub("t")
    regions, families = table_regions(table_fs)
    rows = pa.RecordBatch.from_pydict({"key": [b"\x80\x00\x00\x05"], "cf:n": [b"1"]})
    late = BulkLoadTask(table_fs, "job", "p0", regions, families, timestamp=1)
    late.add(rows)
    assert abort_load(table_fs, "job")
    with pytest.raises(InvalidArgument, match="aborted"):
        late.finish()  # it wrote its files into a folder it made again, then saw the abort
    assert not os.path.exists(os.path.join(root, "t", ".staging", "job"))
    with pytest.raises(InvalidArgument, match="staged nothing"):
        BulkLoadTask(table_fs, "job", "p1", regions, families, timestamp=1)
    assert not os.path.exists(os.path.join(root, "t", ".staging", "job"))
    os.makedirs(os.path.join(root, "t", ".staging", "job", "p2", "x"))  # an attempt killed mid-write elsewhere
    with storage.connect(root) as conn:  # a writer's open of the table...
        conn.table("t")
    assert sorted(os.listdir(os.path.join(root, "t", ".staging"))) == ["job.aborted"]  # ...swept it


def test_runs_of_a_task_in_key_order_stage_one_file_per_region(tmp_path):
    """A task whose rows come in key order writes each region's runs into one staged file
    (before, one file per region per run of 2^20 buffered cells); a run that goes back starts a new file."""
    import pyarrow as pa

    from storage.engine import BulkLoadTask, commit_load, table_regions
    from storage.vfs.fs import FileSystem

    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {}}, split_keys=[b"k0300", b"k0600"])
    table_fs = FileSystem(root).sub("t")
    regions, families = table_regions(table_fs)

    def batch(lo, hi):
        return pa.RecordBatch.from_pydict({"key": [b"k%04d" % i for i in range(lo, hi)],
                                           "cf:a": [b"%d" % i for i in range(lo, hi)]})

    task = BulkLoadTask(table_fs, "job1", "p0", regions, families, timestamp=1, run_cells=100)
    for lo in range(0, 900, 50):  # 18 batches, 9 runs of 100 cells, crossing both region starts
        task.add(batch(lo, lo + 50))
    task.add(batch(900, 950))
    task.add(batch(100, 150))  # the last run goes back into the first region: a new file there only
    staged = task.finish()
    assert sorted((f.region_id, f.first_row, f.last_row) for f in staged) == sorted([
        (regions[0].region_id, b"k0000", b"k0299"), (regions[1].region_id, b"k0300", b"k0599"),
        (regions[2].region_id, b"k0600", b"k0949"), (regions[0].region_id, b"k0100", b"k0149")])
    commit_load(table_fs, "job1", staged)
    with storage.connect(root, read_only=True) as conn:
        assert conn.table("t").count() == 950


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
