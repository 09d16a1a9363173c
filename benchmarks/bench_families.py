"""Families benchmark: scans of a table whose columns are split over two families, against
the same rows and columns in one family.

HBase schemas often keep two families -- small, hot columns in one, bulky ones in
another -- and Hive's ``hbase.columns.mapping``, Spark catalogs and happybase's ``scan()``
then read both.  Data: ``--rows`` rows (200K by default), 4-byte keys, in 3 regions; the
columns ``id`` (8 bytes), ``name`` (20), ``body`` (100) and ``note`` (30).  ``one`` holds
them in family ``d``; ``two`` holds ``id`` and ``name`` in ``d`` and ``body`` and ``note``
in ``b``.  Both are loaded and major-compacted.  Three layouts of ``two``:

* ``both``: every row in both families (a bulk load);
* ``sparse``: a third of the rows without family ``b`` (and ``one`` likewise without those
  columns), so the families' keys differ and the join places rows;
* ``live``: ``both`` with a quarter of the rows re-put (both families, other values) and
  left in the memstore; ``one`` likewise.

Paths, each built (every block cache emptied before each run, nothing kept between scans,
the files in the OS page cache): ``columns`` -- ``Table.scan_batches`` of ``d:id`` and
``b:body`` (``d:body`` on ``one``); ``rows`` -- ``scan_batches()`` of whole rows (a map
column per family); ``dicts`` -- ``Table.scan()``'s ``(key, dict)`` pairs; ``connector`` --
the connector's partition read of the two columns (``TableInputFormat``, files mode);
``filter`` -- ``columns`` with a ``SingleColumnValueFilter`` on ``d:name`` keeping the first
half of the rows (the filter tests a column of one family, the scan reads both).  The
ratio is ``one``'s time divided by ``two``'s: what splitting the columns over two families
costs a scan (1.0: nothing).  The target is 0.8 or more.  CPU time, best of ``--repeat``,
runs alternating.  Run from the repository root::

    python benchmarks/bench_families.py --rows 200000 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile

import harness  # the shared timing and clocks; puts the checkout on sys.path
from harness import best_of

import storage
from connector import TableInputFormat
from storage.region.region_snapshots import shared_block_cache

__all__ = ["main"]

LAYOUTS = ("both", "sparse", "live")
PATHS = ("columns", "rows", "dicts", "connector", "filter")
FILTER = "SingleColumnValueFilter ('d', 'name', <, 'binary:name-%014d')"
"""The ``filter`` path's filter: ``name`` (family ``d`` in both tables) below the middle row's."""
TARGET = 0.8


def _values(i: int, version: int) -> dict:
    """Row ``i``'s four columns (``version`` 1: as loaded, 2: re-put)."""
    return {
        "id": struct.pack(">q", i * 31 + version),
        "name": b"name-%014d" % (i * version),
        "body": (b"body-%010d-%d-" % (i, version)) * 6 + b"x" * 100,
        "note": b"note-%024d" % (i + version),
    }


def _cells(values: dict, families: dict, skip_b: bool) -> dict:
    """The row's cells for a table whose columns live in ``families`` (column -> family)."""
    out = {}
    for column, value in values.items():
        if skip_b and column in ("body", "note"):
            continue
        out[families[column].encode() + b":" + column.encode()] = value[:100]
    return out


ONE = {"id": "d", "name": "d", "body": "d", "note": "d"}
TWO = {"id": "d", "name": "d", "body": "b", "note": "b"}


