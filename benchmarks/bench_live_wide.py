"""Live-table benchmark on a wide, typed table: TPC-H's ``lineitem`` as ``bench_tpch.py``
loads it through ``df.write.format("regionscan")`` (15 columns of binary-encoded BIGINT,
INT, DECIMAL, DATE and STRING in one family, several regions), with some of its rows
deleted or written again, against the same table compacted.

``bench_live.py`` measures the merge on a two-column sample table; users' tables are wide,
and the happybase habit is to scan whole rows.  Each layout copies the loaded table, then
deletes (``delete``: row delete markers) or puts again with a newer timestamp (``rewrite``:
the same values) every ``--every``-th row, or both (``mixed``: every other such row put
again, the others deleted, in one batch: a memstore of puts among markers, flushed as cell
blocks), the writes left in the memstore and WAL
(``memstore``) or flushed into a second file per region (``file``); a copy of that table is
major-compacted (the flushed side, the same rows).  Read paths, embedded, every run with
the block cache emptied and nothing kept (built, as bench_live's ``built`` lines):

* ``dicts``: happybase's ``Table.scan()``, no column named (a ``(key, dict)`` per row);
* ``filter``: the same with ``SingleColumnValueFilter('f', 'l_returnflag', =, 'binary:R')``
  (about a quarter of the rows);
* ``prefix``: the same with ``ColumnPrefixFilter('l_ship')`` (three columns of every row);
* ``reverse``: ``Table.scan(reverse=True)``, no column named;
* ``family``: ``Table.scan_batches()``, no column named (the family as one map column);
* ``q06``: ``Table.scan_batches`` of the four columns TPC-H's q06 reads.

Load the data first (SF 0.1 takes about a minute), then run from the repository root::

    python benchmarks/bench_tpch.py --scale 0.1 --queries 6 --data-dir /tmp/tpch01
    python benchmarks/bench_live_wide.py --data-dir /tmp/tpch01

The ratio is live speed divided by compacted speed (CPU clock, best of ``--repeat``, the two
sides alternating); the target, as bench_live's, 0.67 or more.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile

import pyarrow as pa

import harness  # the shared timing and clocks; puts the checkout on sys.path

import storage

Q06_COLUMNS = [b"f:l_shipdate", b"f:l_discount", b"f:l_quantity", b"f:l_extendedprice"]
PATHS = ("dicts", "filter", "prefix", "reverse", "family", "q06")
DICT_SCANS = {
    "dicts": {},
    "filter": {"filter": "SingleColumnValueFilter('f', 'l_returnflag', =, 'binary:R')"},
    "prefix": {"filter": "ColumnPrefixFilter('l_ship')"},
    "reverse": {"reverse": True},
}


def _reader(table: storage.Table, path: str):
    if path in DICT_SCANS:
        options = DICT_SCANS[path]
        return lambda: sum(1 for _ in table.scan(**options))
    columns = None if path == "family" else Q06_COLUMNS
    return lambda: sum(b.num_rows for b in table.scan_batches(columns=columns, cache_results=False))


def _live_copy(source: str, root: str, layout: str, variant: str, every: int) -> tuple:
    """``source``'s tables copied to ``root``, ``lineitem`` written to as ``layout`` and
    ``variant`` say; and its major-compacted copy under ``root + "_compacted"``."""
    shutil.copytree(source, root)
    live = storage.connect(root, block_cache_size=1 << 30)
    table = live.table("lineitem")
    keys = pa.chunked_array([b.column(0) for b in table.scan_batches(columns=[b"f:l_quantity"])]).to_pylist()
    picked = keys[::every]
    with table.batch(batch_size=10_000) as batch:
        if layout == "delete":
            for key in picked:
                batch.delete(key)
        elif layout == "mixed":  # every other picked row put again, the others deleted
            for key, data in table.rows(picked[::2]):
                batch.put(key, data)
            for key in picked[1::2]:
                batch.delete(key)
        else:
            for key, data in table.rows(picked):
                batch.put(key, data)
    if variant == "file":
        table.flush()
    shutil.copytree(root, root + "_compacted")
    flushed = storage.connect(root + "_compacted", block_cache_size=1 << 30)
    flushed.table("lineitem").compact(major=True)
    return live, flushed, len(picked)


def _best_built(repeat: int, fns: list, caches: list) -> list:
    """Best of ``repeat`` runs of each of ``fns`` (alternating), every block cache emptied first."""
    best = [float("inf")] * len(fns)
    results: list = [None] * len(fns)
    for fn in fns:  # the OS page cache and the code warm
        fn()
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            for cache in caches:
                cache.clear()
            gc.collect()
            t0 = harness.clock()
            results[i] = fn()
            best[i] = min(best[i], harness.clock() - t0)
    return list(zip(best, results))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="bench_tpch.py's --data-dir (its regionscan tables)")
    parser.add_argument("--every", type=int, default=20, help="write every N-th row (default 20: 5%%)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layouts", default="delete,rewrite,mixed")
    parser.add_argument("--variants", default="memstore,file")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--work", default=None, help="folder for the copies (default: a temporary one)")
    args = parser.parse_args(argv)
    source = os.path.join(args.data_dir, "regionscan")
    if not os.path.isdir(os.path.join(source, "lineitem")):
        parser.error(f"--data-dir: no regionscan lineitem table under {args.data_dir} (run bench_tpch.py first)")
    paths = args.paths.split(",")
    for p in paths:
        if p not in PATHS:
            parser.error(f"--paths: unknown path {p!r} (known: {', '.join(PATHS)})")
    work = args.work or tempfile.mkdtemp(prefix="bench-live-wide-")
    failed = False
    try:
        for layout in args.layouts.split(","):
            for variant in args.variants.split(","):
                root = os.path.join(work, f"{layout}_{variant}")
                shutil.rmtree(root, ignore_errors=True)
                shutil.rmtree(root + "_compacted", ignore_errors=True)
                live, flushed, written = _live_copy(source, root, layout, variant, args.every)
                caches = [live.block_cache, flushed.block_cache]
                for path in paths:
                    fns = [_reader(flushed.table("lineitem"), path), _reader(live.table("lineitem"), path)]
                    (base_s, base_n), (live_s, live_n) = _best_built(args.repeat, fns, caches)
                    ratio = base_s / live_s
                    ok = ratio >= 0.67 and base_n == live_n
                    failed |= not ok
                    print(f"lineitem {layout:<8} {variant:<9} {path:<7} {written:>7,} rows written  "
                          f"compacted {base_s * 1e3:8.1f} ms  live {live_s * 1e3:8.1f} ms  {ratio:5.2f}x  "
                          f"{'meets' if ok else 'MISSES'} >= 0.67x"
                          + ("" if base_n == live_n else f"  ROW COUNT {live_n} != {base_n}"), flush=True)
                live.close()
                flushed.close()
                shutil.rmtree(root, ignore_errors=True)
                shutil.rmtree(root + "_compacted", ignore_errors=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
