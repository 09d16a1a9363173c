"""The kernels a live table's scan runs, on the shapes such a chunk has.

A live chunk is most often a base run with one newer run (a memstore or a
second file re-putting some rows) or a base run with DeleteFamily markers:
``resolve_merge`` (storage/_native/resolve.c) takes those, with integer keys
and no time range, through a two-cursor loop of its own, and leaves a piece
that repeats a key to its general loop.  Both must answer as the NumPy
reference.  ``row_order`` looks a sample of the smaller runs' keys up in the
largest before merging them, and must still find every key two runs share.
The binary gather copies runs of rows and checks every offset of a run;
narrow values of one width are gathered as NumPy rows by either path.
"""

from __future__ import annotations

import importlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.cells import CellType
from storage.kernels.cell_columns import pool_empty
from storage.kernels.gather import _narrow_take, gather_binary, take_binary
from storage.kernels.resolve_rows import ABSENT, Markers, RowPiece, resolve_rows
from storage.kernels.row_merge import row_order

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

FAMILY = int(CellType.DELETE_FAMILY)


def _key(i: int) -> bytes:
    return i.to_bytes(4, "big")


def _piece(rows: list[int], stamps: list[list[int]], tag: bytes) -> RowPiece:
    """A piece of 4-byte keys ``rows`` with, per column, the timestamps ``stamps[j]``."""
    values = [pa.array([tag + b"%d-%d" % (j, r) for r in rows], pa.binary()) for j in range(len(stamps))]
    return RowPiece(pa.array([_key(r) for r in rows], pa.binary()),
                    [np.array(s, np.int64) for s in stamps], values)


def _answer(resolved) -> tuple:
    return (resolved.keys.to_pylist(), [v.to_pylist() for v in resolved.values],
            [t.tolist() for t in resolved.ts], resolved.cell_count())


@st.composite
def live_chunks(draw):
    """(pieces newest first, markers or None, columns): a base run and a newer run or markers."""
    columns = draw(st.integers(0, 3))
    base_rows = sorted(draw(st.sets(st.integers(0, 300), max_size=120)))
    stamp = st.sampled_from([ABSENT, 1, 2, 5])
    base = _piece(base_rows, [[draw(stamp) for _ in base_rows] for _ in range(columns)], b"b")
    pieces = [base]
    if draw(st.booleans()):
        # re-puts of some base rows and new rows, some columns only, tying timestamps at times
        newer_rows = sorted(draw(st.sets(st.integers(0, 300), max_size=60)))
        newer = _piece(newer_rows, [[draw(st.sampled_from([ABSENT, 2, 5, 9])) for _ in newer_rows]
                                    for _ in range(columns)], b"n")
        pieces.insert(0, newer)
    markers = None
    if len(pieces) == 1 or draw(st.booleans()):
        marked = draw(st.lists(st.integers(0, 320), max_size=40))
        markers = _family_markers([_key(r) for r in marked], [draw(st.sampled_from([1, 2, 6])) for _ in marked])
    return pieces, markers, columns


def _family_markers(keys: list[bytes], stamps: list[int]) -> Markers:
    """DeleteFamily markers of rows ``keys`` at ``stamps``."""
    return Markers(pa.array(keys, pa.binary()), pa.array([b""] * len(keys), pa.binary()),
                   np.array(stamps, np.int64), np.full(len(keys), FAMILY, np.uint8))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(case=live_chunks())
def test_a_base_run_with_a_newer_run_or_markers_resolves_as_the_reference(case):
    pieces, markers, columns = case
    compiled = resolve_rows(pieces, columns, markers, native=BUILT)
    reference = resolve_rows(pieces, columns, markers, native=None)
    for values in compiled.values:
        values.validate(full=True)
    assert _answer(compiled) == _answer(reference)


