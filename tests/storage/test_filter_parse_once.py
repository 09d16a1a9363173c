"""A scan's filter string is parsed once for the many requests that carry it, and an IN list's
block test is one binary search a block.

The connector sends a block-skipping filter (an IN list: an OR of one ``SingleColumnValueFilter``
equality a value) as a string in every split's request; ``plan_batch_scan`` takes the parse of an
earlier request with the same string (:func:`storage.filters.parser.parsed_filter`), each request
getting its own copy.  :func:`storage.read.block_pruning.block_mask` judges such a list with its
values sorted: a block is kept exactly when some value lies in its ``[min, max]``, a value equal
to a bound included, and the answer equals the member-by-member test's.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from storage import ScanMetrics
from storage.filters import (
    BinaryComparator,
    Filter,
    FilterList,
    FilterSyntaxError,
    PageFilter,
    SingleColumnValueFilter,
    register_filter,
    unregister_filter,
)
from storage.filters import parser
from storage.filters.parser import parse_filter_string, parsed_filter
from storage.read.block_pruning import block_mask
from storage.read.scan_request import ScanRequest, plan_batch_scan


def _eq(value: bytes, qualifier: bytes = b"d") -> SingleColumnValueFilter:
    return SingleColumnValueFilter(b"cf", qualifier, "=", BinaryComparator(value), filter_if_missing=True)


def _in_list(values) -> FilterList:
    return FilterList(FilterList.MUST_PASS_ONE, [_eq(v) for v in values])


def _u64(i: int) -> bytes:
    return struct.pack(">Q", i)


# -- the block test of an IN list --------------------------------------------------------------


def _member_by_member(flt: FilterList, n: int, stats) -> list[bool] | None:
    """The OR of each member's own block test (the test an IN list had before it was one search)."""
    masks = [block_mask(f, b"cf", n, stats) for f in flt.filters]
    if any(m is None for m in masks):
        return None
    return np.logical_or.reduce(masks).tolist()


def test_thousands_of_values_skip_exactly_the_blocks_holding_none():
    values = [_u64(v) for v in range(10_000, 40_000, 10)]  # 3,000 values, every tenth number
    bounds = [
        (0, 9_999),            # below every value: skipped
        (9_999, 10_000),       # max equal to the least value: kept
        (10_001, 10_009),      # between two values: skipped
        (10_010, 10_010),      # min = max = a value: kept
        (10_011, 10_020),      # max equal to a value: kept
        (10_020, 10_029),      # min equal to a value: kept
        (39_990, 50_000),      # min equal to the greatest value: kept
        (39_991, 50_000),      # above every value: skipped
        (5, 60_000),           # around all of them: kept
    ]
    mins = [_u64(a) for a, _ in bounds] + [None, _u64(1)[:4]]  # no bounds; bounds of another width
    maxs = [_u64(b) for _, b in bounds] + [None, _u64(2)[:4]]

    def stats(qualifier):
        return (mins, maxs) if qualifier == b"d" else None

    flt = _in_list(reversed(values))  # order does not matter
    n = len(mins)
    got = block_mask(flt, b"cf", n, stats).tolist()
    assert got == [False, True, False, True, True, True, True, False, True, True, True]
    assert got == _member_by_member(flt, n, stats)
    # every block judged on its own: kept exactly when a value lies in [min, max]
    for i, (lo, hi) in enumerate(zip(mins[:len(bounds)], maxs[:len(bounds)])):
        assert got[i] == any(lo <= v <= hi for v in values)
    # a column without bounds, or of another family, says nothing
    assert block_mask(FilterList(FilterList.MUST_PASS_ONE, [_eq(b"x", b"e"), _eq(b"y", b"e")]), b"cf", n, stats) is None
    assert block_mask(flt, b"other", n, stats) is None


