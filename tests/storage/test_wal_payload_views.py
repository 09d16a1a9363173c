"""A pinned region's WAL payloads read as views of the file, and let go after the decode.

:class:`storage.wal.reader.WalReader` with ``decode="payload"`` hands each
checked payload over as a ``pyarrow.Buffer`` that is a view of the file's
memory map (no copy) where the file is mapped, and a copy where it is not
(``REGIONSCAN_MMAP=0``).  Either way the records, their checksums and a
crash's torn or zero-filled tail read as they did.  What a read makes of the
payloads (:meth:`storage.memstore.sorted_cells.SortedCells.from_payloads`)
keeps no reference to them: a log read straight to its rows rebuilds its
cells from the rows when asked, so no view of the map outlives the decode
(nor does a kept replay hold the log's bytes beside its rows).
"""

from __future__ import annotations

import gc
import weakref

import pyarrow as pa
import pytest

from storage.cells import CellType
from storage.errors import CorruptionError
from storage.memstore.row_runs import log_rows
from storage.memstore.sorted_cells import SortedCells
from storage.vfs.fs import MMAP_ENV, open_filesystem
from storage.wal.arrow_decode import payloads_to_table_py
from storage.wal.format import FILE_HEADER_SIZE, RECORD_HEADER_SIZE
from storage.wal.reader import WalReader
from storage.wal.writer import WalWriter

PUT, DELETE = int(CellType.PUT), int(CellType.DELETE)


def _rows(lo: int, hi: int) -> list[tuple]:
    """Puts of rows ``lo`` .. ``hi - 1``, two columns each, in cell order."""
    return [(b"row%05d" % i, b"cf", q, 1000 + i, PUT, b"v%d-" % i + q * 20) for i in range(lo, hi)
            for q in (b"n", b"s")]


@pytest.fixture(params=["mapped", "read"])
def fs(request, tmp_path, monkeypatch):
    """A local filesystem whose files are memory-mapped for reading, or read into memory."""
    monkeypatch.setenv(MMAP_ENV, "1" if request.param == "mapped" else "0")
    return open_filesystem(str(tmp_path))


def _write(fs, records: list[list[tuple]], name: str = "log.wal") -> None:
    with WalWriter(fs, name, sync="none") as writer:
        for seq, cells in enumerate(records, 1):
            writer.append(seq, cells)


def _payloads(fs, name: str = "log.wal") -> list:
    return [r.cells for r in WalReader(fs, name, decode="payload")]


def test_payloads_are_the_records_bytes(fs):
    records = [_rows(0, 40), _rows(40, 41), [], _rows(41, 300)]
    _write(fs, records)
    data = fs.read_bytes("log.wal")
    payloads = _payloads(fs)
    assert len(payloads) == len(records)
    pos = FILE_HEADER_SIZE
    for payload in payloads:
        assert isinstance(payload, pa.Buffer)
        assert payload == data[pos + RECORD_HEADER_SIZE: pos + RECORD_HEADER_SIZE + len(payload)]
        pos += RECORD_HEADER_SIZE + len(payload)
    assert pos == len(data)
    cells = [c for r in records for c in r]
    assert [tuple(c.values()) for c in payloads_to_table_py(payloads).to_pylist()] == cells


def test_a_zeroed_last_payload_is_a_torn_tail_and_a_flipped_one_is_damage(fs):
    _write(fs, [_rows(0, 30), _rows(30, 60)])
    data = bytearray(fs.read_bytes("log.wal"))
    first = len(_payloads(fs)[0])
    last_body = FILE_HEADER_SIZE + 2 * RECORD_HEADER_SIZE + first
    zeroed = bytes(data[:last_body]) + bytes(len(data) - last_body)  # the page a crash left unwritten
    fs.write_bytes("log.wal", zeroed)
    reader = WalReader(fs, "log.wal", decode="payload")
    assert [r.seq_id for r in reader] == [1]
    assert reader.valid_length == last_body - RECORD_HEADER_SIZE and reader.torn_tail_bytes > 0
    data[last_body + 5] ^= 0x20  # a complete record whose payload is not what was written
    fs.write_bytes("log.wal", bytes(data))
    with pytest.raises(CorruptionError, match="checksum mismatch") as info:
        _payloads(fs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kind", ["rows", "markers"])
def test_the_cells_keep_no_payload(fs, kind):
    cells = _rows(0, 500)
    if kind == "markers":  # a table being deleted from: decoded into a cell table, not rows
        cells = [(r, f, q, t, DELETE if i % 3 == 0 else k, b"" if i % 3 == 0 else v)
                 for i, (r, f, q, t, k, v) in enumerate(cells)]
    _write(fs, [cells[:300], cells[300:]])
    payloads = _payloads(fs)
    expected = payloads_to_table_py(payloads)
    refs = [weakref.ref(p) for p in payloads]
    got = SortedCells.from_payloads(payloads, "WAL")
    del payloads
    gc.collect()
    assert all(ref() is None for ref in refs)  # no view of the file outlives the decode
    assert (got.family(b"cf").row_run() is not None) == (kind == "rows")
    assert got.table.equals(expected)  # rebuilt from the rows, or decoded before: the same cells


def test_a_log_read_as_rows_is_charged_its_rows_without_decoding_its_cells(fs):
    _write(fs, [_rows(0, 200), _rows(200, 400)])
    payloads = _payloads(fs)
    rows = SortedCells.from_payloads(payloads, "WAL")
    if log_rows(payloads) is None:  # no compiled kernels: the log was decoded into cells, charged by them
        assert rows.kept_bytes() == 2 * rows.table.nbytes
        return
    run = rows.row_run()
    assert rows.kept_bytes() == 2 * run.dense.nbytes
    assert rows._table is None  # charging did not decode the cells
    assert rows.table.equals(payloads_to_table_py(payloads))
    assert rows.kept_bytes() == 2 * run.dense.nbytes  # the charge does not change once they are
