"""A scan of TPC-H ``lineitem`` with a block-skipping filter of a long IN list, split by split.

    python benchmarks/bench_filter_parse.py --data-dir /tmp/regionscan-tpch/sf1 --repeat 3

The IN list is q20's ``l_partkey IN (keys of part with p_name LIKE 'forest%')`` (2,127 keys at
SF 1), read from the Parquet copy of ``part``, and reaches the engine as the connector sends it:
an OR list of one ``SingleColumnValueFilter`` equality a key, as a filter string in each
split's request (``prune_filter``).  Each region is read by its own request, as the worker
reads its splits (one a region by default).  Reported: process CPU
seconds per whole scan (best of ``--repeat``, the cases alternating), the rows read; with
``--compare`` also the engine's former way (the string parsed for every split, the IN list's
block test one comparison a value a block), and with ``--profile`` the functions cProfile
finds most costly.  The connection is read-only: the data is not changed.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import struct
import time

import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness import best_of  # noqa: F401  (puts the checkout on sys.path)

import storage
from storage import ScanRequest
from storage.filters import BinaryComparator, FilterList, SingleColumnValueFilter
from storage.filters.compare import CompareOperator
from storage.filters import parser
from storage.read import block_pruning


def in_list_filter(parquet_dir: str) -> tuple[str, int]:
    """q20's IN list as the block-skipping filter string, and its number of keys."""
    part = pq.read_table(os.path.join(parquet_dir, "part.parquet") if os.path.exists(
        os.path.join(parquet_dir, "part.parquet")) else os.path.join(parquet_dir, "part"),
        columns=["p_partkey", "p_name"])
    forest = pc.starts_with(part["p_name"].cast("string"), "forest")
    keys = sorted(set(part["p_partkey"].filter(forest).to_pylist()))
    # a BIGINT value is stored as 8 bytes big-endian (two's complement)
    members = [SingleColumnValueFilter(b"f", b"l_partkey", CompareOperator.EQUAL,
                                       BinaryComparator(struct.pack(">q", k)), True, True) for k in keys]
    return repr(FilterList(FilterList.MUST_PASS_ONE, members)), len(keys)


def ranges(table) -> list[tuple[bytes, bytes | None]]:
    """One key range a region: the worker's splits with one split per region (its default)."""
    return [(info["start_key"] or b"", info["end_key"] or None) for info in table.regions()]


def scan(table, spans, prune: str | None) -> int:
    rows = 0
    for lo, hi in spans:
        request = ScanRequest(row_start=lo or None, row_stop=hi, columns=(b"f:l_partkey",),
                              prune_filter=prune, output="rows")
        for batch in table.run_scan(request):
            rows += batch.num_rows
    return rows


@contextlib.contextmanager
def per_split_parse(on: bool):
    """With ``on``, the engine as it was: each request's filter string parsed anew
    (``coerce_filter`` without the kept parses) and an IN list's block test run member by member."""
    if not on:
        yield
        return
    saved = parser.parsed_filter, block_pruning._one_column_equalities
    parser.parsed_filter = parser.parse_filter_string
    block_pruning._one_column_equalities = lambda filters, family: False
    try:
        yield
    finally:
        parser.parsed_filter, block_pruning._one_column_equalities = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="/tmp/regionscan-tpch/sf1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--compare", action="store_true",
                    help="also time the string parsed for every split and the IN list tested value by value")
    args = ap.parse_args()
    prune, count = in_list_filter(os.path.join(args.data_dir, "parquet"))
    conn = storage.connect(os.path.join(args.data_dir, "regionscan"), read_only=True)
    table = conn.table("lineitem")
    spans = ranges(table)
    print(f"IN list of {count} keys, filter string {len(prune):,} chars, {len(spans)} splits")
    scan(table, spans, prune)  # warm: blocks cached, qualifiers learned
    modes = [("no prune filter", None, False), ("IN-list prune filter", prune, False)]
    if args.compare:
        modes.append(("  the same, parsed per split, tested per value", prune, True))
    best: dict[str, float] = {}
    rows: dict[str, int] = {}
    for _ in range(args.repeat):  # the modes alternate, so that the load weighs on each alike
        for label, flt, old in modes:
            with per_split_parse(old):
                t0 = time.process_time()
                rows[label] = scan(table, spans, flt)
                cpu = time.process_time() - t0
            best[label] = min(best.get(label, cpu), cpu)
    for label, _, _ in modes:
        print(f"{label:48s} rows {rows[label]:>10,}  CPU-s best of {args.repeat}: {best[label]:.3f}")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        scan(table, spans, prune)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
    conn.close()


if __name__ == "__main__":
    main()
