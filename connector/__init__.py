"""regionscan's connectors: a Hadoop-style input format and the Spark data source ``regionscan``.

* :class:`TableInputFormat` -> :class:`TableSplit` (one per region, or finer
  by block index) -> :class:`TableRecordReader` / :class:`TableBatchRecordReader`,
  configured with HBase's ``hbase.mapreduce.*`` keys; splits pin the region
  manifests so reads are snapshot-consistent.
* the JVM source (``format("regionscan")`` where a JDK built it): a
  DataSource V2 in ``connector/java/src`` over a long-lived engine worker
  (:mod:`connector.worker`, protocol in ``connector/java/PROTOCOL.md``);
* the Python source (``format("regionscan_python")``, and ``regionscan``
  where there is no JVM source; ``df.write``):
  :class:`RegionScanDataSource`, registered automatically through the
  top-level module ``pyspark_regionscan``, on the active session when this
  package is imported, or by :func:`register`; :func:`spark_session` gives
  a session set up for it (worker Python, pushdown, quiet logs).
* :func:`explain` shows what a read pushes down; the writer's bulk load
  stages and commits through the engine (:mod:`storage.engine`), and
  :func:`commit_load`, :func:`abort_load` and :func:`recover` are re-exported
  here.

See docs/connector.md.
"""

from __future__ import annotations

import sys
from typing import Any

from storage.engine import SnapshotLost, abort_load, commit_load, recover

from .explain import ScanPlan, explain
from .input_format import TableInputFormat
from .options import ScanSpec
from .session import register, spark_session
from .pushdown import PushdownResult, push_filters
from .record_reader import TableBatchRecordReader, TableRecordReader
from .splits import TableSplit

__all__ = [
    "TableInputFormat",
    "TableSplit",
    "TableRecordReader",
    "TableBatchRecordReader",
    "ScanSpec",
    "SnapshotLost",
    "RegionScanDataSource",
    "register",
    "spark_session",
    "explain",
    "ScanPlan",
    "push_filters",
    "PushdownResult",
    "commit_load",
    "abort_load",
    "recover",
]


def __getattr__(name: str) -> Any:
    # The Spark source imports pyspark; load it only when asked for.
    if name == "RegionScanDataSource":
        from .python_source import RegionScanDataSource

        return RegionScanDataSource
    raise AttributeError(f"module 'connector' has no attribute {name!r}")


def _register_on_import() -> None:
    # Only when pyspark is already loaded: importing connector must not start or require Spark.
    if "pyspark.sql" not in sys.modules:
        return
    try:
        register()
    except Exception:  # noqa: BLE001 - a session that cannot register keeps the automatic route
        pass


_register_on_import()
