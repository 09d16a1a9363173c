"""The compiled one-pass row resolution (``resolve_merge``, storage/_native/resolve.c)
against the NumPy path of :func:`storage.kernels.resolve_rows.resolve_rows`.

Generated pieces, newest first, as a live table's chunk holds them: sorted keys
(a piece may hold a row twice, as a file cuts a row across blocks), re-puts
of some columns only (the others absent), timestamps that tie across pieces,
DeleteFamily markers on some rows (in any order, some on rows no piece holds),
time ranges and TTL cutoffs, and key pools the key encoding treats
differently (one width of 4 bytes, mixed lengths, keys past 8 bytes).  Both
paths must give the same keys, values, timestamps and cell counts.  The
module is called directly, so this file compares the two paths with
``REGIONSCAN_NATIVE=0`` too; without a C compiler there is no module and the
reference alone runs.
"""

from __future__ import annotations

import importlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import native as engine_native
from storage.cells import CellType
from storage.kernels.key_codes import code_keys, int_key_codes, lex_order, word_codes, word_keys
from storage.kernels.key_codes import padded_values
from storage.kernels.resolve_rows import ABSENT, Markers, RowPiece, resolve_rows

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

KEY_POOLS = {
    "u4": [bytes([0, 0, 1, i]) for i in range(12)],
    "mixed": [b"", b"a", b"a\x00", b"a\x00\x01", b"ab", b"b" * 9, b"\xff"],
    "wide": [b"row-%06d" % i for i in range(12)],
    # keys past 8 bytes under one lead (read as their last 8 bytes) and under two (which are not)
    "user": [b"user%012d" % (i * 37) for i in range(12)],
    "tenants": [b"tenant-%s/%08d" % (t, i) for t in (b"a", b"b") for i in range(6)],
    # keys of 9 to 16 bytes under no one lead (read as 128-bit integers): UUIDs, a salt before an id
    "uuid": sorted(bytes((i * 37 + j * 11) % 256 for j in range(16)) for i in range(12)),
    "salted": [bytes([s]) + i.to_bytes(8, "big") for s in (3, 200) for i in range(6)],
    # keys of several widths under a lead (read as three words) and past 23 bytes after it (not)
    "ycsb": sorted(b"user%d" % (i * 2654435761 % 10 ** (2 + i % 18)) for i in range(12)),
    "long": sorted(b"k" + bytes([i]) * (20 + i % 8) for i in range(12)),
}
BOUNDS = st.sampled_from([
    {},
    {"min_timestamp": 3},
    {"max_timestamp": 6},
    {"min_timestamp": 2, "max_timestamp": 8},
    {"ttl_cutoff": 4},
])
FAMILY = int(CellType.DELETE_FAMILY)


@st.composite
def chunks(draw):
    """(pieces newest first, markers or None, column count)."""
    pool = KEY_POOLS[draw(st.sampled_from(sorted(KEY_POOLS)))]
    columns = draw(st.integers(0, 3))
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        rows = sorted(draw(st.lists(st.sampled_from(pool), max_size=10)))  # repeats: a row cut across blocks
        ts = [np.array([draw(st.sampled_from([ABSENT, 1, 2, 5, 7, 9])) for _ in rows], np.int64)
              for _ in range(columns)]
        values = [pa.array([b"v%d" % draw(st.integers(0, 99)) for _ in rows], pa.binary()) for _ in range(columns)]
        if columns and rows and draw(st.booleans()):  # a column of several chunks, as blocks give it
            cut = draw(st.integers(0, len(rows)))
            values[0] = pa.chunked_array([values[0][:cut], values[0][cut:]])
        pieces.append(RowPiece(pa.array(rows, pa.binary()), ts, values))
    markers = None
    if draw(st.booleans()):
        marked = draw(st.lists(st.sampled_from(pool + [b"zz-none"]), min_size=1, max_size=6))  # any order
        markers = Markers(pa.array(marked, pa.binary()), pa.array([b""] * len(marked), pa.binary()),
                          np.array([draw(st.sampled_from([1, 4, 6, 9])) for _ in marked], np.int64),
                          np.full(len(marked), FAMILY, np.uint8))
    return pieces, markers, columns


