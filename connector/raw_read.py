"""Raw reads of the Spark sources: option ``hbase.spark.query.raw=true``.

HBase's raw scan (``Scan.setRaw(true)``, :mod:`storage.read.raw`) returns
cells, delete markers and the deleted cells they hide among them, several
per column, which a row of mapped columns cannot hold.  So a raw read is a
DataFrame of cells, one Spark row per cell, in cell order:

==============  ===========  ====================================================
column          type         value
==============  ===========  ====================================================
key column(s)   as mapped    the row key, decoded as the mapping's key columns
``family``      STRING       the column family
``qualifier``   BINARY       the qualifier (empty for a DeleteFamily marker)
``column``      STRING       the mapped column of ``family:qualifier`` (a ``cf:q``
                             column, or a whole-family column), else null
``timestamp``   BIGINT       the cell's timestamp (ms)
``type``        STRING       ``Put``, ``Delete``, ``DeleteColumn``, ``DeleteFamily``
``value``       BINARY       the stored bytes (empty for a marker)
==============  ===========  ====================================================

What is scanned: the families the mapping names, whole (a marker of a
mapped column, or a DeleteFamily, is shown even where no mapped column has
a cell), or the columns of ``hbase.mapreduce.scan.columns`` when given
(qualifiers allowed, as in any raw scan).  ``hbase.spark.query.maxVersions``
is HBase's raw ``VERSIONS`` (default: every version), the time range
options and ``filter`` (an HBase filter string, run on every cell, markers
included) apply in the engine.  Spark's own filters are all evaluated by
Spark (nothing is pushed: the engine's pushdown speaks of mapped columns),
and no aggregate is answered from the block indexes (a count of cells is
not a count of rows).  Both sources (``regionscan_python`` and the JVM
``regionscan``) read through the functions here.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from serde.mapping import ColumnKind
from storage import InvalidArgument
from storage.engine import CELL_TYPE_NAMES, redact_uri

from .explain import ScanPlan, save_plan
from .input_format import REMOTE_TOKEN, TableInputFormat
from .options import INPUT_TABLE, MAX_RESTARTS, PIN_SHARED, PIN_TTL, ROOT, SCAN_COLUMNS, SCAN_RAW, conf_bool, conf_int
from .record_reader import TableBatchRecordReader
from .source_config import SPARK_PIN_TTL, SourceConfig
from .splits import TableSplit

__all__ = ["RAW_FIELDS", "is_raw", "key_names", "output_names", "schema_ddl", "arrow_schema", "resolve_names",
           "input_format", "planned_splits", "raw_batches"]

RAW_FIELDS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("family", "STRING", pa.string()),
    ("qualifier", "BINARY", pa.binary()),
    ("column", "STRING", pa.string()),
    ("timestamp", "BIGINT", pa.int64()),
    ("type", "STRING", pa.string()),
    ("value", "BINARY", pa.binary()),
)
"""The cell columns of a raw read, after the key columns: (name, Spark DDL type, Arrow type)."""

_TYPE_CODES = pa.array(sorted(CELL_TYPE_NAMES), pa.int8())
_TYPE_TEXT = pa.array([CELL_TYPE_NAMES[c] for c in sorted(CELL_TYPE_NAMES)], pa.string())


def is_raw(config: SourceConfig) -> bool:
    """True when the read asks for a raw scan (``hbase.spark.query.raw`` / ``regionscan.scan.raw``)."""
    return conf_bool(config.conf, SCAN_RAW, False)


def key_names(config: SourceConfig) -> list[str]:
    """The mapping's row-key columns, in mapping order."""
    return [c.name for c in config.mapping().columns if c.kind in (ColumnKind.KEY, ColumnKind.KEY_PART)]


