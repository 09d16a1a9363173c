"""A pinned region's log read straight into its row form, compiled and reference.

``wal_rows`` (storage/_native/wal.c) takes checked WAL payloads whose cells are
puts of whole rows of one family (what a table being updated writes; the rows in
key order, or in any order, which :func:`log_rows` then sorts) and builds their
row form (:class:`storage.memstore.row_runs.RowRun`) with no cell table between;
:meth:`storage.memstore.sorted_cells.SortedCells.from_payloads` uses it and
decodes the cell table only when something asks for cells.  Any other log
(markers, versions, a row written twice, several families, a row's cells apart
or out of order, damaged) goes the way it went before:
:func:`storage.wal.arrow_decode.decode_payloads`, then
:meth:`SortedCells.from_log`.  The reference is that way with the kernels off
(:func:`payloads_to_table_py` and :func:`storage.storefile.dense.dense_from_cells`).
Hypothesis holds the two to the same cells, row form and errors, on payloads
and on torn or damaged WAL files.  Like tests/storage/test_wal_decode.py, the
kernel tests switch the built module on for the engine's functions, so they
also run when ``REGIONSCAN_NATIVE=0`` turns it off for the rest of the process.
"""

from __future__ import annotations

import importlib
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import native
from storage.cells import CellType
from storage.errors import StorageError
from storage.memstore import row_runs
from storage.memstore.row_runs import RowRun, log_rows
from storage.memstore.sorted_cells import SortedCells
from storage.storefile.dense import MAX_DENSE_QUALIFIERS, MAX_FILL, DenseBlock, dense_from_cells
from storage.vfs.fs import open_filesystem
from storage.wal import arrow_decode
from storage.wal.arrow_decode import payloads_to_table_py
from storage.wal.format import PAYLOAD_HEADER, RECORD_HEADER_SIZE, encode_record_py
from storage.wal.reader import WalReader
from storage.wal.writer import WalWriter

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

PUT, DELETE = int(CellType.PUT), int(CellType.DELETE)


@pytest.fixture(scope="module", params=[True, False], ids=["compiled", "reference"])
def kernels(request):
    """The engine's log decode with the built kernels on (``True``) or the reference (``False``)."""
    on = BUILT if request.param else None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arrow_decode, "_NATIVE", on)
        patch.setattr(row_runs, "_NATIVE", on)
        yield on


def _payloads(records: list[list[tuple]]) -> list[bytes]:
    """Each record's checked payload, as a WAL reader hands it over."""
    return [encode_record_py(i + 1, cells)[RECORD_HEADER_SIZE:] for i, cells in enumerate(records)]


def _reference(payloads: list[bytes]) -> tuple:
    """What the reference makes of a log: its sorted cells, and their row form
    (:func:`dense_from_cells`) when they are of one family."""
    table = SortedCells.from_log(payloads_to_table_py(payloads)).table
    one = table.num_rows and len(set(table.column("family").to_pylist())) == 1
    return table, dense_from_cells(table.combine_chunks().to_batches()[0], min_rows=1) if one else None


def _same_run(got: RowRun | None, b: DenseBlock | None) -> None:
    assert (got is None) == (b is None)
    if got is None:
        return
    a = got.dense
    assert a.rows.equals(b.rows) and tuple(a.qualifiers) == tuple(b.qualifiers)
    assert all(x.equals(y) for x, y in zip(a.timestamps, b.timestamps, strict=True))
    assert all(x.equals(y) for x, y in zip(a.values, b.values, strict=True))


