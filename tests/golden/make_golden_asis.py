"""Writes the golden store files of version 3's value chunks stored as is, beside the others
under tests/golden/storefile/ (``v3_asis_*``), plus the expected cells of each as JSON.

Run once, from the repository root (``PYTHONPATH=$PWD python3 tests/golden/make_golden_asis.py``).
Added after the files of ``make_golden.py``, which stay as written; these are committed and never
regenerated either, so a reader change that breaks reading them fails
``tests/storage/test_storefile_golden.py``.
"""

from __future__ import annotations

import os
import sys

from storage.cells import Cell, CellType

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import FAMILY, HERE, _expect, write_rows, writer_of  # noqa: E402  (beside this script)


def _noise(seed: int, n: int) -> bytes:
    """``n`` bytes no codec shrinks (a fixed 64-bit mixer, so the files do not depend on a library)."""
    out = bytearray()
    x = seed
    while len(out) < n:
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out += (x >> 11).to_bytes(8, "little")
    return bytes(out[:n])


def asis_rows() -> tuple[list[bytes], list[bytes], list[list], list[list]]:
    """Rows whose value chunks the writer stores as is where the codec does not halve them:
    8-byte hashes (FIXED, incompressible), text of mixed widths from noise (LENGTHS or IPC,
    incompressible), dates in days over a wide range (FRAME codes, little to gain), with
    absent rows; and a column of few repeated values (DICT), which stays compressed.
    As ``make_golden.wide_rows``: (rows, qualifiers, values per qualifier, timestamps)."""
    n = 900
    mix = [(r * 2654435761 >> 7) % 10007 for r in range(n)]
    rows = [b"s%05d" % r for r in range(n)]
    quals = [b"d", b"h", b"m", b"t"]
    values = [
        [None if r % 11 == 3 else ((m * 7919) % 60000 * 86_400_000).to_bytes(8, "big") for r, m in enumerate(mix)],
        [_noise(r, 8) for r in range(n)],
        [(b"AIR", b"MAIL", b"SHIP", b"TRUCK")[m % 4] for m in mix],
        [_noise(10_000 + r, 3 + m % 29) for r, m in enumerate(mix)],
    ]
    stamps = [[None if v is None else 8000 for v in col] for col in values]
    return rows, quals, values, stamps


def asis_cells() -> list[Cell]:
    """The cells of :func:`asis_rows`, in cell order."""
    rows, quals, values, stamps = asis_rows()
    return [Cell(row, FAMILY, q, stamps[j][i], int(CellType.PUT), values[j][i])
            for i, row in enumerate(rows) for j, q in enumerate(quals) if values[j][i] is not None]


def asis_versions() -> list[Cell]:
    """Cells of two versions per row with incompressible values: blocks of cells (CELLS), whose
    value chunk an lz4 file stores as is."""
    out = []
    for r in range(200):
        row = b"v%04d" % r
        for ts in (20, 10):
            out.append(Cell(row, FAMILY, b"q", ts, int(CellType.PUT), _noise(r * 2 + ts, 20 + r % 13)))
    return out


ASIS_SPECS = {
    # version 3, zstd and lz4, value chunks the codec does not halve stored as is: append_rows
    "asis_zstd": {"row_group_size": 40_000, "compression": "zstd", "bloom": True},
    "asis_lz4": {"row_group_size": 40_000, "compression": "lz4", "bloom": False},
}


def main() -> None:
    from storage.vfs.fs import FileSystem

    fs = FileSystem(HERE)
    for name, kw in ASIS_SPECS.items():
        write_rows(fs, f"v3_{name}", kw, asis_rows(), asis_cells())
    cells = asis_versions()
    w = writer_of("v3")(fs, "v3_asis_cells_lz4.rsf", family=FAMILY, compression="lz4", bloom=True)
    for c in cells:
        w.append(c)
    w.finish(max_seq_id=42)
    _expect("v3_asis_cells_lz4", cells)


if __name__ == "__main__":
    main()
