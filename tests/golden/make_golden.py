"""Writes the golden store files under tests/golden/storefile/ with the code of
the checkout it runs in, plus the expected cells of each as JSON.

Run once per format version, from the repository root, with the writer of that
version (``PYTHONPATH=$PWD python3 tests/golden/make_golden.py v1``): the
engine's writer for the current version, :mod:`storefile_v1` (beside this
script) for version 1, which the engine no longer writes.  The files are
committed and never regenerated, so a reader change that breaks reading them
fails ``tests/storage/test_storefile_golden.py``.
"""

from __future__ import annotations

import json
import os
import sys

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


def writer_of(version: str) -> type[StoreFileWriter]:
    """The writer of format ``version`` (``"v1"``, ``"v2"``)."""
    return V1StoreFileWriter if version == "v1" else StoreFileWriter


def main(version: str) -> None:
    fs = FileSystem(HERE)
    for name, (make, kw) in SPECS.items():
        cells = make()
        path = f"{version}_{name}.rsf"
        w = writer_of(version)(fs, path, family=FAMILY, **kw)
        for c in cells:
            w.append(c)
        w.finish(max_seq_id=42)
        with open(os.path.join(HERE, f"{version}_{name}.json"), "w") as f:
            json.dump([[c[0].hex(), c[1].hex(), c[2].hex(), c[3], c[4], c[5].hex()] for c in cells], f)


if __name__ == "__main__":
    main(sys.argv[1])
