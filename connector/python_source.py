"""The Spark data source ``regionscan`` (pyspark's Python Data Source API).

Read::

    df = (spark.read.format("regionscan")
          .option("root", "/data/tables").option("table", "events")
          .option("hbase.columns.mapping", "key STRING :key, n INT cf:n")
          .load())

One Spark partition per split of :class:`~connector.input_format.TableInputFormat`
(one per region by default); each task reads its pinned region files and
yields Arrow batches decoded by the SerDe.  Spark evaluates every filter
itself by default: pyspark 4.3 keeps a Python reader's last pushdown on the
relation, so pushing filters would make a reused DataFrame or view answer a
later query with an earlier query's filters.  The option
``regionscan.python.pushdown=true`` opts in to pushdown as in
:mod:`connector.pushdown` (for DataFrames loaded per query) when the session
has ``spark.sql.python.filterPushdown.enabled`` on (``connector.register()``
and ``connector.spark_session()`` turn it on).  The JVM source
(:mod:`connector.worker`) pushes filters safely: Spark makes its scan builder
per query.

Write (bulk load, the engine's: :mod:`storage.engine`)::

    df.write.format("regionscan").mode("append").options(...).save()

``append`` adds the rows; ``overwrite`` replaces the table's contents.
Each task stages store files; the driver's commit adds them atomically.
The table must exist, or give ``newtable`` = number of regions to create it
(split at the quantiles of the keys the tasks sampled, at the commit: see
:class:`RegionScanWriter`).
A write that gives a mapping stores it with the table when the table has
none, or when the write creates or overwrites the table
(:mod:`connector.stored_mapping`); later reads may then give root and table only.
pyspark's Python Data Source API has no other save mode; the JVM source's
writes also take ``errorifexists`` and ``ignore`` (:mod:`connector.savemode`).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from serde.mapping import ColumnKind
from storage import InvalidArgument, TableLocked, table_dir, uniform_split_keys
from storage.engine import (
    BulkLoadTask,
    FileSystem,
    StagedFile,
    abort_load,
    commit_load,
    hold_staging,
    release_staging,
    table_exists,
    table_regions,
)

from .explain import ScanPlan, save_plan
from .options import MAX_RESTARTS, conf_int
from . import raw_read, staging_keeper
from .pushdown import push_filters
from .record_reader import TableBatchRecordReader
from .savemode import missing_for_write
from .scanning import is_remote_root
from .source_config import SourceConfig, write_timestamp
from .stored_mapping import remember
from .write_splits import MAX_SAMPLE, SAMPLE_PER_REGION, KeySample, merged_split_keys
from .splits import TableSplit

__all__ = [
    "RegionScanDataSource",
    "PythonRegionScanDataSource",
    "PYTHON_SOURCE_NAME",
    "RegionScanReader",
    "SparkFilteredReader",
    "RawCellReader",
    "RegionScanWriter",
    "RegionScanPartition",
    "BulkLoadMessage",
    "fill_missing",
]

_LOG = logging.getLogger("connector.python_source")
PYTHON_SOURCE_NAME = "regionscan_python"


class RegionScanPartition(InputPartition):
    """One split (None: an empty read)."""

    def __init__(self, split: TableSplit | None):
        super().__init__(split)
        self.split = split


class RegionScanDataSource(DataSource):
    """``spark.read.format("regionscan")`` / ``df.write.format("regionscan")``."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``spark.read.format("regionscan")``."""
        return "regionscan"

    def _config(self) -> SourceConfig:
        return SourceConfig.from_options(self.options)

    def schema(self) -> str:
        """The DataFrame schema (Spark DDL) from the SerDe of the mapping (a raw read's: :mod:`connector.raw_read`)."""
        config = self._config()
        return raw_read.schema_ddl(config) if raw_read.is_raw(config) else config.schema_ddl()

    def reader(self, schema) -> "RegionScanReader":
        """A reader for ``schema`` (a narrower user schema also prunes the scan).

        A :class:`SparkFilteredReader` unless the ``regionscan.python.pushdown``
        option opts in (Spark 4.3 would reuse an earlier query's pushdown on
        a reused DataFrame or view), and always where the session has Python
        filter pushdown off: a reader offering ``pushFilters`` would fail there.
        """
        config = self._config()
        if raw_read.is_raw(config):  # cells, one Spark row each; Spark evaluates every filter
            return RawCellReader(config, schema)
        target = _arrow_schema(schema)
        if target is not None:
            known = {n.lower(): n for n in config.read_serde().column_names}
            names = [known.get(f.name.lower(), f.name) for f in target]
            if set(names) != set(config.output_names) and set(names) <= set(known.values()):
                config = config.with_columns(names)  # a narrower user schema prunes the scan too
        pushdown = config.python_pushdown and _pushdown_disabled() is not True
        cls = RegionScanReader if pushdown else SparkFilteredReader
        return cls(config, schema)

    def writer(self, schema, overwrite: bool) -> "RegionScanWriter":
        """A bulk-load writer (``overwrite`` True for ``mode("overwrite")``) whose job holds its
        staging lock until its commit or abort (:mod:`connector.staging_keeper`)."""
        writer = RegionScanWriter(self._config(), schema, overwrite, sample_splits=True)
        writer.start_keeper()
        return writer


