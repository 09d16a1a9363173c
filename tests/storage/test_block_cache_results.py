"""Kept scan results in the block cache: one budget, one LRU order, their own counters.

A scan that keeps results (``cache_results``) stores what it built as entries of the
block cache (storage/storefile/cache_memo.py).  These tests hold them to the cache's
bound: charged in ``used_bytes`` and counted in ``result_bytes``, evicted with the
blocks in least-recently-used order, and when evicted simply built again.  The option
itself is checked where it is given (scan, connection, connector option).
"""

from __future__ import annotations

import struct

import pytest

import storage
from connector.options import SCAN_CACHE_RESULTS, normalize_conf, scan_spec_from_conf
from storage.errors import InvalidArgument
from storage.read.scan_request import ScanRequest
from storage.storefile import BlockCache

ROWS = 2000
COLUMNS = [b"cf:n", b"cf:s"]


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


# -- the cache's accounting --------------------------------------------------------------------
def test_results_share_the_budget_and_the_lru_order_with_blocks():
    cache = BlockCache(100)
    cache.put(("f", 0), "block0", 30)
    assert cache.put_result("r1", "result1", 40)
    cache.put(("f", 1), "block1", 20)
    assert (cache.used_bytes, cache.result_bytes) == (90, 40)
    assert cache.get(("f", 0)) == "block0"  # the result is now the least recently used
    cache.put(("f", 2), "block2", 30)  # 120 > 100: the result goes first
    assert "r1" not in cache and (cache.used_bytes, cache.result_bytes) == (80, 0)
    assert cache.evictions == 1 and cache.result_evictions == 1
    assert cache.get_result("r1") is None and cache.result_misses == 1
    cache.put_result("r2", "result2", 50)  # 130: evicts block1, then block0, the least recently used
    assert ("f", 1) not in cache and ("f", 0) not in cache and ("f", 2) in cache
    assert cache.used_bytes == 80 and cache.result_bytes == 50
    assert cache.result_evictions == 1 and cache.evictions == 3
    hits = cache.hits
    assert cache.get_result("r2") == "result2"
    assert cache.result_hits == 1 and cache.hits == hits  # a kept result is not a block read
    stats = cache.stats()
    assert {k: stats[k] for k in ("result_bytes", "result_entries", "result_hits", "result_misses",
                                  "result_evictions")} == {"result_bytes": 50, "result_entries": 1, "result_hits": 1,
                                                           "result_misses": 1, "result_evictions": 1}


def test_replacing_recharging_and_clearing_keep_result_bytes_exact():
    cache = BlockCache(1000)
    cache.put_result("r", "a", 100)
    cache.put_result("r", "b", 60)  # replaced: charged once
    assert cache.result_bytes == 60 == cache.used_bytes
    cache.recharge("r", "b", 90)
    assert cache.result_bytes == 90 == cache.used_bytes
    cache.put("r", "now a block", 10)  # the same key as a block: no longer a result
    assert cache.result_bytes == 0 and cache.used_bytes == 10
    cache.put_result(("f", "kept"), "c", 5)
    assert cache.evict_file("f") == 1 and cache.result_bytes == 0  # a key shaped as a block's goes with its file
    cache.put_result("s", "d", 7)
    cache.clear()
    assert cache.result_bytes == 0 and cache.used_bytes == 0 and cache.stats()["result_entries"] == 0
    assert not cache.put_result("huge", "e", 1001) and cache.result_bytes == 0


def test_a_cache_keeps_results_when_asked_or_by_its_default_and_never_at_size_0():
    off, on, empty = BlockCache(100), BlockCache(100, cache_results=True), BlockCache(0, cache_results=True)
    assert [off.keeps_results(a) for a in (None, True, False)] == [False, True, False]
    assert [on.keeps_results(a) for a in (None, True, False)] == [True, True, False]
    assert [empty.keeps_results(a) for a in (None, True, False)] == [False, False, False]


