"""Store files: round trips, the writer's contract, the batch scan path, bloom
filters, the prefetched header and corruption detection."""

from __future__ import annotations

import random
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.cells import CELL_SCHEMA, Cell, CellType, cells_to_batch, sort_key
from storage.errors import CorruptionError, InvalidArgument, StorageError
from storage.vfs.fs import FileSystem
from storage.storefile import FORMAT_VERSION, BlockCache, FileInfo, StoreFileReader, StoreFileWriter
from storage.storefile.bloom import RowBloomFilter, row_hash_pair, row_hash_pairs
from storage.storefile.codecs import CODECS, BlockCodec
from storage.storefile.format import (
    BLOCK_HEADER_SIZE,
    BLOCK_V2_HEADER_SIZE,
    BLOCK_V3_HEADER_SIZE,
    BlockHeaderV2,
    BlockHeaderV3,
    BLOOM_MAGIC,
    TRAILER_SIZE,
    CompressionType,
    SectionHeader,
    Trailer,
    checksum,
)
from tests.golden.storefile_v1 import V1StoreFileWriter  # version 1 files, for the reader's checks

FAMILY = b"cf"


def make_cells(seed: int, rows: int = 200, max_cells_per_row: int = 6, value_size: int = 30) -> list[Cell]:
    """Random sorted cells of FAMILY with distinct sort keys; some delete markers."""
    rng = random.Random(seed)
    cells = set()
    for r in rng.sample(range(rows * 10), rows):
        row = b"row-%06d" % r
        for _ in range(rng.randint(1, max_cells_per_row)):
            kind = rng.choice([CellType.PUT] * 5 + [CellType.DELETE, CellType.DELETE_COLUMN])
            cells.add(
                (row, FAMILY, b"q%d" % rng.randrange(4), rng.randrange(1, 1000), int(kind), rng.randbytes(rng.randrange(value_size)))
            )
    # Cells with the same key but different values would make the order ambiguous.
    by_key = {sort_key(c): c for c in cells}
    return [Cell(*by_key[k]) for k in sorted(by_key)]


