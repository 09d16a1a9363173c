"""scan()'s ``(key, dict)`` rows built by the compiled ``row_dicts`` (storage/_native/rows.c)
against the pyarrow reference (``rows_to_dicts_py``) and a plain reading of the batch.

Random dense row batches (nulls, empty values, no rows, sliced arrays, a table
of several chunks read batch by batch) give the same rows both ways; bad
buffers get a one-line ValueError before any row is built.  The kernel tests
call the built module itself, so they also run when ``REGIONSCAN_NATIVE=0``
turns it off for the engine (CI runs this file both ways); the last tests scan
real tables through ``scan()`` with whichever path the process uses, one of
them a region wider than one row batch, made a few hundred rows at a time
(``row_dict_chunks``) so that a reader going through it holds no more.
"""

from __future__ import annotations

import gc
import importlib
import random
import tracemalloc

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from jobs.demo import load_sample_table, sample_row
from storage import native
from storage.read.python_rows import ROW_CHUNK, row_dict_chunks, rows_to_dicts, rows_to_dicts_py

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


@st.composite
def long_batches(draw):
    """A dense row batch of up to a few ROW_CHUNKs of rows, sliced at random: its
    values from a drawn seed (drawing each of thousands of cells would be slow)."""
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    rows = draw(st.integers(0, 3 * ROW_CHUNK + 5))
    columns = draw(st.integers(1, 4))
    nulls = draw(st.sampled_from([0.0, 0.1, 0.9]))
    arrays = [pa.array([b"r%05d" % i for i in range(rows)], pa.binary())]
    for _ in range(columns):
        arrays.append(pa.array([None if rng.random() < nulls else rng.randbytes(rng.randrange(4)) for _ in range(rows)],
                               pa.binary()))
    batch = pa.RecordBatch.from_arrays(arrays, names=["key"] + [f"cf:q{j}" for j in range(columns)])
    start = draw(st.integers(0, rows))
    return batch.slice(start, draw(st.integers(0, rows - start)))


@settings(max_examples=60, deadline=None)
@given(long_batches(), st.data())
def test_rows_of_part_of_a_batch_and_a_batch_in_pieces_match_the_reference(batch, data):
    want = _plain(batch)
    if BUILT is not None:
        # row_dicts(..., start, stop): rows [start, stop) of the batch; start alone: to its end
        start = data.draw(st.integers(0, batch.num_rows))
        stop = data.draw(st.integers(start, batch.num_rows))
        key, columns, names = _row_dicts_args(batch)
        assert BUILT.row_dicts(key, columns, names, start, stop) == want[start:stop]
        assert BUILT.row_dicts(key, columns, names, start) == want[start:]
    for path in PATHS:
        pieces = list(row_dict_chunks(batch, native=path))
        assert [row for piece in pieces for row in piece] == want
        assert all(0 < len(piece) <= ROW_CHUNK for piece in pieces)
        assert len(pieces) == -(-batch.num_rows // ROW_CHUNK)  # full pieces but the last
    # the reference's other shapes come in pieces too, the same rows as in one list
    assert [r for p in row_dict_chunks(batch, sorted_columns=True) for r in p] == rows_to_dicts_py(batch, sorted_columns=True)


def _row_dicts_args(batch: pa.RecordBatch) -> tuple:
    """``row_dicts``'s (key, columns, names) of a dense row batch, as rows_to_dicts passes them."""
    def buffers(column):
        valid, offsets, data = column.buffers()
        return valid if column.null_count else None, offsets, data, column.offset, len(column)
    return (buffers(batch.column(0)), tuple(buffers(c) for c in batch.columns[1:]),
            tuple(n.encode("latin-1") for n in batch.schema.names[1:]))


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
    column = ((valid, offsets, data, 0, 3),)
    for start, stop in ((2, 1), (0, 4), (-1, 2), (4, 5)):
        with pytest.raises(ValueError, match=rf"row_dicts: rows {start}\.\.{stop} asked of a batch of 3") as err:
            BUILT.row_dicts(key, column, (b"cf:a",), start, stop)
        assert "\n" not in str(err.value)
    # only the rows asked for are read: a bad offset past them is no error of theirs
    bent = pa.py_buffer(bytes([0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0]))
    assert BUILT.row_dicts(key, ((None, bent, data, 0, 3),), (b"cf:a",), 0, 2) == [(b"a", {b"cf:a": b"x"}), (b"bb", {b"cf:a": b"z"})]
    with pytest.raises(ValueError, match="row_dicts: column 0's offsets fall at row 2"):
        BUILT.row_dicts(key, ((None, bent, data, 0, 3),), (b"cf:a",), 1, 3)


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


@pytest.fixture(scope="module")
def wide_region(tmp_path_factory):
    """70,000 rows in one region's dense blocks: more than one row batch (a request's
    batches hold at most 65,536 rows)."""
    conn = storage.connect(str(tmp_path_factory.mktemp("wide")))
    table = load_sample_table(conn, "t", 70_000, 1, value_size=4)
    table.compact(major=True)
    yield table
    conn.close()


def test_scan_of_a_region_wider_than_one_batch(wide_region):
    # every row once, in order, from each batch's dicts
    got = list(wide_region.scan())
    assert len(got) == 70_000
    assert got[::997] == [sample_row(i, 4) for i in range(0, 70_000, 997)]
    assert got[-1] == sample_row(69_999, 4)


def test_a_reader_going_through_a_scan_holds_a_few_hundred_rows(wide_region):
    # the rows of a 65,536-row batch are made ROW_CHUNK at a time, each piece once the one
    # before has been taken: going through the scan, the Python heap holds one piece
    # (about 100 KB here), where the batch's rows at once held 28 MB
    assert sum(1 for _ in wide_region.scan()) == 70_000  # blocks decoded and cached: only the rows remain
    tracemalloc.start()
    try:
        rows = sum(1 for _ in wide_region.scan())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rows == 70_000
    assert peak < 2 << 20, f"{peak:,} bytes at the peak"
