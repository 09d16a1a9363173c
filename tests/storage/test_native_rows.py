"""scan()'s ``(key, dict)`` rows built by the compiled ``row_dicts`` (storage/_native/rows.c)
against the pyarrow reference (``rows_to_dicts_py``) and a plain reading of the batch.

Random dense row batches (nulls, empty values, no rows, sliced arrays, a table
of several chunks read batch by batch) give the same rows both ways; bad
buffers get a one-line ValueError before any row is built.  The kernel tests
call the built module itself, so they also run when ``REGIONSCAN_NATIVE=0``
turns it off for the engine (CI runs this file both ways); the last tests scan
real tables through ``scan()`` with whichever path the process uses, one of
them a region wider than one row batch.
"""

from __future__ import annotations

import gc
import importlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from jobs.demo import load_sample_table, sample_row
from storage import native
from storage.read.python_rows import rows_to_dicts, rows_to_dicts_py

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

PATHS = [None] if BUILT is None else [None, BUILT]

_values = st.one_of(st.none(), st.binary(max_size=5))


@st.composite
def dense_batches(draw):
    """A row batch as a dense scan gives it (``key``, then one binary column per
    ``family:qualifier``), sliced at random."""
    rows = draw(st.integers(0, 40))
    columns = draw(st.integers(1, 18))
    arrays = [pa.array([b"r%03d" % i for i in range(rows)], pa.binary())]
    for _ in range(columns):
        arrays.append(pa.array(draw(st.lists(_values, min_size=rows, max_size=rows)), pa.binary()))
    batch = pa.RecordBatch.from_arrays(arrays, names=["key"] + [f"cf:q{j:02d}" for j in range(columns)])
    start = draw(st.integers(0, rows))
    return batch.slice(start, draw(st.integers(0, rows - start)))


def _plain(batch: pa.RecordBatch) -> list:
    """The rows read one cell at a time: a null is a cell the row does not have."""
    data = batch.to_pydict()
    names = batch.schema.names[1:]
    return [(key, {n.encode("latin-1"): data[n][i] for n in names if data[n][i] is not None})
            for i, key in enumerate(data["key"])]


@settings(max_examples=300, deadline=None)
@given(dense_batches())
def test_native_rows_match_the_reference(batch):
    want = _plain(batch)
    assert rows_to_dicts_py(batch) == want
    for path in PATHS:
        got = rows_to_dicts(batch, native=path)
        assert got == want
        assert all(type(row) is tuple and type(row[1]) is dict for row in got)


@settings(max_examples=100, deadline=None)
@given(st.lists(dense_batches(), min_size=1, max_size=4))
def test_a_table_of_several_chunks_reads_the_same_batch_by_batch(pieces):
    width = pieces[0].num_columns
    pieces = [p for p in pieces if p.num_columns == width]  # one schema: a table's chunks
    table = pa.Table.from_batches(pieces)
    want = _plain(table.combine_chunks().to_batches()[0]) if table.num_rows else []
    for path in PATHS:
        got = [row for batch in table.to_batches() for row in rows_to_dicts(batch, native=path)]
        assert got == want


def test_bad_buffers_are_refused_in_one_line_before_any_row():
    if BUILT is None:  # no C compiler at install: the build said so, and the reference runs
        assert native.status() == "off (not built)"
        return
    keys = pa.array([b"a", b"bb", b"ccc"], pa.binary())
    values = pa.array([b"x", None, b"zz"], pa.binary())
    valid, offsets, data = values.buffers()
    key = (None, keys.buffers()[1], keys.buffers()[2], 0, 3)
    cases = {
        "column 0 has 2 rows, the keys 3": ((valid, offsets, data, 0, 2), (b"cf:a",)),
        "column 0's offsets hold": ((valid, offsets, data, 2, 3), (b"cf:a",)),
        "column 0's offsets 0..3 fall outside its 2 data bytes": ((valid, offsets, data.slice(0, 2), 0, 3), (b"cf:a",)),
        "column 0's validity holds 0 bytes": ((b"", offsets, data, 0, 3), (b"cf:a",)),
        "name 0 must be bytes, got str": ((valid, offsets, data, 0, 3), ("cf:a",)),
        "1 names for 0 columns": (None, (b"cf:a",)),
        "column 0's offsets fall at row 1": ((valid, pa.py_buffer(bytes([0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0])),
                                              data, 0, 3), (b"cf:a",)),
    }
    for message, (column, names) in cases.items():
        columns = () if column is None else (column,)
        with pytest.raises(ValueError, match="row_dicts: " + message.replace("(", r"\(").replace(".", r"\.")) as err:
            BUILT.row_dicts(key, columns, names)
        assert "\n" not in str(err.value)
    with pytest.raises(TypeError):
        BUILT.row_dicts(key, [(valid, offsets, data, 0, 3)], (b"cf:a",))  # columns must be a tuple


def test_the_collector_is_left_as_it_was():
    if BUILT is None:
        assert native.status() == "off (not built)"
        return
    batch = pa.RecordBatch.from_arrays([pa.array([b"k%d" % i for i in range(5000)]), pa.array([b"v"] * 5000)],
                                       names=["key", "cf:a"])
    assert gc.isenabled()
    assert len(rows_to_dicts(batch, native=BUILT)) == 5000
    assert gc.isenabled()
    gc.disable()
    try:
        rows_to_dicts(batch, native=BUILT)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_scan_of_a_dense_table_gives_its_rows(tmp_path):
    # a compacted table's clean blocks are dense: scan() builds its rows from row batches,
    # with the compiled kernel unless REGIONSCAN_NATIVE=0 (then with the reference)
    conn = storage.connect(str(tmp_path))
    table = conn.create_table("t", {"cf": {}})
    want = []
    for i in range(300):
        row = {b"cf:a": b"a%d" % i, b"cf:b": b"" if i % 3 else b"b%d" % i}
        if i % 7 == 0:
            del row[b"cf:a"]  # a row without one column: a null in its dense block
        table.put(b"r%04d" % i, row)
        want.append((b"r%04d" % i, row))
    table.flush()
    table.compact(major=True)
    assert list(table.scan()) == want
    assert list(table.scan(batch_size=7)) == want
    assert native.status() in ("on", "off (not built)", "off (REGIONSCAN_NATIVE=0)")


def test_scan_of_a_region_wider_than_one_batch(tmp_path):
    # 70,000 rows in one region's dense blocks come as more than one row batch (a request's
    # batches hold at most 65,536 rows): every row once, in order, from each batch's dicts
    conn = storage.connect(str(tmp_path))
    table = load_sample_table(conn, "t", 70_000, 1, value_size=4)
    table.compact(major=True)
    got = list(table.scan())
    assert len(got) == 70_000
    assert got[::997] == [sample_row(i, 4) for i in range(0, 70_000, 997)]
    assert got[-1] == sample_row(69_999, 4)
