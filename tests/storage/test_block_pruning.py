"""Row groups whose value bounds rule out a scan's filter are skipped, never changing an answer.

A table's rows hold ``cf:d``, an 8-byte big-endian value that grows with the row key (a date
column of rows sorted by date), and ``cf:s``, a string.  Every scan here is compared with the
same scan whose filter the bounds cannot judge (the same comparisons written with
``filter_if_missing`` off where that keeps the answer, or the rows filtered in Python), and
``ScanMetrics.row_groups_pruned`` says whether blocks were skipped: on one sorted run they are;
where a newer cell elsewhere (another file over the same rows, the memstore) could shadow or
delete a row of a skipped block, they are not.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

import storage
from storage import ScanMetrics
from storage.filters import (
    BinaryComparator,
    BinaryPrefixComparator,
    FilterList,
    PageFilter,
    SingleColumnValueFilter,
)
from storage.read.block_pruning import block_mask, prunable

N = 6000
FAMILY = {"cf": {"block_size": 4096, "max_versions": 3}}
SETTINGS = {"wal_sync": "none", "compaction_threshold": 100}


def key(i: int) -> bytes:
    return b"r%06d" % i


def day(i: int) -> bytes:
    return struct.pack(">Q", 20000 + i // 10)  # ten rows a day, rising with the key


def _fill(table, rows: range, skip_d=lambda i: False) -> None:
    with table.batch() as b:
        for i in rows:
            data = {b"cf:s": b"s%d" % (i % 7)}
            if not skip_d(i):
                data[b"cf:d"] = day(i)
            b.put(key(i), data)


def _scvf(op: str, i: int, if_missing: bool = True) -> SingleColumnValueFilter:
    return SingleColumnValueFilter(b"cf", b"d", op, BinaryComparator(day(i)), filter_if_missing=if_missing)


def _between(a: int, b: int, if_missing: bool = True) -> FilterList:
    return FilterList.join("MUST_PASS_ALL", _scvf(">=", a, if_missing), _scvf("<", b, if_missing))


def _scan(table, flt, **kwargs) -> tuple[pa.Table, ScanMetrics]:
    metrics = ScanMetrics()
    batches = list(table.scan_batches(filter=flt, metrics=metrics, **kwargs))
    rows = pa.Table.from_batches(batches) if batches else pa.table({"key": pa.array([], pa.binary())})
    return rows, metrics


def _keys(rows: pa.Table) -> list[bytes]:
    return rows.column("key").to_pylist()


def _compacted_table(conn) -> None:
    """Table ``t`` of :data:`N` filled rows, flushed and major-compacted."""
    conn.create_table("t", FAMILY, settings=SETTINGS)
    table = conn.table("t")
    _fill(table, range(N))
    table.flush()
    table.compact(major=True)


@pytest.fixture
def compacted(tmp_path):
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        _compacted_table(conn)
        yield conn.table("t")


def test_sorted_data_skips_most_groups_with_the_same_answer(compacted):
    """A narrow range of days reads a few row groups of many; every answer equals the
    unpruned one (the same comparisons with ``filter_if_missing`` off: every row has ``d``)."""
    table = compacted
    blocks = table.store_file_readers()[0].block_count
    assert blocks > 20
    for flt_args in [(2000, 2100), (0, 10), (5990, 6000), (3330, 3340)]:
        pruned, metrics = _scan(table, _between(*flt_args))
        plain, plain_metrics = _scan(table, _between(*flt_args, if_missing=False))
        want = [key(i) for i in range(N) if flt_args[0] // 10 <= i // 10 < -(-flt_args[1] // 10)]
        assert _keys(pruned) == _keys(plain) == want
        assert pruned.to_pylist() == plain.to_pylist()
        assert plain_metrics.row_groups_pruned == 0
        assert metrics.row_groups_pruned >= blocks - 3, (flt_args, metrics.row_groups_pruned, blocks)
    # every operator, a prefix comparison and an OR of two ranges
    cases = [
        _scvf("=", 4000), _scvf("<", 100), _scvf("<=", 100), _scvf(">", 5900), _scvf(">=", 5900), _scvf("!=", 10),
        SingleColumnValueFilter(b"cf", b"d", "=", BinaryPrefixComparator(day(2500)[:7]), filter_if_missing=True),
        FilterList.join("MUST_PASS_ONE", _between(10, 20), _between(5000, 5010)),
    ]
    for flt in cases:
        pruned, metrics = _scan(table, flt)
        loose = flt.copy()
        for f in [loose] + list(getattr(loose, "filters", [])) + [g for f in getattr(loose, "filters", [])
                                                                     for g in getattr(f, "filters", [])]:
            if isinstance(f, SingleColumnValueFilter):
                f.filter_if_missing = False
        plain, _ = _scan(table, loose)
        assert pruned.to_pylist() == plain.to_pylist(), flt
        if not isinstance(flt, SingleColumnValueFilter) or flt.op.name != "NOT_EQUAL":
            assert metrics.row_groups_pruned > 0, flt
    # a time range, more versions and a key range keep the answers
    pruned, metrics = _scan(table, _between(1000, 1200), max_versions=3, row_start=key(900), row_stop=key(1100))
    assert _keys(pruned) == [key(i) for i in range(1000, 1100)] and metrics.row_groups_pruned > 0


def test_rows_lacking_the_column(tmp_path):
    """Rows without ``d`` fail a ``filter_if_missing`` comparison and are pruned with their
    blocks; without ``filter_if_missing`` they pass, so nothing is pruned on bounds alone."""
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", FAMILY, settings=SETTINGS)
        table = conn.table("t")
        _fill(table, range(N), skip_d=lambda i: i % 3 == 0)
        table.flush()
        table.compact(major=True)
        strict, metrics = _scan(table, _between(3000, 3100))
        assert _keys(strict) == [key(i) for i in range(3000, 3100) if i % 3]
        assert metrics.row_groups_pruned > 0
        loose, metrics = _scan(table, _between(3000, 3100, if_missing=False))
        assert _keys(loose) == [key(i) for i in range(N) if i % 3 == 0 or 3000 <= i < 3100]
        assert metrics.row_groups_pruned == 0


def test_overlapping_sources_are_never_pruned(tmp_path):
    """A newer file over the same rows, the memstore, deletes and older versions: a skipped block
    could hold a cell that shadows or deletes a matching one, so nothing is skipped there and the
    answers are the right ones."""
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", FAMILY, settings=SETTINGS)
        table = conn.table("t")
        _fill(table, range(N))
        table.flush()
        # a second file over rows 2000..2099: their d moves far away, and row 5000 gets day 200's d
        with table.batch() as b:
            for i in range(2000, 2100):
                b.put(key(i), {b"cf:d": day(5900)})
            b.put(key(5000), {b"cf:d": day(2000)})
        table.flush()
        rows, metrics = _scan(table, _between(2000, 2100))
        assert _keys(rows) == [key(5000)] and metrics.row_groups_pruned == 0
        # max_versions 3: the row's newest version is tested, the older ones kept the bounds
        rows, _ = _scan(table, _between(2000, 2100), max_versions=3)
        assert _keys(rows) == [key(5000)]
        # deletes in the memstore: the rows they delete must not come back from a pruned read
        table.compact(major=True)
        table.delete(key(5000), columns=[b"cf:d"])
        table.put(key(4000), {b"cf:d": day(2050)})
        rows, metrics = _scan(table, _between(2000, 2100))
        assert _keys(rows) == [key(4000)] and metrics.row_groups_pruned == 0
        table.flush()
        table.compact(major=True)
        rows, metrics = _scan(table, _between(2000, 2100))
        assert _keys(rows) == [key(4000)] and metrics.row_groups_pruned > 0


def test_disjoint_files_prune_each_file(tmp_path):
    """Files of disjoint key ranges are one sorted run: each file's blocks are pruned."""
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", FAMILY, settings=SETTINGS)
        table = conn.table("t")
        for part in range(3):
            _fill(table, range(part * 2000, (part + 1) * 2000))
            table.flush()
        assert len(table.store_file_readers()) == 3
        rows, metrics = _scan(table, FilterList.join("MUST_PASS_ONE", _between(100, 120), _between(4500, 4520)))
        assert _keys(rows) == [key(i) for i in [*range(100, 120), *range(4500, 4520)]]
        assert metrics.files_unmerged == 3 and metrics.row_groups_pruned > 0


