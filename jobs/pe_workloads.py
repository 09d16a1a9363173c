"""The operations of ``regionscan pe``: one client loop per command, as in ``hbase pe``.

Layout (hbase pe's): table ``TestTable``, family ``info``, one column
``info:0``; row ``i`` has the 26-digit zero-padded key ``format(i)`` and a
``--valueSize`` value of letters repeated in runs of 8 (compressible the way
hbase pe's generated values are).  Client ``c`` owns rows
``[c * rows, (c + 1) * rows)``; random commands draw from all
``rows * clients`` rows.

Each client loop times every operation with ``time.perf_counter_ns`` into a
preallocated NumPy array.  Keys, values and random draws are prepared before
the clock starts, and byte counting happens after the clock stops, so an
operation's latency holds the engine call alone.

Meta commands work on a separate meta-like table (``hbase:meta``'s
layout: family ``info``, row ``"<table>,<start key>,<region id>.<encoded>."``
with columns ``regioninfo``, ``state``, ``server``, ``serverstartcode`` and
``seqnumDuringOpen``).  ``metaRandomRead`` finds the region of a random key
the way an HBase client locates a region: a reversed scan from
``"<table>,<key>,99999999999999"`` with limit 1.
"""

from __future__ import annotations

import hashlib
import struct
import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from storage.filters import coerce_filter
from storage.keys import key_after

from .pe_filters import with_filter_all

__all__ = [
    "PeOptions",
    "Command",
    "COMMANDS",
    "FAMILY",
    "COLUMN",
    "INCREMENT_COLUMN",
    "META_FAMILY",
    "format_row",
    "meta_split_key",
    "meta_row_key",
    "meta_lookup_key",
    "value_pool",
    "value_offsets",
    "meta_row",
    "run_client",
]

FAMILY = "info"
COLUMN = b"info:0"
INCREMENT_COLUMN = b"info:IncrementTest"  # hbase pe's increment qualifier: the test's name
META_FAMILY = "info"
META_COLUMNS = (b"info:regioninfo", b"info:state", b"info:server", b"info:serverstartcode", b"info:seqnumDuringOpen")
ROW_LENGTH = 26


def format_row(i: int) -> bytes:
    """hbase pe's row key: ``i`` as 26 zero-padded decimal digits."""
    return b"%026d" % i


def meta_split_key(i: int) -> bytes:
    """hbase pe's meta split key: ``i`` as 11 zero-padded decimal digits."""
    return b"%011d" % i


def meta_row_key(table: str, i: int, region_id: int) -> bytes:
    """The meta row of the fake region starting at ``meta_split_key(i)``, named as HBase names regions."""
    prefix = b"%s,%s,%d" % (table.encode(), meta_split_key(i), region_id)
    encoded = hashlib.md5(prefix).hexdigest().encode()
    return prefix + b"." + encoded + b"."


def meta_lookup_key(table: str, key: bytes) -> bytes:
    """Where a region lookup for ``key`` starts its reversed scan (HBase's "closest row before")."""
    return b"%s,%s,99999999999999" % (table.encode(), key)


