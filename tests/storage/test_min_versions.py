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


# -- HBase's TestMinVersions, with its expected answers -------------------------------------
# createTableDescriptor(name, minVersions=2, versions=1000, ttl=1s); the cells are written
# two seconds in the past, so every one of them is past the TTL.
HBASE_FAMILY = {"max_versions": 1000, "min_versions": 2, "ttl": 1}


def _versions(table, root: str, name: str, column: bytes, time_range=None, versions=None, flt=None) -> dict:
    """A Get of ``column`` of row T1 on every read path: its values, newest first."""
    options = {"row_start": b"T1", "row_stop": b"T1\x00", "columns": [column]}
    if time_range is not None:
        options["time_range"] = time_range
    if versions is not None:
        options["max_versions"] = versions
    if flt is not None:
        options["filter"] = flt
    out = {
        "batch": [v for b in table.scan_batches(output="cells", **options) for v in b.column("value").to_pylist()],
        "cell": [c[5] for cells in table.scanner(**options) for c in cells],
        "reverse cell": [c[5] for cells in table.scanner(**{**options, "row_start": b"T1", "row_stop": None,
                                                               "reverse": True}) for c in cells if c[0] == b"T1"],
    }
    if versions is None and flt is None and (time_range is None or time_range[0] == 0):
        # a point read: happybase's timestamp is the time range's exclusive end
        got = table.row(b"T1", columns=[column], timestamp=None if time_range is None else time_range[1])
        out["get"] = list(got.values())
    # a batch of one cell: each version comes as a result of its own
    conf = {"regionscan.root": root, "hbase.mapreduce.inputtable": name, "hbase.mapreduce.scan.columns": column.decode(),
            "hbase.mapreduce.scan.batchsize": "1",
            "hbase.mapreduce.scan.row.start": "T1", "hbase.mapreduce.scan.row.stop": "T1\x00",
            "regionscan.pin.register": "false"}
    if time_range is not None:
        conf.update({"hbase.mapreduce.scan.timerange.start": str(time_range[0]),
                     "hbase.mapreduce.scan.timerange.end": str(time_range[1])})
    if versions is not None:
        conf["hbase.mapreduce.scan.maxversions"] = str(versions)
    if flt is not None:
        conf["regionscan.scan.filter"] = repr(flt)
    fmt = TableInputFormat(conf)
    values = []
    for split in fmt.get_splits():
        with fmt.create_record_reader(split) as reader:
            values += [result[column] for _, result in reader]
    out["connector"] = values
    return out


def _check(got: dict, want: list, what: str) -> None:
    for path, values in got.items():
        assert values == want, f"{what}: {path} gave {values}, HBase {want}"


def test_hbase_base_case(tmp_path):
    """TestMinVersions.testBaseCase: before a flush a time range reaches the oldest version;
    HBase's flush drops the expired versions past the newest two, so after it that range is
    empty, and after the major compaction only the newest two remain."""
    root = str(tmp_path / "root")
    conn = storage.connect(root)
    table = conn.create_table("base", {"c0": HBASE_FAMILY}, settings={"wal_sync": "none"})
    ts = int(time.time() * 1000) - 2000
    for k, value in enumerate([b"1", b"2", b"3", b"4"]):  # T1 .. T4 at ts-3 .. ts
        table.put(b"T1", {b"c0:c0": value}, timestamp=ts - 3 + k)

    def read(**kw):
        return _versions(table, root, "base", b"c0:c0", **kw)

    _check(read(), [b"4"], "get")
    _check(read(time_range=(0, ts + 1)), [b"4"], "range to ts+1")
    _check(read(time_range=(0, ts - 2)), [b"1"], "oldest version still exists")
    _check(read(versions=1000), [b"4", b"3"], "all versions, before compactions")
    table.flush()
    _check(read(time_range=(0, ts - 2)), [], "after the flush")  # the old answer was [b'1']
    _check(read(versions=1000), [b"4", b"3"], "all versions after the flush")
    table.compact(major=True)
    _check(read(time_range=(0, ts + 1)), [b"4"], "after the compaction the 4th version")
    _check(read(time_range=(0, ts)), [b"3"], "so is the 3rd")
    _check(read(time_range=(0, ts - 1)), [], "but the 2nd and earlier versions are gone")
    conn.close()


def test_hbase_filters(tmp_path):
    """TestMinVersions.testFilters: a TimestampsFilter's cells count against min_versions
    among themselves, so before a flush both filtered versions come back; after a flush
    (and a compaction) only the one among the newest two is left."""
    from storage.filters import TimestampsFilter

    root = str(tmp_path / "root")
    conn = storage.connect(root)
    table = conn.create_table("filters", {"c0": HBASE_FAMILY, "c1": HBASE_FAMILY}, settings={"wal_sync": "none"})
    ts = int(time.time() * 1000) - 2000
    for k, value in enumerate([b"0", b"1", b"2", b"3"]):  # T0 .. T3 at ts-3 .. ts
        table.put(b"T1", {b"c0:c0": value, b"c1:c1": value}, timestamp=ts - 3 + k)
    stamps = TimestampsFilter([ts - 1, ts - 2])
    for stage, want in (("memstore", [b"2", b"1"]), ("flushed", [b"2"]), ("compacted", [b"2"])):
        if stage == "flushed":
            table.flush()
        elif stage == "compacted":
            table.compact(major=True)
        for column in (b"c1:c1", b"c0:c0"):  # the old answer before the flush was [b'2']
            _check(_versions(table, root, "filters", column, versions=1000, flt=stamps), want, f"{column} {stage}")
    conn.close()


def test_each_flush_keeps_its_own_newest_versions(tmp_path):
    """HBase's flush keeps, of what it writes, each column's newest min_versions expired
    puts; an older put flushed later is one such newest of its own file.  One flush of
    T10 and T20 keeps T20 only; a second flush of T15 keeps T15; T5 stays in the memstore.
    ``compact`` flushes T5, then the major compaction writes one file, keeping T20 only."""
    root = str(tmp_path / "root")
    conn = storage.connect(root)
    table = conn.create_table("flushes", {"c0": {"max_versions": 1000, "min_versions": 1, "ttl": 1}},
                              settings={"wal_sync": "none"})
    ts = int(time.time() * 1000) - 10_000  # every put is past the one-second TTL
    for k in (10, 20):
        table.put(b"T1", {b"c0:c0": b"%d" % k}, timestamp=ts + k)
    table.flush()
    table.put(b"T1", {b"c0:c0": b"15"}, timestamp=ts + 15)
    table.flush()
    table.put(b"T1", {b"c0:c0": b"5"}, timestamp=ts + 5)

    def read(**kw):
        return _versions(table, root, "flushes", b"c0:c0", **kw)

    _check(read(time_range=(0, ts + 16), versions=10), [b"15"], "T15 is its file's newest")
    _check(read(time_range=(0, ts + 12), versions=10), [b"5"], "T10 went with the first flush")
    _check(read(time_range=(0, ts + 21), versions=10), [b"20"], "one version past the TTL")
    table.compact(major=True)
    _check(read(time_range=(0, ts + 16), versions=10), [], "the compaction kept T20 only")
    _check(read(versions=10), [b"20"], "after the compaction")
    conn.close()
