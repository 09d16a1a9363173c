"""The decode of a pinned region's WAL records and its row form, compiled and reference.

``wal_columns`` (storage/_native/wal.c) decodes checked WAL payloads into the
buffers of one cell table and notes whether the cells are in strict cell
order, clean and of one family; :func:`storage.wal.arrow_decode.payloads_to_table_py`
is its reference (and :func:`storage.kernels.is_sorted` / ``is_clean`` of the
flags).  ``dense_pivot`` builds the row form of sorted clean cells
(:class:`storage.memstore.row_runs.RowRun`); :func:`storage.storefile.dense.dense_from_cells`
is its reference.  Hypothesis holds each pair to the same answers, damaged
payloads included (the kernel hands them to the reference, which raises its
error), and WAL files torn or damaged anywhere read alike both ways.  The
kernel tests switch the built module on for the engine's functions
themselves, so they also run when ``REGIONSCAN_NATIVE=0`` turns it off for
the rest of the process; without a compiler they check that the reference runs.
"""

from __future__ import annotations

import importlib
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import native
from storage.cells import CELL_SCHEMA, CellType
from storage.errors import CorruptionError, StorageError
from storage.kernels import is_clean, is_sorted
from storage.memstore import row_runs
from storage.memstore.row_runs import RowRun
from storage.memstore.sorted_cells import SortedCells
from storage.storefile.dense import dense_from_cells
from storage.vfs.fs import open_filesystem
from storage.wal import arrow_decode
from storage.wal.arrow_decode import decode_payloads, payloads_to_table_py
from storage.wal.format import PAYLOAD_HEADER, RECORD_HEADER_SIZE, VALID_TYPE_MASK, encode_record_py
from storage.wal.reader import WalReader
from storage.wal.writer import WalWriter

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

TYPES = [int(t) for t in CellType]
PUT = int(CellType.PUT)


def test_the_engine_uses_the_kernels_when_they_are_on():
    # first in the file: the module's fixture below switches them on for the tests after it
    assert arrow_decode._NATIVE is native.NATIVE and row_runs._NATIVE is native.NATIVE


@pytest.fixture(scope="module")
def compiled():
    """The engine's decode and row form with the built kernels on (None: not built)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arrow_decode, "_NATIVE", BUILT)
        patch.setattr(row_runs, "_NATIVE", BUILT)
        yield BUILT


def _payloads(records: list[list[tuple]]) -> list[bytes]:
    """Each record's checked payload, as a WAL reader hands it over."""
    return [encode_record_py(i + 1, cells)[RECORD_HEADER_SIZE:] for i, cells in enumerate(records)]


_rows = st.binary(max_size=20)
_families = st.sampled_from([b"cf", b"cf", b"cf", b"f2"])
_quals = st.sampled_from([b"", b"a", b"b", b"qualifier-long-enough-for-memcmp", b"b\x00"])
_stamps = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(0, 3))
_cell = st.tuples(_rows, _families, _quals, _stamps, st.sampled_from(TYPES), st.binary(max_size=120))
_records = st.lists(st.lists(_cell, max_size=80), max_size=6)


def _check_decode(payloads: list[bytes]) -> None:
    expected = payloads_to_table_py(payloads)
    table, shape = decode_payloads(payloads)
    assert table.equals(expected)
    if BUILT is None:
        assert shape is None
        return
    if expected.num_rows == 0:
        return
    assert shape.sorted == is_sorted(expected, strict=True)
    if shape.sorted:
        assert shape.clean == is_clean(expected)
    families = set(expected.column("family").to_pylist())
    assert shape.family == (families.pop() if len(families) == 1 else None)
    # the sorted cells a reader builds are the same however the log was decoded
    assert SortedCells.from_log(table, shape).table.equals(SortedCells.from_log(expected).table)


@settings(max_examples=200, deadline=None)
@given(records=_records)
def test_decoded_payloads_match_the_reference(compiled, records):
    _check_decode(_payloads(records))


