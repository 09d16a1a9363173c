"""StoreFileScanner against a sorted Python list: forward, backward, at random
seek positions; seek counts of reverse scans; scanners handed between threads."""

from __future__ import annotations

import random
from bisect import bisect_left
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.cells import Cell, CellType, cells_to_batch, sort_key
from storage.errors import InvalidArgument, ScannerError
from storage.vfs.fs import FileSystem
from storage.storefile import BlockCache, StoreFileReader, StoreFileWriter

FAMILY = b"cf"


def make_cells(seed: int, rows: int = 150, max_cells_per_row: int = 6) -> list[Cell]:
    rng = random.Random(seed)
    by_key = {}
    for r in rng.sample(range(rows * 10), rows):
        row = b"row-%05d" % r
        for _ in range(rng.randint(1, max_cells_per_row)):
            kind = rng.choice([CellType.PUT, CellType.PUT, CellType.DELETE_COLUMN])
            c = Cell(row, FAMILY, b"q%d" % rng.randrange(4), rng.randrange(1, 50), int(kind), rng.randbytes(rng.randrange(20)))
            by_key[sort_key(c)] = c
    return [by_key[k] for k in sorted(by_key)]


def write(fs: FileSystem, path: str, cells: list, **kw) -> None:
    w = StoreFileWriter(fs, path, family=FAMILY, **kw)
    w.append_batch(cells_to_batch(cells))
    w.finish()


class Model:
    """The scanner protocol over a sorted list."""

    def __init__(self, cells: list):
        self.cells = cells
        self.keys = [sort_key(c) for c in cells]
        self.pos = len(cells)

    def cur(self):
        return self.cells[self.pos] if self.pos < len(self.cells) else None

    def seek(self, key):
        self.pos = bisect_left(self.keys, key)
        return self.cur()

    def reseek(self, key):
        if self.cur() is None:
            return self.seek(key)
        self.pos = max(self.pos, bisect_left(self.keys, key))
        return self.cur()

    def next(self):
        c = self.cur()
        if c is not None:
            self.pos += 1
        return c

    def seek_to_previous_row(self, row):
        i = bisect_left(self.keys, (row,))
        if i == 0:
            self.pos = len(self.cells)
            return None
        return self.seek((self.cells[i - 1].row,))

    def seek_to_last_row(self):
        if not self.cells:
            return None
        return self.seek((self.cells[-1].row,))


def drain(scanner) -> list:
    out = []
    c = scanner.next()
    while c is not None:
        out.append(c)
        c = scanner.next()
    return out


@pytest.mark.parametrize("compression", [None, "lz4"])
@pytest.mark.parametrize("with_cache", [False, True])
def test_forward_scan_matches_list_and_batch_path(fs, compression, with_cache):
    cells = make_cells(seed=1)
    write(fs, "f.sf", cells, block_size=600, compression=compression)
    cache = BlockCache(1 << 20) if with_cache else None
    with StoreFileReader(fs, "f.sf", cache=cache) as r:
        for _ in range(2):  # the second pass is served by the cache, if any
            s = r.scanner()
            assert s.peek() is None
            assert s.seek(()) == cells[0]
            got = drain(s)
            assert got == cells and all(type(c) is Cell for c in got[:5])
            assert s.peek() is None and s.next() is None
            s.close()
        batch_cells = [Cell(*t) for b in r.scan_batches() for t in zip(*(b.column(i).to_pylist() for i in range(6)))]
        assert got == batch_cells
        if with_cache:
            assert r.counters.cache_hits >= r.block_count


@pytest.mark.parametrize("block_size", [500, 1 << 20])
def test_seek_at_random_positions(fs, block_size):
    """Small blocks exercise block edges; one large block exercises the
    windows in which the scanner decodes cells."""
    cells = make_cells(seed=2, rows=300)
    write(fs, "s.sf", cells, block_size=block_size)
    model = Model(cells)
    rng = random.Random(3)
    with StoreFileReader(fs, "s.sf") as r:
        s = r.scanner()
        for _ in range(400):
            c = rng.choice(cells)
            key = rng.choice(
                [
                    sort_key(c),
                    (c.row,),
                    (c.row, c.family),
                    (c.row, c.family, c.qualifier),
                    (c.row, c.family, c.qualifier, -c.timestamp),
                    (c.row + b"\0",),
                    (c.row[:-1],),
                    (b"",),
                    (b"zzz",),
                    (),
                    (c.row, c.family, c.qualifier, -c.timestamp - 1),
                    (c.row, c.family, c.qualifier + b"\0"),
                ]
            )
            assert s.seek(key) == model.seek(key), key
            for _ in range(rng.choice([0, 1, 3, 70])):
                assert s.next() == model.next()
            assert s.peek() == model.cur()


