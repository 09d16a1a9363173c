"""The filter language: parsing, round trips through repr, and error messages."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.errors import InvalidArgument
from storage.filters import (
    FILTER_NAMES,
    BinaryComparator,
    BinaryPrefixComparator,
    ColumnPrefixFilter,
    CompareOperator,
    FilterList,
    FilterListOperator,
    FilterSyntaxError,
    FirstKeyOnlyFilter,
    KeyOnlyFilter,
    MultiRowRangeFilter,
    PageFilter,
    PrefixFilter,
    QualifierFilter,
    RegexStringComparator,
    RowFilter,
    RowRange,
    SingleColumnValueFilter,
    ColumnValueFilter,
    SkipFilter,
    SubstringComparator,
    TimestampsFilter,
    ColumnCountGetFilter,
    ColumnPaginationFilter,
    DependentColumnFilter,
    FuzzyRowFilter,
    NullComparator,
    RandomRowFilter,
    ValueFilter,
    WhileMatchFilter,
    coerce_filter,
    parse_filter_string,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------
# the examples of HBase's documentation

EXAMPLES = [
    ("PrefixFilter ('row1')", PrefixFilter(b"row1")),
    (
        "SingleColumnValueFilter ('cf1', 'qual1', =, 'binary:val1')",
        SingleColumnValueFilter(b"cf1", b"qual1", "=", BinaryComparator(b"val1")),
    ),
    (
        "SingleColumnValueFilter ('cf', 'q', >=, 'binary:5', true, false)",
        SingleColumnValueFilter(b"cf", b"q", ">=", BinaryComparator(b"5"), True, False),
    ),
    (
        "ColumnValueFilter ('cf', 'q', =, 'binary:abc')",
        ColumnValueFilter(b"cf", b"q", "=", BinaryComparator(b"abc")),
    ),
    (
        "ColumnValueFilter ('cf', '', NO_OP, 'substring:X') OR ColumnValueFilter ('d', 'q', <=, 'binaryprefix:a')",
        FilterList("OR", [ColumnValueFilter(b"cf", b"", CompareOperator.NO_OP, SubstringComparator(b"x")),
                          ColumnValueFilter(b"d", b"q", "<=", BinaryPrefixComparator(b"a"))]),
    ),
    (
        "KeyOnlyFilter() AND FirstKeyOnlyFilter()",
        FilterList(FilterList.MUST_PASS_ALL, [KeyOnlyFilter(), FirstKeyOnlyFilter()]),
    ),
    (
        "(PrefixFilter ('a') OR PrefixFilter ('b')) AND PageFilter (10)",
        FilterList("AND", [FilterList("OR", [PrefixFilter(b"a"), PrefixFilter(b"b")]), PageFilter(10)]),
    ),
    ("ColumnPrefixFilter ('col')", ColumnPrefixFilter(b"col")),
    ("QualifierFilter (=, 'substring:abc')", QualifierFilter("=", SubstringComparator(b"abc"))),
    ("ValueFilter (!=, 'regexstring:^x.*')", ValueFilter("!=", RegexStringComparator(b"^x.*"))),
    ("TimestampsFilter (5, 6, 7)", TimestampsFilter([5, 6, 7])),
    (
        "MultiRowRangeFilter ('a', true, 'c', false, 'x', true, 'z', false)",
        MultiRowRangeFilter([RowRange(b"a", True, b"c", False), RowRange(b"x", True, b"z", False)]),
    ),
    ("RowFilter (<=, 'binaryprefix:r')", RowFilter(CompareOperator.LESS_OR_EQUAL, BinaryPrefixComparator(b"r"))),
    ("KeyOnlyFilter (TRUE)", KeyOnlyFilter(True)),
    ("PrefixFilter ('it''s')", PrefixFilter(b"it's")),
    ("PrefixFilter ('')", PrefixFilter(b"")),
    ("TimestampsFilter ()", TimestampsFilter([])),
    ("TimestampsFilter (0)", TimestampsFilter([0])),
    ("SKIP ValueFilter (=, 'binary:0')", SkipFilter(ValueFilter("=", BinaryComparator(b"0")))),
    ("WHILE RowFilter (<, 'binary:m')", WhileMatchFilter(RowFilter("<", BinaryComparator(b"m")))),
    ("  PageFilter(3)and PageFilter(4)  ", FilterList("AND", [PageFilter(3), PageFilter(4)])),
    ("ValueFilter (NO_OP, 'binary:x')", ValueFilter(CompareOperator.NO_OP, BinaryComparator(b"x"))),
    ("PrefixFilter ('caf\u00e9')", PrefixFilter("caf\u00e9".encode())),
]


@pytest.mark.parametrize("text, expected", EXAMPLES)
def test_examples(text, expected):
    parsed = parse_filter_string(text)
    assert parsed == expected
    assert parse_filter_string(repr(parsed)) == parsed
    assert parse_filter_string(text.encode()) == expected


def test_precedence():
    a, b, c = PrefixFilter(b"a"), PrefixFilter(b"b"), PrefixFilter(b"c")
    assert parse_filter_string("PrefixFilter('a') OR PrefixFilter('b') AND PrefixFilter('c')") == FilterList(
        "OR", [a, FilterList("AND", [b, c])]
    )
    assert parse_filter_string("PrefixFilter('a') AND PrefixFilter('b') OR PrefixFilter('c')") == FilterList(
        "OR", [FilterList("AND", [a, b]), c]
    )
    assert parse_filter_string("PrefixFilter('a') AND PrefixFilter('b') AND PrefixFilter('c')") == FilterList(
        "AND", [a, b, c]
    )
    assert parse_filter_string("(PrefixFilter('a') AND PrefixFilter('b')) AND PrefixFilter('c')") == FilterList(
        "AND", [FilterList("AND", [a, b]), c]
    )
    assert parse_filter_string("SKIP PrefixFilter('a') AND PrefixFilter('b')") == FilterList("AND", [SkipFilter(a), b])
    assert parse_filter_string("WHILE (PrefixFilter('a') OR PrefixFilter('b'))") == WhileMatchFilter(
        FilterList("OR", [a, b])
    )
    assert parse_filter_string("((PrefixFilter('a')))") == a


# ---------------------------------------------------------------------------
# round trips of random filters

any_bytes = st.binary(max_size=6) | st.text(max_size=4).map(lambda s: s.encode())
ops = st.sampled_from(list(CompareOperator))
comparators = st.one_of(
    any_bytes.map(BinaryComparator),
    any_bytes.map(BinaryPrefixComparator),
    any_bytes.map(SubstringComparator),
    st.sampled_from([b"^a.*", b"x|y", b"[[:digit:]]+$", b"it's", b"caf\xc3\xa9"]).map(RegexStringComparator),
)
leaves = st.one_of(
    any_bytes.map(PrefixFilter),
    st.builds(RowFilter, ops, comparators),
    st.lists(st.tuples(any_bytes, st.booleans(), any_bytes, st.booleans()), max_size=3).map(
        lambda rs: MultiRowRangeFilter((min(s, e), si, max(s, e), ei) for s, si, e, ei in rs)
    ),
    st.just(FirstKeyOnlyFilter()),
    st.booleans().map(KeyOnlyFilter),
    any_bytes.map(ColumnPrefixFilter),
    st.builds(QualifierFilter, ops, comparators),
    st.builds(ValueFilter, ops, comparators),
    st.builds(SingleColumnValueFilter, any_bytes, any_bytes, ops, comparators, st.booleans(), st.booleans()),
    st.builds(ColumnValueFilter, any_bytes, any_bytes, ops, comparators),
    st.integers(0, 10**6).map(PageFilter),
    st.lists(st.integers(0, 2**63 - 1), max_size=4).map(TimestampsFilter),
    st.integers(0, 2**31 - 1).map(ColumnCountGetFilter),
    st.builds(ColumnPaginationFilter, st.integers(0, 2**31 - 1), st.one_of(st.integers(0, 2**31 - 1), any_bytes)),
    st.builds(DependentColumnFilter, any_bytes, any_bytes, st.booleans()),
    st.builds(DependentColumnFilter, any_bytes, any_bytes, st.booleans(), ops, comparators),
    st.lists(
        any_bytes.flatmap(lambda k: st.tuples(st.just(k), st.lists(st.sampled_from([0, 1]), min_size=len(k),
                                                                    max_size=len(k)).map(bytes))),
        min_size=1, max_size=3,
    ).map(FuzzyRowFilter),
    st.builds(RandomRowFilter, st.floats(-2, 2, allow_nan=False), st.one_of(st.none(), st.integers(0, 2**40))),
    st.just(ValueFilter("<", NullComparator())),
)
filters = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.builds(FilterList, st.sampled_from(list(FilterListOperator)), st.lists(children, min_size=2, max_size=3)),
        children.map(SkipFilter),
        children.map(WhileMatchFilter),
    ),
    max_leaves=8,
)


@SETTINGS
@given(filters)
def test_repr_parses_back_to_an_equal_filter(f):
    text = repr(f)
    assert parse_filter_string(text) == f
    assert coerce_filter(text) == f


def test_single_child_lists_print_as_their_child():
    assert parse_filter_string(repr(FilterList("AND", [PageFilter(1)]))) == PageFilter(1)


# ---------------------------------------------------------------------------
# errors


def error_of(text: str) -> FilterSyntaxError:
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter_string(text)
    err = info.value
    assert isinstance(err, InvalidArgument) and isinstance(err, ValueError)
    assert err.text == text
    assert str(err) == f'{err.reason} at position {err.position} in "{text}"' + (f"; {err.hint}" if err.hint else "")
    assert err.picture.split("\n") == [text, " " * err.position + "^"]
    return err


@pytest.mark.parametrize(
    "text, position, words",
    [
        ("PrefixFilter ('a'", 17, ["expected ',' or ')'", "end of the filter"]),
        ("PrefixFilter 'a')", 13, ["expected '(' after PrefixFilter"]),
        ("(PrefixFilter ('a')", 19, ["expected ')'"]),
        ("SingleColumnValueFilter ('cf', 'q' =, 'binary:1')", 35, ["expected ',' or ')'"]),
        ("ValueFilter (=>, 'binary:a')", 13, ["unknown compare operator '=>'"]),
        ("ValueFilter ('binary:a', =)", 13, ["must be a compare operator"]),
        ("NoSuchFilter ('a')", 0, ["unknown filter 'NoSuchFilter'"]),
        ("ValueFilter (=, 'bin:a')", 16, ["binary:", "binaryprefix:", "substring:", "regexstring:"]),
        ("ValueFilter (=, 'abc')", 16, ["must start with one of"]),
        ("ValueFilter (=, 'regexstring:(a)\\1')", 16, ["RE2"]),
        ("PrefixFilter ('a", 14, ["unterminated string"]),
        ("PrefixFilter ('it''s)", 14, ["unterminated string"]),
        ("PrefixFilter ('a') PageFilter (1)", 19, ["unexpected 'PageFilter' after a complete filter"]),
        ("PrefixFilter ('a'))", 18, ["unexpected"]),
        ("PrefixFilter ('a') AND", 22, ["expected a filter name or '('", "end of the filter"]),
        ("AND PrefixFilter ('a')", 0, ["expected a filter name or '('", "'AND'"]),
        ("PrefixFilter ('a') OR OR PrefixFilter ('b')", 22, ["expected a filter name"]),
        ("", 0, ["expected a filter name"]),
        ("PageFilter ('10')", 12, ["must be an integer"]),
        ("PageFilter (1, 2)", 15, ["PageFilter takes 1 argument, got 2"]),
        ("PageFilter ()", 12, ["PageFilter takes 1 argument, got 0"]),
        ("PageFilter (-1)", 0, ["page_size"]),
        ("KeyOnlyFilter (yes)", 15, ["must be true or false"]),
        ("SingleColumnValueFilter ('cf', 'q', =, 'binary:1', true)", 55, ["takes 4 or 6 arguments, got 5"]),
        ("ColumnValueFilter ('cf', 'q', =)", 31, ["ColumnValueFilter takes 4 arguments, got 3"]),
        ("ColumnValueFilter ('cf', 'q', =, 'binary:1', true, true)", 45, ["takes 4 arguments, got 6"]),
        ("ColumnValueFilter ('cf', 'q', 'binary:1', =)", 30, ["argument 3 must be a compare operator"]),
        ("ColumnValueFilter ('cf', 7, =, 'binary:1')", 25, ["argument 2 must be a quoted string"]),
        ("ColumnValueFilter (true, 'q', =, 'binary:1')", 19, ["argument 1 must be a quoted string"]),
        ("ColumnValueFilter ('cf', 'q', =, 'long:1')", 33, ["must start with one of"]),
        ("ColumnValueFilter ('cf', 'q', >, 'regexstring:(?<=a)b')", 33, ["RE2"]),
        ("MultiRowRangeFilter ('a', true, 'b')", 35, ["groups of 4"]),
        ("MultiRowRangeFilter ('b', true, 'a', true)", 0, ["after its stop"]),
        ("PrefixFilter ('a',)", 18, ["expected an argument of PrefixFilter"]),
        ("PrefixFilter (#)", 14, ["unexpected character '#'"]),
    ],
)
def test_error_positions(text, position, words):
    err = error_of(text)
    assert err.position == position, str(err)
    for word in words:
        assert word in err.reason


def test_error_on_a_later_line_points_within_that_line():
    text = "PrefixFilter ('a')\nAND Bogus ('b')"
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter_string(text)
    assert info.value.position == 23
    assert info.value.picture.split("\n") == ["AND Bogus ('b')", "    ^"]
    assert "\n" not in str(info.value)


def test_known_filter_names():
    err = error_of("prefixfilter ('a')")  # names are case-sensitive, as in HBase
    assert err.hint == "known filters: " + ", ".join(FILTER_NAMES)
    assert str(err).startswith(
        "unknown filter 'prefixfilter' at position 0 in \"prefixfilter ('a')\"; known filters: ColumnCountGetFilter, "
    )
    assert "SingleColumnValueFilter" in FILTER_NAMES and "PrefixFilter" in FILTER_NAMES


def test_coerce_filter():
    f = PageFilter(2)
    assert coerce_filter(f) is f
    assert coerce_filter(None) is None
    assert coerce_filter("PageFilter (2)") == f
    assert coerce_filter(b"PageFilter (2)") == f
    with pytest.raises(InvalidArgument, match="filter must be"):
        coerce_filter(42)
    with pytest.raises(FilterSyntaxError):
        coerce_filter("PageFilter 2")