@settings(max_examples=100, deadline=None)
@given(records=_records)
def test_logs_written_in_cell_order_are_known_sorted_and_clean(compiled, records):
    cells = sorted({(c[0], b"cf", c[2]): (c[0], b"cf", c[2], c[3], PUT, c[5]) for r in records for c in r}.values())
    payloads = _payloads([cells[i:i + 7] for i in range(0, len(cells), 7)])
    _check_decode(payloads)
    table, shape = decode_payloads(payloads)
    if BUILT is not None and cells:
        assert shape == arrow_decode.LogShape(True, True, b"cf")
        run = SortedCells.from_log(table, shape).family(b"cf").row_run()
        reference = RowRun.of(payloads_to_table_py(payloads))
        _same_dense(run.dense if run else None, reference.dense if reference else None)



@settings(max_examples=60, deadline=None)
@given(tails=st.lists(st.binary(max_size=5), min_size=2, max_size=12), order=st.permutations(range(12)),
       prefix=st.binary(min_size=4, max_size=4))
def test_row_keys_alike_in_their_first_bytes_are_ordered_by_the_rest(compiled, tails, order, prefix):
    # the kernel orders row keys of 4 to 8 bytes as two big-endian words: keys that share
    # their first four bytes and differ (or end) after them, in order and out of it
    keys = [prefix + t for t in tails]
    for cells in (sorted(keys), [keys[i] for i in order if i < len(keys)]):
        _check_decode(_payloads([[(k, b"cf", b"q", 1, PUT, b"v") for k in cells]]))

def _damaged(payload: bytes, how: str, at: int) -> bytes:
    n = PAYLOAD_HEADER.unpack_from(payload, 0)[1]
    raw = bytearray(payload)
    if how == "count":
        struct.pack_into("<I", raw, 8, n + 1 + at % 5)
    elif how == "length" and n:
        pos = PAYLOAD_HEADER.size + 8 * n + 4 * (at % (4 * n))
        struct.pack_into("<I", raw, pos, struct.unpack_from("<I", raw, pos)[0] + 1 + at % 3)
    elif how == "type" and n:
        raw[PAYLOAD_HEADER.size + 24 * n + at % n] = 99
    elif how == "cut":
        del raw[max(PAYLOAD_HEADER.size, len(raw) - 1 - at % 40):]
    return bytes(raw)


@settings(max_examples=150, deadline=None)
@given(records=st.lists(st.lists(_cell, min_size=1, max_size=80), min_size=1, max_size=4),
       how=st.sampled_from(["count", "length", "type", "cut"]), which=st.integers(0, 3), at=st.integers(0, 1000))
def test_damaged_payloads_are_refused_with_the_references_error(compiled, records, how, which, at):
    payloads = _payloads(records)
    which %= len(payloads)
    payloads[which] = _damaged(payloads[which], how, at)
    try:
        expected = payloads_to_table_py(payloads, "wal-x")
    except StorageError as error:
        with pytest.raises(type(error)) as info:
            decode_payloads(payloads, "wal-x")
        assert str(info.value) == str(error)
        if BUILT is not None:
            assert BUILT.wal_columns(payloads, VALID_TYPE_MASK, pa.allocate_buffer) is None
        return
    assert decode_payloads(payloads, "wal-x")[0].equals(expected)  # a cut inside values that still adds up


def _wal_file(tmp_path, records: list[list[tuple]]) -> tuple:
    fs = open_filesystem(str(tmp_path))
    with WalWriter(fs, "log.wal", sync="none") as writer:
        for i, cells in enumerate(records):
            writer.append(i + 1, cells)
    return fs, "log.wal"


def _read(fs, path: str, decode) -> pa.Table | str:
    """What a pinned region decodes of a WAL file with ``decode``, or the error it raises."""
    try:
        return decode([r.cells for r in WalReader(fs, path, decode="payload")])
    except StorageError as error:
        return f"{type(error).__name__}: {error}"


