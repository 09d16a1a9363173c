"""Point reads and multi-gets on store files: ``row``/``rows`` against a scan of the same table.

The tables use tiny blocks so that rows fall at block boundaries and wide
rows cross them, keys of mixed widths with shared prefixes and zero bytes
(the cases the byte-string search must get right), both block layouts
(dense rows, and cells where versions or delete markers are kept) and a
memstore over the files.  The block cache must hold after point reads what
it held after a scan: the decoded blocks, once.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage
from storage.storefile import point

_key_byte = st.sampled_from([0, 1, 0x61, 0x62, 0xFF])
_key = st.lists(_key_byte, min_size=1, max_size=4).map(bytes)
_qual = st.sampled_from([b"a", b"b", b"c", b"long-qualifier"])
_value = st.binary(max_size=40)

_op = st.one_of(
    st.tuples(st.just("put"), _key, st.dictionaries(_qual, _value, min_size=1, max_size=4), st.integers(1, 5)),
    st.tuples(st.just("delete"), _key, st.integers(1, 5)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("major")),
)


def _load(conn, name: str, ops, block_size: int, versions: int):
    table = conn.create_table(
        name, {"f": {"max_versions": versions, "block_size": block_size}},
        settings={"wal_sync": "none", "compaction_threshold": 100},
    )
    for op in ops:
        if op[0] == "put":
            table.put(op[1], {b"f:" + q: v for q, v in op[2].items()}, timestamp=op[3])
        elif op[0] == "delete":
            table.delete(op[1], timestamp=op[2])
        elif op[0] == "flush":
            table.flush()
        else:
            table.compact(major=True)
    return table


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_op, min_size=1, max_size=60), st.sampled_from([256, 512, 4096]), st.sampled_from([1, 3]),
       st.lists(_key, max_size=10), st.sampled_from([None, [b"f:a"], [b"f:b", b"f:long-qualifier"]]),
       st.sampled_from([None, 3]))
def test_row_and_rows_agree_with_the_scan(tmp_path_factory, ops, block_size, versions, extra, columns, stamp):
    conn = storage.connect(str(tmp_path_factory.mktemp("t")))
    table = _load(conn, "t", ops, block_size, versions)
    kw = {"columns": columns, "timestamp": stamp}
    time_range = None if stamp is None else (0, stamp)
    want = dict(table.scan(columns=columns, time_range=time_range, path="cell"))
    asked = sorted({op[1] for op in ops if len(op) > 1} | set(extra))
    for key in asked:
        assert table.row(key, **kw) == want.get(key, {}), key
    order = asked[::-1] + asked[:2]  # any order, repeats included
    assert table.rows(order, **kw) == [(k, want[k]) for k in order if k in want]
    with_ts = dict(table.scan(columns=columns, time_range=time_range, include_timestamp=True, path="cell"))
    assert table.rows(order, include_timestamp=True, **kw) == [(k, with_ts[k]) for k in order if k in with_ts]
    conn.close()


@pytest.mark.parametrize("path", ["vectorized", "point reads"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_op, min_size=1, max_size=60), st.sampled_from([256, 4096]), st.sampled_from([1, 3]),
       st.lists(_key, max_size=20))
def test_each_multi_get_path_agrees_with_the_scan(tmp_path_factory, monkeypatch, path, ops, block_size, versions,
                                                   extra):
    # a multi-get picks per file: one pass over the blocks, or a point read per key
    if path == "vectorized":
        monkeypatch.setattr(point, "_SCALAR_FILE_KEYS", 0)
        monkeypatch.setattr(point, "_SCALAR_KEYS", 0)
    else:
        monkeypatch.setattr(point, "_SCALAR_FILE_KEYS", 1 << 30)
    conn = storage.connect(str(tmp_path_factory.mktemp("t")))
    table = _load(conn, "t", ops, block_size, versions)
    want = dict(table.scan(path="cell"))
    asked = sorted({op[1] for op in ops if len(op) > 1} | set(extra))
    assert table.rows(asked) == [(k, want[k]) for k in asked if k in want]
    conn.close()


def _dense_table(conn, rows: int = 20000):
    # 32 KiB blocks: below the default block size, so compaction's row groups take it too (many blocks)
    table = conn.create_table("d", {"cf": {"max_versions": 1, "block_size": 32768}}, settings={"wal_sync": "none"})
    with table.batch() as b:
        for i in range(rows):
            b.put(b"%08d" % i, {b"cf:n": b"%d" % i, b"cf:s": b"s" * 100})
    table.flush()
    table.compact(major=True)
    return table


def test_point_reads_on_every_block_after_a_scan_cause_no_evictions(tmp_path):
    probe = storage.connect(str(tmp_path))
    table = _dense_table(probe)
    probe.close()
    # a cache that holds the decoded table with room to spare, but not twice over
    sizing = storage.connect(str(tmp_path), block_cache_size=1 << 30)
    table = sizing.table("d")
    sum(b.num_rows for b in table.scan_batches())
    scanned = sizing.block_cache.used_bytes
    sizing.close()
    conn = storage.connect(str(tmp_path), block_cache_size=int(scanned * 1.3))
    table = conn.table("d")
    cache = conn.block_cache
    sum(b.num_rows for b in table.scan_batches())
    after_scan = cache.used_bytes
    firsts = [k[0] for r in table.store_file_readers() for k in r.block_first_keys]
    assert len(firsts) > 30
    for key in firsts:
        assert table.row(key)[b"cf:n"] == b"%d" % int(key)
    assert table.rows(firsts[::-1])[0][0] == firsts[-1]
    assert cache.evictions == 0
    # what a point read adds to a cached block (views of its buffers, and with the compiled
    # kernels the arguments of their call: 208 KB over these 32 KiB blocks, 6.0% of them as a
    # scan naming no column leaves them decoded, 5.2% when that scan also built their cells)
    # is small next to the block
    assert cache.used_bytes <= after_scan * 1.07
    conn.close()


def test_a_point_read_charges_the_block_it_reads(tmp_path):
    conn = storage.connect(str(tmp_path), block_cache_size=1 << 30)
    table = _dense_table(conn, 500)
    cache = conn.block_cache
    cache.clear()
    assert table.row(b"%08d" % 250) == {b"cf:n": b"250", b"cf:s": b"s" * 100}
    assert len(cache) == 1  # the one block holding the row
    (reader,) = table.store_file_readers()
    block = reader._block(reader.find_block((b"%08d" % 250,)))  # a hit: the cache is unchanged
    assert block.point is not None
    assert cache.used_bytes == block.nbytes + block.point.nbytes
    conn.close()


def test_rows_looks_each_block_up_once(tmp_path):
    conn = storage.connect(str(tmp_path), block_cache_size=1 << 30)
    table = _dense_table(conn, 3000)
    (reader,) = table.store_file_readers()
    keys = [b"%08d" % i for i in range(0, 3000, 3)]
    conn.block_cache.clear()
    before = conn.block_cache.stats()
    got = table.rows(keys)
    assert [k for k, _ in got] == keys
    after = conn.block_cache.stats()
    lookups = (after["hits"] + after["misses"]) - (before["hits"] + before["misses"])
    # one lookup per block holding a key, plus at most one per block boundary a key sits on
    assert lookups <= 2 * reader.block_count
    conn.close()


@pytest.mark.parametrize("bad", [[b"ok", "text"], b"row", None])
def test_rows_refuses_bad_keys_before_reading(tmp_path, bad):
    conn = storage.connect(str(tmp_path))
    table = _dense_table(conn, 20)
    with pytest.raises(storage.errors.InvalidArgument):
        table.rows(bad)
    conn.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_op, min_size=1, max_size=60), st.sampled_from([256, 4096]),
       st.sampled_from([None, [b"f:a"], [b"f:b", b"f:long-qualifier"]]), st.booleans(), st.booleans(),
       st.sampled_from([None, 3]))
def test_scan_rows_from_columns_agree_with_the_cell_path(tmp_path_factory, ops, block_size, columns, stamps,
                                                         ordered, limit):
    """scan() builds dicts from whole columns of dense blocks (sparse ones included)."""
    conn = storage.connect(str(tmp_path_factory.mktemp("t")))
    table = _load(conn, "t", ops + [("major",)], block_size, 1)
    kw = {"columns": columns, "include_timestamp": stamps, "sorted_columns": ordered, "limit": limit}
    got = list(table.scan(**kw))
    want = list(table.scan(path="cell", **kw))
    assert got == want
    if ordered:
        assert [list(d) for _, d in got] == [list(d) for _, d in want]  # column order too
    conn.close()


def test_point_read_arguments_are_checked_every_time(tmp_path):
    conn = storage.connect(str(tmp_path))
    table = _dense_table(conn, 20)
    assert table.row(b"%08d" % 3, columns=[b"cf:n"], timestamp=1) == {}  # a bound kept for reuse
    for bad in ({"timestamp": True}, {"timestamp": -1}, {"columns": [b"nope:x"]}, {"columns": b"cf:n"}):
        with pytest.raises(storage.errors.InvalidArgument):
            table.row(b"%08d" % 3, **{"columns": [b"cf:n"], **bad})
        with pytest.raises(storage.errors.InvalidArgument):
            table.rows([b"%08d" % 3], **{"columns": [b"cf:n"], **bad})
    conn.close()
