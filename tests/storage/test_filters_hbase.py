"""HBase's own filter cases (TestFilter, TestInclusiveStopFilter, TestDependentColumnFilter,
TestFuzzyRowFilter, TestColumnPaginationFilter, TestNullComparator, TestRandomRowFilter),
run on a real table through both scan paths, forward and reverse.

The data and the expected answers are those of HBase's tests: TestFilter's
table holds two groups of rows (``testRowOne-*`` with ``testQualifierOne-*``
columns, ``testRowTwo-*`` with ``testQualifierTwo-*``) in two families,
written in two halves around a flush, then loses every row's second
qualifier and each group's second row to deletes: six rows of six columns.
"""

from __future__ import annotations

import pytest

import storage
from storage.errors import InvalidArgument
from storage.filters import (
    BinaryComparator,
    ColumnCountGetFilter,
    ColumnPaginationFilter,
    CompareOperator,
    DependentColumnFilter,
    FilterList,
    FirstKeyOnlyFilter,
    FuzzyRowFilter,
    InclusiveStopFilter,
    NullComparator,
    PageFilter,
    PrefixFilter,
    RandomRowFilter,
    RowFilter,
    SingleColumnValueFilter,
    ValueFilter,
    WhileMatchFilter,
)

ROWS_ONE = [b"testRowOne-%d" % i for i in range(4)]
ROWS_TWO = [b"testRowTwo-%d" % i for i in range(4)]
FAMILIES = [b"testFamilyOne", b"testFamilyTwo"]
QUALIFIERS_ONE = [b"testQualifierOne-%d" % i for i in range(4)]
QUALIFIERS_TWO = [b"testQualifierTwo-%d" % i for i in range(4)]
VALUES = [b"testValueOne", b"testValueTwo"]
NUM_ROWS, COLS_PER_ROW = 6, 6


def _col(family: bytes, qualifier: bytes) -> bytes:
    return family + b":" + qualifier


@pytest.fixture(scope="module", params=["flush-in-the-middle", "compacted"])
def table(request, tmp_path_factory):
    conn = storage.connect(str(tmp_path_factory.mktemp("hbase") / "root"))
    t = conn.create_table("TestFilter", {f.decode(): {"max_versions": 3} for f in FAMILIES},
                          settings={"wal_sync": "none"})
    for row in ROWS_ONE:
        t.put(row, {_col(FAMILIES[0], q): VALUES[0] for q in QUALIFIERS_ONE}, timestamp=1000)
    for row in ROWS_TWO:
        t.put(row, {_col(FAMILIES[1], q): VALUES[1] for q in QUALIFIERS_TWO}, timestamp=1000)
    t.flush()
    for row in ROWS_ONE:  # second half, families swapped
        t.put(row, {_col(FAMILIES[1], q): VALUES[0] for q in QUALIFIERS_ONE}, timestamp=1000)
    for row in ROWS_TWO:
        t.put(row, {_col(FAMILIES[0], q): VALUES[1] for q in QUALIFIERS_TWO}, timestamp=1000)
    for rows, qualifiers in ((ROWS_ONE, QUALIFIERS_ONE), (ROWS_TWO, QUALIFIERS_TWO)):
        for row in rows:  # every row loses its second qualifier
            t.delete(row, columns=[_col(f, qualifiers[1]) for f in FAMILIES], timestamp=2000)
        t.delete(rows[1], columns=[_col(f, q) for f in FAMILIES for q in qualifiers], timestamp=2000)
    if request.param == "compacted":
        t.compact()
    yield t
    conn.close()


def scan(t, **options) -> list[tuple[bytes, list[bytes]]]:
    """``(row, [columns])`` per row; both scan paths must give the same."""
    batch = [(row, list(cols)) for row, cols in t.scan(**options)]
    cell = [(row, list(cols)) for row, cols in t.scan(path="cell", **options)]
    assert batch == cell, options
    return batch


