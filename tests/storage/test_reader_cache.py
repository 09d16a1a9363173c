"""Open store-file readers kept between pinned reads (storage/region/reader_cache.py).

A kept reader is served only while ``os.stat`` says its file is the one it
was opened on (device, inode, size, mtime, ctime): a file replaced by a
rename, rewritten in place or deleted is opened afresh (or reported gone),
and a file written too recently for an in-place rewrite to change its mtime
is not kept at all.  Reference counts keep a reader open while any region
reads it, whatever evicts, discards or clears it meanwhile.

Real store files on disk (``tmp_path``) written by ``StoreFileWriter``, real
tables through ``storage.connect`` and the connector's pinned reads; no mock
of the filesystem.  The unit tests use their own :class:`ReaderCache`; the
end-to-end tests use the process-wide one that ``PinnedRegion`` checks
readers out of, and look at how its counters move.
"""

from __future__ import annotations

import gc
import os
import random
import sys
import threading
import time

import pytest

import storage
from storage import clock
from connector import TableInputFormat
from storage.engine import BulkLoadTask, commit_load, table_regions
from storage.cells import Cell, CellType, cells_to_batch
from storage.errors import CorruptionError, InvalidArgument, StorageError
from storage.region import file_stamps, reader_cache
from storage.region.reader_cache import ReaderCache
from storage.storefile import BlockCache, StoreFileReader, StoreFileWriter
from storage.vfs.faultfs import FaultFileSystem, FaultInjector
from storage.vfs.fs import FileSystem
from tests.file_settle import settle

FAMILY = b"cf"
ROWS = 400


def _write(fs: FileSystem, path: str, tag: bytes, rows: int = ROWS) -> None:
    """A store file of ``rows`` rows whose values start with ``tag``.  Tags of one
    length give files of the same size and block layout (the same trailer and
    block-cache identity): only the values differ."""
    cells = [Cell(b"r%05d" % i, FAMILY, b"q", 1, CellType.PUT, tag + b"-%05d" % i) for i in range(rows)]
    writer = StoreFileWriter(fs, path, family=FAMILY, block_size=1024)
    writer.append_batch(cells_to_batch(cells))
    writer.finish()


def _tag(reader: StoreFileReader, row: int = 7) -> bytes:
    """The tag of the file ``reader`` reads (a closed reader raises here)."""
    (cell,) = reader.row_cells(b"r%05d" % row)
    return cell.value.rsplit(b"-", 1)[0]


@pytest.fixture
def files(tmp_path):
    """A local root with three settled store files, a.sf b.sf c.sf (tags A, B, C)."""
    fs = FileSystem(str(tmp_path / "files"))
    fs.makedirs("")
    for name in "abc":
        _write(fs, f"{name}.sf", name.upper().encode())
    settle(*(fs.local_path(f"{name}.sf") for name in "abc"))
    return fs


# -- hits and validation ------------------------------------------------------------------
def test_an_unchanged_file_is_served_the_same_open_reader(files):
    cache = ReaderCache()
    first = cache.checkout(files, "a.sf")
    assert cache.stats() == {"hits": 0, "misses": 1, "stale": 0, "evictions": 0, "expired": 0, "entries": 1, "held": 1}
    cache.release(first)
    assert not first.closed  # idle but kept open for the next read
    second = cache.checkout(files, "a.sf")
    assert second is first and _tag(second) == b"A"
    assert (cache.hits, cache.misses) == (1, 1)
    cache.release(second)
    # another block cache is another key: a reader loads into the cache it was opened with
    block_cache = BlockCache(1 << 20)
    other = cache.checkout(files, "a.sf", block_cache)
    assert other is not first and other.block_cache is block_cache
    assert cache.misses == 2 and len(cache) == 2
    cache.release(other)
    assert cache.clear() == 2 and first.closed and other.closed