def _answer(resolved) -> tuple:
    return (resolved.keys.to_pylist(), [v.to_pylist() for v in resolved.values],
            [t.tolist() for t in resolved.ts], resolved.cell_count())


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(case=chunks(), bounds=BOUNDS)
def test_the_compiled_merge_resolves_as_the_numpy_path(case, bounds):
    pieces, markers, columns = case
    compiled = resolve_rows(pieces, columns, markers, native=BUILT, **bounds)
    reference = resolve_rows(pieces, columns, markers, native=None, **bounds)
    for values in compiled.values:
        values.validate(full=True)
    assert _answer(compiled) == _answer(reference)
    assert compiled.nbytes > 0 or compiled.num_rows == 0


def test_what_the_compiled_merge_leaves_to_the_numpy_path_resolves_alike():
    """Delete and DeleteColumn markers and timestamp lists take the NumPy path either way."""
    older = RowPiece(pa.array([b"a", b"b", b"c"]), [np.array([1, 1, 1])], [pa.array([b"a1", b"b1", b"c1"])])
    newer = RowPiece(pa.array([b"b"]), [np.array([3])], [pa.array([b"b3"])])
    column = Markers(pa.array([b"c", b"a"]), pa.array([b"q", b"q"]), np.array([2, 1]),
                     np.array([int(CellType.DELETE_COLUMN), int(CellType.DELETE)], np.uint8))
    for native in ([BUILT] if BUILT is not None else []) + [None]:
        out = resolve_rows([newer, older], 1, column, qualifiers=[b"q"], native=native)
        assert out.keys.to_pylist() == [b"b"] and out.values[0].to_pylist() == [b"b3"]
        listed = resolve_rows([newer, older], 1, timestamps=[1], native=native)
        assert listed.values[0].to_pylist() == [b"a1", b"b1", b"c1"]


def test_the_compiled_merge_refuses_bad_input_in_one_line():
    if BUILT is None:
        assert engine_native.NATIVE is None  # no compiler at install: the engine runs the reference
        return
    keys = np.array([1, 2, 3], np.uint64)
    ts = [[np.array([1, 1, 1], np.int64)]]  # per column, per piece
    out = np.empty((2, 3), np.int64)

    def call(**changed):
        args = dict(keys=keys, width=0, bounds=np.array([0, 3], np.int64), ts=ts, mkeys=None, mts=None,
                    ranged=False, low=0, bounded=False, high=0, out=out)
        args.update(changed)
        return BUILT.resolve_merge(*args.values())

    assert call() == (3, 0, True, True) and out[0].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match=r"^bounds must run from 0 to the 3 keys$"):
        call(bounds=np.array([0, 2], np.int64))
    with pytest.raises(ValueError, match=r"^ts\[0\]\[0\] must hold 3 int64 timestamps \(or one for them all\), got 16 bytes$"):
        call(ts=[[np.array([1, 1], np.int64)]])
    # one timestamp for a whole piece: read for every entry
    assert call(ts=[[np.array([7], np.int64)]]) == (3, 0, True, True) and out[1].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match=r"^ts\[0\] must hold 1 pieces' timestamps, got 2$"):
        call(ts=[[ts[0][0], ts[0][0]]])
    with pytest.raises(ValueError, match=r"^keys must be ascending within each piece$"):
        call(keys=np.array([1, 3, 2], np.uint64))
    with pytest.raises(ValueError, match=r"^out must hold \(columns \+ 1\) \* 3 int64 values, got 8 bytes$"):
        call(out=np.empty(1, np.int64))
    with pytest.raises(ValueError, match=r"^out must be a writable contiguous int64 buffer$"):
        call(out=b"x" * 48)
    with pytest.raises(ValueError, match=r"^keys must hold 5-byte keys, got 24 bytes$"):
        call(width=5)
    # -1: (low, high) uint64 pairs, 16 bytes a key
    with pytest.raises(ValueError, match=r"^keys must hold 16-byte keys, got 24 bytes$"):
        call(width=-1)
    with pytest.raises(ValueError, match=r"^width must be 0 \(uint64 keys\), -1 \(uint64 pairs\), -3 \(uint64 "
                                         r"triples\) or a key width in bytes, got -2$"):
        call(width=-2)
    pairs = np.array([[5, 1], [9, 1], [0, 2]], np.uint64)  # 2**64 + 5 < 2**64 + 9 < 2**65
    assert call(keys=pairs, width=-1)[:3] == (3, 0, True) and out[0].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match=r"^keys must be ascending within each piece$"):
        call(keys=np.array([[5, 1], [0, 2], [9, 1]], np.uint64), width=-1)
    # a pair buffer that does not start on 16 bytes: the general loop reads it, the same answer
    odd = np.empty(7, np.uint64)[1:].reshape(3, 2)
    odd[:] = pairs
    assert odd.ctypes.data % 16 and call(keys=odd, width=-1) == (3, 0, True, False) and out[0].tolist() == [0, 1, 2]