def _pushdown_disabled() -> bool | None:
    """Whether the Spark planner calling ``reader()`` has Python filter pushdown off (None: unknown).

    pyspark's Python API does not tell ``reader()`` the setting, yet its
    planner fails a read whose reader overrides ``pushFilters`` when the
    setting is off (DATA_SOURCE_PUSHDOWN_DISABLED).  The planner holds the
    setting in its local ``enable_pushdown`` (pyspark 4.x
    ``plan_data_source_read``); read it from the calling frames.  The
    pushdown planner has no such local: there pushdown is on.
    """
    frame = sys._getframe(1)
    for _ in range(8):
        if frame is None:
            return None
        value = frame.f_locals.get("enable_pushdown")
        if isinstance(value, bool) and frame.f_globals.get("__name__", "").startswith(("pyspark.", "__main__")):
            return not value
        frame = frame.f_back
    return None


def _arrow_schema(schema) -> pa.Schema | None:
    if schema is None or isinstance(schema, str):
        return None
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")  # Spark's Python worker expects TimestampType as UTC


class PythonRegionScanDataSource(RegionScanDataSource):
    """The Python source under a name of its own: ``format("regionscan_python")``.

    ``format("regionscan")`` is the JVM source where a JDK built it
    (:mod:`connector.worker`); this name reaches the Python source on any
    session, for machines without a JDK and for comparison.
    """

    @classmethod
    def name(cls) -> str:
        """The format name: ``spark.read.format("regionscan_python")``."""
        return PYTHON_SOURCE_NAME


