"""``rows()`` by the compiled multi-key point read (``point_rows``,
storage/_native/point.c: one call per block for all the keys that fall in it)
against its references: ``point_row_py`` key by key on generated blocks, and
the cells path (``include_timestamp=True`` reads cells, the reference) on
generated tables with versions, deletes, memstore rows newer than the files,
several files, several families and regions, missing keys and a column
selection.  The kernel is called on the built module itself, so these tests
also compare it when ``REGIONSCAN_NATIVE=0`` turns it off for the engine."""

from __future__ import annotations

import importlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage
from storage import native
from storage.region.read_state import state_row_dict, state_rows_dicts
from storage.storefile.point import (
    POINT_ROWS, DensePoint, block_point, file_rows_dicts, native_form, point_row_py,
)

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

QUALIFIERS = [b"a", b"b", b"c"]


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    c = storage.connect(str(tmp_path_factory.mktemp("multi_points")))
    yield c
    c.close()


_made = [0]


def _new_table(conn, families=("cf",), split_keys=None, versions=1):
    _made[0] += 1
    return conn.create_table(f"m{_made[0]}", {f: {"block_size": 256, "max_versions": versions} for f in families},
                             split_keys=split_keys, settings={"wal_sync": "none"})


def _reference(t, keys, columns=None):
    """``rows()`` as read from the rows' cells: ``include_timestamp`` takes the cells path."""
    return [(r, {c: v for c, (v, _) in d.items()}) for r, d in t.rows(keys, columns=columns, include_timestamp=True)]


@st.composite
def blocks(draw):
    width = draw(st.sampled_from([1, 3, 8]))
    keys = sorted(draw(st.lists(st.binary(min_size=width, max_size=width), min_size=1, max_size=80, unique=True)))
    rows = []
    for key in keys:
        present = draw(st.lists(st.sampled_from(QUALIFIERS), min_size=1, max_size=3, unique=True))
        rows.append((key, {b"cf:" + q: draw(st.binary(max_size=12)) for q in present},
                     draw(st.sampled_from([1_000, 1_000, 2_000]))))
    probes = draw(st.lists(st.binary(max_size=9), max_size=12))
    return rows, probes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blocks(), st.data())
def test_point_rows_answers_as_point_row_py_for_every_key(conn, generated, data):
    rows, probes = generated
    t = _new_table(conn)
    try:
        for key, cells, ts in rows:
            t.put(key, cells, timestamp=ts)
        t.flush()
        t.compact(major=True)  # a compacted clean file is written in dense blocks
        written = {k: c for k, c, _ in rows}
        (region,) = t._map.regions
        (reader,) = region.read_state.stores[0].readers
        asked = sorted(set([k for k, _, _ in rows] + probes + [k + b"\x00" for k, _, _ in rows[:5]]
                           + [k[:-1] for k, _, _ in rows[:5]]))
        start = data.draw(st.integers(0, len(asked)))
        stop = data.draw(st.integers(start, len(asked)))
        for i in range(reader.block_count):
            point = block_point(reader._block(i), reader.info.family)
            if not isinstance(point, DensePoint):
                continue  # a block in the cell layout: its keys are read as cells
            form = native_form(point)
            assert form is not False  # keys of one width
            # the index's answer (the last block, or the next begins with a new row), or a
            # flag drawn at random: the kernel and its twin answer alike either way
            ends = i + 1 >= reader.block_count or not reader._index.row_start_list[i + 1]
            whole = data.draw(st.sampled_from([ends, False, True]))
            want, want_spill = {}, []
            for key in asked[start:stop]:
                got = point_row_py(point, key, whole)
                if got is False:
                    want_spill.append(key)
                elif got:
                    want[key] = got
                    if whole == ends:
                        assert got == written[key]
            if BUILT is not None:
                out, spill = {}, []
                found = BUILT.point_rows(form[0], form[1], form[2], form[3], asked, start, stop, whole, out, spill)
                assert (out, spill, found) == (want, want_spill, len(want))
    finally:
        t.close()