def test_key_pairs_refuse_bad_input_in_one_line():
    if BUILT is None:
        return
    keys = pa.chunked_array([pa.array([b"\x01" * 9 + b"\x02", b"\x01" * 10])])
    out = np.empty((2, 2), np.uint64)
    assert BUILT.key_pairs(keys.__arrow_c_stream__(), out) == 10
    assert out.tolist() == [[0x0102 << 48, 0x0101010101010101], [0x0101 << 48, 0x0101010101010101]]
    with pytest.raises(ValueError, match=r"^allocate\(32\) returned 16 bytes$"):
        BUILT.key_pairs(keys.__arrow_c_stream__(), np.empty(2, np.uint64))
    assert BUILT.key_pairs(pa.chunked_array([pa.array([b"x" * 17])]).__arrow_c_stream__(), out) == 0  # too wide
    assert BUILT.key_pairs(pa.chunked_array([pa.array([b"x" * 8])]).__arrow_c_stream__(), out) == 0  # too narrow
    assert BUILT.key_pairs(pa.chunked_array([pa.array([b"x" * 9, None])]).__arrow_c_stream__(), out) == 0
    with pytest.raises(ValueError, match=r"^stream must be an Arrow C stream capsule"):
        BUILT.key_pairs(keys, out)


# Two runs of 8-byte keys (one integer each: the two-cursor merge's input), the lowest and
# highest integers included so that a key shared at the very first or last position, and the
# top of the key space, are reached.
EDGE_POOL = [i.to_bytes(8, "big") for i in (*range(8), 2**63, 2**63 + 1, 2**64 - 3, 2**64 - 2, 2**64 - 1)]
# keys of several widths under one lead, read as three words (key_triples): bytes at the words'
# edges (0x00, 0x7f, 0x80, 0xff), trailing zero bytes, keys that begin others, up to 22 past the lead
TRIPLE_POOL = sorted({b"k" + bytes([b]) * n + tail for b in (0, 0x7F, 0x80, 0xFF) for n in (0, 1, 7, 8, 15, 16, 21)
                      for tail in (b"", b"\x01")})


