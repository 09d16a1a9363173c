"""Writes the golden store files under tests/golden/storefile/ with the code of
the checkout it runs in, plus the expected cells of each as JSON.

Run once per format version, from the repository root, with the writer of that
version (``PYTHONPATH=$PWD python3 tests/golden/make_golden.py v1``): the
engine's writer for versions 2 and 3 (``format_version=``), :mod:`storefile_v1`
(beside this script) for version 1, which the engine no longer writes.  Version
3 also gets files written by ``append_rows`` (``ROW_SPECS``), and ``v3-narrow``
writes the files of the narrow value-chunk encodings (``NARROW_SPECS``) alone, ``v3-frame``
those of the ``FRAME`` integer chunks (``FRAME_SPECS``), ``v3-keys`` those of the ``KEYS_DELTA``
key chunks (``KEYS_SPECS``).  The files are
committed and never regenerated, so a reader change that breaks reading them
fails ``tests/storage/test_storefile_golden.py``.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa

from storage.cells import Cell, CellType
from storage.vfs.fs import FileSystem
from storage.storefile import StoreFileWriter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from storefile_v1 import V1StoreFileWriter  # noqa: E402  (beside this script)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "storefile")
FAMILY = b"cf"


def dense_cells() -> list[Cell]:
    """Rows with the same two qualifiers, one put each: the shape v2 stores by column."""
    out = []
    for r in range(300):
        row = b"row-%05d" % r
        out.append(Cell(row, FAMILY, b"a", 1000 + r % 3, int(CellType.PUT), b"%d" % (r * 7)))
        out.append(Cell(row, FAMILY, b"b", 2000, int(CellType.PUT), b"v" * (r % 40)))
    return out


def mixed_cells() -> list[Cell]:
    """Versions, delete markers, missing qualifiers and a binary row key."""
    out = []
    for r in range(120):
        row = bytes([r % 256]) + b"\x00k%03d" % r
        if r % 5 == 0:
            out.append(Cell(row, FAMILY, b"", 50, int(CellType.DELETE_FAMILY), b""))
        for ts in (30, 20)[: 1 + r % 2]:
            out.append(Cell(row, FAMILY, b"q1", ts, int(CellType.PUT), b"x%d-%d" % (r, ts)))
        if r % 3 == 0:
            out.append(Cell(row, FAMILY, b"q2", 10, int(CellType.DELETE_COLUMN), b""))
        if r % 4 != 1:
            out.append(Cell(row, FAMILY, b"q3", 5, int(CellType.PUT), bytes(range(r % 17))))
    out.sort(key=lambda c: (c[0], c[1], c[2], -c[3], -c[4]))
    return out


SPECS = {
    "dense_plain": (dense_cells, {"block_size": 1024, "compression": None, "bloom": True}),
    "dense_zstd": (dense_cells, {"block_size": 2048, "compression": "zstd", "bloom": False}),
    "mixed_plain": (mixed_cells, {"block_size": 512, "compression": None, "bloom": True}),
    "mixed_lz4": (mixed_cells, {"block_size": 700, "compression": "lz4", "bloom": True}),
}


def wide_rows() -> tuple[list[bytes], list[bytes], list[list], list[list]]:
    """Rows written column by column (version 3: one chunk per column): an 8-byte
    fixed-width column, a 4-byte one with absent values, text of mixed widths and a
    column only some rows have.  ``(rows, qualifiers, values, timestamps)``, None where
    a row lacks the qualifier."""
    rows = [b"w%05d" % r for r in range(400)]
    quals = [b"d", b"n", b"s", b"z"]
    values = [
        [(r * 7919 - 1_000_000).to_bytes(8, "big", signed=True) for r in range(400)],
        [None if r % 6 == 0 else (r * 31 % 1000).to_bytes(4, "big") for r in range(400)],
        [b"text-%d" % (r * r) for r in range(400)],
        [b"zz" * (r % 9) if r % 4 == 0 else None for r in range(400)],
    ]
    stamps = [[None if v is None else 3000 + (r // 100) for r, v in enumerate(col)] for col in values]
    return rows, quals, values, stamps


def rows_cells() -> list[Cell]:
    """The cells of :func:`wide_rows`, in cell order."""
    rows, quals, values, stamps = wide_rows()
    return [Cell(row, FAMILY, q, stamps[j][i], int(CellType.PUT), values[j][i])
            for i, row in enumerate(rows) for j, q in enumerate(quals) if values[j][i] is not None]


ROW_SPECS = {
    # version 3 only: written by append_rows, the bulk load's and compaction's path
    "rows_plain": {"block_size": 4096, "compression": None, "bloom": True},
    "rows_zstd": {"block_size": 8192, "compression": "zstd", "bloom": True},
}


def narrow_rows() -> tuple[list[bytes], list[bytes], list[list], list[list]]:
    """Rows whose columns the version 3 writer stores in its narrow encodings: few
    distinct strings of mixed widths and few distinct 8-byte values (``DICT``, one
    with absent values), text of mixed widths under 256 bytes (``LENGTHS``), and
    longer text (``LENGTHS`` with 2-byte lengths).  As :func:`wide_rows`."""
    modes = [b"AIR", b"MAIL", b"SHIP", b"TRUCK", b"RAIL", b"FOB", b"REG AIR"]
    n = 1100
    mix = [(r * 2654435761 >> 7) % 10007 for r in range(n)]  # a fixed scramble, so zstd finds no period
    rows = [b"n%05d" % r for r in range(n)]
    quals = [b"c", b"d", b"k", b"m", b"t", b"x"]
    values = [
        [b"note %d" % (m % 1000) for m in mix],  # mixed widths, many distinct: LENGTHS
        [None if r % 7 == 3 else (9000 + m % 40).to_bytes(8, "big") for r, m in enumerate(mix)],  # DICT, absent
        [(m % 260 * 104729).to_bytes(6, "big") for m in mix],  # 260 distinct of one width in ~550 rows: FIXED (a dictionary would not pay)
        [modes[m % len(modes)] for m in mix],  # few distinct of mixed widths: DICT
        [b"t" * (r % 23) + b"%d" % r if r % 3 else None for r in range(n)],  # LENGTHS, absent
        [b"%05d" % m * (60 if r % 50 == 0 else 1) for r, m in enumerate(mix)],  # a few long ones: 2-byte lengths
    ]
    stamps = [[None if v is None else 5000 for v in col] for col in values]
    return rows, quals, values, stamps


def narrow_cells() -> list[Cell]:
    """The cells of :func:`narrow_rows`, in cell order."""
    rows, quals, values, stamps = narrow_rows()
    return [Cell(row, FAMILY, q, stamps[j][i], int(CellType.PUT), values[j][i])
            for i, row in enumerate(rows) for j, q in enumerate(quals) if values[j][i] is not None]


NARROW_SPECS = {
    # version 3 with the DICT and LENGTHS value chunks: written by append_rows
    "narrow_zstd": {"row_group_size": 130_000, "compression": "zstd", "bloom": True},
    "narrow_plain": {"row_group_size": 130_000, "compression": None, "bloom": False},
}


def frame_rows() -> tuple[list[bytes], list[bytes], list[list], list[list]]:
    """Rows whose integer columns the version 3 writer stores as ``FRAME`` chunks: dates in
    milliseconds before and after 1970 (a divisor of 86,400,000, 2-byte codes), 4-byte ints
    with absent rows (1-byte codes and a validity bitmap), sign-flipped 8-byte longs
    around zero (an unsigned frame, 2-byte codes), 2-byte shorts, and 8-byte longs of a 24-bit
    range (4-byte codes).  As :func:`wide_rows`."""
    n = 1100
    mix = [(r * 2654435761 >> 7) % 10007 for r in range(n)]  # a fixed scramble, so zstd finds no period
    rows = [b"f%05d" % r for r in range(n)]
    quals = [b"a", b"b", b"c", b"e", b"g"]
    values = [
        [((m % 2500 - 900) * 86_400_000).to_bytes(8, "big", signed=True) for m in mix],
        [None if r % 5 == 2 else (m % 200 - 70).to_bytes(4, "big", signed=True) for r, m in enumerate(mix)],
        [((m - 5000) ^ -(1 << 63)).to_bytes(8, "big", signed=True) for m in mix],
        [(m % 97 + 30000).to_bytes(2, "big") for m in mix],
        [(m * 1000 + r).to_bytes(8, "big") for r, m in enumerate(mix)],
    ]
    stamps = [[None if v is None else 6000 for v in col] for col in values]
    return rows, quals, values, stamps


def frame_cells() -> list[Cell]:
    """The cells of :func:`frame_rows`, in cell order."""
    rows, quals, values, stamps = frame_rows()
    return [Cell(row, FAMILY, q, stamps[j][i], int(CellType.PUT), values[j][i])
            for i, row in enumerate(rows) for j, q in enumerate(quals) if values[j][i] is not None]


FRAME_SPECS = {
    # version 3 with FRAME value chunks (narrow integer codes): written by append_rows
    "frame_zstd": {"row_group_size": 40_000, "compression": "zstd", "bloom": True},
    "frame_plain": {"row_group_size": 40_000, "compression": None, "bloom": False},
}


def keys_rows() -> tuple[list[bytes], list[bytes], list[list], list[list]]:
    """Rows whose 12-byte composite keys the version 3 writer stores as a ``KEYS_DELTA`` key
    chunk: a sign-flipped 8-byte order key rising by small steps (1-byte deltas) and a 4-byte
    line number from 1 (1-byte codes from a base), as TPC-H's lineitem; then order keys rising
    by steps past 2**16 (4-byte deltas), then by steps of up to 2**52 (the writer cuts those
    keys into more than two parts: 5-byte deltas of 4 bytes, then codes from bases).  As
    :func:`wide_rows`."""
    rows = []
    order = 1
    for r in range(620):
        lines = 1 + (r * 2654435761 >> 9) % 7
        for line in range(1, lines + 1):
            rows.append(((order ^ (1 << 63)).to_bytes(8, "big") + (line ^ (1 << 31)).to_bytes(4, "big")))
        if r < 400:
            order += 1 + (r * 40503 >> 3) % 6
        elif r < 520:
            order += 70_001 + r
        else:
            order += 1 + (r * 0x9E3779B97F4A7C15) % (1 << 52)
    quals = [b"p", b"q"]
    values = [
        [b"%d" % (i * 7 % 1000) for i in range(len(rows))],
        [None if i % 9 == 4 else (i % 50).to_bytes(4, "big") for i in range(len(rows))],
    ]
    stamps = [[None if v is None else 7000 for v in col] for col in values]
    return rows, quals, values, stamps


def keys_cells() -> list[Cell]:
    """The cells of :func:`keys_rows`, in cell order."""
    rows, quals, values, stamps = keys_rows()
    return [Cell(row, FAMILY, q, stamps[j][i], int(CellType.PUT), values[j][i])
            for i, row in enumerate(rows) for j, q in enumerate(quals) if values[j][i] is not None]


KEYS_SPECS = {
    # version 3 with KEYS_DELTA key chunks (keys cut into parts, each as deltas or codes): append_rows
    "keys_zstd": {"row_group_size": 30_000, "compression": "zstd", "bloom": True},
    "keys_plain": {"row_group_size": 30_000, "compression": None, "bloom": False},
}


def writer_of(version: str):
    """The writer of format ``version`` (``"v1"``, ``"v2"``, ``"v3"``)."""
    if version == "v1":
        return V1StoreFileWriter
    return lambda *a, **kw: StoreFileWriter(*a, format_version=int(version[1:]), **kw)


def write_rows(fs, name: str, kw: dict, made: tuple, cells: list[Cell]) -> None:
    """One version 3 file ``<name>.rsf`` of rows ``made`` (rows, qualifiers, values, timestamps)
    written by ``append_rows`` with writer options ``kw``, and its expected ``cells`` as JSON."""
    rows, quals, values, stamps = made
    w = writer_of("v3")(fs, f"{name}.rsf", family=FAMILY, **kw)
    w.append_rows(pa.array(rows, pa.binary()), quals, [pa.array(v, pa.binary()) for v in values],
                  [pa.array(t, pa.int64()) for t in stamps])
    w.finish(max_seq_id=42)
    _expect(name, cells)


def main(version: str) -> None:
    fs = FileSystem(HERE)
    if version == "v3-keys":  # added after the FRAME files, which stay as written
        for name, kw in KEYS_SPECS.items():
            write_rows(fs, f"v3_{name}", kw, keys_rows(), keys_cells())
        return
    if version == "v3-frame":  # added after the narrow files, which stay as written
        for name, kw in FRAME_SPECS.items():
            write_rows(fs, f"v3_{name}", kw, frame_rows(), frame_cells())
        return
    if version == "v3-narrow":  # added after the other version 3 files, which stay as written
        for name, kw in NARROW_SPECS.items():
            write_rows(fs, f"v3_{name}", kw, narrow_rows(), narrow_cells())
        return
    for name, (make, kw) in SPECS.items():
        cells = make()
        path = f"{version}_{name}.rsf"
        w = writer_of(version)(fs, path, family=FAMILY, **kw)
        for c in cells:
            w.append(c)
        w.finish(max_seq_id=42)
        _expect(f"{version}_{name}", cells)
    if version != "v3":
        return
    for name, kw in ROW_SPECS.items():
        write_rows(fs, f"{version}_{name}", kw, wide_rows(), rows_cells())


def _expect(name: str, cells: list[Cell]) -> None:
    with open(os.path.join(HERE, f"{name}.json"), "w") as f:
        json.dump([[c[0].hex(), c[1].hex(), c[2].hex(), c[3], c[4], c[5].hex()] for c in cells], f)


if __name__ == "__main__":
    main(sys.argv[1])
