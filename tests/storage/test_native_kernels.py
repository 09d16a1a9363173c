"""The compiled kernels (storage/_native) against their pyarrow/NumPy references.

``gather_binary`` (one ``memcpy`` per run of consecutive rows) is held to
Arrow's ``take`` on random chunked binary columns (sliced chunks, nulls,
empty values, no chunks) and random picks (runs, jumps, repeats, nulls);
bad arguments get a one-line ValueError.  Row resolution of live tables (a
base run and newer runs: re-puts of some columns, deletes, several sources)
is checked against a dict model and run both ways in one process: with the
compiled gather and with the reference.  The kernel tests use the built
module itself, so they also run when ``REGIONSCAN_NATIVE=0`` turns it off for
the engine (CI runs this file both ways).  Only a machine without a C
compiler has no module: the build said so, and the tests check that the
loader says ``off (not built)`` and run the reference.
"""

from __future__ import annotations

import importlib
import os
import struct
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import native
from storage.cells import CellType
from storage.kernels import gather
from storage.kernels.gather import gather_binary, reversed_rows, take_binary
from storage.kernels import resolve_rows as resolve_rows_module
from storage.kernels.resolve_rows import ABSENT, Markers, RowPiece, resolve_rows
from storage.kernels.row_merge import join_keys, join_keys_py
from suite_paths import REPO

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None


def test_the_loader_reports_the_path_in_use():
    if BUILT is None:
        assert native.NATIVE is None and native.status() == "off (not built)"
    elif os.environ.get(native.SWITCH) == "0":
        assert native.NATIVE is None and native.status() == "off (REGIONSCAN_NATIVE=0)"
    else:
        assert native.NATIVE is BUILT and native.status() == "on"


def test_version_says_which_kernels_run():
    code = "import sys; from jobs.cli import main; sys.exit(main(['--version']))"
    lines = {}
    for switch in ("0", "1"):
        env = dict(os.environ, REGIONSCAN_NATIVE=switch)
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines[switch] = proc.stdout.strip()
    assert lines["0"].endswith("native kernels: off (REGIONSCAN_NATIVE=0)"), lines
    assert lines["1"].endswith("native kernels: on" if BUILT is not None else "native kernels: off (not built)"), lines


# short values (a run's copy in words of 4 or 8 bytes, or byte by byte) and wider ones (words of
# 16; a run of several past 256 bytes is one memcpy)
VALUES = st.one_of(st.none(), st.binary(max_size=6), st.binary(min_size=7, max_size=90))


@st.composite
def columns(draw):
    """A binary column as an array or chunked array; chunks may be slices of larger arrays."""
    chunks = []
    for _ in range(draw(st.integers(0, 4))):
        full = draw(st.lists(VALUES, max_size=12))
        start = draw(st.integers(0, len(full)))
        chunks.append(pa.array(full, pa.binary()).slice(start, draw(st.integers(0, len(full) - start))))
    if len(chunks) == 1 and draw(st.booleans()):
        return chunks[0]
    return pa.chunked_array(chunks, pa.binary())


@st.composite
def uniform_columns(draw):
    """A binary column whose values all have one width (a fixed-width encoding's): chunks that
    may be slices of larger arrays, may be empty, and may hold nulls; sometimes one chunk of
    another width."""
    width = draw(st.sampled_from([1, 2, 4, 8, 12, 16, 17, 24, 100, 257]))
    value = st.binary(min_size=width, max_size=width)
    chunks = []
    for _ in range(draw(st.integers(1, 4))):
        full = draw(st.lists(st.one_of(value, st.none()) if draw(st.integers(0, 4)) == 0 else value, max_size=30))
        start = draw(st.integers(0, len(full)))
        chunks.append(pa.array(full, pa.binary()).slice(start, draw(st.integers(0, len(full) - start))))
    if draw(st.integers(0, 5)) == 0:
        other = draw(st.integers(1, 300).filter(lambda w: w != width))
        chunks.insert(draw(st.integers(0, len(chunks))), pa.array([bytes(other)] * draw(st.integers(1, 5)), pa.binary()))
    return pa.chunked_array(chunks, pa.binary())


