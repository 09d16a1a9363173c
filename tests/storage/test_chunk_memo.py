"""Chunks of a live table kept between scans (storage/read/chunk_memo.py): served
only while their sources are the same objects, never after a write, a flush,
a compaction or to a scan asking for other columns or another time range.
Chunks are kept by scans that keep results (``cache_results``: the scan's
option, else the connection's).  Real tables on disk with a block cache; a
property test compares scans with kept chunks against scans that build every
chunk (``cache_results=False``)."""

from __future__ import annotations

import struct
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage

ROWS = 600


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


def _rows(table, **kwargs) -> dict:
    out = {}
    for batch in table.scan_batches(**kwargs):
        for row in batch.to_pylist():
            out[row.pop("key")] = row
    return out


def _chunk_entries(conn) -> list:
    """The block cache's kept chunks (their first-build markers excluded)."""
    cache = conn.block_cache
    with cache._lock:
        entries = list(cache._entries.items())
    return [key for key, (value, _) in entries
            if isinstance(key, tuple) and isinstance(key[0], tuple) and key[0][0] == "chunk" and isinstance(value, tuple)]


def _fresh(table, **kwargs) -> dict:
    """The scan with every chunk built."""
    return _rows(table, cache_results=False, **kwargs)


@pytest.fixture
def conn(tmp_path):
    # scans keep results unless they say otherwise (the connection's default)
    c = storage.connect(str(tmp_path / "root"), block_cache_size=64 << 20, cache_results=True)
    yield c
    c.close()


