"""The writer ends blocks at row boundaries, however the cells are appended,
and records what readers need to know to skip resolution."""

from __future__ import annotations

import random
import struct

from storage.cells import CellType, cells_to_batch
from storage.vfs.fs import FileSystem
from storage.storefile import StoreFileReader, StoreFileWriter


def _rows_spanning_blocks(reader: StoreFileReader) -> int:
    spans, previous = 0, None
    for i in range(reader.block_count):
        rows = reader.read_block(i).column(0)
        if previous is not None and rows[0].as_py() == previous:
            spans += 1
        previous = rows[-1].as_py()
    return spans


def test_blocks_end_at_row_boundaries_for_any_append_sizes(tmp_path):
    fs = FileSystem(str(tmp_path))
    cells = []
    for i in range(4000):
        key = struct.pack(">I", i)
        for q in range(1 + i % 3):
            cells.append((key, b"cf", b"q%d" % q, 5, CellType.PUT, b"x" * (20 + i % 50)))
    batch = cells_to_batch(cells)
    rng = random.Random(7)
    for trial in range(5):
        writer = StoreFileWriter(fs, f"f{trial}.sf", family=b"cf", block_size=2048)
        offset = 0
        while offset < batch.num_rows:
            size = rng.randint(1, 700)
            writer.append_batch(batch.slice(offset, size))
            offset += size
        info = writer.finish()
        reader = StoreFileReader(fs, f"f{trial}.sf")
        assert reader.block_count > 20
        assert _rows_spanning_blocks(reader) == 0
        assert info.cell_count == len(cells)
        assert not info.needs_resolution
        reader.close()


def test_a_row_wider_than_the_limit_may_span_blocks(tmp_path):
    fs = FileSystem(str(tmp_path))
    wide = [(b"wide", b"cf", b"q%05d" % i, 1, CellType.PUT, b"v" * 100) for i in range(500)]
    writer = StoreFileWriter(fs, "w.sf", family=b"cf", block_size=1024)
    writer.append_batch(cells_to_batch(wide))
    writer.finish()
    reader = StoreFileReader(fs, "w.sf")
    assert reader.block_count > 1 and _rows_spanning_blocks(reader) == reader.block_count - 1


def test_file_info_counts_markers_and_repeated_columns(tmp_path):
    fs = FileSystem(str(tmp_path))
    cells = [
        (b"a", b"cf", b"q", 9, CellType.PUT, b"new"),
        (b"a", b"cf", b"q", 5, CellType.PUT, b"old"),
        (b"b", b"cf", b"q", 7, CellType.DELETE_COLUMN, b""),
        (b"b", b"cf", b"r", 7, CellType.PUT, b"x"),
    ]
    writer = StoreFileWriter(fs, "m.sf", family=b"cf")
    writer.append_batch(cells_to_batch(cells))
    info = writer.finish()
    assert (info.delete_count, info.repeated_columns) == (1, 1)
    assert info.needs_resolution
    assert StoreFileReader(fs, "m.sf").info == info.with_file_size(info.file_size)


def test_row_cells_point_reads_match_a_model(tmp_path):
    fs = FileSystem(str(tmp_path))
    rng = random.Random(3)
    cells = []
    for i in range(0, 3000, 3):
        key = b"k%06d" % i
        width = 200 if i == 1500 else 1 + rng.randrange(3)  # one row wider than a block
        for q in range(width):
            cells.append((key, b"cf", b"q%03d" % q, 9, CellType.PUT, b"v%d" % i))
    writer = StoreFileWriter(fs, "g.sf", family=b"cf", block_size=1024)
    writer.append_batch(cells_to_batch(cells))
    writer.finish()
    reader = StoreFileReader(fs, "g.sf")
    by_row: dict[bytes, list] = {}
    for c in cells:
        by_row.setdefault(c[0], []).append(c)
    for i in list(range(0, 3000, 7)) + [1500]:
        key = b"k%06d" % i
        assert [tuple(c) for c in reader.row_cells(key)] == by_row.get(key, [])
    assert reader.row_cells(b"zzz") == [] and reader.row_cells(b"") == []