@settings(max_examples=60, deadline=None)
@given(records=st.lists(st.lists(_cell, min_size=1, max_size=30), min_size=1, max_size=4),
       cut=st.integers(0, 1 << 20), flip=st.one_of(st.none(), st.integers(0, 1 << 20)),
       zeros=st.integers(0, 64))
def test_torn_and_damaged_wal_files_read_alike_both_ways(compiled, tmp_path_factory, records, cut, flip, zeros):
    fs, path = _wal_file(tmp_path_factory.mktemp("wal"), records)
    full = fs.read_bytes(path)
    data = bytearray(full[: cut % (len(full) + 1)]) + bytes(zeros)  # torn, and a crash's zero-filled page
    if flip is not None and data:
        data[flip % len(data)] ^= 0x10
    fs.write_bytes(path, bytes(data))
    reference = _read(fs, path, payloads_to_table_py)
    decoded = _read(fs, path, lambda payloads: decode_payloads(payloads)[0])
    if isinstance(reference, str):
        assert decoded == reference and "\n" not in reference  # the same one-line error
        return
    assert decoded.equals(reference)


def _same_dense(a, b) -> None:
    assert (a is None) == (b is None)
    if a is None:
        return
    assert a.rows.equals(b.rows) and a.qualifiers == b.qualifiers
    assert all(x.equals(y) for x, y in zip(a.timestamps, b.timestamps, strict=True))
    assert all(x.equals(y) for x, y in zip(a.values, b.values, strict=True))


_dense_cells = st.lists(st.tuples(st.binary(max_size=6), st.sampled_from([b"a", b"b", b"c", b"", b"zz"]),
                                  st.integers(0, 5), st.sampled_from([PUT, PUT, PUT, int(CellType.DELETE)]),
                                  st.binary(max_size=30)), max_size=120)


@settings(max_examples=200, deadline=None)
@given(cells=_dense_cells, versions=st.booleans())
def test_the_row_form_matches_the_reference(compiled, cells, versions):
    if versions:  # keep second versions of a column: not dense
        rows = sorted(cells, key=lambda c: (c[0], c[1], -c[2], -c[3]))
    else:
        rows = sorted({(c[0], c[1]): c for c in cells}.values(), key=lambda c: (c[0], c[1], -c[2], -c[3]))
    table = pa.Table.from_pylist([dict(row=r, family=b"cf", qualifier=q, timestamp=t, type=k, value=v)
                                  for r, q, t, k, v in rows], schema=CELL_SCHEMA)
    batch = table.combine_chunks().to_batches()[0] if table.num_rows else None
    expected = RowRun.of(table)
    got = RowRun.of(table)
    _same_dense(got.dense if got else None, expected.dense if expected else None)
    if batch is not None:
        native_block = row_runs._native_dense(batch)
        if BUILT is None:
            assert native_block is False
        else:
            _same_dense(native_block, dense_from_cells(batch, min_rows=1))


_mixed_cells = st.lists(st.tuples(st.binary(min_size=1, max_size=4), st.sampled_from([b"a", b"b", b"", b"zz"]),
                                  st.integers(0, 5), st.sampled_from([PUT, PUT, int(CellType.DELETE_FAMILY),
                                                                      int(CellType.DELETE_COLUMN)]),
                                  st.binary(max_size=30)), max_size=120)


def _cell_table(rows) -> pa.Table:
    return pa.Table.from_pylist([dict(row=r, family=b"cf", qualifier=q, timestamp=t, type=k, value=v)
                                 for r, q, t, k, v in rows], schema=CELL_SCHEMA)


@settings(max_examples=200, deadline=None)
@given(cells=_mixed_cells, versions=st.booleans(), chunk=st.integers(1, 40),
       wanted=st.one_of(st.none(), st.lists(st.sampled_from([b"a", b"b", b"", b"zz", b"q"]), unique=True)))