def output_names(config: SourceConfig) -> list[str]:
    """The raw DataFrame's columns: the key columns, then :data:`RAW_FIELDS`; a key
    column named like a cell column is refused (the two would be one column)."""
    keys = key_names(config)
    cells = [name for name, _, _ in RAW_FIELDS]
    clash = sorted({k for k in keys if k.lower() in cells})
    if clash:
        raise InvalidArgument(f"a raw read names its cell columns {cells}: rename the key column(s) {clash} "
                              "in the mapping")
    return keys + cells


def schema_ddl(config: SourceConfig) -> str:
    """The raw DataFrame's schema as a Spark DDL string."""
    serde = config.read_serde()
    ntz = config.timestamp_ntz
    keys = [f"`{n.replace('`', '``')}` {serde.column_type(n).ddl(ntz)}" for n in key_names(config)]
    output_names(config)  # the name check
    return ", ".join(keys + [f"`{name}` {ddl}" for name, ddl, _ in RAW_FIELDS])


def arrow_schema(config: SourceConfig, names: Sequence[str]) -> pa.Schema:
    """The Arrow schema Spark expects for ``names`` of a raw read."""
    cells = {name: t for name, _, t in RAW_FIELDS}
    keys = [n for n in names if n not in cells]
    key_types = config.spark_arrow_schema(keys) if keys else pa.schema([])
    return pa.schema([pa.field(n, cells[n]) if n in cells else key_types.field(n) for n in names])


def resolve_names(config: SourceConfig, wanted: Sequence[str] | None) -> list[str]:
    """``wanted`` (any case; None: the ``columns`` option's, else every column) as the raw
    read's own names, or one line naming the unknown."""
    known = {n.lower(): n for n in output_names(config)}
    if wanted is None:
        wanted = config.column_option()  # the columns option names a raw read's own columns
    if wanted is None:
        return list(known.values())
    missing = [str(n) for n in wanted if str(n).lower() not in known]
    if missing:
        raise InvalidArgument(f"columns {missing} are not in the raw read's columns ({list(known.values())})")
    return [known[str(n).lower()] for n in wanted]


def input_format(config: SourceConfig) -> TableInputFormat:
    """The input format of a raw read: the mapped families whole (or the given scan
    columns), the raw scan and the scan options (versions, time range, filter)."""
    conf = {k: v for k, v in config.conf.items() if k.startswith(("hbase.mapreduce.", "regionscan."))}
    conf[ROOT] = config.root
    conf[INPUT_TABLE] = config.table
    conf.setdefault(PIN_TTL, SPARK_PIN_TTL)  # a Spark read never releases its pins: let them expire,
    conf.setdefault(PIN_SHARED, "true")  # and plans of the same files share one
    conf[SCAN_RAW] = True
    if config.conf.get("token"):
        conf[REMOTE_TOKEN] = config.conf["token"]
    if not conf.get(SCAN_COLUMNS):
        families = sorted({c.family for c in config.mapping().columns if c.family is not None})
        if families:
            conf[SCAN_COLUMNS] = " ".join(families)
    if config.conf.get("filter"):
        conf["regionscan.scan.filter"] = config.conf["filter"]
    return TableInputFormat(conf)


def planned_splits(config: SourceConfig) -> list[TableSplit]:
    """The raw read's splits, its plan summary saved for ``connector.explain(df)``."""
    fmt = input_format(config)
    splits = fmt.get_splits()
    spec = fmt.scan_spec()
    versions = "every version" if spec.request.max_versions is None else f"{spec.request.max_versions} put(s) per column"
    save_plan(config, ScanPlan(
        table=config.table, root=redact_uri(config.root), serde=config.serde_name, columns=output_names(config),
        scan_columns=[c.decode() for c in spec.request.columns or ()], key_ranges=None, point_gets=0,
        engine_filter=spec.request.filter, pushed=[], residual=[],
        notes=[f"raw scan (hbase.spark.query.raw): delete markers and deleted cells, {versions}; "
               "Spark evaluates every filter"],
        splits=len(splits), regions=sorted({p.region_id for s in splits for p in s.regions})))
    return splits