def verify(t, expected_rows: int, expected_keys: int, **options) -> list[bytes]:
    """TestFilter's verifyScan: that many rows, each with that many cells."""
    result = scan(t, **options)
    assert len(result) == expected_rows, result
    assert all(len(cols) == expected_keys for _, cols in result), result
    return [row for row, _ in result]


def test_no_filter(table):
    verify(table, NUM_ROWS, COLS_PER_ROW)
    verify(table, NUM_ROWS, COLS_PER_ROW, reverse=True)


def test_inclusive_stop_filter(table):
    assert verify(table, 2, 6, row_start=ROWS_ONE[0], row_stop=ROWS_ONE[3]) == [ROWS_ONE[0], ROWS_ONE[2]]
    assert verify(table, 3, 6, row_start=ROWS_ONE[0], filter=InclusiveStopFilter(ROWS_ONE[3])) == [
        ROWS_ONE[0], ROWS_ONE[2], ROWS_ONE[3]]
    verify(table, 2, 6, row_start=ROWS_TWO[0], row_stop=ROWS_TWO[3])
    verify(table, 3, 6, row_start=ROWS_TWO[0], filter="InclusiveStopFilter ('testRowTwo-3')")


def test_inclusive_stop_filter_with_reverse_scan(table):
    # the issue's case: reverse from testRowOne-3 with stop testRowOne-0 gives 3 rows, as HBase
    assert verify(table, 2, 6, row_start=ROWS_ONE[3], row_stop=ROWS_ONE[0], reverse=True) == [ROWS_ONE[3], ROWS_ONE[2]]
    assert verify(table, 3, 6, row_start=ROWS_ONE[3], reverse=True, filter=InclusiveStopFilter(ROWS_ONE[0])) == [
        ROWS_ONE[3], ROWS_ONE[2], ROWS_ONE[0]]
    verify(table, 2, 6, row_start=ROWS_TWO[3], row_stop=ROWS_TWO[0], reverse=True)
    # the scan ends below the stop row: no testRowOne row comes after testRowTwo-0
    assert verify(table, 3, 6, row_start=ROWS_TWO[3], reverse=True, filter="InclusiveStopFilter ('testRowTwo-0')") == [
        ROWS_TWO[3], ROWS_TWO[2], ROWS_TWO[0]]
    # inside lists and wrappers too, and the caller's filter object stays forward
    f = InclusiveStopFilter(ROWS_ONE[0])
    listed = FilterList("AND", [f, FirstKeyOnlyFilter()])
    assert verify(table, 3, 1, row_start=ROWS_ONE[3], reverse=True, filter=listed) == [
        ROWS_ONE[3], ROWS_ONE[2], ROWS_ONE[0]]
    assert verify(table, 3, 6, row_start=ROWS_ONE[3], reverse=True, filter=WhileMatchFilter(f)) == [
        ROWS_ONE[3], ROWS_ONE[2], ROWS_ONE[0]]
    assert not f.reverse and f.row_ranges() == [(b"", ROWS_ONE[0] + b"\x00")]
    assert f.oriented(True).row_ranges() == [(ROWS_ONE[0], None)] and f.oriented(True) == f


def _stop_row_tests(f) -> None:
    """HBase's TestInclusiveStopFilter.stopRowTests, on the row-key and the batch path."""
    assert not f.filter_row_key(b"good_row")
    assert not f.filter_row_key(b"stop_row")
    assert not f.filter_all_remaining()
    assert f.filter_row_key(b"zzzzzz")
    assert f.filter_all_remaining()  # the first row past the stop row ends the scan
    assert f.filter_row_key(b"good_row")  # and every row after it is refused, as HBase's filter
    f.reset()
    assert not f.filter_all_remaining() and not f.filter_row_key(b"good_row")


