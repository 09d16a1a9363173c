"""A live chunk's columns written at one timestamp, passed once instead of per row.

A stored dense block keeps a column whose rows share one timestamp as a
run-end array of one run.  ``dense_piece`` hands such a column to the row
resolution as a read-only zero-stride view of that value (no int64 per row),
and the compiled merge (``resolve_merge``) reads it once for every entry.  The
answers must be those of the same pieces with every timestamp written out, on
both paths (the compiled merge and the NumPy reference), and a real table whose
base file was written at one timestamp must scan, with re-puts, deletes of every
kind and versions in its memstore or a newer file, as the same table compacted.
This file runs with ``REGIONSCAN_NATIVE=0`` too: the compiled module is called
directly where it is built, and the engine's reference runs the table scans.
"""

from __future__ import annotations

import importlib
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from storage.cells import CellType
from storage.kernels.resolve_rows import ABSENT, Markers, RowPiece, resolve_rows
from storage.region.row_pieces import dense_piece
from storage.storefile.dense import DenseBlock

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

FAMILY = int(CellType.DELETE_FAMILY)
PATHS = ([BUILT] if BUILT is not None else []) + [None]


def _key(i: int) -> bytes:
    return struct.pack(">I", i)


def _answer(resolved) -> tuple:
    return (resolved.keys.to_pylist(), [v.to_pylist() for v in resolved.values],
            [t.tolist() for t in resolved.ts], resolved.cell_count())


@st.composite
def one_stamp_chunks(draw):
    """(pieces with one-value columns as zero-stride views, the same written out, markers, columns)."""
    columns = draw(st.integers(1, 3))
    pieces, written = [], []
    for p in range(draw(st.integers(1, 3))):
        rows = sorted(draw(st.sets(st.integers(0, 200), min_size=1, max_size=80)))
        ts, full = [], []
        for _ in range(columns):
            if draw(st.booleans()):  # the whole column at one timestamp
                one = draw(st.sampled_from([1, 2, 5, 9]))
                full.append(np.full(len(rows), one, np.int64))
                ts.append(np.broadcast_to(np.int64(one), (len(rows),)))
            else:
                full.append(np.array([draw(st.sampled_from([ABSENT, 1, 2, 5, 9])) for _ in rows], np.int64))
                ts.append(full[-1])
        values = [pa.array([b"p%d-%d-%d" % (p, j, r) for r in rows], pa.binary()) for j in range(columns)]
        keys = pa.array([_key(r) for r in rows], pa.binary())
        pieces.append(RowPiece(keys, ts, values))
        written.append(RowPiece(keys, full, values))
    markers = None
    if draw(st.booleans()):
        marked = draw(st.lists(st.integers(0, 210), min_size=1, max_size=30))
        markers = Markers(pa.array([_key(r) for r in marked], pa.binary()), pa.array([b""] * len(marked), pa.binary()),
                          np.array([draw(st.sampled_from([1, 2, 6])) for _ in marked], np.int64),
                          np.full(len(marked), FAMILY, np.uint8))
    return pieces, written, markers, columns


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(case=one_stamp_chunks(), bounded=st.booleans())
def test_one_value_columns_resolve_as_the_same_timestamps_written_out(case, bounded):
    pieces, written, markers, columns = case
    limits = {"min_timestamp": 2} if bounded else {}
    expected = _answer(resolve_rows(written, columns, markers, native=None, **limits))
    for native in PATHS:
        assert _answer(resolve_rows(pieces, columns, markers, native=native, **limits)) == expected


def _block(n: int, stamps: list) -> DenseBlock:
    """A dense block of ``n`` rows whose column ``j`` has the int64 timestamps ``stamps[j]`` (run-end encoded)."""
    rows = pa.array([_key(i) for i in range(n)], pa.binary())
    ts = [pc.run_end_encode(pa.array(s, pa.int64())) for s in stamps]
    values = [pa.array([b"v%d" % i for i in range(n)], pa.binary()) for _ in stamps]
    return DenseBlock(rows, tuple(b"q%d" % j for j in range(len(stamps))), ts, values)


