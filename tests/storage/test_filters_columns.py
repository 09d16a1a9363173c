"""FamilyFilter, MultipleColumnPrefixFilter, ColumnRangeFilter, ColumnPaginationFilter,
InclusiveStopFilter and SingleColumnValueExcludeFilter: the batch path against the cell
path on random rows (alone and inside FilterLists), hand-computed answers, the filter
language round trip, and the scan of a real table."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import storage
from storage.cells import Cell
from storage.errors import InvalidArgument
from storage.filters import (
    BinaryComparator,
    ColumnPaginationFilter,
    ColumnPrefixFilter,
    ColumnRangeFilter,
    FamilyFilter,
    FilterList,
    FilterListOperator,
    InclusiveStopFilter,
    MultipleColumnPrefixFilter,
    QualifierFilter,
    SingleColumnValueExcludeFilter,
    parse_filter_string,
)
from filter_strategies import (
    FAMILIES,
    PUT,
    SETTINGS,
    comparators,
    filters as older_filters,
    keys,
    ops,
    qualifiers,
    row_sets,
    run_batches,
    run_cells,
    values,
)

families = st.sampled_from(FAMILIES)
new_filters = st.one_of(
    st.builds(FamilyFilter, ops, comparators(families)),
    st.lists(qualifiers, min_size=1, max_size=3).map(MultipleColumnPrefixFilter),
    st.builds(ColumnRangeFilter, qualifiers, st.booleans(), qualifiers, st.booleans()),
    st.builds(ColumnPaginationFilter, st.integers(0, 4), st.integers(0, 4)),
    keys.map(InclusiveStopFilter),
    st.builds(SingleColumnValueExcludeFilter, families, qualifiers, ops, comparators(values), st.booleans(),
              st.booleans()),
)
mixed = st.one_of(
    new_filters,
    st.builds(FilterList, st.sampled_from(list(FilterListOperator)),
              st.lists(st.one_of(new_filters, older_filters), min_size=1, max_size=3)),
)


@SETTINGS
@given(mixed, row_sets(), st.booleans(), st.lists(st.integers(0, 8), max_size=3))
def test_batch_path_equals_cell_path(f, rows, reverse, cuts):
    if reverse:
        rows = rows[::-1]
    a, b, c = f.copy(), f.copy(), f.copy()
    expected = run_cells(a, rows)
    assert run_cells(b, rows, use_row_key=False) == expected
    assert run_batches(c, rows, cuts) == expected


column_filters = st.one_of(
    st.builds(FamilyFilter, ops, comparators(families)),
    st.builds(QualifierFilter, ops, comparators(qualifiers)),
    qualifiers.map(ColumnPrefixFilter),
    st.lists(qualifiers, min_size=1, max_size=3).map(MultipleColumnPrefixFilter),
    st.builds(ColumnRangeFilter, qualifiers, st.booleans(), qualifiers, st.booleans()),
)


@SETTINGS
@given(column_filters, families, st.lists(qualifiers, min_size=1, max_size=4, unique=True))
def test_passes_column_is_the_cell_paths_answer(f, family, quals):
    """The dense plans ask a column filter once per column (``passes_column``); it must keep
    exactly the cells the cell path keeps of a row holding one cell of each column."""
    row = _row(b"r", *[(family, q, 1, b"v") for q in quals])
    kept = f.copy().filter_row_cells(row) or []
    assert [c.qualifier for c in kept] == [q for q in quals if f.passes_column(family, q)]


@SETTINGS
@given(new_filters)
def test_filter_strings_round_trip(f):
    assert parse_filter_string(repr(f)) == f


def _row(key, *columns):
    return [Cell(key, fam, q, ts, PUT, v) for fam, q, ts, v in columns]


ROWS = [
    _row(b"a", (b"cf", b"a", 2, b"1"), (b"cf", b"a", 1, b"0"), (b"cf", b"b", 1, b"x"), (b"d", b"c", 1, b"y")),
    _row(b"m", (b"cf", b"a", 1, b"2"), (b"d", b"a", 1, b"z")),
    _row(b"n", (b"d", b"b", 1, b"w")),
]


def _kept(f):
    return [(c.row, c.family, c.qualifier, c.timestamp) for c in run_cells(f, ROWS)]


def test_hand_computed_answers():
    assert [c[:3] for c in _kept(FamilyFilter("=", BinaryComparator(b"d")))] == [
        (b"a", b"d", b"c"), (b"m", b"d", b"a"), (b"n", b"d", b"b")]
    assert _kept(ColumnPaginationFilter(1, 1)) == [(b"a", b"cf", b"b", 1), (b"m", b"d", b"a", 1)]
    assert _kept(ColumnRangeFilter(b"b", True, b"", False)) == [
        (b"a", b"cf", b"b", 1), (b"a", b"d", b"c", 1), (b"n", b"d", b"b", 1)]
    assert [c[0] for c in _kept(InclusiveStopFilter(b"m"))] == [b"a"] * 4 + [b"m"] * 2
    assert InclusiveStopFilter(b"m").row_ranges() == [(b"", b"m\x00")]
    assert _kept(SingleColumnValueExcludeFilter(b"cf", b"a", "=", BinaryComparator(b"2"), True)) == [
        (b"m", b"d", b"a", 1)]
    assert [c[2] for c in _kept(MultipleColumnPrefixFilter([b"b", b"c"]))] == [b"b", b"c", b"b"]


def test_constructor_and_parser_errors():
    with pytest.raises(InvalidArgument):
        ColumnPaginationFilter(-1, 0)
    with pytest.raises(InvalidArgument):
        MultipleColumnPrefixFilter([])
    with pytest.raises(InvalidArgument):
        ColumnRangeFilter(b"a", 1, b"b", True)
    with pytest.raises(InvalidArgument, match="ColumnPaginationFilter"):
        parse_filter_string("ColumnPaginationFilter (1)")


def test_a_table_scan_applies_family_filter_on_both_paths(tmp_path):
    conn = storage.connect(str(tmp_path / "root"))
    table = conn.create_table("t", {"cf": {}, "d": {}}, split_keys=[b"m"])
    for i in range(20):
        table.put(b"r%02d" % i, {b"cf:a": b"%d" % i, b"d:b": b"x"})
    table.flush()
    text = "FamilyFilter (=, 'binary:d') AND InclusiveStopFilter ('r04')"
    rows = list(table.scan(filter=text))
    assert rows == [(b"r%02d" % i, {b"d:b": b"x"}) for i in range(5)]
    cells = sum(b.num_rows for b in table.scan_batches(output="cells", filter=text))
    assert cells == 5
    conn.close()