def test_a_file_replaced_by_a_rename_is_opened_again(files):
    cache = ReaderCache()
    old = cache.checkout(files, "a.sf")
    cache.release(old)
    path = files.local_path("a.sf")
    before = os.stat(path)
    # the same size and layout (only the values differ), and even the old mtime:
    # only the inode (and ctime) tell the files apart
    _write(files, "new.sf", b"Z")
    os.utime(files.local_path("new.sf"), ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(files.local_path("new.sf"), path)
    settle(path)
    after = os.stat(path)
    assert after.st_size == before.st_size and after.st_mtime_ns == before.st_mtime_ns
    assert after.st_ino != before.st_ino
    fresh = cache.checkout(files, "a.sf")
    assert fresh is not old and _tag(fresh) == b"Z"
    assert old.closed  # it was idle: closed as soon as it was found stale
    assert cache.stale == 1 and cache.misses == 2 and len(cache) == 1
    cache.release(fresh)
    assert cache.checkout(files, "a.sf") is fresh  # the new file's reader is kept in turn
    cache.release(fresh)


def test_a_file_rewritten_in_place_is_opened_again(files):
    """The same inode and the same size: only mtime and ctime change."""
    cache = ReaderCache()
    old = cache.checkout(files, "a.sf")
    cache.release(old)
    path = files.local_path("a.sf")
    inode, size = os.stat(path).st_ino, os.stat(path).st_size
    _write(files, "scratch.sf", b"Y")
    with open(files.local_path("scratch.sf"), "rb") as src, open(path, "r+b") as dst:
        dst.write(src.read())  # in place: the file keeps its inode
    settle(path)
    assert (os.stat(path).st_ino, os.stat(path).st_size) == (inode, size)
    fresh = cache.checkout(files, "a.sf")
    assert fresh is not old and _tag(fresh) == b"Y" and cache.stale == 1
    cache.release(fresh)
    # rewritten again, now to another size (fewer rows)
    _write(files, "scratch.sf", b"X", rows=ROWS // 2)
    with open(files.local_path("scratch.sf"), "rb") as src, open(path, "r+b") as dst:
        dst.write(src.read())
        dst.truncate()
    settle(path)
    assert os.stat(path).st_ino == inode and os.stat(path).st_size < size
    third = cache.checkout(files, "a.sf")
    assert third is not fresh and _tag(third) == b"X" and third.info.row_count == ROWS // 2
    assert cache.stale == 2
    cache.release(third)


def test_a_deleted_file_raises_and_its_entry_is_dropped(files):
    cache = ReaderCache()
    idle = cache.checkout(files, "a.sf")
    cache.release(idle)
    held = cache.checkout(files, "b.sf")
    os.remove(files.local_path("a.sf"))
    os.remove(files.local_path("b.sf"))
    with pytest.raises(FileNotFoundError):
        cache.checkout(files, "a.sf")
    assert idle.closed and not cache.cached(idle) and cache.stale == 1
    with pytest.raises(FileNotFoundError):
        cache.checkout(files, "b.sf")
    # still read by its holder: dropped from the map but open (its mapping keeps the data)
    assert not cache.cached(held) and not held.closed and _tag(held) == b"B"
    cache.release(held)
    assert held.closed and len(cache) == 0 and cache.stats()["held"] == 0
    with pytest.raises(FileNotFoundError):  # a path never seen raises the same
        cache.checkout(files, "never.sf")
    assert cache.stale == 2


# -- the racily-clean rule -----------------------------------------------------------------
def test_a_file_written_within_the_clock_granule_is_not_kept(files, monkeypatch):
    cache = ReaderCache()
    path = files.local_path("d.sf")
    # a granule of 10 s: the file just written is within it whatever the machine's load
    # (with the real 20 ms, a slow write-then-open could fall outside it and test nothing)
    monkeypatch.setattr(file_stamps, "RACY_NS", 10_000_000_000)
    monkeypatch.setattr(file_stamps, "COARSE_RACY_NS", 10_000_000_000)
    _write(files, "d.sf", b"D")
    st = os.stat(path)
    young = cache.checkout(files, "d.sf")
    assert not cache.cached(young) and len(cache) == 0
    assert cache.misses >= 1 and cache.hits == 0
    # rewritten in place within the granule, keeping the very same mtime (what a coarse
    # clock does): the racy reader was not kept, so the new bytes are read
    _write(files, "scratch.sf", b"E")
    with open(files.local_path("scratch.sf"), "rb") as src, open(path, "r+b") as dst:
        dst.write(src.read())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = cache.checkout(files, "d.sf")
    assert again is not young and _tag(again) == b"E"
    cache.release(young)
    assert young.closed  # a reader the cache does not hold is closed at release
    cache.release(again)
    monkeypatch.undo()  # the module's own window again
    settle(path)
    kept = cache.checkout(files, "d.sf")
    assert cache.cached(kept)  # old enough now
    cache.release(kept)
    assert cache.checkout(files, "d.sf") is kept
    cache.release(kept)


def test_a_whole_millisecond_mtime_widens_the_racy_window(files):
    """A filesystem that keeps coarse times (FAT: 2 s) stamps whole milliseconds:
    a file whose mtime falls on one is not kept for seconds after its last change."""
    cache = ReaderCache()
    path = files.local_path("a.sf")
    ms = os.stat(path).st_mtime_ns // 1_000_000 * 1_000_000
    os.utime(path, ns=(ms, ms))  # ctime: now
    time.sleep(0.05)  # past the fine window, well within the coarse one
    coarse = cache.checkout(files, "a.sf")
    assert not cache.cached(coarse)
    cache.release(coarse)
    assert coarse.closed
    os.utime(path, ns=(ms + 1, ms + 1))  # the same age, a sub-millisecond stamp
    time.sleep(0.05)
    fine = cache.checkout(files, "a.sf")
    assert cache.cached(fine)
    cache.release(fine)


# -- reference counts, eviction, discard, clear ----------------------------------------------
def test_a_reader_held_twice_stays_open_until_both_release(files):
    cache = ReaderCache()
    one = cache.checkout(files, "a.sf")
    two = cache.checkout(files, "a.sf")
    assert one is two and cache.holders(one) == 2
    cache.release(one)
    assert cache.holders(one) == 1 and not one.closed
    cache.release(two)
    assert cache.holders(one) == 0 and not one.closed and cache.cached(one)  # idle, kept
    assert cache.holders(StoreFileReader(files, "b.sf")) == 0  # a reader it never handed out


def test_a_reader_evicted_while_held_closes_at_its_last_release_never_before(files):
    cache = ReaderCache(capacity=1)
    a = cache.checkout(files, "a.sf")
    a_again = cache.checkout(files, "a.sf")
    b = cache.checkout(files, "b.sf")  # every entry is held: the least recently used goes
    assert cache.evictions == 1 and not cache.cached(a) and cache.cached(b)
    assert not a.closed and _tag(a) == b"A"
    cache.release(a)
    assert not a.closed and _tag(a_again) == b"A"
    # a checkout now opens another reader: the evicted one is never handed out again
    newer = cache.checkout(files, "a.sf")
    assert newer is not a
    cache.release(a_again)
    assert a.closed
    cache.release(newer)
    cache.release(b)
    assert cache.stats()["held"] == 0 and len(cache) == 1


def test_eviction_takes_the_least_recently_used_idle_reader_first(files):
    cache = ReaderCache(capacity=2)
    a = cache.checkout(files, "a.sf")
    cache.release(a)
    b = cache.checkout(files, "b.sf")
    cache.release(b)
    assert cache.checkout(files, "a.sf") is a  # a is now the most recently used
    cache.release(a)
    c = cache.checkout(files, "c.sf")
    assert cache.evictions == 1 and b.closed and not cache.cached(b)
    assert cache.cached(a) and cache.cached(c) and not a.closed
    cache.release(c)
    # a held reader is passed over for an idle one, even a more recent one
    held = cache.checkout(files, "a.sf")  # a: held, and the most recent
    c2 = cache.checkout(files, "c.sf")  # c: idle after this release, most recent
    cache.release(c2)
    b2 = cache.checkout(files, "b.sf")
    assert c.closed and cache.cached(held) and cache.cached(b2) and not held.closed
    cache.release(b2)
    cache.release(held)
    assert cache.evictions == 2


def test_the_capacity_setter_evicts_at_once_and_checks_its_value(files):
    cache = ReaderCache(capacity=3)
    readers = {}
    for name in "abc":
        readers[name] = cache.checkout(files, f"{name}.sf")
    for name in "ab":
        cache.release(readers[name])
    cache.capacity = 1  # two must go: the idle a and b, not the held c
    assert cache.capacity == 1 and len(cache) == 1 and cache.evictions == 2
    assert readers["a"].closed and readers["b"].closed and cache.cached(readers["c"])
    cache.capacity = 0  # the held one leaves the map but stays open while held
    assert len(cache) == 0 and not readers["c"].closed
    cache.release(readers["c"])
    assert readers["c"].closed
    again = cache.checkout(files, "a.sf")  # capacity 0 keeps nothing past its release
    cache.release(again)
    assert again.closed and len(cache) == 0
    for bad in (-1, 1.5, True, "2", None):
        with pytest.raises(InvalidArgument):
            cache.capacity = bad
        with pytest.raises(InvalidArgument):
            ReaderCache(bad)
    assert cache.capacity == 0


def test_discard_drops_the_reader_and_closes_it_once_no_one_holds_it(files):
    cache = ReaderCache()
    alone = cache.checkout(files, "a.sf")
    cache.release(alone, discard=True)
    assert alone.closed and len(cache) == 0
    shared = cache.checkout(files, "b.sf")
    other_holder = cache.checkout(files, "b.sf")
    cache.release(shared, discard=True)  # one read failed; another still reads the file
    assert not shared.closed and not cache.cached(shared) and _tag(other_holder) == b"B"
    replacement = cache.checkout(files, "b.sf")
    assert replacement is not shared  # a discarded reader is never handed out again
    cache.release(other_holder)
    assert shared.closed
    cache.release(replacement)
    assert cache.cached(replacement) and not replacement.closed


def test_a_reader_closed_by_its_holder_is_not_served_again(files):
    cache = ReaderCache()
    reader = cache.checkout(files, "a.sf")
    reader.close()
    cache.release(reader)
    assert not cache.cached(reader)
    fresh = cache.checkout(files, "a.sf")
    assert fresh is not reader and _tag(fresh) == b"A"
    cache.release(fresh)
    assert cache.cached(fresh)
    fresh.close()  # closed while idle in the map: found at the next checkout
    third = cache.checkout(files, "a.sf")
    assert third is not fresh and not third.closed and _tag(third) == b"A"
    assert cache.stale == 1 and not cache.cached(fresh)
    cache.release(third)


def test_clear_closes_idle_readers_now_and_held_ones_at_release(files):
    cache = ReaderCache()
    a = cache.checkout(files, "a.sf")
    b = cache.checkout(files, "b.sf")
    c = cache.checkout(files, "c.sf")
    cache.release(a)
    cache.release(b)
    assert cache.clear() == 2
    assert a.closed and b.closed and not c.closed and len(cache) == 0
    assert _tag(c) == b"C"
    c2 = cache.checkout(files, "c.sf")
    assert c2 is not c  # forgotten: a new reader
    cache.release(c)
    assert c.closed
    cache.release(c2)
    assert cache.clear() == 1 and c2.closed


def test_a_cache_of_capacity_0_opens_every_checkout_afresh_and_closes_at_release(files):
    """Capacity 0 is the reader cache switched off (a setting of the cache, no module switch):
    a cache set to it closes its idle readers, and every checkout then opens its own."""
    cache = ReaderCache()
    kept = cache.checkout(files, "a.sf")
    cache.release(kept)
    cache.capacity = 0
    assert kept.closed and len(cache) == 0
    one = cache.checkout(files, "a.sf")
    two = cache.checkout(files, "a.sf")
    assert one is not two and _tag(one) == _tag(two) == b"A"
    assert (cache.hits, cache.misses) == (0, 3) and len(cache) == 0  # every open a miss
    cache.release(one)
    cache.release(two)
    assert one.closed and two.closed
    cache.capacity = 4
    three = cache.checkout(files, "a.sf")
    cache.release(three)
    assert not three.closed and cache.checkout(files, "a.sf") is three  # cached again
    cache.release(three)
    off = ReaderCache(capacity=0)
    four = off.checkout(files, "a.sf")
    off.release(four)
    assert four.closed and off.stats()["misses"] == 1 and len(off) == 0


# -- what is never cached ------------------------------------------------------------------
def test_a_non_local_root_is_never_cached():
    fs = FileSystem("mock:///root")  # pyarrow's in-memory filesystem
    assert not fs.is_local
    fs.makedirs("")
    _write(fs, "a.sf", b"M")
    cache = ReaderCache()
    one = cache.checkout(fs, "a.sf")
    two = cache.checkout(fs, "a.sf")
    assert one is not two and _tag(one) == _tag(two) == b"M"
    assert len(cache) == 0 and cache.stats() == {"hits": 0, "misses": 0, "stale": 0, "evictions": 0, "expired": 0,
                                                  "entries": 0, "held": 0}
    cache.release(one)
    cache.release(two)
    assert one.closed and two.closed


def test_a_filesystem_subclass_is_never_cached_and_its_hooks_stay_in_force(files):
    """The fault-injecting filesystem's readers read through its hooks: a reader
    cached for the plain filesystem of the same directory must not stand in."""
    cache = ReaderCache()
    plain = cache.checkout(files, "a.sf")
    cache.release(plain)
    injector = FaultInjector()
    faulty = FaultFileSystem(files.root, injector)
    one = cache.checkout(faulty, "a.sf")
    two = cache.checkout(faulty, "a.sf")
    assert one is not plain and one is not two and len(cache) == 1
    opens = injector.counts["open"]
    assert opens >= 2  # each checkout opened the file through the injector
    injector.fail("read", 1, persistent=True, path="*a.sf")
    with pytest.raises(OSError):
        _tag(two, row=ROWS - 1)
    assert _tag(plain) == b"A"  # the plain reader never went through the hooks
    cache.release(one)
    cache.release(two)
    assert one.closed and two.closed and cache.cached(plain)
    # a sub() filesystem of the subclass is of the subclass too: not cached either
    sub = FaultFileSystem(os.path.dirname(files.root), FaultInjector()).sub(os.path.basename(files.root))
    three = cache.checkout(sub, "a.sf")
    assert three is not plain and len(cache) == 1
    cache.release(three)
    assert three.closed


# -- threads ---------------------------------------------------------------------------------
def test_threads_checking_out_and_releasing_the_same_files(files):
    """Readers checked out and released from many threads at once, with a
    capacity below the files in use (evictions while held), occasional discards
    and a thread clearing and resizing the cache: no reader is ever closed while
    held, every checkout is counted once, and in the end nothing is held and
    every reader the cache let go of is closed."""
    paths = [f"{name}.sf" for name in "abc"]
    tags = {p: p[0].upper().encode() for p in paths}
    cache = ReaderCache(capacity=2)
    seen: dict[int, StoreFileReader] = {}
    seen_lock = threading.Lock()
    errors: list[BaseException] = []
    checkouts = [0] * 6
    stop = threading.Event()

    def work(n: int) -> None:
        rng = random.Random(n)
        try:
            for _ in range(250):
                picked = [rng.choice(paths) for _ in range(rng.choice((1, 2)))]
                held = [(p, cache.checkout(files, p)) for p in picked]
                checkouts[n] += len(held)
                with seen_lock:
                    for _, r in held:
                        seen[id(r)] = r
                for p, r in held:
                    assert not r.closed
                    assert _tag(r, rng.randrange(ROWS)) == tags[p]  # reads through a held reader
                for _, r in held:
                    cache.release(r, discard=rng.random() < 0.03)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    def meddle() -> None:
        rng = random.Random(99)
        while not stop.is_set():
            if rng.random() < 0.5:
                cache.clear()
            else:
                cache.capacity = rng.choice((0, 1, 2, 3))
            time.sleep(0.002)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    meddler = threading.Thread(target=meddle)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: interleavings a default run rarely meets
    try:
        meddler.start()
        for t in workers:
            t.start()
        for t in workers:
            t.join(timeout=120)
    finally:
        stop.set()
        meddler.join(timeout=30)
        sys.setswitchinterval(switch)
    assert not errors, errors[:3]
    stats = cache.stats()
    assert stats["hits"] + stats["misses"] == sum(checkouts)
    assert stats["hits"] > 0 and stats["misses"] > 0
    assert stats["held"] == 0 and stats["entries"] <= cache.capacity
    kept = {id(e.reader) for e in cache._entries.values()}
    for key, reader in seen.items():
        assert reader.closed == (key not in kept), reader
    cache.clear()
    assert all(r.closed for r in seen.values())


# -- the deferred release --------------------------------------------------------------------
def test_a_release_inside_the_locked_section_is_deferred_to_its_end(files):
    cache = ReaderCache()
    reader = cache.checkout(files, "a.sf")
    also = cache.checkout(files, "a.sf")
    cache.capacity = 0  # evicted while held: it closes at its last release
    with cache._locked():
        cache.release(reader)
        # the section may be half-way through changing the map: nothing ran yet
        assert cache._out[id(reader)].refs == 2 and not reader.closed
    assert cache.holders(reader) == 1 and not reader.closed
    with cache._locked():
        cache.release(also)
        assert not also.closed
    assert also.closed and cache.stats()["held"] == 0


def test_a_generator_finalized_by_the_collector_inside_the_section_releases_after_it(files):
    """A scan generator holding a checkout, dropped in a reference cycle: the
    garbage collector finalizes it on whatever thread runs a collection, here
    inside the cache's locked section.  Its release must wait for the section
    (not run in the middle of it, and not deadlock)."""
    cache = ReaderCache()

    def reading():
        reader = cache.checkout(files, "a.sf")
        try:
            yield reader
        finally:
            cache.release(reader)

    gen = reading()
    reader = next(gen)
    cycle = [gen]
    cycle.append(cycle)  # only the collector frees it
    del gen
    cache.capacity = 0  # so the release closes it: visible
    gc.disable()
    try:
        with cache._locked():
            del cycle
            assert gc.collect() > 0
            assert not reader.closed and cache._out[id(reader)].refs == 1  # deferred
        assert reader.closed and cache.holders(reader) == 0
    finally:
        gc.enable()


# -- end to end: the connector's pinned reads ---------------------------------------------------
@pytest.fixture
def shared():
    """The process-wide reader cache, emptied before and after the test."""
    cache = reader_cache.shared_reader_cache()
    cache.clear()
    yield cache
    cache.clear()


def _delta(cache: ReaderCache, before: dict) -> dict:
    now = cache.stats()
    return {k: now[k] - before[k] for k in ("hits", "misses", "stale", "evictions")}


def _store_files(root: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names if f.endswith(".sf"))


def _table(root: str, rows: range, split: bytes = b"r050"):
    conn = storage.connect(root)
    table = conn.create_table("t", {"cf": {}}, split_keys=[split], settings={"wal_sync": "none"})
    with table.batch() as b:
        for i in rows:
            b.put(b"r%03d" % i, {b"cf:q": b"v%d" % i})
    table.flush()
    return conn, table


def _format(root: str, **conf: str) -> TableInputFormat:
    return TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": "t",
                             "hbase.mapreduce.scan.columns": "cf:q", "regionscan.pin.register": "false", **conf})


