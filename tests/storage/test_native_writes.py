"""The write path's compiled kernel and its Python steps, against their references.

``wal_record`` (storage/_native/wal.c) builds a WAL record from a list of
cell tuples in one call; :func:`storage.wal.format.encode_record_py` is its
reference.  ``cell_columns`` (storage/_native/cells.c) builds a flush's cell
table from them; :func:`storage.memstore.segment.cells_to_table_py` is its.  Hypothesis holds the two to the same bytes, and input the kernel
does not take as it is (a field to convert, a value to refuse) goes to the
reference, so both paths answer and refuse alike.  The kernel tests use the
built module itself, so they also run when ``REGIONSCAN_NATIVE=0`` turns it
off for the engine.  The memstore's sparse bulk insert and the flush written
in parts are checked against a plain sorted model and a flush written whole.
"""

from __future__ import annotations

import importlib
import random
import threading

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedDict

from storage import native
from storage.cells import CELL_SCHEMA, CellType
from storage.errors import InvalidArgument
from storage.memstore.bulk_insert import insert_new_sorted
from storage.memstore.segment import cells_to_table, cells_to_table_py
from storage.memstore.write_buffer import MemStore
from storage.storefile import StoreFileReader, StoreFileWriter
from storage.storefile.format import BlockLayout
from storage.vfs.fs import open_filesystem
from storage.wal import format as wal_format
from storage.wal.format import MAX_RECORD_BYTES, decode_payload, encode_record, encode_record_py
from storage.wal.format import RECORD_HEADER_SIZE

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the reference exists
    BUILT = None

TYPES = [int(t) for t in CellType]


def _kernel(seq_id: int, cells: list, limit: int = MAX_RECORD_BYTES):
    """The compiled record builder as the engine calls it (None: the reference decides)."""
    return BUILT.wal_record(seq_id, cells, wal_format._VALID_TYPE_MASK, limit, wal_format.crc32)


