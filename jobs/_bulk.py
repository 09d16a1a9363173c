"""Bulk loads run by jobs: Spark tasks stage store files, the driver commits them at once.

This drives the engine's bulk load (:mod:`storage.engine`, HBase's ``HFileOutputFormat2`` plus
``completebulkload``): each task stages its rows or cells as store files
cut at the target's region boundaries; when every task has succeeded the
driver commits them all in one journal write, so readers see the whole
load or none of it.  If anything fails before the commit, every staged
file of the job is deleted (by job id, so failed task attempts go too) and
the table is as it was.

Tasks may add row batches (``key`` + ``cf:q`` / family-map columns, as a
SerDe's ``serialize_batch`` gives them) or raw cells (the engine's cell
schema, with their own timestamps), see :class:`CellLoadTask`.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from connector.scanning import is_remote_root
from storage import FamilySettings, InvalidArgument, TableNotFound
from storage.engine import (
    BulkLoadTask,
    FileSystem,
    LoadReport,
    RegionBounds,
    StagedFile,
    abort_load,
    commit_load,
    hold_staging,
    missing_table,
    release_staging,
    table_exists,
    table_files,
    table_regions,
)

from jobs._progress import Progress
from jobs._spark import run_tasks

__all__ = ["LoadTarget", "CellLoadTask", "StageResult", "prepare_target", "run_load", "drop_created_table"]


@dataclass(frozen=True)
class LoadTarget:
    """The table a job loads into, as the driver saw it (picklable: tasks receive it)."""

    root: str
    table: str
    job_id: str
    regions: tuple[RegionBounds, ...]
    families: dict[str, FamilySettings]
    timestamp: int

    def table_fs(self) -> FileSystem:
        return table_files(self.root, self.table)

    def open_task(self, name: str) -> "CellLoadTask":
        """A staging task for this attempt (``name`` is made unique per attempt)."""
        return CellLoadTask(self.table_fs(), self.job_id, f"{name}-{uuid.uuid4().hex[:8]}", self.regions,
                            self.families, self.timestamp)


def prepare_target(root: str, table: str) -> LoadTarget:
    """Check the target on the driver and fix the job id, regions and load timestamp."""
    if is_remote_root(root):
        raise InvalidArgument(f"--root {root}: a bulk load writes store files into the table's folder, and a "
                              "region server holds that table open; give the table's path or filesystem URI")
    table_fs = table_files(root, table)
    if not table_exists(table_fs):
        raise TableNotFound(missing_table(FileSystem(root), table, root))
    regions, families = table_regions(table_fs)
    return LoadTarget(root, table, f"job-{uuid.uuid4().hex[:12]}", tuple(regions), families,
                      int(time.time() * 1000))


CellLoadTask = BulkLoadTask  # row batches through ``add``, raw cells through ``add_cells``


@dataclass
class StageResult:
    """What one staging task produced."""

    files: list[StagedFile] = field(default_factory=list)
    rows: int = 0
    cells: int = 0
    nbytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def drop_created_table(root: str, table: str) -> None:
    """Delete a table this job created, after its load failed: the job leaves what it found."""
    import storage

    conn = storage.connect(root)
    try:
        if conn.is_table_available(table):
            conn.delete_table(table)
    finally:
        conn.close()


def run_load(spark: Any, target: LoadTarget, stage: Callable[[Any], StageResult], items: Sequence[Any],
             progress: Progress | None = None, mode: str = "append",
             check: Callable[[list[StageResult]], None] | None = None) -> tuple[LoadReport, list[StageResult]]:
    """Stage ``items`` in Spark tasks, run ``check`` on the results, then commit; abort on any failure.

    ``check`` may raise to refuse the commit (bad lines, a mismatch).
    """
    # held until the commit or abort: should this driver be killed first, the next writer to open
    # the table deletes what its tasks staged
    lock = hold_staging(target.table_fs(), target.job_id)
    try:
        results = run_tasks(spark, stage, items, progress, description=f"bulk load into {target.table}")
        if check is not None:
            check(results)
        staged = [f for r in results for f in r.files]
        report = commit_load(target.table_fs(), target.job_id, staged, mode)
    except BaseException:
        abort_load(target.table_fs(), target.job_id)
        raise
    finally:
        release_staging(target.table_fs(), target.job_id, lock)
    return report, results