# two bytes of a few values, so that values and bounds often meet
_WIDE = st.lists(st.sampled_from([0, 1, 2, 255]), min_size=2, max_size=2).map(bytes)


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.one_of(_WIDE, st.binary(min_size=1, max_size=3)), min_size=2, max_size=40),
    blocks=st.lists(st.one_of(st.none(), st.tuples(_WIDE, _WIDE), st.tuples(st.binary(max_size=3), st.binary(max_size=3))),
                    min_size=1, max_size=12),
)
def test_an_in_list_is_judged_as_its_members_are(values, blocks):
    """Any values (of one width or several) against any bounds (missing, of other widths): the
    sorted-values test keeps the blocks the member-by-member test keeps."""
    mins = [None if b is None else min(b) for b in blocks]
    maxs = [None if b is None else max(b) for b in blocks]

    def stats(qualifier):
        return mins, maxs

    flt = _in_list(values)
    assert block_mask(flt, b"cf", len(blocks), stats).tolist() == _member_by_member(flt, len(blocks), stats)


def test_lists_that_are_not_one_columns_equalities_are_judged_member_by_member():
    """Another operator, column, comparator or ``filter_if_missing`` off in the list: the members'
    own tests (an AND of IN lists too)."""
    mins, maxs = [_u64(0), _u64(100)], [_u64(99), _u64(199)]

    def stats(qualifier):
        return (mins, maxs) if qualifier == b"d" else None

    mixed = FilterList(FilterList.MUST_PASS_ONE, [_eq(_u64(150)), _eq(_u64(300)),
                                                  SingleColumnValueFilter(b"cf", b"d", "<", BinaryComparator(_u64(5)),
                                                                          filter_if_missing=True)])
    assert block_mask(mixed, b"cf", 2, stats).tolist() == [True, True]
    loose = FilterList(FilterList.MUST_PASS_ONE, [_eq(_u64(150)), SingleColumnValueFilter(
        b"cf", b"d", "=", BinaryComparator(_u64(7)), filter_if_missing=False)])
    assert block_mask(loose, b"cf", 2, stats) is None
    both = FilterList(FilterList.MUST_PASS_ALL, [_in_list([_u64(5), _u64(150)]), _in_list([_u64(120), _u64(400)])])
    assert block_mask(both, b"cf", 2, stats).tolist() == [False, True]


# -- a real table --------------------------------------------------------------------------------

N = 4000


def day(i: int) -> bytes:
    return _u64(20_000 + i // 10)  # ten rows a day, rising with the key


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("inlist") / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {"block_size": 4096}}, settings={"wal_sync": "none", "compaction_threshold": 100})
        t = conn.table("t")
        with t.batch() as b:
            for i in range(N):
                b.put(b"r%06d" % i, {b"cf:d": day(i), b"cf:s": b"s%d" % (i % 7)})
        t.flush()
        t.compact(major=True)
        yield t


def _scan(table, **kwargs) -> tuple[pa.Table, ScanMetrics]:
    metrics = ScanMetrics()
    batches = list(table.scan_batches(metrics=metrics, **kwargs))
    return pa.Table.from_batches(batches), metrics


