"""Every SaveMode of df.write.format("regionscan"): decided on the driver before any task,
with Spark's file-source semantics (the table existing is the condition), and hbase-spark's
``newtable`` creating a missing table; the Python source refuses the modes its API lacks."""

from __future__ import annotations

import os

import pytest

import storage
from serde_tables import kab_options, write_kab_table

pytestmark = pytest.mark.spark

DDL = "k STRING, a STRING, b INT"
OLD = [("old1", "x", 1), ("old2", "y", 2)]
NEW = [("new1", "p", 10), ("old1", "q", 11)]


def _read(spark, root, name="t"):
    return sorted(tuple(r) for r in spark.read.format("regionscan").options(**kab_options(root, name)).load().collect())


def _regions(root, name="t"):
    conn = storage.connect(root, read_only=True)
    try:
        return len(conn.table(name).regions())
    finally:
        conn.close()


def _poisoned(spark):
    """NEW, but any task that computes a row fails: a write that reads it has started work."""
    from pyspark.sql.functions import udf

    @udf("string")
    def boom(a):
        raise RuntimeError("a task ran")

    return spark.createDataFrame(NEW, DDL).withColumn("a", boom("a"))


def _merged(old, new):
    rows = {r[0]: r for r in old}
    rows.update({r[0]: r for r in new})
    return sorted(rows.values())


@pytest.mark.parametrize("mode,expected", [
    ("append", _merged(OLD, NEW)),
    ("overwrite", sorted(NEW)),
    ("ignore", sorted(OLD)),
])
def test_modes_on_an_existing_table(spark, tmp_path, mode, expected):
    root = str(tmp_path / "root")
    write_kab_table(root, "t", OLD)
    spark.createDataFrame(NEW, DDL).write.format("regionscan").options(**kab_options(root)).mode(mode).save()
    assert _read(spark, root) == expected


def test_error_if_exists_fails_in_one_line_before_any_task(spark, tmp_path):
    root = str(tmp_path / "root")
    write_kab_table(root, "t", OLD)
    write_kab_table(root, "empty", [])
    for name, mode in [("t", "errorifexists"), ("t", None), ("empty", "error")]:  # None: Spark's default mode
        writer = _poisoned(spark).write.format("regionscan").options(**kab_options(root, name))
        if mode is not None:
            writer = writer.mode(mode)
        with pytest.raises(Exception) as info:
            writer.save()
        text = str(info.value)
        assert f"table {name} already exists under {root} (save mode ErrorIfExists" in text
        assert "a task ran" not in text
    assert _read(spark, root) == sorted(OLD) and _read(spark, root, "empty") == []
    assert not os.path.isdir(os.path.join(root, "t", ".staging"))  # nothing was staged


def test_ignore_on_an_existing_table_runs_no_task(spark, tmp_path):
    root = str(tmp_path / "root")
    write_kab_table(root, "t", OLD)
    _poisoned(spark).write.format("regionscan").options(**kab_options(root)).mode("ignore").save()
    assert _read(spark, root) == sorted(OLD)


@pytest.mark.parametrize("mode", ["append", "overwrite", "errorifexists", "ignore", None])
def test_every_mode_creates_a_missing_table_with_newtable_regions(spark, tmp_path, mode):
    root = str(tmp_path / "root")
    writer = spark.createDataFrame(NEW, DDL).write.format("regionscan").options(**kab_options(root, "fresh"))
    writer = writer.option("newtable", "5")
    (writer if mode is None else writer.mode(mode)).save()
    assert _read(spark, root, "fresh") == sorted(NEW)
    assert _regions(root, "fresh") == 5


@pytest.mark.parametrize("mode", ["append", "overwrite", "errorifexists", "ignore"])
def test_a_missing_table_without_newtable_is_one_line_before_any_task(spark, tmp_path, mode):
    root = str(tmp_path / "root")
    os.makedirs(root)
    with pytest.raises(Exception) as info:
        _poisoned(spark).write.format("regionscan").options(**kab_options(root, "absent")).mode(mode).save()
    text = str(info.value)
    assert f"table absent does not exist under {root} (no tables yet); create it, or give option newtable" in text
    assert "a task ran" not in text
    assert not os.path.exists(os.path.join(root, "absent"))


@pytest.mark.parametrize("mode", ["errorifexists", "ignore"])
def test_the_python_source_refuses_modes_its_api_lacks_in_one_line(spark, tmp_path, mode):
    root = str(tmp_path / "root")
    write_kab_table(root, "t", OLD)
    with pytest.raises(Exception) as info:
        spark.createDataFrame(NEW, DDL).write.format("regionscan_python").options(**kab_options(root)).mode(mode).save()
    first = str(info.value).strip().splitlines()[0]
    assert "UNSUPPORTED_DATA_SOURCE_SAVE_MODE" in first and "regionscan_python" in first
    assert _read(spark, root) == sorted(OLD)
