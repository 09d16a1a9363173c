"""Key-only scans read key sections only, on every batch path of a region.

Two tables get the same writes: one keeps several overlapping version 2 files
per region (compactions off), delete markers, many versions and unflushed
memstore rows; the other keeps everything in its memstore (the cell kernels:
the reference).  Key-only scans (``KeyOnlyFilter`` alone, with key filters,
and the row-counting ``FirstKeyOnlyFilter() AND KeyOnlyFilter()``) must give
the same batches on both, forward and reverse, over row ranges, with limits.
Then every value section of every file gets a flipped byte: a full scan
fails its checksum, and every key-only scan still gives the same answer, so
none of them read a value section.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import storage
from storage.errors import CorruptionError
from storage.vfs.fs import FileSystem
from storage.storefile import StoreFileReader

FILTERS = [
    "KeyOnlyFilter()",
    "FirstKeyOnlyFilter() AND KeyOnlyFilter()",
    "KeyOnlyFilter() AND PrefixFilter('r002')",
    "KeyOnlyFilter() AND QualifierFilter(>=, 'binary:b')",
]
SHAPES = [
    {},
    {"row_start": b"r00033", "row_stop": b"r00411"},
    {"row_start": b"r00140", "row_stop": b"r00160", "reverse": True},
    {"reverse": True},
    {"limit": 37},
    {"row_start": b"r00300", "limit": 5, "reverse": True},
    {"columns": [b"cf:b", b"cf:c"]},
]
SETTINGS = {"wal_sync": "none", "compaction_threshold": 1000}


def _write(tables, seed: int, markers: bool) -> None:
    rng = random.Random(seed)

    def put(row, data, ts):
        for t in tables:
            t.put(row, data, timestamp=ts)

    for r in range(500):  # the first file of every region: dense blocks, 200-byte values
        put(b"r%05d" % r, {b"cf:a": b"a" * 200, b"cf:b": b"b%d" % r}, 100)
    for t in tables[:1]:
        t.flush()
    for r in rng.sample(range(500), 120):  # a second file overlapping the first: new versions
        put(b"r%05d" % r, {b"cf:b": b"B" * 150, b"cf:c": b"c"}, 200)
    for r in rng.sample(range(500), 30) if markers else ():
        for t in tables:
            t.delete(b"r%05d" % r, columns=[b"cf:a"] if r % 2 else None, timestamp=300)
    for r in range(500, 560):  # rows in only this file
        put(b"r%05d" % r, {b"cf:c": b"x" * 300}, 250)
    for t in tables[:1]:
        t.flush()
    for r in rng.sample(range(600), 40):  # unflushed rows, some new, one deleted
        put(b"r%05d" % r, {b"cf:a": b"m" * 100}, 400)
    for t in tables if markers else ():
        t.delete(b"r00007", timestamp=500)


@pytest.fixture(scope="module", params=["markers", "clean"])
def tables(tmp_path_factory, request):
    """With delete markers (sources resolved in full), or clean sources only
    (the row-counting scan cuts each source to its rows' first cells)."""
    root = tmp_path_factory.mktemp("keyonly")
    conns = [storage.connect(str(root / name)) for name in ("files", "memory")]
    made = [
        c.create_table("t", {"cf": {"block_size": 2048, "max_versions": 3}}, split_keys=[b"r00200", b"r00400"],
                       settings=SETTINGS)
        for c in conns
    ]
    _write(made, 7, request.param == "markers")
    files = made[0]
    assert all(len(r.stores["cf"].files) == 2 for r in files._regions)
    yield root, files, made[1]
    for c in conns:
        c.close()


def _scan(table, flt, shape, output):
    batches = list(table.scan_batches(filter=flt, output=output, **shape))
    return pa.Table.from_batches(batches).combine_chunks().to_pylist() if batches else []


def _all_answers(table) -> dict:
    return {
        (flt, i, output): _scan(table, flt, shape, output)
        for flt in FILTERS
        for i, shape in enumerate(SHAPES)
        for output in ("cells", "rows")
    }


def test_key_only_scans_equal_the_cell_kernels_over_files_markers_and_memstore(tables):
    _, files, memory = tables
    want = _all_answers(memory)
    assert want[(FILTERS[1], 0, "cells")] and all(c["value"] == b"" for c in want[(FILTERS[0], 0, "cells")])
    assert _all_answers(files) == want
    assert files.count() == len(want[(FILTERS[1], 0, "cells")])


def test_key_only_scans_never_read_a_value_section(tables, tmp_path):
    root, files, memory = tables
    want = _all_answers(memory)
    # the same table with a flipped byte in every value section of every file
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(root / "files", copy)
    fs = FileSystem(str(copy))
    flipped = 0
    for path in _store_files(copy):
        rel = str(path.relative_to(copy))
        with StoreFileReader(fs, rel) as r:
            spans = list(zip(r._index.offsets, r._index.lengths, r._index.key_lengths))
        data = bytearray(path.read_bytes())
        for at, length, key_length in spans:
            data[at + key_length + (length - key_length) // 2] ^= 0x10
            flipped += 1
        path.write_bytes(bytes(data))
    assert flipped > 20
    conn = storage.connect(str(copy), block_cache_size=0)
    broken = conn.table("t")
    # the memstore rows come back from the copied write-ahead log
    with pytest.raises(CorruptionError, match="value (section|chunk) checksum mismatch"):
        list(broken.scan_batches())
    broken.read_counters(reset=True)
    assert _all_answers(broken) == want
    counters = broken.read_counters()
    assert counters["blocks_read"] > 0
    conn.close()


def _store_files(root):
    return sorted(p for p in root.rglob("*") if p.is_file() and _is_store_file(p))


def _is_store_file(path) -> bool:
    with open(path, "rb") as f:
        return f.read(8) in (b"RSFBLK2*", b"RSFBLK3*")
