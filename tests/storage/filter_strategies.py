"""Random rows and random filters for the filter tests, and the two paths that must agree.

The cell path (filter_row_key + filter_row_cells, one row at a time) is the model;
``run_batches`` runs the batch path (filter_batch) over the same rows cut into batches.
Shared by tests/storage/test_filters.py and test_filters_columns.py.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from storage.cells import CELL_SCHEMA, Cell, CellType, batch_to_cells, cells_to_batch, sort_key
from storage.filters import (
    BinaryComparator,
    BinaryPrefixComparator,
    ColumnCountGetFilter,
    ColumnPaginationFilter,
    ColumnPrefixFilter,
    ColumnValueFilter,
    CompareOperator,
    DependentColumnFilter,
    Filter,
    FilterList,
    FilterListOperator,
    FirstKeyOnlyFilter,
    FuzzyRowFilter,
    InclusiveStopFilter,
    KeyOnlyFilter,
    MultiRowRangeFilter,
    NullComparator,
    PageFilter,
    PrefixFilter,
    QualifierFilter,
    RandomRowFilter,
    RegexStringComparator,
    RowFilter,
    RowRange,
    SingleColumnValueFilter,
    SkipFilter,
    SubstringComparator,
    TimestampsFilter,
    ValueFilter,
    WhileMatchFilter,
)

PUT = int(CellType.PUT)
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------
# data

KEY_BYTES = b"ab\x00\xff"
VALUE_BYTES = b"aAbx\n\x0b {,}1"
FAMILIES = [b"cf", b"d"]
QUALIFIERS = [b"", b"a", b"ab", b"b"]

keys = st.binary(min_size=0, max_size=3).map(lambda b: bytes(KEY_BYTES[x % 4] for x in b))
values = st.lists(st.sampled_from(VALUE_BYTES), max_size=5).map(bytes)


@st.composite
def row_sets(draw) -> list[list[Cell]]:
    """Rows (sorted, unique keys) of version-resolved cells in cell order."""
    row_keys = sorted(draw(st.sets(keys, min_size=1, max_size=8)))
    rows = []
    for key in row_keys:
        coords = draw(
            st.sets(
                st.tuples(st.sampled_from(FAMILIES), st.sampled_from(QUALIFIERS), st.integers(1, 4)),
                min_size=1,
                max_size=7,
            )
        )
        cells = [Cell(key, f, q, ts, PUT, draw(values)) for f, q, ts in coords]
        rows.append(sorted(cells, key=sort_key))
    return rows


# ---------------------------------------------------------------------------
# filters

ops = st.sampled_from(list(CompareOperator))
REGEXES = [
    rb"^a",
    rb"b$",
    rb"\s",
    rb"[\s1]",
    rb"\S\S",
    rb"[[:digit:]]",
    rb"[[:space:]]",
    rb"(?i)A",
    rb"a{,2}",
    rb"(?m)a$",
    rb"^$",
    rb"x.",
    rb"[^a]b",
    rb"(a|b)+$",
    rb"(?:a$)|x",
]


def comparators(domain):
    """Comparators whose values come from the bytes they will be compared with."""
    return st.one_of(
        domain.map(BinaryComparator),
        domain.map(BinaryPrefixComparator),
        domain.map(lambda v: SubstringComparator(v[:2])),
        st.sampled_from(REGEXES).map(RegexStringComparator),
        st.just(NullComparator()),
    )


qualifiers = st.sampled_from(QUALIFIERS)
fuzzy_pairs = st.lists(st.tuples(st.sampled_from(KEY_BYTES), st.sampled_from(b"01")), max_size=3).map(
    lambda pairs: (bytes(k for k, _ in pairs), bytes(m for _, m in pairs))
)
row_ranges = st.tuples(keys, st.booleans(), keys, st.booleans()).map(
    lambda r: RowRange(min(r[0], r[2]), r[1], max(r[0], r[2]), r[3])
)

leaf_filters = st.one_of(
    keys.map(PrefixFilter),
    st.builds(RowFilter, ops, comparators(keys)),
    st.lists(row_ranges, max_size=3).map(MultiRowRangeFilter),
    st.just(FirstKeyOnlyFilter()),
    st.booleans().map(KeyOnlyFilter),
    qualifiers.map(ColumnPrefixFilter),
    st.builds(QualifierFilter, ops, comparators(qualifiers)),
    st.builds(ValueFilter, ops, comparators(values)),
    st.builds(
        SingleColumnValueFilter,
        st.sampled_from(FAMILIES),
        qualifiers,
        ops,
        comparators(values),
        st.booleans(),
        st.booleans(),
    ),
    st.builds(ColumnValueFilter, st.sampled_from(FAMILIES), qualifiers, ops, comparators(values)),
    st.integers(0, 4).map(PageFilter),
    st.lists(st.integers(1, 4), max_size=3).map(TimestampsFilter),
    keys.map(InclusiveStopFilter),
    st.integers(0, 4).map(ColumnCountGetFilter),
    st.builds(ColumnPaginationFilter, st.integers(0, 4), st.one_of(st.integers(0, 3), qualifiers)),
    st.builds(DependentColumnFilter, st.sampled_from(FAMILIES), qualifiers),
    st.builds(DependentColumnFilter, st.sampled_from(FAMILIES), qualifiers, st.booleans(), ops, comparators(values)),
    st.lists(fuzzy_pairs, min_size=1, max_size=3).map(FuzzyRowFilter),
    st.builds(RandomRowFilter, st.sampled_from([-0.5, 0.0, 0.3, 0.7, 1.0, 1.5]), st.integers(0, 2**32)),
)


def _extend(children):
    return st.one_of(
        st.builds(FilterList, st.sampled_from(list(FilterListOperator)), st.lists(children, max_size=3)),
        children.map(SkipFilter),
        children.map(WhileMatchFilter),
    )


filters = st.recursive(leaf_filters, _extend, max_leaves=6)


# ---------------------------------------------------------------------------
# the two paths


def run_cells(f: Filter, rows: list[list[Cell]], use_row_key: bool = True) -> list[Cell]:
    """The cells ``f`` keeps of ``rows``, one row at a time (the model)."""
    out = []
    for cells in rows:
        if use_row_key and f.filter_row_key(cells[0].row):
            continue
        kept = f.filter_row_cells(list(cells))
        if kept is not None:
            assert kept, "filter_row_cells must return None rather than an empty list"
            out.extend(kept)
    return out


def to_table(rows: list[list[Cell]]) -> pa.Table:
    """``rows``' cells as one CELL_SCHEMA table."""
    return pa.Table.from_batches([cells_to_batch([c for r in rows for c in r])])


def run_batches(f: Filter, rows: list[list[Cell]], cuts: list[int]) -> list[Cell]:
    """The cells ``f`` keeps of ``rows`` through filter_batch, the rows cut into batches at ``cuts``."""
    out = []
    bounds = [0] + sorted(set(c for c in cuts if 0 < c < len(rows))) + [len(rows)]
    for lo, hi in zip(bounds, bounds[1:]):
        table = f.filter_batch(to_table(rows[lo:hi]))
        assert table.schema == CELL_SCHEMA
        out.extend(batch_to_cells(table))
    return out
