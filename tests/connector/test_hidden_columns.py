"""Hidden columns of a rows scan (storage/read/hidden_columns.py): their cells make rows exist,
their values stay out of the batches.  On every layout a scan of a and b with b hidden gives
exactly the rows of the scan of a and b, with column b left out; a scan of a alone loses the
rows that only have b.  Column b is in a's family, or in a second family (the two families'
rows joined on the key: storage/read/family_join.py)."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

import storage
from connector import TableInputFormat


def _put_rows(table, keys, with_a, b_family: bytes) -> None:
    with table.batch() as b:
        for k in keys:
            cells = {b_family + b":b": b"b%d" % k}
            if with_a(k):
                cells[b"cf:a"] = b"a%d" % k
            b.put(b"r%04d" % k, cells)


def _layout(root: str, layout: str, b_family: bytes) -> None:
    conn = storage.connect(root)
    families = {"cf": {}, b_family.decode(): {}}
    table = conn.create_table("t", families, split_keys=[b"r0100"], settings={"wal_sync": "none"})
    _put_rows(table, range(200), lambda k: k % 3 != 0, b_family)  # a third of the rows have b only
    if layout != "memstore only":
        table.flush()
    if layout == "file and memstore":
        _put_rows(table, range(0, 200, 7), lambda k: k % 2 == 0, b_family)  # updates: some rows lose nothing, gain a
    if layout == "two files":
        _put_rows(table, range(200, 260), lambda k: k % 4 == 0, b_family)
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
@pytest.mark.parametrize("b_family", [b"cf", b"xf"])
def test_hidden_columns_keep_their_rows_and_lose_their_values(tmp_path, layout, include_timestamp, b_family):
    root = str(tmp_path / "root")
    _layout(root, layout, b_family)
    b = b_family + b":b"
    both = _read(root, f"cf:a {b.decode()}", include_timestamp=include_timestamp)
    hidden = _read(root, f"cf:a {b.decode()}", (b,), include_timestamp)
    shown = [n for n in both.schema.names if not n.startswith(b.decode())]
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
