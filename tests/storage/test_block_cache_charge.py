"""The block cache charges everything a cached block holds, so its bound holds.

A point read keeps a small search form on the cached block (views of its
key and value buffers, see storage/storefile/point.py); it is charged with
the block.  It replaced a Python list of the block's row keys and the
block's cells built from its dense columns, which together held about three
times the block (363 MiB against 115 MiB for the 1M-row benchmark table).
"""

from __future__ import annotations

import pyarrow as pa

from storage.cells import Cell, cells_to_batch
from storage.vfs.fs import FileSystem
from storage.storefile import BlockCache, StoreFileReader, StoreFileWriter
from storage.storefile.dense import DenseBlock


def _file(tmp_path, rows: int = 3000) -> tuple[FileSystem, list[bytes]]:
    fs = FileSystem(str(tmp_path))
    keys = [b"row-%06d" % i for i in range(rows)]
    w = StoreFileWriter(fs, "a.sf", family=b"cf", block_size=1024)
    w.append_batch(cells_to_batch([Cell(k, b"cf", b"q", 1, 4, b"v" * 8) for k in keys]))
    w.finish()
    return fs, keys


def test_each_block_is_charged_its_arrow_bytes_and_its_point_form(tmp_path):
    fs, keys = _file(tmp_path)
    cache = BlockCache(1 << 30)
    reader = StoreFileReader(fs, "a.sf", cache=cache)
    for i in range(reader.block_count):
        reader.read_block(i)
    # what each block holds: its Arrow arrays (a dense block's columns; its cells are not kept)
    arrow = sum(reader._block(i).nbytes for i in range(reader.block_count))
    assert cache.used_bytes == arrow  # scans attach nothing
    for i in range(reader.block_count):
        first = reader.read_block(i).column(0)[0].as_py()
        assert reader.row_cells(first)[0][0] == first
    points = sum(reader._block(i).point.nbytes for i in range(reader.block_count))
    assert cache.used_bytes == arrow + points
    # views of the block's buffers, not copies: a few hundred bytes a block, whatever its size
    # (about 300 more where the compiled point-read call keeps its argument tuples on the block)
    assert 0 < points < 1536 * reader.block_count
    reader.close()


def test_point_reads_keep_the_cache_within_its_bound(tmp_path):
    fs, keys = _file(tmp_path)
    probe = StoreFileReader(fs, "a.sf")
    arrow = sum(probe._block(i).nbytes for i in range(probe.block_count))
    probe.close()
    capacity = arrow  # holds every block as Arrow bytes, not with the point forms on top
    cache = BlockCache(capacity)
    reader = StoreFileReader(fs, "a.sf", cache=cache)
    for key in keys[::7]:
        assert reader.row_cells(key)[0][0] == key
        assert cache.used_bytes <= capacity
    assert cache.evictions > 0
    reader.close()


def test_recharge_ignores_a_replaced_or_evicted_entry():
    cache = BlockCache(100)
    cache.put("a", "old", 10)
    cache.recharge("a", "other", 50)  # not the value cached under "a"
    assert cache.used_bytes == 10
    cache.recharge("missing", "x", 50)
    assert cache.used_bytes == 10 and "missing" not in cache
    cache.put("b", "B", 60)
    cache.recharge("a", "old", 45)  # grows past the bound: the least recently used goes
    assert cache.used_bytes <= 100 and "a" in cache and "b" not in cache


def _wide_file(tmp_path) -> FileSystem:
    """A version 3 file of dense blocks: every row has four columns written at one timestamp,
    so each block holds its timestamps run-end encoded (one run a column)."""
    fs = FileSystem(str(tmp_path))
    w = StoreFileWriter(fs, "w.sf", family=b"cf", block_size=4096)
    cells = []
    for i in range(3000):
        key = b"r%05d" % i
        for q, v in ((b"a", b"%08d" % i), (b"b", b"b" * 9), (b"c", b"c"), (b"d", b"%d" % (i % 3))):
            cells.append(Cell(key, b"cf", q, 7, 4, v))
    w.append_batch(cells_to_batch(cells))
    w.finish()
    return fs


def _charged(cache: BlockCache) -> int:
    """What the cache's entries hold now: each block's footprint and point form."""
    return sum(v.nbytes + (v.point.nbytes if v.point is not None else 0) for v, _ in cache._entries.values())


def test_a_cached_dense_block_is_charged_its_plain_timestamps_once_it_builds_them(tmp_path):
    fs = _wide_file(tmp_path)
    cache = BlockCache(1 << 30)
    reader = StoreFileReader(fs, "w.sf", cache=cache)
    assert reader.format_version >= 3
    list(reader.scan_parts(columns=[b"a"]))
    assert len(cache) == reader.block_count
    blocks = [block.dense for block, _ in cache._entries.values() if block.dense is not None]
    assert len(blocks) > 8
    assert all(isinstance(t, pa.RunEndEncodedArray) for t in blocks[0].timestamps)
    assert all(b._plain_ts is None and b.on_grow is not None for b in blocks)  # a scan of rows builds none
    used = cache.used_bytes
    assert used == _charged(cache)
    # the same block held by no cache (no hook) is charged for its plain timestamps from the start
    dense = blocks[0]
    bare = DenseBlock(dense.rows, dense.qualifiers, dense.timestamps, list(dense.read_values))
    grown = 9 * dense.num_rows * len(dense.qualifiers)
    assert bare.footprint() > dense.footprint() + grown
    before = dense.footprint()
    plain = dense.plain_timestamps()
    assert [p.to_pylist() for p in plain] == [t.to_pylist() for t in dense.timestamps]
    assert dense.footprint() == bare.footprint()
    assert cache.used_bytes == _charged(cache) == used - before + dense.footprint()
    dense.plain_timestamps()  # built once: charged once
    assert cache.used_bytes == used - before + dense.footprint()
    # a block no longer cached is charged nothing when it grows
    cache.clear()
    blocks[1].plain_timestamps()
    assert cache.used_bytes == 0 and len(cache) == 0
    reader.close()