@st.composite
def two_runs(draw):
    """(pieces newest first, markers or None, column count) as a live chunk's two-cursor merge
    sees them (8-byte keys, or keys of several widths read as three words): one or two runs
    of unique keys (now and then a repeated one, which sends the chunk to the general loop),
    either run the larger, columns whose timestamps are one value for a
    run (a zero-stride view, as a stored block gives it) or one per entry, often the same as
    another column's (the same value or the same array), DeleteFamily markers or none."""
    pool = draw(st.sampled_from([EDGE_POOL, TRIPLE_POOL]))
    columns = draw(st.integers(0, 3))
    pieces = []
    base = draw(st.sets(st.sampled_from(pool), max_size=len(pool)))
    for _ in range(draw(st.integers(1, 2))):
        # the base run, or a newer run: some of the base's rows (re-puts) and some new ones
        if not pieces and draw(st.booleans()):
            rows = sorted(base)
        else:
            rows = sorted(draw(st.sets(st.sampled_from(sorted(base)), max_size=len(base))) if base else set())
            rows = sorted(set(rows) | draw(st.sets(st.sampled_from(pool), max_size=4)))
        if draw(st.booleans()):  # a key shared at the very first or last position
            rows = sorted(set(rows) | {draw(st.sampled_from([pool[0], pool[-1]]))})
        if rows and not draw(st.integers(0, 9)):
            rows = sorted(rows + [draw(st.sampled_from(rows))])  # a row cut across blocks
        ts = []
        for j in range(columns):
            if j and draw(st.booleans()):  # another column's stamps: that array, or a copy
                other = ts[draw(st.integers(0, j - 1))]
                ts.append(other if draw(st.booleans()) else np.array(other))
            elif rows and draw(st.booleans()):
                ts.append(np.broadcast_to(np.int64(draw(st.sampled_from([ABSENT, 1, 5, 9]))), (len(rows),)))
            else:
                ts.append(np.array([draw(st.sampled_from([ABSENT, 1, 5, 9])) for _ in rows], np.int64))
        values = [pa.array([b"p%dc%dv%d" % (len(pieces), j, i) for i in range(len(rows))], pa.binary())
                  for j in range(columns)]
        pieces.append(RowPiece(pa.array(rows, pa.binary()), ts, values))
    markers = None
    if draw(st.booleans()):
        marked = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=5))
        markers = Markers(pa.array(marked, pa.binary()), pa.array([b""] * len(marked), pa.binary()),
                          np.array([draw(st.sampled_from([1, 4, 5, 9])) for _ in marked], np.int64),
                          np.full(len(marked), FAMILY, np.uint8))
    return pieces, markers, columns


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(case=two_runs())
def test_the_two_cursor_merge_resolves_as_the_numpy_path(case):
    pieces, markers, columns = case
    recorder = _MergeRecorder(BUILT)
    compiled = resolve_rows(pieces, columns, markers, native=recorder if BUILT is not None else None)
    reference = resolve_rows(pieces, columns, markers, native=None)
    assert _answer(compiled) == _answer(reference)
    if BUILT is not None and recorder.calls and all(len(set(p.keys.to_pylist())) == len(p) for p in pieces):
        # unique keys in each of at most two runs: the two-run merge resolves them, the general loop
        # never (a comparison of keys that left out a word would make them seem to repeat)
        assert [call[3] for call in recorder.calls] == [True] * len(recorder.calls)


class _MergeRecorder:
    """The compiled module, with what each ``resolve_merge`` call returned recorded."""

    def __init__(self, module):
        self._module, self.calls = module, []

    def __getattr__(self, name):
        return getattr(self._module, name)

    def resolve_merge(self, *args):
        result = self._module.resolve_merge(*args)
        self.calls.append(result)
        return result


def test_the_two_cursor_merge_on_a_re_put_quarter():
    """A base run and a newer run holding some of its rows (one timestamp a run, the two
    columns alike): every row once, the newer run's entry winning where it has one; a newer
    timestamp in one column alone makes that column's winners differ from the other's."""
    if BUILT is None:
        return
    base = np.arange(0, 40, 2, dtype=np.uint64)  # the anchor: the larger run, second
    newer = base[::4].copy()  # shares the first key
    newer = np.append(newer, base[-1])  # and the last
    keys = np.concatenate([newer, base])
    bounds = np.array([0, len(newer), len(keys)], np.int64)
    out = np.empty((3, len(keys)), np.int64)
    stamp = lambda v: np.array([v], np.int64)  # noqa: E731
    rows, anchor, anchored, two = BUILT.resolve_merge(keys, 0, bounds, [[stamp(7), stamp(3)]] * 2, None, None,
                                                      False, 0, False, 0, out)
    assert (rows, anchor, anchored, two) == (len(base), 1, True, True)
    is_newer = np.isin(base, newer)
    expect = np.where(is_newer, np.searchsorted(newer, base), len(newer) + np.arange(len(base)))
    assert out[1, :rows].tolist() == expect.tolist() and out[2, :rows].tolist() == expect.tolist()
    rows, _, _, _ = BUILT.resolve_merge(keys, 0, bounds, [[stamp(7), stamp(3)], [stamp(2), stamp(3)]], None, None,
                                        False, 0, False, 0, out)
    assert out[1, :rows].tolist() == expect.tolist()
    assert out[2, :rows].tolist() == (len(newer) + np.arange(len(base))).tolist()
    # a DeleteFamily marker at 7 on the first row hides both runs' entries there: the row goes
    rows, _, anchored, _ = BUILT.resolve_merge(keys, 0, bounds, [[stamp(7), stamp(3)]] * 2,
                                               np.array([0], np.uint64), np.array([7], np.int64),
                                               False, 0, False, 0, out)
    assert (rows, anchored) == (len(base) - 1, False)
    assert out[0, :rows].tolist() == list(range(len(newer) + 1, len(keys)))


