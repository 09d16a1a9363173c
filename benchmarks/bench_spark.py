"""Spark over regionscan (the JVM source and the Python source) against Spark over Parquet.

The table is the 10-region sample table (``jobs.demo.load_sample_table``:
4-byte big-endian int key, ``cf:n`` int, ``cf:s`` 100-byte string),
flushed and major-compacted.  The same rows, typed (``k INT, n INT,
s STRING``), are written as Parquet, one file per region, so both sides
get ten input partitions.  Each query runs through the same local Spark
session, against ``format("regionscan")`` and against Spark's own Parquet
reader, and through ``format("regionscan_python")`` (the Python source):

* ``planning only``: plan ``k = x`` (pushdown and partitions, no tasks);
* ``count where k = x``: one row (a point get for regionscan): the fixed cost of a query;
* ``count``: ``SELECT count(*)``; for regionscan both the full mapping
  (the Python source must produce every column) and the ``columns``
  option reading the key only;
* ``count where key range``: ``k >= a AND k < b`` (5% of the rows): a key
  range for regionscan, row-group statistics for Parquet;
* ``count where n, s``: ``n % 3 = 0 AND s LIKE '%5%'``: no stored-bytes form,
  so the JVM source's worker evaluates it on the decoded rows and the tasks
  count (docs/connector.md, "Filters evaluated on the decoded rows"); again with
  ``regionscan.pushdown.decoded=false``, where every row goes to the JVM and
  Spark filters and counts, as it does for Parquet;
* ``sum(n)``: one column read and summed;
* ``group by``: ``SELECT n % 100, count(*), max(s) ... GROUP BY 1``;
* the last two again with ``regionscan.pushdown.aggregates=false``: without it
  the JVM source's tasks compute the aggregates and send Spark their partial
  rows (docs/connector.md, "Aggregates the tasks compute"); with it every row
  goes to the JVM and Spark aggregates, the scan path.

Every figure is the best wall time of ``--repeat`` runs after one first
run, the sides alternating; the first run is reported too ("first": for the
JVM source the first query also starts its engine worker, later ones find
its block cache warm).  Beside each query: the engine worker's CPU seconds
and Arrow bytes per run, and the JVM's CPU seconds per timed run of each
side (the driver JVM's process clock: in ``local[N]`` the executors too), so
that what a ratio near 1.0x is made of can be told apart from scheduling.
``--python-source`` adds the Python source.  ``--breakdown`` also times, in this process,
what one pass of the Spark source does per split outside Spark: the engine
scan (pinned region files -> Arrow row batches) and the SerDe decode; the
rest of a Spark task is the Python worker's hand-off to the JVM.

    python benchmarks/bench_spark.py --rows 1000000 --repeat 3 --json spark.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from harness import best_with_first, process_cpu_seconds, spark_session  # puts the checkout on sys.path

import storage
from jobs.demo import load_sample_table

__all__ = ["main", "build", "run_queries", "breakdown"]

TABLE = "bench_spark"
MAPPING = "k INT :key, n INT cf:n, s STRING cf:s"


def _say(text: str) -> None:
    print(text, flush=True)


def build(root: str, rows: int, regions: int, value_size: int) -> str:
    """Create (or reuse) the table and its Parquet copy; returns the Parquet folder."""
    parquet = os.path.join(root, f"{TABLE}-parquet")
    marker = os.path.join(root, f"{TABLE}.built")
    wanted = f"{rows} {regions} {value_size}"
    if os.path.exists(marker) and open(marker).read() == wanted:
        return parquet
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    conn = storage.connect(root)
    table = load_sample_table(conn, TABLE, rows, regions, value_size)
    table.compact(major=True)
    from serde import create_serde

    serde = create_serde("binary", MAPPING)
    os.makedirs(parquet)
    for i, region in enumerate(table.regions()):
        batches = [serde.deserialize_batch(b) for b in table.scan_batches(
            row_start=region["start_key"] or None, row_stop=region["end_key"] or None, columns=serde.scan_columns)]
        pq.write_table(pa.Table.from_batches(batches, schema=serde.arrow_schema),
                       os.path.join(parquet, f"part-{i:05d}.parquet"), compression="none")
    conn.close()
    open(marker, "w").write(wanted)
    _say(f"built {rows:,} rows in {regions} regions and the Parquet copy in {time.perf_counter() - t0:.1f}s")
    return parquet


def _session(cores: int):
    return spark_session("bench_spark", cores)


def _jvm_cpu_clock(spark) -> Callable[[], float] | None:
    """The driver JVM's process CPU seconds (in ``local[N]`` the executors' too), read from
    ``/proc`` (py4j cannot call the CPU-time getter of the JDK's internal bean class); None
    where there is no ``/proc``."""
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    if not os.path.exists(f"/proc/{pid}/stat"):
        return None
    return lambda: process_cpu_seconds(pid)


def _worker_stats(spark) -> dict:
    """The JVM source's engine worker counters (rows, Arrow bytes sent) and CPU seconds."""
    try:
        return json.loads(spark._jvm.regionscan.spark.WorkerProcess.statsJson(sys.executable, ""))
    except Exception:  # noqa: BLE001 - the JVM source is not on this session's classpath
        return {}


def run_queries(spark, root: str, parquet: str, rows: int, repeat: int, python_source: bool,
                cache_results: bool = False) -> list[dict]:
    """Each query on every side; a fresh DataFrame per run.  ``cache_results``: the
    regionscan reads keep their results in the worker's block cache, so a repeated
    query is answered from what the one before kept (a cached answer, not the scan)."""
    options = {"root": root, "table": TABLE, "hbase.columns.mapping": MAPPING,
               "regionscan.scan.cacheresults": "true" if cache_results else "false"}

    def ours(**extra):
        return spark.read.format("regionscan").options(**options, **extra).load()

    def python(**extra):
        return spark.read.format("regionscan_python").options(**options, **extra).load()

    def theirs():
        return spark.read.parquet(parquet)

    lo, hi = rows // 2, rows // 2 + rows // 20

    def plan_only(df):
        df.where(f"k = {rows // 3}")._jdf.queryExecution().executedPlan()  # pushdown + partitions, no tasks
        return None

    queries = [
        ("planning only (k = x)", plan_only, {}),
        ("count where k = x (one row)", lambda df: df.where(f"k = {rows // 3}").count(), {}),
        ("count(*)", lambda df: df.count(), {}),
        (f"count where k in [{lo}, {hi})", lambda df: df.where(f"k >= {lo} AND k < {hi}").count(), {}),
        ("count where n % 3 = 0 and s like '%5%'", lambda df: df.where("n % 3 = 0 AND s LIKE '%5%'").count(), {}),
        ("sum(n)", lambda df: df.agg({"n": "sum"}).collect()[0][0], {}),
        ("group by n % 100: count, max(s)",
         lambda df: sorted(tuple(r) for r in df.groupBy((df.n % 100).alias("b")).agg({"*": "count", "s": "max"}).collect()), {}),
    ]
    # the same two with the aggregates left to Spark: the scan path, every row to the JVM
    spark_aggregates = {"regionscan.pushdown.aggregates": "false"}
    queries += [(f"{name}, Spark aggregates", query, spark_aggregates) for name, query, _ in queries[-2:]]
    spark_filters = {"regionscan.pushdown.decoded": "false"}
    queries.insert(5, (f"{queries[4][0]}, Spark filters", queries[4][1], spark_filters))
    out = []
    jvm_clock = _jvm_cpu_clock(spark)
    head = f"  {'query':<40} {'jvm':>7} {'first':>7} {'parquet':>8} {'ratio':>6}"
    _say(head + (f" {'python':>8} {'ratio':>6}" if python_source else ""))
    for name, query, extra in queries:
        fns = [lambda: query(ours(**extra)), lambda: query(theirs())]
        if python_source:
            fns.append(lambda: query(python(**extra)))
        before = _worker_stats(spark)
        first: list[float] = []
        jvm_cpu = [0.0] * len(fns)
        timed = best_with_first(repeat, fns, first, cpu=jvm_clock, cpu_used=jvm_cpu)
        after = _worker_stats(spark)
        (t_ours, r_ours), (t_pq, r_pq) = timed[0], timed[1]
        if r_ours != r_pq or (python_source and timed[2][1] != r_pq):
            raise AssertionError(f"{name}: regionscan gave {str(r_ours)[:80]}, Parquet {str(r_pq)[:80]}")
        runs = repeat + 1
        moved = {k: (after.get("counters", {}).get(k, 0) - before.get("counters", {}).get(k, 0)) // runs
                 for k in ("rows_sent", "bytes_sent")}
        row = {"query": name, "regionscan_s": round(t_ours, 3), "regionscan_first_s": round(first[0], 3),
               "parquet_s": round(t_pq, 3), "ratio": round(t_pq / t_ours, 3), "rows_per_s": int(rows / t_ours),
               "worker_cpu_s_per_run": round((after.get("cpu_s", 0) - before.get("cpu_s", 0)) / runs, 3),
               "jvm_cpu_s_per_run": round(jvm_cpu[0] / repeat, 3), "parquet_jvm_cpu_s_per_run": round(jvm_cpu[1] / repeat, 3),
               **moved}
        line = f"  {name:<40} {t_ours:6.2f}s {first[0]:6.2f}s {t_pq:7.2f}s {row['ratio']:5.2f}x"
        if python_source:
            t_py = timed[2][0]
            row.update({"python_source_s": round(t_py, 3), "python_ratio": round(t_pq / t_py, 3)})
            line += f" {t_py:7.2f}s {row['python_ratio']:5.2f}x"
        out.append(row)
        cpu_note = (f", JVM {row['jvm_cpu_s_per_run']:.2f} CPU-s (Parquet's {row['parquet_jvm_cpu_s_per_run']:.2f})"
                    if jvm_clock is not None else "")
        _say(line + f"   worker {row['worker_cpu_s_per_run']:.2f} CPU-s{cpu_note}, {moved['bytes_sent'] / 1e6:.1f} MB/run")
    return out


def breakdown(root: str, repeat: int) -> dict:
    """Seconds per full pass, in this process: engine scan of every split, SerDe decode, Parquet read."""
    from connector import TableInputFormat
    from serde import create_serde

    serde = create_serde("binary", MAPPING)
    fmt = TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": TABLE,
                            "hbase.mapreduce.scan.columns": " ".join(serde.scan_columns),
                            "regionscan.pin.register": "false"})
    splits = fmt.get_splits()
    batches: list[pa.RecordBatch] = []

    def scan() -> int:
        batches.clear()
        for split in splits:
            batches.extend(fmt.create_batch_reader(split))
        return sum(b.num_rows for b in batches)

    def decode() -> int:
        return sum(serde.deserialize_batch(b).num_rows for b in batches)

    parquet = os.path.join(root, f"{TABLE}-parquet")

    def read_parquet() -> int:
        return pq.read_table(parquet, use_threads=False).num_rows

    from connector.python_source import RegionScanDataSource

    source = RegionScanDataSource({"root": root, "table": TABLE, "hbase.columns.mapping": MAPPING,
                                   "regionscan.pin.register": "false"})

    def plan() -> int:
        return len(source.reader(None).partitions())

    reader = source.reader(None)
    partitions = reader.partitions()

    def source_read() -> int:  # what the Python side of every Spark task does, minus the hand-off
        return sum(b.num_rows for p in partitions for b in reader.read(p))

    (t_scan, _), = best_with_first(repeat, [scan])
    (t_decode, _), (t_pq, _) = best_with_first(repeat, [decode, read_parquet])
    (t_plan, _), (t_read, _) = best_with_first(repeat, [plan, source_read])
    result = {"engine_scan_s": round(t_scan, 3), "serde_decode_s": round(t_decode, 3),
              "source_plan_s": round(t_plan, 3), "source_read_s": round(t_read, 3),
              "pyarrow_parquet_read_s": round(t_pq, 3), "splits": len(splits)}
    _say(f"  one process: engine scan {t_scan:.2f}s + SerDe decode {t_decode:.2f}s; the source's read() over "
         f"every partition {t_read:.2f}s, its planning {t_plan:.3f}s (pyarrow reads the Parquet copy in {t_pq:.2f}s)")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--regions", type=int, default=10)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2, help="Spark local[N]")
    parser.add_argument("--root", default="./bench-data/spark")
    parser.add_argument("--breakdown", action="store_true", help="also time the engine and SerDe alone")
    parser.add_argument("--python-source", action="store_true", help="also run the Python source (regionscan_python)")
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--cache-results", action="store_true",
                        help="regionscan reads keep results between runs (regionscan.scan.cacheresults): the warm"
                             " figures are then kept answers, not scans")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    parquet = build(root, args.rows, args.regions, args.value_size)
    spark = _session(args.cores)
    try:
        _say(f"Spark local[{args.cores}], {args.rows:,} rows, {args.regions} regions, best of {args.repeat} (wall)")
        results = {"rows": args.rows, "regions": args.regions, "cores": args.cores, "repeat": args.repeat,
                   "cache_results": args.cache_results,
                   "queries": run_queries(spark, root, parquet, args.rows, args.repeat, args.python_source,
                                          args.cache_results),
                   "load_average": os.getloadavg()}
    finally:
        spark.stop()
    if args.breakdown:
        results["breakdown"] = breakdown(root, args.repeat)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
