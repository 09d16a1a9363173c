"""The engine worker's filtered reads decode late and still return exactly the filtered rows.

``connector.worker.read_ops.decoded_batches`` with filters tests the filter's
columns first (a range's two bounds together, an ``IS NOT NULL`` another
condition implies not at all, a null test after the comparisons), then takes
only the stored columns each later step decodes at the rows still passing.
Whatever the order, its rows must be those of the same read without filters,
filtered afterwards row by row in SQL's three-valued logic.  The table has
nulls, deleted rows and cells, several versions of updated cells (flushed and
in the memstore), rows only in the memstore, and decimal, date, bigint and
string columns; batches are small so that some keep more than half their rows,
some fewer, and some none.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

import storage
from connector.decoded_filters import DecodedFilter
from connector.source_config import SourceConfig
from connector.stored_dates import STORED_DATE_ROWS
from connector.worker import read_ops
from connector.worker.read_plan import ReadPlan, decode_filters

MAPPING = ("k STRING :key, q DECIMAL(15,2) cf:q, p DECIMAL(15,2) cf:p, day DATE cf:day, n BIGINT cf:n, "
           "s STRING cf:s")
ROWS = 600
_EPOCH = dt.date(1970, 1, 1)


def _row(j: int, bump: int = 0) -> dict:
    return {"k": f"r{j:04d}",
            "q": None if j % 17 == 5 else Decimal(j % 50 + bump).scaleb(0) + Decimal("0.25"),
            "p": None if j % 23 == 0 else Decimal(j * 131 % 9973) / 100 - 20,
            "day": None if j % 19 == 0 else dt.date(1994, 1, 1) + dt.timedelta(days=(j * 37) % 900),
            "n": None if j % 13 == 0 else j * 1_000_003 - 250_000_000 + bump,
            "s": None if j % 7 == 0 else f"s{j % 11}"}


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> dict:
    """Two regions; a flushed file, updated cells (a second version, some flushed, some in the
    memstore), deleted rows and cells, and rows only in the memstore."""
    root = str(tmp_path_factory.mktemp("late") / "root")
    opts = {"root": root, "table": "late", "hbase.columns.mapping": MAPPING}
    serde = SourceConfig.from_options(opts).read_serde()
    conn = storage.connect(root)
    table = conn.create_table("late", {"cf": {"max_versions": 3}}, split_keys=[b"r0300"],
                              settings={"wal_sync": "none"})
    with table.batch() as batch:
        for j in range(450):
            batch.put(*serde.serialize(_row(j)))
    with table.batch() as batch:
        for j in range(100, 160):  # a second version, flushed
            batch.put(*serde.serialize(_row(j, bump=7)))
    table.flush()
    with table.batch() as batch:
        for j in range(450, ROWS):  # rows in the memstore only
            batch.put(*serde.serialize(_row(j)))
        for j in range(200, 260):  # a newer version in the memstore over a flushed one
            batch.put(*serde.serialize(_row(j, bump=3)))
    for j in range(300, 320):
        table.delete(f"r{j:04d}".encode())
    for j in range(320, 340):
        table.delete(f"r{j:04d}".encode(), columns=[b"cf:day"])  # day reads as null
    table.delete(b"r0500")  # a memstore row deleted
    conn.close()
    return opts


def _date(s: str) -> dict:
    return {"t": "date", "v": (dt.date.fromisoformat(s) - _EPOCH).days}


def _dec(s: str) -> dict:
    return {"t": "decimal", "v": s}


def _not_null(*columns: str) -> list[dict]:
    return [{"op": "IsNotNull", "column": c} for c in columns]


FILTERS = {
    # TPC-H q6's shape: a date range, a decimal range and a decimal bound, each with Spark's IS NOT NULL
    "q6": _not_null("day", "p", "q") + [
        {"op": "GreaterThanOrEqual", "column": "day", "value": _date("1994-06-01")},
        {"op": "LessThan", "column": "day", "value": _date("1995-01-01")},
        {"op": "GreaterThanOrEqual", "column": "p", "value": _dec("-5.5")},
        {"op": "LessThanOrEqual", "column": "p", "value": _dec("40")},
        {"op": "LessThan", "column": "q", "value": _dec("24")}],
    # q14's: a month of dates, and an IS NOT NULL of an output column no comparison implies
    "q14": _not_null("day", "n") + [
        {"op": "GreaterThanOrEqual", "column": "day", "value": _date("1995-02-01")},
        {"op": "LessThan", "column": "day", "value": _date("1995-03-01")}],
    "broad": [{"op": "GreaterThan", "column": "n", "value": {"t": "int", "v": -240_000_000}},
              {"op": "IsNull", "column": "s"}],
    "in and or": [{"op": "In", "column": "s", "values": [{"t": "string", "v": "s3"}, {"t": "string", "v": "s5"},
                                                        {"t": "null"}]},
                  {"op": "Or", "children": [{"op": "LessThan", "column": "q", "value": _dec("10.25")},
                                            {"op": "IsNull", "column": "day"}]}],
    "none pass": [{"op": "GreaterThan", "column": "q", "value": _dec("1000")}],
    "null-safe": _not_null("q") + [{"op": "EqualNullSafe", "column": "s", "value": {"t": "string", "v": "s4"}},
                                   {"op": "StringStartsWith", "column": "s", "value": {"t": "string", "v": "s"}}],
}


def _truth(f, row: dict):
    """A filter node on one row in SQL's three-valued logic."""
    kind = type(f).__name__
    if kind in ("And", "Or"):
        values = [_truth(c, row) for c in f.children]
        decisive = kind == "Or"
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    v = row[f.attribute[0]]
    if kind == "IsNull":
        return v is None
    if kind == "IsNotNull":
        return v is not None
    if kind == "EqualNullSafe":
        return v == f.value if v is not None and f.value is not None else (v is None and f.value is None)
    if v is None:
        return None
    if kind == "In":
        present = [c for c in f.value if c is not None]
        return True if v in present else (None if len(present) < len(f.value) else False)
    if kind == "StringStartsWith":
        return v.startswith(f.value)
    return {"EqualTo": v == f.value, "LessThan": v < f.value, "LessThanOrEqual": v <= f.value,
            "GreaterThan": v > f.value, "GreaterThanOrEqual": v >= f.value}[kind]