def _part_values(part) -> list:
    """A scanned piece's rows with their ``a`` and ``d`` values (or its cells)."""
    dense = part.dense
    if dense is None:
        return part.cells.to_pylist()
    return [dense.rows.to_pylist()] + [dense.value(dense.qualifiers.index(q)).to_pylist() for q in (b"a", b"d")]


def test_a_scan_whose_blocks_fit_the_cache_finds_them_there_again(tmp_path):
    """The blocks of a scan of some columns are charged what they hold, not the plain form of
    every column's timestamps: a cache just larger than that serves the scan again without a
    read (charged up front, SF 1 lineitem's blocks cost five times their arrays and a warm scan
    of four columns found none of them in a 1 GiB cache)."""
    fs = _wide_file(tmp_path)
    probe = BlockCache(1 << 30)
    reader = StoreFileReader(fs, "w.sf", cache=probe)
    list(reader.scan_parts(columns=[b"a", b"d"]))
    needed = probe.used_bytes
    blocks = len(probe)
    # what the same blocks cost charged for every column's plain timestamps up front
    upfront = needed + sum(DenseBlock(d.rows, d.qualifiers, d.timestamps, list(d.read_values)).footprint()
                           - d.footprint() for d in (b.dense for b, _ in probe._entries.values()) if d is not None)
    reader.close()
    cache = BlockCache(needed + needed // 20)
    assert cache.capacity_bytes < upfront  # a cache the old charge overflowed
    reader = StoreFileReader(fs, "w.sf", cache=cache)
    first = [_part_values(p) for p in reader.scan_parts(columns=[b"a", b"d"])]
    assert cache.evictions == 0 and len(cache) == blocks and cache.used_bytes == needed
    hits, reads = cache.hits, reader.counters.snapshot()["blocks_read"]
    again = [_part_values(p) for p in reader.scan_parts(columns=[b"a", b"d"])]
    assert again == first and len(first) == blocks
    assert cache.hits - hits == blocks and cache.evictions == 0
    assert reader.counters.snapshot()["blocks_read"] == reads > 0  # nothing read again
    reader.close()


def test_a_block_read_for_more_columns_replaces_its_smaller_entry(tmp_path):
    """A block's keys read alone (the value bounds of its chunks), then some of its columns, then
    all of them: one cache entry a block at every step.  The larger entry is built on the smaller
    one's keys, which a second entry charged again (about 131 MiB of SF 1 lineitem's row keys);
    each step's reads are served from it afterwards without reading the file."""
    fs = _wide_file(tmp_path)
    cache = BlockCache(1 << 30)
    reader = StoreFileReader(fs, "w.sf", cache=cache)
    blocks = reader.block_count
    bounds = reader.chunk_stats(b"a")  # each block's key chunk, for the qualifiers it names
    assert len(cache) > 8 and all(k[2:] == ("keys",) for k in cache._entries)
    keys = {k[:2]: cache.peek(k).dense.rows for k in cache._entries}
    some = [_part_values(p) for p in reader.scan_parts(columns=[b"a", b"d"])]
    assert len(cache) == blocks and not any(k[2:] == ("keys",) for k in cache._entries)
    for k in cache._entries:  # the keys read first, now held (and charged) by the columns' entry alone
        assert k[:2] not in keys or cache.peek(k).dense.rows is keys[k[:2]]
    assert cache.used_bytes == _charged(cache)
    reads = reader.counters.snapshot()["blocks_read"]
    assert reader.chunk_stats(b"a") == bounds
    assert [_part_values(p) for p in reader.scan_parts(columns=[b"a", b"d"])] == some
    assert reader.counters.snapshot()["blocks_read"] == reads
    whole = [p.batch().to_pylist() for p in reader.scan_parts()]
    assert len(cache) == blocks and all(len(k) == 2 for k in cache._entries)
    assert cache.used_bytes == _charged(cache)
    reads = reader.counters.snapshot()["blocks_read"]
    assert reader.chunk_stats(b"a") == bounds
    assert [p.batch().to_pylist() for p in reader.scan_parts()] == whole
    assert reader.counters.snapshot()["blocks_read"] == reads
    reader.close()


def test_discard_drops_an_entry_and_its_charge():
    cache = BlockCache(100)
    cache.put("a", "A", 10)
    cache.put_result("r", "R", 20)
    assert cache.discard("a") and "a" not in cache and cache.used_bytes == 20
    assert not cache.discard("a")  # gone already: nothing changes
    assert cache.discard("r") and cache.used_bytes == 0 and cache.result_bytes == 0
    assert cache.evictions == 0  # a discard is not an eviction
