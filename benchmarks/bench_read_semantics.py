"""Costs behind the read-semantics choices (docs/architecture.md, "Read semantics").

1. Point reads: ``Table.row()`` resolves a row's few cells through the cell-at-a-time
   ``StoreScanner``; the alternative is to build Arrow tables of the row's cells and run
   the batch kernels (``merge_sources`` + ``resolve``) per row.  Printed: microseconds per
   point read each way, and the ratio.
2. Row dicts from cell batches (``storage.read.python_rows.cells_to_dicts``, what ``scan()`` and the
   connector's ``TableRecordReader`` run): one version or several, with and without
   ``scan_batching``.  Printed: milliseconds per 100K cells.

    python benchmarks/bench_read_semantics.py --rows 2000 --repeat 3

Best of ``--repeat`` runs, CPU time of this process (``time.process_time``), so load from
other processes moves the figures little.
"""

from __future__ import annotations

import argparse
import tempfile

import pyarrow as pa

from harness import best_of  # puts the checkout on sys.path

import storage
from storage import kernels
from storage.cells import Cell, batch_to_cells, cells_to_batch
from storage.read.python_rows import cells_to_dicts


def _best(fn, repeat: int) -> float:
    """Best CPU seconds of ``repeat`` runs of ``fn``, no warm-up run."""
    return best_of(repeat, fn, warmup=False)[0][0]


def _kernel_row(view, row: bytes) -> list:
    """One row resolved through the batch kernels instead of the StoreScanner."""
    out = []
    for store in view.stores.values():
        found = [store.memstore.row_cells(row)] + [f.reader.row_cells(row) for f in store.files]
        sources = [pa.Table.from_batches([cells_to_batch(c)]) for c in found if c]
        if not sources:
            continue
        resolved = kernels.resolve(kernels.merge_sources(sources), max_versions=1)
        if resolved.num_rows:
            out.extend(batch_to_cells(resolved.combine_chunks().to_batches()[0]))
    return out


def point_reads(rows: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        conn = storage.connect(root)
        table = conn.create_table("g", {"cf": {"max_versions": 3}}, settings={"wal_sync": "none"})
        for i in range(rows):
            table.put(b"r%06d" % i, {b"cf:a": b"x" * 20, b"cf:b": b"y" * 20}, timestamp=5)
        table.flush()
        for i in range(0, rows, 2):  # half the rows also have a newer version in the memstore
            table.put(b"r%06d" % i, {b"cf:a": b"z"}, timestamp=7)
        keys = [b"r%06d" % i for i in range(rows)]
        view = table._regions[0].view()
        assert all(table.row(k) == {c[1] + b":" + c[2]: c[5] for c in _kernel_row(view, k)} for k in keys[:50])
        scanner = _best(lambda: [table.row(k) for k in keys], repeat) / rows * 1e6
        kernel = _best(lambda: [_kernel_row(view, k) for k in keys], repeat) / rows * 1e6
        conn.close()
    print(f"point read, StoreScanner (Table.row): {scanner:8.1f} us")
    print(f"point read, batch kernels per row:    {kernel:8.1f} us   ({kernel / scanner:.1f}x the StoreScanner)")


def row_dicts(rows: int, repeat: int) -> None:
    cells = [Cell(b"r%06d" % i, b"cf", b"q%d" % q, 100 - v, 4, b"x" * 10)
             for i in range(rows * 10) for q in range(5) for v in range(2)]
    several = cells_to_batch(cells)
    one = cells_to_batch([c for c in cells if c.timestamp == 100])
    for name, batch, kw in [
        ("1 version", one, {}),
        ("1 version, scan_batching=2", one, {"scan_batching": 2}),
        ("2 versions", several, {"all_versions": True}),
        ("2 versions, scan_batching=3", several, {"all_versions": True, "scan_batching": 3}),
    ]:
        seconds = _best(lambda: sum(1 for _ in cells_to_dicts(batch, **kw)), repeat)
        print(f"row dicts, {name:28s} {seconds / batch.num_rows * 1e5 * 1000:8.1f} ms per 100K cells")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000, help="rows of the point-read table (x10 for row dicts)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    point_reads(args.rows, args.repeat)
    row_dicts(args.rows, args.repeat)


if __name__ == "__main__":
    main()
