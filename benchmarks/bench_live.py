"""Live-table benchmark: scans of a table with a quarter of its rows unflushed,
against the same table flushed.

Data: ``--rows`` rows (200K by default) of the sample table (4-byte key,
``cf:n`` and a 100-byte ``cf:s``) in 3 regions; ``--key-width W`` gives the
rows W-byte string keys instead, as HBase tables mostly have (``user`` and
W - 4 decimal digits: ``user000000012345``), and ``--hashed`` puts 4 bytes of
the row number's MD5 in front of the digits instead of ``user`` (a salted key,
spread over the key space, as tables avoiding a hot region write them); ``--ycsb``
gives YCSB's keys (its default hashed insert order): ``user`` and the decimal
digits of a 64-bit FNV-1a hash of the row number, keys of several widths
(mostly 23 bytes) in no key order.  The flushed table holds every
row in one compacted store file per region.  The live tables hold three
quarters of the rows in such files and the last quarter only in the memstore
and the WAL, laid out two ways: ``interleaved`` (every fourth row, so the
memstore's rows fall between the file's everywhere) and ``tail`` (the last
quarter of the key space, as appended time series are).  The other layouts
change rows the files hold: ``rewrite`` puts every fourth row again,
``delete`` deletes it, ``mixed`` does both as a table being updated does
(every eighth row put again, every eighth deleted: one memstore of puts
among delete markers, flushed as cell blocks), and ``versions`` writes every
row three times (read with ``max_versions=3``); each live table's second
file (``file``) or memstore (``memstore``) holds that quarter.

Five read paths are timed: the embedded ``Table.scan_batches`` (rows of
``cf:n`` and ``cf:s``), the connector's partition read (files mode:
``TableInputFormat.get_splits()`` once, then each split's batch reader, which
opens its pinned store files and decodes its pinned WAL records), without
Spark and with ``cacheblocks`` false (what a MapReduce task reads: repeated
with ``regionscan.scan.cacheresults``, it keeps the decoded WAL records in the
process's block cache and resolves every chunk again), and ``worker``: the
same reads with ``cacheblocks`` true and the engine worker's 1 GiB block
cache, repeated as a long-lived worker serving the same query repeats them
(kept blocks, batches, decoded WAL records and chunks on both sides:
storage/region/replay_memo.py).  Two more read whole rows, naming no column, as
happybase users scan: ``dicts``, the embedded ``Table.scan()`` (a ``(key, dict)``
pair per row), and ``family``, the embedded ``Table.scan_batches()`` (the family
as one map column).  The ratio is live speed divided by flushed
speed; the target is 0.67 or more.  A scan that keeps results
(``cache_results``) keeps a live table's chunks between scans while nothing is
written (storage/read/chunk_memo.py), and a clean file's streamed batches too
(storage/read/stream_memo.py): the ``live`` lines are such repeated scans of
both tables (kept results against kept results), the ``built`` lines the same
scans keeping nothing on either side (the default: what the first scan after a
write pays, against what the flushed table's first scan of a range pays), each
against the flushed table's own ``built`` time.  Every ``built`` run starts
with every block cache emptied (the embedded connection's and the process's,
outside the timed span), so both sides read their blocks from the files (in
the OS page cache, warmed by an untimed first run) and decode them: otherwise
the flushed side would be a decoded-block cache lookup and the ratio would
compare a merge with a lookup.  Runs alternate between the tables and the best
of ``--repeat`` is kept (``--clock cpu`` by default: CPU seconds, steadier on
a shared machine).
Run from the repository root::

    python benchmarks/bench_live.py --rows 200000 --repeat 5

``--writer RATE`` runs the same scans while a writer thread puts ``RATE``
rows per second into EVERY table (the flushed one too, so each side scans
under the same write load and holds the writer's rows in its memstore).  The
writer keeps rewriting a fixed set of ``rows // 100`` rows of its own (keys
spread over all regions: a sample row key plus a 4-byte suffix), written
once before the timing starts, always with the same timestamp: a rewrite
replaces the memstore cell (no version piles up), so the tables keep their
size and row count while the scans run.  The clock is then the scanning
thread's CPU time (``--clock thread``, the default with a writer): the
process clock would count the writer's own work too.  A second flushed
table that the writer leaves alone is timed as well, and each live table's
speed is also given against it (``of quiet``): live under writes against a
flushed table at rest.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import os
import pstats
import shutil
import sys
import struct
import tempfile
import threading
import time

import numpy as np

import harness  # the shared timing and clocks; puts the checkout on sys.path
from harness import CLOCKS, COLUMNS, best_of

import storage
from connector import TableInputFormat
from jobs.demo import sample_row
from storage.region.region_snapshots import BLOCK_CACHE_SIZE_ENV, shared_block_cache

__all__ = ["main"]


KEY_WIDTH = 4
"""The keys' width (``--key-width``): 4 is the sample table's big-endian integer key."""
HASHED = False
"""``--hashed``: the key's first 4 bytes are of the row number's MD5 (a salt), not ``user``."""
YCSB = False
"""``--ycsb``: YCSB's keys, ``user`` and the decimal of a 64-bit FNV-1a hash of the row number."""