def test_prune_filter_skips_blocks_but_decides_no_row(compacted):
    """``prune_filter`` only lets blocks go: rows of the blocks it keeps come whether they pass it
    or not (the reader tests them), rows of skipped blocks do not; with a ``filter`` too both prune."""
    rows, metrics = _scan(compacted, None, prune_filter=_between(3000, 3010))
    got = _keys(rows)
    assert set(range(3000, 3010)) <= {int(k[1:]) for k in got} and len(got) < N / 4
    assert metrics.row_groups_pruned > 0
    # a filter string serves as well
    rows, _ = _scan(compacted, None, prune_filter=repr(_between(3000, 3010)))
    assert _keys(rows) == got


def test_what_the_bounds_can_judge():
    """Stateful members in an AND, members the bounds cannot judge in an OR, other families and
    comparators leave every block read."""
    mins, maxs = [day(0), day(100), None], [day(99), day(199), None]

    def stats(q):
        return (mins, maxs) if q == b"d" else None

    assert block_mask(_scvf("<", 100), b"cf", 3, stats).tolist() == [True, False, True]
    assert block_mask(FilterList.join("MUST_PASS_ALL", _scvf("<", 100), PageFilter(5)), b"cf", 3, stats) is None
    other = SingleColumnValueFilter(b"cf", b"e", "=", BinaryComparator(b"x"), filter_if_missing=True)
    assert block_mask(FilterList.join("MUST_PASS_ONE", _scvf("<", 100), other), b"cf", 3, stats) is None
    assert block_mask(FilterList.join("MUST_PASS_ALL", _scvf("<", 100), other), b"cf", 3, stats).tolist() == [
        True, False, True]
    assert block_mask(_scvf("<", 100), b"other", 3, stats) is None
    assert not prunable(_scvf("<", 100, if_missing=False))