def test_inclusive_stop_filter_all_remaining():
    """TestInclusiveStopFilter.testStopRowIdentification and testSerialization (the
    filter string read back), then the same on cell batches and in filter lists."""
    from storage.filters import parse_filter_string
    from storage.cells import Cell, cells_to_batch

    f = InclusiveStopFilter(b"stop_row")
    _stop_row_tests(f)
    _stop_row_tests(parse_filter_string(repr(InclusiveStopFilter(b"stop_row"))))
    # reversed, the scan ends at the first row below the stop row
    back = InclusiveStopFilter(b"stop_row").oriented(True)
    assert not back.filter_row_key(b"zzzzzz") and not back.filter_all_remaining()
    assert back.filter_row_key(b"good_row") and back.filter_all_remaining()
    # a copy is independent, and the caller's object is untouched by a scan's copy
    g = InclusiveStopFilter(b"stop_row")
    twin = g.copy()
    twin.filter_row_key(b"zzzzzz")
    assert twin.filter_all_remaining() and not g.filter_all_remaining()

    def batch(rows):
        return cells_to_batch([Cell(r, b"f", b"q", 1, 4, b"v") for r in rows])

    b = InclusiveStopFilter(b"m")
    out = b.filter_batch(batch([b"a", b"m"]))
    assert out.num_rows == 2 and not b.filter_all_remaining()
    out = b.filter_batch(batch([b"m0", b"n"]))
    assert out.num_rows == 0 and b.filter_all_remaining()
    # lists: AND is done once its stop filter is; OR only when every child is
    ands = FilterList("AND", [PrefixFilter(b"n"), InclusiveStopFilter(b"m")])
    ors = FilterList("OR", [PrefixFilter(b"z"), InclusiveStopFilter(b"m")])
    for lst in (ands, ors):
        lst.filter_row_cells([Cell(b"n", b"f", b"q", 1, 4, b"v")])
    assert ands.filter_all_remaining() and not ors.filter_all_remaining()
    assert ors.filter_row_cells([Cell(b"z", b"f", b"q", 1, 4, b"v")]) is not None


def test_row_key_filters_with_reverse_scan(table):
    assert verify(table, 3, 6, reverse=True, filter=PrefixFilter(b"testRowOne")) == [
        ROWS_ONE[3], ROWS_ONE[2], ROWS_ONE[0]]
    for size in (6, 4, 2, 1):
        verify(table, size, 6, reverse=True, filter=PageFilter(size))
    assert verify(table, 3, 6, reverse=True, filter=RowFilter("<", BinaryComparator(ROWS_TWO[0]))) == [
        ROWS_ONE[3], ROWS_ONE[2], ROWS_ONE[0]]
    # WHILE ends a reverse scan at its first failing row: testRowTwo-3 comes first
    assert verify(table, 0, 6, reverse=True, filter=WhileMatchFilter(PrefixFilter(b"testRowOne"))) == []
    assert verify(table, 3, 6, filter=WhileMatchFilter(PrefixFilter(b"testRowOne"))) == [
        ROWS_ONE[0], ROWS_ONE[2], ROWS_ONE[3]]
    ranges = "MultiRowRangeFilter ('testRowOne-2', true, 'testRowTwo-0', true)"
    assert verify(table, 3, 6, reverse=True, filter=ranges) == [ROWS_TWO[0], ROWS_ONE[3], ROWS_ONE[2]]
    assert verify(table, 6, 1, reverse=True, filter=FirstKeyOnlyFilter())[0] == ROWS_TWO[3]


def test_column_pagination_filter(table):
    table.put(ROWS_ONE[0], {_col(FAMILIES[0], QUALIFIERS_ONE[0]): VALUES[0]}, timestamp=1500)  # a second version
    table.flush()
    try:
        def first(q_one, q_two, **options):
            return [(r, [_col(FAMILIES[0], q_one if r in ROWS_ONE else q_two)]) for r in
                    (ROWS_ONE[0], ROWS_ONE[2], ROWS_ONE[3], ROWS_TWO[0], ROWS_TWO[2], ROWS_TWO[3])]

        for reverse in (False, True):
            order = (lambda rows: rows[::-1]) if reverse else (lambda rows: rows)
            got = scan(table, max_versions=3, reverse=reverse, filter=ColumnPaginationFilter(1, 0))
            assert got == order(first(QUALIFIERS_ONE[0], QUALIFIERS_TWO[0]))  # one version only
            got = scan(table, max_versions=3, reverse=reverse, filter="ColumnPaginationFilter (1, 2)")
            assert got == order(first(QUALIFIERS_ONE[3], QUALIFIERS_TWO[3]))
            got = scan(table, reverse=reverse, filter=ColumnPaginationFilter(2, 2))
            assert [cols for _, cols in got] == order(
                [[_col(FAMILIES[0], q[3]), _col(FAMILIES[1], q[0])]
                 for q in [QUALIFIERS_ONE] * 3 + [QUALIFIERS_TWO] * 3])
            assert scan(table, reverse=reverse, filter=ColumnPaginationFilter(20, 140)) == []
    finally:
        table.delete_version(ROWS_ONE[0], _col(FAMILIES[0], QUALIFIERS_ONE[0]), 1500)
        table.flush()