def build(conn: storage.Connection, name: str, rows: int, layout: str, families: dict) -> storage.Table:
    """Load ``rows`` rows in ``layout`` into a new table with the columns of ``families``."""
    names = sorted(set(families.values()))
    split = [struct.pack(">I", rows * k // 3) for k in (1, 2)]
    table = conn.create_table(name, {f: {} for f in names}, split_keys=split,
                              settings={"wal_sync": "none", "memstore_flush_size": 1 << 40, "compaction_threshold": 1000})
    with table.batch(timestamp=1000, batch_size=10_000) as b:
        for i in range(rows):
            b.put(struct.pack(">I", i), _cells(_values(i, 1), families, layout == "sparse" and i % 3 == 1))
    table.compact(major=True)
    if layout == "live":
        with table.batch(timestamp=2000, batch_size=10_000) as b:
            for i in range(0, rows, 4):
                b.put(struct.pack(">I", i), _cells(_values(i, 2), families, False))
    return table


def _path(conn, root: str, table: storage.Table, path: str, families: dict, rows: int):
    columns = [f"{families['id']}:id".encode(), f"{families['body']}:body".encode()]
    if path == "columns":
        return lambda: sum(b.num_rows for b in table.scan_batches(columns=columns, cache_results=False))
    if path == "rows":
        return lambda: sum(b.num_rows for b in table.scan_batches(cache_results=False))
    if path == "dicts":
        return lambda: sum(1 for _ in table.scan(cache_results=False))
    if path == "filter":
        flt = FILTER % (rows // 2)
        return lambda: sum(b.num_rows for b in table.scan_batches(columns=columns, filter=flt, cache_results=False))
    conf = {"regionscan.root": root, "hbase.mapreduce.inputtable": table.name,
            "hbase.mapreduce.scan.columns": " ".join(c.decode() for c in columns),
            "hbase.mapreduce.scan.cacheblocks": "false", "regionscan.pin.register": "false"}

    def run() -> int:
        fmt = TableInputFormat(conf)
        n = 0
        for split in fmt.get_splits():
            with fmt.create_batch_reader(split) as reader:
                n += sum(b.num_rows for b in reader)
        return n
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--root", default=None, help="keep the tables here (reused when present)")
    parser.add_argument("--clock", default="cpu", choices=sorted(harness.CLOCKS))
    args = parser.parse_args(argv)
    harness.set_clock(args.clock)
    layouts = [x for x in args.layouts.split(",") if x]
    paths = [x for x in args.paths.split(",") if x]
    for x in layouts + paths:
        if x not in LAYOUTS + PATHS:
            parser.error(f"unknown layout or path {x!r}")
    root = args.root or tempfile.mkdtemp(prefix="bench-families-")
    marker = os.path.join(root, f"loaded-{args.rows}")
    fresh = not os.path.exists(marker)
    if fresh and os.path.exists(root):
        shutil.rmtree(root)
    conn = storage.connect(root)
    try:
        tables = {}
        for layout in layouts:
            for kind, families in (("one", ONE), ("two", TWO)):
                name = f"{kind}_{layout}"
                tables[name] = build(conn, name, args.rows, layout, families) if fresh else conn.table(name)
        if fresh:
            open(marker, "w").close()
        caches = [conn.block_cache, shared_block_cache()]

        def built(fn):
            def run():
                for cache in caches:
                    if cache is not None:
                        cache.clear()
                return fn()
            return run

        print(f"{'layout':<8} {'path':<10} {'one (ms)':>9} {'two (ms)':>9} {'rows':>8}  ratio")
        failed = 0
        for layout in layouts:
            for path in paths:
                one = built(_path(conn, root, tables[f"one_{layout}"], path, ONE, args.rows))
                two = built(_path(conn, root, tables[f"two_{layout}"], path, TWO, args.rows))
                (one_s, one_n), (two_s, two_n) = best_of(args.repeat, one, two)
                if one_n != two_n:
                    raise SystemExit(f"{layout} {path}: {one_n} rows in one family, {two_n} in two")
                ratio = one_s / two_s
                ok = ratio >= TARGET
                failed += not ok
                print(f"{layout:<8} {path:<10} {one_s * 1e3:9.1f} {two_s * 1e3:9.1f} {two_n:8d}  "
                      f"{ratio:4.2f}x {'ok' if ok else 'BELOW ' + str(TARGET)}")
        return 0
    finally:
        conn.close()
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
