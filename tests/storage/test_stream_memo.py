"""A clean store file's streamed batches kept between scans (storage/read/stream_memo.py).

The streaming shape (one clean file, nothing in the memstore for the range)
builds the same batches for every scan of an unchanged table; they are kept
in the block cache on their second build, by scans that keep results
(``cache_results``: the scan's option, else the connection's), and served to
the next such scan that asks for exactly the same thing, without reading a
block.  These tests hold the kept batches to scans that build them (a scan
with ``cache_results=False``):
the same batches, the same scan metrics; another ask (columns, range,
versions, time range, timestamps, batch size, shape) is another entry; a
write, flush, compaction or split is seen; scans whose answer may not be
kept (filter, limit, raw, TTL, no block cache, a consumer that stopped
early) keep nothing, and neither do scans that do not ask for it.  Real tables on disk; a property test compares memo on
and off over random scans between random writes, flushes and compactions.
"""

from __future__ import annotations

import shutil
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from storage.read.batch_scan import scan_region_batches
from storage.read.region_plan import RegionReadPlan
from storage.region import region_snapshots
from storage.scanner.metrics import ScanMetrics

ROWS = 600
COLUMNS = [b"cf:n", b"cf:s"]
REPLAYED = ("rows_scanned", "rows_filtered", "cells_scanned", "bytes_in_results")
BLOCK_COUNTERS = ("blocks_read_from_disk", "blocks_read_from_cache", "read_requests")


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


def _batches(table, **kwargs) -> list:
    """The scan's batches as comparable values: batch boundaries, schema and rows."""
    return [(b.schema.to_string(), b.to_pylist()) for b in table.scan_batches(**kwargs)]


def _fresh(table, **kwargs) -> list:
    """The same scan with nothing kept or served: every batch built."""
    return _batches(table, cache_results=False, **kwargs)


def _stream_entries(cache) -> tuple[list, list]:
    """The block cache's kept streamed results and first-build markers (CacheMemo keys
    ``(("stream", file_id, what), anchors)``; a kept value is a tuple, a marker is not)."""
    with cache._lock:
        items = list(cache._entries.items())
    kept, markers = [], []
    for key, (value, _) in items:
        if isinstance(key, tuple) and isinstance(key[0], tuple) and key[0] and key[0][0] == "stream":
            (kept if isinstance(value, tuple) else markers).append(key)
    return kept, markers


def _blocks_touched(table) -> int:
    """Blocks the table's readers looked up since the last call (read or found in the cache)."""
    counters = table.read_counters(reset=True)
    return counters["blocks_read"] + counters["cache_hits"]


@pytest.fixture
def conn(tmp_path):
    # scans keep results unless they say otherwise (the connection's default)
    c = storage.connect(str(tmp_path / "root"), block_cache_size=64 << 20, cache_results=True)
    yield c
    c.close()


