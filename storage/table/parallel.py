"""A client-side parallel scanner: the regions of a key range scanned by N threads.

The lesson of the Trafodion investigation (HBASE-9272 backported): a
parallel scanner that only parallelizes the fetch loses to one process per
region, because the per-row work after the fetch (decode, build the tuple,
apply the predicate, hand it on) dominates.  So :class:`ParallelScanner`
runs the caller's per-batch work on its worker threads too:

* ``predicate(batch)`` returns a boolean mask (Arrow or NumPy) of the rows to keep;
* ``transform`` is a callable ``batch -> result``, or a SerDe-like object
  with ``deserialize_batch(batch)``; its results are what the scan yields.

Each region (cut to the scanned range) is one task; ``threads`` workers take
tasks in key order.  Results come out in key order (``ordered=True``: one
bounded queue per region, drained region by region) or as they arrive
(``ordered=False``: one shared bounded queue).  Either way memory is bounded
by the queues, not by the table: a worker blocks when its queue is full.

Threads help exactly as far as the work releases the GIL.  Arrow compute
kernels, NumPy ufuncs over whole arrays, decompression and file reads do;
a Python loop per row does not, and for such work one process per region
(``multiprocessing``, or one Spark task per region) is the parallel form.
docs/performance.md has the measurements.

Works on an embedded :class:`storage.table.table.Table` and on a
:class:`storage.server.client.RemoteTable` (pass ``mode="rpc"`` or ``"stream"``
through the scan options).  On an embedded table every task reads one
:meth:`storage.table.table.Table.snapshot` taken when the scan starts: one read
point, and regions split or compacted meanwhile are read as they were.  On
a remote table each task is its own server scan (its own read point); each
still survives splits.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidArgument
from ..keys import clip_bounds, clip_range

__all__ = ["ParallelScanner", "parallel_scan", "region_tasks"]

_DONE = object()
_PUT_POLL = 0.05  # seconds between checks of the stop flag while a queue is full


def _below(key: bytes) -> bytes | None:
    """A key whose reverse-scan lower bound (``key + b"\\x00"``) is at most ``key``.

    Reverse scans take an exclusive lower bound; no byte string is the
    largest key below ``key``, so this one can let through a sliver of keys
    under ``key`` (those starting with it plus sixteen 0xff bytes); the
    worker drops them with a key mask.
    """
    if not key:
        return None
    if key.endswith(b"\x00"):
        return key[:-1]
    return key[:-1] + bytes([key[-1] - 1]) + b"\xff" * 16


def region_tasks(regions: list[dict], low: bytes, high: bytes | None) -> list[tuple[bytes, bytes | None]]:
    """The ``[start, stop)`` pieces of ``[low, high)`` that fall in each region, in key order."""
    tasks = []
    for r in regions:
        start, end = r["start_key"], r["end_key"] or None
        piece = clip_range(start, end, low, high)
        if piece is not None:
            tasks.append(piece)
    return tasks


class ParallelScanner:
    """Scans the regions of a range concurrently (see the module docstring).

    ``threads`` workers; ``queue_size`` batches of results buffered per
    region (ordered) or per worker (arrival order).  Call :meth:`scan`
    with the scan options of ``Table.scan_batches``; it returns an
    iterator that must be exhausted or closed (closing stops the workers).
    After a scan, :attr:`stats` holds rows, batches and per-worker busy time.
    """

    def __init__(
        self,
        table: Any,
        threads: int = 4,
        *,
        ordered: bool = True,
        queue_size: int = 4,
        transform: Callable[[pa.RecordBatch], Any] | Any = None,
        predicate: Callable[[pa.RecordBatch], Any] | None = None,
    ):
        if not isinstance(threads, int) or threads < 1:
            raise InvalidArgument(f"threads must be a positive int, got {threads!r}")
        if not isinstance(queue_size, int) or queue_size < 1:
            raise InvalidArgument(f"queue_size must be a positive int, got {queue_size!r}")
        if transform is not None and not callable(transform):
            fn = getattr(transform, "deserialize_batch", None)
            if not callable(fn):
                raise InvalidArgument("transform must be a callable or an object with deserialize_batch(batch)")
            transform = fn
        if predicate is not None and not callable(predicate):
            raise InvalidArgument("predicate must be a callable batch -> boolean mask")
        self.table = table
        self.threads = threads
        self.ordered = ordered
        self.queue_size = queue_size
        self.transform = transform
        self.predicate = predicate
        self.stats: dict = {}

    def scan(self, row_start: bytes | None = None, row_stop: bytes | None = None, row_prefix: bytes | None = None,
             reverse: bool = False, **options: Any) -> Iterator[Any]:
        """Scan ``[row_start, row_stop)`` (HBase reverse bounds when ``reverse``), yielding results.

        ``options`` are the other ``scan_batches`` options (columns, filter,
        time range, versions, output, batch_size, and for a remote table
        mode / caching).  ``limit`` is not taken: rows come from several
        regions at once; stop the iterator after the rows you need.
        """
        if "limit" in options and options["limit"] is not None:
            raise InvalidArgument("limit is not supported by ParallelScanner: stop iterating (and close) instead")
        options.pop("limit", None)
        # checked once, here; each task runs it cut to its region
        request, metrics, options = self.table.batches_call(row_start=row_start, row_stop=row_stop,
                                                            row_prefix=row_prefix, reverse=reverse, **options)
        low, high = request.bounds()
        options["metrics"] = metrics
        snapshot = None
        if callable(getattr(self.table, "snapshot", None)):
            snapshot = self.table.snapshot(low or None, high)
            options["snapshot"] = snapshot
            tasks = [clip_bounds(v.start, v.end, low, high) for v in snapshot.views]
        else:
            tasks = region_tasks(self.table.regions(), low, high)
        if reverse:
            tasks.reverse()
        return _Run(self, tasks, request, options, snapshot).results()


def parallel_scan(table: Any, threads: int = 4, *, ordered: bool = True, queue_size: int = 4,
                  transform: Any = None, predicate: Any = None, **scan_options: Any) -> Iterator[Any]:
    """Shortcut for ``ParallelScanner(table, threads, ...).scan(**scan_options)``."""
    scanner = ParallelScanner(table, threads, ordered=ordered, queue_size=queue_size,
                              transform=transform, predicate=predicate)
    return scanner.scan(**scan_options)


class _Run:
    """One parallel scan: its tasks, queues, workers and consumer."""

    def __init__(self, owner: ParallelScanner, tasks: list, request: Any, options: dict, snapshot: Any = None):
        self.owner = owner
        self.snapshot = snapshot
        self.tasks = tasks
        self.request = request
        self.reverse = request.reverse
        self.options = options
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self._next_task = 0
        self._mutex = threading.Lock()
        n = len(tasks)
        if owner.ordered:
            self.queues = [queue.Queue(maxsize=owner.queue_size) for _ in range(n)]
        else:
            shared = queue.Queue(maxsize=owner.queue_size * owner.threads)
            self.queues = [shared] * n
        self.busy = [0.0] * min(owner.threads, max(n, 1))
        self.rows = 0
        self.batches = 0
        self.workers = [
            threading.Thread(target=self._work, args=(w,), name=f"parallel-scan-{w}", daemon=True)
            for w in range(len(self.busy))
        ] if n else []

    # -- workers -----------------------------------------------------------
    def _take_task(self) -> int | None:
        with self._mutex:
            i = self._next_task
            if i >= len(self.tasks):
                return None
            self._next_task += 1
            return i

    def _put(self, q: queue.Queue, item: Any) -> bool:
        while not self.stop.is_set():
            try:
                q.put(item, timeout=_PUT_POLL)
                return True
            except queue.Full:
                continue
        return False

    def _region_batches(self, i: int) -> Iterator[pa.RecordBatch]:
        lo, hi = self.tasks[i]
        table = self.owner.table
        if not self.reverse:
            yield from table.run_scan(self.request.replace(row_start=lo, row_stop=hi, row_prefix=None), **self.options)
            return
        # Reverse bounds are (row_stop, row_start]: ask for a little more, then cut to [lo, hi).
        task = self.request.replace(row_start=hi, row_stop=_below(lo), row_prefix=None)
        for batch in table.run_scan(task, **self.options):
            keys = batch.column(0)
            keep = pc.greater_equal(keys, pa.scalar(lo, pa.binary()))
            if hi is not None:
                keep = pc.and_(keep, pc.less(keys, pa.scalar(hi, pa.binary())))
            yield batch if pc.all(keep).as_py() else batch.filter(keep)

    def _work(self, w: int) -> None:
        predicate, transform = self.owner.predicate, self.owner.transform
        rows = batches = 0
        while not self.stop.is_set():
            i = self._take_task()
            if i is None:
                break
            q = self.queues[i]
            gen = self._region_batches(i)
            try:
                started = time.perf_counter()
                for batch in gen:
                    if predicate is not None:
                        batch = batch.filter(predicate(batch))
                    if batch.num_rows == 0:
                        continue
                    rows += batch.num_rows
                    batches += 1
                    out = transform(batch) if transform is not None else batch
                    self.busy[w] += time.perf_counter() - started
                    if not self._put(q, out):
                        return
                    started = time.perf_counter()
                self.busy[w] += time.perf_counter() - started
                self._put(q, _DONE)
            except BaseException as exc:  # handed to the consumer, which raises it
                with self._mutex:
                    if self.failure is None:
                        self.failure = exc
                self.stop.set()
                return
            finally:
                gen.close()
        with self._mutex:
            self.rows += rows
            self.batches += batches

    # -- consumer ------------------------------------------------------------
    def _get(self, q: queue.Queue) -> Any:
        while True:
            try:
                return q.get(timeout=_PUT_POLL)
            except queue.Empty:
                # A failed worker stops the others, so the queue waited on may never fill.
                if self.failure is not None:
                    raise self.failure from None

    def results(self) -> Iterator[Any]:
        started = time.perf_counter()
        for t in self.workers:
            t.start()
        try:
            if self.owner.ordered:
                for q in self.queues:
                    while (item := self._get(q)) is not _DONE:
                        yield item
            else:
                left = len(self.tasks)
                q = self.queues[0] if self.queues else None
                while left:
                    item = self._get(q)
                    if item is _DONE:
                        left -= 1
                    else:
                        yield item
        finally:
            self._shutdown()
            self.owner.stats = {
                "regions": len(self.tasks),
                "threads": len(self.workers),
                "rows": self.rows,
                "batches": self.batches,
                "worker_busy_s": [round(b, 4) for b in self.busy],
                "wall_s": round(time.perf_counter() - started, 4),
            }

    def _shutdown(self) -> None:
        self.stop.set()
        for q in {id(q): q for q in self.queues}.values():
            try:
                while True:
                    q.get_nowait()
            except queue.Empty:
                pass
        for t in self.workers:
            t.join()
        if self.snapshot is not None:
            self.snapshot.close()
