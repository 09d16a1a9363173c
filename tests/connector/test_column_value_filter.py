"""ColumnValueFilter on a real table: HBase 2's semantics on the cell path (the
scanners), the batch path over cells and the rows output, which on a
compacted table reads dense blocks; versions, deletes, scan columns, FilterLists
and bad arguments."""

from __future__ import annotations

import operator

import pytest

import storage
from storage.cells import Cell, batch_to_cells, cells_to_batch
from storage.errors import InvalidArgument
from storage.filters import (
    BinaryComparator,
    BinaryPrefixComparator,
    ColumnValueFilter,
    CompareOperator,
    RegexStringComparator,
    SubstringComparator,
)

ROWS = 40
OPS = {"<": operator.lt, "<=": operator.le, "=": operator.eq, "!=": operator.ne, ">=": operator.ge, ">": operator.gt}


def _value(r: int) -> bytes:
    return b"v%d" % (r % 10) + b"x" * (r % 3)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """The same rows twice: compacted into dense store files, and in the memstore.

    Every row has ``cf:b`` and ``d:a``; rows not divisible by 4 have ``cf:a``
    (so a quarter of the rows lack the tested column)."""
    root = tmp_path_factory.mktemp("cvf")
    out = []
    for name in ("compacted", "memory"):
        conn = storage.connect(str(root / name))
        table = conn.create_table("t", {"cf": {"max_versions": 3}, "d": {}}, settings={"wal_sync": "none"})
        for r in range(ROWS):
            data = {b"cf:b": b"b%d" % r, b"d:a": _value(r)}
            if r % 4:
                data[b"cf:a"] = _value(r)
            table.put(b"r%03d" % r, data, timestamp=100)
        out.append(table)
    out[0].flush()
    out[0].compact()
    return out


def _cells_batch(table, flt, **kw) -> list[tuple]:
    return [tuple(c.values()) for b in table.scan_batches(filter=flt, output="cells", **kw) for c in b.to_pylist()]


def _cells_scanner(table, flt, **kw) -> list[tuple]:
    out = []
    with table.scanner(filter=flt, **kw) as scanner:
        while rows := scanner.next_rows(100):
            out.extend(tuple(c) for row in rows for c in row)
    return out


def _rows(table, flt, **kw) -> list[dict]:
    return [r for b in table.scan_batches(filter=flt, output="rows", **kw) for r in b.to_pylist()]


def _every_path(tables, flt, **kw) -> list[tuple]:
    """The cells every path returns (they must agree); the rows output is checked against them."""
    compacted, memory = tables
    want = _cells_scanner(memory, flt, **kw)
    for table in tables:
        assert _cells_scanner(table, flt, **kw) == want
        assert _cells_batch(table, flt, **kw) == want
    columns = kw.get("columns") or [b"cf:a", b"cf:b"]
    if kw.get("max_versions", 1) == 1 and all(b":" in c for c in columns):  # one value column per spec
        rows = _rows(compacted, flt, columns=columns)
        assert rows == _rows(memory, flt, columns=columns)
        wanted = {bytes(c) for c in columns}
        by_row: dict = {}
        for c in want:
            if c[1] + b":" + c[2] in wanted:
                by_row.setdefault(c[0], {})[(c[1] + b":" + c[2]).decode()] = c[5]
        assert [(r["key"], {k: v for k, v in r.items() if v is not None and k != "key"}) for r in rows] == list(by_row.items())
    return want


def test_compacted_table_reads_dense_blocks(tables):
    readers = tables[0].store_file_readers()
    assert readers and all(r.format_version >= 2 and set(r._index.layouts) == {1} for r in readers)


@pytest.mark.parametrize("symbol", list(OPS))
def test_every_operator_keeps_only_the_matching_cells_of_the_column(tables, symbol):
    got = _every_path(tables, f"ColumnValueFilter ('cf', 'a', {symbol}, 'binary:v5')")
    test = OPS[symbol]
    expected = [
        (b"r%03d" % r, b"cf", b"a", 100, 4, _value(r)) for r in range(ROWS) if r % 4 and test(_value(r), b"v5")
    ]
    assert got == expected and expected  # rows without cf:a and cells of other columns never pass