@st.composite
def picks(draw, rows: int):
    """Runs of consecutive rows up or down (a reverse scan's), jumps, repeats and nulls (-1)."""
    out: list[int] = []
    for _ in range(draw(st.integers(0, 6))):
        if rows and draw(st.integers(0, 3)):
            start = draw(st.integers(0, rows - 1))
            length = draw(st.integers(1, 8))
            if draw(st.booleans()):
                out.extend(range(start, min(rows, start + length)))
            else:
                out.extend(range(start, max(-1, start - length), -1))
        else:
            out.extend([-1] * draw(st.integers(1, 3)))
    return np.array(out, dtype=np.int64)


@settings(max_examples=600, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_gather_binary_is_take(data):
    """Values of any widths, or of one width (gathered by row number, their offsets checked
    once and not per pick: ``uniform_columns``): the same answer as Arrow's take, with runs up
    and down, jumps between chunks, repeats and nulls."""
    values = data.draw(st.one_of(columns(), uniform_columns()))
    index = data.draw(picks(len(values)))
    expected = take_binary(values, index)
    got = gather_binary(values, index, native=BUILT)
    got.validate(full=True)
    assert got.type == pa.binary() and got.null_count == expected.null_count
    assert got.to_pylist() == expected.to_pylist()


@pytest.mark.parametrize("width", [0, 1, 3, 5, 8, 15, 16, 17, 31, 100, 257, 600])
def test_gather_binary_copies_runs_of_every_size(width):
    """Runs of one to forty rows of one width (a run's copy: byte by byte, words of 4, 8 or 16
    bytes, one memcpy past 256 bytes), forward, reversed and alternating between two chunks."""
    rows = [bytes([i % 251]) * width + bytes([i % 7]) * (i % 3) for i in range(80)]
    chunks = pa.chunked_array([pa.array(rows[:50], pa.binary()), pa.array(rows[50:], pa.binary())])
    for index in (np.arange(80), np.arange(79, -1, -1), np.r_[np.arange(10, 50), np.arange(50, 80), np.arange(0, 10)],
                  np.array([i // 2 + (40 * (i % 2)) for i in range(80)])):
        got = gather_binary(chunks, index, native=BUILT)
        got.validate(full=True)
        assert got.to_pylist() == [rows[i] for i in index]


def test_gather_binary_of_one_width_refuses_a_pick_past_the_rows():
    values = pa.chunked_array([pa.array([b"a" * 20] * 3), pa.array([b"b" * 20] * 2)])
    if BUILT is None:
        with pytest.raises(IndexError):
            take_binary(values, np.array([0, 1, 2, 3, 5]))
        return
    with pytest.raises(ValueError, match=r"^index\[4\] = 5 is outside the 5 rows of the chunks"):
        gather_binary(values, np.array([0, 1, 2, 3, 5]), native=BUILT)


@pytest.mark.parametrize("width", [1, 4, 8, 16, 17, 100, 300])
def test_gather_binary_of_one_width_in_every_order(width):
    """Values of one width (gathered by row number) in a reverse scan's order (down every
    chunk and across their ends), up, alternating between two chunks, and down in short runs;
    the chunks slices of larger arrays."""
    rows = [bytes([i % 251, (i * 7) % 253]) * (width // 2) + bytes([i % 249]) * (width % 2) for i in range(90)]
    # separate arrays (a row read past a chunk's start is another buffer's), the middle one a slice
    padded = pa.array([b"x" * width] * 3 + rows[40:75] + [b"y" * width] * 2, pa.binary())
    chunks = pa.chunked_array([pa.array(rows[:40], pa.binary()), padded.slice(3, 35), pa.array(rows[75:], pa.binary())])
    for index in (np.arange(89, -1, -1), np.arange(90), np.r_[np.arange(50, 39, -1), np.arange(39, 9, -1), np.arange(80, 89)],
                  np.array([i // 2 + (45 * (i % 2)) for i in range(90)]), np.array([75, 74, 73, 72, 10, 9, 8, 89, 88, 0])):
        got = gather_binary(chunks, index, native=BUILT)
        got.validate(full=True)
        assert got.to_pylist() == [rows[i] for i in index], index


def test_gather_binary_refuses_bad_input_in_one_line():
    values = pa.chunked_array([pa.array([b"a", b"bb"]), pa.array([b"c"])])
    kernel = BUILT if BUILT is not None else None
    if kernel is None:
        with pytest.raises(IndexError):
            take_binary(values, np.array([3]))
        return
    with pytest.raises(ValueError, match=r"^index\[1\] = 3 is outside the 3 rows of the chunks"):
        gather_binary(values, np.array([0, 3]), native=kernel)
    with pytest.raises(ValueError, match=r"^stream must be an Arrow C stream capsule"):
        kernel.gather_binary(b"x", np.zeros(1, np.int64), pa.allocate_buffer)
    with pytest.raises(ValueError, match=r"^stream must hold a binary column \(format 'z'\), got format 'l'"):
        kernel.gather_binary(pa.chunked_array([pa.array([1], pa.int64())]).__arrow_c_stream__(), np.zeros(1, np.int64),
                              pa.allocate_buffer)
    with pytest.raises(ValueError, match=r"^index must be an int64 array"):
        kernel.gather_binary(values.__arrow_c_stream__(), b"abc", pa.allocate_buffer)


# live tables as row pieces: a base run and newer runs (newest first), each of distinct sorted keys

COLUMNS = 3
QUALIFIERS = [b"a", b"b", b"c"]


@st.composite
def live_runs(draw):
    """Pieces newest first (a re-put may carry only some columns), DeleteFamily markers, and the model."""
    keys = [b"r%03d" % i for i in range(draw(st.integers(0, 40)))]
    runs = []
    for age in range(draw(st.integers(1, 4))):
        rows = sorted(draw(st.sets(st.sampled_from(keys), max_size=len(keys))) if keys else set())
        ts = 10 * (age + 1)
        cols = draw(st.sets(st.integers(0, COLUMNS - 1), min_size=1))  # a partial re-put names some columns
        cells = {r: {j: (b"v%d-%s" % (age, r)) * draw(st.integers(0, 2)) for j in cols} for r in rows}
        runs.append((ts, cells))
    deleted = {k: 10 * draw(st.integers(1, len(runs))) + 5 for k in keys if draw(st.integers(0, 4)) == 0}
    if keys and draw(st.booleans()) and draw(st.booleans()):
        deleted = {k: 10 * len(runs) + 5 for k in keys}  # every row deleted after every put
    model: dict = {}
    for ts, cells in runs:  # oldest first: a newer put replaces
        for r, cols in cells.items():
            for j, v in cols.items():
                if ts > deleted.get(r, -1):
                    model.setdefault(r, {})[j] = v
    pieces = []
    for ts, cells in reversed(runs):  # newest first
        rows = sorted(cells)
        stamps = [np.array([ts if j in cells[r] else ABSENT for r in rows], np.int64) for j in range(COLUMNS)]
        values = [pa.array([cells[r].get(j) for r in rows], pa.binary()) for j in range(COLUMNS)]
        pieces.append(RowPiece(pa.array(rows, pa.binary()), stamps, values))
    markers = Markers(pa.array(list(deleted), pa.binary()), pa.array([b""] * len(deleted), pa.binary()),
                      np.array(list(deleted.values()), np.int64),
                      np.full(len(deleted), int(CellType.DELETE_FAMILY), np.uint8))
    return pieces, markers, model


def _rows(resolved) -> dict:
    out: dict = {}
    keys = resolved.keys.to_pylist()
    for j in range(COLUMNS):
        for key, value, ts in zip(keys, resolved.values[j].to_pylist(), resolved.ts[j]):
            if ts != ABSENT:
                out.setdefault(key, {})[j] = value
    return out


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(case=live_runs())
def test_live_merge_and_gather_match_the_model_both_ways(case):
    pieces, markers, model = case
    answers = []
    for kernel in (BUILT, None):
        with pytest.MonkeyPatch.context() as patch:
            # the engine's switch, as REGIONSCAN_NATIVE sets it
            patch.setattr(gather, "NATIVE", kernel)
            patch.setattr(resolve_rows_module, "NATIVE", kernel)
            resolved = resolve_rows(pieces, COLUMNS, markers, qualifiers=QUALIFIERS)
        for values in resolved.values:
            values.validate(full=True)
        assert _rows(resolved) == model
        answers.append((resolved.keys.to_pylist(), [v.to_pylist() for v in resolved.values]))
    assert answers[0] == answers[1]


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_reversed_rows_is_take_of_a_descending_index(data):
    """A reverse scan's rows: every column (binary by the gather, others by Arrow's take) in
    reverse order, as a table of chunked columns or a record batch, its schema kept."""
    values = data.draw(columns())
    n = len(values)
    numbers = pa.array(data.draw(st.lists(st.one_of(st.none(), st.integers(-5, 5)), min_size=n, max_size=n)),
                       pa.int64())
    table = pa.table({"v": values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values], pa.binary()),
                      "n": numbers})
    expected = table.take(pa.array(np.arange(n - 1, -1, -1, dtype=np.int64)))
    got = reversed_rows(table)
    assert got.schema == table.schema and got.to_pydict() == expected.to_pydict()
    batch = table.combine_chunks().to_batches()[0] if n else None
    if batch is not None:
        flipped = reversed_rows(batch)
        assert isinstance(flipped, pa.RecordBatch) and flipped.to_pydict() == expected.to_pydict()
    assert reversed_rows(pa.table({})).num_rows == 0


_JOIN_POOLS = {
    "int4": [struct.pack(">I", i * 7919) for i in range(50)],
    "lead": [b"user%012d" % (i * 37) for i in range(50)],  # 16 bytes under one lead: codes of their tails
    "pairs": [bytes([i % 7]) * 3 + struct.pack(">Q", i * 977) for i in range(50)],  # 11 bytes, no one lead
    "var": sorted({b"k", b"k\x00", b"k\x00\x01", b"ka", b"l" * 20} | {b"k%d" % i for i in range(40)}),
}


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(data=st.data(), style=st.sampled_from(sorted(_JOIN_POOLS)), runs=st.integers(1, 4))
def test_join_keys_is_the_union_of_sorted_columns(data, style, runs):
    """The join of several families' sorted, distinct keys: the union in order, each row's key
    taken from the first column holding it, and each column's row of it (-1: none); the compiled
    walk and the NumPy reference both, on keys of one width, under one lead, of 9 to 16 bytes
    and of several widths, chunked or not."""
    pool = _JOIN_POOLS[style]
    columns = [sorted(data.draw(st.lists(st.sampled_from(pool), max_size=30, unique=True))) for _ in range(runs)]
    arrays = [pa.chunked_array([pa.array(c[:3], pa.binary()), pa.array(c[3:], pa.binary())]) if len(c) > 3
              else pa.array(c, pa.binary()) for c in columns]
    union = sorted(set().union(*columns))
    laid = [k for c in columns for k in c]
    starts = np.cumsum([0] + [len(c) for c in columns])
    want_picks = [next(int(starts[t]) + c.index(k) for t, c in enumerate(columns) if k in c) for k in union]
    want_index = [[c.index(k) if k in c else -1 for k in union] for c in columns]
    for got in (join_keys_py([pa.concat_arrays(a.chunks) if isinstance(a, pa.ChunkedArray) else a for a in arrays]),
                join_keys(arrays, native=BUILT)):
        picks, index = got
        assert picks.tolist() == want_picks and [laid[p] for p in picks] == union
        assert [i.tolist() for i in index] == want_index


def test_join_sorted_refuses_bad_input_in_one_line():
    if BUILT is None:  # no compiler at install: the reference takes every key it can encode
        assert join_keys([pa.array([b"a" * 2000])]) is None  # too wide to encode: the cell path
        return
    codes = np.array([1, 5, 3, 4], dtype=np.uint64)
    picks, index = np.empty(4, np.int64), np.empty(8, np.int64)
    with pytest.raises(ValueError, match="not strictly ascending"):
        BUILT.join_sorted(codes, np.array([0, 3, 4], np.int64), picks, index)
    with pytest.raises(ValueError, match="bounds must rise"):
        BUILT.join_sorted(codes, np.array([0, 3, 2], np.int64), picks, index)
    with pytest.raises(ValueError, match="bounds must rise"):
        BUILT.join_sorted(codes, np.array([0, 5], np.int64), picks, np.empty(4, np.int64))
