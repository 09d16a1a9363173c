"""Keys-only reads of version 2 files: runs of dense blocks read as one unit.

``StoreFileReader.scan_parts(keys_only=True)`` decodes runs of consecutive
dense blocks together (``storage/storefile/_key_runs.py``).  Every part it
yields must hold exactly the cells of a full read with the values emptied,
with the right ``continued`` / ``open`` flags, for any row range and run
size, on memory-mapped files and on files read by ``pread``; a corrupt block
inside a run must fail with the error a block-by-block read gives.
"""

from __future__ import annotations

import os
import random
import signal
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pytest

from storage.cells import cells_to_batch
from storage.errors import CorruptionError
from storage.vfs.fs import FileSystem
from storage.storefile import StoreFileReader, StoreFileWriter, _key_runs
from storage.storefile._key_runs import _HEADER_DTYPE, _gather_headers, plan_units
from storage.storefile.format import BLOCK_V2_HEADER_SIZE, BlockHeaderV2, BlockLayout, checksum


class PreadFileSystem(FileSystem):
    """A local filesystem whose files are read with pread, not memory-mapped
    (``REGIONSCAN_MMAP=0``, the engine worker's way): reads in the caller's thread."""

    def open_read(self, path: str) -> pa.NativeFile:
        return pa.OSFile(self._full(path))


class StreamFileSystem(FileSystem):
    """A local filesystem whose files are pyarrow's random-access streams: the
    path remote files take (reads issued from a thread pool)."""

    def open_read(self, path: str) -> pa.NativeFile:
        return self._fs.open_input_file(self._full(path))


_FILESYSTEMS = [FileSystem, PreadFileSystem, StreamFileSystem]


def _cells(seed: int) -> list[tuple]:
    """Rows of two or three qualifiers (some lacking one), run-length and
    plain timestamps, rows wider than a block (some continue into a dense
    block), rows of 40 qualifiers and rows with versions and delete markers
    (cell layout blocks)."""
    rng = random.Random(seed)
    cells = []
    for r in range(3000):
        row = b"r%05d" % r
        if 1000 <= r < 1003:
            cells += [(row, b"cf", b"w%02d" % q, 7, 4, b"x" * 150) for q in range(40)]
            continue
        if r in (300, 301, 1700):
            cells += [(row, b"cf", b"a", 7, 4, b"y" * 5000), (row, b"cf", b"b", 7, 4, b"z")]
            continue
        if 2000 <= r < 2100 and r % 7 == 0:
            cells += [(row, b"cf", b"a", 9, 8, b""), (row, b"cf", b"a", 8, 4, b"old")]
        quals = [b"a", b"b"] if r < 1500 else [b"a", b"b", b"c"]
        if r % 5 == 0 and r > 500:
            quals = quals[1:]
        ts = 5 if r < 700 else 5 + rng.randrange(4)
        cells += [(row, b"cf", q, ts, 4, b"v%d" % r) for q in quals]
    return cells


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    fs = FileSystem(str(root))
    cells = _cells(1)
    # the header checks below are version 2's; "*3.rsf" are version 3 files (key chunks)
    for name, compression, version in (("plain.rsf", None, 2), ("zstd.rsf", "zstd", 2), ("plain3.rsf", None, 3),
                                       ("zstd3.rsf", "zstd", 3)):
        w = StoreFileWriter(fs, name, family=b"cf", block_size=1100, compression=compression, format_version=version)
        w.append_batch(cells_to_batch(cells))
        w.finish()
    return str(root), cells


def _keys_only(cells, start, stop):
    return [c[:5] + (b"",) for c in cells if (start is None or c[0] >= start) and (stop is None or c[0] < stop)]


def _parts_cells(reader, start, stop, run_rows):
    out, parts = [], list(reader.scan_parts(start, stop, keys_only=True, run_rows=run_rows))
    last_row = None
    for p in parts:
        batch = p.batch()
        rows = batch.column(0).to_pylist()
        assert p.continued == (rows[0] == last_row), (start, stop, run_rows)
        last_row = rows[-1]
        out += [tuple(r.values()) for r in batch.to_pylist()]
    for p, q in zip(parts, parts[1:]):
        assert p.open == q.continued
    if parts:
        assert not parts[-1].open
    return out, parts


