"""``newtable`` = N in the Python Spark source (``format("regionscan_python")``): split at key quantiles.

pyspark's Python writer sees no rows on the driver, so the write creates its table with one
region, each task samples the encoded keys it stages, and the commit splits the still empty table
at the merged sample's quantiles before adding the files.  A uniform split of the first key byte
put every positive BIGINT (ordered encoding: first byte 0x80) into one of the N regions.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import storage
from connector.write_splits import KeySample, merged_split_keys

KEYED = "k BIGINT :key#o, v BIGINT cf:v, w STRING cf:w"


def _regions_rows_files(root: str, name: str) -> list[tuple[int, int]]:
    """Per region in key order: its rows and its store files."""
    with storage.connect(root, read_only=True) as conn:
        table = conn.table(name)
        return [(table.count(row_start=r["start_key"] or None, row_stop=r["end_key"] or None), r["store_files"])
                for r in table.regions()]


@pytest.mark.spark
def test_python_source_newtable_splits_bigint_keys_at_their_quantiles(spark, tmp_path):
    root = str(tmp_path / "root")
    n = 20000
    # squares: far from uniform in value; three input partitions, each a contiguous key range
    df = spark.range(0, n, 1, 3).selectExpr("id * id + 1 AS k", "id AS v", "cast(id AS STRING) AS w")
    options = {"root": root, "table": "big", "hbase.columns.mapping": KEYED}
    df.write.format("regionscan_python").options(newtable="4", **options).mode("append").save()
    regions = _regions_rows_files(root, "big")
    counts = [rows for rows, _ in regions]
    assert len(counts) == 4 and sum(counts) == n, counts
    assert all(0.15 * n <= c <= 0.35 * n for c in counts), counts
    assert all(files >= 1 for _, files in regions), regions
    got = spark.read.format("regionscan_python").options(**options).load()
    assert got.selectExpr("sum(v)", "count(*)", "sum(k)").first() == df.selectExpr("sum(v)", "count(*)", "sum(k)").first()


@pytest.mark.spark
def test_python_source_newtable_of_a_tiny_dataframe_keeps_n_uniform_regions(spark, tmp_path):
    """Two distinct keys cannot cut five regions: the table gets newtable's uniform split, as before."""
    root = str(tmp_path / "root")
    options = {"root": root, "table": "tiny", "hbase.columns.mapping": KEYED}
    df = spark.createDataFrame([(5, 1, "a"), (7, 2, "b")], "k BIGINT, v BIGINT, w STRING")
    df.write.format("regionscan_python").options(newtable="5", **options).mode("append").save()
    with storage.connect(root, read_only=True) as conn:
        starts = [r["start_key"] for r in conn.table("tiny").regions()]
    assert starts[1:] == storage.uniform_split_keys(5)
    assert sorted(tuple(r) for r in spark.read.format("regionscan_python").options(**options).load().collect()) == \
        [(5, 1, "a"), (7, 2, "b")]


@pytest.mark.spark
def test_python_source_newtable_write_that_fails_leaves_the_table_with_n_empty_regions(spark, tmp_path):
    root = str(tmp_path / "root")
    options = {"root": root, "table": "failed", "hbase.columns.mapping": KEYED}
    bad = spark.createDataFrame([(1, 1, "a"), (None, 2, "b")], "k BIGINT, v BIGINT, w STRING").repartition(2)
    with pytest.raises(Exception, match="cannot encode None for column 'k'"):
        bad.write.format("regionscan_python").options(newtable="3", **options).mode("append").save()
    assert [rows for rows, _ in _regions_rows_files(root, "failed")] == [0, 0, 0]


def test_key_sample_is_uniform_over_batches_of_any_size():
    """Bottom-k of random priorities: every key as likely, however the task's batches are cut."""
    keys = [b"%08d" % i for i in range(100_000)]
    sample = KeySample(2000, seed=7)
    at = 0
    for size in [1, 10, 50_000, 3, 20_000, 29_986]:
        sample.add(pa.array(keys[at : at + size], pa.binary()))
        at += size
    assert at == len(keys) and sample.rows == len(keys) and len(sample.keys) == 2000
    got = np.sort(np.array([int(k) for k in sample.keys.to_pylist()]))
    assert len(set(got.tolist())) == 2000
    # the sample's deciles lie near the keys' (each within 2.5% of the rows)
    assert np.all(np.abs(np.quantile(got, np.linspace(0.1, 0.9, 9)) - np.linspace(0.1, 0.9, 9) * 100_000) < 2500)


def test_merged_samples_weigh_each_task_by_its_rows():
    """A task of 90,000 rows and one of 10,000, 500 sampled keys each: the halfway cut lies at the
    50,000th row, inside the big task's keys (unweighted, it would fall between the two tasks)."""
    big, small = KeySample(500, seed=1), KeySample(500, seed=2)
    big.add(pa.array([b"a%06d" % i for i in range(90_000)]))
    small.add(pa.array([b"b%06d" % i for i in range(10_000)]))
    cuts = merged_split_keys([(big.keys, big.rows), (small.keys, small.rows)], 2)
    assert cuts is not None and len(cuts) == 1
    assert b"a045000" < cuts[0] < b"a055000"
    assert merged_split_keys([(pa.array([b"x"]), 5)], 3) is None  # too few distinct keys
    assert merged_split_keys([], 3) is None