def _read(fmt: TableInputFormat, splits=None) -> dict[bytes, bytes]:
    rows = {}
    for split in splits if splits is not None else fmt.get_splits():
        with fmt.create_batch_reader(split) as reader:
            for batch in reader:
                for rec in batch.to_pylist():
                    rows[rec["key"]] = rec["cf:q"]
    return rows


def _expected(rows, value=b"v%d") -> dict[bytes, bytes]:
    return {b"r%03d" % i: value % i for i in rows}


def test_a_second_pinned_read_reuses_the_first_reads_readers(tmp_path, shared):
    root = str(tmp_path / "root")
    conn, _ = _table(root, range(100))
    files = _store_files(root)
    assert len(files) == 2
    settle(*files)
    fmt = _format(root)
    before = shared.stats()
    assert _read(fmt) == _expected(range(100))
    assert _delta(shared, before) == {"hits": 0, "misses": 2, "stale": 0, "evictions": 0}
    assert shared.stats()["held"] == 0 and len(shared) == 2  # given back when the regions closed
    before = shared.stats()
    assert _read(fmt) == _expected(range(100))
    assert _delta(shared, before) == {"hits": 2, "misses": 0, "stale": 0, "evictions": 0}
    # a reader stopped after its first batch gives its readers back for the next read
    split = fmt.get_splits()[1]
    reader = fmt.create_batch_reader(split)
    assert next(iter(reader)).num_rows
    reader.close()
    before = shared.stats()
    assert _read(fmt) == _expected(range(100))
    assert _delta(shared, before)["hits"] == 2
    conn.close()


