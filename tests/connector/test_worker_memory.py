"""The engine worker's memory is bounded by its block cache plus a fixed margin.

A real worker process with a 32 MiB cache reads two tables several times
larger than the cache (one zstd-compressed, whose blocks decode into the
worker's own memory, one stored plain, which a mapped reader would hold as
file pages) through several column sets, two reads at a time.  Its
anonymous resident memory (RssAnon in /proc) stays within its start plus
the cache plus :data:`MEMORY_MARGIN`, and its file-backed resident memory
(RssFile) does not grow with the tables.  Beside it, a cache filled in this
process frees, when emptied, about what it was charged: each block is
charged what it really holds, its arrays' objects included.  Those reads ask
to cache their blocks; a read that does not ask, of a table bigger than a
quarter of the cache, reads uncached and leaves the cache's working set in place.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import os
import socket
import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from engine_worker_process import python_worker

import storage
from storage.engine import BulkLoadTask, commit_load, table_regions
from connector.worker import read_ops
from connector.worker.protocol import read_frame, request_bytes
from connector.worker.server import MEMORY_MARGIN
from storage.region import region_snapshots
from storage.region.region_snapshots import BLOCK_CACHE_SIZE_ENV, shared_block_cache
from storage.vfs.fs import FileSystem

SECRET = "memory-test-secret"
CACHE = 32 << 20
COMPRESSED_ROWS = 600_000
PLAIN_ROWS = 100_000
COLUMNS = [f"c{j}" for j in range(6)]
MAPPING = "k BINARY :key, " + ", ".join(f"{c} BINARY cf:{c}" for c in COLUMNS)
COLUMN_SETS = [COLUMNS, ["c0"], ["c2", "c4"]]


def _load(root: str, name: str, rows: int, compression: str | None, values) -> None:
    """Bulk-load ``rows`` rows of six columns (``values(n)`` makes one column of n) into a
    new four-region table: Arrow batches straight to store files, no Python loop per row."""
    with storage.connect(root) as conn:
        splits = [b"r%09d" % (rows * i // 4) for i in range(1, 4)]
        conn.create_table(name, {"cf": {"compression": compression}}, split_keys=splits)
    fs = FileSystem(root).sub(name)
    regions, families = table_regions(fs)
    task = BulkLoadTask(fs, "load", "p0", regions, families, timestamp=1)
    for start in range(0, rows, 200_000):
        n = min(200_000, rows - start)
        digits = pc.utf8_lpad(pc.cast(pa.array(np.arange(start, start + n)), pa.string()), 9, "0")
        keys = pc.cast(pc.binary_join_element_wise(pa.array(["r"] * n), digits, ""), pa.binary())
        task.add(pa.RecordBatch.from_pydict({"key": keys, **{f"cf:{c}": values(n) for c in COLUMNS}}))
    commit_load(fs, "load", task.finish())


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("worker-memory") / "root")
    rng = np.random.default_rng(3)

    def numbers(n: int) -> pa.Array:  # text numbers: compress about 2:1, decode to the worker's memory
        return pc.cast(pc.cast(pa.array(rng.integers(0, 10**9, n)), pa.string()), pa.binary())

    def noise(n: int, width: int = 64) -> pa.Array:  # incompressible, stored plain
        offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
        return pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                            pa.py_buffer(rng.bytes(n * width))])

    _load(path, "packed", COMPRESSED_ROWS, "zstd", numbers)
    _load(path, "plain", PLAIN_ROWS, None, noise)
    return path


def _memory(pid: int) -> dict[str, int]:
    """RssAnon, RssFile and VmHWM of ``pid`` in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("RssAnon", "RssFile", "VmHWM"):
                out[name] = int(value.split()[0]) * 1024
    return out


def _ask(port: int, doc: dict) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    sock.sendall(request_bytes({"v": 1, "secret": SECRET, **doc}))
    sock.shutdown(socket.SHUT_WR)
    return sock


def _answer(port: int, doc: dict) -> dict:
    with _ask(port, doc) as sock:
        return read_frame(sock.makefile("rb"))


def _schema(columns: list[str]) -> str:
    return json.dumps({"type": "struct", "fields": [
        {"name": c, "type": "binary", "nullable": True, "metadata": {}} for c in columns]})


def _read_task(port: int, options: dict, columns: list[str], splits, rows: list[int]) -> None:
    with _ask(port, {"op": "read", "options": options, "columns": columns, "schema": _schema(columns),
                     "splits": splits}) as sock:
        f = sock.makefile("rb")
        head = read_frame(f)
        assert head["ok"], head
        rows.append(sum(batch.num_rows for batch in pa.ipc.open_stream(f)))
        assert read_frame(f)["ok"]


def _query(port: int, root: str, table: str, columns: list[str], **extra: str | None) -> int:
    """Plan a read of ``columns`` in two tasks and read both at once; return the rows read.
    The read caches its blocks (``hbase.mapreduce.scan.cacheblocks``), as a read that asks
    does whatever its size, so the bound is measured with the cache full; ``extra``: more
    options (None leaves one out)."""
    options = {"root": root, "table": table, "hbase.columns.mapping": MAPPING,
               "hbase.mapreduce.scan.cacheblocks": "true", **extra}
    options = {k: v for k, v in options.items() if v is not None}  # None: the option left out
    plan = _answer(port, {"op": "plan", "options": options, "columns": columns, "schema": _schema(columns),
                          "parallelism": 2})
    assert plan["ok"], plan
    rows: list[int] = []
    readers = [threading.Thread(target=_read_task, args=(port, options, columns, task["splits"], rows))
               for task in plan["tasks"]]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(120)
    return sum(rows)


