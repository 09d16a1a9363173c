"""What a Spark query did, as the connector tests read it: its executed plan, its rows in
order, and the statistics of the JVM source's engine worker that served it."""

from __future__ import annotations

import json
import sys


def executed_plan(df) -> str:
    """The physical plan Spark executed (or will execute) for ``df``, as text."""
    return df._jdf.queryExecution().executedPlan().toString()


def sorted_rows(df) -> list[tuple]:
    """``df``'s rows as tuples, sorted: the answer whatever the partitioning."""
    return sorted(tuple(r) for r in df.collect())


def worker_class(spark):
    """The JVM source's engine-worker class (``statsJson``, ``currentPid`` ...) in ``spark``'s JVM."""
    return spark._jvm.regionscan.spark.WorkerProcess


def worker_stats(spark) -> dict:
    """The statistics of the engine worker this interpreter's reads go to: counters, scan metrics."""
    return json.loads(worker_class(spark).statsJson(sys.executable, ""))