def _clean(conn, name="t", family=None, two_versions=False):
    """Two regions, each one compacted file and an empty memstore (the streaming shape).
    ``two_versions``: every third row's cf:n also has a newer version, written after
    the returned cut (a family keeping 3 versions keeps both)."""
    table = conn.create_table(name, {"cf": {"block_size": 1024, **(family or {})}},
                              settings={"wal_sync": "none"}, split_keys=[_key(ROWS // 2)])
    with table.batch() as b:
        for i in range(ROWS):
            b.put(_key(i), {b"cf:n": b"%d" % i, b"cf:s": b"s%d" % i})
    cut = None
    if two_versions:
        table.flush()
        time.sleep(0.005)
        cut = int(time.time() * 1000)
        time.sleep(0.005)
        with table.batch() as b:
            for i in range(0, ROWS, 3):
                b.put(_key(i), {b"cf:n": b"new%d" % i})
    table.flush()
    table.compact(major=True)
    assert all(len(r.stores["cf"].files) == 1 for r in table._region_list())
    return table, cut


# -- kept on the second build, served on the third --------------------------------------------
def test_the_second_scan_keeps_and_the_third_reads_no_block(conn):
    table, _ = _clean(conn)
    cache = conn.block_cache
    first = _batches(table, columns=COLUMNS)
    kept, markers = _stream_entries(cache)
    assert kept == [] and len(markers) == 2  # the first build leaves one marker per region
    assert _blocks_touched(table) > 0
    second = _batches(table, columns=COLUMNS)
    kept, markers = _stream_entries(cache)
    assert len(kept) == 2 and markers == []
    assert _blocks_touched(table) > 0  # the second scan still built (from cached blocks)
    hits, result_hits = cache.hits, cache.result_hits
    third = _batches(table, columns=COLUMNS)
    # served: no block looked up, not even in the cache; one result hit per region (the memo)
    assert _blocks_touched(table) == 0
    assert cache.result_hits - result_hits == 2 and cache.hits == hits
    assert first == second == third == _fresh(table, columns=COLUMNS)
    assert sum(len(rows) for _, rows in first) == ROWS
    assert len(first) > 1  # several batches: their boundaries are compared too


def test_a_scan_with_cache_results_false_keeps_and_serves_nothing(conn):
    table, _ = _clean(conn)
    for _ in range(2):
        _batches(table, columns=COLUMNS)
    assert len(_stream_entries(conn.block_cache)[0]) == 2
    table.read_counters(reset=True)
    built = _batches(table, columns=COLUMNS, cache_results=False)
    assert _blocks_touched(table) > 0  # kept batches exist but are not served
    for _ in range(2):
        _batches(table, columns=[b"cf:n"], cache_results=False)
    assert len(_stream_entries(conn.block_cache)[0]) == 2  # and no new entry or marker
    assert len(_stream_entries(conn.block_cache)[1]) == 0
    table.read_counters(reset=True)
    assert built == _batches(table, columns=COLUMNS)  # the next scan that keeps results is served
    assert _blocks_touched(table) == 0


def test_a_connection_keeps_nothing_by_default_and_a_scan_may_ask(tmp_path):
    """Off unless asked: a default connection's scans build every time; a scan with
    ``cache_results=True`` keeps and is served, its neighbours still build."""
    with storage.connect(str(tmp_path / "root"), block_cache_size=64 << 20) as conn:
        table, _ = _clean(conn)
        for _ in range(3):
            table.read_counters(reset=True)
            _batches(table, columns=COLUMNS)
            assert _blocks_touched(table) > 0
        assert _stream_entries(conn.block_cache) == ([], [])
        asked = [_batches(table, columns=COLUMNS, cache_results=True) for _ in range(2)]
        assert len(_stream_entries(conn.block_cache)[0]) == 2
        table.read_counters(reset=True)
        assert _batches(table, columns=COLUMNS, cache_results=True) == asked[0] == asked[1]
        assert _blocks_touched(table) == 0  # served
        assert _batches(table, columns=COLUMNS) == asked[0]
        assert _blocks_touched(table) > 0  # a scan that does not ask is not served


# -- scan metrics -----------------------------------------------------------------------------
def _metered(table, **kwargs) -> tuple[list, ScanMetrics]:
    metrics = ScanMetrics()
    return [(b.schema.to_string(), b.to_pylist()) for b in table.scan_batches(metrics=metrics, **kwargs)], metrics


def _replayed(metrics: ScanMetrics) -> dict:
    return {name: getattr(metrics, name) for name in REPLAYED}


@pytest.mark.parametrize("ask", [dict(columns=COLUMNS), dict(columns=COLUMNS, output="cells"), dict()],
                         ids=["rows", "cells", "whole-table"])
def test_a_hit_counts_the_metrics_a_build_counts(conn, ask):
    table, _ = _clean(conn)
    expected, built = _metered(table, cache_results=False, **ask)
    assert built.cells_scanned > 0 and built.rows_scanned == ROWS and built.bytes_in_results > 0
    results = [_metered(table, **ask) for _ in range(3)]  # built, kept, served
    for batches, metrics in results:
        assert batches == expected
        assert _replayed(metrics) == _replayed(built), (ask, metrics)
        assert metrics.regions_scanned == 2
    # the build read blocks (from the cache after the first); the hit none
    assert any(getattr(results[1][1], name) for name in BLOCK_COUNTERS)
    assert all(getattr(results[2][1], name) == 0 for name in BLOCK_COUNTERS), results[2][1]


def test_batches_kept_by_scans_without_metrics_serve_the_right_metrics(conn):
    """Scans without a ScanMetrics count nothing while they build; a later scan
    with one must still count the cells and rows a build counts."""
    table, _ = _clean(conn)
    _, built = _metered(table, columns=COLUMNS, cache_results=False)
    for _ in range(3):
        _batches(table, columns=COLUMNS)
    for _ in range(3):
        _, metrics = _metered(table, columns=COLUMNS)
        assert _replayed(metrics) == _replayed(built)


# -- what the scan asks for is the key ----------------------------------------------------------
def test_every_different_ask_is_its_own_entry(conn):
    table, cut = _clean(conn, family={"max_versions": 3}, two_versions=True)
    asks = [
        dict(columns=COLUMNS),
        dict(columns=[b"cf:n"]),
        dict(columns=[b"cf:s"]),
        dict(columns=[b"cf"]),
        dict(columns=[b"cf:n"], output="cells"),
        dict(columns=COLUMNS, row_start=_key(100), row_stop=_key(200)),  # one region
        dict(columns=COLUMNS, row_start=_key(250), row_stop=_key(350)),  # both, partly
        dict(columns=COLUMNS, row_start=_key(100)),
        dict(columns=COLUMNS, time_range=(0, cut)),
        dict(columns=COLUMNS, time_range=(cut, 2**62)),
        dict(columns=COLUMNS, max_versions=2, output="cells"),
        dict(columns=COLUMNS, output="cells"),
        dict(columns=COLUMNS, include_timestamp=True),
        dict(columns=COLUMNS, batch_size=100),
        dict(columns=COLUMNS, batch_size=250),
        dict(columns=COLUMNS, time_range=(0, cut), output="cells"),
    ]
    expected = [_fresh(table, **ask) for ask in asks]
    # the asks really differ: no two the same answer, so a shared entry would show
    assert len({repr(e) for e in expected}) == len(asks)
    for round_ in range(3):  # built, kept, served, interleaved so that every entry exists at once
        for ask, want in zip(asks, expected):
            table.read_counters(reset=True)
            assert _batches(table, **ask) == want, (round_, ask)
            if round_ == 2:
                assert _blocks_touched(table) == 0, ask  # served from its own entry
    kept, markers = _stream_entries(conn.block_cache)
    # one entry per region an ask reads, less two: one ask reads one region only, and the
    # second region's part of the scan from key 100 on is the plain scan's (same range, same ask)
    assert len(kept) == 2 * len(asks) - 2 and markers == []
    # the dict scan (rows of each block's own columns) is another shape again
    dicts = [(k, d) for k, d in table.scan()]
    for _ in range(2):
        assert [(k, d) for k, d in table.scan()] == dicts
    assert len(_stream_entries(conn.block_cache)[0]) == len(kept) + 2
    assert dicts[3] == (_key(3), {b"cf:n": b"new3", b"cf:s": b"s3"})
    assert dicts[4] == (_key(4), {b"cf:n": b"4", b"cf:s": b"s4"})


def test_hidden_columns_are_part_of_the_key(conn):
    """A rows scan whose hidden columns make rows exist without their values
    (the Spark source's pruned reads) is another entry than the plain scan."""
    table, _ = _clean(conn)
    region = table._region_list()[0]

    def scan(**kwargs) -> list:
        view = region.view()
        try:
            return [b.to_pylist() for b in scan_region_batches(view, RegionReadPlan(output="rows", **kwargs))]
        finally:
            view.release()

    asks = [dict(columns=COLUMNS), dict(columns=COLUMNS, hidden_columns=(b"cf:s",))]
    expected = [scan(cache_results=False, **ask) for ask in asks]
    assert expected[0] != expected[1] and "cf:s" not in expected[1][0][0]
    for _ in range(3):
        for ask, want in zip(asks, expected):
            assert scan(**ask) == want
    assert len(_stream_entries(conn.block_cache)[0]) == 2


# -- changes are seen ------------------------------------------------------------------------
def _three(table, **ask) -> list:
    """Three scans (built, kept, served) that must all equal the built answer."""
    want = _fresh(table, **ask)
    for _ in range(3):
        assert _batches(table, **ask) == want, ask
    return want


def _rows(batches: list) -> dict:
    return {row["key"]: row for _, rows in batches for row in rows}


def test_writes_flushes_compactions_and_splits_are_seen(conn):
    table, _ = _clean(conn)
    ask = dict(columns=COLUMNS)
    _three(table, **ask)
    assert len(_stream_entries(conn.block_cache)[0]) == 2
    # a put: the memstore holds a row of the first region, which is no longer streamed
    table.put(_key(5), {b"cf:n": b"later"})
    table.read_counters(reset=True)
    assert _rows(_batches(table, **ask))[_key(5)]["cf:n"] == b"later"
    assert _blocks_touched(table) > 0
    _three(table, **ask)
    # a delete marker in the memstore too
    table.delete(_key(6))
    assert _key(6) not in _rows(_three(table, **ask))
    # flushed: two files in the first region
    table.flush()
    rows = _rows(_three(table, **ask))
    assert rows[_key(5)]["cf:n"] == b"later" and _key(6) not in rows and len(rows) == ROWS - 1
    # compacted: one new file, a new entry; the first scan of it builds
    table.compact(major=True)
    table.read_counters(reset=True)
    assert _rows(_batches(table, **ask)) == rows
    assert _blocks_touched(table) > 0
    _three(table, **ask)
    # split: the daughters' ranges (and files) are other keys
    table.split(_key(450))
    assert len(table.region_infos()) == 3
    table.read_counters(reset=True)
    assert _rows(_batches(table, **ask)) == rows
    assert _blocks_touched(table) > 0
    assert _rows(_three(table, **ask)) == rows
    table.compact(major=True)
    assert _rows(_three(table, **ask)) == rows


# -- what keeps nothing ------------------------------------------------------------------------
@pytest.mark.parametrize("ask", [
    dict(columns=COLUMNS, filter="ValueFilter (=, 'substring:7')"),
    dict(columns=COLUMNS, filter="KeyOnlyFilter ()"),
    dict(columns=COLUMNS, limit=250),
    dict(columns=COLUMNS, limit=450),
    dict(output="cells", raw=True),
], ids=["value-filter", "key-only-filter", "limit-in-first-region", "limit-across-regions", "raw"])
def test_scans_whose_answer_is_not_kept_keep_nothing(conn, ask):
    table, _ = _clean(conn)
    want = _three(table, **ask)
    assert want
    assert _stream_entries(conn.block_cache) == ([], [])  # not even a first-build marker


def test_a_family_with_a_ttl_keeps_nothing(conn):
    table, _ = _clean(conn, family={"ttl": 3600})
    want = _three(table, columns=COLUMNS)
    assert sum(len(rows) for _, rows in want) == ROWS
    assert _stream_entries(conn.block_cache) == ([], [])


def test_a_connection_without_a_block_cache_keeps_nothing(tmp_path):
    conn = storage.connect(str(tmp_path / "root"), block_cache_size=0)
    try:
        table, _ = _clean(conn)
        for _ in range(3):
            table.read_counters(reset=True)
            assert _batches(table, columns=COLUMNS) == _fresh(table, columns=COLUMNS)
            assert table.read_counters()["blocks_read"] > 0  # built from the file every time
    finally:
        conn.close()


def test_a_consumer_that_stops_early_leaves_nothing_kept(conn):
    table, _ = _clean(conn)
    ask = dict(columns=COLUMNS, batch_size=64)  # many batches per region

    def partial() -> None:
        batches = table.scan_batches(**ask)
        got = [next(batches), next(batches)]
        batches.close()
        assert sum(b.num_rows for b in got) < ROWS // 2  # stopped inside the first region

    for _ in range(3):
        partial()
    assert _stream_entries(conn.block_cache) == ([], [])  # no marker: a partial build counts for nothing
    want = _fresh(table, **ask)
    assert _batches(table, **ask) == want
    assert _stream_entries(conn.block_cache)[0] == []  # the first whole build: markers only
    partial()  # a partial scan between two whole ones changes nothing
    assert _batches(table, **ask) == want
    assert len(_stream_entries(conn.block_cache)[0]) == 2
    table.read_counters(reset=True)
    assert _batches(table, **ask) == want
    assert _blocks_touched(table) == 0
    # a partial scan served from the kept batches leaves them as they are
    partial()
    assert _batches(table, **ask) == want


# -- the connector's pinned reads ----------------------------------------------------------------
def test_pinned_reads_keep_batches_in_the_shared_block_cache(tmp_path, monkeypatch):
    from connector import TableInputFormat

    monkeypatch.setattr(region_snapshots, "_caches", {})  # a fresh process-wide block cache
    monkeypatch.setenv(region_snapshots.BLOCK_CACHE_SIZE_ENV, "32m")
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        _clean(conn)
    fmt = TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": "t",
                            "hbase.mapreduce.scan.columns": "cf:n cf:s", "regionscan.pin.register": "false",
                            "hbase.mapreduce.scan.cacheblocks": "true"})  # off by default, as in HBase

    def read() -> tuple[list, list]:
        out, counters = [], []
        for split in fmt.get_splits():
            with fmt.create_batch_reader(split) as reader:
                out += [b.to_pylist() for b in reader]
                counters.append(reader.get_counters())
        return out, counters

    expected, expected_counters = read()  # reads keep no result unless they ask
    cache = region_snapshots.shared_block_cache()
    assert _stream_entries(cache) == ([], [])
    fmt.conf["regionscan.scan.cacheresults"] = True
    runs = [read() for _ in range(2)]  # built, kept
    assert len(_stream_entries(cache)[0]) == 2
    hits, result_hits = cache.hits, cache.result_hits
    runs.append(read())
    # served: one result lookup per region (its kept batches), no block
    assert cache.result_hits - result_hits == 2 and cache.hits == hits
    assert all(c["CELLS_SCANNED"] > 0 for c in expected_counters)
    for rows, counters in runs:
        assert rows == expected
        for got, want in zip(counters, expected_counters):
            assert {k: got[k] for k in ("ROWS_SCANNED", "CELLS_SCANNED", "BYTES_IN_RESULTS")} == \
                {k: want[k] for k in ("ROWS_SCANNED", "CELLS_SCANNED", "BYTES_IN_RESULTS")}
    assert sum(len(b) for b in expected) == ROWS


# -- property: kept batches never change an answer ------------------------------------------------
_KEYS = st.integers(0, 79).map(_key)
# bounds that mostly make a non-empty range (a start past the stop reads nothing)
_ROW_STARTS = [None, _key(0), _key(10), _key(39), _key(40), _key(41)]
_ROW_STOPS = [None, _key(40), _key(41), _key(70), _key(79)]
# every scan parameter a generated ask sets, and the values it takes
_FIELDS = {
    "columns": [None, [b"cf:n"], [b"cf:s"], [b"cf:n", b"cf:s"], [b"cf"]],
    "row_start": _ROW_STARTS,
    "row_stop": _ROW_STOPS,
    "max_versions": [None, 1, 2],
    "time_range": [None, (0, 2**62), (0, 1000), (1000, 2**62)],
    "include_timestamp": [False, True],
    "batch_size": [5, 64, 65536],
    "output": ["rows", "cells"],
    "reverse": [False] * 5 + [True],
    "filter": [None] * 4 + ["KeyOnlyFilter ()", "ValueFilter (=, 'substring:1')"],
    "limit": [None] * 4 + [5, 50],
    "metrics": [False, True],  # counted into a ScanMetrics, or not
}
_SCANS = st.fixed_dictionaries({name: st.sampled_from(values) for name, values in _FIELDS.items()})
_CHANGE = st.sampled_from(sorted(_FIELDS)).flatmap(
    lambda name: st.sampled_from(_FIELDS[name]).map(lambda value: (name, value)))
# a scan step runs an ask and up to three variants of it that differ in one parameter each,
# interleaved: an entry served to an ask it was not built for shows as a wrong answer
_ASKS = st.tuples(_SCANS, st.lists(_CHANGE, max_size=3)).map(
    lambda pair: [pair[0]] + [{**pair[0], name: value} for name, value in pair[1]])


def _every_variant(base: dict):
    """``base`` and, for every parameter, a variant with another value of it."""
    return st.tuples(*[
        st.sampled_from(sorted({repr(v): v for v in _FIELDS[name] if v != base[name]}.items())).map(
            lambda item, name=name: {**base, name: item[1]})
        for name in sorted(_FIELDS)
    ]).map(lambda variants: [base, *variants])


# the last step: a base whose batches are kept (forward, no filter, no limit), with every variant
_LAST = _SCANS.map(lambda ask: {**ask, "reverse": False, "filter": None, "limit": None}).flatmap(_every_variant)
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), _KEYS, st.sampled_from([b"cf:n", b"cf:s"]), st.binary(max_size=3),
                  st.sampled_from([500, 1500, None])),
        st.tuples(st.just("delete_row"), _KEYS),
        st.tuples(st.just("flush")),
        st.tuples(st.just("compact")),
        st.tuples(st.just("scan"), _ASKS),
    ),
    min_size=1, max_size=10,
)