@st.composite
def keyed_chunks(draw):
    """(pieces, markers, columns) of keys of one width of 1, 2, 4 or 8 bytes (read as integers
    straight from each piece's bytes), of one width past 8 bytes under one lead (a string id,
    a composite key: read as their last 8 bytes) or under none (a hash before an id: 128-bit
    integers), or of several widths (the encoded-keys path); a piece's keys may be a slice of a
    longer array (its bytes start past the buffer's first).  Markers past 8 bytes are now and
    then under another lead (then both read as 128-bit integers)."""
    width = draw(st.sampled_from([1, 2, 4, 8, None, 12, 16, "hashed"]))
    top = 250 if width == 1 else 1000
    lead = {12: b"\x80\x00\x00\x00", 16: b"user"}.get(width)

    def key(r: int, lead: bytes | None = lead) -> bytes:
        if width == "hashed":  # 12 bytes under no one lead (read as 128-bit integers), in r's order
            return (r * 7919 << 40 | r).to_bytes(12, "big")
        if width == 16:
            return lead + b"%012d" % r
        if width == 12:
            return lead + r.to_bytes(8, "big")
        return r.to_bytes(width, "big") if width else b"k" * (r % 3) + r.to_bytes(2, "big")

    def piece(rows, tag):
        stamps = [[draw(st.sampled_from([ABSENT, 1, 4])) for _ in rows] for _ in range(2)]
        pad = draw(st.booleans())
        keys = pa.array(([key(top + 1)] if pad else []) + [key(r) for r in rows], pa.binary())
        return RowPiece(keys.slice(1) if pad else keys, [np.array(t, np.int64) for t in stamps],
                        [pa.array([tag + b"%d" % r for r in rows], pa.binary()) for _ in range(2)])

    if width is None:  # several widths: order by the encoded keys, not by the integers
        rows_of = lambda: sorted(draw(st.sets(st.integers(0, top), max_size=50)), key=key)  # noqa: E731
    else:
        rows_of = lambda: sorted(draw(st.sets(st.integers(0, top), max_size=50)))  # noqa: E731
    pieces = [piece(rows_of(), b"n"), piece(rows_of(), b"b")]
    markers = None
    if draw(st.booleans()):
        marked = draw(st.lists(st.integers(0, top), max_size=20))
        other = lead is not None and draw(st.integers(0, 3)) == 0
        keys = [key(r, b"usex" if width == 16 else b"\x80\x00\x00\x01") if other else key(r) for r in marked]
        markers = _family_markers(keys, [draw(st.sampled_from([1, 2, 6])) for _ in marked])
    return pieces, markers, 2


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(case=keyed_chunks())
def test_keys_of_one_width_merge_from_their_bytes_as_the_reference(case):
    pieces, markers, columns = case
    compiled = resolve_rows(pieces, columns, markers, native=BUILT)
    reference = resolve_rows(pieces, columns, markers, native=None)
    compiled.keys.validate(full=True)
    assert _answer(compiled) == _answer(reference)


def test_a_key_repeated_late_in_a_piece_is_resolved_by_the_general_loop():
    """The two-cursor loop has written rows when it meets the repeat: the general loop starts over."""
    base_rows = list(range(0, 200, 2)) + [200, 200, 202]  # a row cut across two blocks at the end
    base = _piece(base_rows, [[1] * len(base_rows), [1] * (len(base_rows) - 2) + [ABSENT, 3]], b"b")
    newer = _piece(list(range(0, 210, 5)), [[4] * 42, [ABSENT] * 42], b"n")
    for markers in (None, Markers(pa.array([_key(10), _key(200)]), pa.array([b"", b""]), np.array([5, 2], np.int64),
                                  np.full(2, FAMILY, np.uint8))):
        compiled = resolve_rows([newer, base], 2, markers, native=BUILT)
        reference = resolve_rows([newer, base], 2, markers, native=None)
        assert _answer(compiled) == _answer(reference)
        assert _key(200) in compiled.keys.to_pylist()


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(runs=st.lists(st.sets(st.integers(0, 2000), max_size=300), min_size=2, max_size=4))
def test_row_order_finds_every_shared_key_sampled_or_not(runs):
    keys = [pa.array([_key(r) for r in sorted(run)], pa.binary()) for run in runs]
    order = row_order(keys)
    shared = sum(len(r) for r in runs) != len(set().union(*runs))
    if shared:
        assert order is None
        return
    laid = [k for run in keys for k in run.to_pylist()]
    assert [laid[i] for i in order] == sorted(laid)