def test_deletes_and_versions_inside_one_file(tmp_path):
    """One flushed file holding puts, newer versions and delete markers of its own rows streams
    alone and is pruned; the deleted value and the older versions never come back, and a time
    range that hides the newer version tests the older one."""
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", FAMILY, settings=SETTINGS)
        table = conn.table("t")
        for i in range(N):
            table.put(key(i), {b"cf:s": b"x", b"cf:d": day(i)}, timestamp=10)
        table.put(key(5000), {b"cf:d": day(2000)}, timestamp=20)  # a newer version in range
        table.delete(key(5000), columns=[b"cf:d"], timestamp=30)  # then deleted
        table.put(key(4000), {b"cf:d": day(2050)}, timestamp=20)  # a newer version in range
        table.put(key(2010), {b"cf:d": day(10)}, timestamp=20)  # moved out of range
        table.flush()
        assert len(table.store_file_readers()) == 1
        want = [key(i) for i in range(2000, 2100) if i != 2010] + [key(4000)]
        rows, metrics = _scan(table, _between(2000, 2100))
        assert _keys(rows) == want and metrics.row_groups_pruned > 0
        rows, _ = _scan(table, _between(2000, 2100), max_versions=3)
        assert _keys(rows) == want
        # before timestamp 20 the older versions are the visible ones
        rows, metrics = _scan(table, _between(2000, 2100), time_range=(0, 15))
        assert _keys(rows) == [key(i) for i in range(2000, 2100)]
        # without filter_if_missing the row whose value is deleted passes: its stored bounds are no guide
        rows, metrics = _scan(table, _between(2000, 2100, if_missing=False), time_range=(0, 15))
        assert _keys(rows) == [key(i) for i in range(2000, 2100)] + [key(5000)]
        assert metrics.row_groups_pruned == 0


def test_rows_wider_than_a_block(tmp_path):
    """Rows cut across blocks: a block is skipped only with every block its rows lie in, and
    every range of the key space answers as the unpruned scan."""
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {"block_size": 512}}, settings=SETTINGS)
        table = conn.table("t")
        with table.batch() as b:
            for i in range(400):
                wide = {b"cf:w%d" % j: b"%04d" % j * 200 for j in range(6)} if i % 9 == 0 else {}
                b.put(key(i), {b"cf:d": day(i * 10), **wide})
        table.flush()
        reader = table.store_file_readers()[0]
        assert any(s > 0 for s in reader.block_row_starts)  # some rows do cross block ends
        pruned_somewhere = False
        for lo, hi in [(0, 5), (9, 10), (17, 28), (180, 190), (395, 400)]:
            for start, stop in [(None, None), (key(lo - 3), key(hi + 3)), (key(lo), None)]:
                got, metrics = _scan(table, _between(lo * 10, hi * 10), row_start=start, row_stop=stop)
                want, _ = _scan(table, _between(lo * 10, hi * 10, if_missing=False), row_start=start, row_stop=stop)
                assert got.to_pylist() == want.to_pylist() and got.num_rows == hi - lo, (lo, hi, start)
                pruned_somewhere |= metrics.row_groups_pruned > 0
        assert pruned_somewhere



