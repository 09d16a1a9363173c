"""Version 3 column chunks under corruption, through a table.

A bulk-loaded table (one store file of column chunks, several row groups) is
copied once per chunk of one row group, with a flipped byte in that chunk (the
key chunk without offsets, a FIXED, a LENGTHS and a DICT chunk). Every
read path that uses the chunk fails with a CorruptionError naming the file and
the chunk's offset; every path that does not use it answers as the good table
does, so a scan of other columns never reads, verifies or trips over it:

* a wide scan (every column) and the cell scan read every chunk: they fail;
* a narrow scan fails when it asks for the flipped column and answers right
  when it does not (a flipped key chunk fails them all);
* a get of a row of the row group reads it whole: it fails;
* a keys-only scan and a count of a range ending inside the row group read
  the key chunk alone: they fail for it and answer right for a value chunk.

A flipped byte in the block index (its chunk directory and statistics) fails
the file's open.
"""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pytest

import storage
from storage.engine import BulkLoadTask, commit_load, table_regions
from storage.errors import CorruptionError
from storage.storefile import StoreFileReader
from storage.storefile.format import TRAILER_SIZE, ChunkEncoding, Trailer
from storage.vfs.fs import FileSystem

ROWS = 3000
COLUMNS = [b"cf:a", b"cf:b", b"cf:c"]


def _key(i: int) -> bytes:
    return b"k%06d" % i


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """The good table's root, its store file (relative path) and the answers of every path."""
    root = tmp_path_factory.mktemp("chunks") / "good"
    conn = storage.connect(str(root))
    conn.create_table("t", {"cf": {"block_size": 8192}}, settings={"wal_sync": "none"})
    conn.close()
    fs = FileSystem(str(root)).sub("t")
    regions, families = table_regions(fs)
    task = BulkLoadTask(fs, "load", "p0", regions, families, timestamp=1000)
    idx = np.arange(ROWS)
    keys = pa.array([_key(i) for i in range(ROWS)], pa.binary())
    # fixed width, spread over all 64 bits (a narrow range of integers would be a FRAME chunk)
    a = pa.array([(int(v) * 0x9E3779B97F4A7C15 % (1 << 64)).to_bytes(8, "big") for v in idx * 7919], pa.binary())
    mix = [(i * 2654435761 >> 7) % 100003 for i in range(ROWS)]  # a scramble: no period for zstd to find
    b = pa.array([b"text-%d" % m for m in mix], pa.binary())  # mixed widths: a length-coded chunk
    # few values of one width, absent rows: a dictionary chunk
    c = pa.array([None if i % 5 == 0 else b"code-%07d" % (mix[i] % 9 * 1111) for i in range(ROWS)], pa.binary())
    task.add(pa.RecordBatch.from_arrays([keys, a, b, c], names=["key", "cf:a", "cf:b", "cf:c"]))
    commit_load(fs, "load", task.finish())
    files = sorted(p for p in root.rglob("*.sf"))
    assert len(files) == 1
    rel = str(files[0].relative_to(root))
    conn = storage.connect(str(root), block_cache_size=0)
    t = conn.table("t")
    answers = {
        "wide": pa.Table.from_batches(list(t.scan_batches(columns=COLUMNS))),
        **{col: pa.Table.from_batches(list(t.scan_batches(columns=[col]))) for col in COLUMNS},
        "keys": sum(bt.num_rows for bt in t.scan_batches(filter="KeyOnlyFilter()", output="cells")),
    }
    conn.close()
    assert answers["wide"].num_rows == ROWS
    with StoreFileReader(FileSystem(str(root)), rel) as r:
        assert r.format_version == 3 and r.block_count >= 4
        block = 2  # a row group in the middle of the file
        offset = r._index.offsets[block]
        entries = r._index.chunks.entries(block)
        rows = r._load_keys(block, False).dense.rows.to_pylist()
        qualifiers = r._load_keys(block, False).dense.qualifiers
        index_at = Trailer.decode(files[0].read_bytes()[-TRAILER_SIZE:], rel, files[0].stat().st_size).index_offset
    assert qualifiers == (b"a", b"b", b"c") and len(entries) == 4
    # every encoding but IPC is flipped below: keys without offsets (a 7-byte counter, delta-coded),
    # FIXED, LENGTHS and DICT
    assert [e[4] for e in entries] == [ChunkEncoding.KEYS_DELTA, ChunkEncoding.FIXED, ChunkEncoding.LENGTHS,
                                       ChunkEncoding.DICT]
    return root, rel, answers, offset, entries, rows, index_at