def _mapped_column(config: SourceConfig, families: pa.Array, qualifiers: pa.Array) -> pa.Array:
    """The mapped column name of each cell (null where none maps it): a ``cf:q``
    column by its exact name, else a whole-family column of the cell's family."""
    exact: dict[bytes, str] = {}
    whole: dict[bytes, str] = {}
    for c in config.mapping().columns:
        if c.kind == ColumnKind.CELL and c.family is not None:
            exact.setdefault(c.family.encode() + b":" + (c.qualifier or "").encode(), c.name)
        elif c.kind == ColumnKind.FAMILY and c.family is not None:
            whole.setdefault(c.family.encode(), c.name)
    out = pa.nulls(len(families), pa.string())
    if exact:
        specs = list(exact)
        joined = pc.binary_join_element_wise(families, qualifiers, b":")
        at = pc.index_in(joined, value_set=pa.array(specs, pa.binary()))
        out = pc.take(pa.array([exact[s] for s in specs], pa.string()), at)
    if whole:
        names = list(whole)
        at = pc.index_in(families, value_set=pa.array(names, pa.binary()))
        out = pc.coalesce(out, pc.take(pa.array([whole[n] for n in names], pa.string()), at))
    return out


def _cells_to_output(config: SourceConfig, serde, cells: pa.RecordBatch, names: list[str],
                     target: pa.Schema) -> pa.RecordBatch:
    """One cell batch as the raw DataFrame's columns ``names`` (vectorized: the SerDe
    decodes the keys, Arrow kernels build the rest)."""
    keys = [n for n in names if n not in _CELL_NAMES]
    decoded = {}
    if keys:
        rows = pa.RecordBatch.from_arrays([cells.column("row")], names=["key"])
        typed = serde.deserialize_batch(rows, keys)
        decoded = {n: typed.column(i) for i, n in enumerate(keys)}
    arrays = []
    for name, field in zip(names, target):
        if name in decoded:
            array = decoded[name]
        elif name == "family":
            array = cells.column("family").cast(pa.string())
        elif name == "qualifier":
            array = cells.column("qualifier")
        elif name == "column":
            array = _mapped_column(config, cells.column("family"), cells.column("qualifier"))
        elif name == "timestamp":
            array = cells.column("timestamp")
        elif name == "type":
            array = pc.take(_TYPE_TEXT, pc.index_in(cells.column("type").cast(pa.int8()), value_set=_TYPE_CODES))
        else:
            array = cells.column("value")
        arrays.append(array if array.type == field.type else array.cast(field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


_CELL_NAMES = frozenset(name for name, _, _ in RAW_FIELDS)


def raw_batches(config: SourceConfig, splits: Sequence[TableSplit], names: Sequence[str], target: pa.Schema,
                limit: int | None = None, stats: dict | None = None) -> Iterator[pa.RecordBatch]:
    """The raw cells of ``splits``, one after another, as batches of ``target`` (the
    columns ``names``), at most ``limit`` cells; scan counters are added to ``stats``."""
    names = list(names)
    key_serde = config.with_columns(key_names(config)).read_serde() if key_names(config) else config.read_serde()
    remaining = limit
    for split in splits:
        reader = TableBatchRecordReader(conf_int(config.conf, MAX_RESTARTS, 3, minimum=0),
                                        {"token": config.conf["token"]} if config.conf.get("token") else None)
        reader.initialize(split)
        try:
            for cells in reader:
                if remaining is not None:
                    if remaining <= 0:
                        return
                    cells = cells.slice(0, min(cells.num_rows, remaining))
                    remaining -= cells.num_rows
                if not names:
                    yield cells.select([])
                else:
                    yield _cells_to_output(config, key_serde, cells, names, target)
        finally:
            if stats is not None:
                for key, value in reader.get_counters().items():
                    if isinstance(value, (int, float)):
                        stats[key] = stats.get(key, 0) + value
            reader.close()
