"""Key-only counts over one file, several files and unflushed rows per region.

    python benchmarks/bench_keycount.py --rows 300000 --value-size 1000 --root /tmp/bench/keycount

The seed 000 shape (``harness.sample_batches``: 4-byte key, ``cf:n``,
``cf:s`` of ``--value-size`` bytes, 10 regions, 64 KiB blocks) is bulk
loaded and major-compacted (one version 2 file per region), then counted by
``scan_batches(filter="FirstKeyOnlyFilter() AND KeyOnlyFilter()")`` and by
``Table.count()`` in three states, each measured on a connection without a
block cache (every key section read and verified on every pass):

1. one file per region (the streaming path: runs of dense blocks);
2. a second, overlapping file per region (1% of the rows written again and
   flushed): the region's sources are merged (key sections only, merged in
   Arrow), and ``Table.count()`` cannot use the indexes;
3. the same plus unflushed rows in every memstore.

Each line also gives the bytes the count read from the store files against
the files' size: a keys-only count reads headers and key sections, never a
value section.  CPU seconds (``time.process_time``), best of ``--repeat``
after a warm-up.
"""

from __future__ import annotations

import argparse
import os

from harness import COUNT_FILTER, best_of, bulk_load, sample_batches  # puts the checkout on sys.path

import storage

TABLE = "bench_format"


def _scan_count(table) -> int:
    return sum(b.num_rows for b in table.scan_batches(filter=COUNT_FILTER, output="cells"))


def _measure(root: str, label: str, rows: int, repeat: int) -> None:
    conn = storage.connect(root, block_cache_size=0)
    table = conn.table(TABLE)
    (t_scan, n_scan), (t_idx, n_idx) = best_of(repeat, lambda: _scan_count(table), table.count)
    assert n_scan == n_idx == rows, (label, n_scan, n_idx)
    table.read_counters(reset=True)
    _scan_count(table)
    read = table.read_counters()["bytes_read"]
    size = sum(r.info.file_size for r in table.store_file_readers())
    files = len(table.store_file_readers())
    print(f"{label} ({files} files): row-counting scan {rows / t_scan:,.0f} rows/s, "
          f"Table.count() {rows / max(t_idx, 1e-9):,.0f} rows/s; "
          f"one count read {read:,} of {size:,} file bytes ({read / size:.2%})")
    conn.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=300_000)
    p.add_argument("--regions", type=int, default=10)
    p.add_argument("--value-size", type=int, default=1000)
    p.add_argument("--block-size", type=int, default=65536)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--root", default="./bench-data/keycount")
    args = p.parse_args(argv)
    rows = args.rows
    root = os.path.join(args.root, "tables")
    batches = sample_batches(rows, args.value_size)
    bulk_load(root, rows, args.regions, args.block_size, batches, TABLE)
    conn = storage.connect(root)
    conn.table(TABLE).compact(major=True)
    conn.close()
    _measure(root, "one file per region", rows, args.repeat)

    def rewrite(step: int, flush: bool) -> None:
        conn = storage.connect(root)
        table = conn.table(TABLE)
        with table.batch() as b:
            for i in range(step // 2, rows, step):
                b.put(i.to_bytes(4, "big"), {b"cf:n": b"new!"})
        if flush:
            table.flush()
        conn.close()

    rewrite(100, flush=True)
    _measure(root, "a second overlapping file per region", rows, args.repeat)
    rewrite(1000, flush=False)
    _measure(root, "two files and unflushed rows per region", rows, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