def test_no_op_matches_nothing(tables):
    assert _every_path(tables, "ColumnValueFilter ('cf', 'a', NO_OP, 'binary:v5')") == []


@pytest.mark.parametrize(
    "comparator, matches",
    [
        (BinaryPrefixComparator(b"v3"), lambda v: v[:2] == b"v3"),
        (SubstringComparator(b"3X"), lambda v: b"3x" in v),
        (RegexStringComparator(b"^v[2-4]x$"), lambda v: v in (b"v2x", b"v3x", b"v4x")),
    ],
)
@pytest.mark.parametrize("symbol", ["=", "!="])
def test_matching_comparators(tables, comparator, matches, symbol):
    flt = ColumnValueFilter("cf", "a", symbol, comparator)
    got = _every_path(tables, flt)
    want = [r for r in range(ROWS) if r % 4 and matches(_value(r)) == (symbol == "=")]
    assert [c[0] for c in got] == [b"r%03d" % r for r in want] and want
    assert {(c[1], c[2]) for c in got} == {(b"cf", b"a")}


def test_a_missing_column_or_family_passes_nothing(tables):
    assert _every_path(tables, "ColumnValueFilter ('cf', 'zz', !=, 'binary:v5')") == []
    assert _every_path(tables, "ColumnValueFilter ('nope', 'a', !=, 'binary:v5')") == []


def test_the_column_must_be_among_the_scanned_columns(tables):
    flt = "ColumnValueFilter ('cf', 'a', =, 'binary:v1')"
    assert _every_path(tables, flt, columns=[b"cf:b"]) == []  # as in HBase: the filter never sees cf:a
    assert [c[0] for c in _every_path(tables, flt, columns=[b"cf"])] == [b"r021"]


def test_filter_lists(tables):
    both = _every_path(tables, "ColumnValueFilter ('cf', 'a', =, 'binary:v1x') OR ColumnValueFilter ('d', 'a', =, 'binary:v1x')")
    assert [(c[0], c[1]) for c in both] == [(b"r%03d" % r, f) for r in (1, 31) for f in (b"cf", b"d")]
    anded = _every_path(tables, "PrefixFilter ('r02') AND ColumnValueFilter ('cf', 'a', >=, 'binary:v5')")
    assert [c[0] for c in anded] == [b"r%03d" % r for r in range(20, 30) if r % 4 and _value(r) >= b"v5"]
    # a row kept whole by SingleColumnValueFilter keeps every cell under OR, only cf:a's match under AND
    row_or = _every_path(tables, "SingleColumnValueFilter ('cf', 'b', =, 'binary:b7') OR ColumnValueFilter ('cf', 'a', =, 'binary:v1x')")
    assert [(c[0], c[2]) for c in row_or if c[1] == b"cf"] == [(b"r001", b"a"), (b"r007", b"a"), (b"r007", b"b"), (b"r031", b"a")]
    row_and = _every_path(tables, "SingleColumnValueFilter ('cf', 'b', =, 'binary:b31') AND ColumnValueFilter ('cf', 'a', =, 'binary:v1x')")
    assert [(c[0], c[2]) for c in row_and] == [(b"r031", b"a")]
    skip = _every_path(tables, "SKIP ColumnValueFilter ('cf', 'a', =, 'binary:v1x')", columns=[b"cf:a"])
    assert [c[0] for c in skip] == [b"r001", b"r031"]


def test_a_scan_reads_only_the_filtered_family(tables):
    """No cell of another family can pass a ColumnValueFilter, so the batch path
    leaves the other families' files unread (and streams the one family)."""
    compacted, memory = tables
    others = [f.reader for r in compacted._regions for name, s in r.stores.items() if name != "cf" for f in s.files]
    ours = [f.reader for r in compacted._regions for f in r.stores["cf"].files]
    assert others and ours
    for reader in others + ours:
        reader.counters.reset()
    flt = "ColumnValueFilter ('cf', 'a', >=, 'binary:v7')"
    got = _cells_batch(compacted, flt)
    assert got == _cells_scanner(memory, flt) and got
    assert _rows(compacted, flt) == _rows(memory, flt)
    touched = lambda readers: sum(r.counters.snapshot()["reads"] + r.counters.snapshot()["cache_hits"] for r in readers)
    assert touched(others) == 0 and touched(ours) > 0