def _rewritten(conn, name="t", family=None):
    """Every row put and compacted into one file, then a quarter put again (the memstore)."""
    table = conn.create_table(name, {"cf": family or {}}, settings={"wal_sync": "none"}, split_keys=[_key(ROWS // 2)])
    with table.batch() as b:
        for i in range(ROWS):
            b.put(_key(i), {b"cf:n": b"%d" % i, b"cf:s": b"s%d" % i})
    table.flush()
    table.compact(major=True)
    with table.batch() as b:
        for i in range(0, ROWS, 4):
            b.put(_key(i), {b"cf:n": b"new%d" % i})
    return table


COLUMNS = [b"cf:n", b"cf:s"]


def test_a_rewritten_table_scanned_again_is_served_from_kept_chunks(conn):
    table = _rewritten(conn)
    first = _rows(table, columns=COLUMNS)
    assert first[_key(4)] == {"cf:n": b"new4", "cf:s": b"s4"}
    assert first[_key(5)] == {"cf:n": b"5", "cf:s": b"s5"}
    assert _chunk_entries(conn) == []  # the first build leaves only a marker
    second = _rows(table, columns=COLUMNS)
    kept = _chunk_entries(conn)
    assert kept, "the second build of the same chunks keeps them"
    table.read_counters(reset=True)
    third = _rows(table, columns=COLUMNS)
    touched = table.read_counters()
    # served from the kept chunks: no block looked up, not even in the cache
    assert touched["cache_hits"] == touched["blocks_read"] == 0, touched
    assert first == second == third == _fresh(table, columns=COLUMNS)
    assert len(first) == ROWS


def test_a_scan_keeps_and_is_served_chunks_only_when_it_keeps_results(conn, tmp_path):
    table = _rewritten(conn)
    for _ in range(3):
        table.read_counters(reset=True)
        assert _fresh(table, columns=COLUMNS) == _rows(table, columns=COLUMNS, cache_results=False)
        assert table.read_counters()["blocks_read"] + table.read_counters()["cache_hits"] > 0
    assert _chunk_entries(conn) == []
    kept = [_rows(table, columns=COLUMNS) for _ in range(2)]  # the connection's default: kept
    assert _chunk_entries(conn)
    table.read_counters(reset=True)
    assert _rows(table, columns=COLUMNS, cache_results=False) == kept[0]
    touched = table.read_counters()
    assert touched["blocks_read"] + touched["cache_hits"] > 0  # built again: not served
    # a connection left at its default keeps nothing, unless the scan asks
    with storage.connect(str(tmp_path / "other"), block_cache_size=64 << 20) as plain:
        other = _rewritten(plain)
        for _ in range(3):
            _rows(other, columns=COLUMNS)
        assert _chunk_entries(plain) == [] and plain.block_cache.result_bytes == 0
        for _ in range(2):
            _rows(other, columns=COLUMNS, cache_results=True)
        assert _chunk_entries(plain) and plain.block_cache.result_bytes > 0


def test_a_kept_chunk_reports_the_scan_metrics_of_a_built_one(conn):
    from storage.scanner import ScanMetrics

    table = _rewritten(conn)
    table.delete(_key(9))
    figures = []
    for _ in range(3):  # built (marker), built (kept), served from the kept chunks
        m = ScanMetrics()
        rows = sum(b.num_rows for b in table.scan_batches(columns=COLUMNS, metrics=m))
        figures.append((rows, m.rows_scanned, m.cells_scanned, m.bytes_in_results))
    assert _chunk_entries(conn)
    assert figures[0] == figures[1] == figures[2], figures
    assert figures[0][0] == ROWS - 1 and figures[0][2] == 2 * (ROWS - 1)


def test_writes_flushes_and_compactions_between_scans_are_seen(conn):
    table = _rewritten(conn)
    for _ in range(2):
        _rows(table, columns=COLUMNS)
    assert _chunk_entries(conn)
    table.put(_key(8), {b"cf:n": b"later"})
    assert _rows(table, columns=COLUMNS)[_key(8)]["cf:n"] == b"later"
    table.delete(_key(12))
    after_delete = _rows(table, columns=COLUMNS)
    assert _key(12) not in after_delete and len(after_delete) == ROWS - 1
    _rows(table, columns=COLUMNS)  # kept again from the new memstore runs
    table.flush()
    assert _rows(table, columns=COLUMNS) == after_delete == _fresh(table, columns=COLUMNS)
    table.delete(_key(16), columns=[b"cf:s"])
    table.compact(major=True)
    compacted = _rows(table, columns=COLUMNS)
    assert compacted[_key(16)] == {"cf:n": b"new16", "cf:s": None}
    assert compacted == _fresh(table, columns=COLUMNS)


def test_a_kept_chunk_serves_only_the_same_columns_and_time_range(conn):
    table = _rewritten(conn)
    cut = int(time.time() * 1000) + 1
    time.sleep(0.01)
    table.put(_key(20), {b"cf:n": b"newest"})
    asks = [
        dict(columns=COLUMNS),
        dict(columns=[b"cf:n"]),
        dict(columns=[b"cf:s"]),
        dict(columns=COLUMNS, time_range=(0, cut)),
        dict(columns=COLUMNS, include_timestamp=True),
        dict(columns=COLUMNS, reverse=True),
    ]
    for _ in range(3):
        for ask in asks:
            assert _rows(table, **ask) == _fresh(table, **ask), ask
    assert _rows(table, columns=COLUMNS, time_range=(0, cut))[_key(20)]["cf:n"] == b"new20"
    assert _rows(table, columns=COLUMNS)[_key(20)]["cf:n"] == b"newest"


def test_a_family_with_a_ttl_keeps_nothing(conn):
    table = _rewritten(conn, family={"ttl": 3600})
    for _ in range(3):
        assert _rows(table, columns=COLUMNS) == _fresh(table, columns=COLUMNS)
    assert _chunk_entries(conn) == []


def test_a_connection_without_a_block_cache_keeps_nothing(tmp_path):
    conn = storage.connect(str(tmp_path / "root"), block_cache_size=0)
    try:
        table = _rewritten(conn)
        assert _rows(table, columns=COLUMNS) == _rows(table, columns=COLUMNS) == _fresh(table, columns=COLUMNS)
    finally:
        conn.close()


def test_the_memstore_anchors_change_with_every_write(conn):
    table = _rewritten(conn)
    before = _memstore_anchors(table)
    assert before == _memstore_anchors(table)  # no write: the same runs
    table.put(_key(1), {b"cf:n": b"x"})
    after = _memstore_anchors(table)
    assert after[0] != before[0] and after[1] == before[1]  # only the written region's change


def _memstore_anchors(table) -> list:
    """Every region's memstore anchors as a scan sees them now (ids)."""
    out = []
    for region in table._region_list():
        view = region.stores["cf"].memstore.view()
        try:
            anchors = view.anchors()
            out.append(None if anchors is None else tuple(id(a) for a in anchors))
        finally:
            view.release()
    return out


def test_scans_beside_a_writer_and_its_flushes_never_go_back_in_time(conn):
    """A writer rewrites a quarter of the rows round after round and flushes
    every third round, while scans run (a flush lands inside some of them):
    every scan sees every row once, and a row's round never goes back from one
    scan to the next (a kept chunk from older sources is never served)."""
    table = _rewritten(conn)
    stop = threading.Event()
    failures: list = []

    def write() -> None:
        try:
            r = 0
            while not stop.is_set():
                r += 1
                with table.batch() as b:
                    for i in range(0, ROWS, 4):
                        b.put(_key(i), {b"cf:n": b"r%06d" % r})
                if r % 3 == 0:
                    table.flush()
        except BaseException as exc:  # reported by the test below
            failures.append(exc)

    writer = threading.Thread(target=write, name="memo-writer")
    writer.start()
    seen = {}
    scans = 0
    try:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            rows = _rows(table, columns=COLUMNS)
            scans += 1
            assert len(rows) == ROWS
            for i in range(0, ROWS, 4):
                value = rows[_key(i)]["cf:n"]
                round_ = int(value[1:]) if value.startswith(b"r") else 0
                assert round_ >= seen.get(i, 0), (i, round_, seen.get(i))
                seen[i] = round_
    finally:
        stop.set()
        writer.join(timeout=30)
    assert not failures, failures
    assert scans >= 3
    for _ in range(3):  # quiet again: built, kept, served
        assert _rows(table, columns=COLUMNS) == _fresh(table, columns=COLUMNS)


def test_a_pinned_regions_decoded_log_keeps_no_chunk():
    """A connector read decodes the pinned WAL afresh each time: nothing could
    serve another read, so nothing (not even a first-build marker) is kept."""
    from storage.memstore.sorted_cells import SortedCells
    from storage.cells import cells_to_batch

    assert SortedCells.from_log(cells_to_batch([(b"r", b"cf", b"n", 1, 4, b"v")])).anchors() is None


# -- property: kept chunks never change an answer ------------------------------------------
_KEYS = st.integers(0, 59).map(_key)
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), _KEYS, st.sampled_from([b"cf:n", b"cf:s"]), st.binary(max_size=3)),
        st.tuples(st.just("delete_row"), _KEYS),
        st.tuples(st.just("delete_column"), _KEYS, st.sampled_from([b"cf:n", b"cf:s"])),
        st.tuples(st.just("flush")),
        st.tuples(st.just("compact")),
        st.tuples(st.just("scan")),
    ),
    min_size=1, max_size=25,
)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(ops=_OPS)
def test_scans_with_kept_chunks_equal_scans_that_build_them(tmp_path_factory, ops):
    root = tmp_path_factory.mktemp("memo")
    conn = storage.connect(str(root), block_cache_size=16 << 20, cache_results=True)
    try:
        table = conn.create_table("p", {"cf": {"block_size": 256}}, settings={"wal_sync": "none"},
                                  split_keys=[_key(30)])
        with table.batch() as b:
            for i in range(60):
                b.put(_key(i), {b"cf:n": b"%d" % i, b"cf:s": b"s"})
        table.flush()
        for op in ops + [("scan",)]:
            kind = op[0]
            if kind == "put":
                table.put(op[1], {op[2]: op[3]})
            elif kind == "delete_row":
                table.delete(op[1])
            elif kind == "delete_column":
                table.delete(op[1], columns=[op[2]])
            elif kind == "flush":
                table.flush()
            elif kind == "compact":
                table.compact()
            else:
                for ask in (dict(columns=COLUMNS), dict(columns=[b"cf:s"]), dict(columns=COLUMNS, reverse=True)):
                    expected = _fresh(table, **ask)
                    for _ in range(3):  # built, kept, served
                        assert _rows(table, **ask) == expected, (ops, ask)
    finally:
        conn.close()
