"""Reverse ``scan()`` of a clean file, streamed forward by chunks and reversed
(storage/read/reverse_stream.py): the same rows as the forward scan, last
first, for dense and sparse rows, rows wider than a block, several versions,
limits, ranges, timestamps and column order."""

from __future__ import annotations

from collections import OrderedDict

import pyarrow as pa
import pytest

import storage
from storage.cells import CELL_SCHEMA
from storage.read import batch_scan, reverse_stream

ROWS = 400


def _key(i: int) -> bytes:
    return b"r%04d" % i


def _fill(table, shape: str) -> None:
    for i in range(ROWS):
        if shape == "dense":
            data = {b"cf:a": b"a%d" % i, b"cf:b": b"b%d" % i}
        elif shape == "sparse":  # rows lack columns, blocks hold different qualifier sets
            data = {b"cf:a": b"a%d" % i} if i % 3 else {b"cf:b": b"b%d" % i, b"cf:c%d" % (i % 5): b"c"}
        elif shape == "wide":  # every 50th row wider than a block: its cells come as a cell batch
            data = {b"cf:q%03d" % j: b"v" * 40 for j in range(40)} if i % 50 == 0 else {b"cf:a": b"a%d" % i}
        else:  # versions: three puts per row, the newest kept by a one-version scan
            for ts in (10, 20, 30):
                table.put(_key(i), {b"cf:a": b"a%d@%d" % (i, ts)}, timestamp=ts)
            continue
        table.put(_key(i), data, timestamp=100 + i)


@pytest.fixture(params=["dense", "sparse", "wide", "versions"])
def table(request, tmp_path):
    conn = storage.connect(str(tmp_path / "root"))
    t = conn.create_table("t", {"cf": {"block_size": 512, "max_versions": 3}}, split_keys=[_key(150), _key(300)])
    _fill(t, request.param)
    t.flush()
    t.compact()
    yield t
    conn.close()


@pytest.fixture
def streamed(monkeypatch):
    """Counts the reverse scans that took the reversed stream."""
    calls = []
    original = batch_scan.reversed_stream

    def spy(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(batch_scan, "reversed_stream", spy)
    return calls


@pytest.mark.parametrize("kwargs", [
    {}, {"include_timestamp": True}, {"columns": [b"cf:a"]}, {"row_start": _key(320), "row_stop": _key(90)},
    {"batch_size": 7},
])
def test_reverse_rows_are_the_forward_rows_last_first(table, streamed, kwargs):
    forward_kwargs = dict(kwargs)
    if "row_start" in kwargs:  # a reverse scan starts at its highest row
        forward_kwargs = {"row_start": kwargs["row_stop"] + b"\x00", "row_stop": kwargs["row_start"] + b"\x00"}
    forward = list(table.scan(**forward_kwargs))
    assert forward
    assert list(table.scan(reverse=True, **kwargs)) == forward[::-1]
    assert streamed  # the reversed stream served it


@pytest.mark.parametrize("limit", [1, 2, 49, 50, 51, 149, 150, 151, 399, 400, 1000])
def test_a_limit_takes_the_last_rows(table, streamed, limit):
    forward = list(table.scan())
    assert list(table.scan(reverse=True, limit=limit)) == forward[::-1][:limit]
    assert streamed


def test_sorted_columns_keep_their_order(table, streamed):
    forward = list(table.scan(sorted_columns=True))
    backward = list(table.scan(reverse=True, sorted_columns=True))
    assert backward == forward[::-1]
    assert all(type(d) is OrderedDict and list(d) == sorted(d) for _, d in backward)


def test_a_filter_or_a_memstore_row_takes_the_other_path(table, streamed):
    forward = list(table.scan(filter="PageFilter(3)"))
    assert forward == list(table.scan())[:3]
    # a page of three, counted from the highest row
    assert list(table.scan(reverse=True, filter="PageFilter(3)")) == list(table.scan())[::-1][:3]
    assert not streamed
    table.put(_key(5), {b"cf:a": b"new"})
    assert list(table.scan(reverse=True))[-6] == (_key(5), {**dict(table.scan(row_prefix=_key(5))).get(_key(5))})
    assert len(streamed) == 2  # the two regions without memstore rows


def test_reverse_rows_of_a_cell_batch_keep_each_rows_cells_in_order():
    cells = pa.RecordBatch.from_pydict({
        "row": [b"a", b"a", b"b", b"c", b"c", b"c"],
        "family": [b"f"] * 6,
        "qualifier": [b"x", b"y", b"x", b"x", b"y", b"z"],
        "timestamp": [1] * 6,
        "type": [4] * 6,
        "value": [b"1", b"2", b"3", b"4", b"5", b"6"],
    }, schema=CELL_SCHEMA)
    out = reverse_stream.reverse_rows(cells)
    assert out.column("row").to_pylist() == [b"c", b"c", b"c", b"b", b"a", b"a"]
    assert out.column("qualifier").to_pylist() == [b"x", b"y", b"z", b"x", b"x", b"y"]
    rows = pa.RecordBatch.from_pydict({"key": [b"a", b"b"], "cf:x": [b"1", None]})
    assert reverse_stream.reverse_rows(rows).to_pydict() == {"key": [b"b", b"a"], "cf:x": [None, b"1"]}


def test_a_write_flush_and_compaction_mid_scan_leave_its_rows_as_they_were(table, streamed):
    before = list(table.scan())[::-1]
    scan = table.scan(reverse=True, batch_size=10)
    head = [next(scan) for _ in range(10)]
    for i in range(0, ROWS, 7):  # updates, deletes and new rows land while the scan is open
        table.put(_key(i), {b"cf:a": b"changed"})
        table.delete(_key(i + 1))
        table.put(_key(i) + b"+", {b"cf:a": b"new"})
    table.flush()
    table.compact()
    assert head + list(scan) == before  # the scan reads at its read point, over the files it pinned
    assert streamed
    after = dict(table.scan())
    assert after[_key(7)] == {**before[::-1][7][1], b"cf:a": b"changed"} and _key(8) not in after