def write(fs: FileSystem, path: str, cells: list, *, split: bool = True, max_seq_id: int = 0,
          format_version: int = FORMAT_VERSION, **kw) -> FileInfo:
    """Write cells mixing both append paths: a batch, single cells, a multi-chunk table
    (``format_version=1``: with the version 1 writer kept beside the golden files)."""
    if format_version == 1:
        w = V1StoreFileWriter(fs, path, family=FAMILY, **kw)
    else:
        w = StoreFileWriter(fs, path, family=FAMILY, format_version=format_version, **kw)
    if split and len(cells) >= 3:
        a, b = len(cells) // 3, 2 * len(cells) // 3
        w.append_batch(cells_to_batch(cells[:a]))
        for c in cells[a:b]:
            w.append(c)
        tail = cells_to_batch(cells[b:])
        w.append_batch(pa.Table.from_batches([tail.slice(0, tail.num_rows // 2), tail.slice(tail.num_rows // 2)]))
    else:
        for c in cells:
            w.append(c)
    return w.finish(max_seq_id=max_seq_id)


def batch_cells(batches) -> list[Cell]:
    out = []
    for b in batches:
        out.extend(Cell(*t) for t in zip(*(b.column(i).to_pylist() for i in range(6))))
    return out


def rows_reversed(cells: list) -> list:
    """The reverse-scan order: rows descending, cells of a row ascending."""
    by_row: dict[bytes, list] = {}
    for c in cells:
        by_row.setdefault(c[0], []).append(c)
    return [c for row in sorted(by_row, reverse=True) for c in by_row[row]]


# -- round trips -------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "lz4", "zstd", "snappy", "gzip"])
@pytest.mark.parametrize("bloom", [True, False])
def test_round_trip(fs, compression, bloom):
    cells = make_cells(seed=len(str(compression)) + bloom, rows=150)
    info = write(fs, "f.sf", cells, block_size=1024, compression=compression, bloom=bloom, max_seq_id=42)
    with StoreFileReader(fs, "f.sf") as r:
        assert r.info == info
        assert info.block_count == r.block_count > 5
        assert info.cell_count == len(cells)
        assert info.row_count == len({c.row for c in cells})
        assert info.first_cell == cells[0] and info.last_cell == cells[-1]
        assert info.min_timestamp == min(c.timestamp for c in cells)
        assert info.max_timestamp == max(c.timestamp for c in cells)
        assert info.max_seq_id == 42 and info.family == FAMILY and info.compression == compression
        assert info.format_version == FORMAT_VERSION and info.file_size == fs.size("f.sf")
        assert info.has_bloom == bloom == r.has_bloom
        assert batch_cells(r.scan_batches()) == cells
        assert batch_cells(r.read_block(i) for i in range(r.block_count)) == cells
        assert r.block_first_keys == [sort_key(batch_cells([r.read_block(i)])[0]) for i in range(r.block_count)]
        for b in r.scan_batches():
            assert b.schema.equals(CELL_SCHEMA)
        r.check()


def test_all_codecs_are_registered_with_distinct_codes():
    assert sorted(c.code for c in CODECS.values()) == sorted(CompressionType)
    with pytest.raises(InvalidArgument, match="compression"):
        StoreFileWriter(FileSystem("/tmp"), "x", family=FAMILY, compression="brotli2")


def test_missing_codec_names_what_is_missing():
    ghost = BlockCodec("ghost", CompressionType.NONE, "not-a-real-codec")
    assert not ghost.available
    with pytest.raises(StorageError, match="not-a-real-codec"):
        ghost.compress(pa.py_buffer(b"abc"))


def test_round_trip_on_a_non_local_filesystem():
    """Object stores have no memory map: blocks are read with read_at."""
    fs = FileSystem("mock://bucket")
    fs.makedirs("")
    cells = make_cells(seed=30, rows=60)
    info = write(fs, "m.sf", cells, block_size=500, compression="lz4")
    with StoreFileReader(fs, "m.sf") as r:
        assert r.info == info and r.block_count > 3
        assert batch_cells(r.scan_batches()) == cells
        assert batch_cells(r.scan_batches(reverse=True)) == rows_reversed(cells)
        assert r.counters.extra_header_reads == 0
        r.check()


def test_compression_shrinks_repetitive_data(fs):
    # distinct values (a dictionary would not pay), each mostly one repeated byte
    cells = [Cell(b"row%05d" % i, FAMILY, b"q", 1, 4, b"%05d" % i + b"x" * 195) for i in range(500)]
    plain = write(fs, "plain.sf", cells, block_size=8192)
    packed = write(fs, "zstd.sf", cells, block_size=8192, compression="zstd")
    assert packed.data_size < plain.data_size / 5
    assert packed.uncompressed_size == plain.uncompressed_size


def test_empty_file(fs):
    w = StoreFileWriter(fs, "e.sf", family=FAMILY, bloom=True)
    info = w.finish()
    assert (info.cell_count, info.row_count, info.block_count) == (0, 0, 0)
    assert info.first_cell is None and info.last_cell is None
    assert info.min_timestamp is None and info.max_timestamp is None
    assert info.has_bloom is False
    with StoreFileReader(fs, "e.sf") as r:
        assert r.info == info
        assert r.block_count == 0 and r.block_first_keys == []
        assert list(r.scan_batches()) == [] and list(r.scan_batches(reverse=True)) == []
        assert r.find_block((b"a",)) == -1
        assert not r.might_contain_row(b"a")
        s = r.scanner()
        assert s.seek(()) is None and s.next() is None
        assert s.seek_to_last_row() is None and s.seek_to_previous_row(b"z") is None
        r.check()
        with pytest.raises(InvalidArgument):
            r.read_block(0)


def test_rows_span_blocks(fs):
    wide = [Cell(b"wide", FAMILY, b"q%05d" % i, 7, 4, b"v" * 40) for i in range(400)]
    cells = [Cell(b"a", FAMILY, b"q", 1, 4, b"x")] + wide + [Cell(b"z", FAMILY, b"q", 1, 4, b"y")]
    info = write(fs, "w.sf", cells, block_size=2048)
    assert info.block_count >= 8 and info.row_count == 3
    with StoreFileReader(fs, "w.sf") as r:
        assert sum(1 for k in r.block_first_keys if k[0] == b"wide") >= 7
        assert batch_cells(r.scan_batches()) == cells
        assert batch_cells(r.scan_batches(b"wide", b"wide\0")) == wide
        rev = list(r.scan_batches(reverse=True))
        assert batch_cells(rev) == rows_reversed(cells)
        # The spanning row comes out whole, in one batch.
        per_batch = [sum(1 for c in batch_cells([b]) if c.row == b"wide") for b in rev]
        assert [k for k in per_batch if k] == [400]
        r.check()


def test_block_cutting_follows_block_size(fs):
    cells = [Cell(b"r%05d" % i, FAMILY, b"q", 1, 4, b"v" * (i % 50)) for i in range(3000)]
    write(fs, "b.sf", cells, block_size=4096)
    with StoreFileReader(fs, "b.sf") as r:
        for i in range(r.block_count):
            b = r.read_block(i)
            est = sum(len(c[0]) + len(c[1]) + len(c[2]) + len(c[5]) + 25 for c in batch_cells([b]))
            last = len(b.column(0)[-1].as_py()) + len(FAMILY) + 1 + len(b.column(5)[-1].as_py()) + 25
            if i < r.block_count - 1:
                assert 4096 <= est < 4096 + last  # closed by the cell that reached the target
            else:
                assert est < 4096 + last


def test_equal_keys_never_split_across_blocks(fs):
    dup = Cell(b"m", FAMILY, b"q", 5, 4, b"same")
    cells = [Cell(b"a%03d" % i, FAMILY, b"q", 1, 4, b"v" * 30) for i in range(50)] + [dup] * 200
    cells += [Cell(b"z%03d" % i, FAMILY, b"q", 1, 4, b"v" * 30) for i in range(50)]
    write(fs, "d.sf", cells, block_size=512)
    with StoreFileReader(fs, "d.sf") as r:
        keys = r.block_first_keys
        assert all(a < b for a, b in zip(keys, keys[1:]))
        holding = [i for i in range(r.block_count) if dup in batch_cells([r.read_block(i)])]
        assert len(holding) == 1 and r.block_count > 5
        assert batch_cells(r.scan_batches()) == cells
        s = r.scanner()
        assert s.seek(sort_key(dup)) == dup
        got = [s.next() for _ in range(200)]
        assert got == [dup] * 200 and s.peek() == cells[250]
        r.check()


def test_large_batch_is_cut_without_python_cell_loop(fs):
    n = 50_000
    rows = pa.array([b"r%08d" % (i // 5) for i in range(n)], pa.binary())
    batch = pa.RecordBatch.from_arrays(
        [
            rows,
            pa.array([FAMILY] * n, pa.binary()),
            pa.array([b"q%d" % (i % 5) for i in range(n)], pa.binary()),
            pa.array(np.full(n, 9, dtype=np.int64)),
            pa.array(np.full(n, 4, dtype=np.uint8)),
            pa.array([b"value"] * n, pa.binary()),
        ],
        schema=CELL_SCHEMA,
    )
    w = StoreFileWriter(fs, "big.sf", family=FAMILY, block_size=16384, compression="lz4")
    w.append_batch(batch)
    info = w.finish()
    assert info.cell_count == n and info.row_count == n // 5 and info.block_count > 30
    with StoreFileReader(fs, "big.sf") as r:
        out = pa.Table.from_batches(list(r.scan_batches()))
        assert out.equals(pa.Table.from_batches([batch]))
        r.check()


# -- the writer's contract ---------------------------------------------------


def test_out_of_order_append_rejected_and_writer_stays_usable(fs):
    w = StoreFileWriter(fs, "o.sf", family=FAMILY)
    w.append(Cell(b"b", FAMILY, b"q", 5, 4, b"1"))
    with pytest.raises(InvalidArgument, match="sorts before"):
        w.append(Cell(b"a", FAMILY, b"q", 5, 4, b"x"))
    with pytest.raises(InvalidArgument, match="sorts before"):
        w.append(Cell(b"b", FAMILY, b"q", 6, 4, b"x"))  # newer timestamp must come first
    with pytest.raises(InvalidArgument, match="sorts before"):
        w.append(Cell(b"b", FAMILY, b"q", 5, 8, b""))  # a delete marker must come first
    w.append(Cell(b"b", FAMILY, b"q", 5, 4, b"2"))  # an equal key is allowed
    with pytest.raises(InvalidArgument, match="sorts before"):
        w.append_batch(cells_to_batch([Cell(b"a", FAMILY, b"q", 1, 4, b"")]))
    unsorted = cells_to_batch([Cell(b"c", FAMILY, b"q", 1, 4, b""), Cell(b"e", FAMILY, b"q", 1, 4, b""), Cell(b"d", FAMILY, b"q", 1, 4, b"")])
    with pytest.raises(InvalidArgument, match="cell 2"):
        w.append_batch(unsorted)
    bad_qual = cells_to_batch([Cell(b"c", FAMILY, b"q2", 1, 4, b""), Cell(b"c", FAMILY, b"q1", 1, 4, b"")])
    with pytest.raises(InvalidArgument, match="not sorted"):
        w.append_batch(bad_qual)
    w.append_batch(cells_to_batch([Cell(b"c", FAMILY, b"q", 1, 4, b"3")]))
    info = w.finish()
    assert info.cell_count == 3
    with StoreFileReader(fs, "o.sf") as r:
        assert [c.value for c in batch_cells(r.scan_batches())] == [b"1", b"2", b"3"]


def test_bad_cells_and_batches_rejected(fs):
    w = StoreFileWriter(fs, "x.sf", family=FAMILY)
    with pytest.raises(InvalidArgument, match="family"):
        w.append(Cell(b"a", b"other", b"q", 1, 4, b""))
    with pytest.raises(InvalidArgument, match="family"):
        w.append_batch(cells_to_batch([Cell(b"a", FAMILY, b"q", 1, 4, b""), Cell(b"b", b"zz", b"q", 1, 4, b"")]))
    with pytest.raises(InvalidArgument, match="bytes"):
        w.append((u"a", FAMILY, b"q", 1, 4, b""))
    with pytest.raises(InvalidArgument, match="columns"):
        w.append_batch(pa.record_batch({"row": [b"a"]}))
    nulls = pa.RecordBatch.from_arrays(
        [pa.array([None], pa.binary())] + [cells_to_batch([Cell(b"a", FAMILY, b"q", 1, 4, b"")]).column(i) for i in range(1, 6)],
        names=CELL_SCHEMA.names,
    )
    with pytest.raises(InvalidArgument, match="nulls"):
        w.append_batch(nulls)
    with pytest.raises(InvalidArgument):
        w.append_batch([1, 2, 3])
    with pytest.raises(InvalidArgument, match="max_seq_id"):
        w.finish(max_seq_id=-1)
    w.abandon()
    for bad in ({"block_size": 0}, {"block_size": "big"}, {"family": "cf"}):
        kw = {"family": FAMILY, **bad}
        with pytest.raises(InvalidArgument):
            StoreFileWriter(fs, "y.sf", **kw)


def test_compatible_batch_types_are_cast(fs):
    batch = pa.record_batch(
        {
            "row": pa.array([b"a", b"b"], pa.large_binary()),
            "family": pa.array([FAMILY, FAMILY]),
            "qualifier": pa.array([b"q", b"q"]),
            "timestamp": pa.array([3, 4], pa.int32()),
            "type": pa.array([4, 4], pa.int64()),
            "value": pa.array([b"1", b"2"]),
        }
    )
    w = StoreFileWriter(fs, "c.sf", family=FAMILY)
    w.append_batch(batch)
    w.finish()
    with StoreFileReader(fs, "c.sf") as r:
        assert batch_cells(r.scan_batches()) == [Cell(b"a", FAMILY, b"q", 3, 4, b"1"), Cell(b"b", FAMILY, b"q", 4, 4, b"2")]


def test_finish_and_abandon_lifecycle(fs):
    w = StoreFileWriter(fs, "l.sf", family=FAMILY)
    w.append(Cell(b"a", FAMILY, b"q", 1, 4, b""))
    w.finish()
    w.abandon()  # after finish: does nothing
    assert fs.exists("l.sf")
    for call in (lambda: w.append(Cell(b"b", FAMILY, b"q", 1, 4, b"")), w.finish):
        with pytest.raises(InvalidArgument, match="already finished"):
            call()
    w2 = StoreFileWriter(fs, "m.sf", family=FAMILY)
    w2.append(Cell(b"a", FAMILY, b"q", 1, 4, b""))
    w2.abandon()
    w2.abandon()
    assert not fs.exists("m.sf")
    with pytest.raises(InvalidArgument, match="already abandoned"):
        w2.append(Cell(b"b", FAMILY, b"q", 1, 4, b""))
    with pytest.raises(RuntimeError):
        with StoreFileWriter(fs, "n.sf", family=FAMILY) as w3:
            w3.append(Cell(b"a", FAMILY, b"q", 1, 4, b""))
            raise RuntimeError("boom")
    assert not fs.exists("n.sf")
    with pytest.raises(InvalidArgument, match="without finish"):
        with StoreFileWriter(fs, "p.sf", family=FAMILY):
            pass
    assert not fs.exists("p.sf")


# -- the batch scan path -----------------------------------------------------


def test_scan_batches_ranges_forward_and_reverse(fs):
    cells = make_cells(seed=3, rows=120)
    write(fs, "s.sf", cells, block_size=700)
    rows = sorted({c.row for c in cells})
    rng = random.Random(5)
    bounds = rows + [b"", b"row-", b"row-9", b"zzz", b"row-000500\0"] + [r[:-1] for r in rows[:10]]
    with StoreFileReader(fs, "s.sf") as r:
        for _ in range(120):
            start = rng.choice(bounds + [None])
            stop = rng.choice(bounds + [None])
            want = [c for c in cells if (start is None or c.row >= start) and (stop is None or c.row < stop)]
            assert batch_cells(r.scan_batches(start, stop)) == want, (start, stop)
            assert batch_cells(r.scan_batches(start, stop, reverse=True)) == rows_reversed(want), (start, stop)
        with pytest.raises(InvalidArgument):
            list(r.scan_batches("a"))


def test_scan_stops_early_and_reads_only_needed_blocks(fs):
    cells = make_cells(seed=4, rows=200)
    write(fs, "s.sf", cells, block_size=600)
    with StoreFileReader(fs, "s.sf") as r:
        i = r.block_count // 2
        start = r.block_first_keys[i][0]
        stop = r.block_first_keys[i + 2][0]
        out = batch_cells(r.scan_batches(start, stop))
        assert out == [c for c in cells if start <= c.row < stop]
        assert r.counters.blocks_read <= 3


def test_forward_scan_reads_each_block_once_without_extra_header_reads(fs):
    write(fs, "s.sf", make_cells(seed=6, rows=300), block_size=800)
    with StoreFileReader(fs, "s.sf") as r:
        open_bytes = r.counters.bytes_read
        list(r.scan_batches())
        snap = r.counters.snapshot()
        assert snap["blocks_read"] == r.block_count
        assert snap["extra_header_reads"] == 0
        # Every byte of the data blocks is read exactly once: each header
        # arrives with the previous block's read.
        assert snap["bytes_read"] - open_bytes == r.info.data_size


def _handoff_scan(reader: StoreFileReader) -> list:
    """Advance one scan generator from a new thread for every block."""
    gen = reader.scan_batches()
    out: list = []
    while True:
        box: list = []
        t = threading.Thread(target=lambda: box.append(next(gen, None)))
        t.start()
        t.join()
        if box[0] is None:
            return out
        out.append(box[0])


@pytest.mark.parametrize("prefetch", ["shared", "thread_local"])
def test_prefetched_header_survives_thread_handoff_in_scan_batches(fs, prefetch):
    cells = make_cells(seed=8, rows=200)
    write(fs, "h.sf", cells, block_size=700)
    with StoreFileReader(fs, "h.sf", prefetch=prefetch) as r:
        got = batch_cells(_handoff_scan(r))
        assert got == cells
        snap = r.counters.snapshot()
        assert snap["blocks_read"] == r.block_count > 10
        if prefetch == "shared":
            assert snap["extra_header_reads"] == 0
        else:
            # Every block after the first is read by a thread that did not
            # prefetch its header.
            assert snap["extra_header_reads"] == r.block_count - 1


def test_invalid_prefetch_mode(fs):
    write(fs, "h.sf", make_cells(seed=1, rows=5))
    with pytest.raises(InvalidArgument, match="prefetch"):
        StoreFileReader(fs, "h.sf", prefetch="global")


def test_concurrent_readers_share_one_reader_and_cache(fs):
    cells = make_cells(seed=9, rows=300)
    write(fs, "t.sf", cells, block_size=900, compression="lz4")
    cache = BlockCache(1 << 20)
    with StoreFileReader(fs, "t.sf", cache=cache) as r:
        def work(k: int) -> bool:
            rng = random.Random(k)
            for _ in range(20):
                i = rng.randrange(r.block_count)
                b = r.read_block(i)
                if b.slice(0, 1).to_pylist()[0]["row"] != r.block_first_keys[i][0]:
                    return False
            return batch_cells(r.scan_batches(reverse=bool(k % 2))) == (rows_reversed(cells) if k % 2 else cells)

        with ThreadPoolExecutor(max_workers=8) as pool:
            assert all(pool.map(work, range(16)))
        assert r.counters.cache_hits > 0


def test_batches_stay_valid_after_close(fs):
    cells = make_cells(seed=10, rows=50)
    write(fs, "v.sf", cells, block_size=500)
    r = StoreFileReader(fs, "v.sf")
    batches = list(r.scan_batches())
    r.close()
    r.close()
    assert batch_cells(batches) == cells
    with pytest.raises(StorageError, match="closed"):
        r.read_block(0)


def test_a_closed_reader_is_freed_without_the_cycle_collector(fs):
    """The reader's range scans are an object it holds; closing the reader cuts the
    references back to it, so a retired reader (its index and bloom filter) goes
    when its last reference does, even with the cycle collector off.  Its scans
    are refused as closed."""
    import gc
    import weakref

    cells = make_cells(seed=11, rows=50)
    write(fs, "w.sf", cells, block_size=500)
    r = StoreFileReader(fs, "w.sf")
    assert r.count_rows() == r.info.row_count and batch_cells(r.scan_batches()) == cells
    r.close()
    for scan in (lambda: list(r.scan_batches()), lambda: list(r.scan_parts(keys_only=True)),
                 lambda: list(r.scan_batches(reverse=True))):
        with pytest.raises(StorageError, match="reader of .*w.sf is closed"):
            scan()
    gone = weakref.ref(r)
    gc.disable()
    try:
        del r
        assert gone() is None
    finally:
        gc.enable()


# -- bloom filter ------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=30))
def test_vectorized_row_hash_matches_scalar(keys):
    h1, h2 = row_hash_pairs(pa.array(keys, pa.binary()))
    assert [(int(a), int(b)) for a, b in zip(h1, h2)] == [row_hash_pair(k) for k in keys]
    if len(keys) > 2:  # sliced arrays hash their own window
        s1, _ = row_hash_pairs(pa.array(keys, pa.binary()).slice(1, len(keys) - 2))
        assert [int(a) for a in s1] == [row_hash_pair(k)[0] for k in keys[1:-1]]


def test_bloom_filter_has_no_false_negatives_and_few_false_positives(fs):
    cells = [Cell(b"user%07d" % (i * 7), FAMILY, b"q", 1, 4, b"") for i in range(5000)]
    write(fs, "bl.sf", cells, block_size=4096)
    with StoreFileReader(fs, "bl.sf") as r:
        assert all(r.might_contain_row(c.row) for c in cells)
        absent = [b"user%07d" % (i * 7 + 3) for i in range(5000)]
        fp = sum(r.might_contain_row(row) for row in absent) / len(absent)
        assert fp < 0.03
        assert not r.might_contain_row(b"aaa") and not r.might_contain_row(b"zzz")  # outside the key range
        filt = r._bloom
        many = filt.might_contain_many(pa.array(absent, pa.binary()))
        assert many.tolist() == [filt.might_contain(x) for x in absent]


def test_without_bloom_only_the_key_range_decides(fs):
    cells = [Cell(b"k%03d" % (i * 2), FAMILY, b"q", 1, 4, b"") for i in range(100)]
    write(fs, "nb.sf", cells, bloom=False)
    with StoreFileReader(fs, "nb.sf") as r:
        assert not r.has_bloom and r.info.bloom_policy is None
        assert r.might_contain_row(b"k001")  # in range: cannot rule it out
        assert not r.might_contain_row(b"a") and not r.might_contain_row(b"z")


def _rewrite_section(data: bytearray, offset: int, length: int, magic: bytes, new_body: bytes) -> None:
    section = SectionHeader.frame(magic, new_body)
    assert len(section) == length
    data[offset : offset + length] = section


def test_unknown_bloom_policy_is_ignored_not_trusted(fs, tmp_path):
    cells = [Cell(b"k%03d" % i, FAMILY, b"q", 1, 4, b"") for i in range(100)]
    write(fs, "u.sf", cells)
    data = bytearray((tmp_path / "u.sf").read_bytes())
    tr = Trailer.decode(bytes(data[-TRAILER_SIZE:]), "u.sf", len(data))
    body = bytes(data[tr.bloom_offset + 28 : tr.bloom_offset + tr.bloom_length])
    name = RowBloomFilter.POLICY.encode()
    assert body[1 : 1 + len(name)] == name
    renamed = body[:1] + name[:-1] + b"9" + body[1 + len(name) :]
    # Clear every bit: a reader that trusted this filter would say "absent".
    renamed = renamed[: len(renamed) - tr.bloom_length + 28 + 1 + len(name) + 20] + bytes(tr.bloom_length - 28 - 1 - len(name) - 20)
    _rewrite_section(data, tr.bloom_offset, tr.bloom_length, BLOOM_MAGIC, renamed)
    (tmp_path / "u.sf").write_bytes(bytes(data))
    with StoreFileReader(fs, "u.sf") as r:
        assert not r.has_bloom
        assert all(r.might_contain_row(c.row) for c in cells)
        assert r.scanner().seek((b"k050",), exact_row=True) == cells[50]


# -- corruption --------------------------------------------------------------


def _read_everything(fs: FileSystem, path: str) -> None:
    with StoreFileReader(fs, path) as r:
        list(r.scan_batches())
        list(r.scan_batches(reverse=True))
        for i in range(r.block_count):
            r.read_block(i)
        s = r.scanner()
        c = s.seek(())
        while c is not None:
            s.next()
            c = s.peek()
        r.check()


def _small_file(fs: FileSystem, path: str, compression=None, version: int = FORMAT_VERSION) -> tuple[bytes, Trailer]:
    cells = make_cells(seed=11, rows=12, value_size=20)
    write(fs, path, cells, block_size=300, compression=compression, format_version=version)
    data = fs.read_bytes(path)
    return data, Trailer.decode(data[-TRAILER_SIZE:], path, len(data))


def _regions(data: bytes, tr: Trailer) -> dict[str, tuple[int, int]]:
    if tr.format_version >= 3:
        head = BlockHeaderV3.decode(data[:BLOCK_V3_HEADER_SIZE], "f", 0)
        blocks = {
            "block header": (0, BLOCK_V3_HEADER_SIZE),
            "key chunk": (BLOCK_V3_HEADER_SIZE, head.key_end),
            "value chunks": (head.key_end, head.length),
        }
    elif tr.format_version == 2:
        head = BlockHeaderV2.decode(data[:BLOCK_V2_HEADER_SIZE], "f", 0)
        blocks = {
            "block header": (0, BLOCK_V2_HEADER_SIZE),
            "key section": (BLOCK_V2_HEADER_SIZE, head.key_end),
            "value section": (head.key_end, head.length),
        }
    else:
        first_body = struct.unpack_from("<I", data, 8)[0]
        blocks = {
            "block header": (0, BLOCK_HEADER_SIZE),
            "block body": (BLOCK_HEADER_SIZE, BLOCK_HEADER_SIZE + first_body),
        }
    return {
        **blocks,
        "last block": (tr.index_offset - 60, tr.index_offset),
        "index": (tr.index_offset, tr.index_offset + tr.index_length),
        "bloom": (tr.bloom_offset, tr.bloom_offset + tr.bloom_length),
        "info": (tr.info_offset, tr.info_offset + tr.info_length),
        "trailer": (len(data) - TRAILER_SIZE, len(data)),
    }


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_flipped_byte_in_every_region_is_detected(fs, tmp_path, compression, version):
    data, tr = _small_file(fs, "good.sf", compression, version)
    _read_everything(fs, "good.sf")
    rng = random.Random(12)
    for region, (lo, hi) in _regions(data, tr).items():
        positions = {lo, hi - 1, *(rng.randrange(lo, hi) for _ in range(6))}
        for pos in positions:
            bad = bytearray(data)
            bad[pos] ^= 1 << rng.randrange(8)
            (tmp_path / "bad.sf").write_bytes(bytes(bad))
            with pytest.raises(CorruptionError) as err:
                _read_everything(fs, "bad.sf")
            assert "bad.sf" in str(err.value) and err.value.offset is not None, region


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_byte_is_covered_by_a_check(fs, tmp_path, version):
    cells = [Cell(b"r%d" % i, FAMILY, b"q", i, 4, b"v%d" % i) for i in range(4)]
    write(fs, "good.sf", cells, block_size=60, format_version=version)
    data = fs.read_bytes("good.sf")
    with StoreFileReader(fs, "good.sf") as r:
        assert r.block_count >= 2 and r.has_bloom
    for pos in range(0, len(data), 4):
        bad = bytearray(data)
        bad[pos] ^= 0xFF
        (tmp_path / "bad.sf").write_bytes(bytes(bad))
        with pytest.raises(CorruptionError):
            _read_everything(fs, "bad.sf")


@pytest.mark.parametrize("version", [1, 2, 3])
def test_truncated_files_are_detected(fs, tmp_path, version):
    data, tr = _small_file(fs, "good.sf", version=version)
    cuts = {0, 1, 39, 40, 41, tr.index_offset, tr.index_offset + 5, tr.info_offset, len(data) - TRAILER_SIZE, len(data) - 1}
    cuts |= set(range(0, len(data), max(1, len(data) // 25)))
    for cut in sorted(cuts):
        (tmp_path / "cut.sf").write_bytes(data[:cut])
        with pytest.raises(CorruptionError, match="cut.sf"):
            _read_everything(fs, "cut.sf")
    # Garbage appended after a good file is corruption too: the trailer is not at the end.
    (tmp_path / "long.sf").write_bytes(data + b"\0" * 10)
    with pytest.raises(CorruptionError):
        _read_everything(fs, "long.sf")


def test_unsupported_format_version_is_refused(fs, tmp_path):
    data, _ = _small_file(fs, "good.sf")
    trailer = bytearray(data[-TRAILER_SIZE:])
    struct.pack_into("<I", trailer, 64, 99)
    struct.pack_into("<I", trailer, 68, checksum(bytes(trailer[:68])))
    (tmp_path / "v99.sf").write_bytes(data[:-TRAILER_SIZE] + bytes(trailer))
    with pytest.raises(CorruptionError, match=r"format version 99 is not supported .*v99\.sf"):
        StoreFileReader(fs, "v99.sf")


@pytest.mark.parametrize("version", [1, 2, 3])
def test_block_header_disagreeing_with_index_is_detected(fs, tmp_path, version):
    """A block header rewritten with a valid checksum but a wrong cell count."""
    data, _ = _small_file(fs, "good.sf", version=version)
    bad = bytearray(data)
    at, size = {1: (24, BLOCK_HEADER_SIZE), 2: (12, BLOCK_V2_HEADER_SIZE), 3: (12, BLOCK_V3_HEADER_SIZE)}[version]
    struct.pack_into("<I", bad, at, struct.unpack_from("<I", bad, at)[0] + 1)
    struct.pack_into("<I", bad, size - 4, checksum(bytes(bad[: size - 4])))
    (tmp_path / "hdr.sf").write_bytes(bytes(bad))
    with pytest.raises(CorruptionError, match="offset 0"):
        _read_everything(fs, "hdr.sf")


def test_check_passes_on_good_files(fs):
    for i, comp in enumerate([None, "lz4"]):
        write(fs, f"g{i}.sf", make_cells(seed=20 + i, rows=80), block_size=512, compression=comp)
        with StoreFileReader(fs, f"g{i}.sf") as r:
            r.check()
            assert r.counters.blocks_read == r.block_count


def _with_info(data: bytes, **changes) -> bytes:
    """The file with its info section rewritten (valid checksums, new trailer)."""
    tr = Trailer.decode(data[-TRAILER_SIZE:], "f", len(data))
    body = data[tr.info_offset + 28 : tr.info_offset + tr.info_length]
    info = FileInfo.from_json(body, len(data), "f", 0)
    section = SectionHeader.frame(b"RSFINFO*", replace(info, **changes).to_json())
    trailer = replace(tr, info_length=len(section)).encode()
    return data[: tr.info_offset] + section + trailer


def test_check_finds_info_that_disagrees_with_the_blocks(fs, tmp_path):
    data, _ = _small_file(fs, "good.sf", version=1)  # version 2 checks row_count at open
    (tmp_path / "same.sf").write_bytes(_with_info(data))
    StoreFileReader(fs, "same.sf").check()  # the rewrite itself is faithful
    for field, value in (("row_count", 999), ("max_timestamp", 10**9), ("first_cell", Cell(b"a", FAMILY, b"q", 1, 4, b""))):
        (tmp_path / "info.sf").write_bytes(_with_info(data, **{field: value}))
        with StoreFileReader(fs, "info.sf") as r:  # opens: these fields are not cross-checked at open
            with pytest.raises(CorruptionError, match=field):
                r.check()
    (tmp_path / "count.sf").write_bytes(_with_info(data, cell_count=1))
    with pytest.raises(CorruptionError, match="cell counts"):
        StoreFileReader(fs, "count.sf")


def test_check_finds_unsorted_cells_behind_valid_checksums(fs, tmp_path, monkeypatch):
    import storage.storefile.writer as writer_module

    cells = [Cell(b"r%03d" % i, FAMILY, b"q", 1, 4, b"v") for i in range(40)]
    cells[12], cells[13] = cells[13], cells[12]
    # A writer whose order check is switched off produces a file whose every
    # checksum is valid but whose cells are out of order: only check() sees it.
    monkeypatch.setattr(writer_module, "first_unsorted", lambda batch: None)
    w = StoreFileWriter(fs, "unsorted.sf", family=FAMILY, block_size=200)
    w.append_batch(cells_to_batch(cells))
    w.finish()
    monkeypatch.undo()
    with StoreFileReader(fs, "unsorted.sf") as r:
        with pytest.raises(CorruptionError, match="out of order"):
            r.check()



def test_version_2_index_row_counts_are_checked_at_open(fs, tmp_path):
    data, _ = _small_file(fs, "good.sf", version=2)
    with StoreFileReader(fs, "good.sf") as r:
        rows = r.info.row_count
        assert r.count_rows() == rows
    (tmp_path / "rows.sf").write_bytes(_with_info(data, row_count=rows + 1))
    with pytest.raises(CorruptionError, match="row counts disagree with the file info"):
        StoreFileReader(fs, "rows.sf")


def _row_batch(first: int, n: int, quals: list[bytes]) -> tuple:
    rows = pa.array([b"r%06d" % i for i in range(first, first + n)])
    vals = [pa.array([b"v%06d-%s" % (i, q) for i in range(first, first + n)]) for q in quals]
    return rows, quals, vals, [pa.array([i + 1 for i in range(first, first + n)], pa.int64())] * len(quals)


def test_append_rows_in_small_calls_fill_row_groups_not_one_group_per_call(fs):
    """A bulk load appends a few thousand rows a call: the rows wait until they fill a group, so
    the file has about size / row_group_size groups, not one a call; a call with other
    qualifiers, a cell appended after them and finish() write the waiting rows, in order."""
    w = StoreFileWriter(fs, "small-calls.sf", family=FAMILY, row_group_size=64 << 10)
    expected = []
    for first in range(0, 4000, 100):  # 40 calls of 100 rows of two qualifiers
        batch = _row_batch(first, 100, [b"a", b"b"])
        w.append_rows(*batch)
        expected += [Cell(r, FAMILY, q, first + k + 1, 4, v[k].as_py())
                     for k, r in enumerate(batch[0].to_pylist()) for q, v in zip(batch[1], batch[2])]
    other = _row_batch(4000, 10, [b"c"])  # other qualifiers: the waiting rows end a group first
    w.append_rows(*other)
    expected += [Cell(r, FAMILY, b"c", 4001 + k, 4, other[2][0][k].as_py()) for k, r in enumerate(other[0].to_pylist())]
    with pytest.raises(InvalidArgument, match="does not sort after"):
        w.append_rows(*_row_batch(4009, 1, [b"c"]))  # order is checked against the waiting rows
    w.append((b"r009999", FAMILY, b"z", 7, 4, b"cell"))  # a cell after waiting rows
    expected.append(Cell(b"r009999", FAMILY, b"z", 7, 4, b"cell"))
    info = w.finish()
    assert (info.row_count, info.cell_count) == (4011, len(expected))
    with StoreFileReader(fs, "small-calls.sf") as r:
        r.check()
        assert batch_cells(r.scan_batches()) == expected
        # about 4000 rows of ~50 bytes a cell pair in 64 KiB groups (the old writer cut 40 + 2)
        assert 3 <= r.block_count <= 8


def test_append_rows_contract(fs):
    rows = pa.array([b"r1", b"r2"])
    vals, stamps = [pa.array([b"a", None])], [pa.array([1, None], pa.int64())]
    w = StoreFileWriter(fs, "rows.sf", family=FAMILY)
    with pytest.raises(InvalidArgument, match="has no value"):
        w.append_rows(rows, [b"q"], vals, stamps)
    with pytest.raises(InvalidArgument, match="strictly ascending"):
        w.append_rows(pa.array([b"r2", b"r1"]), [b"q"], [pa.array([b"a", b"b"])], [pa.array([1, 1], pa.int64())])
    with pytest.raises(InvalidArgument, match="different rows"):
        w.append_rows(rows, [b"q"], [pa.array([b"a", b"b"])], [pa.array([1, None], pa.int64())])
    with pytest.raises(InvalidArgument, match="qualifiers"):
        w.append_rows(rows, [b"q", b"a"], [pa.array([b"a", b"b"])] * 2, [pa.array([1, 1], pa.int64())] * 2)
    w.append_rows(rows, [b"q"], [pa.array([b"a", b"b"])], [pa.array([1, 2], pa.int64())])
    with pytest.raises(InvalidArgument, match="does not sort after"):
        w.append_rows(rows, [b"q"], [pa.array([b"a", b"b"])], [pa.array([1, 2], pa.int64())])
    info = w.finish()
    assert (info.row_count, info.cell_count, info.min_timestamp, info.max_timestamp) == (2, 2, 1, 2)
    with StoreFileReader(fs, "rows.sf") as r:
        r.check()
        assert batch_cells(r.scan_batches()) == [Cell(b"r1", FAMILY, b"q", 1, 4, b"a"), Cell(b"r2", FAMILY, b"q", 2, 4, b"b")]
