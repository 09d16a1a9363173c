"""Counting paths answer from the block indexes where they can: proven on real files.

A table of clean version 2 files (one family, no delete markers, nothing
unflushed) gets a flipped byte in the key section and the value section of
every data block, leaving the block indexes intact.  Any path that reads a
data block now fails its checksum; ``Table.count()``, RowCounter's task
(``jobs.row_counter.count_split``) and the record readers' ``count_rows()``
still answer, and right, so they read the indexes alone.  A row range that
ends inside a block reads that block's keys: then they fail too.
"""

from __future__ import annotations

import shutil

import pytest

import storage
from connector import TableInputFormat
from connector.record_reader import TableBatchRecordReader, TableRecordReader
from jobs import row_counter
from jobs._splits import SplitRequest, table_splits
from storage import ScanRequest
from storage.errors import CorruptionError
from storage.vfs.fs import FileSystem
from storage.storefile import StoreFileReader

ROWS = 900


def _key(i: int) -> bytes:
    return b"k%05d" % i


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    base = tmp_path_factory.mktemp("indexcount")
    good = base / "good"
    conn = storage.connect(str(good))
    table = conn.create_table("t", {"cf": {"block_size": 1024}}, split_keys=[_key(300), _key(600)],
                              settings={"wal_sync": "none"})
    with table.batch() as b:
        for i in range(ROWS):
            b.put(_key(i), {b"cf:a": b"a" * (i % 50), b"cf:b": b"%d" % i})
    table.flush()
    conn.close()
    bad = base / "bad"
    shutil.copytree(good, bad)
    fs = FileSystem(str(bad))
    flipped = 0
    for path in sorted(p for p in bad.rglob("*") if p.is_file()):
        with open(path, "rb") as f:
            if f.read(8) not in (b"RSFBLK2*", b"RSFBLK3*"):
                continue
        with StoreFileReader(fs, str(path.relative_to(bad))) as r:
            spans = list(zip(r._index.offsets, r._index.lengths, r._index.key_lengths))
        data = bytearray(path.read_bytes())
        for at, length, key_length in spans:
            data[at + key_length - 9] ^= 0x04  # in the key section (its last bytes before padding)
            data[at + length - 9] ^= 0x04  # in the value section
            flipped += 1
        path.write_bytes(bytes(data))
    assert flipped >= 30
    return str(bad)


def test_table_count_reads_the_indexes_only(broken):
    conn = storage.connect(broken, read_only=True, block_cache_size=0)
    table = conn.table("t")
    assert table.count() == ROWS
    assert table.count(row_start=_key(300), row_stop=_key(600)) == 300
    with pytest.raises(CorruptionError, match="checksum mismatch"):
        list(table.scan_batches(filter="FirstKeyOnlyFilter() AND KeyOnlyFilter()"))
    with pytest.raises(CorruptionError, match="key (section|chunk) checksum mismatch"):
        table.count(row_start=_key(17))  # ends inside a block: its keys are read
    conn.close()


def test_row_counter_tasks_read_the_indexes_only(broken):
    request = SplitRequest(broken, "t", ScanRequest(filter=row_counter.ROW_COUNT_FILTER))
    with table_splits(request) as splits:
        counts = [row_counter.count_split(s).rows for s in splits]
    assert counts == [300, 300, 300]


@pytest.mark.parametrize("reader_type", [TableRecordReader, TableBatchRecordReader])
def test_record_readers_count_rows_from_the_indexes_only(broken, reader_type):
    fmt = TableInputFormat({"regionscan.root": broken, "hbase.mapreduce.inputtable": "t"})
    counts = []
    for split in fmt.get_splits():
        reader = reader_type()
        reader.initialize(split)
        counts.append(reader.count_rows())
        reader.close()
    assert counts == [300, 300, 300]
    split = fmt.get_splits()[0]
    reader = reader_type()
    reader.initialize(split)
    with pytest.raises(CorruptionError, match="checksum mismatch"):
        reader.next_key_value() if reader_type is TableRecordReader else reader.next_batch()
    reader.close()