def test_pinned_reads_after_a_compaction_read_the_new_files(tmp_path, shared):
    root = str(tmp_path / "root")
    conn, table = _table(root, range(100))
    settle(*_store_files(root))
    fmt = _format(root)
    assert _read(fmt) == _expected(range(100))
    # splits planned now, with their pins registered, read the files as they are now
    planned_fmt = _format(root, **{"regionscan.pin.register": "true"})
    planned = planned_fmt.get_splits()
    with table.batch() as b:
        for i in range(0, 100, 3):
            b.put(b"r%03d" % i, {b"cf:q": b"w%d" % i})
    table.flush()
    table.compact(major=True)
    now = _store_files(root)
    settle(*now)
    new_rows = {**_expected(range(100)), **_expected(range(0, 100, 3), b"w%d")}
    before = shared.stats()
    assert _read(fmt) == new_rows
    assert _delta(shared, before)["misses"] == 2  # the two compacted files, opened once
    before = shared.stats()
    assert _read(fmt) == new_rows
    assert _delta(shared, before) == {"hits": 2, "misses": 0, "stale": 0, "evictions": 0}
    # the planned splits' files were archived by the compaction: their live paths are gone,
    # so the cached readers of those paths are dropped and the archived files read
    before = shared.stats()
    assert _read(planned_fmt, planned) == _expected(range(100))
    delta = _delta(shared, before)
    assert delta["stale"] == 2 and delta["hits"] == 0
    planned_fmt.release()
    conn.close()