@pytest.mark.parametrize("name", ["plain.rsf", "zstd.rsf", "plain3.rsf", "zstd3.rsf"])
@pytest.mark.parametrize("filesystem", _FILESYSTEMS)
def test_keys_only_parts_equal_a_full_read(files, name, filesystem):
    root, cells = files
    fs = filesystem(root)
    mapped = filesystem is FileSystem
    rows = sorted({c[0] for c in cells})
    rng = random.Random(5)
    with StoreFileReader(fs, name) as r:
        assert (r._mapped is not None) == mapped
        assert r.block_source().pipelined == (filesystem is StreamFileSystem)
        layouts = np.asarray(r._index.layouts)
        continued = r._index.row_starts > 0
        assert (layouts == BlockLayout.DENSE).sum() > 100 and (layouts == BlockLayout.CELLS).any()
        assert (continued & (layouts == BlockLayout.DENSE)).any()  # a dense block continues a row
        block_firsts = [k[0] for k in r.block_first_keys]
        ranges = [(None, None), (b"r00300", b"r01701"), (b"r01001", b"r01002"), (b"r00000", b"r00001")]
        ranges += [(block_firsts[i], block_firsts[j]) for i, j in ((20, 22), (21, 127), (0, 1))]
        ranges += [tuple(sorted(rng.sample(rows, 2))) for _ in range(12)]
        ranges += [(rng.choice(rows), None), (None, rng.choice(rows)), (b"r01000\x00", b"r02050x")]
        for start, stop in ranges:
            for run_rows in (1, 37, 65536):
                got, parts = _parts_cells(r, start, stop, run_rows)
                assert got == _keys_only(cells, start, stop), (start, stop, run_rows)
        _, parts = _parts_cells(r, None, None, 65536)
        most = max(r._index.row_counts)
        assert max(p.dense.num_rows for p in parts if p.dense is not None) > 10 * most  # runs, not blocks


def test_runs_follow_the_index(files):
    root, _ = files
    with StoreFileReader(FileSystem(root), "plain.rsf") as r:
        idx = r._index
        for max_rows in (1, 50, 10**6):
            units = plan_units(r.block_source(), 0, r.block_count - 1, max_rows)
            assert [a for a, _ in units] == [0] + [b + 1 for _, b in units[:-1]] and units[-1][1] == r.block_count - 1
            for a, b in units:
                if idx.layouts[a] != BlockLayout.DENSE:
                    assert a == b
                    continue
                assert all(idx.layouts[i] == BlockLayout.DENSE for i in range(a, b + 1))
                assert not (idx.row_starts[a + 1 : b + 1] > 0).any()  # no row split inside a run
                assert a == b or idx.row_counts[a : b + 1].sum() <= max_rows
        assert plan_units(r.block_source(), 5, 9, 10**6) == [(5, 9)]


@pytest.mark.parametrize("name", ["plain.rsf", "zstd.rsf"])
def test_a_local_file_read_with_pread_is_not_read_ahead_on_prefetch_threads(files, name):
    """Reading a local file with pread takes microseconds from the page cache: handing each
    block to a prefetch thread cost more than it hid (reads took 25-110% more CPU than mapped),
    so its blocks are read by the thread that decodes them.  A remote-style stream still
    reads ahead on the prefetch threads."""
    root, cells = files
    for filesystem, prefetched in ((PreadFileSystem, False), (StreamFileSystem, True)):
        with StoreFileReader(filesystem(root), name) as r:
            threads: set[str] = set()
            read = r._read

            def spy(*args, **kwargs):
                threads.add(threading.current_thread().name)
                return read(*args, **kwargs)

            r._read = spy
            full = sum(batch.num_rows for batch in r.scan_batches())
            keys = sum(part.batch().num_rows for part in r.scan_parts(keys_only=True))
        assert full == len(cells) and keys == len(cells)
        assert any(t.startswith("block-prefetch") for t in threads) == prefetched, (filesystem.__name__, threads)


def test_reads_are_counted_per_key_section(files):
    root, _ = files
    for fs in (FileSystem(root), PreadFileSystem(root)):
        with StoreFileReader(fs, "plain.rsf") as r:
            r.counters.reset()  # the reads of opening the file
            list(r.scan_parts(keys_only=True))
            c = r.counters.snapshot()
            assert c["blocks_read"] == c["reads"] == r.block_count
            assert c["bytes_read"] == sum(r._index.key_lengths)


def test_header_dtype_mirrors_the_header(files):
    root, _ = files
    data = open(f"{root}/plain.rsf", "rb").read()
    with StoreFileReader(FileSystem(root), "plain.rsf") as r:
        offsets = r._index.offsets
    for at in offsets[:3] + offsets[-2:]:
        raw = data[at : at + BLOCK_V2_HEADER_SIZE]
        h = BlockHeaderV2.decode(raw, "f", at)
        (n,) = np.frombuffer(raw, dtype=_HEADER_DTYPE)
        assert (int(n["layout"]), int(n["cells"]), int(n["rows"]), int(n["prev"]), int(n["key_size"])) == (
            h.layout, h.cell_count, h.row_count, h.prev_offset, h.key_size)
        assert (int(n["key_checksum"]), int(n["value_size"]), int(n["value_checksum"])) == (
            h.key_checksum, h.value_size, h.value_checksum)


