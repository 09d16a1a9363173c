"""MIN_VERSIONS: what a TTL leaves of a column, on every read path and through compactions.

A family with ``ttl=1`` and ``min_versions=2`` whose cells are all older than
the TTL still shows each column's newest two versions (HBase's MIN_VERSIONS);
the same family without ``min_versions`` shows nothing.  Checked in the
memstore, in a store file, in two files sharing rows (the row-resolution
path), after a minor and after a major compaction, through the batch and cell
scans, ``scan_batches`` (cells and rows), point reads and the connector's
batch reader.
"""

from __future__ import annotations

import time

import pytest

import storage
from connector.input_format import TableInputFormat

OLD = int(time.time() * 1000) - 3_600_000  # an hour ago: far past a one-second TTL


def _load(table) -> None:
    for k in range(3):  # three versions of cf:q in every row, all expired
        with table.batch(timestamp=OLD + k) as b:
            for i in range(12):
                b.put(b"r%02d" % i, {b"cf:q": b"v%d-%d" % (k, i), b"cf:p": b"p%d" % k})


def _paths(table, root: str, name: str) -> dict:
    """What each read path gives, as comparable values."""
    out = {
        "batch": [(r, sorted(d.items())) for r, d in table.scan(max_versions=3, include_timestamp=True)],
        "cell": [(r, sorted(d.items())) for r, d in table.scan(max_versions=3, include_timestamp=True, path="cell")],
        "cells batch": sorted(tuple(c.values()) for b in table.scan_batches(max_versions=3, output="cells")
                              for c in b.to_pylist()),
        "rows": [tuple(rec.values()) for b in table.scan_batches(columns=[b"cf:q", b"cf:p"], output="rows")
                 for rec in b.to_pylist()],
        "row": [sorted(table.row(b"r%02d" % i).items()) for i in range(12)],
        "versions": [table.cells(b"r%02d" % i, b"cf:q", versions=3, include_timestamp=True) for i in range(12)],
    }
    fmt = TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": name,
                            "hbase.mapreduce.scan.columns": "cf:q cf:p", "regionscan.pin.register": "false"})
    rows = []
    for split in fmt.get_splits():
        with fmt.create_batch_reader(split) as reader:
            rows += [tuple(rec.values()) for b in reader for rec in b.to_pylist()]
    out["connector"] = rows
    return out


def _expected(min_versions: int) -> dict:
    keep = [k for k in (2, 1, 0)][:min_versions]
    rows = []
    cells = []
    for i in range(12):
        row = b"r%02d" % i
        if keep:
            rows.append((row, [(b"cf:p", (b"p2", OLD + 2)), (b"cf:q", (b"v2-%d" % i, OLD + 2))]))
        for k in keep:
            cells.append((row, b"cf", b"p", OLD + k, 4, b"p%d" % k))
            cells.append((row, b"cf", b"q", OLD + k, 4, b"v%d-%d" % (k, i)))
    flat = [(r, b"v2-%d" % i, b"p2") for i, r in enumerate(b"r%02d" % i for i in range(12))] if keep else []
    return {
        "batch": rows, "cell": rows, "cells batch": sorted(cells), "rows": flat, "connector": flat,
        "row": [[(b"cf:p", b"p2"), (b"cf:q", b"v2-%d" % i)] if keep else [] for i in range(12)],
        "versions": [[(b"v%d-%d" % (k, i), OLD + k) for k in keep] for i in range(12)],
    }


@pytest.mark.parametrize("min_versions", [0, 2])
def test_min_versions_outlive_the_ttl_on_every_path(tmp_path, min_versions):
    root = str(tmp_path / "root")
    name = "t"
    want = _expected(min_versions)
    conn = storage.connect(root)
    table = conn.create_table(name, {"cf": {"max_versions": 3, "min_versions": min_versions, "ttl": 1}},
                              settings={"wal_sync": "none", "compaction_threshold": 100})
    stages = []
    _load(table)
    stages.append("memstore")
    table.flush()
    stages.append("one file")
    with table.batch(timestamp=OLD + 2) as b:  # the newest version again: rows in two files
        for i in range(0, 12, 3):
            b.put(b"r%02d" % i, {b"cf:q": b"v2-%d" % i})
    table.flush()
    stages.append("two files")
    table.compact(major=False)
    stages.append("minor compaction")
    table.compact(major=True)
    stages.append("major compaction")
    conn.close()
    # each stage read again after reopening: the last stage's table is on disk
    conn = storage.connect(root)
    try:
        got = _paths(conn.table(name), root, name)
    finally:
        conn.close()
    for path, value in want.items():
        assert got[path] == value, f"{path} after {stages[-1]}"


def test_min_versions_in_the_memstore_and_one_file(tmp_path):
    """The same answer before any compaction: cells in the memstore, then in one file."""
    root = str(tmp_path / "root")
    want = _expected(2)
    with storage.connect(root) as conn:
        table = conn.create_table("t", {"cf": {"max_versions": 3, "min_versions": 2, "ttl": 1}},
                                  settings={"wal_sync": "none"})
        _load(table)
        for stage in ("memstore", "one file"):
            if stage == "one file":
                table.flush()
            got = _paths(table, root, "t") if stage == "one file" else {
                k: v for k, v in _paths(table, root, "t").items() if k != "connector"
            }
            for path, value in want.items():
                if path in got:
                    assert got[path] == value, f"{path} in {stage}"
