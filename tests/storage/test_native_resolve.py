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
from storage.kernels.resolve_rows import ABSENT, Markers, RowPiece, resolve_rows

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

KEY_POOLS = {
    "u4": [bytes([0, 0, 1, i]) for i in range(12)],
    "mixed": [b"", b"a", b"a\x00", b"a\x00\x01", b"ab", b"b" * 9, b"\xff"],
    "wide": [b"row-%06d" % i for i in range(12)],
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

    assert call() == (3, 0, True) and out[0].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match=r"^bounds must run from 0 to the 3 keys$"):
        call(bounds=np.array([0, 2], np.int64))
    with pytest.raises(ValueError, match=r"^ts\[0\]\[0\] must hold 3 int64 timestamps \(or one for them all\), got 16 bytes$"):
        call(ts=[[np.array([1, 1], np.int64)]])
    # one timestamp for a whole piece: read for every entry
    assert call(ts=[[np.array([7], np.int64)]]) == (3, 0, True) and out[1].tolist() == [0, 1, 2]
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