def test_pinned_reads_after_a_bulk_load_read_the_loaded_files(tmp_path, shared):
    root = str(tmp_path / "root")
    conn, _ = _table(root, range(100))
    conn.close()  # a bulk load commits without a writer
    settle(*_store_files(root))
    fmt = _format(root)
    assert _read(fmt) == _expected(range(100))
    table_fs = FileSystem(root).sub("t")

    def load(job: str, keys: range, value: bytes, mode: str) -> None:
        regions, families = table_regions(table_fs)
        stamp = int(time.time() * 1000) + 10_000  # newer than every put: the loaded values win
        task = BulkLoadTask(table_fs, job, "p0", regions, families, timestamp=stamp)
        task.add_cells(cells_to_batch([(b"r%03d" % i, b"cf", b"q", stamp, CellType.PUT, value % i) for i in keys]))
        commit_load(table_fs, job, task.finish(), mode)

    load("append", range(45, 55), b"L%d", "append")  # a file in each region
    settle(*_store_files(root))
    appended = {**_expected(range(100)), **_expected(range(45, 55), b"L%d")}
    before = shared.stats()
    assert _read(fmt) == appended
    delta = _delta(shared, before)
    assert delta["hits"] == 2 and delta["misses"] == 2  # the old files kept, the loaded ones opened
    load("overwrite", range(40, 60), b"O%d", "overwrite")
    settle(*_store_files(root))
    before = shared.stats()
    assert _read(fmt) == _expected(range(40, 60), b"O%d")
    assert _delta(shared, before)["misses"] == 2
    before = shared.stats()
    assert _read(fmt) == _expected(range(40, 60), b"O%d")
    assert _delta(shared, before) == {"hits": 2, "misses": 0, "stale": 0, "evictions": 0}