def test_the_puts_among_markers_pivot_as_the_reference(compiled, cells, versions, chunk, wanted):
    # a source of re-puts and deletes: its puts (markers left out), of some columns or all,
    # as dense blocks, compiled straight from the cells and by the reference, whole and in
    # chunks (a file's cell blocks)
    key = lambda c: (c[0], c[1], -c[2], -c[3])  # noqa: E731
    if versions:
        rows = sorted(cells, key=key)
    else:
        rows = sorted({(c[0], c[1], c[3] == PUT): c for c in cells}.values(), key=key)
    table = _cell_table(rows)
    if not table.num_rows:
        return
    types = np.asarray(table.column("type"))
    at = np.flatnonzero(types == PUT)
    taken = [i for i in at if wanted is None or rows[i][1] in wanted]
    puts = table.take(pa.array(taken, pa.int64())).combine_chunks()
    expected = dense_from_cells(puts.to_batches()[0], min_rows=1) if taken else None
    batch = table.combine_chunks().to_batches()[0]
    if BUILT is not None and len(at):
        native_block = row_runs._native_dense(batch, at, None if wanted is None else tuple(wanted))
        if taken:
            _same_dense(native_block, expected)
        else:  # none of the puts is of the columns asked for: told apart from "not dense"
            assert native_block == ()
    chunked = pa.Table.from_batches([table.slice(i, chunk).combine_chunks().to_batches()[0]
                                     for i in range(0, table.num_rows, chunk)])
    model: dict = {}  # row -> qualifier -> (timestamp, value): one put of each, where dense
    for i in taken:
        r, q, t, k, v = rows[i]
        model.setdefault(r, {})[q] = (t, v)
    for source in (table, chunked):
        blocks = row_runs.dense_puts(source, at, wanted)
        if source is table:  # one part: the reference's answer ([] where nothing is asked for)
            assert (blocks is None) == (expected is None and bool(taken))
        if blocks is None:
            continue
        # a chunk's puts can be dense where all of them are not (too sparse together): either
        # way the blocks laid end to end are the puts' rows
        keys = [k for b in blocks for k in b.rows.to_pylist()]
        assert keys == sorted(model)
        for block in blocks:
            for j, q in enumerate(block.qualifiers):
                for r, t, v in zip(block.rows.to_pylist(), block.timestamps[j].to_pylist(), block.value(j).to_pylist()):
                    assert (t, v) == model[r].get(q, (None, None))
            assert all(q in block.qualifiers for r in block.rows.to_pylist() for q in model[r])


def test_puts_of_a_row_cut_by_a_chunk_boundary_pivot_together(compiled):
    rows = [(b"r1", b"a", 5, PUT, b"x"), (b"r1", b"b", 5, PUT, b"y"), (b"r2", b"", 6, int(CellType.DELETE_FAMILY), b""),
            (b"r3", b"a", 5, PUT, b"z")]
    table = _cell_table(rows)
    chunked = pa.Table.from_batches([table.slice(0, 1).to_batches()[0], table.slice(1).combine_chunks().to_batches()[0]])
    blocks = row_runs.dense_puts(chunked, np.array([0, 1, 3]))
    assert len(blocks) == 1 and blocks[0].rows.to_pylist() == [b"r1", b"r3"]
    assert blocks[0].value(1).to_pylist() == [b"y", None]