_fields = st.binary(max_size=40)
_cells = st.lists(
    st.tuples(_fields, st.binary(min_size=1, max_size=8), _fields,
              st.integers(-(1 << 63), (1 << 63) - 1), st.sampled_from(TYPES), st.binary(max_size=300)),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(seq_id=st.integers(0, (1 << 63) - 1), cells=_cells)
def test_wal_record_matches_the_reference_byte_for_byte(seq_id, cells):
    expected = encode_record_py(seq_id, cells)
    assert encode_record(seq_id, cells) == expected
    if BUILT is not None:
        assert _kernel(seq_id, cells) == expected
    record = decode_payload(expected[RECORD_HEADER_SIZE:], "mem", 0)
    assert record.seq_id == seq_id and [tuple(c) for c in record.cells] == cells


def test_a_large_record_copied_without_the_lock_is_the_same_from_many_threads():
    # over 256 KiB: the kernel copies with the GIL released, holding every cell meanwhile
    rng = random.Random(5)
    cells = [(b"row%06d" % i, b"info", b"0", 1_700_000_000_000 + i, 4, rng.randbytes(1000)) for i in range(2000)]
    expected = encode_record_py(11, cells)
    results, errors = [], []

    def build() -> None:
        try:
            for _ in range(5):
                results.append(encode_record(11, cells))
        except Exception as exc:  # noqa: BLE001 - handed to the main thread's assert
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 20 and all(r == expected for r in results)


@pytest.mark.parametrize("cells, message", [
    ([(b"r", b"f", b"q", 1, 99, b"")], "cell type must be one of"),
    ([(b"r", b"f", b"q", 1 << 64, 4, b"")], "cell timestamps must be ints in int64 range"),
    ([(b"r", b"f", "q", 1, 4, b"")], "must be bytes"),
    ([(b"r", b"f", b"q", 1, 4)], "6-field tuples"),
    ([(b"r", b"f", b"q", 1, 4, b""), (b"r", b"f", b"q", 1, 4)], "6-field tuples"),
])
def test_input_the_reference_refuses_is_refused_alike(cells, message):
    if BUILT is not None:
        assert _kernel(3, cells) is None  # the kernel leaves it to the reference
    for encode in (encode_record, encode_record_py):
        with pytest.raises(InvalidArgument, match=message) as info:
            encode(3, cells)
        assert "\n" not in str(info.value)


def test_fields_the_reference_converts_give_its_bytes():
    # a bytearray, a memoryview and a NumPy-free IntEnum type: the reference's conversions
    cells = [(b"r", b"f", bytearray(b"q"), 5, CellType.PUT, memoryview(b"value"))]
    plain = [(b"r", b"f", b"q", 5, 4, b"value")]
    assert encode_record(9, cells) == encode_record_py(9, plain) == encode_record(9, plain)


def test_a_record_over_the_limit_goes_to_the_reference():
    cells = [(b"r", b"f", b"q", 1, 4, b"x" * 100)]
    if BUILT is not None:
        assert _kernel(1, cells, limit=50) is None
        assert _kernel(1, cells, limit=1000) == encode_record_py(1, cells)


@pytest.mark.parametrize("args, message", [
    ((1, ((b"r", b"f", b"q", 1, 4, b""),), bytes(256), 10, len), "cells must be a list"),
    ((1, [], b"\x01", 10, len), "valid_types must be 256 bytes"),
    ((-1, [], bytes(256), 10, len), "seq_id must not be negative"),
    ((1, [], bytes(256), 10, None), "crc32 must be callable"),
])
def test_bad_kernel_arguments_get_a_one_line_error(args, message):
    if BUILT is None:  # no compiler at install: the engine runs the reference
        assert native.NATIVE is None
        return
    with pytest.raises(ValueError, match=message) as info:
        BUILT.wal_record(*args)
    assert "\n" not in str(info.value)


def test_the_engine_uses_the_kernel_when_it_is_on():
    assert wal_format._NATIVE is native.NATIVE


def _model_insert(seed: int, batches: int, per_batch: int, space: int) -> None:
    rng = random.Random(seed)
    mapping, model = SortedDict(), {}
    for b in range(batches):
        items = {(b"%08d" % rng.randrange(space), b"f", b"q", -b, -4): b for _ in range(per_batch)}
        new_keys = sorted(k for k in items if k not in mapping)
        dict.update(mapping, items)  # as a batch write does: the dict now, the sorted key list merged in
        insert_new_sorted(mapping._list, new_keys)
        model.update(items)
        assert len(mapping) == len(model)
    assert list(mapping.keys()) == sorted(model)
    assert list(mapping.values()) == [model[k] for k in sorted(model)]
    keys = mapping._list
    assert keys._maxes == [sub[-1] for sub in keys._lists]
    assert all(len(sub) <= 2 * keys._load for sub in keys._lists)
    probe = sorted(model)[len(model) // 2]
    assert mapping.index(probe) == len(model) // 2 and mapping.peekitem(len(model) // 2)[0] == probe


@pytest.mark.parametrize("seed, batches, per_batch, space", [
    (1, 40, 300, 10**6),   # a few keys into each long sublist: one bisect each
    (2, 10, 5000, 20000),  # many keys into each sublist, with repeats: the merge by sort
    (3, 60, 50, 100),      # a small key space: most keys written again
])
def test_bulk_inserts_keep_the_map_sorted(seed, batches, per_batch, space):
    _model_insert(seed, batches, per_batch, space)


def _flush_both_ways(tmp_path, memstore: MemStore, compression, tag: str):
    """The snapshot written whole and in parts of 777 cells: the two readers."""
    fs = open_filesystem(str(tmp_path))
    whole = StoreFileWriter(fs, f"whole-{tag}", family=b"info", compression=compression, block_size=4096)
    whole.append_batch(memstore.snapshot_batch())
    whole.finish(max_seq_id=39)
    parts = StoreFileWriter(fs, f"parts-{tag}", family=b"info", compression=compression, block_size=4096)
    count = 0
    for part in memstore.snapshot_batches(cells_per_batch=777):
        assert part.num_rows <= 777
        count += part.num_rows
        parts.append_batch(part)
    parts.finish(max_seq_id=39)
    assert count == memstore.cell_count > 777 * 5
    return StoreFileReader(fs, f"whole-{tag}"), StoreFileReader(fs, f"parts-{tag}")


def _memstore(rng: random.Random, columns: int, versions: int) -> MemStore:
    memstore = MemStore()
    for seq in range(1, 40):
        cells = []
        for _ in range(200):
            row = b"row%05d" % rng.randrange(3000)
            for q in (b"a", b"b", b"c")[: rng.randrange(1, columns + 1)]:
                cells.append((row, b"info", q, 1000 + rng.randrange(versions), 4, rng.randbytes(rng.randrange(300))))
        memstore.add_many(cells, trusted=True, seq=seq)
    memstore.snapshot()
    return memstore


@pytest.mark.parametrize("compression, columns, versions", [("auto", 3, 3), (None, 3, 3), ("auto", 2, 1)])
def test_a_flush_written_in_parts_has_the_blocks_of_the_file_written_whole(tmp_path, compression, columns, versions):
    # rows of several columns and versions: parts end inside rows and between versions;
    # one version per column: dense blocks.  A block that spans two parts is encoded from
    # their concatenation instead of a slice of one batch, so its Arrow IPC chunks may be a
    # few bytes shorter; its cells are the same.
    memstore = _memstore(random.Random(7), columns=columns, versions=versions)
    whole, parts = _flush_both_ways(tmp_path, memstore, compression, f"{compression}-{versions}")
    a, b = whole._index, parts._index
    assert whole.info.block_count == parts.info.block_count > 100
    assert list(a.cell_counts) == list(b.cell_counts) and list(a.row_counts) == list(b.row_counts)
    assert list(a.first_keys) == list(b.first_keys) and list(a.layouts) == list(b.layouts)
    assert (versions == 1) == (BlockLayout.DENSE in set(a.layouts))
    cells = pa.Table.from_batches(list(whole.scan_batches()), schema=CELL_SCHEMA)
    assert cells.equals(pa.Table.from_batches(list(parts.scan_batches()), schema=CELL_SCHEMA))
    assert cells.equals(memstore.snapshot_batch())


def test_a_flush_of_fixed_width_values_in_parts_is_the_same_file(tmp_path):
    # one column of fixed-width values (the write benchmark's shape): byte for byte the same file
    rng = random.Random(9)
    memstore = MemStore()
    for seq in range(1, 40):
        memstore.add_many([(b"row%05d" % rng.randrange(9000), b"info", b"0", 1000, 4, rng.randbytes(100))
                           for _ in range(200)], trusted=True, seq=seq)
    memstore.snapshot()
    _flush_both_ways(tmp_path, memstore, "auto", "fixed")
    assert (tmp_path / "parts-fixed").read_bytes() == (tmp_path / "whole-fixed").read_bytes()


@settings(max_examples=100, deadline=None)
@given(cells=_cells)
def test_cell_tables_match_the_reference(cells):
    table = cells_to_table(cells)
    table.validate(full=True)
    assert table.equals(cells_to_table_py(cells))
    if BUILT is not None and cells:
        assert BUILT.cell_columns(cells) is not None


@pytest.mark.parametrize("cells", [
    [(b"r", b"f", b"q", 1, 300, b"")],        # a type over 255: the reference refuses it
    [(b"r", b"f", b"q", 1 << 64, 4, b"")],    # a timestamp outside int64
    [(b"r", b"f", bytearray(b"q"), 1, 4, b"")],  # a bytes-like the reference converts
    [(b"r", b"f", b"q", 1, 4)],               # not a cell
])
def test_cells_the_kernel_does_not_take_go_to_the_reference(cells):
    if BUILT is not None:
        assert BUILT.cell_columns(cells) is None
    try:
        expected = cells_to_table_py(cells)
    except Exception as exc:  # noqa: BLE001 - the engine's path must raise the same
        with pytest.raises(type(exc)):
            cells_to_table(cells)
    else:
        assert cells_to_table(cells).equals(expected)


def test_cell_columns_takes_only_a_list():
    if BUILT is None:
        assert native.NATIVE is None
        return
    with pytest.raises(ValueError, match="cells must be a list") as info:
        BUILT.cell_columns(((b"r", b"f", b"q", 1, 4, b""),))
    assert "\n" not in str(info.value)
