"""The block cache charges everything a cached block holds, so its bound holds.

A point read turns a block's row keys into a Python list once and keeps it on
the cached block; that list used to go uncounted (+55% over the bound after
one read per block).
"""

from __future__ import annotations

import sys

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


def _list_bytes(items: list) -> int:
    return sys.getsizeof(items) + sum(sys.getsizeof(x) for x in items)


def test_each_block_is_charged_its_arrow_bytes_and_its_row_key_list(tmp_path):
    fs, keys = _file(tmp_path)
    cache = BlockCache(1 << 30)
    reader = StoreFileReader(fs, "a.sf", cache=cache)
    for i in range(reader.block_count):
        reader.read_block(i)
    # what each block holds: its Arrow arrays (a dense block's columns and, once built, its cells)
    arrow = sum(reader._block(i).nbytes for i in range(reader.block_count))
    assert cache.used_bytes == arrow  # scans attach no list
    for i in range(reader.block_count):
        first = reader.read_block(i).column(0)[0].as_py()
        assert reader.row_cells(first)[0][0] == first
    lists = 0
    for i in range(reader.block_count):
        rows = reader.read_block(i).column(0).to_pylist()
        lists += _list_bytes(rows)
    assert cache.used_bytes == arrow + lists
    assert lists > arrow * 0.3  # the part that used to be missing is not small
    reader.close()


def test_point_reads_keep_the_cache_within_its_bound(tmp_path):
    fs, keys = _file(tmp_path)
    probe = StoreFileReader(fs, "a.sf")
    arrow = sum(probe._block(i).nbytes for i in range(probe.block_count))
    probe.close()
    capacity = arrow  # holds every block as Arrow bytes, not with the lists on top
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