# -- real scans under a small cache ------------------------------------------------------------
@pytest.fixture
def small(tmp_path):
    """A connection whose block cache holds a few of the table's kept results, not all."""
    conn = storage.connect(str(tmp_path / "root"), block_cache_size=512 << 10)
    table = conn.create_table("t", {"cf": {"block_size": 4096}}, settings={"wal_sync": "none"},
                              split_keys=[_key(i) for i in range(ROWS // 8, ROWS, ROWS // 8)])
    with table.batch() as b:
        for i in range(ROWS):
            b.put(_key(i), {b"cf:n": b"%d" % i, b"cf:s": b"s%04d" % i * 20})
    table.flush()
    table.compact(major=True)
    yield conn, table
    conn.close()


def _scan(table, **kwargs) -> list:
    return [b.to_pylist() for b in table.scan_batches(**kwargs)]


def _touched(table) -> int:
    counters = table.read_counters(reset=True)
    return counters["blocks_read"] + counters["cache_hits"]


def test_kept_results_are_charged_in_the_cache_and_evicted_by_it(small):
    conn, table = small
    cache = conn.block_cache
    asks = [dict(columns=COLUMNS, row_start=_key(lo), row_stop=_key(lo + ROWS // 8))
            for lo in range(0, ROWS, ROWS // 8)]
    expected = [_scan(table, cache_results=False, **ask) for ask in asks]
    assert cache.result_bytes == 0
    for ask, want in zip(asks, expected):
        for _ in range(2):  # built twice: kept on the second build
            assert _scan(table, cache_results=True, **ask) == want
            assert cache.used_bytes <= cache.capacity_bytes
        table.read_counters(reset=True)
        assert _scan(table, cache_results=True, **ask) == want
        assert _touched(table) == 0  # kept: served without a block
    # eight ranges of about 100 KB of blocks and 30 KB of kept batches each cannot all stay in 512 KiB
    assert cache.result_bytes > 0 and cache.result_evictions > 0
    assert cache.stats()["result_bytes"] == cache.result_bytes <= cache.used_bytes <= cache.capacity_bytes
    # the last range kept is served; the first, evicted since, is built again (same answer)
    table.read_counters(reset=True)
    assert _scan(table, cache_results=True, **asks[-1]) == expected[-1]
    assert _touched(table) == 0
    assert _scan(table, cache_results=True, **asks[0]) == expected[0]
    assert _touched(table) > 0
    # scans that keep nothing push kept results out like any other blocks they read
    kept = cache.result_bytes
    for ask, want in zip(asks, expected):
        assert _scan(table, columns=[b"cf:s"], row_start=ask["row_start"], row_stop=ask["row_stop"]) \
            == [[{"key": r["key"], "cf:s": r["cf:s"]} for r in batch] for batch in want]
    assert cache.result_bytes < kept


def test_a_scan_that_keeps_nothing_adds_no_result_bytes(small):
    conn, table = small
    for _ in range(3):
        _scan(table, columns=COLUMNS)
    stats = conn.block_cache.stats()
    assert stats["result_bytes"] == 0 and stats["result_entries"] == 0 and stats["used_bytes"] > 0


# -- the option where it is given --------------------------------------------------------------
def test_the_option_is_checked_where_it_is_given(tmp_path):
    with pytest.raises(InvalidArgument, match="^cache_results must be True, False or None, got 'yes'$"):
        ScanRequest(cache_results="yes")
    with pytest.raises(InvalidArgument, match="^cache_results must be True or False, got 1$"):
        storage.connect(str(tmp_path / "root"), cache_results=1)
    with pytest.raises(InvalidArgument, match=f"^{SCAN_CACHE_RESULTS} must be true or false, got 'sometimes'$"):
        scan_spec_from_conf(normalize_conf({"cacheresults": "sometimes"}))
    assert scan_spec_from_conf(normalize_conf({SCAN_CACHE_RESULTS: "true"})).request.cache_results is True
    assert scan_spec_from_conf(normalize_conf({})).request.cache_results is None
    assert "cache_results" not in ScanRequest(cache_results=True).to_wire()  # the server's setting, not sent


def test_a_region_server_keeps_results_by_its_own_setting_and_refuses_a_clients(tmp_path):
    """``regionscan serve --cache-results`` is the server's choice; a remote scan that sets
    ``cache_results`` would be silently ignored, so it is refused before anything is sent."""
    from storage.server.process import ServerProcess

    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {}}).put(b"row", {b"cf:a": b"1"})
    with ServerProcess(root, "--cache-results") as server, storage.connect(server.location) as remote:
        table = remote.table("t")
        assert [b.to_pylist() for b in table.scan_batches(columns=[b"cf:a"])] == [[{"key": b"row", "cf:a": b"1"}]]
        for ask in (dict(cache_results=True), dict(cache_results=False)):
            with pytest.raises(InvalidArgument, match="^cache_results is the region server's setting") as info:
                list(table.scan_batches(**ask))
            assert "\n" not in str(info.value)
            with pytest.raises(InvalidArgument, match="^cache_results is the region server's setting"):
                list(table.scan(**ask))
