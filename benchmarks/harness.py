"""What every benchmark shares: clocks, alternating best-of timing, the sample tables, the report.

Each ``bench_*.py`` imports this module and no other benchmark.  It puts the
checkout this file sits in on ``sys.path`` (after the script's own folder), so
``python benchmarks/bench_x.py`` run from any checkout measures that checkout's
code; ``PYTHONPATH`` still comes after it.

Timing rules, the same for every benchmark:

* every figure is the best of ``repeat`` runs, after one untimed warm-up run of
  each side unless said otherwise (block cache and page cache warm for all);
* the sides of a comparison run alternately (a, b, a, b, ...), so load from
  other processes on a shared machine hits them alike;
* the default clock is the process's CPU time (``cpu``), which other
  processes barely move; ``wall`` is the figure to quote from a quiet machine;
  ``thread`` is the calling thread's CPU time, for runs that have a writer
  thread of their own beside the timed one.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The checkout this harness belongs to."""
if ROOT not in sys.path:
    sys.path.insert(1, ROOT)

__all__ = [
    "CLOCKS", "COLUMNS", "COUNT_FILTER", "Measurement", "ROOT", "Round", "Spent",
    "best_of", "best_of_self_timed", "best_with_first", "bulk_load", "clock", "format_table",
    "interleaved", "kept_results", "prepare_table", "process_block_cache", "sample_batches", "set_clock",
    "set_kept_results",
]

COLUMNS = [b"cf:n", b"cf:s"]
"""The sample table's two columns: a 4-byte big-endian int and a ``--value-size``-byte string."""

COUNT_FILTER = "FirstKeyOnlyFilter() AND KeyOnlyFilter()"
"""The row-counting filter: one key-only cell per row."""

# -- clocks ------------------------------------------------------------------
CLOCKS: dict[str, Callable[[], float]] = {
    "cpu": time.process_time,
    "wall": time.perf_counter,
    "thread": time.thread_time,
}
"""``cpu``: CPU seconds of this process (every thread), which other processes' load on a
shared machine barely moves; ``wall``: elapsed seconds, right on a quiet machine; ``thread``:
CPU seconds of the calling thread only (a benchmark with its own writer thread)."""

_clock: Callable[[], float] = time.process_time


def set_clock(name: str) -> None:
    """Make ``name`` (a key of :data:`CLOCKS`) the clock of :func:`best_of` and :func:`clock`."""
    global _clock
    try:
        _clock = CLOCKS[name]
    except KeyError:
        raise ValueError(f"unknown clock {name!r} (known: {', '.join(sorted(CLOCKS))})") from None


def clock() -> float:
    """The current reading of the clock chosen with :func:`set_clock` (CPU time by default)."""
    return _clock()


# -- timing ------------------------------------------------------------------
def best_of(repeat: int, *fns: Callable[[], Any], warmup: bool = True) -> list[tuple[float, Any]]:
    """Time each of ``fns`` ``repeat`` times, alternating them; return (best seconds, result) per fn.

    Runs alternate (a, b, a, b, ...) so that load from other processes on a
    shared machine hits every side of a comparison alike, and the best run
    of each is kept.  One untimed run of each first (``warmup``) fills the
    block cache and the OS page cache, so every path is measured warm.
    Seconds are on the clock chosen with :func:`set_clock`.
    """
    if warmup:
        for fn in fns:
            fn()
    best = [float("inf")] * len(fns)
    results: list[Any] = [None] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            gc.collect()
            t0 = _clock()
            results[i] = fn()
            best[i] = min(best[i], _clock() - t0)
    return list(zip(best, results))


def best_of_self_timed(repeat: int, *fns: Callable[[], float]) -> list[float]:
    """Best of ``repeat`` runs of each of ``fns``, runs alternating; each fn returns the
    seconds of its own timed part (set-up such as a fresh database stays outside it)."""
    out = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            out[i] = min(out[i], fn())
    return out


def best_with_first(repeat: int, fns: list[Callable[[], Any]], first: list[float] | None = None,
                    cpu: Callable[[], float] | None = None,
                    cpu_used: list[float] | None = None) -> list[tuple[float, Any]]:
    """Best wall seconds (and result) of each function, runs alternating, after one first run
    of each whose wall seconds are appended to ``first`` (a first read beside the warm ones).

    With ``cpu`` (a CPU clock read outside the timed span, such as another process's),
    ``cpu_used[i]`` gains the CPU seconds that function ``i``'s timed runs took on it."""
    for fn in fns:
        t0 = time.perf_counter()
        fn()
        if first is not None:
            first.append(time.perf_counter() - t0)
    best: list[tuple[float, Any]] = [(float("inf"), None)] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            c0 = cpu() if cpu is not None else 0.0
            t0 = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - t0
            if cpu is not None and cpu_used is not None:
                cpu_used[i] += cpu() - c0
            if elapsed < best[i][0]:
                best[i] = (elapsed, result)
    return best


