"""The connector's partition read of a live table, with its log read straight into rows.

A pinned region replays its unflushed edits from the WAL at every read that
keeps no results; a log of puts of one family in cell order (a quarter of the
rows written again) becomes its row form in one compiled call
(:meth:`storage.memstore.sorted_cells.SortedCells.from_payloads`), any other
log (deletes, several families, writes out of order) is decoded into cells as
before.  These read real tables through the connector's batch reader
(``cacheblocks`` and ``cacheresults`` false: nothing kept between reads), with
the kernels on and off, against the embedded scan of the same open table, and
read a WAL with a torn tail alike both ways.
"""

from __future__ import annotations

import importlib
import os

import pytest

import storage
from connector import TableInputFormat
from jobs.demo import sample_row, split_keys_for
from storage.memstore import row_runs
from storage.wal import arrow_decode

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

ROWS = 2_000


def _connector_rows(root: str, name: str, columns: str) -> list:
    fmt = TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": name,
                            "hbase.mapreduce.scan.columns": columns,
                            "hbase.mapreduce.scan.cacheblocks": "false",
                            "regionscan.scan.cacheresults": "false"})
    rows = []
    for split in fmt.get_splits():
        reader = fmt.create_batch_reader(split)
        for batch in reader:
            rows.extend(batch.to_pylist())
        reader.close()
    return rows


def _embedded_rows(table: storage.Table, columns: list) -> list:
    return [r for b in table.scan_batches(columns=columns, cache_results=False) for r in b.to_pylist()]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """Tables of ROWS rows in 3 regions, compacted, then a second write left in the
    memstore and WAL: ``rewrite`` (every fourth row put again), ``delete`` (every
    fourth row deleted), ``families`` (rows put again in two families) and
    ``unordered`` (the rewrite written in descending key order)."""
    root = str(tmp_path_factory.mktemp("live"))
    conn = storage.connect(root)
    settings = {"wal_sync": "none", "memstore_flush_size": 1 << 40, "compaction_threshold": 1000}
    for name in ("rewrite", "delete", "families", "unordered"):
        table = conn.create_table(name, {"cf": {}, "f2": {}}, split_keys=split_keys_for(ROWS, 3), settings=settings)
        with table.batch(timestamp=1000) as batch:
            for i in range(ROWS):
                key, data = sample_row(i, 40)
                batch.put(key, {**data, b"f2:x": b"x%d" % i})
        table.compact(major=True)
        late = [i for i in range(ROWS) if i % 4 == 3]
        if name == "unordered":
            late.reverse()
        with table.batch(timestamp=2000) as batch:
            for i in late:
                key, data = sample_row(i, 40)
                if name == "delete":
                    batch.delete(key)
                    continue
                data = sample_row(i + 7, 40)[1]
                if name == "families":
                    data[b"f2:x"] = b"y%d" % i
                batch.put(key, data)
    yield root, conn
    conn.close()


@pytest.fixture(params=["compiled", "reference"])
def kernels(request):
    with pytest.MonkeyPatch.context() as patch:
        on = BUILT if request.param == "compiled" else None
        patch.setattr(arrow_decode, "_NATIVE", on)
        patch.setattr(row_runs, "_NATIVE", on)
        yield on


@pytest.mark.parametrize("name", ["rewrite", "delete", "families", "unordered"])
def test_a_live_table_reads_through_the_connector_as_embedded(live, kernels, name):
    root, conn = live
    table = conn.table(name)
    for columns in (["cf:n", "cf:s"], ["cf:s", "f2:x"]):
        expected = _embedded_rows(table, columns)
        got = _connector_rows(root, name, " ".join(columns))
        assert len(got) == len(expected) == (ROWS * 3 // 4 if name == "delete" else ROWS)
        assert got == expected
    if name != "delete":
        got = {r["key"]: r for r in _connector_rows(root, name, "cf:s")}
        key, data = sample_row(7, 40)
        assert got[key]["cf:s"] == sample_row(14, 40)[1][b"cf:s"]  # the rewrite is what reads


def test_a_torn_wal_tail_reads_alike_both_ways(live, tmp_path):
    root, conn = live
    table = conn.table("rewrite")
    expected = _embedded_rows(table, ["cf:n", "cf:s"])
    wal_dir = os.path.join(root, "rewrite", "regions")
    logs = [os.path.join(d, f) for d, _, files in os.walk(wal_dir) for f in files
            if f.endswith(".wal") and os.path.getsize(os.path.join(d, f)) > 16]
    assert logs
    for log in logs:
        with open(log, "ab") as f:
            f.write(b"\x07\x00\x00")  # a crash cut the next record's header: a torn tail
    for on in (BUILT, None):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(arrow_decode, "_NATIVE", on)
            patch.setattr(row_runs, "_NATIVE", on)
            assert _connector_rows(root, "rewrite", "cf:n cf:s") == expected