def _blocks_with_keys_cached(reader) -> set[int]:
    """The blocks of ``reader``'s file whose decoded keys the block cache holds, in any form."""
    offsets = {off: i for i, off in enumerate(reader._index.offsets)}
    with reader._cache._lock:
        keys = list(reader._cache._entries)
    return {offsets[k[1]] for k in keys if isinstance(k, tuple) and len(k) >= 2 and k[0] == reader.file_id
            and k[1] in offsets}


def test_bounds_are_those_of_the_chunk_the_key_chunk_names(tmp_path):
    """The bounds a block is judged by are the block index's of the chunk its qualifier table
    names (the reader's own ``chunk_stats``), also where blocks lack the column."""
    from storage.read.block_pruning import _range_stats

    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", FAMILY, settings=SETTINGS)
        table = conn.table("t")
        _fill(table, range(N), skip_d=lambda i: 1000 <= i < 2500 or i % 5 == 0)
        table.flush()
        table.compact(major=True)
        reader = table.store_file_readers()[0]
        n = reader.block_count
        got = {q: _range_stats(reader, q, 0, n - 1, None) for q in (b"d", b"s", b"absent")}
        for q, bounds in got.items():
            assert bounds == reader.chunk_stats(q), q
        assert any(lo is None for lo in got[b"d"][0]) and any(lo is not None for lo in got[b"d"][0])
        assert got[b"absent"] == ([None] * n, [None] * n)


def test_skipped_blocks_have_no_keys_decoded(tmp_path):
    """A scan that skips most blocks decodes and caches the keys of the blocks it reads (and of
    the first it judges), not of those it skips; the answers are those of the unpruned scan."""
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        _compacted_table(conn)
    with storage.connect(root) as conn:
        table = conn.table("t")
        reader = table.store_file_readers()[0]
        reader._cache.evict_file(reader.file_id)  # the blocks the writer left cached
        ranges = [(3000, 3010), (5990, 6000), (0, 10)]
        pruned = []
        for lo, hi in ranges:
            rows, metrics = _scan(table, _between(lo, hi))
            assert metrics.row_groups_pruned >= reader.block_count - 3
            pruned.append(rows)
        assert len(_blocks_with_keys_cached(reader)) <= 7  # 2 read by each scan, and block 0 judged first
        for (lo, hi), rows in zip(ranges, pruned):
            plain, _ = _scan(table, _between(lo, hi, if_missing=False))
            assert rows.to_pylist() == plain.to_pylist() and _keys(rows) == [key(i) for i in range(lo, hi)]


def test_a_damaged_key_chunk_of_a_skipped_block_fails_the_scan(tmp_path):
    """Which chunk holds the compared qualifier is read from the block's key chunk, verified: a
    damaged key chunk fails the scan with a CorruptionError even where the block's bounds would
    let the scan skip it (never a block judged by another column's bounds)."""
    import os

    from storage.errors import CorruptionError

    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        _compacted_table(conn)
        table = conn.table("t")
        reader = table.store_file_readers()[0]
        path = reader.fs.local_path(reader.path)
        i = reader.block_count // 2  # rows about 3000: skipped by a scan of days 10..11
        entry = reader._index.chunks.entries(i)[0]  # the key chunk the block index names
        at = reader._index.offsets[i] + entry[0] + entry[1] // 2
    fd = os.open(path, os.O_RDWR)
    try:
        byte = os.pread(fd, 1, at)
        os.pwrite(fd, bytes([byte[0] ^ 0xFF]), at)
    finally:
        os.close(fd)
    with storage.connect(root) as conn:
        with pytest.raises(CorruptionError, match="key chunk"):
            _scan(conn.table("t"), _between(100, 110))