@dataclass
class Spent:
    """What a case of :func:`interleaved` returns when part of its work ran in other
    processes: its answer and those processes' CPU seconds, added to the case's own."""

    answer: Any
    cpu_elsewhere: float


@dataclass
class Round:
    """One case's figures over the rounds of :func:`interleaved`."""

    wall: float = float("inf")  # best elapsed seconds
    cpu: float = float("inf")  # best CPU seconds (this process, plus any ``Spent.cpu_elsewhere``)
    result: Any = None  # the answer of the run with the best wall time
    answers: list = field(default_factory=list)  # every run's answer, to check the cases agree


def interleaved(cases: dict[str, Callable[[], Any]], repeat: int) -> dict[str, Round]:
    """Best wall and CPU seconds of each case over ``repeat`` rounds, no warm-up; each round
    runs every case once, so a change of machine load over time hits all cases alike.  For
    benchmarks about waiting (round trips, pipelining, parallelism), where wall time is the
    measure and CPU time says what it was made of."""
    out = {name: Round() for name in cases}
    for _ in range(repeat):
        for name, fn in cases.items():
            started, cpu_started = time.perf_counter(), time.process_time()
            answer = fn()
            wall = time.perf_counter() - started
            used = time.process_time() - cpu_started
            if isinstance(answer, Spent):
                answer, used = answer.answer, used + answer.cpu_elsewhere
            r = out[name]
            r.answers.append(answer)
            r.cpu = min(r.cpu, used)
            if wall < r.wall:
                r.wall, r.result = wall, answer
    return out


def set_kept_results(*, batches: bool | None = None, chunks: bool | None = None,
                     caches: Iterable[Any] = ()) -> Callable[[], None]:
    """Turn on or off the results scans keep between scans; returns the function that
    restores what was there.

    ``batches``: a clean file's streamed batches (storage/read/stream_memo.py); ``chunks``: a
    live table's resolved chunks (storage/read/chunk_memo.py); ``None`` leaves one as it is.
    Off, a scan builds what it returns, as the first scan of a range or the first after a write
    does: the figure of a "built" line.  The engine has had two forms of the switch, and both
    are served, so that one script measures an older checkout and this one alike: module
    switches (``stream_memo.enabled``, ``chunk_memo.enabled``), or a scan option
    (``cache_results``) whose default each block cache holds, set here on every cache of
    ``caches`` (a connection's ``block_cache``, the process's shared cache); there ``batches``
    and ``chunks`` are one switch and must agree.  Scans that pass ``cache_results``
    themselves are not affected."""
    import importlib

    memos = [importlib.import_module(f"storage.read.{name}") for name in ("stream_memo", "chunk_memo")]
    if all(hasattr(m, "enabled") for m in memos):
        switches = [(m, "enabled", on) for m, on in zip(memos, (batches, chunks)) if on is not None]
    else:
        wanted = {on for on in (batches, chunks) if on is not None}
        if len(wanted) > 1:
            raise ValueError("this engine keeps batches and chunks under one switch (cache_results): "
                             "give batches and chunks the same value")
        switches = [(c, "cache_results", on) for on in wanted for c in caches if c is not None]
    before = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in switches]
    for obj, attr, on in switches:
        setattr(obj, attr, on)

    def restore() -> None:
        for obj, attr, was in before:
            setattr(obj, attr, was)

    return restore


@contextlib.contextmanager
def kept_results(on: bool | None = None, *caches: Any, batches: bool | None = None,
                 chunks: bool | None = None) -> Iterator[None]:
    """:func:`set_kept_results` for the block, then what was there again: ``on`` sets both
    ``batches`` and ``chunks``; ``caches`` are the block caches whose default it sets."""
    if on is not None:
        batches = chunks = on
    restore = set_kept_results(batches=batches, chunks=chunks, caches=caches)
    try:
        yield
    finally:
        restore()


def process_block_cache() -> Any:
    """The process's shared block cache: the one the connector's reads with ``cacheblocks``
    true use, as the engine worker's reads do."""
    from storage.region.region_snapshots import shared_block_cache

    return shared_block_cache()


# -- the sample tables ---------------------------------------------------------
def prepare_table(root: str, rows: int, regions: int, table: str = "bench_server") -> None:
    """Create, load and flush the sample table of ``regionscan demo`` under ``root`` (one
    store file per region) unless it is already there with ``rows`` rows."""
    import storage
    from jobs.demo import load_sample_table

    conn = storage.connect(root)
    try:
        if conn.is_table_available(table):
            existing = conn.table(table)
            if sum(b.num_rows for b in existing.scan_batches(filter=COUNT_FILTER, output="cells")) == rows:
                return
            conn.delete_table(table)
        started = time.perf_counter()
        loaded = load_sample_table(conn, table, rows, regions)
        loaded.flush()
        print(f"loaded {rows:,} rows in {regions} regions in {time.perf_counter() - started:.1f} s", flush=True)
    finally:
        conn.close()