def test_each_returned_version_is_tested_on_its_own(tmp_path):
    """HBase 2 counts versions before the filter: with one version only the newest
    visible cell is tested; with more, each one is, and only matching ones are kept."""
    conn = storage.connect(str(tmp_path / "v"))
    table = conn.create_table("t", {"cf": {"max_versions": 5}}, settings={"wal_sync": "none"})
    table.put(b"r1", {b"cf:a": b"match"}, timestamp=1)
    table.put(b"r1", {b"cf:a": b"other"}, timestamp=2)
    table.put(b"r1", {b"cf:a": b"match"}, timestamp=3)
    table.put(b"r1", {b"cf:a": b"later"}, timestamp=4)
    table.put(b"r2", {b"cf:a": b"match"}, timestamp=1)
    flt = "ColumnValueFilter ('cf', 'a', =, 'binary:match')"

    def stamps(**kw):
        cell_path = _cells_scanner(table, flt, **kw)
        assert _cells_batch(table, flt, **kw) == cell_path
        return [(c[0], c[3]) for c in cell_path]

    for _ in range(2):  # in the memstore, then from a store file
        assert stamps() == [(b"r2", 1)]  # r1's newest version is "later"
        assert stamps(max_versions=2) == [(b"r1", 3), (b"r2", 1)]
        assert stamps(max_versions=5) == [(b"r1", 3), (b"r1", 1), (b"r2", 1)]
        assert stamps(time_range=(0, 4)) == [(b"r1", 3), (b"r2", 1)]  # the newest visible in the range
        table.flush()
    table.delete_version(b"r1", b"cf:a", 4)
    assert stamps() == [(b"r1", 3), (b"r2", 1)]  # a deleted version is not visible, so 3 is the newest
    conn.close()


def test_filter_object_settings_and_errors():
    f = ColumnValueFilter(b"cf", "q", CompareOperator.GREATER, BinaryComparator(b"5"))
    assert (f.family, f.qualifier, f.op) == (b"cf", b"q", CompareOperator.GREATER)
    assert f == ColumnValueFilter("cf", b"q", ">", BinaryComparator("5")) and hash(f) == hash(ColumnValueFilter("cf", b"q", ">", BinaryComparator("5")))
    assert f != ColumnValueFilter("cf", b"q", ">=", BinaryComparator("5"))
    assert f.columns_needed() is None  # as HBase, it never widens the scan's columns
    with pytest.raises(InvalidArgument, match="ColumnValueFilter comparator must be a Comparator"):
        ColumnValueFilter("cf", "q", "=", b"binary:5")
    with pytest.raises(InvalidArgument, match="ColumnValueFilter family must be bytes or str"):
        ColumnValueFilter(5, "q", "=", BinaryComparator(b"5"))
    with pytest.raises(InvalidArgument, match="compare operator '=='") as info:
        ColumnValueFilter("cf", "q", "==", BinaryComparator(b"5"))
    assert "\n" not in str(info.value)


def test_cell_path_protocol_on_one_row():
    f = ColumnValueFilter("cf", "a", "=", BinaryComparator(b"x"))
    row = [Cell(b"r", b"cf", b"a", 2, 4, b"x"), Cell(b"r", b"cf", b"a", 1, 4, b"y"), Cell(b"r", b"cf", b"b", 2, 4, b"x"),
           Cell(b"r", b"d", b"a", 2, 4, b"x")]
    assert f.filter_row_key(b"r") is False
    assert f.filter_row_cells(row) == row[:1]
    assert f.filter_row_cells(row[1:]) is None
    assert batch_to_cells(f.filter_batch(cells_to_batch(row))) == row[:1]


def test_connector_explain_lists_the_filter(tmp_path):
    import connector

    conn = storage.connect(str(tmp_path / "x"))
    conn.create_table("t", {"cf": {}}, settings={"wal_sync": "none"}).put(b"k", {b"cf:s": b"x"})
    conn.close()
    flt = "ColumnValueFilter ('cf', 's', >=, 'regexstring:^x')"
    plan = connector.explain({"root": str(tmp_path / "x"), "table": "t", "hbase.columns.mapping": ":key,cf:s",
                              "filter": flt})
    assert plan.engine_filter == flt and f"engine filter: {flt}" in str(plan)