def test_headers_are_gathered_by_words_or_bytes_alike(files):
    root, _ = files
    data = open(f"{root}/plain.rsf", "rb").read()
    with StoreFileReader(FileSystem(root), "plain.rsf") as r:
        starts = np.asarray(r._index.offsets, dtype=np.int64)
    assert not (starts & 7).any()  # blocks are whole words long: the word gather is taken
    expect = np.frombuffer(b"".join(data[at : at + BLOCK_V2_HEADER_SIZE] for at in starts.tolist()), dtype=_HEADER_DTYPE)
    got = _gather_headers(pa.py_buffer(data), starts)
    assert got.dtype == _HEADER_DTYPE and got.shape == expect.shape
    assert got.tobytes() == expect.tobytes()
    # headers off a word boundary (one byte of padding in front) take the byte gather
    shifted = _gather_headers(pa.py_buffer(b"\x00" + data), starts + 1)
    assert shifted.tobytes() == expect.tobytes()
    # one block alone: the last one
    assert _gather_headers(pa.py_buffer(data), starts[-1:]).tobytes() == expect[-1:].tobytes()


def test_runs_are_decoded_off_the_callers_thread(files, monkeypatch):
    root, cells = files
    seen = []
    read_run = _key_runs.read_run

    def spy(reader, a, b):
        seen.append(threading.current_thread().name)
        return read_run(reader, a, b)

    monkeypatch.setattr(_key_runs, "read_run", spy)
    with StoreFileReader(FileSystem(root), "plain.rsf") as r:
        got, _ = _parts_cells(r, None, None, 65536)
    assert got == _keys_only(cells, None, None)
    assert seen and all(name.startswith("key-run-decode") for name in seen)


def test_concurrent_keys_only_reads_agree(files):
    root, cells = files
    expect = _keys_only(cells, None, None)
    with StoreFileReader(FileSystem(root), "plain.rsf") as r, ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda run_rows: _parts_cells(r, None, None, run_rows)[0], [37, 500, 65536] * 4))
    assert all(got == expect for got in results)


def test_a_forked_child_decodes_with_its_own_threads(files):
    root, cells = files
    with StoreFileReader(FileSystem(root), "plain.rsf") as r:
        _parts_cells(r, None, None, 65536)  # the parent's decode threads exist now
    pid = os.fork()
    if pid == 0:  # the child: a scan must not wait on the parent's threads
        ok = False
        try:
            with StoreFileReader(FileSystem(root), "plain.rsf") as r:
                ok = _parts_cells(r, None, None, 65536)[0] == _keys_only(cells, None, None)
        finally:
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's keys-only read hung")
    assert os.waitstatus_to_exitcode(done[1]) == 0


def _corrupt(tmp_path, root, change) -> StoreFileReader:
    data = bytearray(open(f"{root}/plain.rsf", "rb").read())
    with StoreFileReader(FileSystem(root), "plain.rsf") as r:
        idx = r._index
        dense = [i for i in range(40, r.block_count) if idx.layouts[i] == BlockLayout.DENSE]
        at = idx.offsets[dense[3]]
    change(data, at)
    (tmp_path / "bad.rsf").write_bytes(bytes(data))
    return at


_HEADER_V2 = struct.Struct("<8sBBBBIIqIIIIII")
_HEADER_V3 = struct.Struct("<8sBBBBIIqIIII")


def _reheader(data, at, field: int, value, fmt: struct.Struct = _HEADER_V2) -> None:
    """Set one struct field of the block header (``fmt``: version 2's or 3's) at ``at`` and fix
    its checksum."""
    fields = list(fmt.unpack_from(data, at))
    fields[field] = value
    fmt.pack_into(data, at, *fields)
    struct.pack_into("<I", data, at + fmt.size, checksum(bytes(data[at : at + fmt.size])))


