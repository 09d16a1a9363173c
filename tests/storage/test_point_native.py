"""The compiled point read (``point_row``, storage/_native/point.c) against its
Python reference (``point_row_py``), and ``row()`` through it against the
row's cells, on real store files of generated rows: keys of one width and of
several, sparse columns, empty values, timestamps in several runs, rows that
end a block.  The kernel is checked with the built module itself, so these
tests also run when ``REGIONSCAN_NATIVE=0`` turns it off for the engine
(``row()`` then reads cells, the reference); without a C compiler there is no
module, and the reference is checked against the rows written."""

from __future__ import annotations

import importlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage
from storage.region.read_state import state_row_dict
from storage.storefile.point import (
    DensePoint, block_point, file_row_cells, file_row_dict, native_form, point_row_py,
)

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

QUALIFIERS = [b"a", b"b", b"c"]


@st.composite
def tables(draw):
    width = draw(st.sampled_from([None, 1, 3, 8]))  # None: keys of several widths
    if width is None:
        keys = draw(st.lists(st.binary(min_size=1, max_size=6), min_size=1, max_size=80, unique=True))
    else:
        keys = draw(st.lists(st.binary(min_size=width, max_size=width), min_size=1, max_size=80, unique=True))
    rows = []
    for key in sorted(keys):
        present = draw(st.lists(st.sampled_from(QUALIFIERS), min_size=1, max_size=3, unique=True))
        cells = {b"cf:" + q: draw(st.binary(max_size=12)) for q in present}
        rows.append((key, cells, draw(st.sampled_from([1_000, 1_000, 2_000, 3_000]))))
    probes = draw(st.lists(st.binary(max_size=9), max_size=10))
    return rows, probes


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    c = storage.connect(str(tmp_path_factory.mktemp("native_points")))
    yield c
    c.close()


_made = [0]


def _table(conn, rows):
    _made[0] += 1
    t = conn.create_table(f"t{_made[0]}", {"cf": {"block_size": 256}}, settings={"wal_sync": "none"})
    for key, cells, ts in rows:
        t.put(key, cells, timestamp=ts)
    t.flush()
    t.compact(major=True)
    return t


def _reader(t):
    (region,) = t._map.regions
    (reader,) = region.read_state.stores[0].readers
    return reader


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tables())
def test_the_compiled_point_read_answers_as_the_python_one(conn, generated):
    rows, probes = generated
    t = _table(conn, rows)
    try:
        reader = _reader(t)
        expected = {k: c for k, c, _ in rows}
        asked = [k for k, _, _ in rows] + probes + [k + b"\x00" for k, _, _ in rows[:5]] + [k[:-1] for k, _, _ in rows[:5]]
        for i in range(reader.block_count):
            point = block_point(reader._block(i), reader.info.family)
            if not isinstance(point, DensePoint):
                continue  # a block in the cell layout: read by the cells path only
            form = native_form(point)
            for key in asked:
                want = point_row_py(point, key)
                if isinstance(want, dict):
                    assert want == expected[key]
                if BUILT is not None and form is not False:  # False: keys of several widths, read in Python
                    assert BUILT.point_row(form[0], form[1], form[2], key, form[3]) == want, key
        for key in asked:
            cells = file_row_cells(reader, key)
            want = {c[1] + b":" + c[2]: c[5] for c in cells}
            assert want == expected.get(key, {})
            got = file_row_dict(reader, key)
            assert got is None or got == want
            via_state = state_row_dict(t._map.regions[0].read_state, key)
            assert via_state is None or via_state == want
            assert t.row(key) == want
    finally:
        t.close()


def test_point_row_refuses_bad_arguments_in_one_line(conn):
    if BUILT is None:
        return  # no module to call: nothing to refuse
    t = _table(conn, [(b"k%02d" % i, {b"cf:a": b"v%d" % i}, 1_000) for i in range(20)])
    try:
        reader = _reader(t)
        form = native_form(block_point(reader._block(0), reader.info.family))
        keys, width, n, columns = form
        with pytest.raises(ValueError, match="keys of 3 bytes need"):
            BUILT.point_row(keys, width, n + 1000, b"k01", columns)
        with pytest.raises(ValueError, match="width and count must be positive"):
            BUILT.point_row(keys, 0, n, b"k01", columns)
        bad = columns[:2] + (3,) + columns[3:8]
        with pytest.raises(ValueError, match="offset widths must be 4 or 8"):
            BUILT.point_row(keys, width, n, b"k01", bad)
        short = (columns[0], columns[1][:1]) + columns[2:8]
        with pytest.raises(ValueError, match="past the 1 value offsets"):
            BUILT.point_row(keys, width, n, b"k01", short)
        with pytest.raises(ValueError, match="8 items per column, got 7 items"):
            BUILT.point_row(keys, width, n, b"k01", columns[:7])
        with pytest.raises(ValueError, match="name must be bytes") as caught:
            BUILT.point_row(keys, width, n, b"k01", ("cf:a",) + columns[1:8])
        assert "\n" not in str(caught.value)
    finally:
        t.close()


def test_blocks_with_timestamp_runs_and_sparse_columns_read_alike(conn):
    # many rows to a block, a new timestamp every 5 rows, a column every third row lacks
    rows = []
    for i in range(400):
        cells = {b"cf:a": b"v%d" % i, b"cf:c": b"x" * (i % 4)}
        if i % 3:
            cells[b"cf:b"] = b""
        rows.append((b"k%04d" % i, cells, 1_000 + (i // 5) * 10))
    t = conn.create_table("runs", {"cf": {"block_size": 4096}}, settings={"wal_sync": "none"})
    try:
        for key, cells, ts in rows:
            t.put(key, cells, timestamp=ts)
        t.flush()
        t.compact(major=True)
        reader = _reader(t)
        runs = sparse = 0
        for i in range(reader.block_count):
            point = block_point(reader._block(i), reader.info.family)
            assert isinstance(point, DensePoint)
            runs += any(col.ends is not None for col in point._columns)
            sparse += any(col.valid is not None for col in point._columns)
            form = native_form(point)
            assert form is not False
            for key, cells, _ in rows:
                want = point_row_py(point, key)
                assert want is False or want is None or want == cells
                if BUILT is not None:
                    assert BUILT.point_row(form[0], form[1], form[2], key, form[3]) == want, key
        assert runs and sparse and reader.block_count > 2
        for key, cells, _ in rows:
            assert t.row(key) == cells
        assert t.row(b"k0000\x00") == {} and t.row(b"k") == {} and t.row(b"l") == {}
    finally:
        t.close()
