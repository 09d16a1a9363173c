"""main: the end-to-end job: a pre-split table, loaded, read by Spark one partition per region.

    regionscan main [--root ./regionscan-data] [--rows 100000] [--regions 8]
    spark-submit jobs/main_job.py [--root URI] ...

Steps, each timed:

1. create the sample table, pre-split into ``--regions`` regions, and load
   ``--rows`` rows (4-byte big-endian key; ``cf:n`` a binary int,
   ``cf:s`` a string, ``cf:d`` a date stored as ``yyyy-MM-dd`` text);
2. flush it to store files;
3. start Spark (local unless ``--master`` or spark-submit says otherwise);
4. read it with ``spark.read.format("regionscan")`` (one partition per
   region) and run a filtered aggregate whose key range is pushed down to
   the engine, checking the answer against the one computed here; the
   first run includes the start of Spark's Python workers and is reported
   as start-up, the second as throughput;
5. count every row through Spark;
6. profile the SerDe on the same table (row-wise, naive-dates and
   vectorized paths) and print the ranked hotspots.

Each step prints a line when it starts (Spark's start-up and first query
take tens of seconds), and Spark logs warnings only (``--verbose``: INFO).
``--chart`` writes the profile chart as PNG, SVG or HTML (matplotlib),
``--speedscope`` as a speedscope flame graph.
"""

if __name__ == "__main__":  # spark-submit jobs/main_job.py: make the repository importable
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _sys.path.insert(0, _os.path.dirname(_here))

import argparse
import datetime as _dt
import os
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any, Sequence

import storage
from serde import profile_serde
from serde.charts import check_chart_path
from storage import InvalidArgument
from storage.engine import validate_table_name

from jobs._args import DEFAULT_ROOT, guarded, script_main
from jobs._spark import add_spark_arguments, parse_conf_pairs, spark_session
from jobs._writable import check_writable_file, check_writable_folder

__all__ = ["add_arguments", "run", "main", "MAPPING", "sample_row", "load_table", "expected_answer", "Timing"]

MAPPING = "id INT :key, n INT cf:n, s STRING cf:s, d DATE cf:d#s"
"""The sample table as the SerDe sees it (``#s``: the date is stored as text)."""

_EPOCH = _dt.date(2020, 1, 1)


@dataclass
class Timing:
    """One timed step."""

    step: str
    seconds: float
    rows: int | None = None

    def line(self) -> str:
        rate = f"{self.rows / self.seconds:>14,.0f} rows/s" if self.rows and self.seconds > 0 else ""
        rows = f"{self.rows:>12,} rows" if self.rows is not None else " " * 17
        return f"  {self.step:<44} {self.seconds:>8.2f} s {rows}{rate}"


def sample_row(i: int) -> tuple[bytes, dict[bytes, bytes]]:
    """Row ``i``: key ``i`` (4 bytes, big-endian), n = 7i - 1000, s = a short text, d = a day."""
    day = _EPOCH + _dt.timedelta(days=i % 1500)
    return struct.pack(">I", i), {
        b"cf:n": struct.pack(">i", i * 7 - 1000),
        b"cf:s": b"value-%08d" % i,
        b"cf:d": day.isoformat().encode(),
    }