def test_a_scan_with_an_in_list_of_thousands_of_values(table):
    """An IN list of 3,000 values, three of them days of the table: the rows of those days, the
    same as the list that cannot prune (``filter_if_missing`` off), with most blocks skipped;
    as a block-skipping string (``prune_filter``) the kept blocks hold those rows."""
    days = [37, 200, 399]  # the first, a middle and the last day's rows
    values = [day(10 * d) for d in days] + [_u64(v) for v in range(50_000, 52_997)]
    flt = _in_list(values)
    loose = FilterList(FilterList.MUST_PASS_ONE, [SingleColumnValueFilter(b"cf", b"d", "=", BinaryComparator(v))
                                                  for v in values])
    want = [b"r%06d" % i for i in range(N) if i // 10 in days]
    rows, metrics = _scan(table, filter=repr(flt))
    plain, plain_metrics = _scan(table, filter=loose)
    assert rows.column("key").to_pylist() == want and rows.to_pylist() == plain.to_pylist()
    blocks = table.store_file_readers()[0].block_count
    assert plain_metrics.row_groups_pruned == 0
    assert blocks - 6 <= metrics.row_groups_pruned <= blocks - 3  # each day in one block or two
    pruned, prune_metrics = _scan(table, prune_filter=repr(flt))
    keys = pruned.column("key").to_pylist()
    assert set(want) <= set(keys) and len(keys) < N // 4
    assert prune_metrics.row_groups_pruned == metrics.row_groups_pruned


# -- parsing once ----------------------------------------------------------------------------------


def test_requests_with_the_same_string_share_one_parse():
    """Two requests' plans of one filter string: equal filters, their own lists, the same leaves
    (one parse); the scan's filter is copied too."""
    text = repr(_in_list([_u64(v) for v in range(2000)]))
    plans = [plan_batch_scan(ScanRequest(filter=text, prune_filter=text))[0] for _ in range(2)]
    assert plans[0].prune == plans[1].prune == parse_filter_string(text)
    assert plans[0].prune is not plans[1].prune and plans[0].filter is not plans[1].filter
    assert plans[0].prune.filters[5] is plans[1].prune.filters[5] is plans[1].filter.filters[5]
    # a copy changed by its caller changes no later one
    plans[0].prune.add_filter(_eq(b"x"))
    assert len(plan_batch_scan(ScanRequest(prune_filter=text.encode("utf-8", "surrogateescape")))[0].prune.filters) == 2000


def test_a_parse_kept_is_copied_with_its_state():
    """Stateful filters (a PageFilter counts rows) come fresh to each caller; bad strings fail
    each time with the parser's message."""
    first, second = parsed_filter("PageFilter (3)"), parsed_filter(b"PageFilter (3)")
    assert isinstance(first, PageFilter) and first == second and first is not second
    for _ in range(2):
        with pytest.raises(FilterSyntaxError, match="unknown filter"):
            parsed_filter("NoSuchFilter ('a')")


class _Tagged(Filter):
    """A user filter keeping every cell."""

    def __init__(self, tag: bytes):
        self.tag = tag

    @classmethod
    def from_arguments(cls, arguments):
        return cls(arguments[0])

    def _eval_row(self, cells):
        return True, 0

    def _eval_batch(self, batch):
        return np.ones(len(batch.starts), dtype=bool), 0

    def _settings(self):
        return (self.tag,)

    def __repr__(self):
        return f"TaggedOnce ('{self.tag.decode()}')"


def test_registering_a_user_filter_parses_again():
    with pytest.raises(FilterSyntaxError):
        parsed_filter("TaggedOnce ('a')")
    register_filter("TaggedOnce", _Tagged)
    try:
        assert parsed_filter("TaggedOnce ('a')") == _Tagged(b"a")
    finally:
        unregister_filter("TaggedOnce")
    with pytest.raises(FilterSyntaxError):
        parsed_filter("TaggedOnce ('a')")


def test_strings_past_the_bound_are_parsed_each_time(monkeypatch):
    monkeypatch.setattr(parser, "PARSED_CHARS", 100)
    long = repr(_in_list([_u64(v) for v in range(20)]))
    assert len(long) > 100
    a, b = parsed_filter(long), parsed_filter(long)
    assert a == b and a.filters[0] is not b.filters[0]
    short = "PrefixFilter ('abc')"
    assert parsed_filter(short) == parse_filter_string(short)
    with parser._PARSED_LOCK:
        assert parser._PARSED_CHARS[0] <= 100 and all(len(t) <= 100 for t, _ in parser._PARSED)


def test_a_scan_copies_a_filter_string_s_parse_once(monkeypatch):
    """A request's filter string gives the scan the parse's own copy (no second copy of a
    long list); a Filter object given is copied, so the caller's stays unchanged."""
    text = repr(_in_list([_u64(v) for v in range(50)]))
    parsed_filter(text)  # the parse kept
    kind = type(parse_filter_string(text))
    copies = []
    real = kind.copy
    monkeypatch.setattr(kind, "copy", lambda self: copies.append(self) or real(self))
    flt = ScanRequest(filter=text, reverse=True).scan_filter()
    assert len(copies) == 1 and flt == parse_filter_string(text) and flt is not copies[0]
    given = parse_filter_string(text)
    assert ScanRequest(filter=given).scan_filter() is not given and len(copies) == 2