@pytest.mark.parametrize("block_size", [400, 1 << 20])
def test_reseek_moves_forward_only(fs, block_size):
    cells = make_cells(seed=4, rows=250)
    write(fs, "r.sf", cells, block_size=block_size)
    keys = [sort_key(c) for c in cells]
    with StoreFileReader(fs, "r.sf") as r:
        s = r.scanner()
        model = Model(cells)
        s.seek(())
        model.seek(())
        rng = random.Random(5)
        while model.cur() is not None:
            target = keys[min(len(keys) - 1, model.pos + rng.randrange(0, 60))]
            target = rng.choice([target, (target[0],), (target[0] + b"\0",)])
            assert s.reseek(target) == model.reseek(target)
            assert s.next() == model.next()
        # A key before the current position does not move the scanner back.
        s.seek(keys[100])
        assert s.reseek(keys[50]) == cells[100]


def test_reseek_counts_a_seek_only_when_it_jumps_over_blocks(fs):
    cells = make_cells(seed=6, rows=300)
    write(fs, "j.sf", cells, block_size=400)
    with StoreFileReader(fs, "j.sf") as r:
        keys = r.block_first_keys
        s = r.scanner()
        s.seek(())
        assert r.counters.seeks == 1
        s.reseek(keys[1])  # the adjacent block: a sequential read, not a seek
        s.reseek((keys[1][0] + b"\0",))  # within the block
        assert r.counters.seeks == 1
        assert s.reseek(keys[10]) == Model(cells).seek(keys[10])
        assert r.counters.seeks == 2


@pytest.mark.parametrize("block_size", [450, 1 << 20])
def test_reverse_scan_matches_list(fs, block_size):
    cells = make_cells(seed=7, rows=250)
    write(fs, "b.sf", cells, block_size=block_size)
    by_row: dict[bytes, list] = {}
    for c in cells:
        by_row.setdefault(c.row, []).append(c)
    expected = [c for row in sorted(by_row, reverse=True) for c in by_row[row]]
    with StoreFileReader(fs, "b.sf") as r:
        s = r.scanner()
        got = []
        c = s.seek_to_last_row()
        while c is not None:
            row = c.row
            while c is not None and c.row == row:
                got.append(s.next())
                c = s.peek()
            c = s.seek_to_previous_row(row)
        assert got == expected
        # From arbitrary rows, present or not.
        model = Model(cells)
        rng = random.Random(8)
        for _ in range(200):
            row = rng.choice([rng.choice(cells).row, b"row-%05d" % rng.randrange(2000), b"", b"zz"])
            assert s.seek_to_previous_row(row) == model.seek_to_previous_row(row), row
            assert s.next() == model.next()


def test_reverse_scan_seeks_once_per_row(fs):
    """HBASE-28043: with the previous-row hint a reverse scan over N rows makes
    about N seeks; without it (each step from a fresh scanner) it makes 2N."""
    cells = make_cells(seed=9, rows=400)
    write(fs, "rev.sf", cells, block_size=2048)
    rows = sorted({c.row for c in cells}, reverse=True)
    n = len(rows)
    with StoreFileReader(fs, "rev.sf") as r:
        assert r.block_count > 10
        s = r.scanner()
        c = s.seek_to_last_row()
        seen = []
        while c is not None:
            seen.append(c.row)
            row = c.row
            while c is not None and c.row == row:
                s.next()
                c = s.peek()
            c = s.seek_to_previous_row(row)
        assert seen == rows
        hinted = r.counters.seeks
        assert n <= hinted <= n + 1
        # Every block read about once, not twice per row.
        assert r.counters.blocks_read <= 3 * r.block_count

        r.counters.reset()
        for row in rows[:-1]:
            fresh = r.scanner()
            assert fresh.seek_to_previous_row(row) is not None
        assert r.counters.seeks == 2 * (n - 1)


