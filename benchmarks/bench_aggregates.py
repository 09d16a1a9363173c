"""Aggregates computed by the tasks against Spark aggregating the rows, on a lineitem-shaped table.

A table shaped like TPC-H's ``lineitem`` (a BIGINT key; DECIMAL(15,2) quantity,
price, discount and tax; the one-letter return flag and line status; a DATE;
a 44-byte comment) is written through ``df.write.format("regionscan")`` as a
user loads it (no compaction).  Each query then runs through the JVM source
with the aggregate pushdown on (each task aggregates its rows in the engine
worker and sends partial rows) and off (``regionscan.pushdown.aggregates=false``:
the rows go to Spark, which aggregates them), the two interleaved, best of
``--repeat`` after a warm-up.  Reported per side: wall seconds, the JVM's and
the engine worker's CPU seconds per run.

    python benchmarks/bench_aggregates.py --rows 400000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time

from harness import ROOT  # noqa: F401 - puts the checkout on sys.path

from bench_spark import _jvm_cpu_clock, _session, _worker_stats

from pyspark.sql import functions as F

TABLE = "lineitem"
MAPPING = ("l_key BIGINT :key, l_quantity DECIMAL(15,2) cf:q, l_extendedprice DECIMAL(15,2) cf:p, "
           "l_discount DECIMAL(15,2) cf:d, l_tax DECIMAL(15,2) cf:t, l_returnflag STRING cf:rf, "
           "l_linestatus STRING cf:ls, l_shipdate DATE cf:sd, l_partkey INT cf:pk, l_comment STRING cf:c")

# the aggregations timed: q1's shape (decimal sums and averages, counts, by two flags), and others
QUERIES = {
    "q1-shaped: by flag, status": lambda df: df.groupBy("l_returnflag", "l_linestatus").agg(
        F.sum("l_quantity"), F.sum("l_extendedprice"), F.avg("l_quantity"), F.avg("l_extendedprice"),
        F.avg("l_discount"), F.count("*")),
    "sum of two decimals": lambda df: df.agg(F.sum("l_quantity"), F.sum("l_extendedprice")),
    "min/max of a date, an int": lambda df: df.agg(F.min("l_shipdate"), F.max("l_shipdate"), F.max("l_partkey")),
    "by partkey % 1000 (1000 groups)": lambda df: df.groupBy((F.col("l_partkey") % 1000).alias("g")).agg(
        F.sum("l_extendedprice"), F.count("*")),
}


def load(spark, root: str, rows: int, regions: int) -> None:
    """``rows`` lineitem-like rows written through the JVM source into ``regions`` regions."""
    df = spark.range(rows).selectExpr(
        "id AS l_key",
        "CAST(1 + id % 50 AS DECIMAL(15,2)) AS l_quantity",
        "CAST((id * 7919) % 10000000 / 100.0 + 900 AS DECIMAL(15,2)) AS l_extendedprice",
        "CAST((id % 11) / 100.0 AS DECIMAL(15,2)) AS l_discount",
        "CAST((id % 9) / 100.0 AS DECIMAL(15,2)) AS l_tax",
        "element_at(array('A', 'N', 'R'), CAST(id % 3 AS INT) + 1) AS l_returnflag",
        "IF(id % 2 = 0, 'F', 'O') AS l_linestatus",
        "date_add(DATE'1992-01-02', CAST(id % 2500 AS INT)) AS l_shipdate",
        "CAST(id % 200000 AS INT) AS l_partkey",
        "rpad(concat('comment ', CAST(id AS STRING)), 44, 'x') AS l_comment")
    (df.repartition(regions).write.format("regionscan").option("root", root).option("table", TABLE)
     .option("hbase.columns.mapping", MAPPING).option("newtable", str(regions)).save())


def run(spark, root: str, repeat: int, only: str = "") -> list[dict]:
    """Every query (whose name holds ``only``) with the pushdown on and off, interleaved; the
    answers compared.  CPU seconds are summed over the timed runs and divided by ``repeat``."""
    jvm_clock = _jvm_cpu_clock(spark)

    def frame(pushdown: bool):
        return (spark.read.format("regionscan").option("root", root).option("table", TABLE)
                .option("regionscan.pushdown.aggregates", str(pushdown).lower()).load())

    out = []
    for name, query in QUERIES.items():
        if only not in name:
            continue
        answers, best = {}, {}
        cpu = {side: {"jvm": 0.0, "worker": 0.0} for side in ("on", "off")}
        for side in ("on", "off"):  # warm-up: the worker's caches, the JVM's classes
            answers[side] = sorted(map(tuple, query(frame(side == "on")).collect()), key=repr)
        if answers["on"] != answers["off"]:
            raise SystemExit(f"{name}: the answers differ with the pushdown on and off")
        pushed = "PushedAggregation" in query(frame(True))._jdf.queryExecution().executedPlan().toString()
        for _ in range(repeat):
            for side in ("on", "off"):
                before = _worker_stats(spark)
                jvm0 = jvm_clock() if jvm_clock else 0.0
                t0 = time.perf_counter()
                query(frame(side == "on")).collect()
                wall = time.perf_counter() - t0
                jvm = (jvm_clock() if jvm_clock else 0.0) - jvm0
                worker = _worker_stats(spark).get("cpu_s", 0) - before.get("cpu_s", 0)
                sent = _worker_stats(spark).get("counters", {}).get("bytes_sent", 0) - \
                    before.get("counters", {}).get("bytes_sent", 0)
                cpu[side]["jvm"] += jvm
                cpu[side]["worker"] += worker
                prior = best.get(side)
                if prior is None or wall < prior["wall_s"]:
                    best[side] = {"wall_s": round(wall, 3), "mb_sent": round(sent / 1e6, 2)}
        for side in ("on", "off"):
            best[side].update({f"{k}_cpu_s": round(v / repeat, 3) for k, v in cpu[side].items()})
        total = {side: cpu[side]["jvm"] + cpu[side]["worker"] for side in ("on", "off")}
        row = {"query": name, "pushed": pushed, "on": best["on"], "off": best["off"],
               "speedup_wall": round(best["off"]["wall_s"] / best["on"]["wall_s"], 2),
               "speedup_cpu": round(total["off"] / total["on"], 2) if total["on"] else None}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--regions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    parser.add_argument("--only", default="", help="run only the queries whose name holds this")
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="bench_aggregates_")
    spark = _session(args.cores)
    try:
        load(spark, f"{work}/root", args.rows, args.regions)
        run(spark, f"{work}/root", args.repeat, args.only)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