def test_column_pagination_filter_column_offset(table):
    for reverse in (False, True):
        order = (lambda rows: rows[::-1]) if reverse else (lambda rows: rows)
        got = scan(table, reverse=reverse, filter=ColumnPaginationFilter(1, QUALIFIERS_ONE[1]))
        assert got == order([(r, [_col(FAMILIES[0], QUALIFIERS_ONE[2])]) for r in (ROWS_ONE[0], ROWS_ONE[2], ROWS_ONE[3])]
                            + [(r, [_col(FAMILIES[0], QUALIFIERS_TWO[0])]) for r in (ROWS_TWO[0], ROWS_TWO[2], ROWS_TWO[3])])
        twos = (ROWS_TWO[0], ROWS_TWO[2], ROWS_TWO[3])
        got = scan(table, reverse=reverse, filter="ColumnPaginationFilter (2, 'testQualifierTwo-2')")
        assert got == order([(r, [_col(FAMILIES[0], QUALIFIERS_TWO[2]), _col(FAMILIES[0], QUALIFIERS_TWO[3])])
                             for r in twos])
        # the page runs on into the next family without comparing again
        got = scan(table, reverse=reverse, filter=ColumnPaginationFilter(3, QUALIFIERS_TWO[2]))
        assert got == order([(r, [_col(FAMILIES[0], QUALIFIERS_TWO[2]), _col(FAMILIES[0], QUALIFIERS_TWO[3]),
                                  _col(FAMILIES[1], QUALIFIERS_TWO[0])]) for r in twos])
        got = scan(table, reverse=reverse, columns=[FAMILIES[1]], filter=ColumnPaginationFilter(2, QUALIFIERS_TWO[2]))
        assert got == order([(r, [_col(FAMILIES[1], QUALIFIERS_TWO[2]), _col(FAMILIES[1], QUALIFIERS_TWO[3])])
                             for r in twos])


def test_column_count_get_filter(table):
    # every row has exactly six columns: a quota of six never ends the scan
    verify(table, 6, 6, filter="ColumnCountGetFilter (6)")
    verify(table, 6, 6, reverse=True, filter=ColumnCountGetFilter(6))
    # a row past the quota keeps its first columns, and is the scan's last (HBase's filterAllRemaining)
    assert scan(table, filter=ColumnCountGetFilter(2)) == [
        (ROWS_ONE[0], [_col(FAMILIES[0], QUALIFIERS_ONE[0]), _col(FAMILIES[0], QUALIFIERS_ONE[2])])]
    assert scan(table, reverse=True, filter=ColumnCountGetFilter(2)) == [
        (ROWS_TWO[3], [_col(FAMILIES[0], QUALIFIERS_TWO[0]), _col(FAMILIES[0], QUALIFIERS_TWO[2])])]
    assert scan(table, row_start=ROWS_TWO[2], filter=ColumnCountGetFilter(0)) == []