def _read(opts: dict, columns: list[str], filters: list[dict]) -> list[dict]:
    # small batches (64 rows): some keep most of their rows, some few, some none
    opts = {**opts, "hbase.mapreduce.scan.cachedrows": "64"}
    config = SourceConfig.from_options(opts)
    rp = ReadPlan.from_request({"options": opts, "columns": columns, "filters": filters},
                               config.spark_arrow_schema(columns))
    if filters:
        assert rp.decoded_filter is not None and rp.pushdown().residual == []
    batches = list(read_ops.decoded_batches(rp, rp.splits(rp.pushdown()), None, rp.target, {}))
    assert all(b.schema == rp.target for b in batches)
    return pa.Table.from_batches(batches, rp.target).to_pylist() if batches else []


@pytest.mark.parametrize("name", sorted(FILTERS))
@pytest.mark.parametrize("columns", [["k", "p", "n"], ["p"], ["k", "q", "p", "day", "n", "s"]])
def test_a_filtered_read_equals_the_read_filtered_afterwards(table, name, columns):
    filters = FILTERS[name]
    every = ["k", "q", "p", "day", "n", "s"]
    nodes = decode_filters(filters)
    want = [{c: row[c] for c in columns} for row in _read(table, every, [])
            if all(_truth(f, row) is True for f in nodes)]
    assert _read(table, columns, filters) == want
    if name != "none pass":
        assert want, name  # the filter keeps rows: the test compares something


def test_the_rows_read_without_filters_are_the_tables(table):
    """The reference itself: deletes, versions and the memstore as written."""
    rows = {r["k"]: r for r in _read(table, ["k", "q", "p", "day", "n", "s"], [])}
    assert len(rows) == ROWS - 20 - 1
    assert "r0305" not in rows and "r0500" not in rows
    assert rows["r0120"]["n"] == _row(120, bump=7)["n"] and rows["r0230"]["n"] == _row(230, bump=3)["n"]
    assert rows["r0325"]["day"] is None and rows["r0325"]["n"] == _row(325)["n"]
    assert rows["r0550"] == _row(550)


def test_implied_null_tests_are_not_evaluated_and_ranges_are_tested_together():
    """q6's eight conditions make three steps: the date range, the decimal range, the bound."""
    flt = DecodedFilter(decode_filters(FILTERS["q6"]))
    steps = [[type(f).__name__ + ":" + f.attribute[0] for f in group] for group in flt._groups]
    assert steps == [["GreaterThanOrEqual:day", "LessThan:day"], ["GreaterThanOrEqual:p", "LessThanOrEqual:p"],
                     ["LessThan:q"]]
    # an IS NOT NULL no comparison implies stays, after the comparisons
    flt = DecodedFilter(decode_filters(FILTERS["q14"]))
    assert [type(f).__name__ + ":" + f.attribute[0] for group in flt._groups for f in group] == [
        "GreaterThanOrEqual:day", "LessThan:day", "IsNotNull:n"]


