"""The connector's point gets (key equalities and IN lists) read by the engine's multi-get.

A split whose spans in a region are all single rows is read with
``Region.rows_of`` (each store file looks every key up in one pass) instead
of one batch scan per key; the batches must be what the per-key scans give.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

import storage
from connector import TableInputFormat
from storage.scanner.metrics import ScanMetrics


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


@pytest.fixture
def root(tmp_path):
    path = str(tmp_path / "root")
    conn = storage.connect(path)
    table = conn.create_table(
        "t", {"cf": {"block_size": 512, "max_versions": 3}, "cf2": {"block_size": 512}},
        split_keys=[_key(300), _key(600)], settings={"wal_sync": "none"},
    )
    with table.batch() as b:
        for i in range(900):
            b.put(_key(i), {b"cf:a": b"a%05d" % i, b"cf:b": b"b" * (i % 5), b"cf2:x": b"x%d" % i}, )
    table.flush()
    table.compact(major=True)
    # on top of the files: newer versions, deletes and unflushed rows
    for i in range(0, 900, 7):
        table.put(_key(i), {b"cf:a": b"new%d" % i}, timestamp=2**42)  # newer than now
    for i in range(3, 900, 11):
        table.delete(_key(i), columns=[b"cf:b"])
    table.delete(_key(5))
    conn.close()
    return path


def _per_key(root, keys, output, **scan):
    conn = storage.connect(root, read_only=True)
    table = conn.table("t")
    out = [b for k in sorted(set(keys)) for b in table.scan_batches(row_start=k, row_stop=k + b"\x00", output=output, **scan)]
    conn.close()
    return pa.Table.from_batches(out) if out else None


def _connector(root, keys, output, conf=None):
    fmt = TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": "t", **(conf or {})},
                           key_ranges=[(k, k + b"\x00") for k in sorted(set(keys))])
    got = []
    for split in fmt.get_splits():
        reader = fmt.create_batch_reader(split) if output == "rows" else None
        if reader is not None:
            got.extend(reader)
        else:
            from connector.scanning import split_batches
            got.extend(split_batches(split, "cells", None, ScanMetrics()))
    fmt.release()
    return pa.Table.from_batches(got) if got else None


@pytest.mark.parametrize("keys", [
    [_key(i) for i in (1, 5, 7, 14, 299, 300, 301, 599, 777, 898, 5000)],
    [_key(i) for i in range(0, 900, 3)],
])
def test_point_gets_match_the_per_key_scans(root, keys):
    want = _per_key(root, keys, "rows", columns=[b"cf:a", b"cf:b", b"cf2:x"])
    got = _connector(root, keys, "rows", {"hbase.mapreduce.scan.columns": "cf:a cf:b cf2:x"})
    assert got.to_pylist() == want.to_pylist()
    cells = _connector(root, keys, "cells")
    assert cells.to_pylist() == _per_key(root, keys, "cells").to_pylist()


def test_point_gets_of_one_column_and_a_time_range(root):
    keys = [_key(i) for i in range(0, 60, 2)]
    conf = {"hbase.mapreduce.scan.columns": "cf:a", "hbase.mapreduce.scan.timerange.start": "0",
            "hbase.mapreduce.scan.timerange.end": str(2**42)}
    got = _connector(root, keys, "rows", conf)
    want = _per_key(root, keys, "rows", columns=[b"cf:a"], time_range=(0, 2**42))
    assert got.to_pylist() == want.to_pylist()
    assert all(not v.startswith(b"new") for v in got.column("cf:a").to_pylist())  # the newer versions are out of range
