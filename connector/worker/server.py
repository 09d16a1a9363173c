"""The engine worker's socket server: one long-lived process per JVM, serving its requests over loopback.

Started by the JVM's ``WorkerProcess`` (``python -m connector.engine_worker``) with the
secret in ``REGIONSCAN_WORKER_SECRET``; imports what a read would import on
first use (:func:`warm_up`) while its read threads' heaps are faulted in
(:func:`.allocator.prefault_heaps`), binds 127.0.0.1 on a free port and
prints ``regionscan-engine-worker 1 port=<port> pid=<pid>`` as its first
line.  Each connection carries one request; connections are served by
threads, so a JVM's concurrent tasks read in parallel (the scan and the
SerDe's Arrow kernels release the GIL for much of their work), and the
process-wide block cache stays warm across tasks and queries.  The worker
exits when its stdin closes (the JVM ended).
"""

from __future__ import annotations

import importlib
import os
import socketserver
import sys
import threading
import time
import traceback
from typing import Any

import pyarrow as pa

from storage import InvalidArgument
from storage.engine import BLOCK_CACHE_SIZE_ENV, CACHE_RESULTS_ENV, MMAP_ENV, shared_block_cache

from . import read_ops, task_aggregates, writes
from .aggregates import count
from .allocator import PREFAULT_BYTES, prefault_heaps
from .catalog import catalog
from .protocol import VERSION, ProtocolError, SocketSink, read_request, write_frame

__all__ = ["WorkerServer", "serve", "main", "warm_up", "WORKER_BLOCK_CACHE_SIZE", "MEMORY_MARGIN", "FIRST_USE_MODULES"]

#: the worker's block cache unless ``spark.regionscan.worker.blockCacheSize`` says otherwise
WORKER_BLOCK_CACHE_SIZE = 1 << 30

MEMORY_MARGIN = 256 << 20
"""What the worker's anonymous resident memory may hold beyond its start (the interpreter and
libraries, about 40 MiB) and its block cache: the batches of the reads in flight, their
buffers and the allocator's slack.  Measured at its peak (VmHWM) 71 MiB over a 32 MiB cache,
85 MiB over 64 MiB and 211 MiB over 512 MiB (tables 2 to 12 times the cache, six column
sets each; the largest over a plain table of 64-byte values, whose blocks are read whole);
docs/connector.md has the numbers and tests/connector/test_worker_memory.py holds the bound."""

FIRST_USE_MODULES = ("pyspark.sql.types", "pyspark.sql.pandas.types", "serde.builtin_types", "serde.binary_serde",
                     "serde.string_serde", "serde.json_serde", "serde.avro_serde", "numpy.ma",
                     "dateutil.relativedelta", "encodings.utf_32_le")
"""Modules a read imports on its first use, not at the worker's start: Spark's schema types (a
read's Arrow schema), the built-in SerDes (the registry loads them by name) and their typed
codecs, what pyarrow and numpy load lazily when dates and masked values first pass, and the
codec the request parser's JSON limits check uses.  Found with ``python -X importtime`` on a
fresh worker's first TPC-H queries: imported there, they cost the first query's ``plan``
request about 0.1 CPU-s (the pyspark import most; 0.2-0.8 s of wall time on a loaded
machine), on the driver's critical path before any task starts."""

READ_HEAPS = max(1, min(4, os.cpu_count() or 1))
"""Heaps faulted in at the start: one per read thread that runs at once (a JVM runs a task per
core, each task's read in its own request thread)."""

