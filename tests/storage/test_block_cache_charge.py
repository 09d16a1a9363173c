"""The block cache charges everything a cached block holds, so its bound holds.

A point read keeps a small search form on the cached block (views of its
key and value buffers, see storage/storefile/point.py); it is charged with
the block.  It replaced a Python list of the block's row keys and the
block's cells built from its dense columns, which together held about three
times the block (363 MiB against 115 MiB for the 1M-row benchmark table).
"""

from __future__ import annotations

from storage.cells import Cell, cells_to_batch
from storage.vfs.fs import FileSystem
from storage.storefile import BlockCache, StoreFileReader, StoreFileWriter


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