_FNV_OFFSET, _FNV_PRIME, _MASK63 = 0xCBF29CE484222325, 0x100000001B3, (1 << 63) - 1


def ycsb_key(i: int) -> bytes:
    """YCSB's key of row ``i`` in its hashed insert order: FNV-1a over the 8 bytes of ``i``
    (low byte first), as a non-negative 63-bit number in decimal after ``user``."""
    h = _FNV_OFFSET
    for k in range(8):
        h = ((h ^ ((i >> (8 * k)) & 0xFF)) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return b"user%d" % (h & _MASK63)


def row_key(i: int) -> bytes:
    """Row ``i``'s key: the sample table's, or with ``--key-width`` over 4 a string key of
    that width (``user``, or with ``--hashed`` 4 bytes of MD5, and zero-padded digits)."""
    if YCSB:
        return ycsb_key(i)
    if KEY_WIDTH == 4:
        return sample_row(i, 0)[0]
    head = hashlib.md5(b"%d" % i).digest()[:4] if HASHED else b"user"
    return head + b"%0*d" % (KEY_WIDTH - 4, i)


def split_keys(rows: int) -> list[bytes]:
    """The keys the tables are split at: 3 regions of about a third of the rows each."""
    if HASHED:
        return [b"\x55", b"\xaa"]
    if YCSB:  # the hashes' leading digits are about uniform over 1 to 9
        return [b"user4", b"user7"]
    return [row_key(rows * k // 3) for k in (1, 2)]


def _quarter(i: int, rows: int) -> bool:
    return i % 4 == 3


class Layout:
    """One live-table layout: the writes of the flushed part (``base``), the
    writes of the quarter left live (``late``), the family's ``max_versions``
    and the scan's.  Each write is ``(kind, i, timestamp)``: ``put`` puts
    sample row ``i`` (``put2``, ``put3``: the same key with other values),
    ``delete`` deletes row ``i``."""

    def __init__(self, base, late, versions: int = 1):
        self.base, self.late, self.versions = base, late, versions


def _puts(pick, kind="put", ts=1000):
    return lambda rows: ((kind, i, ts) for i in range(rows) if pick(i, rows))


def _chain(*parts):
    return lambda rows: (w for part in parts for w in part(rows))


_ALL = lambda i, rows: True  # noqa: E731
_OTHERS = lambda i, rows: not _quarter(i, rows)  # noqa: E731
_TAIL = lambda i, rows: i >= rows - rows // 4  # noqa: E731

LAYOUTS = {
    # new keys: every fourth row, or the last quarter of the key space
    "interleaved": Layout(_puts(_OTHERS), _puts(_quarter)),
    "tail": Layout(_puts(lambda i, rows: not _TAIL(i, rows)), _puts(_TAIL)),
    # a quarter of the rows written again (newer timestamp, other values)
    "rewrite": Layout(_puts(_ALL), _puts(_quarter, "put2", 2000)),
    # a quarter of the rows deleted (row delete markers)
    "delete": Layout(_puts(_ALL), _puts(_quarter, "delete", 2000)),
    # both at once, as a table being updated is flushed: every eighth row put again and every
    # eighth deleted, in one memstore (a flush of it writes cell blocks: puts among markers)
    "mixed": Layout(_puts(_ALL), _chain(_puts(lambda i, rows: i % 8 == 3, "put2", 2000),
                                        _puts(lambda i, rows: i % 8 == 7, "delete", 2000))),
    # every row written three times, max_versions=3, scanned with all versions
    "versions": Layout(
        _chain(_puts(_ALL), _puts(_ALL, "put2", 2000), _puts(_OTHERS, "put3", 3000)),
        _puts(_quarter, "put3", 3000), versions=3,
    ),
}
PATHS = ("embedded", "connector", "worker", "dicts", "family")
VARIANTS = ("memstore", "file")  # where the live quarter is: memstore and WAL, or a second store file
DEFAULT_LAYOUTS = ("interleaved", "tail", "rewrite", "delete", "mixed", "versions")


def _write(table: storage.Table, writes) -> None:
    """Apply writes, a batch per timestamp (a batch writes at one timestamp)."""
    batches: dict = {}
    for kind, i, ts in writes:
        batch = batches.get(ts)
        if batch is None:
            batch = batches[ts] = table.batch(timestamp=ts, batch_size=10_000)
        if kind == "delete":
            batch.delete(row_key(i))
            continue
        key, data = row_key(i), sample_row(i, 100)[1]
        if kind != "put":  # the same key, other values
            data = sample_row(i + (7 if kind == "put2" else 13), 100)[1]
        batch.put(key, data)
    for batch in batches.values():
        batch.send()


def build(conn: storage.Connection, name: str, rows: int, layout: Layout, variant: str | None) -> storage.Table:
    """Load ``layout``'s writes of ``rows`` sample rows.  ``variant`` None: all
    of it flushed and major-compacted; ``"memstore"``: the late quarter stays
    in the memstore and WAL; ``"file"``: it is flushed into a second store file."""
    table = conn.create_table(
        name, {"cf": {"max_versions": layout.versions}}, split_keys=split_keys(rows),
        settings={"wal_sync": "none", "memstore_flush_size": 1 << 40, "compaction_threshold": 1000},
    )
    _write(table, layout.base(rows))
    if variant is None:
        _write(table, layout.late(rows))
    table.compact(major=True)
    if variant is not None:
        _write(table, layout.late(rows))
        if variant == "file":
            table.flush()
    return table


WRITER_TS = 1 << 40  # every writer put has this timestamp: a rewrite replaces the cell


class Writer:
    """A thread rewriting ``rate`` rows per second in each of ``tables``: the
    same ``rows // 100`` rows of its own over and over (keys spread over the
    key space of ``rows`` sample rows, each a sample key plus a suffix, so
    every region's memstore takes writes)."""

    def __init__(self, tables: list[storage.Table], rows: int, rate: float):
        self.tables, self.rate = tables, rate
        self.keys = [row_key(j * 100 + 50) + struct.pack(">I", j) for j in range(max(rows // 100, 1))]
        self.written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-live-writer", daemon=True)

    def _row(self, i: int) -> tuple[bytes, dict]:
        return self.keys[i % len(self.keys)], sample_row(i, 100)[1]

    def _run(self) -> None:
        start = time.perf_counter()
        i = 0
        while not self._stop.is_set():
            key, data = self._row(i)
            for table in self.tables:
                table.put(key, data, timestamp=WRITER_TS)
            i += 1
            self.written = i
            ahead = start + i / self.rate - time.perf_counter()
            if ahead > 0:
                self._stop.wait(ahead)

    def __enter__(self) -> "Writer":
        for table in self.tables:
            with table.batch(timestamp=WRITER_TS) as batch:
                for i in range(len(self.keys)):
                    batch.put(*self._row(i))
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def embedded(table: storage.Table, versions: int = 1, keep: bool = True):
    """Scans of ``table``; ``keep``: they keep results (live chunks, a clean file's
    streamed batches) for the next; else nothing is kept, what a scan pays when the
    memstore changed since the last one, or a range is read for the first time."""
    def run() -> int:
        return sum(b.num_rows for b in table.scan_batches(columns=COLUMNS, max_versions=versions,
                                                          cache_results=keep))
    return run


def whole_rows(table: storage.Table, path: str, versions: int = 1, keep: bool = True):
    """Scans of ``table`` naming no column: ``dicts``, happybase's ``scan()`` (a
    ``(key, dict)`` pair per row, counted); ``family``, ``scan_batches()`` (the family as a
    map column).  ``keep`` as for :func:`embedded`."""
    if path == "dicts":
        def run() -> int:
            return sum(1 for _ in table.scan(max_versions=versions, cache_results=keep))
    else:
        def run() -> int:
            return sum(b.num_rows for b in table.scan_batches(max_versions=versions, cache_results=keep))
    return run


def connector(root: str, name: str, versions: int = 1, cacheblocks: bool = False, keep: bool = True):
    fmt = TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": name,
                            "hbase.mapreduce.scan.columns": "cf:n cf:s",
                            "hbase.mapreduce.scan.maxversions": str(versions),
                            "hbase.mapreduce.scan.cacheblocks": "true" if cacheblocks else "false",
                            "regionscan.scan.cacheresults": "true" if keep else "false"})
    splits = fmt.get_splits()

    def run() -> int:
        n = 0
        for split in splits:
            reader = fmt.create_batch_reader(split)
            for batch in reader:
                n += batch.num_rows
            reader.close()
        return n
    return run


def flushed_name(layout: str) -> str:
    """The flushed table of a layout (``interleaved`` and ``tail`` hold the same rows: one table)."""
    return "flushed" if layout in ("interleaved", "tail") else f"flushed_{layout}"


def _reader(path: str, root: str, tables: dict, name: str, versions: int, keep: bool = True):
    if path == "embedded":
        return embedded(tables[name], versions, keep)
    if path in ("dicts", "family"):
        return whole_rows(tables[name], path, versions, keep)
    return connector(root, name, versions, cacheblocks=path == "worker", keep=keep)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default=None,
                        help="cpu (default), wall, or thread (the scanning thread's CPU; default with --writer)")
    parser.add_argument("--layouts", default=",".join(DEFAULT_LAYOUTS),
                        help=f"comma-separated layouts among {', '.join(LAYOUTS)} (default: all)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="where the live quarter is: memstore, file or both (default: both)")
    parser.add_argument("--paths", default=",".join(PATHS),
                        help=f"comma-separated read paths among {', '.join(PATHS)} (default: all)")
    parser.add_argument("--writer", type=float, default=0, metavar="RATE",
                        help="scan while a thread puts RATE new rows/s into every table (default: no writer; "
                             "the memstore variant of the layouts asked for)")
    parser.add_argument("--key-width", type=int, default=4, metavar="W",
                        help="row keys of W bytes: 4 (default) the sample table's integer keys, more: "
                             "string keys, 'user' and W - 4 digits")
    parser.add_argument("--hashed", action="store_true",
                        help="with --key-width: 4 bytes of the row number's MD5 before the digits (a salted key)")
    parser.add_argument("--ycsb", action="store_true",
                        help="YCSB's keys: 'user' and the decimal of a 64-bit FNV-1a hash of the row number "
                             "(several widths, no key order)")
    parser.add_argument("--root", default=None, help="folder for the tables (default: a temporary one)")
    parser.add_argument("--reuse", action="store_true",
                        help="with --root: keep its tables from an earlier run (same --rows) instead of building them")
    parser.add_argument("--profile", choices=list(PATHS), default=None,
                        help="print a cProfile of one run of this path on the first layout and variant and stop")
    args = parser.parse_args(argv)
    if args.writer < 0:
        parser.error(f"--writer must be >= 0, not {args.writer}")
    digits = len(str(max(args.rows, 1)))
    if args.key_width != 4 and args.key_width < 4 + digits:
        parser.error(f"--key-width must be 4 or at least {4 + digits} ('user' and {digits} digits for "
                     f"{args.rows:,} rows), not {args.key_width}")
    if args.hashed and args.key_width == 4:
        parser.error("--hashed needs --key-width")
    if args.ycsb and (args.hashed or args.key_width != 4):
        parser.error("--ycsb takes neither --key-width nor --hashed")
    global KEY_WIDTH, HASHED, YCSB
    KEY_WIDTH, HASHED, YCSB = args.key_width, args.hashed, args.ycsb
    layouts = [x for x in args.layouts.split(",") if x]
    variants = [x for x in args.variants.split(",") if x]
    for x in layouts:
        if x not in LAYOUTS:
            parser.error(f"--layouts: unknown layout {x!r} (known: {', '.join(LAYOUTS)})")
    for x in variants:
        if x not in VARIANTS:
            parser.error(f"--variants: unknown variant {x!r} (known: {', '.join(VARIANTS)})")
    paths = [x for x in args.paths.split(",") if x]
    for x in paths:
        if x not in PATHS:
            parser.error(f"--paths: unknown path {x!r} (known: {', '.join(PATHS)})")
    args.paths = paths
    # the worker's reads share one process-wide cache, sized as the engine worker's
    os.environ.setdefault(BLOCK_CACHE_SIZE_ENV, "1g")
    if args.writer:
        variants = ["memstore"]
    if args.clock is None:
        args.clock = "thread" if args.writer else "cpu"
    harness.set_clock(args.clock)
    if args.reuse and not args.root:
        parser.error("--reuse needs --root")
    root = args.root or tempfile.mkdtemp(prefix="bench-live-")
    if not args.reuse:
        shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root, exist_ok=True)
    conn = storage.connect(root, block_cache_size=512 << 20)
    existing = {n.decode() for n in conn.tables()} if args.reuse else set()
    # the tables of a root are built with one key width: --reuse at another would time the wrong keys
    stamp = os.path.join(root, "bench-live-key-width")
    shape = "ycsb" if YCSB else f"{KEY_WIDTH}{' hashed' if HASHED else ''}"
    built = open(stamp).read().strip() if os.path.exists(stamp) else "4"  # older roots: the sample keys
    if existing and built != shape:
        parser.error(f"--reuse: the tables in {root} have keys of {built!r}, not of {shape!r} (--key-width, --hashed, --ycsb)")
    with open(stamp, "w") as f:
        f.write(shape)
    try:
        t0 = time.perf_counter()
        tables: dict = {}
        for layout in layouts:
            name = flushed_name(layout)
            if name not in tables:
                tables[name] = conn.table(name) if name in existing else build(conn, name, args.rows, LAYOUTS[layout], None)
            for variant in variants:
                live = f"live_{layout}_{variant}"
                tables[live] = conn.table(live) if live in existing else build(conn, live, args.rows, LAYOUTS[layout], variant)
        base = flushed_name("interleaved")
        if "delete" in layouts and base not in tables:
            # a delete line's bound reads the base its live tables hold: the same rows, flushed
            tables[base] = conn.table(base) if base in existing else build(conn, base, args.rows, LAYOUTS["interleaved"], None)
        print(f"built {len(tables)} tables of {args.rows:,} rows in {time.perf_counter() - t0:.1f}s "
              f"(clock: {args.clock}; load average {os.getloadavg()[0]:.1f})")
        if args.profile:
            layout = layouts[0]
            fn = _reader(args.profile, root, tables, f"live_{layout}_{variants[0]}", LAYOUTS[layout].versions)
            fn()
            prof = cProfile.Profile()
            prof.enable()
            fn()
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
            return 0
        if args.writer:
            quiet = tables["quiet"] = build(conn, "quiet", args.rows, LAYOUTS["interleaved"], None)
            written = [t for n, t in tables.items() if n != "quiet"]
            with Writer(written, args.rows, args.writer) as writer:
                failed = _measure(root, tables, layouts, variants, args, quiet="quiet", caches=[conn.block_cache])
            print(f"writer: {writer.written:,} puts into each table at {args.writer:,.0f} rows/s "
                  f"(rewriting {len(writer.keys):,} rows)")
            del quiet
            return 1 if failed else 0
        return 1 if _measure(root, tables, layouts, variants, args, caches=[conn.block_cache]) else 0
    finally:
        conn.close()
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)


def _measure(root: str, tables: dict, layouts: list, variants: list, args, quiet: str | None = None,
             caches: list = ()) -> bool:
    """Time both read paths of every layout's tables (flushed and live runs
    alternating); print the ratios; True when one misses.  ``quiet``: a
    flushed table no writer touches, timed too and compared against.  ``caches``: the
    embedded block caches the built reads empty before each run (the process's too)."""
    caches = list(caches)
    failed = False
    for path in args.paths:
        for layout in layouts:
            versions = LAYOUTS[layout].versions
            names = [flushed_name(layout)] + [f"live_{layout}_{v}" for v in variants]
            if quiet is not None:
                names.append(quiet)
            readers = [_reader(path, root, tables, n, versions) for n in names]
            # the reads keep results between reads (live chunks, a clean file's batches, the
            # decoded WAL); also time both sides building everything, flushed first
            cold = [_reader(path, root, tables, n, versions, keep=False) for n in names[:len(variants) + 1]]
            # a delete line's bound: the live tables' base rows read as a flushed table, in the same rounds
            bound = layout == "delete" and flushed_name("interleaved") in tables
            if bound:
                cold.append(_reader(path, root, tables, flushed_name("interleaved"), versions, keep=False))
            others = best_of(args.repeat, *readers)
            (base_s, base_n), *others = others
            cold_results = _best_built(args.repeat, cold, caches)
            base_read_s = cold_results.pop()[0] if bound else None
            if cold_results:
                (cold_base_s, _), *cold_results = cold_results
                print(f"{path:<10} {layout:<11} flushed, built     {cold_base_s:8.4f} s  "
                      f"{base_n / cold_base_s:>12,.0f} rows/s  (nothing kept)")
            quiet_s = others.pop()[0] if quiet is not None else None
            print(f"{path:<10} {layout:<11} flushed            {base_s:8.4f} s  {base_n / base_s:>12,.0f} rows/s")
            if quiet_s is not None:
                print(f"{path:<10} {layout:<11} flushed, no writer {quiet_s:8.4f} s")
            for variant, (secs, n) in zip(variants, others):
                failed |= not _report(path, layout, f"live, {variant:<12}", base_s, base_n, secs, n,
                                      "" if quiet_s is None else f"  {quiet_s / secs:5.2f}x of quiet")
            for variant, (secs, n) in zip(variants, cold_results):
                failed |= not _report(path, layout, f"built, {variant:<11}", cold_base_s, base_n, secs, n,
                                      "  (nothing kept, against the flushed table built)")
            if base_read_s is not None and cold_results:
                _delete_bound(path, tables, cold_base_s, base_read_s, args.repeat)
    return failed


def _delete_bound(path: str, tables: dict, flushed_s: float, base_s: float, repeat: int) -> None:
    """Print the most a built ``delete`` line can reach while a resolution hands out
    one array per column: the live table's base file read as it is (``base_s``: the
    flushed ``interleaved`` table, the same 200K rows compacted the same way, timed in
    the same rounds as the others) plus one plain copy of the kept rows' values (the
    flushed ``delete`` table's columns), against the flushed ``delete`` table built."""
    kept = [b for b in tables[flushed_name("delete")].scan_batches(columns=COLUMNS, cache_results=False)]
    buffers = [np.frombuffer(buf, np.uint8) for b in kept for col in b.columns[1:]
               for buf in col.buffers()[1:] if buf is not None]

    def copy() -> int:
        return sum(len(np.copy(buf)) for buf in buffers)
    (copy_s, copied), = best_of(repeat, copy)
    print(f"{path:<10} delete      bound: the base read {base_s:.4f} s + one copy of the kept values "
          f"({copied / 1e6:.1f} MB) {copy_s:.4f} s: at most {flushed_s / (base_s + copy_s):4.2f}x of flushed")


def _empty_caches(caches: list) -> None:
    """Empty every block cache a read could hit: the embedded connection's and the
    process's (the connector's), so a built read decodes its blocks again."""
    for cache in caches + [shared_block_cache()]:
        if cache is not None:
            cache.clear()


def _best_built(repeat: int, fns: list, caches: list) -> list:
    """Best of ``repeat`` runs of each of ``fns`` (alternating), every run after every
    block cache was emptied (outside the timed span): both sides of a built
    comparison read their blocks from the files (in the OS page cache) and decode
    them, where a block cache hit would make the flushed side a lookup."""
    for fn in fns:  # the OS page cache and the code warm
        fn()
    best = [float("inf")] * len(fns)
    results: list = [None] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            _empty_caches(caches)
            gc.collect()
            t0 = harness.clock()
            results[i] = fn()
            best[i] = min(best[i], harness.clock() - t0)
    return list(zip(best, results))


def _report(path: str, layout: str, what: str, base_s: float, base_n: int, secs: float, n: int, note: str) -> bool:
    """Print one live figure against the flushed one; True when it meets the target."""
    ratio = base_s / secs
    ok = ratio >= 0.67 and n == base_n
    print(f"{path:<10} {layout:<11} {what} {secs:8.4f} s  {n / secs:>12,.0f} rows/s  "
          f"{ratio:5.2f}x of flushed  {'meets' if ok else 'MISSES'} >= 0.67x{note}"
          + ("" if n == base_n else f"  ROW COUNT {n} != {base_n}"))
    return ok


if __name__ == "__main__":
    sys.exit(main())