def _read_counted(opts: dict, columns: list[str], filters: list[dict]) -> tuple[list[dict], dict]:
    """``_read``'s rows, and the scan statistics the read added."""
    opts = {**opts, "hbase.mapreduce.scan.cachedrows": "64"}
    config = SourceConfig.from_options(opts)
    rp = ReadPlan.from_request({"options": opts, "columns": columns, "filters": filters},
                               config.spark_arrow_schema(columns))
    stats: dict = {}
    batches = list(read_ops.decoded_batches(rp, rp.splits(rp.pushdown()), None, rp.target, stats))
    rows = pa.Table.from_batches(batches, rp.target).to_pylist() if batches else []
    return rows, stats


# each bound at a date some rows hold (1994-01-01 + 37j mod 900 days), so off-by-one-day errors show
DATE_FILTERS = {
    "range": [{"op": "GreaterThanOrEqual", "column": "day", "value": _date("1994-06-06")},
              {"op": "LessThan", "column": "day", "value": _date("1995-01-13")}],
    "open range": [{"op": "GreaterThan", "column": "day", "value": _date("1994-06-06")},
                   {"op": "LessThanOrEqual", "column": "day", "value": _date("1995-01-13")}],
    "equal": [{"op": "EqualTo", "column": "day", "value": _date("1994-02-07")}],
    "then a decimal": [{"op": "LessThan", "column": "day", "value": _date("1995-03-01")},
                       {"op": "GreaterThan", "column": "q", "value": _dec("20")}] + _not_null("day", "q"),
}


@pytest.mark.parametrize("name", sorted(DATE_FILTERS))
def test_date_comparisons_are_tested_on_the_stored_cells(table, name):
    """A binary DATE column's comparisons are tested on its stored 8-byte milliseconds before
    any date is decoded (``stored_date_rows``), with the answer of decoding first: nulls,
    deleted cells, versions and the memstore included."""
    filters = DATE_FILTERS[name]
    every = ["k", "q", "p", "day", "n", "s"]
    nodes = decode_filters(filters)
    want = [row for row in _read(table, every, []) if all(_truth(f, row) is True for f in nodes)]
    assert want
    got, stats = _read_counted(table, every, filters)
    assert got == want
    assert stats.get(STORED_DATE_ROWS, 0) >= ROWS - 21  # every row the read met, in its first test
    got, stats = _read_counted(table, ["k"], filters)  # the date never decoded at all
    assert got == [{"k": row["k"]} for row in want]
    assert stats.get(STORED_DATE_ROWS, 0) >= ROWS - 21


def _small_table(tmp_path, mapping: str, puts) -> dict:
    root = str(tmp_path / "root")
    opts = {"root": root, "table": "d", "hbase.columns.mapping": mapping}
    serde = SourceConfig.from_options(opts).read_serde()
    with storage.connect(root) as conn:
        table = conn.create_table("d", {"cf": {}}, settings={"wal_sync": "none"})
        with table.batch() as batch:
            for j in range(200):
                batch.put(*serde.serialize({"k": f"r{j:04d}", "day": dt.date(1999, 12, 1) + dt.timedelta(days=j),
                                            "n": j}))
        table.flush()
        for row, cells in puts:
            table.put(row, cells)
    return opts


def test_an_ordered_date_column_is_tested_on_its_stored_cells(tmp_path):
    """``#o`` dates (sign bit flipped): the stored form reads them as the same days."""
    opts = _small_table(tmp_path, "k STRING :key, day DATE cf:day#o, n BIGINT cf:n", [])
    filters = [{"op": "GreaterThanOrEqual", "column": "day", "value": _date("1999-12-31")},
               {"op": "LessThanOrEqual", "column": "day", "value": _date("2000-01-02")}]
    rows, stats = _read_counted(opts, ["k", "day"], filters)
    assert rows == [{"k": f"r{j:04d}", "day": dt.date(1999, 12, 1) + dt.timedelta(days=j)} for j in (30, 31, 32)]
    assert stats[STORED_DATE_ROWS] == 200


@pytest.mark.parametrize("bad", [b"\x00\x00\x00\xdc\x6a\xcf\xac", (1 << 62).to_bytes(8, "big")],
                         ids=["seven bytes", "a day out of range"])
def test_a_date_cell_that_does_not_decode_still_fails_the_read(tmp_path, bad):
    """A batch holding a cell that would not decode is decoded and compared as before, so the
    cell fails the read even where the comparison would drop its row."""
    opts = _small_table(tmp_path, "k STRING :key, day DATE cf:day, n BIGINT cf:n", [(b"r0005", {b"cf:day": bad})])
    filters = [{"op": "GreaterThanOrEqual", "column": "day", "value": _date("2000-03-01")}]
    with pytest.raises(Exception) as unfiltered:
        _read_counted(opts, ["k", "day"], [])
    with pytest.raises(Exception) as filtered:
        _read_counted(opts, ["k"], filters)
    assert str(filtered.value) == str(unfiltered.value)
    assert "r0005" in str(filtered.value)