@pytest.mark.parametrize(
    "change, message, where",
    [
        (lambda d, at: d.__setitem__(at + BLOCK_V2_HEADER_SIZE + 40, d[at + BLOCK_V2_HEADER_SIZE + 40] ^ 1),
         "key section checksum mismatch", BLOCK_V2_HEADER_SIZE),
        (lambda d, at: d.__setitem__(at + 20, d[at + 20] ^ 1), "data block header checksum mismatch", 0),
        (lambda d, at: _reheader(d, at, 6, 3), "cell or row count disagrees with the block index", 0),
        (lambda d, at: _reheader(d, at, 1, 0), "data block header disagrees with the block index", 0),
        (lambda d, at: d.__setitem__(slice(at, at + 8), b"RSFBLK3*"), r"bad data block magic b'RSFBLK3\*'", 0),
    ],
)
@pytest.mark.parametrize("filesystem", _FILESYSTEMS)
def test_a_corrupt_block_in_a_run_fails_as_it_would_alone(tmp_path, files, change, message, where, filesystem):
    root, _ = files
    at = _corrupt(tmp_path, root, change)
    fs = filesystem(str(tmp_path))
    with StoreFileReader(fs, "bad.rsf") as r:
        with pytest.raises(CorruptionError, match=rf"{message} in .*bad\.rsf at offset {at + where}$"):
            list(r.scan_parts(keys_only=True))


def _corrupt_v3(tmp_path, root, change) -> tuple[int, int]:
    """A copy of plain3.rsf changed by ``change(data, block offset, key chunk size)``; the block's offset."""
    data = bytearray(open(f"{root}/plain3.rsf", "rb").read())
    with StoreFileReader(FileSystem(root), "plain3.rsf") as r:
        idx = r._index
        dense = [i for i in range(40, r.block_count) if idx.layouts[i] == BlockLayout.DENSE]
        at = idx.offsets[dense[3]]
        stored = idx.chunks.entries(dense[3])[0][1]
    change(data, at, stored)
    (tmp_path / "bad.rsf").write_bytes(bytes(data))
    return at


@pytest.mark.parametrize(
    "change, message, where",
    [
        (lambda d, at, k: d.__setitem__(at + 48 + k // 2, d[at + 48 + k // 2] ^ 1), "key chunk checksum mismatch", 48),
        (lambda d, at, k: d.__setitem__(at + 20, d[at + 20] ^ 1), "data block header checksum mismatch", 0),
        (lambda d, at, k: _reheader(d, at, 6, 3, _HEADER_V3), "cell or row count disagrees with the block index", 0),
        (lambda d, at, k: _reheader(d, at, 10, 99, _HEADER_V3), "chunk count disagrees with the block index", 0),
        (lambda d, at, k: d.__setitem__(slice(at, at + 8), b"RSFBLK2*"), r"bad data block magic b'RSFBLK2\*'", 0),
    ],
)
def test_a_corrupt_version_3_block_in_a_run_fails_as_it_would_alone(tmp_path, files, change, message, where):
    root, _ = files
    at = _corrupt_v3(tmp_path, root, change)
    with StoreFileReader(FileSystem(str(tmp_path)), "bad.rsf") as r:
        with pytest.raises(CorruptionError, match=rf"{message} in .*bad\.rsf at offset {at + where}$"):
            list(r.scan_parts(keys_only=True))


def test_flipped_value_bytes_do_not_reach_keys_only_runs(tmp_path, files):
    root, cells = files
    data = bytearray(open(f"{root}/plain.rsf", "rb").read())
    with StoreFileReader(FileSystem(root), "plain.rsf") as r:
        for at, length, key_length in zip(r._index.offsets, r._index.lengths, r._index.key_lengths):
            data[at + key_length + (length - key_length) // 2] ^= 0x20
    (tmp_path / "v.rsf").write_bytes(bytes(data))
    with StoreFileReader(FileSystem(str(tmp_path)), "v.rsf") as r:
        got, _ = _parts_cells(r, None, None, 65536)
        assert got == _keys_only(cells, None, None)
        with pytest.raises(CorruptionError, match="value section checksum"):
            list(r.scan_batches())


def test_a_decoded_run_is_cached_as_one_entry(files):
    from storage.storefile import BlockCache

    root, cells = files
    cache = BlockCache(64 << 20)
    with StoreFileReader(FileSystem(root), "plain.rsf", cache=cache) as r:
        list(r.scan_parts(keys_only=True, cache_blocks=False))
        assert len(cache) == 0  # a scan that does not cache blocks leaves nothing behind
        first, _ = _parts_cells(r, None, None, 65536)
        entries = len(cache)
        dense_units = [u for u in plan_units(r.block_source(), 0, r.block_count - 1, 65536)
                       if r._index.layouts[u[0]] == BlockLayout.DENSE]
        cells_blocks = sum(1 for lay in r._index.layouts if lay != BlockLayout.DENSE)
        assert entries == len(dense_units) + cells_blocks
        r.counters.reset()
        again, _ = _parts_cells(r, None, None, 65536)
        c = r.counters.snapshot()
        assert again == first == _keys_only(cells, None, None)
        assert c["reads"] == c["cache_misses"] == 0 and c["cache_hits"] == entries
