"""Hidden columns of a rows scan (storage/read/hidden_columns.py): their cells make rows exist,
their values stay out of the batches.  On every layout a scan of a and b with b hidden gives
exactly the rows of the scan of a and b, with column b left out; a scan of a alone loses the
rows that only have b."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

import storage
from connector import TableInputFormat


def _put_rows(table, keys, with_a) -> None:
    with table.batch() as b:
        for k in keys:
            cells = {b"cf:b": b"b%d" % k}
            if with_a(k):
                cells[b"cf:a"] = b"a%d" % k
            b.put(b"r%04d" % k, cells)


def _layout(root: str, layout: str) -> None:
    conn = storage.connect(root)
    table = conn.create_table("t", {"cf": {}}, split_keys=[b"r0100"], settings={"wal_sync": "none"})
    _put_rows(table, range(200), lambda k: k % 3 != 0)  # a third of the rows have b only
    if layout != "memstore only":
        table.flush()
    if layout == "file and memstore":
        _put_rows(table, range(0, 200, 7), lambda k: k % 2 == 0)  # updates: some rows lose nothing, gain a
    if layout == "two files":
        _put_rows(table, range(200, 260), lambda k: k % 4 == 0)
        table.flush()
    if layout == "deletes in memstore":
        for k in range(0, 200, 5):
            table.delete(b"r%04d" % k, columns=[b"cf:a"])  # their a is gone: b alone keeps the row
    conn.close()


def _read(root: str, columns: str, hidden: tuple[bytes, ...] = (), include_timestamp: bool = False) -> pa.Table:
    conf = {"regionscan.root": root, "hbase.mapreduce.inputtable": "t", "hbase.mapreduce.scan.columns": columns,
            "regionscan.pin.register": "false"}
    fmt = TableInputFormat(conf)
    batches = []
    for split in fmt.get_splits():
        scan = dataclasses.replace(split.scan.with_request(include_timestamp=include_timestamp), hidden_columns=hidden)
        batches.extend(fmt.create_batch_reader(dataclasses.replace(split, scan=scan)))
    return pa.Table.from_batches(batches).combine_chunks()


@pytest.mark.parametrize("layout", ["one file", "memstore only", "file and memstore", "two files",
                                    "deletes in memstore"])
@pytest.mark.parametrize("include_timestamp", [False, True])
def test_hidden_columns_keep_their_rows_and_lose_their_values(tmp_path, layout, include_timestamp):
    root = str(tmp_path / "root")
    _layout(root, layout)
    both = _read(root, "cf:a cf:b", include_timestamp=include_timestamp)
    hidden = _read(root, "cf:a cf:b", (b"cf:b",), include_timestamp)
    shown = [n for n in both.schema.names if not n.startswith("cf:b")]
    assert hidden.schema.names == shown
    assert hidden.to_pylist() == both.select(shown).to_pylist()
    alone = _read(root, "cf:a", include_timestamp=include_timestamp)
    assert alone.num_rows < hidden.num_rows  # the rows with b only are what hiding keeps
    assert alone.to_pylist() == [r for r in hidden.to_pylist() if r["cf:a"] is not None]


def test_hidden_columns_need_a_rows_scan():
    from storage.read.batch_scan import scan_region_batches
    from storage.read.region_plan import RegionReadPlan

    with pytest.raises(storage.InvalidArgument, match="rows scan only"):
        next(scan_region_batches(None, RegionReadPlan(columns=[b"cf:a"], hidden_columns=[b"cf:a"], output="cells")))