@st.composite
def histories(draw):
    """Writes to a table: puts at chosen times (several versions of a cell), row and
    column deletes, flushes between them, then maybe a compaction and memstore
    rows written after it; the keys a ``rows()`` asks (with repeats and missing
    ones) and maybe a column selection."""
    keys = sorted(draw(st.lists(st.binary(min_size=1, max_size=4), min_size=1, max_size=40, unique=True)))
    ops = []
    for _ in range(draw(st.integers(1, 60))):
        kind = draw(st.sampled_from(["put", "put", "put", "put", "delete", "delete_column", "flush"]))
        key = draw(st.sampled_from(keys))
        if kind == "put":
            fam = draw(st.sampled_from([b"cf", b"g"]))
            present = draw(st.lists(st.sampled_from(QUALIFIERS), min_size=1, max_size=3, unique=True))
            ops.append(("put", key, {fam + b":" + q: draw(st.binary(max_size=10)) for q in present},
                        draw(st.integers(1, 50))))
        elif kind == "delete":
            ops.append(("delete", key, None, None))
        elif kind == "delete_column":
            ops.append(("delete", key, [b"cf:" + draw(st.sampled_from(QUALIFIERS))], None))
        else:
            ops.append(("flush", None, None, None))
    compact = draw(st.booleans())
    newer = draw(st.lists(st.tuples(st.sampled_from(keys), st.binary(max_size=6)), max_size=4))
    asked = draw(st.lists(st.sampled_from(keys) | st.binary(max_size=5), min_size=1, max_size=30))
    columns = draw(st.none() | st.lists(st.sampled_from([b"cf:a", b"cf:c", b"g:b", b"g"]), min_size=1, max_size=2,
                                        unique=True))
    return ops, compact, newer, asked, columns


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(histories(), st.booleans(), st.sampled_from([1, 3]))
def test_rows_answer_as_the_cells_path(conn, history, two_regions, versions):
    ops, compact, newer, asked, columns = history
    t = _new_table(conn, families=("cf", "g"), split_keys=[b"\x80"] if two_regions else None, versions=versions)
    try:
        for kind, key, what, ts in ops:
            if kind == "put":
                t.put(key, what, timestamp=ts)
            elif kind == "delete":
                t.delete(key, columns=what)
            else:
                t.flush()
        t.flush()
        if compact:
            t.compact(major=True)
        for key, value in newer:
            t.put(key, {b"cf:b": value})  # newer than every file: read from the memstore
        want = _reference(t, asked, columns)
        assert t.rows(asked, columns=columns) == want
        assert [(k, t.row(k, columns=columns)) for k in asked if t.row(k, columns=columns)] == want
        # each region's state read straight to dicts where its stores allow it (one clean
        # file each, memstores empty), else None: the same rows as the cells path
        full = dict(_reference(t, asked))
        wanted = sorted(set(asked))
        for region in t._map.regions:
            start, end = region.info.start, region.info.end
            mine = [k for k in wanted if start <= k and (not end or k < end)]
            dicts = state_rows_dicts(region.read_state, mine)
            if dicts is None:
                continue
            assert dicts == {k: full[k] for k in mine if k in full}
            for key in mine:
                assert state_row_dict(region.read_state, key) == full.get(key, {})
    finally:
        t.close()