def _run(table, ask: dict) -> tuple[list, dict | None]:
    """One scan of a generated ask: its batches and, if it counts them, its replayed metrics."""
    kwargs = {k: v for k, v in ask.items() if v is not None and k != "metrics"}
    if kwargs.get("include_timestamp") and kwargs.get("output") == "cells":
        del kwargs["include_timestamp"]  # a rows-scan option
    if not ask["metrics"]:
        return _batches(table, **kwargs), None
    batches, metrics = _metered(table, **kwargs)
    return batches, _replayed(metrics)


@pytest.fixture(scope="module")
def property_base(tmp_path_factory) -> str:
    """The property test's starting state, built once (each example opens a copy of it): table
    ``p`` of 80 rows in two regions, flushed and compacted, empty memstores."""
    root = str(tmp_path_factory.mktemp("stream-base") / "root")
    with storage.connect(root) as conn:
        table = conn.create_table("p", {"cf": {"block_size": 256, "max_versions": 3}},
                                  settings={"wal_sync": "none"}, split_keys=[_key(40)])
        with table.batch(timestamp=1000) as b:
            for i in range(80):
                b.put(_key(i), {b"cf:n": b"%d" % i, b"cf:s": b"s"})
        table.flush()
        table.compact()
    return root


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(ops=_OPS, last=_LAST)
def test_scans_with_kept_batches_equal_scans_that_build_them(tmp_path_factory, property_base, ops, last):
    root = tmp_path_factory.mktemp("stream") / "root"
    shutil.copytree(property_base, root)
    conn = storage.connect(str(root), block_cache_size=16 << 20, cache_results=True)
    try:
        table = conn.table("p")
        # the last scans run on the streaming shape (one file per region, empty memstores)
        steps = ops + [("flush",), ("compact",), ("scan", last)]
        for n, op in enumerate(steps):
            kind = op[0]
            if kind == "put":
                _, key, column, value, stamp = op
                table.put(key, {column: value}, **({} if stamp is None else {"timestamp": stamp}))
            elif kind == "delete_row":
                table.delete(op[1])
            elif kind == "flush":
                table.flush()
            elif kind == "compact":
                table.compact()
            else:
                asks = op[1]
                wanted = [_run(table, {**ask, "cache_results": False}) for ask in asks]
                for round_ in range(3):  # built, kept, served
                    for ask, want in zip(asks, wanted):
                        table.read_counters(reset=True)
                        assert _run(table, ask) == want, (ops, ask, round_)
                        keepable = not ask["reverse"] and ask["filter"] is None and ask["limit"] is None
                        if round_ == 2 and n == len(steps) - 1 and keepable:
                            assert _blocks_touched(table) == 0, ask  # served
    finally:
        conn.close()