def test_bad_picked_cells_get_a_one_line_error():
    if BUILT is None:
        assert native.NATIVE is None
        return
    offsets = struct.pack("<3i", 0, 1, 2)
    for cells, message in ((np.array([1, 0]), "cells\\[1\\] = 0 is not an ascending position"),
                           (np.array([0, 2]), "cells\\[1\\] = 2 is not an ascending position of the 2 cells"),
                           (np.array([-1]), "cells\\[0\\] = -1"), (b"abc", "cells must be an int64 array")):
        with pytest.raises(ValueError, match=message) as info:
            BUILT.dense_pivot(2, offsets, b"ab", offsets, b"ab", bytes(16), bytes([PUT, PUT]), offsets, b"ab", 255, 2,
                              1, pa.allocate_buffer, cells)
        assert "\n" not in str(info.value)
    for wanted, message in (([b"a"], "qualifiers must be a tuple of at most 255"), ((b"a", "b"), "qualifiers\\[1\\] is str")):
        with pytest.raises(ValueError, match=message) as info:
            BUILT.dense_pivot(2, offsets, b"ab", offsets, b"ab", bytes(16), bytes([PUT, PUT]), offsets, b"ab", 255, 2,
                              1, pa.allocate_buffer, None, wanted)
        assert "\n" not in str(info.value)


def test_too_many_qualifiers_or_too_sparse_rows_are_not_dense_either_way(compiled):
    wide = [(b"r%03d" % (i // 2), b"q%03d" % i) for i in range(512)]  # 512 qualifiers
    sparse = [(b"r%03d" % i, b"q%03d" % i) for i in range(40)]  # one qualifier per row
    for cells in (wide, sparse):
        table = pa.Table.from_pylist([dict(row=r, family=b"cf", qualifier=q, timestamp=1, type=PUT, value=b"v")
                                      for r, q in cells], schema=CELL_SCHEMA)
        batch = table.to_batches()[0]
        assert dense_from_cells(batch, min_rows=1) is None
        assert row_runs._native_dense(batch) in ((None,) if BUILT is not None else (False,))


def test_columns_the_kernel_does_not_take_go_to_the_reference(compiled):
    table = pa.Table.from_pylist([dict(row=b"r%d" % i, family=b"cf", qualifier=b"q", timestamp=1, type=PUT,
                                       value=b"v%d" % i) for i in range(20)], schema=CELL_SCHEMA)
    batch = table.to_batches()[0]
    assert row_runs._native_dense(batch.slice(3)) is False  # a slice: the reference builds it
    unsorted = pa.Table.from_pylist([dict(row=b"r", family=b"cf", qualifier=q, timestamp=1, type=PUT, value=b"v")
                                     for q in (b"b", b"a")], schema=CELL_SCHEMA).to_batches()[0]
    assert row_runs._native_dense(unsorted) is False
    _same_dense(RowRun.of(table.slice(3)).dense, dense_from_cells(batch.slice(3), min_rows=1))


@pytest.mark.parametrize("args, message", [
    (([b"x"], b"\x01", pa.allocate_buffer), "valid_types must be 256 bytes"),
    (((b"x",), bytes(256), pa.allocate_buffer), "payloads must be a list"),
    (([PAYLOAD_HEADER.pack(1, 1, 0) + bytes(25)], bytes([1]) * 256, bytes), "allocate must return a writable"),
])
def test_bad_decode_arguments_get_a_one_line_error(args, message):
    if BUILT is None:
        assert native.NATIVE is None
        return
    with pytest.raises(ValueError, match=message) as info:
        BUILT.wal_columns(*args)
    assert "\n" not in str(info.value)


def test_bad_pivot_arguments_get_a_one_line_error():
    if BUILT is None:
        assert native.NATIVE is None
        return
    offsets = struct.pack("<3i", 0, 1, 5)  # the second cell's offsets run past its data
    with pytest.raises(ValueError, match="offsets are damaged") as info:
        BUILT.dense_pivot(2, offsets, b"ab", offsets, b"ab", bytes(16), bytes([PUT, PUT]), offsets, b"ab", 255, 2, 1,
                          pa.allocate_buffer)
    assert "\n" not in str(info.value)


def test_a_corrupt_payload_names_the_wal(compiled):
    payload = _payloads([[(b"r", b"cf", b"q", 1, PUT, b"v")]])[0]
    with pytest.raises(CorruptionError, match="wal-y"):
        decode_payloads([_damaged(payload, "type", 0)], "wal-y")
