"""The block cache: byte bound, LRU order, counters, threads, and its use by readers."""

from __future__ import annotations

import random
import threading

import pytest

from storage.cells import Cell, cells_to_batch
from storage.errors import InvalidArgument
from storage.vfs.fs import FileSystem
from storage.storefile import BlockCache, StoreFileReader, StoreFileWriter

FAMILY = b"cf"


def test_lru_order_and_byte_bound():
    cache = BlockCache(100)
    for k in "abcd":
        assert cache.put(k, k.upper(), 25)
    assert cache.used_bytes == 100 and len(cache) == 4
    assert cache.get("a") == "A"  # a is now the most recently used
    cache.put("e", "E", 30)  # evicts b and c (the two least recently used)
    assert cache.used_bytes <= 100
    assert [k for k in "abcde" if k in cache] == ["a", "d", "e"]
    assert cache.evictions == 2
    assert cache.get("b") is None
    assert (cache.hits, cache.misses) == (1, 1)


def test_replacing_an_entry_recharges_it():
    cache = BlockCache(100)
    cache.put("a", 1, 60)
    cache.put("a", 2, 10)
    assert cache.used_bytes == 10 and cache.get("a") == 2
    cache.put("b", 3, 90)
    assert cache.used_bytes == 100 and len(cache) == 2 and cache.evictions == 0


def test_entry_larger_than_capacity_is_not_stored():
    cache = BlockCache(50)
    cache.put("small", 1, 10)
    assert not cache.put("huge", 2, 51)
    assert "huge" not in cache and cache.get("small") == 1 and cache.used_bytes == 10
    zero = BlockCache(0)
    assert not zero.put("x", 1, 1) and len(zero) == 0


def test_evict_file_and_clear():
    cache = BlockCache(1000)
    for off in range(5):
        cache.put(("f1", off), off, 10)
        cache.put(("f2", off), off, 10)
    assert cache.evict_file("f1") == 5
    assert len(cache) == 5 and cache.used_bytes == 50
    assert all(("f2", off) in cache for off in range(5))
    cache.clear()
    assert len(cache) == 0 and cache.used_bytes == 0
    stats = cache.stats()
    assert stats["entries"] == 0 and stats["capacity_bytes"] == 1000


def test_invalid_arguments():
    for bad in (-1, 1.5, "10", True):
        with pytest.raises(InvalidArgument):
            BlockCache(bad)
    with pytest.raises(InvalidArgument):
        BlockCache(10).put("k", 1, -1)


def test_many_threads_keep_the_accounting_exact():
    cache = BlockCache(5000)
    errors = []
    gets = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        done = 0
        try:
            for _ in range(2000):
                key = rng.randrange(300)
                if rng.random() < 0.5:
                    cache.put(key, key, rng.randrange(1, 100))
                else:
                    done += 1
                    v = cache.get(key)
                    if v is not None and v != key:
                        errors.append((key, v))
        except Exception as exc:  # surfaced below
            errors.append(exc)
        gets.append(done)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    charged = sum(charge for _, charge in cache._entries.values())
    assert cache.used_bytes == charged <= 5000
    assert cache.hits + cache.misses == sum(gets)
    assert cache.hits > 0 and cache.misses > 0 and cache.evictions > 0


def _write(fs: FileSystem, path: str, rows: int, seed: int) -> list[Cell]:
    rng = random.Random(seed)
    cells = [Cell(b"r%05d" % i, FAMILY, b"q", 1, 4, rng.randbytes(40)) for i in range(rows)]
    w = StoreFileWriter(fs, path, family=FAMILY, block_size=1024)
    w.append_batch(cells_to_batch(cells))
    w.finish()
    return cells


def test_readers_share_one_cache(tmp_path):
    fs = FileSystem(str(tmp_path))
    _write(fs, "a.sf", 300, 1)
    _write(fs, "b.sf", 300, 2)
    cache = BlockCache(10 << 20)
    ra = StoreFileReader(fs, "a.sf", cache=cache)
    rb = StoreFileReader(fs, "b.sf", cache=cache)
    assert ra.file_id != rb.file_id
    first_a = [b.to_pylist() for b in ra.scan_batches()]
    list(rb.scan_batches())
    assert len(cache) == ra.block_count + rb.block_count
    # each block is charged its decoded size (a dense block: its columns)
    assert cache.used_bytes == sum(ra._block(i).nbytes for i in range(ra.block_count)) + sum(
        rb._block(i).nbytes for i in range(rb.block_count)
    )
    # A second reader of the same file finds its blocks in the cache: no block reads.
    ra2 = StoreFileReader(fs, "a.sf", cache=cache)
    assert ra2.file_id == ra.file_id
    assert [b.to_pylist() for b in ra2.scan_batches()] == first_a
    assert ra2.counters.blocks_read == 0 and ra2.counters.cache_hits == ra2.block_count
    for r in (ra, rb, ra2):
        r.close()