def test_worker_memory_stays_within_its_cache_plus_the_margin(root, monkeypatch):
    monkeypatch.setenv(BLOCK_CACHE_SIZE_ENV, str(CACHE))
    monkeypatch.delenv("REGIONSCAN_MMAP", raising=False)  # the worker's own default
    with python_worker(SECRET) as (proc, port, _line):
        assert _answer(port, {"op": "stats"})["block_cache"]["capacity_bytes"] == CACHE
        start = _memory(proc.pid)
        peak_anon = 0
        seen = []
        for _ in range(2):
            for table, rows in (("packed", COMPRESSED_ROWS), ("plain", PLAIN_ROWS)):
                for columns in COLUMN_SETS:
                    assert _query(port, root, table, columns) == rows
                    now = _memory(proc.pid)
                    peak_anon = max(peak_anon, now["RssAnon"])
                    seen.append(f"{table}{columns}: anon {now['RssAnon'] >> 20} MiB")
        cache = _answer(port, {"op": "stats"})["block_cache"]
        end = _memory(proc.pid)
    # the peak between samples too: the high-water mark less the file pages (not the worker's anonymous memory)
    peak_anon = max(peak_anon, end["VmHWM"] - end["RssFile"])
    over = peak_anon - start["RssAnon"] - CACHE
    report = (f"RssAnon {start['RssAnon'] >> 20} MiB at start, peak {peak_anon >> 20} MiB: {over / 2**20:.0f} MiB"
              f" over the {CACHE >> 20} MiB cache (margin {MEMORY_MARGIN >> 20} MiB); RssFile"
              f" {start['RssFile'] >> 20} -> {end['RssFile'] >> 20} MiB; VmHWM {end['VmHWM'] >> 20} MiB; {seen}")
    print(report)
    assert CACHE // 2 < cache["used_bytes"] <= CACHE and cache["evictions"] > 0, cache  # the tables overflow it
    assert over <= MEMORY_MARGIN, report
    # store files are read, not mapped: the tables' pages are not the worker's (the plain one is 40 MB)
    assert end["RssFile"] - start["RssFile"] < 16 << 20, report


def _settled_rss_anon() -> int:
    """This process's RssAnon once freed memory went back to the system (Arrow's pool, glibc's heap)."""
    gc.collect()
    pa.default_memory_pool().release_unused()
    ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    return _memory(os.getpid())["RssAnon"]


def test_a_full_cache_frees_about_what_it_was_charged(root, monkeypatch):
    monkeypatch.setattr(region_snapshots, "_caches", {})
    monkeypatch.setenv(BLOCK_CACHE_SIZE_ENV, str(CACHE))
    options = {"root": root, "table": "packed", "hbase.columns.mapping": MAPPING, "regionscan.pin.register": "false",
               "hbase.mapreduce.scan.cacheblocks": "true"}  # asked: cached whatever the table's size
    plan = read_ops.plan({"options": options, "columns": COLUMNS, "schema": _schema(COLUMNS), "parallelism": 1})
    for task in plan["tasks"]:
        req = {"options": options, "columns": COLUMNS, "schema": _schema(COLUMNS), "splits": task["splits"]}
        for _batch in read_ops.read_batches(req, read_ops.read_schema(req), {}):
            pass
    cache = shared_block_cache()
    charged = cache.used_bytes
    assert charged > CACHE // 2 and cache.evictions > 0
    full = _settled_rss_anon()
    cache.clear()
    freed = full - _settled_rss_anon()
    message = f"emptying a cache charged {charged >> 20} MiB freed {freed >> 20} MiB"
    print(message)
    assert freed >= charged // 2, message  # the blocks' memory does come back: the measure means something
    # before blocks were charged their objects, a cache freed 1.6 times its charge
    assert freed <= charged * 1.15, message


def test_a_big_scan_leaves_the_cache_to_the_working_set(root, monkeypatch):
    """A read of a table bigger than a quarter of the worker's cache, which does not say
    whether to cache blocks, reads uncached (HBase's big scans skip the block cache): the
    blocks a small table's reads keep stay in the cache and are found again after it, and
    the big reads evict nothing.  Cached, the same reads evict the small table's blocks
    (the first test's reads)."""
    _load(root, "small", 2_000, None, lambda n: pa.array([b"v%08d" % i for i in range(n)]))
    monkeypatch.setenv(BLOCK_CACHE_SIZE_ENV, str(CACHE))
    with python_worker(SECRET) as (_proc, port, _line):
        assert _query(port, root, "small", COLUMNS) == 2_000  # cached, as it asks
        kept = _answer(port, {"op": "stats"})["block_cache"]
        assert kept["entries"] > 0 and kept["evictions"] == 0, kept
        for columns in (COLUMNS, ["c2", "c4"]):  # the worker's default: no cacheblocks option
            assert _query(port, root, "packed", columns, **{"hbase.mapreduce.scan.cacheblocks": None}) \
                == COMPRESSED_ROWS
        after = _answer(port, {"op": "stats"})["block_cache"]
        assert (after["entries"], after["used_bytes"], after["evictions"]) == \
            (kept["entries"], kept["used_bytes"], 0), after
        assert _query(port, root, "small", COLUMNS) == 2_000
        again = _answer(port, {"op": "stats"})["block_cache"]
        assert again["hits"] - after["hits"] == kept["entries"] and again["misses"] == after["misses"], again