def _check(payloads: list[bytes]) -> SortedCells:
    table, run = _reference(payloads)
    cells = SortedCells.from_payloads(payloads, "wal-x")
    families = set(table.column("family").to_pylist())
    if len(families) == 1:
        family = families.pop()
        _same_run(cells.family(family).row_run(), run)
        assert cells.family(b"other").is_empty()
    assert cells.is_empty() == (table.num_rows == 0)
    fresh = SortedCells.from_payloads(payloads, "wal-x")  # asked about rows before any cell is decoded
    rows = table.column("row").to_pylist()
    for lo, hi in [(b"", None), (b"\x00", b"\x80"), (rows[len(rows) // 2] if rows else b"", None),
                   (rows[-1] + b"\x00" if rows else b"x", None), (b"", rows[0] if rows else b"")]:
        assert fresh.holds_rows(lo, hi) == any(lo <= r and (hi is None or r < hi) for r in rows)
    assert cells.table.equals(table)  # the cell table, decoded on demand, is the reference's
    return cells


_quals = st.sampled_from([b"", b"a", b"b", b"b\x00", b"c", b"qualifier-long-enough-for-memcmp"])
_logs = st.lists(st.tuples(st.binary(max_size=20), _quals, st.integers(-(1 << 63), (1 << 63) - 1),
                           st.binary(max_size=120)), max_size=200)


def _records(cells: list[tuple], cut: int) -> list[list[tuple]]:
    """Cells written ``cut`` (1-9) to a record, with a record of no cells among them."""
    records = [cells[i:i + cut] for i in range(0, len(cells), cut)]
    return records[:1] + [[]] + records[1:]


def _whole_rows(cells: list[tuple]) -> bool:
    """Are ``cells`` (in log order) whole rows: each row's cells together, their qualifiers
    strictly ascending, no row twice (the rows themselves in any order)?"""
    seen, prev = set(), None
    for row, _, q, *_ in cells:
        if prev is not None and row == prev[0]:
            if q <= prev[1]:
                return False
        elif row in seen:
            return False
        seen.add(row)
        prev = (row, q)
    return True


@settings(max_examples=150, deadline=None)
@given(log=_logs, cut=st.integers(1, 9), spoil=st.sampled_from(["none", "none", "delete", "family", "swap",
                                                                 "version", "rows", "again"]),
       at=st.integers(0, 1000))
def test_a_log_read_as_rows_matches_the_reference(kernels, log, cut, spoil, at):
    cells = sorted({(r, q): (r, b"cf", q, t, PUT, v) for r, q, t, v in log}.values())
    if cells and spoil == "rows":  # whole rows written out of key order (hashed keys): still rows
        rows = sorted({c[0] for c in cells})
        turn = at % len(rows)
        order = {r: i for i, r in enumerate(rows[turn:][::-1] + rows[:turn])}
        cells.sort(key=lambda c: order[c[0]])  # stable: each row's cells stay in qualifier order
    elif cells and spoil == "again":  # a row written twice, apart: its cells decide (a version)
        r, f, q, t, k, v = cells[at % len(cells)]
        cells.append((r, f, q, t + 1 if t < (1 << 63) - 1 else t - 1, k, v + b"!"))
    elif cells and spoil != "none":  # one cell the row form cannot take as it is
        i = at % len(cells)
        r, f, q, t, k, v = cells[i]
        if spoil == "delete":
            cells[i] = (r, f, q, t, DELETE, b"")
        elif spoil == "family":
            cells[i] = (r, b"f2", q, t, k, v)
        elif spoil == "swap" and len(cells) > 1:
            cells[i], cells[i - 1] = cells[i - 1], cells[i]
        elif spoil == "version":
            cells.insert(i + 1, (r, f, q, t - 1 if t > -(1 << 63) else t + 1, k, v))
    payloads = _payloads(_records(cells, cut))
    got = _check(payloads)
    fused = log_rows(payloads)
    if kernels is None:
        assert fused is None
        return
    table, run = _reference(payloads)
    # the row form came straight from the payloads exactly when the log is whole rows of
    # puts of one family (in any row order) that the dense form holds
    logged = payloads_to_table_py(payloads)
    shaped = table.num_rows > 0 and run is not None and len(set(logged.column("family").to_pylist())) == 1 and \
        set(logged.column("type").to_pylist()) == {PUT} and \
        _whole_rows(list(zip(*[logged.column(c).to_pylist() for c in ("row", "family", "qualifier")])))
    assert (fused is not None) == shaped
    if fused is not None:
        _same_run(fused[0], run)
    if fused is not None:
        assert fused[1:] == (table.column("family")[0].as_py(), table.num_rows, None)
        assert got._table is not None  # _check asked for cells: decoded then, not before
        assert SortedCells.from_payloads(payloads)._table is None


DELETE_FAMILY = int(CellType.DELETE_FAMILY)


@settings(max_examples=150, deadline=None)
@given(log=_logs, cut=st.integers(1, 9), marks=st.lists(st.tuples(st.integers(0, 1 << 30), st.binary(max_size=20),
                                                                   st.integers(-(1 << 63), (1 << 63) - 1)), max_size=30),
       rows=st.sampled_from(["ordered", "turned"]), spoil=st.sampled_from(["none", "none", "qualifier", "value", "family"]))
def test_puts_among_family_markers_read_as_rows_and_markers(kernels, log, cut, marks, rows, spoil):
    """A log of whole rows of puts with DeleteFamily markers among them (a table being updated
    and deleted from; a marker's row may be one of the puts' or none of them, written before or
    after them, twice): the puts' row form and the markers set aside, against the reference's
    cells; a marker that is not what a row delete writes (a qualifier, a value, another family)
    sends the log to the cells."""
    cells = sorted({(r, q): (r, b"cf", q, t, PUT, v) for r, q, t, v in log}.values())
    if cells and rows == "turned":
        order = {r: i for i, r in enumerate(sorted({c[0] for c in cells}, reverse=True))}
        cells.sort(key=lambda c: order[c[0]])
    for at, row, stamp in marks:  # each marker at a row boundary or inside a row's cells
        known = [c[0] for c in cells]
        mark = (known[at % len(known)] if known and at % 3 else row, b"cf", b"", stamp, DELETE_FAMILY, b"")
        cells.insert(at % (len(cells) + 1), mark)
    if marks and spoil != "none":
        i = next(k for k, c in enumerate(cells) if c[4] == DELETE_FAMILY)
        r, f, q, t, k, v = cells[i]
        cells[i] = {"qualifier": (r, f, b"q", t, k, v), "value": (r, f, q, t, k, b"v"), "family": (r, b"f2", q, t, k, v)}[spoil]
    payloads = _payloads(_records(cells, cut))
    _check(payloads)  # the cells and rows the log holds, however it is read
    assert log_rows(payloads) is None or not marks  # without markers_aside, a marker sends the log to the cells
    fused = log_rows(payloads, markers_aside=True)
    if kernels is None:
        assert fused is None
        return
    table, _ = _reference(payloads)
    types = table.column("type").to_pylist()
    puts = table.filter(pa.array([t == PUT for t in types], pa.bool_()))
    markers = table.filter(pa.array([t == DELETE_FAMILY for t in types], pa.bool_()))
    put_cells = [c for c in cells if c[4] == PUT]
    run = dense_from_cells(puts.combine_chunks().to_batches()[0], min_rows=1) if puts.num_rows else None
    shaped = run is not None and spoil == "none" or (run is not None and not marks)
    shaped = shaped and _whole_rows([(c[0], c[1], c[2]) for c in put_cells]) and \
        len(set(table.column("family").to_pylist())) == 1
    assert (fused is not None) == shaped
    if fused is None:
        return
    _same_run(fused[0], run)
    assert fused[1] == b"cf" and fused[2] == table.num_rows
    if markers.num_rows:
        assert fused[3].equals(markers.combine_chunks())
        got = SortedCells.from_payloads(payloads)
        kept_run, kept_markers = got.rows_and_markers()
        assert got._table is None and got.row_run() is None  # not clean: no row form stands for all its cells
        assert kept_markers.equals(fused[3]) and not got.is_clean()
    else:
        assert fused[3] is None and SortedCells.from_payloads(payloads).rows_and_markers() is None


@pytest.mark.parametrize("width", [4, 12, 16, "mixed", "ycsb"])
@pytest.mark.parametrize("again", [False, True])
def test_rows_written_out_of_key_order_are_sorted_or_left_to_the_cells(kernels, width, again):
    """Hashed or salted keys: whole rows written in no key order.  Keys of one width are
    sorted by their integer codes (one word: 4 bytes, or 16 under one lead; two: 12 bytes
    under none), others (several widths: YCSB's ``user`` and a hash's decimal digits) by
    their padded words; a row written twice is left to the cells either way."""
    import hashlib

    def key(i: int) -> bytes:
        digest = hashlib.md5(b"%d" % i).digest()
        return {4: digest[:4], 12: digest[:4] + i.to_bytes(8, "big"), 16: b"user%012d" % (i * 7919 % 1000),
                "mixed": digest[: 1 + i % 5],
                "ycsb": b"user%d" % int.from_bytes(digest[:8], "big")}[width]

    keys = list(dict.fromkeys(key(i) for i in range(300)))
    cells = [(k, b"cf", q, 5, PUT, b"%s-%d" % (q, i)) for i, k in enumerate(keys) for q in (b"a", b"b")]
    if again:
        cells += [(keys[7], b"cf", b"a", 6, PUT, b"later")]  # row 7 again, after the others
    payloads = _payloads(_records(cells, 7))
    fused = log_rows(payloads)
    _check(payloads)
    if kernels is not None:
        assert (fused is None) == again
        if not again:
            assert fused[0].dense.rows.to_pylist() == sorted(keys)


def _near(name: bytes, at: int) -> bytes:
    """``name`` with one byte changed at ``at`` (modulo its length): the same length, so
    only the bytes themselves tell the two apart."""
    raw = bytearray(name)
    raw[at % len(raw)] ^= 0x01
    return bytes(raw)


@settings(max_examples=25, deadline=None)
@given(length=st.integers(1, 20), rows=st.lists(st.binary(max_size=24), min_size=1, max_size=12),
       values=st.lists(st.binary(max_size=24), min_size=1, max_size=24), cut=st.integers(1, 9))
def test_names_one_byte_apart_are_told_apart(kernels, length, rows, values, cut):
    # the kernel compares qualifiers and families of up to 16 bytes as overlapping words and
    # copies short row keys and values the same way: for a length from 1 to 20, names that
    # differ in one byte at each position in turn, keys and values of 0-24 bytes
    name = bytes(range(65, 65 + length))
    rows = sorted(set(rows))
    for at in range(length):
        other = _near(name, at)
        pair = [(row, b"cf", q, i, PUT, values[i % len(values)]) for i, row in enumerate(rows) for q in sorted([name, other])]
        fused = log_rows(_payloads(_records(pair, cut)))
        _check(_payloads(_records(pair, cut)))
        if kernels is not None:  # two columns whose names are the same length
            assert fused is not None and tuple(fused[0].dense.qualifiers) == tuple(sorted([name, other]))
        # one cell (the last row's) of a family one byte away from the others': not one family
        mixed = [(row, name if i < len(rows) - 1 or len(rows) == 1 else other, b"q", i, PUT, values[i % len(values)])
                 for i, row in enumerate(rows)]
        _check(_payloads(_records(mixed, cut)))
        if len(rows) > 1:
            assert log_rows(_payloads(_records(mixed, cut))) is None  # the cells decide, as before


def test_too_many_qualifiers_or_too_sparse_rows_are_left_to_the_cells(kernels):
    wide = [(b"r%03d" % (i // 2), b"cf", b"q%03d" % i, 1, PUT, b"v") for i in range(2 * MAX_DENSE_QUALIFIERS + 2)]
    sparse = [(b"r%03d" % i, b"cf", b"q%03d" % i, 1, PUT, b"v") for i in range(MAX_FILL * 20)]
    for cells in (wide, sparse):
        payloads = _payloads([cells])
        assert log_rows(payloads) is None
        _check(payloads)


def _damaged(payload: bytes, how: str, at: int) -> bytes:
    n = PAYLOAD_HEADER.unpack_from(payload, 0)[1]
    raw = bytearray(payload)
    if how == "count":
        struct.pack_into("<I", raw, 8, n + 1 + at % 5)
    elif how == "length":
        pos = PAYLOAD_HEADER.size + 8 * n + 4 * (at % (4 * n))
        struct.pack_into("<I", raw, pos, struct.unpack_from("<I", raw, pos)[0] + 1 + at % 3)
    elif how == "type":
        raw[PAYLOAD_HEADER.size + 24 * n + at % n] = 99
    elif how == "cut":
        del raw[max(PAYLOAD_HEADER.size, len(raw) - 1 - at % 40):]
    return bytes(raw)


@settings(max_examples=120, deadline=None)
@given(log=_logs.filter(bool), how=st.sampled_from(["count", "length", "type", "cut"]), which=st.integers(0, 3),
       at=st.integers(0, 1000))
def test_damaged_payloads_get_the_references_error(kernels, log, how, which, at):
    cells = sorted({(r, q): (r, b"cf", q, t, PUT, v) for r, q, t, v in log}.values())
    payloads = _payloads([cells[i:i + 5] for i in range(0, len(cells), 5)])
    which %= len(payloads)
    payloads[which] = _damaged(payloads[which], how, at)
    try:
        _reference(payloads)
    except StorageError as error:
        assert log_rows(payloads) is None
        with pytest.raises(type(error)) as info:
            SortedCells.from_payloads(payloads, "WAL")
        assert str(info.value) == str(error) and "\n" not in str(error)
        return
    _check(payloads)  # a cut inside values that still adds up: read alike


@settings(max_examples=60, deadline=None)
@given(log=_logs.filter(bool), cut=st.integers(0, 1 << 20), flip=st.one_of(st.none(), st.integers(0, 1 << 20)),
       zeros=st.integers(0, 64))
def test_torn_and_damaged_wal_files_read_alike_both_ways(kernels, tmp_path_factory, log, cut, flip, zeros):
    cells = sorted({(r, q): (r, b"cf", q, t, PUT, v) for r, q, t, v in log}.values())
    fs = open_filesystem(str(tmp_path_factory.mktemp("wal")))
    with WalWriter(fs, "log.wal", sync="none") as writer:
        for i in range(0, len(cells), 6):
            writer.append(i + 1, cells[i:i + 6])
    full = fs.read_bytes("log.wal")
    data = bytearray(full[: cut % (len(full) + 1)]) + bytes(zeros)  # torn, and a crash's zero-filled page
    if flip is not None and data:
        data[flip % len(data)] ^= 0x10
    fs.write_bytes("log.wal", bytes(data))

    def read(decode):
        try:
            return decode([r.cells for r in WalReader(fs, "log.wal", decode="payload")])
        except StorageError as error:
            return f"{type(error).__name__}: {error}"

    reference = read(_reference)
    got = read(lambda payloads: SortedCells.from_payloads(payloads, "WAL"))
    if isinstance(reference, str):
        assert got == reference and "\n" not in reference  # the same one-line error
        return
    table, run = reference
    if table.num_rows:
        _same_run(got.family(b"cf").row_run(), run)
    assert got.table.equals(table)


def test_bad_row_arguments_get_a_one_line_error():
    if BUILT is None:
        assert native.NATIVE is None and log_rows(_payloads([[(b"r", b"cf", b"q", 1, PUT, b"v")]])) is None
        return
    payloads = _payloads([[(b"r", b"cf", b"q", 1, PUT, b"v")]])
    for args, message in [((tuple(payloads), 255, 2, pa.allocate_buffer), "payloads must be a list"),
                          ((payloads, 0, 2, pa.allocate_buffer), "max_qualifiers must be 1-255"),
                          ((payloads, 255, 2, bytes), "allocate must return a writable")]:
        with pytest.raises(ValueError, match=message) as info:
            BUILT.wal_rows(*args)
        assert "\n" not in str(info.value)
