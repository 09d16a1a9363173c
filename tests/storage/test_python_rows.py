"""scan()'s Python rows from row batches (storage/read/python_rows.py) against a
plain per-row reading of the same batch, for any column count, nulls,
timestamps and column order."""

from __future__ import annotations

from collections import OrderedDict

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.cells import CELL_SCHEMA
from storage.read.python_rows import cells_to_dicts, row_dict_maker, rows_to_dicts

_values = st.one_of(st.none(), st.binary(max_size=6))


@st.composite
def row_batches(draw):
    """A row batch as a scan builds it: ``key``, then a binary column per
    ``family:qualifier``, each followed by its ``@ts`` column when asked."""
    rows = draw(st.integers(0, 12))
    columns = draw(st.integers(0, 20))  # past row_dict_maker's dict-display limit too
    with_ts = draw(st.booleans())
    arrays, names = [pa.array([b"r%03d" % i for i in range(rows)], pa.binary())], ["key"]
    for j in range(columns):
        values = draw(st.lists(_values, min_size=rows, max_size=rows))
        arrays.append(pa.array(values, pa.binary()))
        names.append(f"cf:q{j:02d}")
        if with_ts:
            stamps = draw(st.lists(st.integers(1, 10**12), min_size=rows, max_size=rows))
            arrays.append(pa.array([None if v is None else s for v, s in zip(values, stamps)], pa.int64()))
            names.append(f"cf:q{j:02d}@ts")
    return pa.RecordBatch.from_arrays(arrays, names=names), with_ts


def _expected(batch: pa.RecordBatch, with_ts: bool) -> list:
    data = batch.to_pydict()
    fields = [n for n in batch.schema.names[1:] if not n.endswith("@ts")]
    out = []
    for i, key in enumerate(data["key"]):
        row = OrderedDict()
        for name in fields:
            value = data[name][i]
            if value is not None:
                row[name.encode("latin-1")] = (value, data[name + "@ts"][i]) if with_ts else value
        out.append((key, row))
    return out


@settings(max_examples=200, deadline=None)
@given(row_batches(), st.booleans())
def test_rows_match_a_plain_reading_of_the_batch(drawn, sorted_columns):
    batch, with_ts = drawn
    got = rows_to_dicts(batch, include_timestamp=with_ts, sorted_columns=sorted_columns)
    expected = _expected(batch, with_ts)
    if batch.num_columns == 1:
        # a batch of keys alone has no cells: no rows
        assert got == []
        return
    assert got == expected
    for (_, row), (_, want) in zip(got, expected):
        assert type(row) is (OrderedDict if sorted_columns else dict)
        if sorted_columns:
            assert list(row) == list(want)  # the columns' order


def test_a_row_dict_maker_binds_its_names_as_values():
    # names that would break a function's source if they were spliced into it
    names = (b"cf:'\"}", b"cf:\\n", b"cf:)")
    assert row_dict_maker(names)(1, 2, 3) == {b"cf:'\"}": 1, b"cf:\\n": 2, b"cf:)": 3}
    wide = tuple(b"cf:%d" % i for i in range(40))
    assert row_dict_maker(wide)(*range(40)) == {name: i for i, name in enumerate(wide)}
    assert row_dict_maker(())() == {}


@st.composite
def cell_batches(draw):
    """Cells in cell order, one version per column: rows of the same columns
    (a dense table read as cells) or of columns that differ."""
    rows = draw(st.integers(1, 10))
    same = draw(st.booleans())
    shared = sorted(draw(st.sets(st.sampled_from([b"a", b"b", b"c", b"d"]), min_size=1)))
    cells = []
    for i in range(rows):
        qualifiers = shared if same else sorted(draw(st.sets(st.sampled_from([b"a", b"b", b"c", b"d"]), min_size=1)))
        for q in qualifiers:
            cells.append((b"r%02d" % i, b"cf", q, draw(st.integers(1, 99)), 4, draw(st.binary(max_size=4))))
    columns = list(zip(*cells))
    return pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(columns, CELL_SCHEMA.types)], schema=CELL_SCHEMA)


@settings(max_examples=200, deadline=None)
@given(cell_batches(), st.booleans(), st.booleans())
def test_cell_rows_match_a_plain_reading_of_the_cells(batch, include_timestamp, sorted_columns):
    got = list(cells_to_dicts(batch, include_timestamp=include_timestamp, sorted_columns=sorted_columns))
    expected: dict = {}
    for row, family, qualifier, ts, _, value in zip(*[batch.column(i).to_pylist() for i in range(6)]):
        expected.setdefault(row, OrderedDict())[family + b":" + qualifier] = (value, ts) if include_timestamp else value
    assert got == list(expected.items())
    for (_, row), (_, want) in zip(got, expected.items()):
        assert list(row) == list(want) and type(row) is (OrderedDict if sorted_columns else dict)