def test_the_two_cursor_merge_on_new_keys_between_the_base_runs():
    """A newer run's key just below a base key is a row of its own; a newer row with nothing
    visible goes, and the rows left are still the base run's, in order."""
    if BUILT is None:
        return
    keys = np.array([3, 5, 1, 4, 6], np.uint64)  # newer [3, 5], base [1, 4, 6]
    bounds = np.array([0, 2, 5], np.int64)
    out = np.empty((2, 5), np.int64)

    def call(newer):
        return BUILT.resolve_merge(keys, 0, bounds, [[newer, np.array([1], np.int64)]], None, None,
                                   False, 0, False, 0, out)

    assert call(np.array([5, 5], np.int64)) == (5, 1, False, True)
    assert out.tolist() == [[2, 0, 3, 1, 4], [2, 0, 3, 1, 4]]
    assert call(np.array([ABSENT], np.int64)) == (3, 1, True, True)  # the newer rows hold nothing
    assert out[:, :3].tolist() == [[2, 3, 4], [2, 3, 4]]
    # two markers on one row, the newer first: the newest one hides the row's entry at 5
    marked = BUILT.resolve_merge(keys, 0, bounds, [[np.array([5], np.int64), np.array([1], np.int64)]],
                                 np.array([5, 5], np.uint64), np.array([6, 2], np.int64), False, 0, False, 0, out)
    assert marked == (4, 1, False, True) and out[0, :4].tolist() == [2, 0, 3, 4]


@pytest.mark.parametrize("columns", [0, 1, 2, 3])
def test_the_two_cursor_merge_keeps_the_larger_run_s_keys(columns):
    """Whichever run is the larger (the anchor), rows it holds, in order, are its keys as they
    are; any count of columns (each its own stamps)."""
    if BUILT is None:
        return
    for first_larger in (True, False):
        larger, smaller = np.array([1, 2, 4, 8], np.uint64), np.array([2, 8], np.uint64)
        keys = np.concatenate([larger, smaller] if first_larger else [smaller, larger])
        bounds = np.array([0, 4 if first_larger else 2, 6], np.int64)
        # column 0: the older piece's stamp newer; column 1: a tie (the newer piece wins); 2: the newer's
        stamps = [[np.array([j], np.int64), np.array([1], np.int64)] for j in range(columns)]
        out = np.empty((columns + 1, 6), np.int64)
        anchor = 0 if first_larger else 1
        assert BUILT.resolve_merge(keys, 0, bounds, stamps, None, None, False, 0, False, 0, out) == (4, anchor, True, True)
        assert out[0, :4].tolist() == ([0, 1, 2, 3] if first_larger else [2, 3, 4, 5])
        older_wins = [0, 4, 2, 5] if first_larger else [2, 3, 4, 5]
        newer_wins = [0, 1, 2, 3] if first_larger else [2, 0, 4, 1]
        for j in range(columns):
            assert out[j + 1, :4].tolist() == (older_wins if j == 0 else newer_wins)


@pytest.mark.parametrize("keys, bounds", [
    ([1, 3, 2, 4], [0, 3, 4]),  # the newer run goes down
    ([1, 5, 4, 6], [0, 1, 4]),  # the base run goes down
    ([0, 1, 2, 9, 3], [0, 1, 5]),  # down at the last key, after the other run is done
    ([2, 2, 1, 1, 0], [0, 2, 5]),  # a repeat (resolved apart) and then down
])
def test_the_two_cursor_merge_still_refuses_keys_that_go_down(keys, bounds):
    if BUILT is None:
        return
    keys = np.array(keys, np.uint64)
    bounds = np.array(bounds, np.int64)
    stamps = [[np.array([1], np.int64), np.array([1], np.int64)]]
    with pytest.raises(ValueError, match=r"^keys must be ascending within each piece$"):
        BUILT.resolve_merge(keys, 0, bounds, stamps, None, None, False, 0, False, 0, np.empty((2, len(keys)), np.int64))