def test_cache_bound_holds_under_scans_and_lru_keeps_hot_blocks(tmp_path):
    fs = FileSystem(str(tmp_path))
    _write(fs, "a.sf", 2000, 3)
    probe = StoreFileReader(fs, "a.sf")
    block_bytes = probe._block(0).nbytes  # what the cache charges per block
    probe.close()
    cache = BlockCache(4 * block_bytes + block_bytes // 2)
    with StoreFileReader(fs, "a.sf", cache=cache) as r:
        assert r.block_count > 20
        list(r.scan_batches())
        assert cache.used_bytes <= cache.capacity_bytes and cache.evictions > 0
        assert len(cache) <= 5
        # Keep block 0 hot while other blocks stream through: it stays cached.
        r.read_block(0)
        for i in range(1, r.block_count):
            r.read_block(i)
            r.read_block(0)
        before = r.counters.blocks_read
        r.read_block(0)
        assert r.counters.blocks_read == before


def test_cache_blocks_false_reads_through_without_filling(tmp_path):
    fs = FileSystem(str(tmp_path))
    cells = _write(fs, "a.sf", 300, 4)
    cache = BlockCache(10 << 20)
    with StoreFileReader(fs, "a.sf", cache=cache) as r:
        list(r.scan_batches(cache_blocks=False))
        assert len(cache) == 0
        s = r.scanner(cache_blocks=False)
        s.seek(())
        n = 0
        while s.next() is not None:
            n += 1
        assert n == len(cells) and len(cache) == 0
        r.read_block(3)  # cached
        assert len(cache) == 1
        hits = r.counters.cache_hits
        list(r.scan_batches(cache_blocks=False))  # still served from the cache where present
        assert r.counters.cache_hits == hits + 1
        # scan + cell scan + one block + the last scan minus the cached block
        assert r.counters.blocks_read == 2 * r.block_count + 1 + (r.block_count - 1)


# -- a file written again at the same path is another file to the cache ---------------


def _same_shape_table(conn, value: bytes):
    """A table whose files have the layout of every other call's: same rows, same value
    lengths, explicit timestamps (a bulk load of the same source would look alike)."""
    table = conn.create_table("t", {"cf": {}})
    with table.batch(timestamp=1000) as batch:
        for i in range(300):
            batch.put(b"r%04d" % i, {b"cf:a": value * 20})
    table.flush()
    return table


def test_a_table_dropped_and_created_again_is_never_read_from_the_old_blocks(tmp_path):
    """Before the file's stat joined its cache identity, the recreated table's scans and gets
    returned the dropped table's values: its files have the same paths, sizes and trailers."""
    import storage

    with storage.connect(str(tmp_path / "data")) as conn:
        old = _same_shape_table(conn, b"A")
        assert old.row(b"r0005") == {b"cf:a": b"A" * 20}
        assert sum(b.num_rows for b in old.scan_batches(columns=[b"cf:a"])) == 300  # blocks now cached
        conn.delete_table("t")
        new = _same_shape_table(conn, b"B")
        assert new.row(b"r0005") == {b"cf:a": b"B" * 20}
        assert {v for _, d in new.scan() for v in d.values()} == {b"B" * 20}
        values = {v for b in new.scan_batches(columns=[b"cf:a"]) for v in b.column(1).to_pylist()}
        assert values == {b"B" * 20}


def test_a_file_replaced_at_its_path_gets_another_cache_identity(tmp_path):
    """Readers of one unchanged file share its cached blocks; a file written again at the same
    path (same bytes but for the values) gets an identity of its own."""
    fs = FileSystem(str(tmp_path))
    cells = [Cell(b"r%04d" % i, FAMILY, b"q", 1, 4, b"A" * 30) for i in range(200)]

    def write(value: bytes) -> None:
        writer = StoreFileWriter(fs, "f.sf", family=FAMILY, block_size=512)
        writer.append_batch(cells_to_batch([c._replace(value=value * 30) for c in cells]))
        writer.finish()

    write(b"A")
    first = StoreFileReader(fs, "f.sf")
    assert StoreFileReader(fs, "f.sf").file_id == first.file_id  # the same file: the same blocks
    size = fs.size("f.sf")
    fs.delete("f.sf")
    write(b"B")
    assert fs.size("f.sf") == size
    second = StoreFileReader(fs, "f.sf")
    assert second.file_id[:3] == first.file_id[:3]  # path, size and trailer alike
    assert second.file_id != first.file_id
