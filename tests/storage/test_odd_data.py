"""Big and odd data on every path: a 20 MB cell, a row of 50,000 qualifiers, a row
key of HBase's longest length, an empty qualifier, keys full of 0x00 and 0xFF.

Each goes through put, get, scan (forward, reverse, batches), flush,
compaction, split and reopening, and a Spark write and read; what HBase refuses
(a row key over 32,767 bytes, a cell over ``hbase.server.keyvalue.maxsize``) is
refused up front in one line.
"""

from __future__ import annotations

import os

import pytest

import storage
from storage import InvalidArgument
from storage.table.arguments import MAX_ROW_KEY_LENGTH
from storage.table.descriptor import DEFAULT_MAX_CELL_SIZE, MAX_CELL_SIZE_KEY

BIG_SIZE = 20 << 20  # the 20 MB cell (made per test: collecting the suite must not cost 20 MB)
WIDE = {b"cf:q%05d" % i: b"%d" % i for i in range(50_000)}
LONG_KEY = b"k" + b"\xff\x00" * ((MAX_ROW_KEY_LENGTH - 1) // 2)
ODD_KEYS = [b"\x00", b"\x00\x00\x00", b"\x00\xff\x00", b"\xff", b"\xff" * 100, b"\x7f\xff\xff"]


def _model() -> dict[bytes, dict[bytes, bytes]]:
    rows = {b"big": {b"cf:v": os.urandom(BIG_SIZE)}, b"wide": dict(WIDE), LONG_KEY: {b"cf:v": b"long"},
            b"empty-qualifier": {b"cf:": b"e", b"cf:v": b"1"}}
    for i, key in enumerate(ODD_KEYS):
        rows[key] = {b"cf:v": b"odd%d" % i, b"cf:": b""}
    return rows


def _check(table, model: dict) -> None:
    for row, data in model.items():
        assert table.row(row) == data, f"get of {row[:20]!r}"
    scanned = dict(table.scan())
    assert scanned.keys() == model.keys() and scanned == model
    assert [k for k, _ in table.scan(reverse=True)] == sorted(model, reverse=True)
    assert sum(b.num_rows for b in table.scan_batches()) == len(model)
    assert [k for k, _ in table.scan(row_start=b"\x00", row_stop=b"\x00\xff\x01")] == sorted(
        k for k in model if b"\x00" <= k < b"\x00\xff\x01"
    )


def test_odd_data_through_put_get_scan_flush_compaction_split_and_reopen(tmp_path):
    root = str(tmp_path / "root")
    model = _model()
    with storage.connect(root) as conn:
        table = conn.create_table("t", {"cf": {"max_versions": 1}}, split_keys=[b"\x00\xff"],
                                  settings={"extra": {MAX_CELL_SIZE_KEY: str(32 << 20)}})
        for row, data in model.items():
            table.put(row, data)
        _check(table, model)  # from the memstore
        table.flush()
        _check(table, model)
        with table.batch() as b:  # the same rows again: two files per region to compact
            for row, data in model.items():
                b.put(row, data)
        table.compact()
        _check(table, model)
        table.split(b"l")
        table.split()  # each region at its midkey
        assert len(table.region_infos()) >= 3
        _check(table, model)
        table.check()
    with storage.connect(root) as conn:
        _check(conn.table("t"), model)


def test_what_hbase_refuses_is_refused_up_front_in_one_line(tmp_path):
    with storage.connect(str(tmp_path / "root")) as conn:
        table = conn.create_table("t", {"cf": {}})
        too_long = b"k" * (MAX_ROW_KEY_LENGTH + 1)  # 32 KB: one byte over HBase's limit
        big = b"x" * (DEFAULT_MAX_CELL_SIZE + 1)
        calls = {
            "put long key": lambda: table.put(too_long, {b"cf:v": b"1"}),
            "batch long key": lambda: table.batch(timestamp=5).__enter__().put(too_long, {b"cf:v": b"1"}),
            "delete long key": lambda: table.delete(too_long),
            "put big cell": lambda: table.put(b"r", {b"cf:v": big}),
        }
        table.put(b"r", {b"cf:known": b"1"})
        calls["batch big cell"] = lambda: _batch_put(table, b"r", {b"cf:known": big})
        for what, call in calls.items():
            with pytest.raises(InvalidArgument) as info:
                call()
            text = str(info.value)
            assert "\n" not in text and len(text) < 400, f"{what}: {text!r}"
            assert ("32767" in text) if "key" in what else (MAX_CELL_SIZE_KEY in text), f"{what}: {text}"
        assert dict(table.scan()) == {b"r": {b"cf:known": b"1"}}  # nothing of them was written
        with pytest.raises(InvalidArgument, match=MAX_CELL_SIZE_KEY):
            conn.set_table_values("t", {MAX_CELL_SIZE_KEY: "lots"})
        conn.set_table_values("t", {MAX_CELL_SIZE_KEY: "0"})  # no limit, as in HBase
        table.put(b"r", {b"cf:v": big})
        table.put(b"k" * MAX_ROW_KEY_LENGTH, {b"cf:v": b"1"})
        assert table.row(b"r")[b"cf:v"] == big


def _batch_put(table, row, data):
    with table.batch(timestamp=5) as b:  # the batch's fast path: a known column, a fixed timestamp
        b.put(row, data)


@pytest.mark.spark
def test_odd_data_through_a_spark_write_and_read(spark, tmp_path):
    """Spark writes odd keys, the longest key and a 20 MB cell (a bulk load: HBase's
    bulk load checks no cell size either); Spark reads them back with the row of
    50,000 qualifiers and the empty qualifier, put through the embedded API."""
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        table = conn.create_table("t", {"cf": {}, "w": {}}, split_keys=[b"\x00\xff"],
                                  settings={"extra": {MAX_CELL_SIZE_KEY: "0"}})
        table.put(b"wide", {b"w:" + k.split(b":", 1)[1]: v for k, v in WIDE.items()} | {b"w:": b"empty"})
    keys = ODD_KEYS + [LONG_KEY, b"big"]
    values = [b"odd%d" % i for i in range(len(ODD_KEYS))] + [b"long", os.urandom(BIG_SIZE)]
    mapping = "key BINARY :key, v BINARY cf:v, m MAP<STRING,STRING> w:"
    options = {"root": root, "table": "t", "hbase.columns.mapping": mapping}
    df = spark.createDataFrame([(bytearray(k), bytearray(v), None) for k, v in zip(keys, values)],
                               "key BINARY, v BINARY, m MAP<STRING,STRING>")
    df.write.format("regionscan").options(**options).mode("append").save()
    got = {bytes(r.key): (None if r.v is None else bytes(r.v), r.m)
           for r in spark.read.format("regionscan").options(**options).load().collect()}
    assert {k: v for k, (v, _) in got.items() if k != b"wide"} == dict(zip(keys, values))
    wide = got[b"wide"][1]
    assert len(wide) == 50_001 and wide[""] == "empty" and wide["q49999"] == "49999"
    with storage.connect(root) as conn:
        stored = {k: d.get(b"cf:v") for k, d in conn.table("t").scan(columns=[b"cf:v"])}
        assert stored == dict(zip(keys, values))
