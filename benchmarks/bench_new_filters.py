"""The filters of issue 22 on the batch path against the cell path, in one run.

    python benchmarks/bench_new_filters.py --rows 200000 --repeat 3

Rows of ``--columns`` columns (two versions of the first, so the column
counting filters skip old versions) are built in memory as one cell table.
Each filter runs over them two ways, best of ``--repeat`` after a warm-up:
``filter_batch`` on batches of ``--batch-rows`` rows (the batch path: Arrow
and NumPy kernels over the whole batch) and ``filter_row_cells`` row by row
(the cell path, the model the batch path must equal).  Both keep the same
cells (checked); the ratio is cell-path time over batch-path time.
"""

from __future__ import annotations

import argparse
import os

import pyarrow as pa

from harness import best_of  # puts the checkout on sys.path

from storage.cells import Cell, CellType, batch_to_cells, cells_to_batch
from storage.filters import parse_filter_string

FILTERS = [
    "InclusiveStopFilter ('r0150000')",
    "FuzzyRowFilter ('r??1?', '01101', 'r0?0', '0101')",
    "ColumnPaginationFilter (2, 1)",
    "ColumnPaginationFilter (2, 'q2')",
    "ColumnCountGetFilter (8)",
    "DependentColumnFilter ('cf', 'q0')",
    "DependentColumnFilter ('cf', 'q1', true, <, 'binary:v5')",
    "RandomRowFilter (0.3, 7)",
    "ValueFilter (<, 'null:')",
]


def build(rows: int, columns: int) -> list[list[Cell]]:
    put = int(CellType.PUT)
    out = []
    for i in range(rows):
        key = b"r%07d" % i
        cells = [Cell(key, b"cf", b"q0", 2 + i % 2, put, b"v%d" % (i % 10)), Cell(key, b"cf", b"q0", 1, put, b"old")]
        cells += [Cell(key, b"cf", b"q%d" % c, 2 + (i + c) % 2, put, b"v%d" % ((i + c) % 10)) for c in range(1, columns)]
        out.append(cells)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--columns", type=int, default=4)
    ap.add_argument("--batch-rows", type=int, default=16_384)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = build(args.rows, args.columns)
    batches = [pa.Table.from_batches([cells_to_batch([c for r in rows[i:i + args.batch_rows] for c in r])])
               for i in range(0, len(rows), args.batch_rows)]
    cells = sum(len(r) for r in rows)
    print(f"{args.rows} rows, {cells} cells, batches of {args.batch_rows} rows; load average {os.getloadavg()[0]:.1f}")
    print(f"{'filter':58} {'batch s':>8} {'cell s':>8} {'ratio':>6}")
    for text in FILTERS:
        prototype = parse_filter_string(text)

        def batch_path() -> int:
            f = prototype.copy()
            f.reset()
            return sum(f.filter_batch(b).num_rows for b in batches)

        def cell_path() -> int:
            f = prototype.copy()
            f.reset()
            kept = 0
            for r in rows:
                if not f.filter_row_key(r[0].row):
                    out = f.filter_row_cells(r)
                    kept += len(out) if out else 0
            return kept

        (tb, nb), (tc, nc) = best_of(args.repeat, batch_path, cell_path)
        assert nb == nc, (text, nb, nc)
        print(f"{text:58} {tb:8.3f} {tc:8.3f} {tc / tb:6.1f}")
    check = parse_filter_string(FILTERS[2])
    assert batch_to_cells(check.filter_batch(batches[0]))[:2] == check.filter_row_cells(rows[0])


if __name__ == "__main__":
    main()