class RegionScanReader(DataSourceReader):
    """Plans splits with pushed-down key ranges and filters; reads each split as Arrow batches."""

    def __init__(self, config: SourceConfig, schema: Any = None):
        self.config = config
        self.key_ranges = None
        self.engine_filter: str | None = None
        self.names = config.output_names
        target = _arrow_schema(schema)
        if target is not None:
            known = {n.lower(): n for n in config.read_serde().column_names}
            missing = [f.name for f in target if f.name.lower() not in known]
            if missing:
                raise InvalidArgument(f"schema columns {missing} are not in the mapping ({sorted(known.values())})")
            self.names = [known[f.name.lower()] for f in target]
        self.target = target
        self._result = None

    def pushFilters(self, filters: Sequence[Any]) -> Iterator[Any]:
        """Keep what the engine applies exactly; give the rest back to Spark."""
        result = push_filters(list(filters), self.config.read_serde(), self.config.column_filters,
                              self.config.superset_filters)
        self.key_ranges = result.key_ranges
        self.engine_filter = repr(result.engine_filter) if result.engine_filter is not None else None
        self._result = result
        save_plan(self.config, ScanPlan.build(self.config, result))
        for f in result.residual:
            yield f

    def partitions(self) -> list[RegionScanPartition]:
        """One partition per split of the input format, restricted by the pushed-down filters."""
        fmt = self.config.input_format(self.key_ranges, self.engine_filter)
        splits = fmt.get_splits()
        result = self._result
        if result is None:  # Spark calls pushFilters only when it has filters to offer
            result = push_filters([], self.config.read_serde(), self.config.column_filters,
                                  self.config.superset_filters)
        if result.prune_filter is not None:  # the engine skips row groups Spark's comparisons rule out
            prune = repr(result.prune_filter)
            splits = [dataclasses.replace(s, scan=s.scan.with_request(prune_filter=prune))
                      if s.scan is not None else s for s in splits]
        save_plan(self.config, ScanPlan.build(self.config, result, splits))
        if not splits:
            return [RegionScanPartition(None)]
        return [RegionScanPartition(s) for s in splits]

    def read(self, partition: RegionScanPartition) -> Iterator[pa.RecordBatch]:
        """The split's rows as Arrow batches of the DataFrame's schema."""
        split = partition.split
        if split is None:
            return
        serde = self.config.read_serde()
        reader = TableBatchRecordReader(conf_int(self.config.conf, MAX_RESTARTS, 3, minimum=0),
                                        {"token": self.config.conf["token"]} if self.config.conf.get("token") else None)
        reader.initialize(split)
        names = self.names
        # Spark's types: SerDe timestamps are naive UTC, TimestampType wants them zoned (the same instants).
        target = self.target if self.target is not None else self.config.spark_arrow_schema(names)
        try:
            for rows in reader:
                typed = serde.deserialize_batch(rows)
                arrays = [typed.column(n) for n in names]
                arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, target)]
                yield pa.RecordBatch.from_arrays(arrays, schema=target)
        finally:
            reader.close()


class RawCellReader(DataSourceReader):
    """A raw read (``hbase.spark.query.raw``): one partition per split, each split's raw
    cells as batches of the raw DataFrame's columns (:mod:`connector.raw_read`)."""

    def __init__(self, config: SourceConfig, schema: Any = None):
        self.config = config
        target = _arrow_schema(schema)
        self.names = raw_read.resolve_names(config, None if target is None else [f.name for f in target])
        self.target = target if target is not None else raw_read.arrow_schema(config, self.names)

    def partitions(self) -> list[RegionScanPartition]:
        """One partition per split of the raw read's input format."""
        splits = raw_read.planned_splits(self.config)
        return [RegionScanPartition(s) for s in splits] or [RegionScanPartition(None)]

    def read(self, partition: RegionScanPartition) -> Iterator[pa.RecordBatch]:
        """The split's raw cells as Arrow batches of the DataFrame's schema."""
        if partition.split is not None:
            yield from raw_read.raw_batches(self.config, [partition.split], self.names, self.target)


class SparkFilteredReader(RegionScanReader):
    """A :class:`RegionScanReader` without filter pushdown: Spark evaluates every filter itself.

    For sessions with ``spark.sql.python.filterPushdown.enabled`` off, where
    pyspark refuses readers that override ``pushFilters``; this class puts
    back the base class's hook.
    """

    pushFilters = DataSourceReader.pushFilters


@dataclass
class BulkLoadMessage(WriterCommitMessage):
    """What one task attempt staged."""

    job_id: str
    task_id: str
    files: list[StagedFile] = field(default_factory=list)
    # a sample of the task's encoded row keys and how many rows it wrote, when the write
    # splits the table it creates at the commit (RegionScanWriter's ``sample_splits``)
    sample: pa.Array | None = None
    sample_rows: int = 0


def _new_job_id() -> str:
    return f"{int(time.time() * 1000):013d}-{uuid.uuid4().hex[:12]}"