@st.composite
def key_arrays(draw):
    """Binary key arrays as pieces hold them: mostly of one width (1, 2, 4 or 8 bytes, or
    another; past 8 bytes mostly under one lead), now and then a key of another width, a
    null, an empty array or a slice."""
    width = draw(st.sampled_from([1, 2, 4, 8, 3, 0, 9, 10, 16, 17, 24]))
    lead = draw(st.binary(min_size=max(width - 8, 0), max_size=max(width - 8, 0)))
    tail = max(min(width, 8), 0)
    arrays = []
    for _ in range(draw(st.integers(1, 4))):
        if width > 8 and draw(st.integers(0, 5)):  # under the one lead, or now and then any bytes
            keys = [lead + t for t in draw(st.lists(st.binary(min_size=tail, max_size=tail), max_size=9))]
        else:
            keys = draw(st.lists(st.binary(min_size=width, max_size=width), max_size=9))
        if keys and draw(st.integers(0, 9)) == 0:
            keys[draw(st.integers(0, len(keys) - 1))] = draw(st.one_of(st.binary(max_size=9), st.none()))
        array = pa.array(keys, pa.binary())
        if len(array) > 2 and draw(st.booleans()):  # an array offset and a first offset past 0
            array = array.slice(1, len(array) - 2)
        arrays.append(array)
    return arrays


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(keys=key_arrays(), markers=st.one_of(st.none(), key_arrays()))
def test_key_codes_read_keys_as_the_numpy_path(keys, markers):
    marker_keys = pa.concat_arrays(markers) if markers is not None else None
    reference = int_key_codes(None, keys, marker_keys)
    if BUILT is None:
        return
    compiled = int_key_codes(BUILT, keys, marker_keys)
    if reference is None:
        assert compiled is None
        return
    assert compiled is not None
    width, codes, marker_codes, lead = compiled
    assert (width, lead) == (reference[0], reference[3])
    assert codes.tolist() == reference[1].tolist()
    if codes.ndim == 2:  # 128-bit integers of the key's bytes, zeros after: (low, high) pairs
        wide = [int.from_bytes(k + bytes(16 - len(k)), "big") for a in keys for k in a.to_pylist()]
        expected = [[v & (2**64 - 1), v >> 64] for v in wide]
    else:  # integers of the bytes; past 8 bytes of the last 8, the keys under one lead
        expected = [int.from_bytes(k[-8:], "big") for a in keys for k in a.to_pylist()]
        assert all(k[: max(width - 8, 0)] == lead for a in keys for k in a.to_pylist())
    assert codes.tolist() == expected
    assert (marker_codes is None) == (reference[2] is None)
    if marker_codes is not None:
        assert marker_codes.tolist() == reference[2].tolist()


def test_key_codes_refuse_bad_input_in_one_line():
    if BUILT is None:
        assert engine_native.NATIVE is None
        return
    keys = pa.chunked_array([pa.array([b"\x00\x01", b"\x00\x02"])])
    out = np.empty(2, np.uint64)
    assert BUILT.key_codes(keys.__arrow_c_stream__(), out) == 2 and out.tolist() == [1, 2]
    with pytest.raises(ValueError, match=r"^allocate\(16\) returned 8 bytes$"):
        BUILT.key_codes(keys.__arrow_c_stream__(), np.empty(1, np.uint64))
    with pytest.raises(ValueError, match=r"^allocate must return a writable buffer, got bytes$"):
        BUILT.key_codes(keys.__arrow_c_stream__(), b"x" * 16)
    with pytest.raises(ValueError, match=r"^stream must hold a binary column \(format 'z'\), got format 'l'$"):
        BUILT.key_codes(pa.chunked_array([pa.array([1, 2])]).__arrow_c_stream__(), out)
    with pytest.raises(ValueError, match=r"^stream must be an Arrow C stream capsule"):
        BUILT.key_codes(keys, out)