def test_row_order_finds_a_shared_key_its_sample_misses():
    base = list(range(0, 100_000, 3))
    newer = list(range(1, 10_000, 3)) + [9_999]  # one shared key, past every sampled one
    keys = [pa.array([_key(r) for r in newer]), pa.array([_key(r) for r in base])]
    assert row_order(keys) is None
    assert row_order([keys[0][:-1], keys[1]]) is not None


def test_gather_refuses_offsets_that_go_down_inside_a_run():
    """Damaged offsets inside a run of picks (copied with one memcpy) are refused in one line."""
    if BUILT is None:
        return  # the reference is Arrow's take, which validates arrays itself
    offsets = np.array([0, 3, 1, 4, 6], np.int32)  # row 1's end is before its start
    damaged = pa.Array.from_buffers(pa.binary(), 4, [None, pa.py_buffer(offsets), pa.py_buffer(b"abcdef")])
    with pytest.raises(ValueError, match=r"^index\[1\] = 1 is outside the 4 rows of the chunks \(or their offsets are damaged\)$"):
        gather_binary(damaged, np.array([0, 1, 2, 3]), native=BUILT)
    sound = pa.array([b"ab", b"", None, b"cde"] * 50, pa.binary())
    index = np.array(list(range(10, 60)) + [-1] + list(range(0, 8)) + list(range(120, 200)), np.int64)
    assert gather_binary(sound, index, native=BUILT).to_pylist() == take_binary(sound, index).to_pylist()


@st.composite
def one_width_columns(draw):
    """Values of one width (0 to 20 bytes, past the narrow limit too) in 1 to 10 chunks, some
    sliced, sometimes a null or a value of another width; and picks, -1 at times."""
    width = draw(st.integers(0, 20))
    value = st.binary(min_size=width, max_size=width)
    chunks = []
    for _ in range(draw(st.integers(1, 10))):
        full = draw(st.lists(value, max_size=12))
        start = draw(st.integers(0, len(full)))
        chunks.append(pa.array(full, pa.binary()).slice(start))
    odd = draw(st.sampled_from([None, "null", "wider"]))
    if odd is not None:
        chunks.append(pa.array([None if odd == "null" else b"x" * (width + 1)], pa.binary()))
    column = pa.chunked_array(chunks, pa.binary())
    rows = len(column)
    picks = draw(st.lists(st.integers(-1 if draw(st.booleans()) else 0, rows - 1), max_size=40)) if rows else []
    return column, np.array(picks, np.int64)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(case=one_width_columns())
def test_narrow_values_of_one_width_gather_as_take_both_ways(case):
    column, index = case
    expected = take_binary(column, index).to_pylist()
    for native in ([BUILT] if BUILT is not None else []) + [None]:
        got = gather_binary(column, index, native=native)
        got.validate(full=True)
        assert got.to_pylist() == expected
    single = column.combine_chunks()
    assert gather_binary(single, index).to_pylist() == expected


def test_the_narrow_take_leaves_what_it_does_not_take_to_the_other_paths():
    four = pa.chunked_array([pa.array([b"abcd", b"efgh"]), pa.array([b"ijkl"])])
    assert _narrow_take(four, np.array([2, 0, 0, 1])).to_pylist() == [b"ijkl", b"abcd", b"abcd", b"efgh"]
    assert _narrow_take(four, np.array([3])) is None  # past the rows: the others refuse it
    assert _narrow_take(four, np.array([0, -1])) is None  # a null asked for
    assert _narrow_take(pa.array([b"ab", b"cdef", b"gh"]), np.array([0])) is None  # mean width 2.67
    assert _narrow_take(pa.array([b"a", b"abc"]), np.array([0])) is None  # mean width 2, two widths
    assert _narrow_take(pa.array([b"x" * 17] * 3), np.array([0])) is None  # wide: the run copy
    with pytest.raises(IndexError):
        gather_binary(four, np.array([3]), native=None)