_PLANNING = {"schema": read_ops.schema, "push": read_ops.push, "save": read_ops.save, "plan": read_ops.plan,
             "count": count, "catalog": catalog, "write_begin": writes.write_begin,
             "write_commit": writes.write_commit, "write_abort": writes.write_abort,
             "write_status": writes.write_status}


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _logged(op: str, exc: BaseException) -> str:
    """``exc``'s one line, its whole stack written to stderr first (the worker's log, which the
    JVM names in a task's error): the line goes to the user, the stack stays findable."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    sys.stderr.write(f"{stamp} request {op!r} failed: {_one_line(exc)}\n{stack}")
    sys.stderr.flush()
    return _one_line(exc)


class _Handler(socketserver.StreamRequestHandler):
    rbufsize = 1 << 16
    wbufsize = 1 << 20

    def handle(self) -> None:
        server: WorkerServer = self.server  # type: ignore[assignment]
        try:
            req = read_request(self.rfile, server.secret)
        except ProtocolError as exc:
            server.count("bad_requests")
            self._reply({"ok": False, "error": f"bad request: {exc}"})
            return
        op = req["op"]
        try:
            if op == "read":
                self._read(req, server)
                return
            if op == "write":  # an Arrow stream of the task's rows follows the request
                answer = writes.write(req, self.rfile)
                server.count(op)
                self._reply({"ok": True, **answer})
                return
            if op == "stats":
                self._reply({"ok": True, **server.snapshot()})
                return
            handler = _PLANNING.get(op)
            if handler is None:
                raise ProtocolError(f"unknown op {op!r}")
            answer = handler(req)
            server.count(op)
            self._reply({"ok": True, **answer})
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # noqa: BLE001 - every failure goes back as one line
            server.count("errors")
            self._reply({"ok": False, "error": _logged(op, exc)})

    def _reply(self, doc: dict[str, Any]) -> None:
        try:
            write_frame(self.wfile, doc)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _read(self, req: dict, server: "WorkerServer") -> None:
        if "read_plan" not in req:
            server.count("reads_planned_again")  # a client that sends no plan: this task plans itself
        rp = read_ops.task_plan(req)  # the driver's plan, read as it is (planned here only without one)
        splits = rp.check_splits(read_ops.read_splits(req))
        target = rp.target
        if rp.aggregate is not None:
            batches = task_aggregates.aggregate_read(rp, splits, server.scan_stats)
        else:
            batches = read_ops.plan_batches(rp, splits, server.scan_stats)
        self._reply({"ok": True})
        rows = size = 0
        # each batch goes from its own buffers to the socket in one gathering send (SocketSink),
        # not through the connection's buffered file; the reply frame before it is flushed
        sink = SocketSink(self.connection)
        writer = pa.ipc.new_stream(sink, target)
        trailer: dict[str, Any]
        try:
            try:
                for batch in batches:
                    writer.write_batch(batch)
                    sink.flush()
                    rows += batch.num_rows
                    size += batch.nbytes
                trailer = {"ok": True, "rows": rows}
            except (BrokenPipeError, ConnectionResetError):
                return  # the task stopped early (LIMIT): nothing to tell it
            except Exception as exc:  # noqa: BLE001 - ends the stream cleanly, then says why
                server.count("errors")
                trailer = {"ok": False, "error": _logged("read", exc)}
            writer.close()
            sink.flush()
            write_frame(self.wfile, trailer)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return
        finally:
            batches.close()
            server.count("read", rows=rows, size=size)


class WorkerServer(socketserver.ThreadingTCPServer):
    """The worker process's server: loopback only, one thread per connection, shared counters.

    (``WorkerProcess`` is the JVM's handle on this process; ``connector.engine_worker`` the
    command that runs it.)"""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, secret: str, port: int = 0):
        super().__init__(("127.0.0.1", port), _Handler)
        self.secret = secret
        self.started = time.time()
        self._lock = threading.Lock()
        self.counters: dict[str, int] = {}
        self.scan_stats: dict[str, float] = {}
        self.warm_up_s: float | None = None  # what :func:`warm_up` took at the start
        self.prefaulted_bytes = 0  # heap faulted in at the start for the read threads

    def count(self, what: str, rows: int = 0, size: int = 0) -> None:
        """Add one ``what`` (and ``rows`` rows, ``size`` Arrow bytes sent) to the counters."""
        with self._lock:
            self.counters[what] = self.counters.get(what, 0) + 1
            self.counters["rows_sent"] = self.counters.get("rows_sent", 0) + rows
            self.counters["bytes_sent"] = self.counters.get("bytes_sent", 0) + size

    def snapshot(self) -> dict[str, Any]:
        """Counters, scan metrics (HBase names), the block cache's use, this process's CPU seconds,
        the start-up warm-up's CPU seconds and how many modules are loaded (a request that loads
        none paid no import)."""
        with self._lock:
            return {"pid": os.getpid(), "counters": dict(self.counters), "scan": dict(self.scan_stats),
                    "block_cache": shared_block_cache().stats(),
                    "cpu_s": round(time.process_time(), 3), "uptime_s": round(time.time() - self.started, 1),
                    "warm_up_s": self.warm_up_s, "modules": len(sys.modules),
                    "prefaulted_bytes": self.prefaulted_bytes,
                    "arrow_memory_pool": pa.default_memory_pool().backend_name}


def warm_up() -> float:
    """Import :data:`FIRST_USE_MODULES`, so a fresh worker's first query runs at warm speed; the
    CPU seconds it took (about 0.1 s).  :func:`serve` runs it before it announces its port, so the
    request that starts a worker (a DataFrame's ``schema``, before any query) waits for it and no
    query does.  (Run in a thread beside the serving instead, it shared the GIL with the first
    query's requests, which on a loaded machine then started up to a second later.)"""
    started = time.thread_time()
    for name in FIRST_USE_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional dependency (dateutil, fastavro) absent: nothing will import it
            pass
    return time.thread_time() - started


def _exit_with_parent() -> None:
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    os._exit(0)


def serve(secret: str) -> None:
    """Warm up (imports, and the read threads' heaps faulted in: :func:`.allocator.prefault_heaps`,
    where ``python -m connector.engine_worker`` set the allocator), bind, announce the port on
    stdout, and serve until stdin closes."""
    spent: list[float] = []
    # a sixteenth of the block cache per heap, at most PREFAULT_BYTES: a worker given a small
    # cache is one whose memory is tight, and the pages stay resident
    size = min(PREFAULT_BYTES, shared_block_cache().capacity_bytes // 16)
    prefaulted = prefault_heaps(READ_HEAPS, size, during=lambda: spent.append(warm_up()))
    server = WorkerServer(secret)
    server.warm_up_s = round(spent[0], 3)
    server.prefaulted_bytes = prefaulted
    print(f"regionscan-engine-worker {VERSION} port={server.server_address[1]} pid={os.getpid()}", flush=True)
    threading.Thread(target=_exit_with_parent, name="parent-watch", daemon=True).start()
    server.serve_forever(poll_interval=0.5)


def main() -> int:
    """Entry point: ``python -m connector.engine_worker``."""
    secret = os.environ.get("REGIONSCAN_WORKER_SECRET")
    if not secret:
        print("regionscan engine worker: REGIONSCAN_WORKER_SECRET is not set (the JVM source sets it)",
              file=sys.stderr)
        return 2
    # The worker is its JVM's region server: its block cache is its own and serves every
    # task and query of that JVM, so it is sized for a table, not for a scratch scan.
    os.environ.setdefault(BLOCK_CACHE_SIZE_ENV, str(WORKER_BLOCK_CACHE_SIZE))
    # Store files are read, not mapped: a container limit sized to the cache then holds
    # (mapped, a table's pages would count in the worker's resident size).
    os.environ.setdefault(MMAP_ENV, "0")
    try:
        shared_block_cache()
    except InvalidArgument as exc:
        setting = "cacheResults" if CACHE_RESULTS_ENV in str(exc) else "blockCacheSize"
        print(f"regionscan engine worker: {exc} (spark.regionscan.worker.{setting})", file=sys.stderr)
        return 2
    serve(secret)
    return 0
