"""The TPC-H tables into regionscan through ``df.write.format("regionscan")``, and the views
the queries read.

This is the load a user writes: the DataFrame's columns with their Spark types, the JSON
catalog of :func:`.schema.catalog` (binary SerDe, the primary key as an ordered row key), a
missing table created with ``newtable`` regions, and nothing after the load (no flush, no
compaction: the tables are read as the write left them).
"""

from __future__ import annotations

from typing import Any

from .schema import catalog, regions_for

__all__ = ["read_regionscan", "register_views", "write_regionscan"]


def write_regionscan(df: Any, root: str, table: str, rows: int, name: str | None = None) -> None:
    """Write ``df`` (TPC-H table ``table`` with ``rows`` rows) as regionscan table ``name``
    (default ``table``) under ``root``, created with :func:`.schema.regions_for` regions."""
    (df.write.format("regionscan").mode("append")
     .option("root", root).option("catalog", catalog(table, name))
     .option("newtable", str(regions_for(rows)))
     .save())


def read_regionscan(spark: Any, root: str, table: str, name: str | None = None,
                    options: dict[str, str] | None = None) -> Any:
    """The DataFrame of regionscan table ``name`` (default ``table``) holding TPC-H ``table``."""
    return (spark.read.format("regionscan").option("root", root)
            .option("catalog", catalog(table, name)).options(**(options or {})).load())


def register_views(frames: dict[str, Any]) -> None:
    """Make each DataFrame of ``frames`` (TPC-H table name -> DataFrame) the temporary view
    the queries name."""
    for table, df in frames.items():
        df.createOrReplaceTempView(table)