def test_null_comparator(table):
    # every stored value compares "less" than null (TestNullComparator: compareTo gives 1)
    verify(table, 6, 6, filter=ValueFilter("<", NullComparator()))
    verify(table, 6, 6, reverse=True, filter="ValueFilter (!=, 'null:')")
    verify(table, 0, 0, filter=ValueFilter("=", NullComparator()))
    # rows holding the column fail ">=", rows without it pass (filter_if_missing is off)
    assert verify(table, 3, 6, filter=SingleColumnValueFilter(FAMILIES[0], QUALIFIERS_ONE[0], ">=", NullComparator())) == [
        ROWS_TWO[0], ROWS_TWO[2], ROWS_TWO[3]]
    verify(table, 6, 6, filter=SingleColumnValueFilter(FAMILIES[0], QUALIFIERS_ONE[0], "<", NullComparator()))
    cmp = NullComparator()
    for value in (b"\x00\x01\x02\x03\x04\x05", b"\x00", b""):
        assert [cmp.predicate(op)(value) for op in ("<", "<=", "=", "!=", ">=", ">")] == [
            True, True, False, True, False, False]
    with pytest.raises(InvalidArgument, match="takes no value"):
        NullComparator(b"x")


# --- TestDependentColumnFilter ------------------------------------------------

DEP_FAMILIES = [b"familyOne", b"familyTwo"]
QUALIFIER = b"qualifier"
STAMPS = [10_000 - 100, 10_000 - 200, 10_000 - 300]
BAD = [b"bad1", b"bad2", b"bad3"]
MATCH = b"match"


@pytest.fixture(scope="module")
def dependent(tmp_path_factory):
    conn = storage.connect(str(tmp_path_factory.mktemp("dependent") / "root"))
    t = conn.create_table("dep", {f.decode(): {"max_versions": 10} for f in DEP_FAMILIES})
    one, two = (_col(f, QUALIFIER) for f in DEP_FAMILIES)
    for row, cells in ((b"test1", [(one, STAMPS[0], BAD[0]), (one, STAMPS[1], BAD[1]), (one, STAMPS[2], MATCH),
                                   (two, STAMPS[0], BAD[0]), (two, STAMPS[2], BAD[2])]),
                       (b"test2", [(one, STAMPS[0], BAD[0]), (one, STAMPS[2], MATCH),
                                   (two, STAMPS[0], MATCH), (two, STAMPS[1], BAD[2])])):
        for column, stamp, value in cells:
            t.put(row, {column: value}, timestamp=stamp)
    yield t
    conn.close()


def _counts(t, **options) -> tuple[int, int]:
    """(rows, cells) of an all-versions scan, the same on both paths and both directions."""
    def run(path, reverse):
        rows = list(t.scan(max_versions=10, path=path, reverse=reverse, include_timestamp=True, **options))
        return rows[::-1] if reverse else rows
    results = [run(p, r) for p in ("batch", "cell") for r in (False, True)]
    assert all(r == results[0] for r in results)
    scanner = t.scanner(max_versions=10, **options)
    cells = sum(len(result) for result in iter(lambda: scanner.next(), None))
    return len(results[0]), cells


def test_dependent_column_filter_scans(dependent):
    assert _counts(dependent, filter=DependentColumnFilter(DEP_FAMILIES[0], QUALIFIER)) == (2, 8)
    assert _counts(dependent, filter=DependentColumnFilter(DEP_FAMILIES[0], QUALIFIER, True)) == (2, 3)
    assert _counts(dependent, filter=DependentColumnFilter(DEP_FAMILIES[0], QUALIFIER, False, "=",
                                                           BinaryComparator(MATCH))) == (2, 3)
    assert _counts(dependent, filter="DependentColumnFilter ('familyOne', 'qualifier', true, =, 'binary:match')") == (1, 1)
    # NO_OP with a comparator counts no cell, as HBase's compareValue
    assert _counts(dependent, filter=DependentColumnFilter(DEP_FAMILIES[0], QUALIFIER, False, CompareOperator.NO_OP,
                                                           BinaryComparator(MATCH))) == (0, 0)