@dataclass(frozen=True)
class PeOptions:
    """Validated options of one ``regionscan pe`` run."""

    table: str = "TestTable"
    meta_table: str = "TestTable-meta"
    rows: int = 100_000
    value_size: int = 1024
    presplit: int = 0
    caching: int = 30
    block_size: int = 65536
    compress: str = "NONE"
    bloom_filter: str = "ROW"
    clients: int = 1
    filter_all: bool = False
    sample_rate: float = 1.0
    auto_flush: bool = False
    write_to_wal: bool = True
    buffer_size: int = 2 << 20
    seed: int | None = None
    multi_get: int = 0  # randomRead: keys per multi-get (one operation each); 0: one get per operation

    @property
    def total_rows(self) -> int:
        return self.rows * self.clients

    @property
    def ops_per_client(self) -> int:
        """Operations each client performs: ``--rows`` scaled by ``--sampleRate``."""
        return max(1, int(self.rows * self.sample_rate))

    def for_kind(self, kind: str) -> "PeOptions":
        """The options a command of ``kind`` runs with: ``--sampleRate`` thins reads only."""
        if kind in ("read", "meta_read") or self.sample_rate == 1.0:
            return self
        return replace(self, sample_rate=1.0)

    def ops_label(self, command: str) -> str:
        """What one client of ``command`` performs, for the "starting" line:
        ``5,000 ops``, or ``5,000 gets in 50 multi-gets of 100`` (``--multiGet``)."""
        ops = self.ops_per_client
        if command == "randomRead" and self.multi_get:
            return f"{ops:,} gets in {-(-ops // self.multi_get):,} multi-gets of {self.multi_get}"
        return f"{ops:,} ops"

    @property
    def write_batch_rows(self) -> int:
        """Puts buffered per send: the write buffer divided by an estimated put size."""
        return max(1, self.buffer_size // (ROW_LENGTH + len(COLUMN) + self.value_size + 16))


@dataclass(frozen=True)
class Command:
    """A pe command: its hbase pe test name, the table it needs and its client loop."""

    name: str
    test_name: str
    kind: str  # "write", "read", "meta_write" or "meta_read"
    loop: Callable
    description: str


def value_pool(value_size: int, rng: np.random.Generator) -> bytes:
    """Random letters in runs of 8, long enough to slice many distinct values from."""
    runs = (value_size * 64) // 8 + 2
    letters = rng.integers(ord("A"), ord("Z") + 1, size=runs, dtype=np.uint8)
    return np.repeat(letters, 8).tobytes()


def value_offsets(pool: bytes, value_size: int, n: int, rng: np.random.Generator) -> list[int]:
    """``n`` random start offsets of ``value_size``-byte values in ``pool``."""
    return rng.integers(0, len(pool) - value_size + 1, size=n).tolist()


class _Client:
    """State of one client loop: its table, options, row range and latency array."""

    def __init__(self, table, opts: PeOptions, client: int, rng: np.random.Generator):
        self.table = table
        self.opts = opts
        self.client = client
        self.rng = rng
        self.start_row = client * opts.rows
        self.ops = opts.ops_per_client
        self.latencies = np.zeros(self.ops, dtype=np.int64)
        self.done = 0  # operations completed (fewer than ops when a scanner runs dry)
        self.rows = 0
        self.nbytes = 0
        self.t_begin = self.t_end = 0

    def begin(self) -> None:
        """Start the client's clock: preparation before this is not timed."""
        self.t_begin = time.perf_counter_ns()

    def end(self) -> None:
        self.t_end = time.perf_counter_ns()

    def random_rows(self, n: int, high: int) -> list[int]:
        return self.rng.integers(0, high, size=n).tolist()


def _row_bytes(key: bytes, data: dict) -> int:
    return len(key) + sum(len(v) for v in data.values())


def _timed_each(c: _Client, items: list, op: Callable) -> list:
    """One timed operation ``op(item)`` per item, in order; returns their
    results (counted by the caller after the clock stops)."""
    lat = c.latencies = np.zeros(len(items), dtype=np.int64)
    perf = time.perf_counter_ns
    out = [None] * len(items)
    c.begin()
    for i, item in enumerate(items):
        t0 = perf()
        out[i] = op(item)
        lat[i] = perf() - t0
    c.end()
    c.done = len(items)
    return out


def _count_row_lists(c: _Client, lists: list) -> None:
    """Count the rows and bytes of operations that each returned a list of
    ``(row, data)`` pairs (after the clock stops)."""
    for rows in lists:
        c.rows += len(rows)
        c.nbytes += sum(_row_bytes(k, d) for k, d in rows)


def _scan_filter(opts: PeOptions, extra: str | None = None):
    """The filter of a read: ``extra`` (a filter string) and, with --filterAll, FilterAllFilter.

    Parsed here, before any clock starts: the operations time the engine, not the filter parser.
    """
    if opts.filter_all:
        return with_filter_all(extra)
    return coerce_filter(extra)


# -- writes ---------------------------------------------------------------
def _write_loop(c: _Client, keys: list[bytes]) -> None:
    opts = c.opts
    vs = opts.value_size
    pool = value_pool(vs, c.rng)
    offsets = value_offsets(pool, vs, len(keys), c.rng)
    lat = c.latencies
    perf = time.perf_counter_ns
    col = COLUMN
    batch = None if opts.auto_flush else c.table.batch(batch_size=opts.write_batch_rows)
    put = c.table.put if batch is None else batch.put
    c.begin()
    for i, key in enumerate(keys):
        o = offsets[i]
        data = {col: pool[o : o + vs]}
        t0 = perf()
        put(key, data)
        lat[i] = perf() - t0
    if batch is not None:
        batch.send()  # hbase pe's final flushCommits: counted in the client's time, not in an operation
    c.end()
    c.done = len(keys)
    c.rows = len(keys)
    c.nbytes = len(keys) * (ROW_LENGTH + vs)


def sequential_write(c: _Client) -> None:
    _write_loop(c, [format_row(c.start_row + i) for i in range(c.ops)])


def random_write(c: _Client) -> None:
    _write_loop(c, [format_row(i) for i in c.random_rows(c.ops, c.opts.total_rows)])


def increment(c: _Client) -> None:
    """Add 1 to the counter ``info:IncrementTest`` of each row, one increment per
    operation.  As in hbase pe's IncrementTest, every client works on rows
    ``[0, --rows)``, so concurrent clients increment the same counters."""
    keys = [format_row(i) for i in range(c.ops)]
    lat = c.latencies
    perf = time.perf_counter_ns
    inc = c.table.counter_inc
    column = INCREMENT_COLUMN
    c.begin()
    for i, key in enumerate(keys):
        t0 = perf()
        inc(key, column, 1)
        lat[i] = perf() - t0
    c.end()
    c.done = c.rows = len(keys)
    c.nbytes = len(keys) * (ROW_LENGTH + 8)


# -- point reads ----------------------------------------------------------
def _get_loop(c: _Client, keys: list[bytes]) -> None:
    lat = c.latencies
    perf = time.perf_counter_ns
    table = c.table
    columns = [COLUMN]
    flt = _scan_filter(c.opts)
    results = [None] * len(keys)
    c.begin()
    if flt is None:
        row = table.row
        for i, key in enumerate(keys):
            t0 = perf()
            results[i] = row(key, columns=columns)
            lat[i] = perf() - t0
    else:
        # A Get with a filter: a one-row scan, which is also how table.row() reads
        scan = table.scan
        for i, key in enumerate(keys):
            t0 = perf()
            results[i] = list(scan(row_start=key, row_stop=key_after(key), columns=columns, filter=flt))
            lat[i] = perf() - t0
    c.end()
    if flt is not None:
        results = [r[0][1] if r else {} for r in results]
    c.done = len(keys)
    for key, data in zip(keys, results):
        if data:
            c.rows += 1
            c.nbytes += _row_bytes(key, data)


def sequential_read(c: _Client) -> None:
    _get_loop(c, [format_row(c.start_row + i) for i in range(c.ops)])


def random_read(c: _Client) -> None:
    keys = [format_row(i) for i in c.random_rows(c.ops, c.opts.total_rows)]
    if c.opts.multi_get:
        _multi_get_loop(c, keys, c.opts.multi_get)
    else:
        _get_loop(c, keys)


def _multi_get_loop(c: _Client, keys: list[bytes], size: int) -> None:
    """hbase pe's ``--multiGet``: the keys in groups of ``size``, one
    multi-get (``table.rows``) per operation; the last group may be smaller."""
    rows = c.table.rows
    columns = [COLUMN]
    groups = [keys[i : i + size] for i in range(0, len(keys), size)]
    _count_row_lists(c, _timed_each(c, groups, lambda group: rows(group, columns=columns)))


# -- scans ----------------------------------------------------------------
def _next_loop(c: _Client, rows_iter) -> None:
    """One operation per next() of an open scanner, as hbase pe's ScanTest."""
    lat = c.latencies
    perf = time.perf_counter_ns
    got = []
    append = got.append
    c.begin()
    for i in range(c.ops):
        t0 = perf()
        item = next(rows_iter, None)
        lat[i] = perf() - t0
        if item is None:
            break
        append(item)
    c.end()
    c.done = len(got) if len(got) == c.ops else len(got) + 1  # a final next() that found nothing still ran
    c.latencies = lat[: c.done]
    c.rows = len(got)
    c.nbytes = sum(_row_bytes(k, d) for k, d in got)


def scan(c: _Client) -> None:
    opts = c.opts
    it = iter(c.table.scan(row_start=format_row(c.start_row), columns=[COLUMN], batch_size=opts.caching,
                           filter=_scan_filter(opts)))
    _next_loop(c, it)


def reverse_scan(c: _Client) -> None:
    opts = c.opts
    it = iter(c.table.scan(row_start=format_row(c.start_row + opts.rows - 1), columns=[COLUMN],
                           batch_size=opts.caching, reverse=True, filter=_scan_filter(opts)))
    _next_loop(c, it)


def _range_loop(c: _Client, starts: list[int], width: int, filter_string: str | None) -> None:
    """One operation per whole scan of a key range; the rows are counted after the clock stops."""
    scan = c.table.scan
    caching = c.opts.caching
    columns = [COLUMN]
    ranges = [(format_row(s), format_row(s + width)) if width else (None, None) for s in starts]
    out = _timed_each(c, ranges, lambda r: list(scan(row_start=r[0], row_stop=r[1], columns=columns,
                                                     batch_size=caching, filter=filter_string)))
    _count_row_lists(c, out)


def _scan_range(width: int) -> Callable[[_Client], None]:
    def loop(c: _Client) -> None:
        _range_loop(c, c.random_rows(c.ops, c.opts.total_rows), width, _scan_filter(c.opts))

    loop.__name__ = f"scan_range_{width}"
    return loop


def filter_scan(c: _Client) -> None:
    """Each operation scans the whole table with a value filter that (almost) never matches."""
    vs = c.opts.value_size
    pool = value_pool(vs, c.rng)
    flts = []
    for o in value_offsets(pool, vs, c.ops, c.rng):
        value = pool[o : o + vs].decode("ascii")  # letters only: no quoting needed in the filter string
        flts.append(_scan_filter(c.opts, f"SingleColumnValueFilter('{FAMILY}', '0', =, 'binary:{value}', true, true)"))
    scan = c.table.scan
    caching = c.opts.caching
    columns = [COLUMN]
    _count_row_lists(c, _timed_each(c, flts, lambda flt: list(scan(columns=columns, batch_size=caching, filter=flt))))


# -- meta -----------------------------------------------------------------
def meta_row(table: str, i: int, rng: np.random.Generator, now_ms: int) -> tuple[bytes, dict]:
    """Row and columns of fake region ``i`` of ``table`` (start key ``i``, end key ``i + 1``)."""
    region_id = now_ms
    start, end = meta_split_key(i), meta_split_key(i + 1)
    info = struct.pack(">I", len(start)) + start + struct.pack(">I", len(end)) + end + struct.pack(">q", region_id)
    return meta_row_key(table, i, region_id), {
        b"info:regioninfo": table.encode() + b"\x00" + info,
        b"info:state": b"OPEN",
        b"info:server": b"localhost:60010",
        b"info:serverstartcode": struct.pack(">q", int(rng.integers(0, 1 << 62))),
        b"info:seqnumDuringOpen": struct.pack(">q", i),
    }


def meta_write(c: _Client) -> None:
    """Insert fake regions with contiguous split keys into the meta table, one row per operation."""
    opts = c.opts
    now = int(time.time() * 1000)
    prepared = [meta_row(opts.table, c.start_row + i, c.rng, now) for i in range(c.ops)]
    lat = c.latencies
    perf = time.perf_counter_ns
    batch = None if opts.auto_flush else c.table.batch(batch_size=opts.write_batch_rows)
    put = c.table.put if batch is None else batch.put
    c.begin()
    for i, (key, data) in enumerate(prepared):
        t0 = perf()
        put(key, data)
        lat[i] = perf() - t0
    if batch is not None:
        batch.send()
    c.end()
    c.done = c.rows = len(prepared)
    c.nbytes = sum(_row_bytes(k, d) for k, d in prepared)


def meta_random_read(c: _Client) -> None:
    """Locate the region of a random key: a reversed 1-row scan, as HBase's meta lookups."""
    opts = c.opts
    prefix = opts.table.encode() + b","
    lookups = [meta_lookup_key(opts.table, meta_split_key(k)) for k in c.random_rows(c.ops, opts.rows)]
    lat = c.latencies
    perf = time.perf_counter_ns
    scan_ = c.table.scan
    found = [None] * len(lookups)
    c.begin()
    for i, key in enumerate(lookups):
        t0 = perf()
        found[i] = next(iter(scan_(row_start=key, reverse=True, limit=1)), None)
        lat[i] = perf() - t0
    c.end()
    c.done = len(lookups)
    for item in found:
        if item is not None and item[0].startswith(prefix):
            c.rows += 1
            c.nbytes += _row_bytes(*item)


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("sequentialWrite", "SequentialWriteTest", "write", sequential_write, "write rows in key order"),
        Command("randomWrite", "RandomWriteTest", "write", random_write, "write rows at random keys"),
        Command("increment", "IncrementTest", "write", increment,
                "increment a counter (info:IncrementTest) in rows [0, --rows), the same rows for every client"),
        Command("sequentialRead", "SequentialReadTest", "read", sequential_read, "get rows in key order"),
        Command("randomRead", "RandomReadTest", "read", random_read,
                "get rows at random keys (--multiGet N: N keys per get)"),
        Command("scan", "ScanTest", "read", scan, "one scanner, one row per operation"),
        Command("reverseScan", "ReverseScanTest", "read", reverse_scan, "one reversed scanner, one row per operation"),
        Command("scanRange10", "RandomScanWithRange10Test", "read", _scan_range(10), "scan 10 rows from a random key"),
        Command("scanRange100", "RandomScanWithRange100Test", "read", _scan_range(100), "scan 100 rows from a random key"),
        Command("scanRange1000", "RandomScanWithRange1000Test", "read", _scan_range(1000),
                "scan 1000 rows from a random key"),
        Command("filterScan", "FilteredScanTest", "read", filter_scan,
                "full scan with a value filter per operation (--filterAll: drop every row server-side)"),
        Command("metaWrite", "MetaWriteTest", "meta_write", meta_write, "fill a meta-like table with region rows"),
        Command("metaRandomRead", "MetaRandomReadTest", "meta_read", meta_random_read,
                "region lookups: reversed 1-row scans from a random key"),
    )
}


def run_client(command: Command, table, opts: PeOptions, client: int, rng: np.random.Generator):
    """Run one client of ``command``; returns the finished client state."""
    c = _Client(table, opts, client, rng)
    command.loop(c)
    return c