def test_a_block_column_of_one_timestamp_becomes_one_value_and_others_are_written_out():
    one = _block(5, [[7] * 5, [7, 7, 8, 8, 8]])
    piece = dense_piece(one, [b"q0", b"q1"])
    assert piece.ts[0].strides == (0,) and piece.ts[0].tolist() == [7] * 5
    assert piece.ts[1].strides != (0,) and piece.ts[1].tolist() == [7, 7, 8, 8, 8]
    # blocks of one run each but at different timestamps: written out
    two = dense_piece([_block(3, [[4] * 3]), _block(2, [[6] * 2])], [b"q0"])
    assert two.ts[0].strides != (0,) and two.ts[0].tolist() == [4, 4, 4, 6, 6]
    # a qualifier a block lacks is absent in its rows, never one value
    lacking = dense_piece(_block(3, [[4] * 3]), [b"q0", b"q9"])
    assert lacking.ts[1].tolist() == [ABSENT] * 3


ROWS = 240


def _expected(layout: str) -> dict:
    """Each row's visible columns after the base puts (timestamp 1000) and ``layout``'s live writes."""
    rows = {_key(i): {b"cf:n": b"n%d" % i, b"cf:s": b"s%d" % i} for i in range(ROWS)}
    for i in range(0, ROWS, 3):
        if layout == "rewrite":
            rows[_key(i)] = {b"cf:n": b"N%d" % i, b"cf:s": b"S%d" % i}
        elif layout == "partial":
            rows[_key(i)][b"cf:s"] = b"S%d" % i
        elif layout == "delete_row":
            del rows[_key(i)]
        elif layout == "delete_column":
            del rows[_key(i)][b"cf:s"]
        elif layout == "delete_version":  # the newest version deleted: the base one shows again
            pass
        elif layout == "older":  # a re-put with an older timestamp loses to the base
            pass
    return rows


def _live_writes(table, layout: str) -> None:
    with table.batch(timestamp=2000) as b:
        for i in range(0, ROWS, 3):
            key = _key(i)
            if layout == "rewrite":
                b.put(key, {b"cf:n": b"N%d" % i, b"cf:s": b"S%d" % i})
            elif layout == "partial":
                b.put(key, {b"cf:s": b"S%d" % i})
            elif layout == "delete_row":
                b.delete(key)
            elif layout == "delete_column":
                b.delete(key, columns=[b"cf:s"])
            elif layout == "delete_version":
                b.put(key, {b"cf:n": b"X%d" % i})
    if layout == "delete_version":  # the put at 2000 deleted by a point delete of that version
        for i in range(0, ROWS, 3):
            table.delete_version(_key(i), b"cf:n", 2000)
    if layout == "older":
        with table.batch(timestamp=500) as b:
            for i in range(0, ROWS, 3):
                b.put(_key(i), {b"cf:n": b"old%d" % i})


def _scan(table) -> dict:
    out = {}
    for batch in table.scan_batches(columns=[b"cf:n", b"cf:s"], cache_results=False):
        d = batch.to_pydict()
        for k, n, s in zip(d["key"], d["cf:n"], d["cf:s"]):
            out[k] = {c: v for c, v in ((b"cf:n", n), (b"cf:s", s)) if v is not None}
    return out


@pytest.mark.parametrize("where", ["memstore", "file", "both"])
@pytest.mark.parametrize("layout", ["rewrite", "partial", "delete_row", "delete_column", "delete_version", "older"])
def test_a_table_written_at_one_timestamp_scans_with_live_writes_as_compacted(tmp_path, layout, where):
    conn = storage.connect(str(tmp_path / "root"), block_cache_size=0)
    try:
        table = conn.create_table("t", {"cf": {"max_versions": 3}}, split_keys=[_key(ROWS // 2)],
                                  settings={"wal_sync": "none", "compaction_threshold": 1000})
        with table.batch(timestamp=1000) as b:
            for i in range(ROWS):
                b.put(_key(i), {b"cf:n": b"n%d" % i, b"cf:s": b"s%d" % i})
        table.compact(major=True)  # the base file: each column at one timestamp
        if where == "both":  # a newer file holding other live rows than the memstore's
            with table.batch(timestamp=1500) as b:
                for i in range(1, ROWS, 7):
                    b.put(_key(i), {b"cf:s": b"s%d" % i})
            table.flush()
        _live_writes(table, layout)
        if where == "file":
            table.flush()
        expected = _expected(layout)
        assert _scan(table) == expected
        table.flush()
        table.compact(major=True)
        assert _scan(table) == expected
    finally:
        conn.close()