def test_dependent_column_filter_dropping():
    """TestDependentColumnFilter.testFilterDropping, on one row of cells given to the filter."""
    from storage.cells import Cell, CellType, cells_to_batch, sort_key
    import pyarrow as pa

    put = int(CellType.PUT)
    row = [Cell(b"test1", DEP_FAMILIES[0], QUALIFIER, STAMPS[0], put, BAD[0]),
           Cell(b"test1", DEP_FAMILIES[0], QUALIFIER, STAMPS[1], put, BAD[1]),
           Cell(b"test1", DEP_FAMILIES[1], QUALIFIER, STAMPS[1], put, BAD[2]),
           Cell(b"test1", DEP_FAMILIES[1], QUALIFIER, STAMPS[0], put, MATCH),
           Cell(b"test1", DEP_FAMILIES[1], QUALIFIER, STAMPS[2], put, BAD[2])]
    row.sort(key=sort_key)
    table = pa.Table.from_batches([cells_to_batch(row)])
    for f, kept in ((DependentColumnFilter(DEP_FAMILIES[0], QUALIFIER), 4),
                    (DependentColumnFilter(DEP_FAMILIES[1], QUALIFIER, True), 2)):
        assert len(f.filter_row_cells(list(row))) == kept
        assert f.filter_batch(table).num_rows == kept


# --- TestFuzzyRowFilter ---------------------------------------------------------

SATISFIES = [  # (row, fuzzy key, mask with 0 = fixed, 1 = any, HBase's answer is YES)
    (bytes([1, 128, 1, 0, 1]), bytes([1, 0, 1]), bytes([0, 1, 0]), True),
    (bytes([1, 128, 2, 0, 1]), bytes([1, 0, 1]), bytes([0, 1, 0]), False),
    (bytes([1, 2, 1, 3, 3]), bytes([1, 2, 0, 3]), bytes([0, 0, 1, 0]), True),
    (bytes([1, 1, 1, 3, 0]), bytes([1, 2, 0, 3]), bytes([0, 0, 1, 0]), False),
    (bytes([1, 1, 1, 3, 0]), bytes([1, 245, 0, 3]), bytes([0, 0, 1, 0]), False),
    (bytes([1, 2, 1, 0, 1]), bytes([0, 1, 2]), bytes([1, 0, 0]), False),
    (bytes([2, 3, 1, 1, 1]), bytes([1, 0, 1]), bytes([0, 1, 0]), False),
    (bytes([1, 245, 1, 3, 0]), bytes([1, 1, 0, 3]), bytes([0, 0, 1, 0]), False),
    (bytes([1, 3, 1, 3, 0]), bytes([1, 2, 0, 3]), bytes([0, 0, 1, 0]), False),
    (bytes([2, 1, 1, 1, 0]), bytes([1, 2, 0, 3]), bytes([0, 0, 1, 0]), False),
]


@pytest.mark.parametrize("row, key, mask, yes", SATISFIES)
def test_fuzzy_row_filter_satisfies(row, key, mask, yes):
    import pyarrow as pa

    f = FuzzyRowFilter([(key, mask)])
    assert f.filter_row_key(row) is not yes
    assert list(f._passes_keys(pa.array([row], pa.binary()))) == [yes]
    assert f.oriented(True) is f  # the answer does not depend on the direction