@pytest.mark.parametrize("at", [0, 40_000, 69_998])
@pytest.mark.parametrize("width", [1, 4, 13, 16])
def test_values_of_one_width_in_the_live_shape_gather_as_take_both_ways(width, at):
    """The compiled gather copies values of one width of at most 16 bytes pick by pick once it
    has checked every offset of every chunk: two values of other widths anywhere in a long chunk
    (their mean still the width) send it to the run copy; either way the answer is take's.  The
    picks are a live chunk's: three rows of the base run, then one of the newer run."""
    n = 70_000
    base = [(i % 251).to_bytes(1, "big") * width for i in range(n)]
    base[at], base[at + 1] = base[at][:-1], base[at + 1] + b"!"
    newer = pa.array([b"n" * width] * (n // 4), pa.binary())
    i = np.arange(n)
    index = np.where(i % 4 != 3, i, n + i // 4).astype(np.int64)
    for values in (base, [v if k not in (at, at + 1) else b"=" * width for k, v in enumerate(base)]):
        column = pa.chunked_array([pa.array(values[:7], pa.binary()), pa.array(values[7:], pa.binary()), newer])
        expected = take_binary(column, index)
        for native in ([BUILT] if BUILT is not None else []) + [None]:
            got = gather_binary(column, index, native=native)
            got.validate(full=True)
            assert got.equals(expected)


def test_pool_empty_gives_writable_arrays_of_the_shape_and_type_asked():
    for shape, dtype in ((0, np.int64), (7, np.uint32), ((3, 5), np.int64), ((4, 3), np.uint8)):
        a = pool_empty(shape, dtype)
        assert a.shape == (shape if isinstance(shape, tuple) else (shape,)) and a.dtype == dtype
        assert a.flags.writeable and a.flags.c_contiguous
        a[...] = 1
        assert int(a.sum()) == a.size


@st.composite
def null_free_gathers(draw):
    """A binary column without nulls (a live table's value column: chunks, slices, values of
    many widths) and picks in runs, jumps and repeats, some with a -1 somewhere."""
    chunks = []
    for _ in range(draw(st.integers(1, 4))):
        full = draw(st.lists(st.binary(min_size=0, max_size=40), max_size=30))
        start = draw(st.integers(0, len(full)))
        chunks.append(pa.array(full, pa.binary()).slice(start, draw(st.integers(0, len(full) - start))))
    column = pa.chunked_array(chunks, pa.binary())
    rows = len(column)
    picks: list[int] = []
    for _ in range(draw(st.integers(0, 8))):
        if rows:
            start = draw(st.integers(0, rows - 1))
            picks.extend(range(start, min(rows, start + draw(st.integers(1, 12)))))
    if draw(st.booleans()):
        picks.insert(draw(st.integers(0, len(picks))), -1)  # a null asked for: the general pass
    return column, np.array(picks, np.int64)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(case=null_free_gathers())
def test_a_column_without_nulls_gathers_as_take_with_or_without_a_null_pick(case):
    """Chunks without nulls take a pass with no validity bits; a -1 sends the gather to the general one."""
    column, index = case
    expected = take_binary(column, index)
    for native in ([BUILT] if BUILT is not None else []) + [None]:
        got = gather_binary(column, index, native=native)
        got.validate(full=True)
        assert got.null_count == expected.null_count and got.to_pylist() == expected.to_pylist()


def test_a_gather_without_nulls_refuses_picks_past_the_rows_and_damaged_offsets_in_one_line():
    if BUILT is None:
        return  # the reference is Arrow's take, which validates arrays itself
    column = pa.chunked_array([pa.array([b"ab", b"c"] * 4), pa.array([b"defg"] * 3)])
    with pytest.raises(ValueError, match=r"^index\[2\] = 11 is outside the 11 rows of the chunks"):
        gather_binary(column, np.array([9, 10, 11], np.int64), native=BUILT)
    offsets = np.array([0, 5, 3], np.int32)  # row 0 ends past the chunk's last offset, row 1 before its start
    damaged = pa.Array.from_buffers(pa.binary(), 2, [None, pa.py_buffer(offsets), pa.py_buffer(b"abcde")])
    for picks, at in (([1, 0], 0), ([0], 0)):
        with pytest.raises(ValueError, match=rf"^index\[{at}\] = {picks[at]} is outside the 2 rows of the chunks "
                                             r"\(or their offsets are damaged\)$"):
            gather_binary(damaged, np.array(picks, np.int64), native=BUILT)