def load_table(conn: storage.Connection, name: str, rows: int, regions: int) -> storage.Table:
    """Create the table split into ``regions`` equal key ranges and load ``rows`` rows."""
    splits = [struct.pack(">I", rows * k // regions) for k in range(1, regions)]
    table = conn.create_table(name, {"cf": {"max_versions": 1}}, split_keys=splits, settings={"wal_sync": "none"})
    with table.batch(batch_size=20_000) as batch:
        for i in range(rows):
            key, data = sample_row(i)
            batch.put(key, data)
    return table


def query_bounds(rows: int) -> tuple[int, int]:
    """The key range the query asks for: the middle half of the table."""
    return rows // 4, rows // 4 + max(1, rows // 2)


def expected_answer(rows: int) -> dict[int, tuple[int, int]]:
    """bucket -> (count, sum of n) of the query, computed without Spark."""
    lo, hi = query_bounds(rows)
    out: dict[int, list[int]] = {}
    for i in range(lo, min(hi, rows)):
        n = i * 7 - 1000
        if n % 2 == 0:
            entry = out.setdefault(i % 10, [0, 0])
            entry[0] += 1
            entry[1] += n
    return {k: (v[0], v[1]) for k, v in out.items()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Size of the sample and where to put it; chart outputs; Spark settings."""
    parser.add_argument("--root", default=DEFAULT_ROOT, help=f"where the tables live (default {DEFAULT_ROOT})")
    parser.add_argument("--table", default="main_sample", help="table name (default main_sample)")
    parser.add_argument("--rows", type=int, default=100_000, help="rows to load (default 100000)")
    parser.add_argument("--regions", type=int, default=8, help="regions to pre-split into (default 8)")
    parser.add_argument("--profile-rows", type=int, default=50_000, help="rows per SerDe profile path (default 50000)")
    parser.add_argument("--keep", action="store_true", help="reuse an existing table instead of recreating it")
    parser.add_argument("--chart", default=None, metavar="PATH", help="write the SerDe profile chart (.png, .svg or .html; needs matplotlib)")
    parser.add_argument("--speedscope", default=None, metavar="PATH", help="write the SerDe profile as speedscope JSON")
    add_spark_arguments(parser)


def _check(args: argparse.Namespace) -> None:
    if args.rows < 1:
        raise InvalidArgument(f"--rows must be positive, got {args.rows}")
    if not 1 <= args.regions <= args.rows:
        raise InvalidArgument(f"--regions must be between 1 and --rows, got {args.regions}")
    if args.profile_rows < 1:
        raise InvalidArgument(f"--profile-rows must be positive, got {args.profile_rows}")
    validate_table_name(args.table)
    if args.chart:
        check_chart_path(args.chart, "--chart")  # before the job: matplotlib and the suffix
    check_writable_file(args.chart, "--chart")
    check_writable_file(args.speedscope, "--speedscope")
    check_writable_folder(args.root, "--root")


STEPS = 6


def _step(number: int, text: str) -> None:
    """Say which step starts now (printed at once: some take tens of seconds)."""
    print(f"[{number}/{STEPS}] {text} ...", flush=True)


def _prepare(args: argparse.Namespace, timings: list[Timing]) -> None:
    conn = storage.connect(args.root)
    try:
        if conn.is_table_available(args.table) and not args.keep:
            conn.delete_table(args.table)
        if conn.is_table_available(args.table):
            print(f"  reusing table {args.table}")
            return
        _step(1, f"loading {args.rows:,} rows into {args.regions} regions")
        t0 = time.perf_counter()
        table = load_table(conn, args.table, args.rows, args.regions)
        timings.append(Timing(f"load {args.regions} regions (WAL + memstore)", time.perf_counter() - t0, args.rows))
        _step(2, "flushing to store files")
        t0 = time.perf_counter()
        table.flush()
        timings.append(Timing("flush to store files", time.perf_counter() - t0, args.rows))
    finally:
        conn.close()  # readers in other processes and the profile open it read-only


def _read(spark: Any, args: argparse.Namespace) -> Any:
    # one task per region, as the job shows (the JVM source would pack small regions by size)
    return (spark.read.format("regionscan").option("root", args.root).option("table", args.table)
            .option("hbase.columns.mapping", MAPPING).option("regionscan.pack.splits", "false").load())


def _query(spark: Any, args: argparse.Namespace, timings: list[Timing]) -> bool:
    """Read through the data source, run the aggregate and the count; True if both are right."""
    df = _read(spark, args)
    partitions = df.rdd.getNumPartitions()
    print(f"  spark.read.format('regionscan'): {partitions} partition(s) for {args.regions} region(s); "
          f"schema {', '.join(f'{f.name} {f.dataType.simpleString()}' for f in df.schema.fields)}")
    df.createOrReplaceTempView(args.table)
    lo, hi = query_bounds(args.rows)
    sql = (f"SELECT id % 10 AS bucket, count(*) AS rows, sum(n) AS sum_n, min(d) AS first_day, max(d) AS last_day "
           f"FROM {args.table} WHERE id >= {lo} AND id < {hi} AND n % 2 = 0 GROUP BY id % 10 ORDER BY bucket")
    print(f"  query: {sql}")
    _step(4, "first query (starts Spark's Python workers)")
    t0 = time.perf_counter()
    spark.sql(sql).collect()
    # the first run mostly measures worker start-up: report it as such, and time a second run
    timings.append(Timing("first query (Python worker start-up)", time.perf_counter() - t0))
    _step(4, "the same query again, workers warm")
    t0 = time.perf_counter()
    result = spark.sql(sql).collect()
    elapsed = time.perf_counter() - t0
    matched = sum(r["rows"] for r in result)
    timings.append(Timing("filtered aggregate (warm)", elapsed, matched))
    try:
        from connector import explain

        plan = explain(df.where(f"id >= {lo} AND id < {hi}"))
        print("  pushed down: " + "; ".join(plan.pushed or ["nothing"])
              + (f"; key ranges: {len(plan.key_ranges)}" if plan.key_ranges is not None else ""))
    except Exception as exc:  # noqa: BLE001 - the explanation is a courtesy; the query already ran
        print(f"  (no pushdown summary: {exc})")
    print(f"  {'bucket':>6} {'rows':>8} {'sum_n':>14} {'first_day':>11} {'last_day':>11}")
    for r in result:
        first, last = str(r["first_day"]), str(r["last_day"])
        print(f"  {r['bucket']:>6} {r['rows']:>8,} {r['sum_n']:>14,} {first:>11} {last:>11}")
    got = {r["bucket"]: (r["rows"], r["sum_n"]) for r in result}
    ok = True
    if got != expected_answer(args.rows):
        print("MISMATCH: Spark's aggregate differs from the answer computed without Spark")
        ok = False
    _step(5, "counting every row through Spark")
    t0 = time.perf_counter()
    total = _read(spark, args).count()  # a fresh read: nothing of the filtered query's plan carries over
    timings.append(Timing("count(*) over every region", time.perf_counter() - t0, total))
    if total != args.rows:
        print(f"MISMATCH: Spark counted {total} rows, the table has {args.rows}")
        ok = False
    if not ok:
        return False
    print("  ok: Spark's answers match the ones computed without it")
    return True


def _profile(args: argparse.Namespace, timings: list[Timing]) -> None:
    _step(6, "profiling the SerDe (row, naive-dates and batch paths)")
    conn = storage.connect(args.root, read_only=True)
    try:
        table = conn.table(args.table)
        t0 = time.perf_counter()
        report = profile_serde(table, MAPPING, serde="binary", rows=min(args.profile_rows, args.rows))
        timings.append(Timing("SerDe profile (3 paths)", time.perf_counter() - t0))
    finally:
        conn.close()
    print()
    print(report.render_text(top=8))
    if args.chart:
        report.write_chart(args.chart, "--chart")
        print(f"profile chart written to {args.chart}")
    if args.speedscope:
        report.to_speedscope(args.speedscope)
        print(f"speedscope profile written to {args.speedscope} (open it at https://www.speedscope.app)")


@guarded("main")
def run(args: argparse.Namespace) -> int:
    """Run every step and print the timings; 1 if Spark's answers are wrong."""
    _check(args)
    where = args.root if "://" in args.root else os.path.abspath(args.root)
    print(f"regionscan main: table {args.table!r} under {where}, {args.rows:,} rows in {args.regions} regions")
    timings: list[Timing] = []
    started = time.perf_counter()
    _prepare(args, timings)
    _step(3, f"starting Spark ({args.master or 'local[*]'})")
    t0 = time.perf_counter()
    with spark_session("regionscan main", args.master, parse_conf_pairs(args.conf), data_source=True,
                       verbose=args.verbose) as spark:
        timings.append(Timing(f"start Spark ({spark.sparkContext.master})", time.perf_counter() - t0))
        ok = _query(spark, args, timings)
    _profile(args, timings)
    print()
    print("timings:")
    for t in timings:
        print(t.line())
    print(f"  {'total':<44} {time.perf_counter() - started:>8.2f} s")
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit jobs/main_job.py ...``"""
    return script_main(sys.modules[__name__], "main", argv)


if __name__ == "__main__":
    from jobs.main_job import main as _main  # run under the package name, so tasks pickle by reference

    sys.exit(_main())