def test_fuzzy_row_filter_end_to_end(tmp_path):
    conn = storage.connect(str(tmp_path / "fuzzy"))
    t = conn.create_table("f", {"cf": {}}, split_keys=[b"\x00\x00\x00\x02"])
    # keys: 2-byte user id, '_', 2-byte action, as HBase's FuzzyRowFilter example (userId_actionId)
    for user in range(4):
        for action in range(3):
            t.put(bytes([0, user]) + b"_" + bytes([0, action]) + b"x", {b"cf:q": b"%d%d" % (user, action)})
    t.flush()
    t.put(bytes([0, 1]) + b"_" + bytes([0, 9]), {b"cf:q": b"late"})  # unflushed
    t.put(bytes([0, 1]) + b"_", {b"cf:q": b"short"})  # shorter than the fuzzy key: never passes
    f = FuzzyRowFilter([(b"??_\x00\x01", b"11000"), (bytes([0, 3, 0, 0, 2]), b"\x00\x00\x01\x00\x00")])
    wanted = [bytes([0, u]) + b"_" + bytes([0, 1]) + b"x" for u in range(4)] + [bytes([0, 3]) + b"_" + bytes([0, 2]) + b"x"]
    for reverse in (False, True):
        got = [row for row, _ in scan(t, reverse=reverse, filter=f)]
        assert got == (sorted(wanted, reverse=reverse))
    text = repr(f)
    assert text == "FuzzyRowFilter ('??_\x00\x01', '11000', '\x00\x03\x00\x00\x02', '00100')"
    assert [row for row, _ in scan(t, filter=text)] == sorted(wanted)
    # the leading fixed bytes bound the rows a scan reads
    assert FuzzyRowFilter([(bytes([0, 3, 0, 0, 2]), b"00100")]).row_ranges() == [(b"\x00\x03", b"\x00\x04")]
    assert f.row_ranges() is None  # the first pattern starts with free bytes
    with pytest.raises(InvalidArgument, match="mask has 2 bytes for a fuzzy key of 3"):
        FuzzyRowFilter([(b"abc", b"00")])
    with pytest.raises(InvalidArgument, match="0 or 1"):
        FuzzyRowFilter([(b"ab", b"02")])
    conn.close()


# --- TestRandomRowFilter ----------------------------------------------------------

def test_random_row_filter_chance():
    """TestRandomRowFilter.testBasics: a quarter chance keeps about a quarter of the rows."""
    from storage.cells import Cell, CellType, cells_to_batch
    import pyarrow as pa

    rows = 100_000
    cells = [Cell(b"%06d" % i, b"cf", b"q", 1, int(CellType.PUT), b"") for i in range(rows)]
    table = pa.Table.from_batches([cells_to_batch(cells)])
    kept = RandomRowFilter(0.25).filter_batch(table).num_rows
    assert abs(kept - rows / 4) < rows / 100
    assert RandomRowFilter(-1.0).filter_batch(table).num_rows == 0  # no draws: never
    assert RandomRowFilter(1.5).filter_batch(table).num_rows == rows  # always
    assert RandomRowFilter(0.0).filter_batch(table).num_rows == 0
    assert RandomRowFilter(1.0).filter_batch(table).num_rows == rows


def test_random_row_filter_on_a_table(table):
    seeded = RandomRowFilter(0.5, seed=7)
    first = scan(table, filter=seeded)
    assert first == scan(table, filter="RandomRowFilter (0.5, 7)")  # reseeded per scan
    assert 0 < len(first) < 6
    assert scan(table, filter="RandomRowFilter (2.0)") == scan(table)
    assert scan(table, filter="RandomRowFilter (-1)") == []


# --- TestParseFilter and argument checks ----------------------------------------------

