"""Spark SaveModes for ``df.write.format("regionscan")``, decided on the driver before any task.

Spark's file sources (and hbase-spark) take "the table exists" as the test:

=================  ==========================  =====================================
mode               table exists                table absent
=================  ==========================  =====================================
``append``         add the rows                create it (``newtable`` = regions)
``overwrite``      replace the contents        create it (``newtable`` = regions)
``errorifexists``  fail, one line              create it (``newtable`` = regions)
``ignore``         write nothing               create it (``newtable`` = regions)
=================  ==========================  =====================================

A table exists when its manifest does (it may hold no rows).  A missing
table without ``newtable`` fails in one line before any task starts.  The
JVM source (``format("regionscan")``) asks the engine worker (op ``save``)
and then runs its native bulk load (the Python source's writer, fed Arrow by
the JVM's tasks: :mod:`connector.worker.writes`) in ``append`` or
``overwrite`` mode; pyspark's Python Data Source API has only those two, so
``format("regionscan_python")`` refuses the others (Spark's
UNSUPPORTED_DATA_SOURCE_SAVE_MODE, one line).
"""

from __future__ import annotations

from typing import Any, Mapping

from storage import InvalidArgument, TableNotFound, engine
from storage.engine import FileSystem, missing_table, table_files

from .options import conf_int
from .scanning import is_remote_root
from .source_config import SourceConfig
from .write_splits import sample_request

__all__ = ["SAVE_MODES", "TableExists", "table_exists", "missing_for_write", "decide"]

SAVE_MODES = ("append", "overwrite", "errorifexists", "ignore")


class TableExists(InvalidArgument):
    """A write in mode ErrorIfExists found the table."""


def table_exists(config: SourceConfig) -> bool:
    """Whether ``config``'s table exists (its manifest is there) under a filesystem root."""
    if is_remote_root(config.root):
        raise InvalidArgument(
            f"bulk load writes store files, so it needs the table's filesystem root, not {config.root}")
    return engine.table_exists(table_files(config.root, config.table))


def missing_for_write(config: SourceConfig) -> TableNotFound:
    """The error of a write to a table that is not there, without ``newtable``."""
    message = missing_table(FileSystem(config.root), config.table, config.root)
    return TableNotFound(f"{message}; create it, or give option newtable = number of regions")


def decide(options: Mapping[str, Any], mode: str) -> dict:
    """What a write in ``mode`` does: ``{"write": bool, "mode": "append" | "overwrite", "exists": bool}``,
    and ``"sample"`` (:func:`connector.write_splits.sample_request`) when it creates the table with
    ``newtable`` > 1 regions or loads into a table of several: the keys the driver samples so the
    regions split where the rows are, and each region's rows are staged by one task.

    Raises (one line, naming the table) for ErrorIfExists on an existing
    table, for a missing table without ``newtable``, and for an unknown mode.
    """
    name = str(mode).replace("_", "").lower()
    if name == "default":
        name = "errorifexists"
    if name not in SAVE_MODES:
        raise InvalidArgument(f"unknown save mode {mode!r} (one of {', '.join(SAVE_MODES)})")
    config = SourceConfig.from_options(options)
    exists = table_exists(config)
    if exists and name == "errorifexists":
        raise TableExists(f"table {config.table} already exists under {config.root} (save mode ErrorIfExists; "
                          "use mode append, overwrite or ignore)")
    if not exists and conf_int(config.conf, "newtable", minimum=1) is None:
        raise missing_for_write(config)
    if exists and name == "ignore":
        return {"write": False, "mode": "append", "exists": True}
    out = {"write": True, "mode": "overwrite" if name == "overwrite" else "append", "exists": exists}
    # the driver samples the keys: a new table splits where the rows are, and a load into an
    # existing table sends each region's rows to one task (one staged file per region, not one per task)
    sample = sample_request(config, len(engine.table_regions(table_files(config.root, config.table))[0]) if exists else None)
    if sample is not None:
        out["sample"] = sample
    return out