@st.composite
def varied_keys(draw):
    """A binary array of keys of several widths as order_keys pads them: any bytes (trailing
    zero bytes too, which the length after the padding tells apart), now and then a slice."""
    keys = draw(st.lists(st.binary(max_size=draw(st.sampled_from([3, 9, 30]))), min_size=1, max_size=12))
    array = pa.array(keys, pa.binary())
    if len(array) > 2 and draw(st.booleans()):  # an array offset and a first offset past 0
        array = array.slice(1, len(array) - 2)
    return array


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(keys=varied_keys(), suffix=st.sampled_from([0, 1, 2]), spare=st.integers(0, 9))
def test_pad_keys_lay_keys_out_as_the_numpy_path(keys, suffix, spare):
    longest = max((len(k) for k in keys.to_pylist()), default=0)
    row_width = longest + suffix + spare
    reference = padded_values(keys, longest, suffix=suffix, row_width=row_width, native=None)
    # the form itself: the key, zeros to the longest, its length (big-endian), zeros
    expected = [k + bytes(longest - len(k)) + len(k).to_bytes(2, "big")[2 - suffix:] + bytes(spare)
                for k in keys.to_pylist()]
    assert [bytes(row) for row in reference] == expected
    if BUILT is None:
        return
    compiled = padded_values(keys, longest, suffix=suffix, row_width=row_width, native=BUILT)
    assert compiled.shape == reference.shape and compiled.tobytes() == reference.tobytes()


def test_pad_keys_refuse_bad_input_in_one_line():
    if BUILT is None:
        assert engine_native.NATIVE is None
        return
    keys = pa.chunked_array([pa.array([b"ab", b"a", b""])])
    out = np.full((3, 4), 7, np.uint8)
    assert BUILT.pad_keys(keys.__arrow_c_stream__(), out, 2, 1)
    assert [bytes(r) for r in out] == [b"ab\x02\x00", b"a\x00\x01\x00", b"\x00\x00\x00\x00"]
    assert not BUILT.pad_keys(keys.__arrow_c_stream__(), out, 1, 1)  # "ab" is past 1 byte: the reference's case
    assert not BUILT.pad_keys(pa.chunked_array([pa.array([b"a", None])]).__arrow_c_stream__(), out[:2], 2, 1)
    with pytest.raises(ValueError, match=r"^pad_keys: longest 300 with a suffix of 1 bytes is not a key form$"):
        BUILT.pad_keys(keys.__arrow_c_stream__(), np.empty((3, 301), np.uint8), 300, 1)
    with pytest.raises(ValueError, match=r"^pad_keys: longest 2 with a suffix of 3 bytes is not a key form$"):
        BUILT.pad_keys(keys.__arrow_c_stream__(), out, 2, 3)
    with pytest.raises(ValueError, match=r"^pad_keys: out holds 6 bytes, not 3 keys of at least 3$"):
        BUILT.pad_keys(keys.__arrow_c_stream__(), np.empty((3, 2), np.uint8), 2, 1)
    with pytest.raises(ValueError, match=r"^stream must be an Arrow C stream capsule"):
        BUILT.pad_keys(keys, out, 2, 1)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(keys=st.lists(st.lists(st.integers(0, 5), min_size=0, max_size=30), min_size=1, max_size=3)
       .filter(lambda ks: len({len(k) for k in ks}) == 1),
       wide=st.booleans(), kinds=st.lists(st.sampled_from(["uint64", "int64", "uint8"]), min_size=3, max_size=3))
def test_lex_order_is_numpy_s_stable_lexsort(keys, wide, kinds):
    """lex_order sorts packed keys where they fit in 64 bits together, else the most
    significant key by quicksort and only its ties by lexsort: the same order as one stable
    lexsort, equal entries in their original order (keys as _coded_order gives them:
    row codes, inverted timestamps, below zero, and inverted kinds)."""
    def array(values, kind):
        if kind == "int64":  # as ~timestamp: below zero, descending
            return np.invert(np.array([v * (2**40 if wide else 1) for v in values], np.int64))
        if kind == "uint8":
            return np.invert(np.array(values, np.uint8))
        return np.array([v * (2**40 if wide else 1) for v in values], np.uint64)
    arrays = [array(k, kind) for k, kind in zip(keys, kinds)]
    order, differs = lex_order(arrays)
    expected = np.lexsort(arrays) if len(arrays[0]) else np.arange(0)
    assert order.tolist() == expected.tolist()
    rows = list(zip(*[a.tolist() for a in arrays]))
    assert differs.tolist() == [i == 0 or rows[expected[i]] != rows[expected[i - 1]] for i in range(len(rows))]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(keys=st.lists(st.one_of(st.binary(max_size=30), st.binary(max_size=3).map(lambda b: b"user" + b)),
                     min_size=1, max_size=20),
       cut=st.booleans())