def test_a_read_that_meets_a_corrupt_block_discards_its_readers(tmp_path, shared):
    root = str(tmp_path / "root")
    conn, _ = _table(root, range(100))
    conn.close()
    files = _store_files(root)
    settle(*files)
    # blocks read from the file each time (no block cache), no restart after the error
    fmt = _format(root, **{"hbase.mapreduce.scan.cacheblocks": "false", "regionscan.reader.max.restarts": "0"})
    assert _read(fmt) == _expected(range(100))
    assert len(shared) == 2
    target = next(p for p in files if "/00000001/" in p)  # the second region's file
    pristine = open(target, "rb").read()
    with StoreFileReader(FileSystem(os.path.dirname(target)), os.path.basename(target)) as probe:
        offset = probe._index.offsets[0] + probe._index.lengths[0] // 2  # inside the first data block
    with open(target, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    settle(target)  # old enough that the reader opened next is kept: only the failure drops it
    before = shared.stats()
    with pytest.raises(StorageError) as info:
        _read(fmt)
    assert isinstance(info.value, CorruptionError) or isinstance(info.value.__cause__, CorruptionError)
    delta = _delta(shared, before)
    assert delta["stale"] == 1 and delta["misses"] == 1  # the changed file was opened again...
    assert len(shared) == 1 and shared.stats()["held"] == 0  # ...and that reader discarded
    assert not any(key[0] == target for key in shared._entries)
    # the next read opens it again (not a hit), and a repaired file reads right
    before = shared.stats()
    with pytest.raises(StorageError):
        _read(fmt)
    assert _delta(shared, before)["misses"] == 1
    with open(target, "r+b") as f:
        f.write(pristine)
    settle(target)
    assert _read(fmt) == _expected(range(100))


def test_a_pinned_region_that_raised_does_not_give_its_readers_back(tmp_path, shared):
    """PinnedRegion's exit: an exception discards its readers; a consumer that
    stops early (GeneratorExit) gives them back."""
    from storage.region.region_snapshots import PinnedRegion, pin_table

    root = str(tmp_path / "root")
    conn, _ = _table(root, range(100))
    settle(*_store_files(root))
    table_fs = FileSystem(root).sub("t")
    snapshot = pin_table(table_fs)
    families = snapshot.family_settings()
    pin = snapshot.regions[0]
    with PinnedRegion(table_fs, "t", pin, families) as region:
        (file,) = region.view.stores["cf"].files
        kept = file.reader
    assert shared.cached(kept) and not kept.closed
    with pytest.raises(ValueError):
        with PinnedRegion(table_fs, "t", pin, families) as region:
            assert region.view.stores["cf"].files[0].reader is kept
            raise ValueError("a read failed")
    assert kept.closed and not shared.cached(kept)

    def scan():
        with PinnedRegion(table_fs, "t", pin, families) as region:
            yield region.view.stores["cf"].files[0].reader

    gen = scan()
    fresh = next(gen)
    assert fresh is not kept
    gen.close()  # GeneratorExit: nothing against the reader
    assert shared.cached(fresh) and not fresh.closed
    conn.close()


def test_an_idle_reader_closes_after_idle_seconds_and_a_held_one_never(files):
    """A cached reader keeps its file open and mapped: a file deleted meanwhile (compacted
    away, its table dropped) would keep its disk space while the reader sits idle.  Idle
    readers close once idle for ``idle_seconds``, at a later checkout; held ones never."""
    with pytest.raises(InvalidArgument, match="idle_seconds"):
        ReaderCache(idle_seconds=-1)
    with clock.use(clock.ManualClock()) as manual:  # idleness is measured on the engine's clock
        cache = ReaderCache(idle_seconds=30)
        idle = cache.checkout(files, "a.sf")
        cache.release(idle)
        held = cache.checkout(files, "b.sf")
        manual.advance(29)
        assert cache.checkout(files, "b.sf") is held and not idle.closed  # idle, but within idle_seconds
        cache.release(held)
        manual.advance(2)
        os.remove(files.local_path("a.sf"))  # its space is held while the reader is open
        again = cache.checkout(files, "b.sf")  # any checkout sweeps
        assert idle.closed and not cache.cached(idle) and cache.expired == 1
        assert again is held and not held.closed and cache.cached(held) and _tag(held) == b"B"
        cache.release(held)
        cache.release(again)
        assert cache.stats()["expired"] == 1
    # used again within the window: kept
    fresh = ReaderCache(idle_seconds=60)
    first = fresh.checkout(files, "b.sf")
    fresh.release(first)
    again = fresh.checkout(files, "b.sf")
    assert again is first and fresh.expired == 0
    fresh.release(again)