def _copy_with_flip(good, tmp_path, at: int):
    root, rel = good[0], good[1]
    bad = tmp_path / "bad"
    shutil.copytree(root, bad)
    data = bytearray((bad / rel).read_bytes())
    data[at] ^= 0x20
    (bad / rel).write_bytes(bytes(data))
    return bad


def _fails_at(call, rel: str, offset: int) -> None:
    with pytest.raises(CorruptionError) as err:
        call()
    assert rel.split("/")[-1] in str(err.value) and err.value.offset == offset, str(err.value)


@pytest.mark.parametrize("chunk", [0, 1, 2, 3])
def test_a_flipped_chunk_fails_exactly_the_paths_that_read_it(good, tmp_path, chunk):
    root, rel, answers, offset, entries, rows, _ = good
    entry = entries[chunk]
    chunk_at = offset + entry[0]
    bad = _copy_with_flip(good, tmp_path, chunk_at + entry[1] // 2)
    conn = storage.connect(str(bad), block_cache_size=0)
    t = conn.table("t")
    try:
        _fails_at(lambda: list(t.scan_batches(columns=COLUMNS)), rel, chunk_at)
        _fails_at(lambda: list(t.scan(columns=COLUMNS)), rel, chunk_at)
        _fails_at(lambda: t.row(rows[len(rows) // 2]), rel, chunk_at)
        for k, col in enumerate(COLUMNS):
            narrow = lambda: pa.Table.from_batches(list(t.scan_batches(columns=[col])))  # noqa: E731
            if chunk in (0, k + 1):
                _fails_at(narrow, rel, chunk_at)
            else:
                assert narrow().equals(answers[col]), col
        keys_only = lambda: sum(b.num_rows for b in t.scan_batches(filter="KeyOnlyFilter()", output="cells"))  # noqa: E731
        inside = rows[len(rows) // 3]  # a count that ends inside the row group reads its key chunk
        count = lambda: t.count(row_stop=inside)  # noqa: E731
        if chunk == 0:
            _fails_at(keys_only, rel, chunk_at)
            _fails_at(count, rel, chunk_at)
        else:
            assert keys_only() == answers["keys"]
            assert count() == int(inside[1:]) and t.count() == ROWS
    finally:
        conn.close()


def test_a_flipped_byte_in_the_chunk_directory_fails_the_open(good, tmp_path):
    root, rel, _, _, _, _, index_at = good
    data = (root / rel).read_bytes()
    tr = Trailer.decode(data[-TRAILER_SIZE:], rel, len(data))
    for k, pos in enumerate(range(index_at + 40, index_at + tr.index_length, max(1, tr.index_length // 7))):
        sub = tmp_path / str(k)
        sub.mkdir()
        bad = _copy_with_flip(good, sub, pos)
        with pytest.raises(CorruptionError, match="(?i)index"):
            StoreFileReader(FileSystem(str(bad)), rel)


def test_bounds_that_disagree_with_their_chunk_fail_check(tmp_path, monkeypatch):
    """Statistics written wrong behind valid checksums (a writer's fault, not a flipped
    byte, which the index checksum catches): ``check()`` recomputes every fixed-width
    chunk's bounds and names the chunk."""
    import storage.storefile._block_v3 as block_v3

    encode = block_v3._encode_values

    def lying(values, codec=None):
        raw, enc, count, low, high, *stored = encode(values, codec)
        return (raw, enc, count, high, low, *stored)  # bounds swapped

    fs = FileSystem(str(tmp_path))
    rows = pa.array([_key(i) for i in range(50)], pa.binary())
    vals = pa.array([i.to_bytes(4, "big") for i in range(50)], pa.binary())
    stamps = pa.array([1] * 50, pa.int64())
    for name, patch in (("good.sf", False), ("bad.sf", True)):
        if patch:
            monkeypatch.setattr(block_v3, "_encode_values", lying)
        w = storage.storefile.StoreFileWriter(fs, name, family=b"cf")
        w.append_rows(rows, [b"q"], [vals], [stamps])
        w.finish()
    with StoreFileReader(fs, "good.sf") as r:
        r.check()
        assert r.chunk_stats(b"q") == ([(0).to_bytes(4, "big")], [(49).to_bytes(4, "big")])
    with StoreFileReader(fs, "bad.sf") as r:
        with pytest.raises(CorruptionError, match=r"value chunk statistics disagree .*bad\.sf at offset"):
            r.check()