def test_word_keys_order_keys_of_any_width_as_their_bytes(keys, cut):
    """Keys of several widths (a shared lead, trailing zero bytes, one a prefix of another)
    sorted by their words: the bytes' order, equal keys told apart from others exactly."""
    array = pa.array(keys, pa.binary())
    if cut and len(array) > 2:  # an array offset and a first offset past 0
        array, keys = array.slice(1), keys[1:]
    for native in ([BUILT] if BUILT is not None else []) + [None]:
        order, differs = lex_order(word_keys(native, array))
        assert order.tolist() == sorted(range(len(keys)), key=lambda i: (keys[i], i))
        assert differs.tolist() == [i == 0 or keys[order[i]] != keys[order[i - 1]] for i in range(len(keys))]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(keys=st.lists(varied_keys(), min_size=1, max_size=3), markers=st.one_of(st.none(), varied_keys()),
       lead=st.sampled_from([b"", b"user", b"\x00"]))
def test_key_triples_read_keys_as_the_numpy_path(keys, markers, lead):
    """key_triples against word_codes' NumPy form: the same three words for every key (or the
    same refusal past 23 bytes after the lead), and words that order and tell keys apart as
    their bytes do."""
    keys = [pa.array([lead + k for k in a.to_pylist()], pa.binary()) for a in keys]
    if markers is not None:
        markers = pa.array([lead + k for k in markers.to_pylist()], pa.binary())
    reference = word_codes(None, keys, markers)
    every = [k for a in keys for k in a.to_pylist()] + (markers.to_pylist() if markers is not None else [])
    if reference is not None:
        codes = np.concatenate([reference[0]] + ([reference[1]] if markers is not None else []))
        order, differs = lex_order(code_keys(codes))
        assert order.tolist() == sorted(range(len(every)), key=lambda i: (every[i], i))
        assert differs.tolist() == [i == 0 or every[order[i]] != every[order[i - 1]] for i in range(len(every))]
    else:
        shared = 0
        while shared < min(map(len, every)) and len({k[shared] for k in every}) == 1:
            shared += 1
        assert max(map(len, every)) - shared > 23
    if BUILT is None:
        return
    compiled = word_codes(BUILT, keys, markers)
    assert (compiled is None) == (reference is None)
    if compiled is not None:
        assert compiled[0].tolist() == reference[0].tolist()
        assert (compiled[1] is None) == (markers is None)
        if markers is not None:
            assert compiled[1].tolist() == reference[1].tolist()


def test_key_triples_refuse_bad_input_in_one_line():
    if BUILT is None:
        assert engine_native.NATIVE is None
        return
    keys = pa.chunked_array([pa.array([b"user1", b"user12", b"user"])])
    out = np.empty((3, 3), np.uint64)
    assert BUILT.key_triples(keys.__arrow_c_stream__(), out) == 4
    # past the lead: "1", "12", "" then zeros to 2 bytes and the length, as big-endian words
    assert out[:, 2].tolist() == [int.from_bytes(b"1\x00\x01" + bytes(5), "big"),
                                  int.from_bytes(b"12\x02" + bytes(5), "big"), 0]
    assert out[:, :2].tolist() == [[0, 0]] * 3
    assert BUILT.key_triples(pa.chunked_array([pa.array([b"a" * 30, b"b"])]).__arrow_c_stream__(), out[:2]) == -1
    assert BUILT.key_triples(pa.chunked_array([pa.array([b"a", None])]).__arrow_c_stream__(), out[:2]) == -1
    with pytest.raises(ValueError, match=r"^allocate\(72\) returned 48 bytes$"):
        BUILT.key_triples(keys.__arrow_c_stream__(), np.empty((2, 3), np.uint64))
    with pytest.raises(ValueError, match=r"^stream must be an Arrow C stream capsule"):
        BUILT.key_triples(keys, out)

