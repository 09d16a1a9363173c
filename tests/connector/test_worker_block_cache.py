"""The engine worker's block cache: on by default for its reads, sized by one setting.

The worker is its JVM's region server, so its reads cache blocks unless the
options say ``hbase.mapreduce.scan.cacheblocks=false``; a dense block kept in
the cache keeps the row batch built from it, so a warm scan does not rebuild it.
Results (streamed batches, resolved chunks, decoded WAL) are kept in the same
cache only by reads with ``regionscan.scan.cacheresults`` true.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest
from engine_worker_process import SAMPLE_MAPPING, sample_table

from connector.worker import read_ops
from storage.errors import InvalidArgument
from storage.region import region_snapshots
from storage.region.region_snapshots import parse_cache_size, shared_block_cache

MAPPING = SAMPLE_MAPPING
SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "n", "type": "integer", "nullable": True, "metadata": {}},
    {"name": "s", "type": "string", "nullable": True, "metadata": {}}]})


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return sample_table(str(tmp_path_factory.mktemp("cache") / "root"), 1000, 500, 3)


@pytest.fixture
def fresh_cache(monkeypatch):
    monkeypatch.setattr(region_snapshots, "_caches", {})
    monkeypatch.setenv(region_snapshots.BLOCK_CACHE_SIZE_ENV, "8m")
    yield


def _read_all(root: str, **extra: str) -> tuple[pa.Table, int]:
    options = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING, "regionscan.pin.register": "false",
               **extra}
    plan = read_ops.plan({"options": options, "columns": ["n", "s"], "schema": SCHEMA, "parallelism": 1})
    batches = []
    for task in plan["tasks"]:
        req = {"options": options, "columns": ["n", "s"], "schema": SCHEMA, "splits": task["splits"]}
        batches.extend(read_ops.read_batches(req, read_ops.read_schema(req), {}))
    return pa.Table.from_batches(batches), len(plan["tasks"])


def test_worker_reads_cache_blocks_by_default_and_warm_reads_agree(root, fresh_cache):
    cold, _ = _read_all(root)
    cache = shared_block_cache()
    assert cache.capacity_bytes == 8 << 20
    assert cache.used_bytes > 0 and cache.hits == 0
    warm, _ = _read_all(root)
    assert cache.hits > 0
    assert warm.equals(cold)
    assert sorted(warm.column("n").to_pylist()) == [k * 3 for k in range(1000)]
    assert set(warm.column("s").to_pylist()) == {f"v{k}" for k in range(1000)}


def test_cacheblocks_false_reads_past_the_cache(root, fresh_cache):
    first, _ = _read_all(root, **{"hbase.mapreduce.scan.cacheblocks": "false"})
    second, _ = _read_all(root, **{"hbase.spark.query.cacheblocks": "false"})
    cache = shared_block_cache()
    assert cache.used_bytes == 0 and cache.hits == 0
    assert first.equals(second) and first.num_rows == 1000


def test_kept_results_only_for_reads_that_ask_and_inside_the_cache(root, fresh_cache):
    """``regionscan.scan.cacheresults``: the worker keeps a read's streamed batches in its
    block cache (one budget) for the next such read; reads that do not ask keep none."""
    plain = [_read_all(root)[0] for _ in range(3)]
    cache = shared_block_cache()
    assert cache.result_bytes == 0 and cache.result_hits == 0
    asked = [_read_all(root, **{"regionscan.scan.cacheresults": "true"})[0] for _ in range(3)]
    assert cache.result_bytes > 0 and cache.result_hits > 0  # kept on the second read, served on the third
    assert cache.used_bytes <= cache.capacity_bytes
    hits = cache.result_hits
    again, _ = _read_all(root, cacheresults="false")
    assert cache.result_hits == hits  # a read that says false is not served what others kept
    assert all(t.equals(plain[0]) for t in plain + asked + [again])


def test_the_process_default_keeps_results_for_reads_that_do_not_say(root, fresh_cache, monkeypatch):
    """``REGIONSCAN_CACHE_RESULTS`` (the worker's, from ``spark.regionscan.worker.cacheResults``)
    is the default of reads without the option; a read's own ``false`` still wins."""
    monkeypatch.setenv(region_snapshots.CACHE_RESULTS_ENV, "true")
    tables = [_read_all(root)[0] for _ in range(3)]
    cache = shared_block_cache()
    assert cache.cache_results and cache.result_bytes > 0 and cache.result_hits > 0
    hits = cache.result_hits
    tables.append(_read_all(root, **{"regionscan.scan.cacheresults": "false"})[0])
    assert cache.result_hits == hits
    assert all(t.equals(tables[0]) for t in tables)


def test_worker_with_a_bad_cache_results_default_stops_before_it_serves():
    env = {**os.environ, "REGIONSCAN_WORKER_SECRET": "x", "REGIONSCAN_CACHE_RESULTS": "often"}
    proc = subprocess.run([sys.executable, "-m", "connector.engine_worker"], input=b"", capture_output=True,
                          env=env, timeout=120)
    assert proc.returncode == 2 and proc.stdout == b""
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "REGIONSCAN_CACHE_RESULTS must be true or false, got 'often'" in lines[0]
    assert "spark.regionscan.worker.cacheResults" in lines[0]


@pytest.mark.parametrize("text, expected", [("0", 0), ("4096", 4096), ("512m", 512 << 20), ("2G", 2 << 30),
                                            (" 64kb ", 64 << 10)])
def test_cache_sizes(text, expected):
    assert parse_cache_size(text) == expected


@pytest.mark.parametrize("text", ["", "-1", "1.5g", "12x", "g"])
def test_bad_cache_sizes_are_one_line(text):
    with pytest.raises(InvalidArgument, match="REGIONSCAN_BLOCK_CACHE_SIZE must be a size") as info:
        parse_cache_size(text)
    assert "\n" not in str(info.value)


def test_worker_with_a_bad_cache_size_stops_before_it_serves():
    env = {**os.environ, "REGIONSCAN_WORKER_SECRET": "x", "REGIONSCAN_BLOCK_CACHE_SIZE": "lots"}
    proc = subprocess.run([sys.executable, "-m", "connector.engine_worker"], input=b"", capture_output=True,
                          env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == b""  # no port announced: the JVM reports the log's last line
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "'lots'" in lines[0] and "spark.regionscan.worker.blockCacheSize" in lines[0]


@pytest.mark.spark
def test_the_jvm_source_honours_the_option_per_read(root, spark, jvm):
    """Through Spark: the worker keeps (and is served) results only for reads with
    ``regionscan.scan.cacheresults`` true; the suite's worker keeps none by default."""
    def stats() -> dict:
        return json.loads(jvm.statsJson(sys.executable, ""))["block_cache"]

    def read(**extra: str) -> list:
        df = (spark.read.format("regionscan").option("root", root).option("table", "t")
              .option("hbase.columns.mapping", MAPPING).option("regionscan.pin.register", "false")
              .options(**extra).load())
        return sorted(tuple(r) for r in df.select("n", "s").collect())

    before = stats()
    plain = [read() for _ in range(3)]
    after_plain = stats()
    assert after_plain["result_hits"] == before["result_hits"]
    kept = [read(**{"regionscan.scan.cacheresults": "true"}) for _ in range(3)]
    after_kept = stats()
    assert after_kept["result_hits"] > after_plain["result_hits"]  # the third read was served
    assert after_kept["used_bytes"] <= after_kept["capacity_bytes"]
    assert all(rows == plain[0] for rows in plain + kept) and len(plain[0]) == 1000