def test_parse_filter_cases():
    from storage.filters import FilterSyntaxError, parse_filter_string

    assert parse_filter_string(" ColumnCountGetFilter(4)").limit == 4
    for bad in (" ColumnCountGetFilter('abc')", " ColumnCountGetFilter(2147483648)", " ColumnPaginationFilter('124')",
                " ColumnPaginationFilter('4' , '123a')", " ColumnPaginationFilter('4' , '-123')",
                "ColumnPaginationFilter (4, -6)", "TimestampsFilter(9223372036854775808, 6)", "TimestampsFilter(-45, 6)",
                "DependentColumnFilter ('family')", "DependentColumnFilter ('f', 'q', true, =)",
                "FuzzyRowFilter ('abc')", "RandomRowFilter ('0.5')", "RandomRowFilter (nan)"):
        with pytest.raises(FilterSyntaxError) as info:
            parse_filter_string(bad)
        assert "\n" not in str(info.value)
    with pytest.raises(FilterSyntaxError, match="must not be negative, got -45"):
        parse_filter_string("TimestampsFilter(-45, 6)")
    page = parse_filter_string("ColumnPaginationFilter(4, 6)")
    assert (page.limit, page.offset, page.column_offset) == (4, 6, None)
    stamps = parse_filter_string("TimestampsFilter(9223372036854775806, 6)").timestamps
    assert stamps == (6, 9223372036854775806)
    dep = parse_filter_string("DependentColumnFilter('family', 'qualifier', true, =, 'binary:abc')")
    assert (dep.family, dep.qualifier, dep.drop_dependent_column, dep.op) == (b"family", b"qualifier", True,
                                                                          CompareOperator.EQUAL)
    assert dep.comparator == BinaryComparator(b"abc")
    assert parse_filter_string("DependentColumnFilter ('f', 'q')") == DependentColumnFilter(b"f", b"q")
    assert parse_filter_string("DependentColumnFilter ('f', 'q', true)") == DependentColumnFilter(b"f", b"q", True)
    offset = parse_filter_string("ColumnPaginationFilter (10, 'qual')")
    assert (offset.limit, offset.offset, offset.column_offset) == (10, None, b"qual")
    assert parse_filter_string("RandomRowFilter (0.25)") == RandomRowFilter(0.25)
    assert parse_filter_string("RandomRowFilter (1e-3, 5)") == RandomRowFilter(0.001, 5)
    for f in (ColumnCountGetFilter(3), ColumnPaginationFilter(2, b"it's"), ColumnPaginationFilter(2, 3),
              DependentColumnFilter(b"f", b"q"), DependentColumnFilter(b"f", b"q", True),
              DependentColumnFilter(b"f", b"q", False, "<=", NullComparator()), RandomRowFilter(0.125, 3),
              FuzzyRowFilter([(b"a\xffb", b"010")])):
        assert parse_filter_string(repr(f)) == f, repr(f)


def test_constructor_checks_are_one_line():
    cases = [
        (lambda: ColumnCountGetFilter(-1), "ColumnCountGetFilter limit"),
        (lambda: ColumnPaginationFilter(1, -2), "ColumnPaginationFilter offset"),
        (lambda: DependentColumnFilter(b"f", b"q", "yes"), "drop_dependent_column"),
        (lambda: DependentColumnFilter(b"f", b"q", False, "="), "needs a comparator"),
        (lambda: RandomRowFilter(float("nan")), "finite"),
        (lambda: RandomRowFilter(0.5, seed=-1), "seed"),
        (lambda: FuzzyRowFilter([]), "at least one"),
    ]
    for build, words in cases:
        with pytest.raises(InvalidArgument, match=words) as info:
            build()
        assert "\n" not in str(info.value)


def test_reverse_row_key_filters_on_dense_blocks(tmp_path):
    """One family, compacted: rows scans take the dense-block row merge, reverse ones too."""
    conn = storage.connect(str(tmp_path / "dense"))
    t = conn.create_table("d", {"cf": {"block_size": 256}}, split_keys=[b"r50"])
    for i in range(100):
        t.put(b"r%02d" % i, {b"cf:a": b"v%d" % i, b"cf:b": b"w"})
    t.compact()
    assert all(not r.info.needs_resolution for r in t.store_file_readers())
    cases = [
        (dict(row_start=b"r60", reverse=True, filter="InclusiveStopFilter ('r40')"), [b"r%02d" % i for i in range(60, 39, -1)]),
        (dict(row_start=b"r40", filter="InclusiveStopFilter ('r60')"), [b"r%02d" % i for i in range(40, 61)]),
        (dict(reverse=True, filter="InclusiveStopFilter ('r95') AND SingleColumnValueFilter ('cf', 'a', !=, 'binary:v97')"),
         [b"r99", b"r98", b"r96", b"r95"]),
        (dict(reverse=True, filter="FuzzyRowFilter ('r?7', '010')"), [b"r%d7" % i for i in range(9, -1, -1)]),
    ]
    for options, rows in cases:
        got = scan(t, **options)
        assert [row for row, _ in got] == rows, options
        assert [row for row, _ in scan(t, columns=[b"cf:a"], **options)] == rows, options
        # rows output takes the dense blocks themselves, the filter tested on their row keys
        batches = list(t.scan_batches(output="rows", **options))
        assert [key for b in batches for key in b.column(0).to_pylist()] == rows, options
    conn.close()