def sample_batches(rows: int, value_size: int, batch_rows: int = 100_000) -> list:
    """The sample table's rows (4-byte big-endian key, 4-byte ``cf:n``, ``value_size``-byte
    ``cf:s``) as the row batches a SerDe hands to a bulk load."""
    import numpy as np
    import pyarrow as pa

    out = []
    for lo in range(0, rows, batch_rows):
        hi = min(lo + batch_rows, rows)
        idx = np.arange(lo, hi)
        keys = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(4), hi - lo, [None, pa.py_buffer(idx.astype(">u4").tobytes())]
        ).cast(pa.binary())
        ns = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(4), hi - lo, [None, pa.py_buffer((idx * 7 - 1000).astype(">i4").tobytes())]
        ).cast(pa.binary())
        texts = pa.array([((b"value-%010d-" % i) * (value_size // 17 + 1))[:value_size] for i in range(lo, hi)],
                         pa.binary())
        out.append(pa.RecordBatch.from_arrays([keys, ns, texts], names=["key", "cf:n", "cf:s"]))
    return out


def bulk_load(root: str, rows: int, regions: int, block_size: int, batches, table: str = "bench_format",
              ) -> tuple[float, float]:
    """Create ``table`` under ``root`` (``regions`` regions of the sample table's keys,
    ``block_size`` blocks) and bulk load ``batches`` in one task; returns the wall and CPU
    seconds the load took (fsyncs count in the wall time only)."""
    from jobs.demo import split_keys_for

    return load_batches(root, table, batches, split_keys_for(rows, regions),
                        {"cf": {"max_versions": 1, "block_size": block_size}})


def load_batches(root: str, table: str, batches, split_keys: list[bytes], families: dict) -> tuple[float, float]:
    """Create ``table`` under ``root`` (``families``, pre-split at ``split_keys``) and bulk load
    ``batches`` in one task, as a Spark write stages and commits them; returns the load's wall
    and CPU seconds."""
    import storage
    from storage.engine import BulkLoadTask, commit_load, table_regions
    from storage.vfs.fs import FileSystem

    shutil.rmtree(root, ignore_errors=True)
    conn = storage.connect(root)
    conn.create_table(table, families, split_keys=split_keys, settings={"wal_sync": "none"})
    conn.close()
    fs = FileSystem(root).sub(table)
    t0, c0 = time.perf_counter(), time.process_time()
    regions_, family_settings = table_regions(fs)
    task = BulkLoadTask(fs, "bench", "p0", regions_, family_settings, timestamp=1_000)
    for b in batches:
        task.add(b)
    commit_load(fs, "bench", task.finish())
    return time.perf_counter() - t0, time.process_time() - c0


# -- Spark --------------------------------------------------------------------------
def spark_session(app: str, cores: int, driver_memory: str = "2g", conf: dict[str, str] | None = None) -> Any:
    """A local Spark session with the JVM regionscan source registered, set up as the suite's
    (no UI, shuffle partitions = cores, ERROR logging)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    from connector.session import jvm_source_conf, register

    builder = SparkSession.builder
    for key, value in {**jvm_source_conf(), **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = (builder.master(f"local[{cores}]").appName(app)
             .config("spark.sql.python.filterPushdown.enabled", "true")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(cores)).config("spark.driver.memory", driver_memory)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (every thread), from /proc; 0.0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the report ------------------------------------------------------------------
@dataclass
class Measurement:
    """One line of a report: our figure, the peer's, and what we aimed for."""

    name: str
    ours: float  # rate, in ``unit``
    unit: str
    peer: str | None = None
    peer_rate: float | None = None
    target: str | None = None
    met: bool | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """Our rate over the peer's: above 1.0 we are faster."""
        if self.peer_rate is None or not self.peer_rate:
            return None
        return self.ours / self.peer_rate

    def to_dict(self) -> dict:
        """The line as JSON-ready fields, the ratio included."""
        d = asdict(self)
        d["ratio"] = self.ratio
        return d


def format_table(results: list[Measurement]) -> str:
    """The measurements as a fixed-width table: ours, the peer's, their ratio and the target."""
    head = f"{'measurement':<46} {'ours':>22} {'peer':>22} {'ratio':>7}  {'target':<20} {'met':<4} peer / note"
    lines = [head, "-" * len(head)]
    for m in results:
        ratio = f"{m.ratio:.2f}x" if m.ratio is not None else "-"
        ours = f"{m.ours:,.0f} {m.unit}"
        peer = f"{m.peer_rate:,.0f} {m.unit}" if m.peer_rate is not None else "-"
        met = "-" if m.met is None else ("yes" if m.met else "NO")
        tail = "; ".join(x for x in (m.peer, m.note) if x)
        lines.append(f"{m.name:<46} {ours:>22} {peer:>22} {ratio:>7}  {m.target or '-':<20} {met:<4} {tail}")
    return "\n".join(lines)