def test_many_keys_to_a_block_take_one_compiled_call_per_block(conn):
    # 3,000 rows in blocks of hundreds of rows: the keys of one rows() fall many to a block
    t = conn.create_table("dense_multi", {"cf": {}}, settings={"wal_sync": "none"})
    try:
        rows = {b"r%05d" % i: {b"cf:a": b"%d" % i, b"cf:b": b"x" * (i % 5)} for i in range(3_000)}
        for key, cells in rows.items():
            t.put(key, cells, timestamp=7)
        t.flush()
        t.compact(major=True)
        (reader,) = t._map.regions[0].read_state.stores[0].readers
        asked = sorted(list(rows)[::3] + [b"r%05d" % i + b"-" for i in range(0, 3_000, 7)] + [b"a", b"s"])
        assert len(asked) > 8 * reader.block_count  # many keys to a block
        got = file_rows_dicts(reader, asked)
        if POINT_ROWS is None:
            assert got is None  # no compiled kernels: the caller reads cells
        else:
            assert got == {k: rows[k] for k in asked if k in rows}
        before = t.read_counters()
        assert t.rows(asked) == [(k, rows[k]) for k in asked if k in rows]
        after = t.read_counters()
        assert after["seeks"] - before["seeks"] >= len([k for k in asked if k in rows])  # every row found is a seek
        assert t.rows(asked[::-1] + asked[:3]) == [(k, rows[k]) for k in asked[::-1] + asked[:3] if k in rows]
    finally:
        t.close()


def test_a_row_that_ends_its_block_is_answered_by_the_compiled_call(conn):
    # rows wider than a block: each block holds one row, its last, which the index shows
    # ends there (the next block begins with a new row), so no key is read as cells again
    t = _new_table(conn)
    try:
        rows = {b"w%03d" % i: {b"cf:%d" % j: b"v%d" % i * 20 for j in range(12)} for i in range(30)}
        for key, cells in rows.items():
            t.put(key, cells, timestamp=5)
        t.flush()
        t.compact(major=True)
        (reader,) = t._map.regions[0].read_state.stores[0].readers
        assert reader.block_count == len(rows)
        asked = sorted(rows)[::2] + [b"w0010", b"w0290"]  # and two keys between blocks
        before = t.read_counters()["seeks"]
        assert t.rows(asked) == [(k, rows[k]) for k in asked if k in rows]
        seeks = t.read_counters()["seeks"] - before
        if POINT_ROWS is not None:
            # one seek a key in the file's range (b"w0290" is past it): none read again as cells
            assert seeks == len([k for k in asked if k <= max(rows)])
    finally:
        t.close()


def test_point_rows_refuses_bad_arguments_in_one_line(conn):
    if BUILT is None:
        assert native.NATIVE is None  # no compiler at install: the engine runs the reference
        return
    t = _new_table(conn)
    try:
        for i in range(20):
            t.put(b"k%02d" % i, {b"cf:a": b"v%d" % i}, timestamp=1_000)
        t.flush()
        t.compact(major=True)
        (reader,) = t._map.regions[0].read_state.stores[0].readers
        keys, width, n, columns = native_form(block_point(reader._block(0), reader.info.family))
        asked = [b"k01", b"k02"]
        cases = [
            ((keys, width, n, columns, asked, 0, 3, False, {}, []), "keys 0..3 are outside the 2 keys given"),
            ((keys, width, n, columns, asked, 0, 2, False, {}, asked), "spill list must not be the list of keys"),
            ((keys, width, n, columns, [b"k02", b"k01"], 0, 2, False, {}, []), "keys must be ascending, key 1 is below key 0"),
            ((keys, width, n, columns, [b"k01", "k02"], 0, 2, False, {}, []), "key 1 must be bytes, got str"),
            ((keys, width, n + 1000, columns, asked, 0, 2, False, {}, []), "keys of 3 bytes need"),
            ((keys, 0, n, columns, asked, 0, 2, False, {}, []), "width and count must be positive"),
            ((keys, width, n, columns[:7], asked, 0, 2, False, {}, []), "8 items per column, got 7 items"),
            ((keys, width, n, columns[:2] + (3,) + columns[3:8], asked, 0, 2, False, {}, []), "offset widths must be 4 or 8"),
            ((keys, width, n, ("cf:a",) + columns[1:8], asked, 0, 2, False, {}, []), "name must be bytes"),
        ]
        for args, message in cases:
            with pytest.raises(ValueError, match=message) as caught:
                BUILT.point_rows(*args)
            assert "\n" not in str(caught.value)
        out, spill = {}, []
        assert BUILT.point_rows(keys, width, n, columns, asked, 1, 1, True, out, spill) == 0 and out == {} and spill == []
    finally:
        t.close()
