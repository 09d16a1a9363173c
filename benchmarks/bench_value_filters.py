"""Value filters on dense blocks: one comparison per tested column, against its peers.

    python benchmarks/bench_value_filters.py --rows 1000000 --root /tmp/bench/vf

The sample table of ``harness.sample_batches`` (4-byte key, ``cf:n``, ``cf:s`` of
``--value-size`` bytes) is bulk loaded and major-compacted, so every block is
a version 2 dense block.  For each filter, a scan into Arrow rows
(``scan_batches(columns=[cf:n, cf:s], filter=...)``) is timed three ways in
the same run, best of ``--repeat`` after a warm-up, CPU seconds by default:

* dense: the filter as the engine runs it on dense blocks (one vectorized
  comparison over the tested column, then column slices);
* cell kernels: the same filter ANDed with a ``PageFilter`` larger than the
  table, which keeps every row but is stateful, so the dense path declines
  it and the blocks go through the cell kernels (cells, filter, pivot);
* no filter: the full scan into rows, the floor a filter that keeps every
  row cannot beat.

For the binary comparisons, pyarrow reading the same rows from one
uncompressed Parquet file and filtering them with one ``pyarrow.compute``
comparison is printed as an outside peer.

Last, a selective range on ``cf:n`` (it grows with the key, so the rows are sorted by it;
``--range-share`` of them) is timed with row-group skipping on (``filter_if_missing``: blocks
whose value bounds rule the range out are not read, storage/read/block_pruning.py) and off (the
same comparisons without ``filter_if_missing``, which keep the same rows here, as every row has
``cf:n``, but let no block be skipped).
"""

from __future__ import annotations

import argparse
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import harness  # the shared timing and sample tables; puts the checkout on sys.path
from harness import COLUMNS, best_of, bulk_load, sample_batches

import storage

TABLE = "bench_format"


def filters(rows: int) -> list[tuple[str, str, tuple | None]]:
    """``(label, filter string, (column, operator, value) for the Parquet peer or None)``."""
    tenth = b"value-%010d" % (rows // 10)
    return [
        ("SingleColumnValueFilter binary <",
         f"SingleColumnValueFilter ('cf', 's', <, 'binary:{tenth.decode()}')", ("cf:s", pc.less, tenth)),
        ("ColumnValueFilter binary < (cf:s only)",
         f"ColumnValueFilter ('cf', 's', <, 'binary:{tenth.decode()}')", ("cf:s", pc.less, tenth)),
        ("ValueFilter binaryprefix =", "ValueFilter (=, 'binaryprefix:value-00000')", None),
        ("ColumnValueFilter substring =", "ColumnValueFilter ('cf', 's', =, 'substring:00123-')", None),
        ("SingleColumnValueFilter regexstring =",
         "SingleColumnValueFilter ('cf', 's', =, 'regexstring:^value-\\d{9}7')", None),
        ("ColumnValueFilter OR SingleColumnValueFilter",
         f"ColumnValueFilter ('cf', 's', <, 'binary:{tenth.decode()}') OR "
         "SingleColumnValueFilter ('cf', 's', =, 'substring:00123-')", None),
    ]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--regions", type=int, default=1)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--block-size", type=int, default=65536)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--root", default="./bench-data/value-filters")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    p.add_argument("--range-share", type=float, default=0.01,
                   help="share of the rows the sorted range filter keeps (row-group skipping line)")
    args = p.parse_args(argv)
    harness.set_clock(args.clock)
    rows = args.rows
    root = os.path.join(args.root, "tables")
    batches = sample_batches(rows, args.value_size)
    bulk_load(root, rows, args.regions, args.block_size, batches, TABLE)
    conn = storage.connect(root)
    table = conn.table(TABLE)
    table.compact(major=True)
    layouts = {k for r in table.store_file_readers() for k in r._index.layouts}
    print(f"{rows:,} rows, {args.value_size}-byte cf:s, {args.regions} region(s), block layouts {sorted(layouts)} "
          f"(1: dense); clock: {args.clock}")
    parquet = os.path.join(args.root, "rows.parquet")
    pq.write_table(pa.Table.from_batches(list(table.scan_batches(columns=COLUMNS))), parquet, compression="none")

    def scan(flt) -> callable:
        return lambda: sum(b.num_rows for b in table.scan_batches(columns=COLUMNS, filter=flt))

    (t_full, n_full), = best_of(args.repeat, scan(None))
    assert n_full == rows, n_full
    print(f"no filter: {rows / t_full:,.0f} rows/s ({t_full:.3f} s)")
    page = f" AND PageFilter ({rows + 1})"
    for label, flt, peer in filters(rows):
        fns = [scan(flt), scan(flt + page)]
        if peer is not None:
            column, compare, value = peer
            fns.append(lambda: (lambda t: t.filter(compare(t[column], pa.scalar(value, pa.binary()))).num_rows)(
                pq.read_table(parquet, use_threads=False)))
        timed = best_of(args.repeat, *fns)
        (t_dense, n_dense), (t_cells, n_cells) = timed[:2]
        assert n_dense == n_cells, (label, n_dense, n_cells)
        line = (f"{label}: keeps {n_dense:,} rows ({100 * n_dense / rows:.1f}%); dense {rows / t_dense:,.0f} rows scanned/s ({t_dense:.3f} s), "
                f"cell kernels {rows / t_cells:,.0f} ({t_cells:.3f} s): {t_cells / t_dense:.2f}x; "
                f"vs no filter {t_full / t_dense:.2f}x")
        if peer is not None:
            t_pq, n_pq = timed[2]
            line += f"; parquet read + pyarrow filter {rows / t_pq:,.0f} ({t_pq:.3f} s): {t_pq / t_dense:.2f}x"
            assert n_pq == n_dense, (label, n_pq, n_dense)
        print(line)
    print(_skipping_line(rows, args.range_share, args.repeat, scan))
    conn.close()
    return 0


def _skipping_line(rows: int, share: float, repeat: int, scan) -> str:
    """A range keeping ``share`` of the rows on sorted ``cf:n``, with row-group skipping on and off."""
    import struct

    from storage.filters import BinaryComparator, FilterList, SingleColumnValueFilter

    first = rows // 2
    last = first + max(int(rows * share), 1)
    # cf:n is idx * 7 - 1000 as a signed 4-byte big-endian int; both bounds positive, where the
    # byte order is the value order
    lo, hi = struct.pack(">i", first * 7 - 1000), struct.pack(">i", last * 7 - 1000)

    def between(skip: bool) -> FilterList:
        return FilterList.join("MUST_PASS_ALL",
                               SingleColumnValueFilter("cf", "n", ">=", BinaryComparator(lo), filter_if_missing=skip),
                               SingleColumnValueFilter("cf", "n", "<", BinaryComparator(hi), filter_if_missing=skip))

    (t_on, n_on), (t_off, n_off) = best_of(repeat, scan(between(True)), scan(between(False)))
    assert n_on == n_off == last - first, (n_on, n_off, last - first)
    return (f"sorted range on cf:n keeping {n_on:,} rows ({100 * share:.1f}%): row groups skipped {t_on:.4f} s, "
            f"all read {t_off:.4f} s: {t_off / t_on:.1f}x")


if __name__ == "__main__":
    raise SystemExit(main())
