"""The engine worker's block cache: on by default for its reads, sized by one setting.

The worker is its JVM's region server, so its reads cache blocks unless the
options say ``hbase.mapreduce.scan.cacheblocks=false``; a dense block kept in
the cache keeps the row batch built from it, so a warm scan does not rebuild it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest
from engine_worker_process import SAMPLE_MAPPING, sample_table

from connector.jvm_source import requests
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
    plan = requests.plan({"options": options, "columns": ["n", "s"], "schema": SCHEMA, "parallelism": 1})
    batches = []
    for task in plan["tasks"]:
        req = {"options": options, "columns": ["n", "s"], "schema": SCHEMA, "splits": task["splits"]}
        batches.extend(requests.read_batches(req, requests.read_schema(req), {}))
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