class RegionScanWriter(DataSourceArrowWriter):
    """Bulk-loads a DataFrame: tasks stage store files, the driver commits them atomically.

    A write that creates its table with ``newtable`` = N splits it at the quantiles of the rows'
    encoded keys (:mod:`connector.write_splits`).  The JVM source's driver samples the DataFrame
    first and passes ``split_keys``.  pyspark's Python writer sees no rows on the driver, so with
    ``sample_splits`` the table is created with one region, each task samples the keys it
    stages, and the commit splits the still empty table at the merged sample's quantiles before
    it adds the staged files (which the commit then cuts at the new regions' bounds).
    """

    def __init__(self, config: SourceConfig, schema: Any, overwrite: bool, split_keys: list[bytes] | None = None,
                 sample_splits: bool = False):
        if raw_read.is_raw(config):  # both sources' writes come here
            raise InvalidArgument("hbase.spark.query.raw is a read option: a write stores puts of the DataFrame's rows")
        if is_remote_root(config.root):
            raise InvalidArgument(
                f"bulk load writes store files, so it needs the table's filesystem root, not {config.root}"
            )
        self.config = config
        self.overwrite = overwrite
        self.job_id = _new_job_id()
        self.timestamp = write_timestamp(config.conf)
        self.created = False  # True when this write creates the table (newtable)
        # N when this write created its table with one region, to split it into N at the commit
        self.split_regions: int | None = None
        # the process holding the job's staging lock for a Python-source write (None: the JVM
        # source's engine worker holds it, connector.worker.writes)
        self.keeper: staging_keeper.StagingKeeper | None = None
        serde = config.write_serde()
        table_fs = self._table_fs()
        if not table_exists(table_fs):
            regions = conf_int(config.conf, "newtable", minimum=1)
            if regions is None:
                raise missing_for_write(config)
            if sample_splits and split_keys is None and regions > 1:
                self._create_table(serde, 1, None)
                self.split_regions = regions if self.created else None
            else:
                self._create_table(serde, regions, split_keys)
        self.regions, families = table_regions(table_fs)
        self.families = {name: settings for name, settings in families.items()}
        for col in serde.mapping.columns:
            if col.family is not None and col.family not in self.families:
                raise InvalidArgument(f"column {col.name!r} maps family {col.family!r}, which table "
                                      f"{config.table} lacks (families: {sorted(self.families)})")
        names = set(serde.column_names)
        incoming = [f.name for f in _arrow_schema(schema) or []]
        unknown = [n for n in incoming if n not in names]
        if unknown:
            raise InvalidArgument(f"DataFrame columns {unknown} are not in the mapping ({serde.column_names})")
        keys = [c.name for c in serde.mapping.columns if c.kind in (ColumnKind.KEY, ColumnKind.KEY_PART)]
        missing = [k for k in keys if k not in incoming]
        if incoming and missing:
            raise InvalidArgument(f"the DataFrame lacks the row key column(s) {missing}")

    def _table_fs(self) -> FileSystem:
        return FileSystem(self.config.root).sub(table_dir(self.config.table))

    def start_keeper(self) -> None:
        """Have a keeper process hold the job's staging lock from now to :meth:`commit` or
        :meth:`abort`: should the driver die in between, the next writer to open the table
        deletes the job's staging folder."""
        self.keeper = staging_keeper.start(self.config.root, self.config.table, self.job_id)

    def _let_go(self) -> None:
        if self.keeper is not None:
            staging_keeper.release(self.keeper, self.config.root, self.config.table)

    def _create_table(self, serde, regions: int, split_keys: list[bytes] | None) -> None:
        """Create the missing table: at ``split_keys`` (from a sample of the rows' keys,
        :mod:`connector.write_splits`) when given, else ``regions`` uniform regions."""
        import storage

        families = sorted({c.family for c in serde.mapping.columns if c.family is not None})
        if not families:
            raise InvalidArgument("newtable needs at least one column family in the mapping")
        conn = storage.connect(self.config.root)
        try:
            if not conn.is_table_available(self.config.table):
                if split_keys is not None and len(split_keys) == regions - 1:
                    conn.create_table(self.config.table, {f: {} for f in families}, split_keys=split_keys)
                else:
                    conn.create_table(self.config.table, {f: {} for f in families}, num_regions=regions)
                self.created = True
        finally:
            conn.close()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> BulkLoadMessage:
        """Stage this task's rows as store files; returns what was staged."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task_id = f"p{ctx.partitionId():05d}-a{ctx.attemptNumber():03d}" if ctx else f"p-{uuid.uuid4().hex[:8]}"
        return self.write_task(iterator, task_id)

    def write_task(self, iterator: Iterator[pa.RecordBatch], task_id: str) -> BulkLoadMessage:
        """Stage the rows of task attempt ``task_id`` (also what the JVM source's tasks run)."""
        serde = self.config.write_serde()
        task = BulkLoadTask(self._table_fs(), self.job_id, task_id, self.regions, self.families, self.timestamp)
        sample = None
        if self.split_regions is not None:
            sample = KeySample(min(SAMPLE_PER_REGION * self.split_regions, MAX_SAMPLE))
        try:
            for batch in iterator:
                if batch.num_rows == 0:
                    continue
                rows = serde.serialize_batch(fill_missing(batch, serde))
                if sample is not None:
                    sample.add(rows.column(0))
                task.add(rows)
            files = task.finish()
        except BaseException:
            task.abandon()
            raise
        if sample is None:
            return BulkLoadMessage(self.job_id, task_id, files)
        return BulkLoadMessage(self.job_id, task_id, files, sample.keys, sample.rows)

    def _split_created(self, messages: Sequence[BulkLoadMessage | None] | None) -> None:
        """Split the table this write created with one region into ``split_regions``: at the
        quantiles of the tasks' key samples in ``messages``, or uniformly (the first key byte, as
        ``newtable`` without a sample) when they hold too few distinct keys or there are none."""
        import storage

        regions = self.split_regions
        samples = [(m.sample, m.sample_rows) for m in messages or () if m is not None and m.sample is not None]
        keys = merged_split_keys(samples, regions) or uniform_split_keys(regions)
        conn = storage.connect(self.config.root)
        try:
            table = conn.table(self.config.table)
            for key in keys:
                table.split(key)
        finally:
            conn.close()
        self.split_regions = None

    def commit(self, messages: Sequence[BulkLoadMessage], receipt: bool = False) -> None:
        """Add every staged file to the table atomically (on the driver); ``receipt`` leaves the
        job's commit receipt (:func:`storage.engine.load_committed`) for a caller that may not
        hear the answer."""
        staged = [f for m in messages if m is not None for f in m.files]
        if self.split_regions is not None:
            try:
                self._split_created(messages)
            except BaseException:
                self._let_go()
                raise
        own = None
        if self.keeper is not None:
            try:  # a keeper that died (the driver lives) must not leave the job's folder looking stale now
                own = hold_staging(self._table_fs(), self.job_id)
            except TableLocked:
                pass  # the keeper holds it
        try:
            report = commit_load(self._table_fs(), self.job_id, staged, "overwrite" if self.overwrite else "append",
                                 receipt=receipt)
        finally:
            if own is not None:
                release_staging(self._table_fs(), self.job_id, own)
            self._let_go()
        _LOG.info("bulk load %s committed: %d files, %d cells into %d regions of %s", report.job_id,
                  report.files, report.cells, len(report.regions), self.config.table)
        try:  # the rows are in: the mapping they were written with goes with the table
            remember(self.config.root, self.config.table, self.config.conf, replace=self.overwrite or self.created)
        except Exception as exc:  # noqa: BLE001 - the load is committed; say why the mapping is not stored
            _LOG.warning("bulk load %s committed, but the mapping was not stored with table %s: %s",
                         report.job_id, self.config.table, exc)

    def abort(self, messages: Sequence[BulkLoadMessage]) -> None:
        """Delete everything the job staged, including failed attempts' files, and give back the
        job's staging lock."""
        try:
            abort_load(self._table_fs(), self.job_id)
            if self.split_regions is not None:  # the created table keeps its N regions, empty
                try:
                    self._split_created(None)
                except Exception as exc:  # noqa: BLE001 - the abort is done; say why the split is not
                    _LOG.warning("bulk load %s aborted; table %s it created keeps one region: %s",
                                 self.job_id, self.config.table, exc)
        finally:
            self._let_go()


def fill_missing(batch: pa.RecordBatch, serde) -> pa.RecordBatch:
    """Add null columns for mapped columns the DataFrame lacks (they write no cells)."""
    names = batch.schema.names
    missing = [f for f in serde.arrow_schema if f.name not in names]
    if not missing:
        return batch
    arrays = list(batch.columns) + [pa.nulls(batch.num_rows, f.type) for f in missing]
    return pa.RecordBatch.from_arrays(arrays, names=names + [f.name for f in missing])