def test_exact_row_seek_uses_the_bloom_filter(fs):
    cells = [Cell(b"user%05d" % (i * 3), FAMILY, b"q%d" % q, 1, 4, b"v") for i in range(2000) for q in range(2)]
    write(fs, "g.sf", cells, block_size=1024)
    with StoreFileReader(fs, "g.sf") as r:
        s = r.scanner()
        absent = [b"user%05d" % (i * 3 + 1) for i in range(2000)]
        skipped = 0
        for row in absent:
            before = r.counters.blocks_read
            c = s.seek((row,), exact_row=True)
            if c is None:
                skipped += 1
                assert r.counters.blocks_read == before  # no block read for a skipped file
            else:
                assert c.row > row  # a false positive still positions correctly
        assert skipped > 0.95 * len(absent)
        for i in range(0, 2000, 97):
            row = b"user%05d" % (i * 3)
            assert s.seek((row,), exact_row=True) == cells[2 * i]
        # After a skip the scanner can be positioned again.
        s.seek((b"user00001",), exact_row=True)
        assert s.reseek((b"user00003",)) == cells[2]
        assert s.seek((b"a",), exact_row=True) is None  # outside the key range


def _consume_blocks_on_two_threads(r: StoreFileReader, counts: list[int]) -> list:
    """Read the file cell by cell; each block's cells are consumed on the other
    thread than the previous block's, so the read of every next block (done
    when a block's last cell is consumed) happens on alternating threads."""
    pools = [ThreadPoolExecutor(max_workers=1), ThreadPoolExecutor(max_workers=1)]
    try:
        s = r.scanner()
        s.seek(())
        out = []
        for i, k in enumerate(counts):
            out.extend(pools[i % 2].submit(lambda k=k: [s.next() for _ in range(k)]).result())
        return out
    finally:
        for p in pools:
            p.shutdown()


@pytest.mark.parametrize("prefetch", ["shared", "thread_local"])
def test_prefetched_header_is_shared_by_threads(fs, prefetch):
    cells = make_cells(seed=10, rows=200)
    write(fs, "t.sf", cells, block_size=600)
    with StoreFileReader(fs, "t.sf", prefetch=prefetch) as r:
        counts = [r.read_block(i).num_rows for i in range(r.block_count)]
        r.counters.reset()
        assert _consume_blocks_on_two_threads(r, counts) == cells
        snap = r.counters.snapshot()
        assert snap["blocks_read"] == r.block_count > 10  # each block read exactly once
        if prefetch == "shared":
            assert snap["extra_header_reads"] == 0
        else:
            assert snap["extra_header_reads"] == r.block_count - 1


def test_closed_scanner_refuses_positioning(fs):
    cells = make_cells(seed=11, rows=10)
    write(fs, "c.sf", cells)
    with StoreFileReader(fs, "c.sf") as r:
        s = r.scanner()
        s.seek(())
        s.close()
        assert s.next() is None and s.peek() is None
        for call in (lambda: s.seek(()), lambda: s.reseek(()), lambda: s.seek_to_last_row(), lambda: s.seek_to_previous_row(b"x")):
            with pytest.raises(ScannerError):
                call()
        with pytest.raises(InvalidArgument):
            r.scanner().seek(b"row")


_small_cells = st.lists(
    st.tuples(st.binary(min_size=0, max_size=3), st.sampled_from([b"", b"a", b"b"]), st.integers(0, 5), st.sampled_from([4, 8, 12, 14])),
    min_size=0,
    max_size=60,
)
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("seek"), st.binary(max_size=3), st.sampled_from([None, b"", b"a", b"b"])),
        st.tuples(st.just("reseek"), st.binary(max_size=3), st.sampled_from([None, b"", b"a", b"b"])),
        st.tuples(st.just("next")),
        st.tuples(st.just("prev"), st.binary(max_size=3)),
        st.tuples(st.just("last")),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=_small_cells, ops=_ops, block_size=st.sampled_from([1, 40, 200, 65536]))
def test_scanner_behaves_like_the_model(tmp_path, raw, ops, block_size):
    by_key = {}
    for row, qual, ts, kind in raw:
        c = Cell(row, FAMILY, qual, ts, kind, b"v" + row)
        by_key[sort_key(c)] = c
    cells = [by_key[k] for k in sorted(by_key)]
    fs = FileSystem(str(tmp_path))
    write(fs, "h.sf", cells, block_size=block_size)
    model = Model(cells)
    with StoreFileReader(fs, "h.sf") as r:
        s = r.scanner()
        for op in ops:
            if op[0] in ("seek", "reseek"):
                key = (op[1],) if op[2] is None else (op[1], FAMILY, op[2])
                got, want = getattr(s, op[0])(key), getattr(model, op[0])(key)
            elif op[0] == "next":
                if model.cur() is None and s.peek() is None:
                    continue
                got, want = s.next(), model.next()
            elif op[0] == "prev":
                got, want = s.seek_to_previous_row(op[1]), model.seek_to_previous_row(op[1])
            else:
                got, want = s.seek_to_last_row(), model.seek_to_last_row()
            assert got == want, op
            assert s.peek() == model.cur(), op
